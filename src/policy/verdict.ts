// The reference evaluator ("oracle"): decides one connection straight from the
// NetworkPolicy spec, rule by rule, with no shortcuts. It reads the policies
// of every kind through the same seam as the compiler (src/kinds: which pods a
// policy targets, which rules it adds, where each comes from) and shares
// nothing else with the compiler or the renderer on purpose: tests compare the two.
import type { ContributedPolicy, ContributedRule, PolicyKind } from '../kinds/kind.ts';
import { POLICY_KINDS } from '../kinds/registry.ts';
import { cidrContains, formatIP, parseCIDR, parseIP } from '../model/ip.ts';
import { selectorMatches } from '../model/selector.ts';
import { isActivePod, objectKey } from '../model/types.ts';
import { isolationDenial } from '../kinds/tenancy-describe.ts';
import type { ClusterState, Direction, Family, Peer, Pod, PortSpec, Protocol } from '../model/types.ts';

export type Endpoint = { readonly kind: 'pod'; readonly pod: Pod } | { readonly kind: 'ip'; readonly ip: string };

export interface RuleRef {
  /** The policy as a person names it (ns/name for a NetworkPolicy). */
  readonly policy: string;
  readonly direction: Direction;
  /** Index of the rule in its object. */
  readonly rule: number;
  /** Kind of the object the rule comes from. */
  readonly kind: string;
  /** The rule as a person names it: `ns/name ingress[0]`, or the cause of an implicit allowance. */
  readonly description: string;
}

export interface DirectionVerdict {
  readonly allowed: boolean;
  /** The endpoint is a pod selected by >= 1 policy for this direction. */
  readonly isolated: boolean;
  /** The policies selecting it for this direction (ns/name for NetworkPolicies), sorted. */
  readonly policies: readonly string[];
  /** Every rule that allows this connection, sorted. */
  readonly allowedBy: readonly RuleRef[];
  /** One human sentence. */
  readonly reason: string;
}

export interface Verdict {
  readonly allowed: boolean;
  readonly family: Family;
  readonly protocol: Protocol;
  readonly port: number;
  readonly egress: DirectionVerdict;
  readonly ingress: DirectionVerdict;
}

/** One side of the connection as policy sees it. */
interface Side {
  readonly label: string;
  /** Set only for active pods: the others have no pod semantics. */
  readonly pod: Pod | undefined;
  /** The address of the requested family, if the endpoint has one. */
  readonly ip: string | undefined;
  /** Why the endpoint has no pod semantics, when it is a pod. */
  readonly inactive: string | undefined;
}

interface Conn {
  readonly state: ClusterState;
  /** Policies of the allow-list tier (NetworkPolicy semantics), kind by kind. */
  readonly allowList: readonly ContributedPolicy[];
  readonly family: Family;
  readonly protocol: Protocol;
  readonly port: number;
  readonly src: Side;
  readonly dst: Side;
}

export function ruleName(r: RuleRef): string {
  return r.description;
}

/** The address a pod uses for one family. */
export function podAddress(pod: Pod, family: Family): string | undefined {
  return pod.ips.find((ip) => parseIP(ip)?.family === family);
}

function inactiveWhy(p: Pod): string | undefined {
  if (p.hostNetwork) return 'is a hostNetwork pod';
  if (p.ips.length === 0) return 'has no IP';
  if (p.phase === 'Succeeded' || p.phase === 'Failed') return `has finished (${p.phase})`;
  return undefined;
}

function side(e: Endpoint, family: Family): Side {
  if (e.kind === 'ip') {
    const ip = parseIP(e.ip);
    return { label: e.ip, pod: undefined, ip: ip?.family === family ? formatIP(ip) : undefined, inactive: undefined };
  }
  const ip = podAddress(e.pod, family);
  const label = objectKey(e.pod);
  return isActivePod(e.pod)
    ? { label, pod: e.pod, ip, inactive: undefined }
    : { label, pod: undefined, ip, inactive: inactiveWhy(e.pod) };
}

function selects(pol: ContributedPolicy, pod: Pod, dir: Direction): boolean {
  return pol.types[dir] && pol.namespace === pod.namespace && selectorMatches(pol.podSelector, pod.labels);
}

function peerMatches(c: Conn, pol: ContributedPolicy, peer: Peer, other: Side): boolean {
  if (other.ip === undefined) return false;
  if (peer.kind === 'ipBlock') {
    const ip = parseIP(other.ip);
    const cidr = parseCIDR(peer.cidr);
    if (ip === undefined || !cidr.ok || !cidrContains(cidr.cidr, ip)) return false;
    return !peer.except.some((e) => {
      const ex = parseCIDR(e);
      return ex.ok && cidrContains(ex.cidr, ip);
    });
  }
  const pod = other.pod;
  if (pod === undefined) return false;
  if (peer.namespaceSelector === undefined) {
    if (pod.namespace !== pol.namespace) return false;
  } else {
    // An unknown namespace has no labels we can trust: it matches no selector.
    const ns = c.state.namespaces.find((n) => n.name === pod.namespace);
    if (ns === undefined || !selectorMatches(peer.namespaceSelector, ns.labels)) return false;
  }
  return peer.podSelector === undefined || selectorMatches(peer.podSelector, pod.labels);
}

function portMatches(c: Conn, spec: PortSpec): boolean {
  if (spec.protocol !== c.protocol) return false;
  if (spec.port === undefined) return true;
  if (typeof spec.port === 'number') {
    return spec.endPort === undefined ? c.port === spec.port : c.port >= spec.port && c.port <= spec.endPort;
  }
  // Named ports are resolved on the destination pod (the target for ingress,
  // the peer for egress); an address that is not an active pod has no names.
  const named = spec.port;
  return c.dst.pod?.ports.some((cp) => cp.name === named && cp.protocol === c.protocol && cp.port === c.port) ?? false;
}

interface RuleCheck {
  readonly ref: RuleRef;
  readonly invalid: boolean;
  readonly peer: boolean;
  readonly port: boolean;
}

function checkRule(c: Conn, pol: ContributedPolicy, dir: Direction, rule: ContributedRule): RuleCheck {
  const other = dir === 'ingress' ? c.src : c.dst;
  const peer = rule.peers === undefined || rule.peers.some((p) => peerMatches(c, pol, p, other));
  const port = rule.ports === undefined || rule.ports.some((s) => portMatches(c, s));
  const o = rule.origin;
  const ref: RuleRef = {
    policy: pol.origin.label,
    direction: dir,
    rule: o.index,
    kind: o.policy.kind,
    description: o.description,
  };
  return { ref, invalid: rule.invalid, peer, port };
}

function nodeAddressOf(c: Conn, pod: Pod, ip: string | undefined): string | undefined {
  if (ip === undefined || pod.nodeName === undefined) return undefined;
  const node = c.state.nodes.find((n) => n.name === pod.nodeName);
  return node?.addresses.includes(ip) === true ? node.name : undefined;
}

/** At most this many names in a sentence: a pod selected by thousands of policies must not print them all. */
export const MAX_NAMES = 20;

/** `a, b and c`; past MAX_NAMES, `a, b, ... t and 980 more`. */
function list(xs: readonly string[]): string {
  if (xs.length > MAX_NAMES) return `${xs.slice(0, MAX_NAMES).join(', ')} and ${xs.length - MAX_NAMES} more`;
  if (xs.length <= 1) return xs.join('');
  return `${xs.slice(0, -1).join(', ')} and ${xs[xs.length - 1]}`;
}

function denyDetail(c: Conn, dir: Direction, checks: readonly RuleCheck[], policyCount: number): string {
  const valid = checks.filter((k) => !k.invalid);
  const invalid = checks.length - valid.length;
  const other = dir === 'ingress' ? c.src : c.dst;
  const what = `${c.port}/${c.protocol}`;
  const inv = invalid > 0 ? ` (${invalid} invalid rule${invalid > 1 ? 's' : ''} allow${invalid > 1 ? '' : 's'} nothing)` : '';
  const their = policyCount === 1 ? 'its' : 'their';
  if (valid.length === 0) {
    return checks.length === 0 ? `${their} ${dir} rules are empty (deny all)` : `none of ${their} ${dir} rules is valid${inv}`;
  }
  const peerHits = valid.filter((k) => k.peer);
  const portHits = valid.filter((k) => k.port);
  if (peerHits.length > 0 && portHits.length === 0) {
    return `no ${dir} rule matched: port ${what} is outside every rule's ports${inv}`;
  }
  if (peerHits.length === 0 && portHits.length > 0) {
    const noIP = other.ip === undefined ? ` (it has no IPv${c.family} address)` : '';
    return `no ${dir} rule matched: ${other.label}${noIP} matches no rule's ${dir === 'ingress' ? 'from' : 'to'} peers${inv}`;
  }
  if (peerHits.length === 0) return `no ${dir} rule matched: neither ${other.label} nor port ${what} matches any rule${inv}`;
  return `no ${dir} rule matched both ${other.label} and port ${what}${inv}`;
}

function judge(c: Conn, dir: Direction): DirectionVerdict {
  const self = dir === 'egress' ? c.src : c.dst;
  const role = dir === 'egress' ? 'source' : 'destination';
  if (self.pod === undefined) {
    const what =
      self.inactive === undefined ? `the ${role} ${self.label} is not a pod` : `the ${role} ${self.label} ${self.inactive}`;
    return { allowed: true, isolated: false, policies: [], allowedBy: [], reason: `${what}: ${dir} is not restricted.` };
  }
  const pod = self.pod;
  const selecting = c.allowList.filter((p) => selects(p, pod, dir));
  const policies = selecting.map((p) => p.origin.label).sort();
  const checks = selecting.flatMap((p) => (dir === 'ingress' ? p.ingress : p.egress).map((r) => checkRule(c, p, dir, r)));
  const allowedBy = checks
    .filter((k) => !k.invalid && k.peer && k.port)
    .map((k) => k.ref)
    .sort((a, b) => (a.policy < b.policy ? -1 : a.policy > b.policy ? 1 : a.rule - b.rule));
  const isolated = selecting.length > 0;

  // Kubelet probes and other traffic from the pod's own node always pass.
  const node = dir === 'ingress' ? nodeAddressOf(c, pod, c.src.ip) : undefined;
  if (node !== undefined) {
    return {
      allowed: true,
      isolated,
      policies,
      allowedBy,
      reason: `${c.src.ip} is an address of ${self.label}'s node ${node}: traffic from a pod's own node is always allowed.`,
    };
  }
  if (!isolated)
    return { allowed: true, isolated, policies, allowedBy, reason: `no policy selects ${self.label} for ${dir}: not isolated.` };
  if (allowedBy.length > 0) {
    return {
      allowed: true,
      isolated,
      policies,
      allowedBy,
      reason: `${self.label} is isolated for ${dir} by ${list(policies)}; allowed by ${list(allowedBy.map(ruleName))}.`,
    };
  }
  const tenancy = selecting.flatMap((p) => {
    const why = isolationDenial(c.state, p, dir === 'ingress' ? c.src : c.dst);
    return why === undefined ? [] : [why];
  });
  const lead = tenancy.length > 0 ? `denied: ${tenancy.join('; ')}; ` : '';
  return {
    allowed: false,
    isolated,
    policies,
    allowedBy,
    reason: `${lead}${self.label} is isolated for ${dir} by ${list(policies)}; ${denyDetail(c, dir, checks, policies.length)}.`,
  };
}

/**
 * Is a connection from `from` to `to` on protocol/port allowed? Egress is judged
 * at the source, ingress at the destination, each only when that side is an
 * active pod. `family` (default: that of an IP endpoint, else 4) picks the pod
 * addresses; an endpoint without an address of that family matches no peer.
 */
export function verdict(
  state: ClusterState,
  from: Endpoint,
  to: Endpoint,
  protocol: Protocol,
  port: number,
  opts?: { family?: Family; kinds?: readonly PolicyKind[] },
): Verdict {
  const ipFamily = [from, to].flatMap((e) => (e.kind === 'ip' ? [parseIP(e.ip)?.family] : [])).find((f) => f !== undefined);
  const family: Family = opts?.family ?? ipFamily ?? 4;
  const allowList: ContributedPolicy[] = [];
  for (const kind of opts?.kinds ?? POLICY_KINDS) {
    switch (kind.tier) {
      case 'ordered':
        break;
      case 'allow-list':
        allowList.push(...kind.policies(state));
        break;
    }
  }
  const c: Conn = { state, allowList, family, protocol, port, src: side(from, family), dst: side(to, family) };
  const egress = judge(c, 'egress');
  const ingress = judge(c, 'ingress');
  return { allowed: egress.allowed && ingress.allowed, family, protocol, port, egress, ingress };
}
