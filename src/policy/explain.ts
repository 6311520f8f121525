// Human and JSON renderings of a Verdict, and the parsing of the user's
// endpoint and port text that leads to one. Pure: no I/O.
import { formatIP, parseIP } from '../model/ip.ts';
import { isActivePod, objectKey, PROTOCOLS } from '../model/types.ts';
import type { ClusterState, Direction, Family, Protocol } from '../model/types.ts';
import { MAX_NAMES, podAddress, ruleName } from './verdict.ts';
import type { DirectionVerdict, Endpoint, Verdict } from './verdict.ts';

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
  const blockers = [
    v.egress.allowed ? undefined : `egress at the source`,
    v.ingress.allowed ? undefined : `ingress at the destination`,
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
