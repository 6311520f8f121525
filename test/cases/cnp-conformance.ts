// The ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2) tests of the
// upstream conformance suite (kubernetes-sigs/network-policy-api main,
// conformance/tests/*.go with the policies of conformance/base/{admin_tier,
// baseline_tier,api_integration}), transcribed as data: each upstream test
// (ShortName) is a case; each of its subtests (t.Run name) one or more steps:
// the policy changes the subtest makes, then its PokeServer probes with the
// expectation exactly as upstream states it. Subtests of one test share the
// policy state they mutate, so a case's steps run in order on one state.
// Policies are raw objects as the YAML gives them (rule names included).
// Three cases (named ports, node peers) need upstream's experimental
// features; they are marked. After them come cases of our own (source
// 'ours'): domainNames read fail-closed, and the kube-router regression (an
// except / a Deny in one rule must not block what a later rule or a lower
// tier allows). Nothing here is computed by an evaluator.
import type { Family, Protocol } from '../../src/model/types.ts';
import { largeCIDRFor } from './upstream-cases.ts';
import {
  DEFAULT_HOST_NETWORK_PORTS,
  DEFAULT_MODEL_OPTIONS,
  HOUSE_LABEL,
  NAMESPACE_NAME_LABEL,
  NODE_OS_LABEL,
  houseNamespace,
  housePod,
  podAddress,
} from './cnp-conformance-model.ts';
import type { House } from './cnp-conformance-model.ts';
import { networkPolicy } from './raw.ts';
import type { RawObject, RawSelector } from './raw.ts';

export const CNP_API_VERSION = 'policy.networking.k8s.io/v1alpha2';

// --- raw ClusterNetworkPolicy objects, shaped as the YAML ------------------

export type RawCnpProtocol =
  | { readonly tcp: RawDestinationPort }
  | { readonly udp: RawDestinationPort }
  | { readonly sctp: RawDestinationPort }
  | { readonly destinationNamedPort: string };
export interface RawDestinationPort {
  readonly destinationPort?: { readonly number: number } | { readonly range: { readonly start: number; readonly end: number } };
}
export interface RawCnpPeer {
  readonly namespaces?: RawSelector;
  readonly pods?: { readonly namespaceSelector: RawSelector; readonly podSelector: RawSelector };
  readonly networks?: readonly string[];
  readonly nodes?: RawSelector;
  readonly domainNames?: readonly string[];
}
export type RawCnpAction = 'Accept' | 'Deny' | 'Pass';
export interface RawCnpRule {
  readonly name?: string;
  readonly action: RawCnpAction;
  readonly from?: readonly RawCnpPeer[];
  readonly to?: readonly RawCnpPeer[];
  readonly protocols?: readonly RawCnpProtocol[];
}
export interface RawCnpSpec {
  readonly tier: 'Admin' | 'Baseline';
  readonly priority: number;
  readonly subject: { readonly namespaces?: RawSelector; readonly pods?: RawCnpPeer['pods'] };
  readonly ingress?: readonly RawCnpRule[];
  readonly egress?: readonly RawCnpRule[];
}
export interface RawCnp extends RawObject {
  readonly spec: RawCnpSpec;
}

export function clusterNetworkPolicy(name: string, spec: RawCnpSpec): RawCnp {
  return { apiVersion: CNP_API_VERSION, kind: 'ClusterNetworkPolicy', metadata: { name }, spec };
}

// --- steps, probes, changes -------------------------------------------------

export type CnpChange =
  /** Create, or replace entirely, an object (ClusterNetworkPolicy or NetworkPolicy). */
  | { readonly type: 'upsert'; readonly object: RawObject }
  /** Upstream's Get + DeepCopy + mutate + Patch of a ClusterNetworkPolicy; `what` says the mutation as upstream comments it. */
  | { readonly type: 'editPolicy'; readonly name: string; readonly what: string; readonly edit: (spec: RawCnpSpec) => RawCnpSpec }
  | { readonly type: 'delete'; readonly kind: string; readonly namespace?: string; readonly name: string }
  /**
   * Upstream's namespace.SetLabels(labels) + Patch: the labels are replaced;
   * the API server keeps kubernetes.io/metadata.name on every namespace.
   */
  | { readonly type: 'setNamespaceLabels'; readonly name: string; readonly labels: Readonly<Record<string, string>> };

export interface CnpProbe {
  /** Client pod `ns/name`. */
  readonly from: string;
  /** Server pod `ns/name` (a hostNetwork pod: probed at its node's address). */
  readonly to: string;
  readonly protocol: Protocol;
  readonly port: number;
  /** PokeServer's shouldConnect. */
  readonly connect: boolean;
}

/** Apply `changes` in order, then every probe must hold. */
export interface CnpStep {
  /** The upstream subtest (t.Run) name; a subtest that changes state between its probes is split, with " [part n]". */
  readonly subtest: string;
  readonly changes: readonly CnpChange[];
  readonly probes: readonly CnpProbe[];
}

export type CnpFeature = 'standard' | 'ClusterNetworkPolicyNamedPorts' | 'ClusterNetworkPolicyEgressNodePeers' | 'domainNames';

export interface CnpCase {
  /** The upstream test's ShortName, or `Ours...` for our cases. */
  readonly id: string;
  readonly source: 'upstream' | 'ours';
  /** Upstream's feature (experimental channel unless 'standard'). */
  readonly feature: CnpFeature;
  /** The upstream test file / manifest, or why the case exists. */
  readonly origin: string;
  /** A note a reader needs (e.g. where our expectation is our reading rather than upstream's). */
  readonly note?: string;
  /** The objects the test's manifests create before its first subtest. */
  readonly manifests: readonly RawObject[];
  readonly steps: readonly CnpStep[];
}

export interface CnpContext {
  readonly family: Family;
  /** The address a probe dials (and a `networks` peer is written with) for a pod. */
  readonly podIP: (key: string, family: Family) => string;
  readonly hostNetworkPorts: readonly number[];
}

export function defaultCnpContext(family: Family = 4): CnpContext {
  return {
    family,
    podIP: (key, f) => podAddress(DEFAULT_MODEL_OPTIONS, key, f),
    hostNetworkPorts: DEFAULT_HOST_NETWORK_PORTS,
  };
}

// --- helpers, in the YAML's terms --------------------------------------------

const byName = (h: House): RawSelector => ({ matchLabels: { [NAMESPACE_NAME_LABEL]: houseNamespace(h) } });
const byHouse = (h: House): RawSelector => ({ matchLabels: { [HOUSE_LABEL]: h } });
const linuxNodes: RawSelector = { matchLabels: { [NODE_OS_LABEL]: 'linux' } };
/** `namespaces: {matchLabels: {kubernetes.io/metadata.name: network-policy-conformance-<h>}}` */
const nsPeer = (h: House): RawCnpPeer => ({ namespaces: byName(h) });
/** `pods: {namespaceSelector: {conformance-house: h}, podSelector: {conformance-house: h}}` */
const housePods = (h: House) => ({ namespaceSelector: byHouse(h), podSelector: byHouse(h) });

type Proto = 'tcp' | 'udp' | 'sctp';
const port = (p: Proto, n: number): RawCnpProtocol =>
  p === 'tcp'
    ? { tcp: { destinationPort: { number: n } } }
    : p === 'udp'
      ? { udp: { destinationPort: { number: n } } }
      : { sctp: { destinationPort: { number: n } } };
const named = (name: string): RawCnpProtocol => ({ destinationNamedPort: name });
const P = (p: Proto): Protocol => (p === 'tcp' ? 'TCP' : p === 'udp' ? 'UDP' : 'SCTP');

function rule(
  dir: 'ingress' | 'egress',
  action: RawCnpAction,
  name: string,
  peers: RawCnpPeer[],
  protocols?: RawCnpProtocol[],
): RawCnpRule {
  return {
    name,
    action,
    ...(dir === 'ingress' ? { from: peers } : { to: peers }),
    ...(protocols === undefined ? {} : { protocols }),
  };
}

function swap<T>(xs: readonly T[] | undefined, i: number, j: number): T[] {
  const out = [...(xs ?? [])];
  const a = out[i];
  const b = out[j];
  if (a === undefined || b === undefined) throw new Error(`swap ${i}, ${j}: only ${out.length} rules`);
  out[i] = b;
  out[j] = a;
  return out;
}

/** `mutate.Spec.<Dir>[i], [j] = [j], [i]` */
function swapRules(name: string, dirs: readonly ('ingress' | 'egress')[], i: number, j: number): CnpChange {
  return {
    type: 'editPolicy',
    name,
    what: `swap ${dirs.join(' and ')} rules at index${i} and index${j}`,
    edit: (s) => ({ ...s, ...Object.fromEntries(dirs.map((d) => [d, swap(s[d], i, j)])) }),
  };
}

function setRule(name: string, dir: 'ingress' | 'egress', i: number, what: string, f: (r: RawCnpRule) => RawCnpRule): CnpChange {
  return {
    type: 'editPolicy',
    name,
    what,
    edit: (s) => {
      const rules = [...(s[dir] ?? [])];
      const r = rules[i];
      if (r === undefined) throw new Error(`${name}: no ${dir}[${i}]`);
      rules[i] = f(r);
      return { ...s, [dir]: rules };
    },
  };
}

const poke = (from: string, to: string, proto: Proto, portNumber: number, connect: boolean): CnpProbe => ({
  from,
  to,
  protocol: P(proto),
  port: portNumber,
  connect,
});

const step = (subtest: string, changes: CnpChange[], probes: CnpProbe[]): CnpStep => ({ subtest, changes, probes });

const hp0 = housePod('gryffindor', 0);
const hp1 = housePod('gryffindor', 1);
const dm0 = housePod('slytherin', 0);
const dm1 = housePod('slytherin', 1);
const cd0 = housePod('hufflepuff', 0);
const cd1 = housePod('hufflepuff', 1);
const ll0 = housePod('ravenclaw', 0);
const ll1 = housePod('ravenclaw', 1);
const centaur1 = housePod('forbidden-forrest', 1);

// --- the per-protocol policies (standard-{ingress,egress}-{tcp,udp,sctp}-rules.yaml, standard-gress-rules-combined.yaml) ---

interface OrderedRulesShape {
  /** The house every action applies to for everything (rules 0..2). */
  readonly everything: House;
  /** Denied (admin: then passed) at `deniedPorts` (rules 3, 4). */
  readonly denied: House;
  readonly deniedPorts: readonly [Proto, number][];
  readonly deniedLabel: string;
  /** The Pass rule's label when it differs from the Deny rule's (one file spells it differently). */
  readonly passLabel?: string;
  /** Accepted at `acceptedPorts`, everything else denied (rules 5, 6). */
  readonly accepted: House;
  readonly acceptedPorts: readonly [Proto, number][];
  readonly acceptedLabel: string;
}

/**
 * The rule list every per-protocol file uses, in its order. Admin:
 * 0 Accept / 1 Deny / 2 Pass everything of one house; 3 Deny / 4 Pass a
 * second house at some ports; 5 Accept a third house at some ports, 6 Deny
 * the rest of it. Baseline files have the same list without the Pass rules.
 */
function orderedRules(tier: 'Admin' | 'Baseline', dir: 'ingress' | 'egress', s: OrderedRulesShape): RawCnpRule[] {
  const fromTo = dir === 'ingress' ? 'from' : 'to';
  const ports = (xs: readonly [Proto, number][]) => xs.map(([p, n]) => port(p, n));
  const rules: (RawCnpRule | undefined)[] = [
    rule(dir, 'Accept', `allow-${fromTo}-${s.everything}-everything`, [nsPeer(s.everything)]),
    rule(dir, 'Deny', `deny-${fromTo}-${s.everything}-everything`, [nsPeer(s.everything)]),
    tier === 'Admin' ? rule(dir, 'Pass', `pass-${fromTo}-${s.everything}-everything`, [nsPeer(s.everything)]) : undefined,
    rule(dir, 'Deny', `deny-${fromTo}-${s.denied}-${s.deniedLabel}`, [nsPeer(s.denied)], ports(s.deniedPorts)),
    tier === 'Admin'
      ? rule(dir, 'Pass', `pass-${fromTo}-${s.denied}-${s.passLabel ?? s.deniedLabel}`, [nsPeer(s.denied)], ports(s.deniedPorts))
      : undefined,
    rule(dir, 'Accept', `allow-${fromTo}-${s.accepted}-${s.acceptedLabel}`, [nsPeer(s.accepted)], ports(s.acceptedPorts)),
    rule(dir, 'Deny', `deny-${fromTo}-${s.accepted}-everything-else`, [nsPeer(s.accepted)]),
  ];
  return rules.filter((r): r is RawCnpRule => r !== undefined);
}

interface ProtocolFile {
  readonly dir: 'ingress' | 'egress';
  readonly proto: Proto;
  readonly subject: House;
  readonly shape: OrderedRulesShape;
  /** The admin file's name and priority (the baseline one is `default` at 10). */
  readonly adminName: string;
  readonly adminPriority: number;
}

const one = (p: Proto, n: number): OrderedRulesShape['deniedPorts'] => [[p, n]];

const PROTOCOL_FILES: readonly ProtocolFile[] = [
  {
    dir: 'ingress',
    proto: 'tcp',
    subject: 'gryffindor',
    adminName: 'ingress-tcp',
    adminPriority: 3,
    shape: {
      everything: 'ravenclaw',
      denied: 'slytherin',
      deniedPorts: one('tcp', 80),
      deniedLabel: 'at-port-80',
      accepted: 'hufflepuff',
      acceptedPorts: one('tcp', 80),
      acceptedLabel: 'at-port-80',
    },
  },
  {
    dir: 'ingress',
    proto: 'udp',
    subject: 'hufflepuff',
    adminName: 'ingress-udp',
    adminPriority: 4,
    shape: {
      everything: 'ravenclaw',
      denied: 'slytherin',
      deniedPorts: one('udp', 5353),
      deniedLabel: 'at-port-5353',
      accepted: 'gryffindor',
      acceptedPorts: one('udp', 53),
      acceptedLabel: 'at-port-53',
    },
  },
  {
    dir: 'ingress',
    proto: 'sctp',
    subject: 'ravenclaw',
    adminName: 'ingress-sctp',
    adminPriority: 5,
    shape: {
      everything: 'gryffindor',
      denied: 'slytherin',
      deniedPorts: one('sctp', 9003),
      deniedLabel: 'at-port-9003',
      accepted: 'hufflepuff',
      acceptedPorts: one('sctp', 9003),
      acceptedLabel: 'at-port-9003',
    },
  },
  {
    dir: 'egress',
    proto: 'tcp',
    subject: 'gryffindor',
    adminName: 'egress-tcp',
    adminPriority: 6,
    shape: {
      everything: 'ravenclaw',
      denied: 'slytherin',
      deniedPorts: one('tcp', 80),
      deniedLabel: 'at-port-80',
      accepted: 'hufflepuff',
      acceptedPorts: one('tcp', 8080),
      acceptedLabel: 'at-port-8080',
    },
  },
  {
    dir: 'egress',
    proto: 'udp',
    subject: 'hufflepuff',
    adminName: 'egress-udp',
    adminPriority: 7,
    shape: {
      everything: 'ravenclaw',
      denied: 'slytherin',
      deniedPorts: one('udp', 5353),
      deniedLabel: 'at-port-5353',
      accepted: 'gryffindor',
      acceptedPorts: one('udp', 53),
      acceptedLabel: 'at-port-53',
    },
  },
  {
    dir: 'egress',
    proto: 'sctp',
    subject: 'ravenclaw',
    adminName: 'egress-sctp',
    adminPriority: 8,
    shape: {
      everything: 'gryffindor',
      denied: 'slytherin',
      deniedPorts: one('sctp', 9003),
      deniedLabel: 'at-port-9003',
      accepted: 'hufflepuff',
      acceptedPorts: one('sctp', 9003),
      acceptedLabel: 'at-port-9003',
    },
  },
];

function protocolFile(dir: 'ingress' | 'egress', proto: Proto): ProtocolFile {
  const f = PROTOCOL_FILES.find((x) => x.dir === dir && x.proto === proto);
  if (f === undefined) throw new Error(`no ${dir} ${proto} file`);
  return f;
}

/** standard-<dir>-<proto>-rules.yaml of a tier. */
function protocolPolicy(tier: 'Admin' | 'Baseline', f: ProtocolFile): RawCnp {
  return clusterNetworkPolicy(tier === 'Admin' ? f.adminName : 'default', {
    tier,
    priority: tier === 'Admin' ? f.adminPriority : 10,
    subject: { namespaces: byName(f.subject) },
    [f.dir]: orderedRules(tier, f.dir, f.shape),
  });
}

/** standard-gress-rules-combined.yaml of a tier (admin `gress-rules` at 15, baseline `default` at 10; subject gryffindor). */
function gressPolicy(tier: 'Admin' | 'Baseline'): RawCnp {
  const three = (t: number, u: number, s: number): [Proto, number][] => [
    ['tcp', t],
    ['udp', u],
    ['sctp', s],
  ];
  return clusterNetworkPolicy(tier === 'Admin' ? 'gress-rules' : 'default', {
    tier,
    priority: tier === 'Admin' ? 15 : 10,
    subject: { namespaces: byName('gryffindor') },
    ingress: orderedRules(tier, 'ingress', {
      everything: 'ravenclaw',
      denied: 'slytherin',
      deniedPorts: three(80, 53, 9003),
      deniedLabel: 'at-port-80-53-9003',
      accepted: 'hufflepuff',
      acceptedPorts: three(80, 5353, 9003),
      acceptedLabel: 'at-port-80-5353-9003',
    }),
    egress: orderedRules(tier, 'egress', {
      everything: 'ravenclaw',
      denied: 'slytherin',
      deniedPorts: three(80, 53, 9003),
      deniedLabel: 'at-ports-80-53-9003',
      passLabel: 'at-port-80-53-9003',
      accepted: 'hufflepuff',
      acceptedPorts: three(8080, 5353, 9003),
      acceptedLabel: tier === 'Admin' ? 'at-ports-8080-5353-9003' : 'at-ports-8080-5353',
    }),
  });
}

// --- the per-protocol tests --------------------------------------------------

/**
 * The probes of the per-protocol tests' subtests, in order: (1) allow, rule
 * ordering; (2) allow at the port; (3) deny, rule ordering (after swapping
 * rules 0 and 1); (4) deny at the port; admin only: (5) pass, rule ordering
 * (after swapping 0 and 2); (6) pass at the port (after swapping 3 and 4).
 * The baseline tests' first four subtests probe exactly as the admin ones.
 */
const PROTOCOL_PROBES: Readonly<Record<string, readonly (readonly CnpProbe[])[]>> = {
  'ingress tcp': [
    [poke(ll0, hp0, 'tcp', 80, true), poke(ll1, hp0, 'tcp', 8080, true)],
    [poke(cd0, hp1, 'tcp', 80, true), poke(cd1, hp1, 'tcp', 8080, false)],
    [poke(ll0, hp1, 'tcp', 80, false), poke(ll1, hp1, 'tcp', 8080, false)],
    [poke(dm0, hp0, 'tcp', 80, false), poke(dm1, hp0, 'tcp', 8080, true)],
    [poke(ll0, hp0, 'tcp', 80, true), poke(ll1, hp0, 'tcp', 8080, true)],
    [poke(dm0, hp0, 'tcp', 80, true), poke(dm1, hp0, 'tcp', 8080, true)],
  ],
  'ingress udp': [
    [poke(ll0, cd0, 'udp', 53, true), poke(ll1, cd0, 'udp', 5353, true)],
    [poke(hp0, cd1, 'udp', 53, true), poke(hp1, cd1, 'udp', 5353, false)],
    [poke(ll0, cd1, 'udp', 53, false), poke(ll1, cd1, 'udp', 5353, false)],
    [poke(dm0, cd0, 'udp', 5353, false), poke(dm1, cd0, 'udp', 53, true)],
    [poke(ll0, cd1, 'udp', 5353, true), poke(ll1, cd1, 'udp', 53, true)],
    [poke(dm0, cd0, 'udp', 5353, true), poke(dm1, cd0, 'udp', 53, true)],
  ],
  'ingress sctp': [
    [poke(hp0, ll0, 'sctp', 9003, true), poke(hp1, ll0, 'sctp', 9005, true)],
    [poke(cd0, ll1, 'sctp', 9003, true), poke(cd1, ll1, 'sctp', 9005, false)],
    [poke(hp0, ll1, 'sctp', 9003, false), poke(hp1, ll1, 'sctp', 9005, false)],
    [poke(dm0, ll0, 'sctp', 9003, false), poke(dm1, ll0, 'sctp', 9005, true)],
    [poke(hp0, ll1, 'sctp', 9003, true), poke(hp1, ll1, 'sctp', 9005, true)],
    [poke(dm0, ll0, 'sctp', 9003, true), poke(dm1, ll0, 'sctp', 9005, true)],
  ],
  'egress tcp': [
    [poke(hp0, ll0, 'tcp', 80, true), poke(hp1, ll0, 'tcp', 8080, true)],
    [poke(hp0, cd1, 'tcp', 8080, true), poke(hp1, cd1, 'tcp', 80, false)],
    [poke(hp0, ll1, 'tcp', 80, false), poke(hp1, ll1, 'tcp', 8080, false)],
    [poke(hp0, dm0, 'tcp', 80, false), poke(hp1, dm0, 'tcp', 8080, true)],
    [poke(hp0, ll0, 'tcp', 80, true), poke(hp1, ll0, 'tcp', 8080, true)],
    [poke(hp0, dm0, 'tcp', 80, true), poke(hp1, dm0, 'tcp', 8080, true)],
  ],
  'egress udp': [
    [poke(cd0, ll0, 'udp', 53, true), poke(cd1, ll0, 'udp', 5353, true)],
    [poke(cd0, hp1, 'udp', 53, true), poke(cd1, hp1, 'udp', 5353, false)],
    [poke(cd0, ll1, 'udp', 53, false), poke(cd1, ll1, 'udp', 5353, false)],
    [poke(cd0, dm0, 'udp', 5353, false), poke(cd1, dm0, 'udp', 53, true)],
    [poke(cd0, ll1, 'udp', 5353, true), poke(cd1, ll1, 'udp', 53, true)],
    [poke(cd0, dm0, 'udp', 5353, true), poke(cd1, dm0, 'udp', 53, true)],
  ],
  'egress sctp': [
    [poke(ll0, hp0, 'sctp', 9003, true), poke(ll1, hp0, 'sctp', 9005, true)],
    [poke(ll0, cd1, 'sctp', 9003, true), poke(ll1, cd1, 'sctp', 9005, false)],
    [poke(ll0, hp1, 'sctp', 9003, false), poke(ll1, hp1, 'sctp', 9005, false)],
    [poke(ll0, dm0, 'sctp', 9003, false), poke(ll1, dm0, 'sctp', 9005, true)],
    [poke(ll0, hp1, 'sctp', 9003, true), poke(ll1, hp1, 'sctp', 9005, true)],
    [poke(ll0, dm0, 'sctp', 9003, true), poke(ll1, dm0, 'sctp', 9005, true)],
  ],
};

function probesOf(key: string, i: number): CnpProbe[] {
  const p = PROTOCOL_PROBES[key]?.[i];
  if (p === undefined) throw new Error(`no probes ${key} #${i}`);
  return [...p];
}

function protocolCase(tier: 'Admin' | 'Baseline', dir: 'ingress' | 'egress', proto: Proto): CnpCase {
  const f = protocolFile(dir, proto);
  const policy = protocolPolicy(tier, f);
  const name = policy.metadata.name;
  const PROTO = P(proto);
  const key = `${dir} ${proto}`;
  const Dir = dir === 'ingress' ? 'Ingress' : 'Egress';
  const steps = [
    step(
      `Should support an 'allow-${dir}' policy for ${PROTO} protocol; ensure rule ordering is respected`,
      [],
      probesOf(key, 0),
    ),
    step(`Should support an 'allow-${dir}' policy for ${PROTO} protocol at the specified port`, [], probesOf(key, 1)),
    step(
      `Should support an 'deny-${dir}' policy for ${PROTO} protocol; ensure rule ordering is respected`,
      [swapRules(name, [dir], 0, 1)],
      probesOf(key, 2),
    ),
    step(`Should support a 'deny-${dir}' policy for ${PROTO} protocol at the specified port`, [], probesOf(key, 3)),
  ];
  if (tier === 'Admin') {
    steps.push(
      step(
        `Should support an 'pass-${dir}' policy for ${PROTO} protocol; ensure rule ordering is respected`,
        [swapRules(name, [dir], 0, 2)],
        probesOf(key, 4),
      ),
      step(
        `Should support a 'pass-${dir}' policy for ${PROTO} protocol at the specified port`,
        [swapRules(name, [dir], 3, 4)],
        probesOf(key, 5),
      ),
    );
  }
  const prefix = tier === 'Admin' ? 'admin-network-policy' : 'baseline-admin-network-policy';
  const folder = tier === 'Admin' ? 'admin_tier' : 'baseline_tier';
  return {
    id: `CNP${tier}Tier${Dir}${PROTO}`,
    source: 'upstream',
    feature: 'standard',
    origin: `tests/${prefix}-standard-${dir}-${proto}-rules.go, base/${folder}/standard-${dir}-${proto}-rules.yaml`,
    manifests: [policy],
    steps,
  };
}

// --- the combined-protocols tests (standard-gress-rules.go) -------------------

const GRESS_PROBES: readonly CnpProbe[][] = [
  [
    poke(hp0, ll0, 'tcp', 80, true),
    poke(hp1, ll0, 'udp', 53, true),
    poke(hp0, ll0, 'sctp', 9003, true),
    poke(ll0, hp0, 'tcp', 80, true),
    poke(ll1, hp0, 'udp', 53, true),
    poke(ll1, hp0, 'sctp', 9003, true),
  ],
  [
    poke(hp0, cd1, 'tcp', 8080, true),
    poke(hp1, cd1, 'tcp', 80, false),
    poke(hp0, cd1, 'udp', 5353, true),
    poke(hp1, cd1, 'udp', 53, false),
    poke(hp0, cd1, 'sctp', 9003, true),
    poke(hp1, cd1, 'sctp', 9005, false),
    poke(cd0, hp1, 'tcp', 80, true),
    poke(cd1, hp1, 'tcp', 8080, false),
    poke(cd0, hp1, 'udp', 5353, true),
    poke(cd1, hp1, 'udp', 53, false),
    poke(cd0, hp1, 'sctp', 9003, true),
    poke(cd1, hp1, 'sctp', 9005, false),
  ],
  [
    poke(hp0, ll1, 'tcp', 80, false),
    poke(hp1, ll1, 'udp', 53, false),
    poke(hp0, ll1, 'sctp', 9003, false),
    poke(ll0, hp1, 'tcp', 80, false),
    poke(ll1, hp1, 'udp', 53, false),
    poke(ll1, hp1, 'sctp', 9003, false),
  ],
  [
    poke(hp0, dm0, 'tcp', 80, false),
    poke(hp1, dm0, 'tcp', 8080, true),
    poke(hp0, dm0, 'udp', 53, false),
    poke(hp1, dm0, 'udp', 5353, true),
    poke(hp0, dm0, 'sctp', 9003, false),
    poke(hp1, dm0, 'sctp', 9005, true),
    poke(dm0, hp0, 'tcp', 80, false),
    poke(dm1, hp0, 'tcp', 8080, true),
    poke(dm0, hp0, 'udp', 53, false),
    poke(dm1, hp0, 'udp', 5353, true),
    poke(dm0, hp0, 'sctp', 9003, false),
    poke(dm1, hp0, 'sctp', 9005, true),
  ],
  [
    poke(hp0, ll0, 'tcp', 80, true),
    poke(hp0, ll0, 'udp', 5353, true),
    poke(hp0, ll0, 'sctp', 9003, true),
    poke(ll0, hp0, 'tcp', 80, true),
    poke(ll1, hp0, 'udp', 53, true),
    poke(ll1, hp0, 'sctp', 9003, true),
  ],
  [
    poke(hp0, dm0, 'tcp', 80, true),
    poke(hp1, dm0, 'tcp', 8080, true),
    poke(hp0, dm0, 'udp', 53, true),
    poke(hp1, dm0, 'udp', 5353, true),
    poke(hp0, dm0, 'sctp', 9003, true),
    poke(hp1, dm0, 'sctp', 9005, true),
    poke(dm0, hp0, 'tcp', 80, true),
    poke(dm1, hp0, 'tcp', 8080, true),
    poke(dm0, hp0, 'udp', 53, true),
    poke(dm1, hp0, 'udp', 5353, true),
    poke(dm0, hp0, 'sctp', 9003, true),
    poke(dm1, hp0, 'sctp', 9005, true),
  ],
];

function gressCase(tier: 'Admin' | 'Baseline'): CnpCase {
  const policy = gressPolicy(tier);
  const name = policy.metadata.name;
  const both = ['egress', 'ingress'] as const;
  const probes = (i: number) => [...(GRESS_PROBES[i] ?? [])];
  const steps = [
    step("Should support an 'allow-gress' policy across different protocols", [], probes(0)),
    step("Should support an 'allow-gress' policy across different protocols at the specified ports", [], probes(1)),
    step("Should support an 'deny-gress' policy across different protocols", [swapRules(name, both, 0, 1)], probes(2)),
    step("Should support a 'deny-gress' policy across different protocols at the specified ports", [], probes(3)),
  ];
  if (tier === 'Admin') {
    steps.push(
      step("Should support an 'pass-gress' policy across different protocols", [swapRules(name, both, 0, 2)], probes(4)),
      step(
        "Should support a 'pass-gress' policy across different protocols at the specified ports",
        [swapRules(name, both, 3, 4)],
        probes(5),
      ),
    );
  }
  const prefix = tier === 'Admin' ? 'admin-network-policy' : 'baseline-admin-network-policy';
  const folder = tier === 'Admin' ? 'admin_tier' : 'baseline_tier';
  return {
    id: `CNP${tier}TierGress`,
    source: 'upstream',
    feature: 'standard',
    origin: `tests/${prefix}-standard-gress-rules.go, base/${folder}/standard-gress-rules-combined.yaml`,
    manifests: [policy],
    steps,
  };
}

// --- inline CIDR peers (standard-egress-inline-cidr-rules.go) ------------------

function hostCIDR(ip: string, family: Family): string {
  return `${ip}/${family === 4 ? 32 : 128}`;
}

function inlineCIDRCase(tier: 'Admin' | 'Baseline', ctx: CnpContext): CnpCase {
  const policy =
    tier === 'Admin'
      ? clusterNetworkPolicy('inline-cidr-as-peers-example', {
          tier: 'Admin',
          priority: 85,
          subject: { pods: housePods('gryffindor') },
          egress: [
            rule('egress', 'Accept', 'allow-egress-to-slytherin', [{ pods: housePods('slytherin') }]),
            rule('egress', 'Deny', 'deny-egress-to-internet', [{ networks: ['0.0.0.0/0', '::/0'] }]),
          ],
        })
      : clusterNetworkPolicy('default', {
          tier: 'Baseline',
          priority: 10,
          subject: { namespaces: byName('gryffindor') },
          egress: [
            rule('egress', 'Accept', 'allow-egress-to-slytherin', [{ pods: housePods('slytherin') }]),
            rule('egress', 'Deny', 'deny-egress-to-internet', [{ networks: ['0.0.0.0/0', '::/0'] }]),
          ],
        });
  const all = (to: string, connect: boolean): CnpProbe[] => [
    poke(hp1, to, 'tcp', 80, connect),
    poke(hp1, to, 'udp', 53, connect),
    poke(hp1, to, 'sctp', 9003, connect),
  ];
  const deny = "Should support a 'deny-egress' rule policy for egress-cidr-peer";
  const cidrs = [ll0, cd0].map((k) => hostCIDR(ctx.podIP(k, ctx.family), ctx.family));
  const prefix = tier === 'Admin' ? 'admin-network-policy' : 'baseline-admin-network-policy';
  const folder = tier === 'Admin' ? 'admin_tier' : 'baseline_tier';
  return {
    id: `CNP${tier}TierEgressInlineCIDRPeers`,
    source: 'upstream',
    feature: 'standard',
    origin: `tests/${prefix}-standard-egress-inline-cidr-rules.go, base/${folder}/standard-egress-inline-cidr-rules.yaml`,
    manifests: [policy],
    steps: [
      step(`${deny} [part 1]`, [], [...all(ll0, false), ...all(cd0, false), ...all(dm0, true)]),
      step(
        `${deny} [part 2: slytherin relabelled conformance-house=denied-namespace-label]`,
        [{ type: 'setNamespaceLabels', name: houseNamespace('slytherin'), labels: { [HOUSE_LABEL]: 'denied-namespace-label' } }],
        all(dm0, false),
      ),
      step(
        `${deny} [part 3: slytherin relabelled conformance-house=slytherin again]`,
        [{ type: 'setNamespaceLabels', name: houseNamespace('slytherin'), labels: { [HOUSE_LABEL]: 'slytherin' } }],
        all(dm0, true),
      ),
      step(
        "Should support an 'allow-egress' rule policy for egress-cidr-peer",
        [
          {
            type: 'editPolicy',
            name: policy.metadata.name,
            what: 'insert at index0 an Accept rule to networks luna-lovegood-0 and cedric-diggory-0 (/32 or /128)',
            edit: (s) => ({
              ...s,
              egress: [rule('egress', 'Accept', 'allow-egress-to-specific-podIPs', [{ networks: cidrs }]), ...(s.egress ?? [])],
            }),
          },
        ],
        [...all(ll0, true), ...all(cd0, true), ...all(ll1, false), ...all(cd1, false)],
      ),
    ],
  };
}

// --- API integration and priority ---------------------------------------------

function integrationCase(): CnpCase {
  const np = networkPolicy(houseNamespace('gryffindor'), 'allow-gress-from-to-slytherin-to-gryffindor', {
    podSelector: {},
    policyTypes: ['Ingress', 'Egress'],
    ingress: [{ from: [{ namespaceSelector: byHouse('slytherin') }] }],
    egress: [{ to: [{ namespaceSelector: byHouse('slytherin') }] }],
  });
  const denyBoth = (tier: 'Admin' | 'Baseline', name: string) =>
    clusterNetworkPolicy(name, {
      tier,
      priority: 10,
      subject: { namespaces: byHouse('gryffindor') },
      ingress: [rule('ingress', 'Deny', 'deny-all-ingress-from-slytherin', [{ namespaces: byHouse('slytherin') }])],
      egress: [rule('egress', 'Deny', 'deny-all-egress-to-slytherin', [{ namespaces: byHouse('slytherin') }])],
    });
  const toPass = (dir: 'ingress' | 'egress') =>
    setRule('pass-example', dir, 0, `change ${dir} rule from "deny" to "pass"`, (r) => ({ ...r, action: 'Pass' }));
  const fromSlytherin = (connect: boolean) => [poke(dm0, hp0, 'tcp', 80, connect), poke(dm1, hp0, 'tcp', 8080, connect)];
  const toSlytherin = (connect: boolean) => [poke(hp0, dm0, 'tcp', 80, connect), poke(hp1, dm0, 'tcp', 8080, connect)];
  return {
    id: 'CNPAdminTierIntegration',
    source: 'upstream',
    feature: 'standard',
    origin: 'tests/admin-network-policy-standard-integration.go, base/api_integration/standard-anp-np-banp.yaml',
    manifests: [denyBoth('Admin', 'pass-example'), np, denyBoth('Baseline', 'default')],
    steps: [
      step('Should Deny traffic from slytherin to gryffindor respecting admin CNP', [], fromSlytherin(false)),
      step('Should Deny traffic to slytherin from gryffindor respecting admin CNP', [], toSlytherin(false)),
      step(
        "Should support a 'pass-ingress' policy for admin CNP and respect the match for network policy",
        [toPass('ingress')],
        fromSlytherin(true),
      ),
      step(
        "Should support a 'pass-egress' policy for admin CNP and respect the match for network policy",
        [toPass('egress')],
        toSlytherin(true),
      ),
      step(
        "Should support a 'pass-ingress' policy for admin CNP and respect the match for baseline cluster network policy",
        [{ type: 'delete', kind: 'NetworkPolicy', namespace: houseNamespace('gryffindor'), name: np.metadata.name }],
        fromSlytherin(false),
      ),
      step(
        "Should support a 'pass-egress' policy for admin CNP and respect the match for baseline cluster network policy",
        [],
        toSlytherin(false),
      ),
    ],
  };
}

function priorityCase(): CnpCase {
  const gryffindorToSlytherin = (
    tier: 'Admin' | 'Baseline',
    name: string,
    priority: number,
    action: RawCnpAction,
    verb: string,
  ) =>
    clusterNetworkPolicy(name, {
      tier,
      priority,
      subject: { pods: housePods('gryffindor') },
      ingress: [rule('ingress', action, `${verb}-all-ingress-from-slytherin`, [{ pods: housePods('slytherin') }])],
      egress: [rule('egress', action, `${verb}-all-egress-to-slytherin`, [{ pods: housePods('slytherin') }])],
    });
  const fromSlytherin = (connect: boolean) => [poke(dm0, hp0, 'tcp', 80, connect), poke(dm1, hp0, 'tcp', 8080, connect)];
  const toSlytherin = (connect: boolean) => [poke(hp0, dm0, 'tcp', 80, connect), poke(hp1, dm0, 'tcp', 8080, connect)];
  const moved = 'old-priority-60-new-priority-40-example';
  return {
    id: 'CNPAdminTierPriorityField',
    source: 'upstream',
    feature: 'standard',
    origin: 'tests/admin-network-policy-standard-priority.go, base/admin_tier/standard-priority-field.yaml',
    manifests: [
      gryffindorToSlytherin('Admin', 'priority-50-example', 50, 'Deny', 'deny'),
      gryffindorToSlytherin('Admin', moved, 60, 'Pass', 'pass'),
      gryffindorToSlytherin('Baseline', 'default', 10, 'Accept', 'allow'),
    ],
    steps: [
      step('Should Deny traffic from slytherin to gryffindor respecting admin CNP', [], fromSlytherin(false)),
      step('Should Deny traffic to slytherin from gryffindor respecting admin CNP', [], toSlytherin(false)),
      step(
        'Should respect admin CNP priority field; thus passing both ingress and egress traffic over to baseline CNP',
        [{ type: 'editPolicy', name: moved, what: 'change priority from 60 to 40', edit: (s) => ({ ...s, priority: 40 }) }],
        [...fromSlytherin(true), ...toSlytherin(true)],
      ),
    ],
  };
}

// --- experimental: named ports, node peers --------------------------------------

function namedPortCase(
  id: string,
  origin: string,
  policy: RawCnp,
  dir: 'ingress' | 'egress',
  index: number,
  portName: string,
  probes: CnpProbe[],
): CnpCase {
  return {
    id,
    source: 'upstream',
    feature: 'ClusterNetworkPolicyNamedPorts',
    origin,
    manifests: [policy],
    steps: [
      step(
        `Should support an 'allow-${dir}' policy for named port`,
        [
          setRule(policy.metadata.name, dir, index, `${dir}[${index}].protocols = [destinationNamedPort: ${portName}]`, (r) => ({
            ...r,
            protocols: [named(portName)],
          })),
        ],
        probes,
      ),
    ],
  };
}

function nodePeersCases(ctx: CnpContext): CnpCase[] {
  const hnp = (i: number): number => {
    const v = ctx.hostNetworkPorts[i];
    if (v === undefined) throw new Error(`HostNetworkPorts[${i}] missing`);
    return v;
  };
  const admin = clusterNetworkPolicy('node-and-cidr-as-peers-example', {
    tier: 'Admin',
    priority: 75,
    subject: { pods: housePods('gryffindor') },
    egress: [
      rule('egress', 'Accept', `allow-egress-to-${hnp(0)}-on-nodes`, [{ nodes: linuxNodes }], [port('tcp', hnp(0))]),
      rule('egress', 'Pass', `pass-egress-to-${hnp(2)}-on-nodes`, [{ nodes: linuxNodes }], [port('udp', hnp(2))]),
      rule('egress', 'Deny', 'deny-egress-to-slytherin-and-nodes-and-internet', [
        { pods: housePods('slytherin') },
        { nodes: linuxNodes },
        { networks: ['0.0.0.0/0', '::/0'] },
      ]),
    ],
  });
  const baseline = clusterNetworkPolicy('default', {
    tier: 'Baseline',
    priority: 10,
    subject: { namespaces: byName('gryffindor') },
    egress: [
      rule(
        'egress',
        'Accept',
        `allow-egress-to-${hnp(0)}-on-nodes`,
        [{ nodes: linuxNodes }],
        [{ tcp: { destinationPort: { range: { start: hnp(0), end: hnp(1) } } } }],
      ),
      rule('egress', 'Deny', 'deny-egress-to-nodes-and-internet', [{ nodes: linuxNodes }, { networks: ['0.0.0.0/0', '::/0'] }]),
    ],
  });
  return [
    {
      id: 'CNPAdminTierEgressNodePeers',
      source: 'upstream',
      feature: 'ClusterNetworkPolicyEgressNodePeers',
      origin: 'tests/admin-network-policy-experimental-egress-rules.go, base/admin_tier/experimental-egress-selector-rules.yaml',
      note: 'the server is the hostNetwork pod centaur-1: probes go to its node address',
      manifests: [admin],
      steps: [
        step("Should support an 'allow-egress' rule policy for egress-node-peer", [], [poke(hp1, centaur1, 'tcp', hnp(0), true)]),
        step("Should support a 'pass-egress' rule policy for egress-node-peer", [], [poke(hp1, centaur1, 'udp', hnp(2), true)]),
        step(
          "Should support a 'deny-egress' rule policy for egress-node-peer",
          [],
          [
            poke(hp1, centaur1, 'tcp', hnp(1), false),
            poke(hp1, centaur1, 'udp', hnp(4), false),
            poke(hp1, centaur1, 'sctp', hnp(6), false),
          ],
        ),
      ],
    },
    {
      id: 'CNPBaselineTierEgressNodePeers',
      source: 'upstream',
      feature: 'ClusterNetworkPolicyEgressNodePeers',
      origin:
        'tests/baseline-admin-network-policy-experimental-egress-rules.go, base/baseline_tier/experimental-egress-selector-rules.yaml',
      note: 'the server is the hostNetwork pod centaur-1: probes go to its node address',
      manifests: [baseline],
      steps: [
        step(
          "Should support an 'allow-egress' rule policy for egress-node-peer",
          [],
          [poke(hp0, centaur1, 'tcp', hnp(0), true), poke(hp1, centaur1, 'tcp', hnp(1), true)],
        ),
        step(
          "Should support a 'deny-egress' rule policy for egress-node-peer",
          [],
          [poke(hp1, centaur1, 'udp', hnp(4), false), poke(hp1, centaur1, 'sctp', hnp(6), false)],
        ),
      ],
    },
  ];
}

// --- ours -----------------------------------------------------------------------

/**
 * domainNames (experimental; upstream's suite has no test of it). We do not
 * resolve names: a domainNames peer matches nothing, so an Accept rule with
 * only domainNames never accepts, and the rules after it decide. This is our
 * fail-closed reading, not an upstream expectation (upstream would accept
 * connections to the addresses the names resolve to; none of these pods is
 * one, so the probes below hold under both readings).
 */
function domainNamesCase(): CnpCase {
  return {
    id: 'OursDomainNamesAcceptMatchesNothing',
    source: 'ours',
    feature: 'domainNames',
    origin: 'fail-closed reading of egress domainNames (docs: an Accept rule with only domainNames matches nothing)',
    note: 'our reading, not upstream: domainNames are not enforced; the Accept rule matches nothing and later rules decide',
    manifests: [
      clusterNetworkPolicy('domain-names-then-deny', {
        tier: 'Admin',
        priority: 20,
        subject: { namespaces: byName('gryffindor') },
        egress: [
          rule('egress', 'Accept', 'allow-to-example-domains', [{ domainNames: ['*.example.com', 'example.org'] }]),
          rule('egress', 'Deny', 'deny-to-ravenclaw', [nsPeer('ravenclaw')]),
        ],
      }),
    ],
    steps: [
      step(
        'an Accept rule with only domainNames accepts nothing: the Deny after it decides',
        [],
        [poke(hp0, ll0, 'tcp', 80, false), poke(hp1, ll1, 'udp', 53, false), poke(hp0, ll1, 'sctp', 9003, false)],
      ),
      step(
        'traffic no rule matches goes on (default allow)',
        [],
        [poke(hp0, cd0, 'tcp', 80, true), poke(hp1, dm1, 'udp', 53, true)],
      ),
      step(
        'in the Baseline tier too: the Accept never matches, the Deny after it does',
        [
          { type: 'delete', kind: 'ClusterNetworkPolicy', name: 'domain-names-then-deny' },
          {
            type: 'upsert',
            object: clusterNetworkPolicy('default', {
              tier: 'Baseline',
              priority: 10,
              subject: { namespaces: byName('gryffindor') },
              egress: [
                rule('egress', 'Accept', 'allow-to-example-domains', [{ domainNames: ['*.example.com'] }]),
                rule('egress', 'Deny', 'deny-to-everything', [{ networks: ['0.0.0.0/0', '::/0'] }]),
              ],
            }),
          },
        ],
        [poke(hp0, ll0, 'tcp', 80, false), poke(hp0, cd0, 'udp', 5353, false), poke(hp1, dm0, 'sctp', 9005, false)],
      ),
    ],
  };
}

/**
 * kube-router's nftables backend once let an `ipBlock.except` of one rule
 * drop traffic that a later rule allowed. The same mistake across tiers: a
 * Deny (or an except) that matches part of the traffic must decide only that
 * part; what it does not match goes on to the next rule, the next policy, the
 * next tier.
 */
function exceptAcrossTiersCase(ctx: CnpContext): CnpCase {
  const ip = (k: string) => hostCIDR(ctx.podIP(k, ctx.family), ctx.family);
  const big = largeCIDRFor(ctx.podIP(ll0, ctx.family));
  const npName = 'egress-except-then-ravenclaw-80';
  return {
    id: 'OursExceptDoesNotBlockLaterRules',
    source: 'ours',
    feature: 'standard',
    origin:
      'kube-router regression: an except in one rule blocked what a later rule allowed; here across rules, policies and tiers',
    manifests: [
      networkPolicy(houseNamespace('gryffindor'), npName, {
        podSelector: {},
        policyTypes: ['Egress'],
        egress: [
          { to: [{ ipBlock: { cidr: big, except: [ip(ll0)] } }] },
          { to: [{ namespaceSelector: byHouse('ravenclaw') }], ports: [{ protocol: 'TCP', port: 80 }] },
        ],
      }),
    ],
    steps: [
      step(
        'NetworkPolicy: the except of rule 0 leaves luna-lovegood-0 to rule 1 (TCP 80 only)',
        [],
        [
          poke(hp0, ll0, 'tcp', 80, true),
          poke(hp0, ll0, 'tcp', 8080, false),
          poke(hp0, ll0, 'udp', 53, false),
          poke(hp0, ll1, 'tcp', 8080, true),
          poke(hp1, cd0, 'udp', 53, true),
        ],
      ),
      step(
        'Admin: a Deny of one address at one port, then an Accept of its namespace: only that port is denied',
        [
          {
            type: 'upsert',
            object: clusterNetworkPolicy('admin-deny-one-port-then-accept', {
              tier: 'Admin',
              priority: 10,
              subject: { namespaces: byName('gryffindor') },
              egress: [
                rule('egress', 'Deny', 'deny-luna-lovegood-1-tcp-8080', [{ networks: [ip(ll1)] }], [port('tcp', 8080)]),
                rule('egress', 'Accept', 'accept-ravenclaw', [nsPeer('ravenclaw')]),
              ],
            }),
          },
        ],
        [
          poke(hp0, ll1, 'tcp', 8080, false),
          poke(hp0, ll1, 'tcp', 80, true),
          poke(hp0, ll1, 'udp', 5353, true),
          // The Accept overrides the NetworkPolicy's except: the admin tier decides first.
          poke(hp0, ll0, 'tcp', 8080, true),
          poke(hp1, ll0, 'sctp', 9003, true),
          // Not matched by the admin policy: the NetworkPolicy decides.
          poke(hp1, cd0, 'tcp', 80, true),
        ],
      ),
      step(
        'Admin Deny of one port, no Accept: the rest goes to the NetworkPolicy (its except, then its TCP 80 rule)',
        [setRule('admin-deny-one-port-then-accept', 'egress', 1, 'rule 1 becomes a Pass', (r) => ({ ...r, action: 'Pass' }))],
        [
          poke(hp0, ll1, 'tcp', 8080, false),
          poke(hp0, ll1, 'tcp', 80, true),
          poke(hp0, ll0, 'tcp', 80, true),
          poke(hp0, ll0, 'tcp', 8080, false),
          poke(hp1, cd1, 'udp', 53, true),
        ],
      ),
      step(
        'Baseline: a Deny of one address at one port does not block the rest of a pod NetworkPolicy leaves unisolated',
        [
          { type: 'delete', kind: 'NetworkPolicy', namespace: houseNamespace('gryffindor'), name: npName },
          {
            type: 'upsert',
            object: clusterNetworkPolicy('default', {
              tier: 'Baseline',
              priority: 10,
              subject: { namespaces: byName('gryffindor') },
              egress: [
                rule('egress', 'Deny', 'deny-luna-lovegood-0-tcp-80', [{ networks: [ip(ll0)] }], [port('tcp', 80)]),
                rule('egress', 'Accept', 'accept-ravenclaw', [nsPeer('ravenclaw')]),
                rule('egress', 'Deny', 'deny-everything-else', [{ networks: ['0.0.0.0/0', '::/0'] }]),
              ],
            }),
          },
        ],
        [
          // Admin: Deny luna-lovegood-1 TCP 8080, Pass the rest of ravenclaw to the baseline.
          poke(hp0, ll1, 'tcp', 8080, false),
          poke(hp0, ll0, 'tcp', 80, false),
          poke(hp0, ll0, 'tcp', 8080, true),
          poke(hp0, ll1, 'tcp', 80, true),
          poke(hp1, ll0, 'udp', 53, true),
          poke(hp1, cd0, 'tcp', 80, false),
          poke(hp1, dm1, 'sctp', 9005, false),
        ],
      ),
    ],
  };
}

// --- the list -----------------------------------------------------------------------

export function cnpConformanceCases(ctx: CnpContext = defaultCnpContext()): CnpCase[] {
  const tiers = ['Admin', 'Baseline'] as const;
  const dirs = ['ingress', 'egress'] as const;
  const protos: Proto[] = ['tcp', 'udp', 'sctp'];
  return [
    ...tiers.flatMap((t) => dirs.flatMap((d) => protos.map((p) => protocolCase(t, d, p)))),
    ...tiers.map(gressCase),
    ...tiers.map((t) => inlineCIDRCase(t, ctx)),
    integrationCase(),
    priorityCase(),
    namedPortCase(
      'CNPAdminTierEgressNamedPort',
      'tests/admin-network-policy-experimental-egress-rules.go, base/admin_tier/standard-egress-tcp-rules.yaml',
      protocolPolicy('Admin', protocolFile('egress', 'tcp')),
      'egress',
      5,
      'web',
      [poke(hp0, cd1, 'tcp', 80, true), poke(hp1, cd1, 'tcp', 8080, false)],
    ),
    namedPortCase(
      'CNPAdminTierIngressNamedPort',
      'tests/admin-network-policy-experimental-ingress-rules.go, base/admin_tier/standard-ingress-udp-rules.yaml',
      protocolPolicy('Admin', protocolFile('ingress', 'udp')),
      'ingress',
      5,
      'dns',
      [poke(hp0, cd1, 'udp', 53, true), poke(hp1, cd1, 'udp', 5353, false)],
    ),
    namedPortCase(
      'CNPBaselineTierEgressNamedPort',
      'tests/baseline-admin-network-policy-experimental-egress-rules.go, base/baseline_tier/standard-egress-udp-rules.yaml',
      protocolPolicy('Baseline', protocolFile('egress', 'udp')),
      'egress',
      3,
      'dns',
      [poke(cd0, hp1, 'udp', 53, true), poke(cd1, hp1, 'udp', 5353, false)],
    ),
    namedPortCase(
      'CNPBaselineTierIngressNamedPort',
      'tests/baseline-admin-network-policy-experimental-ingress-rules.go, base/baseline_tier/standard-ingress-tcp-rules.yaml',
      protocolPolicy('Baseline', protocolFile('ingress', 'tcp')),
      'ingress',
      3,
      'web',
      [poke(cd0, hp1, 'tcp', 80, true), poke(cd1, hp1, 'tcp', 8080, false)],
    ),
    ...nodePeersCases(ctx),
    domainNamesCase(),
    exceptAcrossTiersCase(ctx),
  ];
}

// --- applying changes -------------------------------------------------------------

function same(o: RawObject, kind: string, namespace: string | undefined, name: string): boolean {
  return o.kind === kind && o.metadata.name === name && (o.metadata.namespace ?? undefined) === namespace;
}

/** The objects after `changes`, in order; a change to an object that is not there throws (the case data is wrong). */
export function applyCnpChanges(objects: readonly RawObject[], changes: readonly CnpChange[]): RawObject[] {
  let out = [...objects];
  for (const c of changes) {
    switch (c.type) {
      case 'upsert': {
        const { kind, metadata } = c.object;
        out = [...out.filter((o) => !same(o, kind, metadata.namespace, metadata.name)), c.object];
        break;
      }
      case 'editPolicy': {
        const i = out.findIndex((o) => same(o, 'ClusterNetworkPolicy', undefined, c.name));
        const o = out[i] as RawCnp | undefined;
        if (o === undefined) throw new Error(`no ClusterNetworkPolicy ${c.name} to edit (${c.what})`);
        out[i] = { ...o, spec: c.edit(o.spec) } as RawCnp;
        break;
      }
      case 'delete': {
        if (!out.some((o) => same(o, c.kind, c.namespace, c.name))) throw new Error(`no ${c.kind} ${c.name} to delete`);
        out = out.filter((o) => !same(o, c.kind, c.namespace, c.name));
        break;
      }
      case 'setNamespaceLabels': {
        const i = out.findIndex((o) => same(o, 'Namespace', undefined, c.name));
        const o = out[i];
        if (o === undefined) throw new Error(`no Namespace ${c.name} to relabel`);
        out[i] = { ...o, metadata: { ...o.metadata, labels: { ...c.labels, [NAMESPACE_NAME_LABEL]: c.name } } };
        break;
      }
    }
  }
  return out;
}

/** One line per probe for reports: `ns/a -> ns/b TCP/80: connect`. */
export function describeCnpProbe(p: CnpProbe): string {
  return `${p.from} -> ${p.to} ${p.protocol}/${p.port}: ${p.connect ? 'connect' : 'blocked'}`;
}
