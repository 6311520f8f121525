// ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2) and the legacy
// v1alpha1 AdminNetworkPolicy / BaselineAdminNetworkPolicy -> the normalized
// ClusterNetworkPolicy (types.ts). Validation is the CRDs' (OpenAPI and CEL
// rules of network-policy-api v0.2 experimental, v0.1.7 for the legacy
// kinds), with the API server's field paths and message styles.
//
// Fail closed (see the types' doc comments):
// - a rule with any error is kept with `invalid: true` (an invalid Accept
//   rule matches nothing, an invalid Deny or Pass rule everything);
// - a peer with no field we know is `{kind: 'unknown'}`, not an error: the API
//   server enforces exactly one field per peer, so such a peer comes from a
//   newer CRD (from a file, the unknown field itself is reported by the
//   unknown-field check). An empty peer `{}` is an error: the API server
//   rejects it (minProperties), whatever the source;
// - when the policy's placement cannot be read (tier, priority, subject, or
//   spec is not an object) the subject is every pod and only its Deny rules
//   keep their meaning: Accept rules are invalid (match nothing) and Pass
//   rules match nothing (peers []), because applied to every pod they would
//   open what other policies deny. An unreadable tier is read as Admin
//   (where those Deny rules come first), an unreadable priority as 0;
// - an unreadable action is read as Deny (with the rule invalid: it matches
//   everything);
// - domainNames are only supported in Accept rules (the API says so; the
//   CRD does not check it): elsewhere the rule is invalid, so a Deny naming
//   domains denies everything rather than nothing.
import { ANY, LABEL_SELECTOR, listOf, object, objectFields } from './field-tree.ts';
import { readStaged } from './staged.ts';
import { formatCIDR, parseCIDR } from './ip.ts';
import { field, isObjectAt, isRecord, normalizeSelector, objectVersion, readHead, show } from './normalize-common.ts';
import type { Normalized, Raw, Report } from './normalize-common.ts';
import { EVERYTHING } from './selector.ts';
import { CLUSTER_POLICY_TIERS, PROTOCOLS } from './types.ts';
import type {
  ClusterNetworkPolicy,
  ClusterPolicyAction,
  ClusterPolicyPeer,
  ClusterPolicyProtocol,
  ClusterPolicyRule,
  ClusterPolicyTier,
  LabelSelector,
  NamespacedPods,
  Protocol,
} from './types.ts';

// Strict field checks of files (field-tree.ts): every field of the v1alpha2
// ClusterNetworkPolicy and the v1alpha1 admin kinds. A peer field this version
// does not know is an unknown field here; from the API server it is read as
// an unknown peer instead (fail closed), never checked.
const NAMESPACED_POD_FIELDS = object({ namespaceSelector: LABEL_SELECTOR, podSelector: LABEL_SELECTOR });
const SUBJECT_FIELDS = object({ namespaces: LABEL_SELECTOR, pods: NAMESPACED_POD_FIELDS });
const PORT_MATCH_FIELDS = object({ destinationPort: object({ number: ANY, range: object({ start: ANY, end: ANY }) }) });
const PROTOCOL_TREE = object({
  tcp: PORT_MATCH_FIELDS,
  udp: PORT_MATCH_FIELDS,
  sctp: PORT_MATCH_FIELDS,
  destinationNamedPort: ANY,
});
const INGRESS_PEER_FIELDS = object({ namespaces: LABEL_SELECTOR, pods: NAMESPACED_POD_FIELDS });
const EGRESS_PEER_FIELDS = object({
  namespaces: LABEL_SELECTOR,
  pods: NAMESPACED_POD_FIELDS,
  nodes: LABEL_SELECTOR,
  networks: ANY,
  domainNames: ANY,
});

/** Every field of a policy.networking.k8s.io/v1alpha2 ClusterNetworkPolicy. */
export const CLUSTER_NETWORK_POLICY_FIELDS = objectFields({
  spec: object({
    tier: ANY,
    priority: ANY,
    subject: SUBJECT_FIELDS,
    ingress: listOf(object({ name: ANY, action: ANY, from: listOf(INGRESS_PEER_FIELDS), protocols: listOf(PROTOCOL_TREE) })),
    egress: listOf(object({ name: ANY, action: ANY, to: listOf(EGRESS_PEER_FIELDS), protocols: listOf(PROTOCOL_TREE) })),
  }),
  status: ANY,
});

const LEGACY_PORT_FIELDS = object({
  portNumber: object({ protocol: ANY, port: ANY }),
  namedPort: ANY,
  portRange: object({ protocol: ANY, start: ANY, end: ANY }),
});

function legacyFields(withPriority: boolean): ReturnType<typeof objectFields> {
  return objectFields({
    spec: object({
      ...(withPriority ? { priority: ANY } : {}),
      subject: SUBJECT_FIELDS,
      ingress: listOf(object({ name: ANY, action: ANY, from: listOf(INGRESS_PEER_FIELDS), ports: listOf(LEGACY_PORT_FIELDS) })),
      egress: listOf(object({ name: ANY, action: ANY, to: listOf(EGRESS_PEER_FIELDS), ports: listOf(LEGACY_PORT_FIELDS) })),
    }),
    status: ANY,
  });
}

/** policy.networking.k8s.io/v1alpha1 AdminNetworkPolicy and BaselineAdminNetworkPolicy (no priority). */
export const ADMIN_NETWORK_POLICY_FIELDS = legacyFields(true);
export const BASELINE_ADMIN_NETWORK_POLICY_FIELDS = legacyFields(false);

export const POLICY_API_GROUP = 'policy.networking.k8s.io';
export const CLUSTER_NETWORK_POLICY_API_VERSION = `${POLICY_API_GROUP}/v1alpha2`;
export const ADMIN_NETWORK_POLICY_API_VERSION = `${POLICY_API_GROUP}/v1alpha1`;
export const CLUSTER_POLICY_KINDS = ['ClusterNetworkPolicy', 'AdminNetworkPolicy', 'BaselineAdminNetworkPolicy'] as const;
export type ClusterPolicyKind = (typeof CLUSTER_POLICY_KINDS)[number];

/** The CRDs' DomainName pattern, as upstream has it (its `A-z` ranges included: what the API server accepts). */
export const DOMAIN_NAME_PATTERN =
  '^(\\*\\.)?([a-zA-z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?\\.)+[a-zA-z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?\\.?$';
const DOMAIN_NAME = new RegExp(DOMAIN_NAME_PATTERN);
export const NAMED_PORT_CEL_MESSAGE =
  'networks/nodes/domainNames peer cannot be set with namedPorts since there are no namedPorts for networks/nodes/domainNames';
const BANP_NAMED_PORT_CEL_MESSAGE =
  'networks/nodes peer cannot be set with namedPorts since there are no namedPorts for networks/nodes';
export const RANGE_CEL_MESSAGE = 'Start port must be less than End port';
export const CIDR_CEL_MESSAGE = 'Invalid CIDR format provided';
export const BANP_NAME_CEL_MESSAGE =
  'Only one baseline admin network policy with metadata.name="default" can be created in the cluster';

/** What differs between the three kinds. */
interface Flavor {
  readonly kind: ClusterPolicyKind;
  readonly apiVersion: string;
  /** Max rules per direction, peers per rule, ports per rule. */
  readonly maxRules: number;
  readonly maxPeers: number;
  readonly maxPorts: number;
  /** Accepted action spellings and what they mean. */
  readonly actions: Readonly<Record<string, ClusterPolicyAction>>;
  /** Egress peer fields (ingress: namespaces, pods). */
  readonly egressPeers: readonly string[];
  /** Peer fields that cannot go with a named port (CEL rule of the egress rule), and its message. */
  readonly noNamedPort: readonly string[];
  readonly noNamedPortMessage: string;
}

const CNP: Flavor = {
  kind: 'ClusterNetworkPolicy',
  apiVersion: CLUSTER_NETWORK_POLICY_API_VERSION,
  maxRules: 25,
  maxPeers: 25,
  maxPorts: 25,
  actions: { Accept: 'Accept', Deny: 'Deny', Pass: 'Pass' },
  egressPeers: ['namespaces', 'pods', 'nodes', 'networks', 'domainNames'],
  noNamedPort: ['networks', 'nodes', 'domainNames'],
  noNamedPortMessage: NAMED_PORT_CEL_MESSAGE,
};
const ANP: Flavor = {
  ...CNP,
  kind: 'AdminNetworkPolicy',
  apiVersion: ADMIN_NETWORK_POLICY_API_VERSION,
  maxRules: 100,
  maxPeers: 100,
  maxPorts: 100,
  actions: { Allow: 'Accept', Deny: 'Deny', Pass: 'Pass' },
};
const BANP: Flavor = {
  ...ANP,
  kind: 'BaselineAdminNetworkPolicy',
  actions: { Allow: 'Accept', Deny: 'Deny' },
  egressPeers: ['namespaces', 'pods', 'nodes', 'networks'],
  noNamedPort: ['networks', 'nodes'],
  noNamedPortMessage: BANP_NAMED_PORT_CEL_MESSAGE,
};

const INGRESS_PEERS = ['namespaces', 'pods'] as const;

const quoted = (xs: readonly string[]): string => xs.map((x) => JSON.stringify(x)).join(', ');

/** `Invalid value: <v>: ` as the API server prefixes schema errors. */
function invalidValue(v: unknown): string {
  return `Invalid value: ${typeof v === 'string' ? JSON.stringify(v) : show(v)}`;
}

/** A list with the schema's MinItems/MaxItems; undefined (reported) when not a list. */
function boundedList(
  parent: Raw,
  name: string,
  path: string,
  bounds: { min?: number; max: number; required?: boolean },
  report: Report,
): readonly unknown[] | undefined {
  const v = field(parent, name);
  if (v === undefined) {
    if (bounds.required === true) report(path, 'Required value');
    return undefined;
  }
  if (!Array.isArray(v)) {
    report(path, `must be a list, not ${show(v)}`);
    return undefined;
  }
  if (bounds.min !== undefined && v.length < bounds.min)
    report(path, `${invalidValue(v.length)}: ${path} in body should have at least ${bounds.min} items`);
  if (v.length > bounds.max) report(path, `Too many: ${v.length}: must have at most ${bounds.max} items`);
  return v;
}

/**
 * The fields of `obj` among `known` that are set, with the schema's
 * MinProperties=1 (any field counts: one only a newer API knows is a field)
 * and, unless `max` is false, MaxProperties=1 over the known fields (a field
 * we do not know next to a known one is the unknown-field check's to report:
 * the API server would have pruned or rejected it).
 */
function exactlyOne(obj: Raw, known: readonly string[], path: string, report: Report, max = true): string[] {
  const present = Object.keys(obj).filter((k) => field(obj, k) !== undefined);
  const knownPresent = present.filter((k) => known.includes(k));
  if (present.length === 0) report(path, `${invalidValue(0)}: ${path} in body should have at least 1 properties`);
  else if (max && knownPresent.length > 1)
    report(path, `${invalidValue(knownPresent.length)}: ${path} in body should have at most 1 properties`);
  return knownPresent;
}

/** An int32 schema field with Minimum/Maximum. */
function boundedInt(v: unknown, path: string, min: number, max: number, report: Report): number | undefined {
  if (typeof v !== 'number' || !Number.isInteger(v)) {
    report(path, `must be an integer, not ${show(v)}`);
    return undefined;
  }
  if (v < min) {
    report(path, `${invalidValue(v)}: ${path} in body should be greater than or equal to ${min}`);
    return undefined;
  }
  if (v > max) {
    report(path, `${invalidValue(v)}: ${path} in body should be less than or equal to ${max}`);
    return undefined;
  }
  return v;
}

/** A required `type: string` field with an enum. */
function enumField(parent: Raw, name: string, path: string, values: readonly string[], report: Report): string | undefined {
  const v = field(parent, name);
  if (v === undefined || v === '') {
    report(path, 'Required value');
    return undefined;
  }
  if (typeof v !== 'string' || !values.includes(v)) {
    report(path, `Unsupported value: ${show(v)}: supported values: ${quoted(values)}`);
    return undefined;
  }
  return v;
}

export function normalizeClusterNetworkPolicy(obj: unknown): Normalized<ClusterNetworkPolicy> {
  return normalizeFlavor(obj, CNP);
}

export function normalizeAdminNetworkPolicy(obj: unknown): Normalized<ClusterNetworkPolicy> {
  return normalizeFlavor(obj, ANP);
}

export function normalizeBaselineAdminNetworkPolicy(obj: unknown): Normalized<ClusterNetworkPolicy> {
  return normalizeFlavor(obj, BANP);
}

/** The normalizer of a kind name, if it is one of the three. */
export function clusterPolicyNormalizer(kind: string): ((obj: unknown) => Normalized<ClusterNetworkPolicy>) | undefined {
  switch (kind) {
    case 'ClusterNetworkPolicy':
      return normalizeClusterNetworkPolicy;
    case 'AdminNetworkPolicy':
      return normalizeAdminNetworkPolicy;
    case 'BaselineAdminNetworkPolicy':
      return normalizeBaselineAdminNetworkPolicy;
    default:
      return undefined;
  }
}

function normalizeFlavor(obj: unknown, f: Flavor): Normalized<ClusterNetworkPolicy> {
  const h = readHead(obj, f.kind, false, f.apiVersion);
  if (!h.ok) return h;
  const { name, sink } = h.head;
  const { report, errors } = sink;
  const version = objectVersion(h.head.metadata);
  if (f.kind === 'BaselineAdminNetworkPolicy' && name !== 'default')
    report('metadata.name', `Invalid value: "object": ${BANP_NAME_CEL_MESSAGE}`);

  let placementValid = true;
  const placement: Report = (p, m) => {
    placementValid = false;
    report(p, m);
  };
  const rawSpec = field(h.head.obj, 'spec');
  const spec: Raw | undefined = rawSpec === undefined || isRecord(rawSpec) ? rawSpec : undefined;
  if (rawSpec === undefined) placement('spec', 'Required value');
  else if (spec === undefined) placement('spec', `must be an object, not ${show(rawSpec)}`);
  const s: Raw = spec ?? {};

  let tier: ClusterPolicyTier = f.kind === 'BaselineAdminNetworkPolicy' ? 'Baseline' : 'Admin';
  let priority = 0;
  let subject: NamespacedPods = { namespaceSelector: EVERYTHING, podSelector: EVERYTHING };
  if (spec !== undefined) {
    if (f.kind === 'ClusterNetworkPolicy') {
      const t = enumField(s, 'tier', 'spec.tier', CLUSTER_POLICY_TIERS, placement);
      // An unreadable tier: Admin, where the Deny rules it keeps still come first.
      tier = CLUSTER_POLICY_TIERS.find((x) => x === t) ?? 'Admin';
    }
    if (f.kind !== 'BaselineAdminNetworkPolicy') {
      const p = field(s, 'priority');
      if (p === undefined) placement('spec.priority', 'Required value');
      else priority = boundedInt(p, 'spec.priority', 0, 1000, placement) ?? 0;
    }
    subject = readSubject(field(s, 'subject'), placement) ?? subject;
  }

  const ingress = readRules(s, 'ingress', f, report);
  const egress = readRules(s, 'egress', f, report);
  const restrict = (rules: ClusterPolicyRule[]): ClusterPolicyRule[] =>
    placementValid
      ? rules
      : rules.map((r) =>
          r.action === 'Deny'
            ? r
            : r.action === 'Accept'
              ? { ...r, peers: [], protocols: [], invalid: true }
              : { ...r, peers: [], protocols: [] },
        );
  const value: ClusterNetworkPolicy = {
    name,
    sourceKind: f.kind,
    tier,
    priority,
    subject: placementValid ? subject : { namespaceSelector: EVERYTHING, podSelector: EVERYTHING },
    ingress: restrict(ingress),
    egress: restrict(egress),
    errors,
    ...(version === undefined ? {} : { version }),
    ...(readStaged(field(h.head.metadata, 'annotations')) ? { staged: true as const } : {}),
  };
  return { ok: true, value, errors };
}

/** `subject`: exactly one of namespaces / pods. Undefined (reported) when it cannot be read. */
function readSubject(raw: unknown, report: Report): NamespacedPods | undefined {
  const path = 'spec.subject';
  if (raw === undefined) {
    report(path, 'Required value');
    return undefined;
  }
  if (!isObjectAt(raw, path, report)) return undefined;
  let ok = true;
  const r: Report = (p, m) => {
    ok = false;
    report(p, m);
  };
  const known = exactlyOne(raw, ['namespaces', 'pods'], path, r);
  if (!ok) return undefined;
  const which = known[0];
  // One field, but not one we know: a newer API's subject; we cannot tell whom it selects.
  if (which === undefined) {
    report(path, `must specify one of ${quoted(['namespaces', 'pods'])}`);
    return undefined;
  }
  return namespacedPods(raw, which, `${path}.${which}`, report);
}

/** `namespaces: <selector>` or `pods: {namespaceSelector, podSelector}` as NamespacedPods. */
function namespacedPods(parent: Raw, which: string, path: string, report: Report): NamespacedPods | undefined {
  const v = field(parent, which);
  if (which === 'namespaces') {
    const ns = normalizeSelector(v, path, report);
    return ns === undefined ? undefined : { namespaceSelector: ns, podSelector: EVERYTHING };
  }
  if (!isObjectAt(v, path, report)) return undefined;
  const nsRaw = field(v, 'namespaceSelector');
  const psRaw = field(v, 'podSelector');
  const namespaceSelector: LabelSelector | undefined =
    nsRaw === undefined ? EVERYTHING : normalizeSelector(nsRaw, `${path}.namespaceSelector`, report);
  let podSelector: LabelSelector | undefined;
  if (psRaw === undefined) report(`${path}.podSelector`, 'Required value');
  else podSelector = normalizeSelector(psRaw, `${path}.podSelector`, report);
  return namespaceSelector === undefined || podSelector === undefined ? undefined : { namespaceSelector, podSelector };
}

function readRules(spec: Raw, dir: 'ingress' | 'egress', f: Flavor, report: Report): ClusterPolicyRule[] {
  const path = `spec.${dir}`;
  const raw = boundedList(spec, dir, path, { max: f.maxRules }, report);
  return (raw ?? []).map((r, i) => readRule(r, `${path}[${i}]`, dir, f, report));
}

function readRule(raw: unknown, path: string, dir: 'ingress' | 'egress', f: Flavor, outer: Report): ClusterPolicyRule {
  let invalid = false;
  const report: Report = (p, m) => {
    invalid = true;
    outer(p, m);
  };
  // An unreadable action fails closed as a Deny (matching everything, being invalid).
  const failed = (action: ClusterPolicyAction, name: string): ClusterPolicyRule => ({
    name,
    action,
    peers: [],
    protocols: [],
    invalid: true,
  });
  if (!isObjectAt(raw, path, report)) return failed('Deny', '');

  const nameRaw = field(raw, 'name');
  let name = '';
  if (typeof nameRaw === 'string') {
    name = nameRaw;
    if (nameRaw.length > 100) report(`${path}.name`, 'Too long: may not be more than 100 bytes');
  } else if (nameRaw !== undefined) report(`${path}.name`, `must be a string, not ${show(nameRaw)}`);

  const a = enumField(raw, 'action', `${path}.action`, Object.keys(f.actions), report);
  const action: ClusterPolicyAction = (a === undefined ? undefined : f.actions[a]) ?? 'Deny';

  const peerField = dir === 'ingress' ? 'from' : 'to';
  const peerNames = dir === 'ingress' ? ['from', '_from'] : ['to'];
  const peersAt = `${path}.${peerField}`;
  const peerHolder: Raw = { [peerField]: peerNames.map((n) => field(raw, n)).find((v) => v !== undefined) };
  const peersRaw = boundedList(peerHolder, peerField, peersAt, { min: 1, max: f.maxPeers, required: true }, report);
  const known = dir === 'ingress' ? INGRESS_PEERS : f.egressPeers;
  const peers: ClusterPolicyPeer[] = [];
  const peerFields = new Set<string>();
  (peersRaw ?? []).forEach((p, i) => {
    const pe = readPeer(p, `${peersAt}[${i}]`, known, action, report, peerFields);
    if (pe !== undefined) peers.push(pe);
  });

  const portField = f.kind === 'ClusterNetworkPolicy' ? 'protocols' : 'ports';
  const portsAt = `${path}.${portField}`;
  const portsRaw = boundedList(raw, portField, portsAt, { min: 1, max: f.maxPorts }, report);
  const protocols: ClusterPolicyProtocol[] = [];
  (portsRaw ?? []).forEach((p, i) => {
    const pr =
      f.kind === 'ClusterNetworkPolicy'
        ? readProtocol(p, `${portsAt}[${i}]`, report)
        : readLegacyPort(p, `${portsAt}[${i}]`, report);
    if (pr !== undefined) protocols.push(pr);
  });

  // The egress rule's CEL rule: a named port needs pod peers.
  if (dir === 'egress' && protocols.some((p) => p.kind === 'named') && f.noNamedPort.some((k) => peerFields.has(k)))
    report(path, `Invalid value: "object": ${f.noNamedPortMessage}`);

  if (invalid) return failed(action, name);
  return { name, action, peers, protocols: portsRaw === undefined ? undefined : protocols, invalid: false };
}

function readPeer(
  raw: unknown,
  path: string,
  known: readonly string[],
  action: ClusterPolicyAction,
  report: Report,
  seen: Set<string>,
): ClusterPolicyPeer | undefined {
  if (!isObjectAt(raw, path, report)) return undefined;
  let ok = true;
  const r: Report = (p, m) => {
    ok = false;
    report(p, m);
  };
  const fields = exactlyOne(raw, known, path, r);
  if (!ok) return undefined;
  const which = fields[0];
  // No field we know: a newer API's peer (fail closed by its rule's action, see the header).
  if (which === undefined) return { kind: 'unknown' };
  seen.add(which);
  const at = `${path}.${which}`;
  switch (which) {
    case 'namespaces':
    case 'pods': {
      const np = namespacedPods(raw, which, at, report);
      return np === undefined ? undefined : { kind: 'pods', ...np };
    }
    case 'nodes': {
      const sel = normalizeSelector(field(raw, 'nodes'), at, report);
      return sel === undefined ? undefined : { kind: 'nodes', nodeSelector: sel };
    }
    case 'networks':
      return readNetworks(field(raw, 'networks'), at, report);
    case 'domainNames': {
      if (action !== 'Accept') report(at, 'domainNames peers are only supported in Accept rules');
      return readDomainNames(field(raw, 'domainNames'), at, report);
    }
    default:
      return { kind: 'unknown' };
  }
}

/** A `listType: set` of strings (1..25): its items, with duplicates reported. */
function stringSet(v: unknown, path: string, report: Report): (readonly [number, string])[] | undefined {
  const list = boundedList({ v }, 'v', path, { min: 1, max: 25 }, report);
  if (list === undefined) return undefined;
  const out: [number, string][] = [];
  const seen = new Set<string>();
  let ok = true;
  list.forEach((x, i) => {
    if (typeof x !== 'string') {
      ok = false;
      report(`${path}[${i}]`, `must be a string, not ${show(x)}`);
    } else if (seen.has(x)) {
      ok = false;
      report(`${path}[${i}]`, `Duplicate value: ${JSON.stringify(x)}`);
    } else {
      seen.add(x);
      out.push([i, x]);
    }
  });
  return ok ? out : undefined;
}

function readNetworks(v: unknown, path: string, report: Report): ClusterPolicyPeer | undefined {
  const items = stringSet(v, path, report);
  if (items === undefined) return undefined;
  const cidrs = new Set<string>();
  let ok = true;
  for (const [i, s] of items) {
    const at = `${path}[${i}]`;
    if (s.length > 43) {
      ok = false;
      report(at, 'Too long: may not be more than 43 bytes');
      continue;
    }
    const c = parseCIDR(s);
    if (!c.ok) {
      ok = false;
      report(at, `Invalid value: "string": ${CIDR_CEL_MESSAGE}`);
    } else cidrs.add(formatCIDR(c.cidr));
  }
  // Canonical and sorted: equal policies normalize equal.
  return ok ? { kind: 'networks', cidrs: [...cidrs].sort() } : undefined;
}

function readDomainNames(v: unknown, path: string, report: Report): ClusterPolicyPeer | undefined {
  const items = stringSet(v, path, report);
  if (items === undefined) return undefined;
  let ok = true;
  for (const [i, s] of items) {
    if (!DOMAIN_NAME.test(s)) {
      ok = false;
      report(`${path}[${i}]`, `Invalid value: ${JSON.stringify(s)}: ${path}[${i}] in body should match '${DOMAIN_NAME_PATTERN}'`);
    }
  }
  return ok ? { kind: 'domainNames', names: items.map(([, s]) => s).sort() } : undefined;
}

const PROTOCOL_FIELDS: readonly (readonly [string, Protocol])[] = [
  ['tcp', 'TCP'],
  ['udp', 'UDP'],
  ['sctp', 'SCTP'],
];

/** v1alpha2 `protocols[]`: exactly one of tcp / udp / sctp / destinationNamedPort. */
function readProtocol(raw: unknown, path: string, report: Report): ClusterPolicyProtocol | undefined {
  if (!isObjectAt(raw, path, report)) return undefined;
  let ok = true;
  const r: Report = (p, m) => {
    ok = false;
    report(p, m);
  };
  const fields = exactlyOne(raw, ['tcp', 'udp', 'sctp', 'destinationNamedPort'], path, r);
  if (!ok) return undefined;
  const which = fields[0];
  if (which === undefined) {
    report(path, `must specify one of ${quoted(['tcp', 'udp', 'sctp', 'destinationNamedPort'])}`);
    return undefined;
  }
  const at = `${path}.${which}`;
  if (which === 'destinationNamedPort') {
    const name = field(raw, which);
    if (typeof name !== 'string') {
      report(at, `must be a string, not ${show(name)}`);
      return undefined;
    }
    return { kind: 'named', name };
  }
  const protocol = PROTOCOL_FIELDS.find(([k]) => k === which)?.[1] ?? 'TCP';
  const body = field(raw, which);
  if (!isObjectAt(body, at, report)) return undefined;
  // tcp/udp/sctp have MinProperties=1 only (a newer API may add fields beside destinationPort).
  const props = exactlyOne(body, ['destinationPort'], at, r, false);
  if (!ok) return undefined;
  if (props.length === 0) {
    report(`${at}.destinationPort`, 'Required value');
    return undefined;
  }
  const dpAt = `${at}.destinationPort`;
  const dp = field(body, 'destinationPort');
  if (!isObjectAt(dp, dpAt, report)) return undefined;
  const which2 = exactlyOne(dp, ['number', 'range'], dpAt, r);
  if (!ok) return undefined;
  if (which2[0] === 'number') {
    const n = boundedInt(field(dp, 'number'), `${dpAt}.number`, 1, 65535, report);
    return n === undefined ? undefined : { kind: 'port', protocol, port: n, endPort: undefined };
  }
  if (which2[0] === 'range') {
    const rg = readRange(field(dp, 'range'), `${dpAt}.range`, report, true);
    return rg === undefined ? undefined : { kind: 'port', protocol, port: rg.start, endPort: rg.end };
  }
  report(dpAt, `must specify one of ${quoted(['number', 'range'])}`);
  return undefined;
}

/** `{start, end}`, each 1..65535; v1alpha2 also has the CEL rule start < end. */
function readRange(raw: unknown, path: string, report: Report, strict: boolean): { start: number; end: number } | undefined {
  if (!isObjectAt(raw, path, report)) return undefined;
  const get = (k: string): number | undefined => {
    const v = field(raw, k);
    if (v === undefined) {
      report(`${path}.${k}`, 'Required value');
      return undefined;
    }
    return boundedInt(v, `${path}.${k}`, 1, 65535, report);
  };
  const start = get('start');
  const end = get('end');
  if (start === undefined || end === undefined) return undefined;
  if (strict ? start >= end : start > end) {
    // v1alpha1 has no such rule; a reversed range there still matches nothing anyone meant.
    report(path, `Invalid value: "object": ${strict ? RANGE_CEL_MESSAGE : 'Start port must not be greater than End port'}`);
    return undefined;
  }
  return { start, end };
}

/** v1alpha1 protocol (default TCP; the CRD has no enum, but only these can be enforced). */
function legacyProtocol(raw: Raw, path: string, report: Report): Protocol | undefined {
  const v = field(raw, 'protocol');
  if (v === undefined || v === '') return 'TCP';
  const p = PROTOCOLS.find((x) => x === v);
  if (p === undefined) report(`${path}.protocol`, `Unsupported value: ${show(v)}: supported values: "TCP", "UDP", "SCTP"`);
  return p;
}

/** v1alpha1 `ports[]`: exactly one of portNumber {protocol, port} / namedPort / portRange {protocol, start, end}. */
function readLegacyPort(raw: unknown, path: string, report: Report): ClusterPolicyProtocol | undefined {
  if (!isObjectAt(raw, path, report)) return undefined;
  let ok = true;
  const r: Report = (p, m) => {
    ok = false;
    report(p, m);
  };
  const fields = exactlyOne(raw, ['portNumber', 'namedPort', 'portRange'], path, r);
  if (!ok) return undefined;
  const which = fields[0];
  const at = `${path}.${which ?? ''}`;
  const v = which === undefined ? undefined : field(raw, which);
  switch (which) {
    case 'namedPort':
      if (typeof v !== 'string') {
        report(at, `must be a string, not ${show(v)}`);
        return undefined;
      }
      return { kind: 'named', name: v };
    case 'portNumber': {
      if (!isObjectAt(v, at, report)) return undefined;
      const protocol = legacyProtocol(v, at, report);
      const pv = field(v, 'port');
      if (pv === undefined) {
        report(`${at}.port`, 'Required value');
        return undefined;
      }
      const port = boundedInt(pv, `${at}.port`, 1, 65535, report);
      return port === undefined || protocol === undefined ? undefined : { kind: 'port', protocol, port, endPort: undefined };
    }
    case 'portRange': {
      if (!isObjectAt(v, at, report)) return undefined;
      const protocol = legacyProtocol(v, at, report);
      const rg = readRange(v, at, report, false);
      return rg === undefined || protocol === undefined ? undefined : { kind: 'port', protocol, port: rg.start, endPort: rg.end };
    }
    default:
      report(path, `must specify one of ${quoted(['portNumber', 'namedPort', 'portRange'])}`);
      return undefined;
  }
}

/** Identity of a cluster policy in a ClusterState: kinds share names (the legacy kinds' and CNPs'). */
export function clusterPolicyKey(p: Pick<ClusterNetworkPolicy, 'sourceKind' | 'name'>): string {
  return `${p.sourceKind}/${p.name}`;
}
