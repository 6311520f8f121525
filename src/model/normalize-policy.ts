// NetworkPolicy (networking.k8s.io/v1) -> normalized NetworkPolicy.
// Validation mirrors the API server (pkg/apis/networking/validation) plus
// KEP-2079 endPort rules; defaulting mirrors SetDefaults_NetworkPolicy. Every
// problem fails closed: a bad rule allows nothing, a bad podSelector isolates
// the whole namespace, garbage in spec isolates it in both directions.
import { ANY, LABEL_SELECTOR, listOf, object, objectFields } from './field-tree.ts';
import { cidrWithin, formatCIDR, parseCIDR } from './ip.ts';
import type { CIDR } from './ip.ts';
import { isPortNumber, portNameErrors, PORT_RANGE_MESSAGE } from './k8s-names.ts';
import {
  field,
  isRecord,
  listField,
  normalizeSelector,
  objectVersion,
  readHead,
  requiredString,
  isObjectAt,
  show,
} from './normalize-common.ts';
import type { Normalized, Raw, Report } from './normalize-common.ts';
import { EVERYTHING } from './selector.ts';
import { readStaged } from './staged.ts';
import { PROTOCOLS } from './types.ts';
import type { LabelSelector, NetworkPolicy, Peer, PortSpec, Protocol, Rule } from './types.ts';

export const NETWORK_POLICY_API_VERSION = 'networking.k8s.io/v1';

/** networking.k8s.io/v1 NetworkPolicyPort and IPBlock (NamespaceNetworkPolicy uses both too). */
export const POLICY_PORT_FIELDS = object({ protocol: ANY, port: ANY, endPort: ANY });
export const IP_BLOCK_FIELDS = object({ cidr: ANY, except: ANY });

const PEER_FIELDS = object({ podSelector: LABEL_SELECTOR, namespaceSelector: LABEL_SELECTOR, ipBlock: IP_BLOCK_FIELDS });

/** Every field of a networking.k8s.io/v1 NetworkPolicy (strict field checks, field-tree.ts). */
export const NETWORK_POLICY_FIELDS = objectFields({
  spec: object({
    podSelector: LABEL_SELECTOR,
    policyTypes: ANY,
    ingress: listOf(object({ from: listOf(PEER_FIELDS), ports: listOf(POLICY_PORT_FIELDS) })),
    egress: listOf(object({ to: listOf(PEER_FIELDS), ports: listOf(POLICY_PORT_FIELDS) })),
  }),
  // NetworkPolicyStatus (conditions) existed in 1.24-1.25; kubectl get -o yaml of that time prints it.
  status: ANY,
});

/**
 * What an invalid rule becomes: empty lists (not undefined = "all"), so it
 * matches nothing even if `invalid` were ignored. A fresh object each time, so
 * callers may key maps by rule identity.
 */
function invalidRule(): Rule {
  return { peers: [], ports: [], invalid: true };
}

/** The lists of a NetworkPolicy-shaped spec (NetworkPolicy, NamespaceNetworkPolicy). */
export interface PolicySpec {
  readonly spec: Raw;
  readonly ingressRaw: readonly unknown[] | undefined;
  readonly egressRaw: readonly unknown[] | undefined;
  readonly typesRaw: readonly unknown[] | undefined;
}

/**
 * Reads the spec's structure. A missing spec is the zero spec (default
 * policyTypes: deny ingress). Undefined on structural garbage (reported): we
 * can't tell what was meant, so the caller isolates everything.
 */
export function policySpec(obj: Raw, report: Report): PolicySpec | undefined {
  let garbage = false;
  const r: Report = (path, message) => {
    garbage = true;
    report(path, message);
  };
  const rawSpec = field(obj, 'spec');
  if (rawSpec !== undefined && !isRecord(rawSpec)) {
    r('spec', `must be an object, not ${show(rawSpec)}`);
    return undefined;
  }
  const spec: Raw = rawSpec ?? {};
  const ingressRaw = listField(spec, ['ingress'], 'spec.ingress', r);
  const egressRaw = listField(spec, ['egress'], 'spec.egress', r);
  const typesRaw = listField(spec, ['policyTypes'], 'spec.policyTypes', r);
  return garbage ? undefined : { spec, ingressRaw, egressRaw, typesRaw };
}

export function normalizePolicy(obj: unknown): Normalized<NetworkPolicy> {
  const h = readHead(obj, 'NetworkPolicy', true, NETWORK_POLICY_API_VERSION);
  if (!h.ok) return h;
  const { name, sink } = h.head;
  const namespace = h.head.namespace ?? 'default';
  const { report, errors } = sink;
  const version = objectVersion(h.head.metadata);
  const staged = readStaged(field(h.head.metadata, 'annotations'));
  const result = (p: Omit<NetworkPolicy, 'namespace' | 'name' | 'errors'>): Normalized<NetworkPolicy> => ({
    ok: true,
    value: {
      namespace,
      name,
      ...p,
      errors,
      ...(version === undefined ? {} : { version }),
      ...(staged ? { staged: true as const } : {}),
    },
    errors,
  });
  const failClosed = (): Normalized<NetworkPolicy> =>
    result({ podSelector: EVERYTHING, types: { ingress: true, egress: true }, ingress: [], egress: [] });

  const shape = policySpec(h.head.obj, report);
  if (shape === undefined) return failClosed();
  const { spec, ingressRaw, egressRaw, typesRaw } = shape;

  // A missing podSelector is the zero selector {} (all pods), as the API server reads it.
  const psRaw = field(spec, 'podSelector');
  const podSelector: LabelSelector | undefined =
    psRaw === undefined ? EVERYTHING : normalizeSelector(psRaw, 'spec.podSelector', report);

  const t = policyTypes(typesRaw, egressRaw, report);
  const ingress = normalizeRules(ingressRaw, 'spec.ingress', ['from', '_from'], 'from', report);
  const egress = normalizeRules(egressRaw, 'spec.egress', ['to'], 'to', report);
  const keep = (listed: boolean, isolated: boolean, rules: Rule[]): Rule[] => {
    if (!isolated || !listed) return [];
    return podSelector === undefined ? rules.map(invalidRule) : rules;
  };
  return result({
    podSelector: podSelector ?? EVERYTHING,
    types: t.types,
    ingress: keep(t.ingressListed, t.types.ingress, ingress),
    egress: keep(t.egressListed, t.types.egress, egress),
  });
}

export interface Types {
  readonly types: { ingress: boolean; egress: boolean };
  /** The direction is validly listed (or defaulted): its rules are kept. */
  readonly ingressListed: boolean;
  readonly egressListed: boolean;
}

export function policyTypes(
  typesRaw: readonly unknown[] | undefined,
  egressRaw: readonly unknown[] | undefined,
  report: Report,
): Types {
  if (typesRaw === undefined || typesRaw.length === 0) {
    // SetDefaults_NetworkPolicy: Ingress always, Egress iff len(spec.egress) != 0.
    // So `egress: []` without policyTypes does NOT isolate egress, exactly like the cluster.
    const egress = egressRaw !== undefined && egressRaw.length > 0;
    return { types: { ingress: true, egress }, ingressListed: true, egressListed: egress };
  }
  let bad = false;
  if (typesRaw.length > 2) {
    report('spec.policyTypes', 'may not specify more than two policyTypes');
    bad = true;
  }
  let ingressListed = false;
  let egressListed = false;
  typesRaw.forEach((v, i) => {
    const p = `spec.policyTypes[${i}]`;
    if (v === 'Ingress' || v === 'Egress') {
      const seen = v === 'Ingress' ? ingressListed : egressListed;
      // A repeat is flagged but harmless: the listed set is still clear (the API server accepts it).
      if (seen) report(p, `Duplicate value: ${show(v)}`);
      if (v === 'Ingress') ingressListed = true;
      else egressListed = true;
    } else {
      report(p, `Unsupported value: ${show(v)}: supported values: "Ingress", "Egress"`);
      bad = true;
    }
  });
  // An unknown entry might have meant either direction: isolate both.
  const types = bad ? { ingress: true, egress: true } : { ingress: ingressListed, egress: egressListed };
  return { types, ingressListed, egressListed };
}

function normalizeRules(
  raw: readonly unknown[] | undefined,
  path: string,
  peerNames: readonly string[],
  peerField: string,
  report: Report,
): Rule[] {
  return (raw ?? []).map((r, i) => normalizeRule(r, `${path}[${i}]`, peerNames, peerField, report));
}

function normalizeRule(raw: unknown, path: string, peerNames: readonly string[], peerField: string, outer: Report): Rule {
  let invalid = false;
  const report: Report = (p, m) => {
    invalid = true;
    outer(p, m);
  };
  if (!isObjectAt(raw, path, report)) return invalidRule();
  const portsRaw = listField(raw, ['ports'], `${path}.ports`, report);
  const peersRaw = listField(raw, peerNames, `${path}.${peerField}`, report);
  const ports: PortSpec[] = [];
  (portsRaw ?? []).forEach((p, i) => {
    const ps = normalizePort(p, `${path}.ports[${i}]`, report);
    if (ps !== undefined) ports.push(ps);
  });
  const peers: Peer[] = [];
  (peersRaw ?? []).forEach((p, i) => {
    const pe = normalizePeer(p, `${path}.${peerField}[${i}]`, report);
    if (pe !== undefined) peers.push(pe);
  });
  if (invalid) return invalidRule();
  return { peers: peers.length === 0 ? undefined : peers, ports: ports.length === 0 ? undefined : ports, invalid: false };
}

export function normalizePort(raw: unknown, path: string, report: Report): PortSpec | undefined {
  if (!isObjectAt(raw, path, report)) return undefined;
  let ok = true;
  const bad = (p: string, m: string): void => {
    ok = false;
    report(p, m);
  };
  const protoRaw = field(raw, 'protocol');
  const protocol: Protocol | undefined = protoRaw === undefined ? 'TCP' : PROTOCOLS.find((p) => p === protoRaw);
  if (protocol === undefined)
    bad(`${path}.protocol`, `Unsupported value: ${show(protoRaw)}: supported values: "TCP", "UDP", "SCTP"`);

  // IntOrString: a number is a port number, a string is always a port name ("80" included).
  const port = field(raw, 'port');
  if (typeof port === 'number') {
    if (!Number.isInteger(port)) bad(`${path}.port`, `must be an integer, not ${show(port)}`);
    else if (!isPortNumber(port)) bad(`${path}.port`, `${PORT_RANGE_MESSAGE} (got ${port})`);
  } else if (typeof port === 'string') {
    for (const m of portNameErrors(port)) bad(`${path}.port`, `invalid port name ${show(port)}: ${m}`);
  } else if (port !== undefined) {
    bad(`${path}.port`, `must be a port number or name, not ${show(port)}`);
  }

  const endPort = field(raw, 'endPort');
  if (endPort !== undefined) {
    const ep = `${path}.endPort`;
    if (port === undefined) bad(ep, 'may not be specified without port');
    else if (typeof port === 'string') bad(ep, `cannot be used with a named port (${show(port)})`);
    else if (typeof endPort !== 'number' || !Number.isInteger(endPort)) bad(ep, `must be an integer, not ${show(endPort)}`);
    else if (!isPortNumber(endPort)) bad(ep, `${PORT_RANGE_MESSAGE} (got ${endPort})`);
    else if (typeof port === 'number' && endPort < port) bad(ep, `must be >= port (${port})`);
  }
  if (!ok || protocol === undefined) return undefined;
  return {
    protocol,
    port: typeof port === 'number' || typeof port === 'string' ? port : undefined,
    endPort: typeof endPort === 'number' ? endPort : undefined,
  };
}

function normalizePeer(raw: unknown, path: string, report: Report): Peer | undefined {
  if (!isObjectAt(raw, path, report)) return undefined;
  const psRaw = field(raw, 'podSelector');
  const nsRaw = field(raw, 'namespaceSelector');
  const ibRaw = field(raw, 'ipBlock');
  const count = [psRaw, nsRaw, ibRaw].filter((x) => x !== undefined).length;
  if (count === 0) {
    report(path, 'must specify a peer');
    return undefined;
  }
  if (ibRaw !== undefined) {
    if (count > 1) {
      report(path, 'may not specify both ipBlock and another peer');
      return undefined;
    }
    return normalizeIPBlock(ibRaw, `${path}.ipBlock`, report);
  }
  const podSelector = psRaw === undefined ? undefined : normalizeSelector(psRaw, `${path}.podSelector`, report);
  const namespaceSelector = nsRaw === undefined ? undefined : normalizeSelector(nsRaw, `${path}.namespaceSelector`, report);
  if ((psRaw !== undefined && podSelector === undefined) || (nsRaw !== undefined && namespaceSelector === undefined))
    return undefined;
  return { kind: 'pods', podSelector, namespaceSelector };
}

function compareCIDR(a: CIDR, b: CIDR): number {
  return a.family - b.family || (a.base < b.base ? -1 : a.base > b.base ? 1 : 0) || a.prefix - b.prefix;
}

export function normalizeIPBlock(raw: unknown, path: string, report: Report): Peer | undefined {
  if (!isObjectAt(raw, path, report)) return undefined;
  const cidrRaw = requiredString(raw, 'cidr', `${path}.cidr`, report);
  if (cidrRaw === undefined) return undefined;
  const parsed = parseCIDR(cidrRaw);
  if (!parsed.ok) {
    report(`${path}.cidr`, parsed.error);
    return undefined;
  }
  const cidr = parsed.cidr;
  let ok = true;
  const except: CIDR[] = [];
  const exRaw = listField(raw, ['except'], `${path}.except`, (p, m) => {
    ok = false;
    report(p, m);
  });
  (exRaw ?? []).forEach((e, i) => {
    const ep = `${path}.except[${i}]`;
    if (typeof e !== 'string') {
      ok = false;
      report(ep, `must be a string, not ${show(e)}`);
      return;
    }
    const ex = parseCIDR(e);
    if (!ex.ok) {
      ok = false;
      report(ep, ex.error);
    } else if (!cidrWithin(ex.cidr, cidr) || ex.cidr.prefix <= cidr.prefix) {
      ok = false;
      report(ep, `must be a strict subset of cidr (${formatCIDR(cidr)})`);
    } else {
      except.push(ex.cidr);
    }
  });
  if (!ok) return undefined;
  const uniq = [...new Map(except.map((c) => [formatCIDR(c), c])).values()].sort(compareCIDR);
  return { kind: 'ipBlock', cidr: formatCIDR(cidr), except: uniq.map(formatCIDR) };
}
