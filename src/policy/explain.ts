// Human and JSON renderings of a Verdict, and the parsing of the user's
// endpoint and port text that leads to one. Pure: no I/O.
import { formatIP, parseIP } from '../model/ip.ts';
import { isActivePod, objectKey, PROTOCOLS } from '../model/types.ts';
import type { ClusterState, Direction, Family, Protocol } from '../model/types.ts';
import { MAX_NAMES, podAddress, ruleName, verdict } from './verdict.ts';
import type { DecidingTier, DirectionVerdict, Endpoint, TieredRuleRef, Verdict } from './verdict.ts';

export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

/**
 * `NS/POD` or an IP literal. A pod's address resolves to that pod (an active
 * one first: a finished pod's address may have been reused); an address of
 * several pods at once (hostNetwork pods share their node's) or of none stays
 * an address.
 */
export function parseEndpoint(state: ClusterState, text: string): Parsed<Endpoint> {
  const t = text.trim();
  const ip = parseIP(t);
  if (ip !== undefined) {
    const canonical = formatIP(ip);
    const owners = state.pods.filter((p) => p.ips.includes(canonical));
    const active = owners.filter(isActivePod);
    if (active.length > 1) {
      return {
        ok: false,
        error: `${canonical} is the address of several running pods (${active.map(objectKey).join(', ')}): name one as NS/POD`,
      };
    }
    const only = active[0] ?? (owners.length === 1 ? owners[0] : undefined);
    return { ok: true, value: only === undefined ? { kind: 'ip', ip: canonical } : { kind: 'pod', pod: only } };
  }
  const m = /^([^/\s]+)\/([^/\s]+)$/.exec(t);
  if (m === null) return { ok: false, error: `"${text}" is neither NS/POD nor an IP address` };
  const [, ns, name] = m;
  const pod = state.pods.find((p) => p.namespace === ns && p.name === name);
  if (pod !== undefined) return { ok: true, value: { kind: 'pod', pod } };
  const nsKnown = state.namespaces.some((n) => n.name === ns) || state.pods.some((p) => p.namespace === ns);
  return { ok: false, error: nsKnown ? `pod ${ns}/${name} not found` : `pod ${ns}/${name} not found (no namespace ${ns})` };
}

/** `PORT[/PROTO]`: protocol TCP by default, case-insensitive. */
export function parsePortProto(text: string): Parsed<{ readonly port: number; readonly protocol: Protocol }> {
  const m = /^(\d+)(?:\/([A-Za-z]+))?$/.exec(text.trim());
  if (m === null) return { ok: false, error: `"${text}" is not PORT[/PROTO] (e.g. 80, 53/udp)` };
  const port = Number(m[1]);
  if (!Number.isInteger(port) || port < 1 || port > 65535) return { ok: false, error: `port ${m[1]} is outside 1-65535` };
  const protoText = (m[2] ?? 'TCP').toUpperCase();
  const protocol = PROTOCOLS.find((p) => p === protoText);
  if (protocol === undefined) return { ok: false, error: `unknown protocol "${m[2] ?? ''}": use TCP, UDP or SCTP` };
  return { ok: true, value: { port, protocol } };
}

/** The parameters of an explain question as the user typed them (CLI flags, /debug/explain query). */
export interface ExplainParams {
  readonly from: string;
  readonly to: string;
  readonly port: string;
  /** `4` or `6`; undefined when not given. */
  readonly family: string | undefined;
}

/** An explain question, checked: the endpoints are still text (they need the cluster state). */
export interface ExplainQuery {
  readonly from: string;
  readonly to: string;
  readonly port: number;
  readonly protocol: Protocol;
  readonly family: Family;
}

/** Which parameter a problem is about, to name it as the caller spells it (`--from`, `from`). */
export type ExplainParam = 'from' | 'to' | 'port' | 'family';

export type Checked<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly problems: readonly { readonly param: ExplainParam; readonly message: string }[] };

/**
 * The address family of the question. An address given on either side fixes
 * it (a pod named by one of its addresses is looked at in that family); pods
 * named NS/POD alone use `family`, default 4. A family that contradicts an
 * address, or addresses of two families, are the caller's mistake.
 */
export function queryFamily(from: string, to: string, family: string | undefined): Parsed<Family> {
  if (family !== undefined && family !== '4' && family !== '6') return { ok: false, error: `must be 4 or 6, not "${family}"` };
  const given: Family | undefined = family === undefined ? undefined : family === '4' ? 4 : 6;
  const addrs = [from, to].flatMap((t) => {
    const ip = parseIP(t.trim());
    return ip === undefined ? [] : [{ text: formatIP(ip), family: ip.family }];
  });
  const [a, b] = addrs;
  if (a !== undefined && b !== undefined && a.family !== b.family)
    return { ok: false, error: `${a.text} is IPv${a.family} and ${b.text} IPv${b.family}: a connection has one address family` };
  if (a !== undefined && given !== undefined && a.family !== given)
    return { ok: false, error: `${given} contradicts the IPv${a.family} address ${a.text}` };
  return { ok: true, value: a?.family ?? given ?? 4 };
}

/** Everything about a question that can be checked without the cluster state (the CLI's usage errors). */
export function parseExplainParams(p: ExplainParams): Checked<ExplainQuery> {
  const pp = parsePortProto(p.port);
  if (!pp.ok) return { ok: false, problems: [{ param: 'port', message: pp.error }] };
  const fam = queryFamily(p.from, p.to, p.family);
  if (!fam.ok) return { ok: false, problems: [{ param: 'family', message: fam.error }] };
  return { ok: true, value: { from: p.from, to: p.to, port: pp.value.port, protocol: pp.value.protocol, family: fam.value } };
}

export interface ExplainAnswer {
  readonly verdict: Verdict;
  readonly from: Endpoint;
  readonly to: Endpoint;
}

/** The one path from a checked question to its answer: the CLI and the agent's /debug/explain both take it. */
export function answerExplain(
  state: ClusterState,
  q: ExplainQuery,
  opts: { readonly allowPodToNode?: boolean } = {},
): Checked<ExplainAnswer> {
  const from = parseEndpoint(state, q.from);
  const to = parseEndpoint(state, q.to);
  if (!from.ok || !to.ok) {
    const problems = [
      ...(from.ok ? [] : [{ param: 'from' as const, message: from.error }]),
      ...(to.ok ? [] : [{ param: 'to' as const, message: to.error }]),
    ];
    return { ok: false, problems };
  }
  const v = verdict(state, from.value, to.value, q.protocol, q.port, {
    family: q.family,
    allowPodToNode: opts.allowPodToNode === true,
  });
  return { ok: true, value: { verdict: v, from: from.value, to: to.value } };
}

/** `ns/pod (10.0.0.1)`, or the bare address. */
export function endpointLabel(e: Endpoint, family: Family): string {
  if (e.kind === 'ip') return e.ip;
  const ip = podAddress(e.pod, family);
  return `${objectKey(e.pod)} (${ip ?? `no IPv${family} address`})`;
}

/** Comma-separated, at most MAX_NAMES, then how many more (-o json has them all). */
function names(xs: readonly string[]): string {
  const shown = xs.slice(0, MAX_NAMES).join(', ');
  return xs.length > MAX_NAMES ? `${shown} and ${xs.length - MAX_NAMES} more` : shown;
}

function section(dir: Direction, at: string, d: DirectionVerdict): string[] {
  const lines = [`${dir} at ${at}: ${d.allowed ? 'allowed' : 'DENIED'}`];
  lines.push(`  policies: ${d.policies.length === 0 ? 'none (not isolated)' : names(d.policies)}`);
  // The ordered tiers (ClusterNetworkPolicy), only when some policy of theirs selects the pod.
  if (d.clusterPolicies.length > 0) lines.push(`  cluster policies: ${names(d.clusterPolicies)}`);
  if (d.decidedBy !== undefined) lines.push(`  decided by: ${d.decidedBy.description}`);
  for (const p of d.passed) lines.push(`  passed on by: ${p.description}`);
  for (const n of d.notEnforced) lines.push(`  not enforced: ${n}`);
  // The reason usually names the allowing rules already; list them when it doesn't.
  if (d.allowedBy.slice(0, MAX_NAMES).some((r) => !d.reason.includes(ruleName(r))))
    lines.push(`  allowed by: ${names(d.allowedBy.map(ruleName))}`);
  lines.push(`  ${d.reason}`);
  return lines;
}

/** The answer first, then one section per direction. */
export function explainText(v: Verdict, from: Endpoint, to: Endpoint): string {
  const src = endpointLabel(from, v.family);
  const dst = endpointLabel(to, v.family);
  // A tiered rule that denied is named right away: `egress at the source: ClusterNetworkPolicy x (Admin tier, ...)`.
  const by = (d: DirectionVerdict): string => (d.decidedBy === undefined ? '' : `: ${d.decidedBy.description}`);
  const blockers = [
    v.egress.allowed ? undefined : `egress at the source${by(v.egress)}`,
    v.ingress.allowed ? undefined : `ingress at the destination${by(v.ingress)}`,
  ].filter((x) => x !== undefined);
  const head = `${v.allowed ? 'ALLOWED' : 'DENIED'}: ${src} -> ${dst} on ${v.port}/${v.protocol} (IPv${v.family})`;
  const why = v.allowed ? [] : [`denied by ${blockers.join(' and ')}`];
  return [
    head,
    ...why,
    '',
    ...section('egress', `the source ${src}`, v.egress),
    '',
    ...section('ingress', `the destination ${dst}`, v.ingress),
    '',
  ].join('\n');
}

export type EndpointJson =
  | { readonly kind: 'pod'; readonly namespace: string; readonly name: string; readonly ip: string | null }
  | { readonly kind: 'ip'; readonly ip: string };

/** A ClusterNetworkPolicy rule that decided or passed (verdict.ts TieredRuleRef). */
export interface TieredRuleJson {
  readonly policy: string;
  readonly kind: string;
  readonly tier: 'admin' | 'baseline';
  readonly priority: number;
  readonly direction: Direction;
  readonly rule: number;
  readonly name: string;
  readonly action: 'Accept' | 'Deny' | 'Pass';
  readonly description: string;
  readonly notEnforced: string | null;
}

export interface DirectionJson {
  readonly allowed: boolean;
  readonly isolated: boolean;
  readonly policies: readonly string[];
  readonly allowedBy: readonly {
    readonly policy: string;
    readonly direction: Direction;
    readonly rule: number;
    readonly kind: string;
    readonly description: string;
  }[];
  readonly reason: string;
  /** The tier that decided: admin, networkpolicy, baseline or default. */
  readonly tier: DecidingTier;
  /** The Accept or Deny rule of an ordered tier that decided, else null. */
  readonly decidedBy: TieredRuleJson | null;
  /** Pass rules that handed the connection on, in order. */
  readonly passed: readonly TieredRuleJson[];
  /** ClusterNetworkPolicies selecting the pod for this direction, in evaluation order. */
  readonly clusterPolicies: readonly string[];
  /** Rules reached that are not enforced as written (domainNames, fail closed), with why. */
  readonly notEnforced: readonly string[];
}

export interface ExplainJson {
  readonly allowed: boolean;
  readonly from: EndpointJson;
  readonly to: EndpointJson;
  readonly protocol: Protocol;
  readonly port: number;
  readonly family: Family;
  readonly egress: DirectionJson;
  readonly ingress: DirectionJson;
}

function endpointJson(e: Endpoint, family: Family): EndpointJson {
  return e.kind === 'ip'
    ? { kind: 'ip', ip: e.ip }
    : { kind: 'pod', namespace: e.pod.namespace, name: e.pod.name, ip: podAddress(e.pod, family) ?? null };
}

function tieredJson(r: TieredRuleRef): TieredRuleJson {
  return {
    policy: r.policy,
    kind: r.kind,
    tier: r.tier,
    priority: r.priority,
    direction: r.direction,
    rule: r.rule,
    name: r.name,
    action: r.action,
    description: r.description,
    notEnforced: r.notEnforced ?? null,
  };
}

function directionJson(d: DirectionVerdict): DirectionJson {
  return {
    allowed: d.allowed,
    isolated: d.isolated,
    policies: [...d.policies],
    allowedBy: d.allowedBy.map((r) => ({
      policy: r.policy,
      direction: r.direction,
      rule: r.rule,
      kind: r.kind,
      description: r.description,
    })),
    reason: d.reason,
    tier: d.tier,
    decidedBy: d.decidedBy === undefined ? null : tieredJson(d.decidedBy),
    passed: d.passed.map(tieredJson),
    clusterPolicies: [...d.clusterPolicies],
    notEnforced: [...d.notEnforced],
  };
}

/** The `-o json` object: plain data, stable key order. */
export function explainJson(v: Verdict, from: Endpoint, to: Endpoint): ExplainJson {
  return {
    allowed: v.allowed,
    from: endpointJson(from, v.family),
    to: endpointJson(to, v.family),
    protocol: v.protocol,
    port: v.port,
    family: v.family,
    egress: directionJson(v.egress),
    ingress: directionJson(v.ingress),
  };
}
