// The reference evaluator ("oracle"): decides one connection straight from the
// specs (NetworkPolicy; ClusterNetworkPolicy's Admin and Baseline tiers around
// it), rule by rule, with no shortcuts. It reads the policies
// of every kind through the same seam as the compiler (src/kinds: which pods a
// policy targets, which rules it adds, where each comes from) and shares
// nothing else with the compiler or the renderer on purpose: tests compare the two.
import type {
  ContributedPolicy,
  ContributedRule,
  OrderedTier,
  PolicyKind,
  TieredPeer,
  TieredPolicy,
  TieredPort,
  TieredRule,
} from '../kinds/kind.ts';
import { POLICY_KINDS, tieredPolicies } from '../kinds/registry.ts';
import { cidrContains, formatIP, parseCIDR, parseIP } from '../model/ip.ts';
import { selectorMatches } from '../model/selector.ts';
import { isActivePod, objectKey } from '../model/types.ts';
import { isolationDenial } from '../kinds/tenancy-describe.ts';
import type { ClusterPolicyAction, ClusterState, Direction, Family, Peer, Pod, PortSpec, Protocol } from '../model/types.ts';

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

/**
 * Where a direction's verdict was decided: a rule of the Admin or Baseline
 * tier (Accept or Deny), the NetworkPolicy (allow-list) tier isolating the
 * pod, or the default (allowed: nothing decided, a Baseline Pass, the pod's
 * own node, or a side that is not a local pod).
 */
export type DecidingTier = 'admin' | 'networkpolicy' | 'baseline' | 'default';

/** A rule of an ordered tier (ClusterNetworkPolicy) that decided or passed. */
export interface TieredRuleRef {
  /** The policy as a person names it, e.g. `ClusterNetworkPolicy deny-metadata`. */
  readonly policy: string;
  /** Kind of the object the rule comes from. */
  readonly kind: string;
  readonly tier: OrderedTier;
  readonly priority: number;
  readonly direction: Direction;
  /** Index of the rule in its object. */
  readonly rule: number;
  /** The rule's name ('' when not given). */
  readonly name: string;
  readonly action: ClusterPolicyAction;
  /** e.g. `ClusterNetworkPolicy deny-metadata (Admin tier, priority 10) egress rule 0 "block-imds": Deny`. */
  readonly description: string;
  /** What of the rule is not enforced as written (domainNames, fail closed). */
  readonly notEnforced: string | undefined;
}

export interface DirectionVerdict {
  readonly allowed: boolean;
  /** The endpoint is a pod selected by >= 1 allow-list policy (NetworkPolicy tier) for this direction. */
  readonly isolated: boolean;
  /** The allow-list policies selecting it for this direction (ns/name for NetworkPolicies), sorted. */
  readonly policies: readonly string[];
  /** Every rule that allows this connection in the deciding tier (a tiered Accept: that rule), sorted. */
  readonly allowedBy: readonly RuleRef[];
  /** One human sentence. */
  readonly reason: string;
  /** The tier that decided. */
  readonly tier: DecidingTier;
  /** The Accept or Deny rule that decided, when tier is 'admin' or 'baseline'. */
  readonly decidedBy: TieredRuleRef | undefined;
  /** Pass rules that handed the connection on, in evaluation order (at most one per ordered tier). */
  readonly passed: readonly TieredRuleRef[];
  /** Ordered-tier policies whose subject selects the pod and which have rules for this direction, in evaluation order. */
  readonly clusterPolicies: readonly string[];
  /** `rule description: note` of each rule reached whose object is not enforced as written. */
  readonly notEnforced: readonly string[];
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
  /** Policies of the ordered tiers, in evaluation order (admin, then baseline; compareTiered). */
  readonly tiered: readonly TieredPolicy[];
  readonly family: Family;
  readonly protocol: Protocol;
  readonly port: number;
  readonly src: Side;
  readonly dst: Side;
  /** --allow-pod-to-node (see podToNode). */
  readonly allowPodToNode: boolean;
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

function list(xs: readonly string[]): string {
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

// --- ordered tiers (ClusterNetworkPolicy Admin and Baseline) ---

function namespaceLabels(c: Conn, name: string): Readonly<Record<string, string>> | undefined {
  return c.state.namespaces.find((n) => n.name === name)?.labels;
}

/** The subject: namespace AND pod selector; `pod` is an active pod (hostNetwork pods are never subjects). */
function subjectSelects(c: Conn, pol: TieredPolicy, pod: Pod): boolean {
  // An unknown namespace has no labels we can trust: it matches no selector.
  const labels = namespaceLabels(c, pod.namespace);
  return (
    labels !== undefined &&
    selectorMatches(pol.subject.namespaceSelector, labels) &&
    selectorMatches(pol.subject.podSelector, pod.labels)
  );
}

function tieredPeerMatches(c: Conn, peer: TieredPeer, other: Side): boolean {
  if (peer.kind === 'all') return true;
  if (other.ip === undefined) return false;
  const address = other.ip;
  switch (peer.kind) {
    case 'pods': {
      // Active pods with pod semantics only: hostNetwork pods are never pod peers.
      const pod = other.pod;
      if (pod === undefined) return false;
      const labels = namespaceLabels(c, pod.namespace);
      return (
        labels !== undefined && selectorMatches(peer.namespaceSelector, labels) && selectorMatches(peer.podSelector, pod.labels)
      );
    }
    case 'networks': {
      // Any address, pods' included.
      const ip = parseIP(address);
      return (
        ip !== undefined &&
        peer.cidrs.some((text) => {
          const cidr = parseCIDR(text);
          return cidr.ok && cidrContains(cidr.cidr, ip);
        })
      );
    }
    case 'nodes':
      return c.state.nodes.some((n) => n.addresses.includes(address) && selectorMatches(peer.nodeSelector, n.labels ?? {}));
  }
}

function tieredPortMatches(c: Conn, p: TieredPort): boolean {
  if (p.kind === 'named') {
    // On the destination pod: the local pod for ingress, the peer for egress; an address has no names.
    return c.dst.pod?.ports.some((cp) => cp.name === p.name && cp.protocol === c.protocol && cp.port === c.port) ?? false;
  }
  if (p.protocol !== c.protocol) return false;
  if (p.port === undefined) return true;
  return c.port >= p.port && c.port <= (p.endPort ?? p.port);
}

function tieredRuleMatches(c: Conn, dir: Direction, rule: TieredRule): boolean {
  const other = dir === 'ingress' ? c.src : c.dst;
  return (
    rule.peers.some((p) => tieredPeerMatches(c, p, other)) &&
    (rule.ports === undefined || rule.ports.some((p) => tieredPortMatches(c, p)))
  );
}

function tieredRef(pol: TieredPolicy, rule: TieredRule): TieredRuleRef {
  const o = rule.origin;
  return {
    policy: pol.origin.label,
    kind: pol.origin.kind,
    tier: pol.tier,
    priority: pol.priority,
    direction: o.direction,
    rule: o.index,
    name: o.name,
    action: rule.action,
    description: o.description,
    notEnforced: rule.notEnforced,
  };
}

function asRuleRef(r: TieredRuleRef): RuleRef {
  return { policy: r.policy, direction: r.direction, rule: r.rule, kind: r.kind, description: r.description };
}

type TierOutcome = { readonly kind: 'none' } | { readonly kind: 'matched'; readonly ref: TieredRuleRef };

/**
 * One ordered tier, as the API says: policies in order, the rules of each in
 * order; the first rule whose peers and ports match decides (Accept, Deny) or
 * passes (skips the rest of the tier). Notes of every rule reached go to `notes`.
 */
function runTier(c: Conn, dir: Direction, pod: Pod, tier: OrderedTier, notes: string[]): TierOutcome {
  for (const pol of c.tiered) {
    if (pol.tier !== tier || !subjectSelects(c, pol, pod)) continue;
    for (const rule of dir === 'ingress' ? pol.ingress : pol.egress) {
      if (rule.notEnforced !== undefined) notes.push(`${rule.origin.description}: ${rule.notEnforced}`);
      if (tieredRuleMatches(c, dir, rule)) return { kind: 'matched', ref: tieredRef(pol, rule) };
    }
  }
  return { kind: 'none' };
}

function connText(c: Conn, dir: Direction): string {
  const what = `port ${c.port}/${c.protocol}`;
  return dir === 'egress'
    ? `egress of ${c.src.label} to ${c.dst.label} on ${what}`
    : `ingress to ${c.dst.label} from ${c.src.label} on ${what}`;
}

function passText(r: TieredRuleRef): string {
  return `passed by ${r.description} to the ${r.tier === 'admin' ? 'NetworkPolicy tier' : 'default'}`;
}

function judge(c: Conn, dir: Direction): DirectionVerdict {
  const self = dir === 'egress' ? c.src : c.dst;
  const role = dir === 'egress' ? 'source' : 'destination';
  if (self.pod === undefined) {
    const what =
      self.inactive === undefined ? `the ${role} ${self.label} is not a pod` : `the ${role} ${self.label} ${self.inactive}`;
    return {
      allowed: true,
      isolated: false,
      policies: [],
      allowedBy: [],
      reason: `${what}: ${dir} is not restricted.`,
      tier: 'default',
      decidedBy: undefined,
      passed: [],
      clusterPolicies: [],
      notEnforced: [],
    };
  }
  const pod = self.pod;
  const selecting = c.allowList.filter((p) => selects(p, pod, dir));
  const policies = selecting.map((p) => p.origin.label).sort();
  const checks = selecting.flatMap((p) => (dir === 'ingress' ? p.ingress : p.egress).map((r) => checkRule(c, p, dir, r)));
  const npAllowedBy = checks
    .filter((k) => !k.invalid && k.peer && k.port)
    .map((k) => k.ref)
    .sort((a, b) => (a.policy < b.policy ? -1 : a.policy > b.policy ? 1 : a.rule - b.rule));
  const isolated = selecting.length > 0;
  const clusterPolicies = c.tiered
    .filter((p) => (dir === 'ingress' ? p.ingress : p.egress).length > 0 && subjectSelects(c, p, pod))
    .map((p) => p.origin.label);
  const notEnforced: string[] = [];
  const passed: TieredRuleRef[] = [];
  const base = { isolated, policies, clusterPolicies, notEnforced, passed };

  // Kubelet probes and other traffic from the pod's own node always pass
  // (the node's own traffic never reaches the filtered hooks): ahead of every tier.
  const node = dir === 'ingress' ? nodeAddressOf(c, pod, c.src.ip) : undefined;
  if (node !== undefined) {
    return {
      ...base,
      allowed: true,
      allowedBy: npAllowedBy,
      tier: 'default',
      decidedBy: undefined,
      reason: `${c.src.ip} is an address of ${self.label}'s node ${node}: traffic from a pod's own node is always allowed.`,
    };
  }
  // With --allow-pod-to-node, egress to the pod's own node is accepted before the dispatch: ahead of every tier too.
  const toNode = podToNode(c, pod, dir);
  if (toNode !== undefined) {
    return { ...base, allowed: true, allowedBy: npAllowedBy, tier: 'default', decidedBy: undefined, reason: toNode };
  }

  const decided = (ref: TieredRuleRef, lead: string, tail: string): DirectionVerdict => {
    const allowed = ref.action === 'Accept';
    return {
      ...base,
      allowed,
      allowedBy: allowed ? [asRuleRef(ref)] : [],
      tier: ref.tier,
      decidedBy: ref,
      reason: `${lead}${connText(c, dir)} ${allowed ? 'accepted' : 'denied'} by ${ref.description}${tail}.`,
    };
  };

  // Admin tier: Accept and Deny are final, Pass goes on to the NetworkPolicy tier.
  const admin = runTier(c, dir, pod, 'admin', notEnforced);
  const lead: string[] = [];
  if (admin.kind === 'matched') {
    if (admin.ref.action !== 'Pass') {
      const skipped = isolated ? ` (the NetworkPolicy tier, ${list(policies)}, is not reached)` : '';
      return decided(admin.ref, '', skipped);
    }
    passed.push(admin.ref);
    lead.push(passText(admin.ref));
  }
  const prefix = (): string => (lead.length === 0 ? '' : `${lead.join('; ')}; `);

  // NetworkPolicy (allow-list) tier: an isolated pod's verdict is final here.
  if (isolated) {
    if (npAllowedBy.length > 0) {
      return {
        ...base,
        allowed: true,
        allowedBy: npAllowedBy,
        tier: 'networkpolicy',
        decidedBy: undefined,
        reason: `${prefix()}${self.label} is isolated for ${dir} by ${list(policies)}; allowed by ${list(npAllowedBy.map(ruleName))}.`,
      };
    }
    const tenancy = selecting.flatMap((p) => {
      const why = isolationDenial(c.state, p, dir === 'ingress' ? c.src : c.dst);
      return why === undefined ? [] : [why];
    });
    const denial = tenancy.length > 0 ? `denied: ${tenancy.join('; ')}; ` : '';
    return {
      ...base,
      allowed: false,
      allowedBy: npAllowedBy,
      tier: 'networkpolicy',
      decidedBy: undefined,
      reason: `${prefix()}${denial}${self.label} is isolated for ${dir} by ${list(policies)}; ${denyDetail(c, dir, checks, policies.length)}.`,
    };
  }

  // Baseline tier, for pods no allow-list policy isolates: Accept and Deny are
  // final, Pass and no match end in the default.
  // With ClusterNetworkPolicies around, say which tier does not isolate it.
  const notIsolated =
    clusterPolicies.length === 0
      ? `no policy selects ${self.label} for ${dir}: not isolated`
      : `no policy of the NetworkPolicy tier selects ${self.label} for ${dir}: not isolated`;
  const baseline = runTier(c, dir, pod, 'baseline', notEnforced);
  if (baseline.kind === 'matched' && baseline.ref.action !== 'Pass') {
    return decided(baseline.ref, `${prefix()}${notIsolated}; `, '');
  }
  if (baseline.kind === 'matched') {
    passed.push(baseline.ref);
    lead.push(notIsolated, passText(baseline.ref));
    return {
      ...base,
      allowed: true,
      allowedBy: [],
      tier: 'default',
      decidedBy: undefined,
      reason: `${lead.join('; ')}: allowed.`,
    };
  }
  const none =
    clusterPolicies.length === 0
      ? ''
      : passed.length === 0
        ? `; no rule of ${list(clusterPolicies)} matched`
        : '; no later rule matched';
  return {
    ...base,
    allowed: true,
    allowedBy: [],
    tier: 'default',
    decidedBy: undefined,
    reason: `${prefix()}${notIsolated}${none}.`,
  };
}

/**
 * --allow-pod-to-node: egress from a pod to an address of its own node is
 * allowed whatever isolates it (the reason), as the Kubernetes docs say.
 * Off (the default) such egress is judged like any other.
 */
function podToNode(c: Conn, pod: Pod, dir: Direction): string | undefined {
  if (!c.allowPodToNode || dir !== 'egress') return undefined;
  const node = nodeAddressOf(c, pod, c.dst.ip);
  if (node === undefined) return undefined;
  return `${c.dst.ip} is an address of ${objectKey(pod)}'s node ${node}: traffic to a pod's own node is allowed (--allow-pod-to-node).`;
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
  opts?: { family?: Family; kinds?: readonly PolicyKind[]; allowPodToNode?: boolean },
): Verdict {
  const ipFamily = [from, to].flatMap((e) => (e.kind === 'ip' ? [parseIP(e.ip)?.family] : [])).find((f) => f !== undefined);
  const family: Family = opts?.family ?? ipFamily ?? 4;
  const kinds = opts?.kinds ?? POLICY_KINDS;
  const allowList: ContributedPolicy[] = [];
  for (const kind of kinds) {
    switch (kind.tier) {
      case 'ordered':
        break;
      case 'allow-list':
        allowList.push(...kind.policies(state));
        break;
    }
  }
  const tiered = tieredPolicies(state, kinds);
  const c: Conn = {
    state,
    allowList,
    tiered,
    family,
    protocol,
    port,
    src: side(from, family),
    dst: side(to, family),
    allowPodToNode: opts?.allowPodToNode ?? false,
  };
  const egress = judge(c, 'egress');
  const ingress = judge(c, 'ingress');
  return { allowed: egress.allowed && ingress.allowed, family, protocol, port, egress, ingress };
}
