// Differential fuzzing of the datapath against the reference evaluator: a
// seeded fast-check property generates namespaces, pods (labels, phases, named
// ports), policies (every selector form, ipBlocks with except, numeric, named
// and ranged ports, both directions, several per pod) and a sample of probes;
// each node's ruleset is rendered and applied in a fixed simulated cluster,
// and every probe must end as verdict() says. A failure is shrunk by
// fast-check (re-probing each candidate) and printed as a self-contained
// regression file (manifests as YAML plus the probe). Tenancy is part of it:
// namespaces in two workspaces, workspace and project isolation switched on
// at random, Services with numeric and named target ports, and
// NamespaceNetworkPolicies with namespace, ipBlock and service peers (some
// naming a Service that does not exist). About half the scenarios also hold
// ClusterNetworkPolicies (policy.networking.k8s.io/v1alpha2, raw objects):
// Admin and Baseline tiers, equal and distinct priorities, namespace and pod
// subjects, Accept/Deny/Pass rules with namespace, pod, network and node
// peers and tcp/udp/sctp ports (numbers, ranges, named ports where the API
// allows them), now and then an invalid rule or a peer of an unknown type
// (fail closed), on nodes with generated labels.
import type { TierLayout } from '../../src/ruleset/options.ts';
import fc from 'fast-check';
import { buildState } from '../../src/model/normalize.ts';
import { cidrWithin, parseCIDR } from '../../src/model/ip.ts';
import type { ClusterState, Family, Protocol, TenancyConfig } from '../../src/model/types.ts';
import { verdict } from '../../src/policy/verdict.ts';
import type { Endpoint } from '../../src/policy/verdict.ts';
import { networkPolicy } from '../cases/raw.ts';
import type { RawObject, RawPolicySpec } from '../cases/raw.ts';
import { NAMESPACE_NAME_LABEL } from '../cases/upstream-model.ts';
import { OUTSIDE } from './addressing.ts';
import { Cluster } from './cluster.ts';
import type { ClusterSpec, NetworkStyle } from './cluster.ts';
import { applyState } from './enforce.ts';
import type { EnforceOptions } from './enforce.ts';
import { describeOutcome, nodeKey, OUTSIDE_KEY, runProbes } from './probe.ts';
import type { Probe, ProbeOutcome } from './probe.ts';
import { regressionToYaml } from './regression.ts';
import type { Regression, RegressionProbe, UnlistedPod } from './regression.ts';

/** TCP/UDP ports every slot and the outside host serve; probes and policies use them. */
export const PORT_POOL = [80, 81, 443, 8080, 9000] as const;
const RANGE_STARTS = [1, 80, 81, 100, 443, 1000, 8080];
const RANGE_ENDS = [81, 443, 444, 8080, 9000, 65535];
const PORT_NAMES = ['http', 'metrics', 'admin'];
const NAMESPACES = ['alpha', 'beta', 'gamma'];
const POD_KEYS = ['app', 'tier'];
const POD_VALUES = ['a', 'b', 'c'];
const NS_KEYS = ['team'];
const NS_VALUES = ['red', 'blue'];
const SLOTS = 8;
const NODES = ['node-1', 'node-2'];

export function slotKey(i: number): string {
  return `slot/${i}`;
}

/** The fixed network the fuzzer runs in: 8 pod slots over two nodes. Which pod (if any) sits in a slot is generated. */
export function fuzzClusterSpec(style: NetworkStyle): ClusterSpec {
  return {
    style,
    nodes: NODES.map((name) => ({ name })),
    pods: Array.from({ length: SLOTS }, (_, i) => ({
      key: slotKey(i),
      node: NODES[i % 2]!,
      tcp: [...PORT_POOL],
      udp: [...PORT_POOL],
      sctp: [...PORT_POOL],
    })),
    outsidePorts: [...PORT_POOL],
  };
}

// ---- generated data ----

interface GenPod {
  readonly namespace: string;
  readonly labels: Record<string, string>;
  readonly phase: 'Running' | 'Pending' | 'Succeeded';
  readonly ports: readonly { readonly name: string; readonly port: number; readonly protocol: Protocol }[];
}

/** Tenancy in the fuzzer: no DNS allowance (probes use the port pool), the nodes' InternalIPs. */
export const FUZZ_TENANCY: TenancyConfig = { dnsService: undefined, nodeLocalDNS: [], nodeAddresses: 'internal' };
const WORKSPACES = ['ws1', 'ws2'];
const SERVICES = ['svc-a', 'svc-b'];

export interface GenTenancy {
  /** Per namespace: its workspace label, or null. */
  readonly workspaceOf: readonly (string | null)[];
  readonly isolatedWorkspaces: readonly boolean[];
  /** Per namespace: kubesphere.io/network-isolate: enabled. */
  readonly isolatedProjects: readonly boolean[];
  readonly services: readonly RawObject[];
  readonly namespacePolicies: readonly RawObject[];
}

export interface Scenario {
  readonly nsLabels: readonly Record<string, string>[];
  /** Per slot: the pod there, or null (an address no pod object has). */
  readonly pods: readonly (GenPod | null)[];
  readonly policies: readonly RawObject[];
  readonly probes: readonly Probe[];
  readonly denyAction: 'drop' | 'reject';
  readonly tenancy: GenTenancy;
  /** ClusterNetworkPolicies (raw objects), none in about half the scenarios. */
  readonly clusterPolicies: readonly RawObject[];
  /** Per node (NODES): its generated labels (beside kubernetes.io/hostname), for nodes peers. */
  readonly nodeLabels: readonly Record<string, string>[];
}

/** Drops undefined fields, so the manifests say only what was generated. */
function clean<T>(v: T): T {
  if (Array.isArray(v)) return v.map(clean) as T;
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(
      Object.entries(v)
        .filter(([, x]) => x !== undefined)
        .map(([k, x]) => [k, clean(x)]),
    ) as T;
  }
  return v;
}

function selectorArb(keys: readonly string[], values: readonly string[]) {
  const req = fc.oneof(
    fc.record({
      key: fc.constantFrom(...keys),
      operator: fc.constantFrom('In', 'NotIn'),
      values: fc.subarray([...values], { minLength: 1 }),
    }),
    fc.record({ key: fc.constantFrom(...keys), operator: fc.constantFrom('Exists', 'DoesNotExist') }),
  );
  return fc
    .record({
      matchLabels: fc.option(fc.dictionary(fc.constantFrom(...keys), fc.constantFrom(...values), { maxKeys: 2 }), {
        nil: undefined,
      }),
      matchExpressions: fc.option(fc.array(req, { maxLength: 2 }), { nil: undefined }),
    })
    .map(clean);
}

interface Addresses {
  readonly slots: readonly { v4: string; v6: string }[];
  readonly nodes: readonly { v4: string; v6: string }[];
}

/** CIDRs around the cluster's real addresses, so ipBlocks hit something. */
function cidrCandidates(a: Addresses): string[] {
  return [
    ...a.slots.flatMap((s) => [`${s.v4}/32`, `${s.v6}/128`]),
    ...a.nodes.flatMap((n) => [`${n.v4}/32`, `${n.v6}/128`]),
    '10.244.1.0/24',
    '10.244.2.0/24',
    '10.244.1.8/29',
    '10.244.2.12/30',
    '10.244.0.0/16',
    '10.0.0.0/8',
    '0.0.0.0/0',
    '203.0.113.0/24',
    `${OUTSIDE.v4}/32`,
    'fd00:10:244:1::/64',
    'fd00:10:244:2::/64',
    'fd00:10:244:1::8/125',
    'fd00:10:244:2::c/126',
    'fd00:10:244::/48',
    '::/0',
    '2001:db8::/64',
    `${OUTSIDE.v6}/128`,
  ];
}

function ipBlockArb(a: Addresses) {
  const all = cidrCandidates(a);
  return fc.constantFrom(...all).chain((cidr) => {
    const outer = parseCIDR(cidr);
    const inner = all.filter((x) => {
      const c = parseCIDR(x);
      return outer.ok && c.ok && c.cidr.prefix > outer.cidr.prefix && cidrWithin(c.cidr, outer.cidr);
    });
    const except =
      inner.length === 0
        ? fc.constant(undefined)
        : fc.option(fc.subarray(inner, { minLength: 1, maxLength: Math.min(2, inner.length) }), { nil: undefined });
    return except.map((e) => clean({ ipBlock: { cidr, except: e } }));
  });
}

function peerArb(a: Addresses) {
  const pod = selectorArb(POD_KEYS, POD_VALUES);
  const ns = fc.oneof(
    selectorArb(NS_KEYS, NS_VALUES),
    fc.record({ matchLabels: fc.record({ [NAMESPACE_NAME_LABEL]: fc.constantFrom(...NAMESPACES) }) }),
  );
  return fc.oneof(
    fc.record({ podSelector: pod }),
    fc.record({ namespaceSelector: ns }),
    fc.record({ podSelector: pod, namespaceSelector: ns }),
    ipBlockArb(a),
  );
}

const protocolArb = fc.option(fc.constantFrom<Protocol>('TCP', 'UDP', 'SCTP'), { nil: undefined });

const portArb = fc
  .oneof(
    { arbitrary: fc.record({ protocol: protocolArb }), weight: 3 },
    { arbitrary: fc.record({ protocol: protocolArb, port: fc.constantFrom<number>(...PORT_POOL) }), weight: 3 },
    { arbitrary: fc.record({ protocol: protocolArb, port: fc.constantFrom(...PORT_NAMES) }), weight: 3 },
    {
      arbitrary: fc
        .record({ protocol: protocolArb, port: fc.constantFrom(...RANGE_STARTS), endPort: fc.constantFrom(...RANGE_ENDS) })
        .filter((p) => p.endPort >= p.port),
      weight: 3,
    },
    // Invalid (the API server would refuse them): the rule must allow nothing, as the oracle says.
    {
      arbitrary: fc.record({ protocol: protocolArb, port: fc.constantFrom(...PORT_NAMES), endPort: fc.constant(9000) }),
      weight: 1,
    },
    { arbitrary: fc.record({ protocol: protocolArb, port: fc.constant(9000), endPort: fc.constant(80) }), weight: 1 },
  )
  .map(clean);

function rulesArb(a: Addresses, peerField: 'from' | 'to') {
  const rule = fc
    .record({
      peers: fc.option(fc.array(peerArb(a), { maxLength: 2 }), { nil: undefined }),
      ports: fc.option(fc.array(portArb, { maxLength: 2 }), { nil: undefined }),
    })
    .map((r) => clean({ [peerField]: r.peers, ports: r.ports }));
  return fc.option(fc.array(rule, { maxLength: 2 }), { nil: undefined });
}

function policyArb(a: Addresses, i: number) {
  return fc
    .record({
      namespace: fc.constantFrom(...NAMESPACES),
      // `{}` often: policies that select pods are what makes probes interesting.
      podSelector: fc.oneof(
        { arbitrary: fc.constant({}), weight: 2 },
        { arbitrary: selectorArb(POD_KEYS, POD_VALUES), weight: 3 },
      ),
      policyTypes: fc.option(fc.constantFrom<('Ingress' | 'Egress')[]>(['Ingress'], ['Egress'], ['Ingress', 'Egress']), {
        nil: undefined,
      }),
      ingress: rulesArb(a, 'from'),
      egress: rulesArb(a, 'to'),
    })
    .map((p) =>
      networkPolicy(
        p.namespace,
        `pol${i}`,
        clean({ podSelector: p.podSelector, policyTypes: p.policyTypes, ingress: p.ingress, egress: p.egress }) as RawPolicySpec,
      ),
    );
}

function serviceArb(name: string) {
  return fc
    .record({
      namespace: fc.constantFrom(...NAMESPACES),
      selector: fc.option(
        fc.dictionary(fc.constantFrom(...POD_KEYS), fc.constantFrom(...POD_VALUES), { minKeys: 1, maxKeys: 2 }),
        {
          nil: undefined,
          freq: 5,
        },
      ),
      ports: fc.uniqueArray(
        fc.record({
          port: fc.constantFrom<number>(...PORT_POOL),
          protocol: fc.constantFrom<Protocol>('TCP', 'TCP', 'UDP'),
          targetPort: fc.oneof(fc.constantFrom<number>(...PORT_POOL), fc.constantFrom(...PORT_NAMES)),
        }),
        { minLength: 1, maxLength: 2, selector: (p) => `${p.protocol}/${p.port}` },
      ),
    })
    .map((s) =>
      clean({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name, namespace: s.namespace },
        spec: { selector: s.selector, ports: s.ports.map((p, i) => ({ name: `p${i}`, ...p })) },
      }),
    );
}

function nsnpPeerArb(a: Addresses) {
  return fc.oneof(
    fc.record({ namespace: fc.record({ name: fc.constantFrom(...NAMESPACES) }) }),
    ipBlockArb(a),
    fc.record({
      service: fc.record({ name: fc.constantFrom(...SERVICES, 'svc-missing'), namespace: fc.constantFrom(...NAMESPACES) }),
    }),
  );
}

function nsnpArb(a: Addresses, i: number) {
  const rules = (peerField: 'from' | 'to') =>
    fc.option(
      fc.array(
        fc
          .record({
            peers: fc.option(fc.array(nsnpPeerArb(a), { maxLength: 2 }), { nil: undefined }),
            ports: fc.option(fc.array(portArb, { maxLength: 2 }), { nil: undefined }),
          })
          .map((r) => clean({ [peerField]: r.peers, ports: r.ports })),
        { maxLength: 2 },
      ),
      { nil: undefined },
    );
  return fc
    .record({
      namespace: fc.constantFrom(...NAMESPACES),
      policyTypes: fc.option(fc.constantFrom<('Ingress' | 'Egress')[]>(['Ingress'], ['Egress'], ['Ingress', 'Egress']), {
        nil: undefined,
      }),
      ingress: rules('from'),
      egress: rules('to'),
    })
    .map((p) =>
      clean({
        apiVersion: 'network.kubesphere.io/v1alpha1',
        kind: 'NamespaceNetworkPolicy',
        metadata: { name: `nsnp${i}`, namespace: p.namespace },
        spec: { policyTypes: p.policyTypes, ingress: p.ingress, egress: p.egress },
      }),
    );
}

function tenancyArb(a: Addresses): fc.Arbitrary<GenTenancy> {
  // One in four; constantFrom shrinks towards its first value: off, no workspace.
  const sometimes = () => fc.constantFrom(false, false, false, true);
  return fc.record({
    workspaceOf: fc.tuple(...NAMESPACES.map(() => fc.constantFrom<string | null>(null, ...WORKSPACES))),
    isolatedWorkspaces: fc.tuple(...WORKSPACES.map(sometimes)),
    isolatedProjects: fc.tuple(...NAMESPACES.map(sometimes)),
    services: fc.tuple(...SERVICES.map(serviceArb)),
    namespacePolicies: fc
      .tuple(fc.constantFrom(0, 0, 1, 2), fc.tuple(nsnpArb(a, 0), nsnpArb(a, 1)))
      .map(([n, ps]) => ps.slice(0, n)),
  });
}

// ---- ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2) ----

const NODE_KEYS = ['zone', 'kubernetes.io/hostname'];
const NODE_VALUES = ['a', 'b', ...NODES];
const CNP_PRIORITIES = [0, 10, 10, 20, 1000];

/** A namespace selector for CNP subjects and peers: label selectors, or one namespace by name. */
function cnpNamespaceSelectorArb() {
  return fc.oneof(
    { arbitrary: selectorArb(NS_KEYS, NS_VALUES), weight: 2 },
    { arbitrary: fc.record({ matchLabels: fc.record({ [NAMESPACE_NAME_LABEL]: fc.constantFrom(...NAMESPACES) }) }), weight: 2 },
  );
}

/** `namespaces: <selector>` or `pods: {namespaceSelector, podSelector}` (subjects and pod peers alike). */
function cnpPodsArb() {
  return fc.oneof(
    // Every namespace often: broad subjects and peers are what makes tiered rules decide probes.
    { arbitrary: fc.constant({ namespaces: {} }), weight: 2 },
    { arbitrary: fc.record({ namespaces: cnpNamespaceSelectorArb() }), weight: 2 },
    {
      arbitrary: fc.record({
        pods: fc.record({ namespaceSelector: cnpNamespaceSelectorArb(), podSelector: selectorArb(POD_KEYS, POD_VALUES) }),
      }),
      weight: 2,
    },
    {
      arbitrary: fc.record({
        pods: fc.record({ namespaceSelector: fc.constant({}), podSelector: selectorArb(POD_KEYS, POD_VALUES) }),
      }),
      weight: 1,
    },
  );
}

function cnpNetworksArb(a: Addresses) {
  return fc
    .oneof(
      { arbitrary: fc.uniqueArray(fc.constantFrom(...cidrCandidates(a)), { minLength: 1, maxLength: 3 }), weight: 3 },
      { arbitrary: fc.constant(['0.0.0.0/0', '::/0']), weight: 1 },
    )
    .map((networks) => ({ networks }));
}

const cnpNodesArb = selectorArb(NODE_KEYS, NODE_VALUES).map((nodes) => ({ nodes }));

/** A port of `protocols`: a number, a range (start < end, as the API requires) or, when allowed, a named port. */
function cnpProtocolArb(named: boolean) {
  const proto = fc.constantFrom('tcp', 'tcp', 'udp', 'sctp');
  const numbered = fc.oneof(
    fc.record({ number: fc.constantFrom<number>(...PORT_POOL) }),
    fc
      .record({ start: fc.constantFrom(...RANGE_STARTS), end: fc.constantFrom(...RANGE_ENDS) })
      .filter((r) => r.start < r.end)
      .map((range) => ({ range })),
  );
  const portArb = fc.tuple(proto, numbered).map(([p, destinationPort]) => ({ [p]: { destinationPort } }));
  return named
    ? fc.oneof(
        { arbitrary: portArb, weight: 3 },
        { arbitrary: fc.constantFrom(...PORT_NAMES).map((destinationNamedPort) => ({ destinationNamedPort })), weight: 1 },
      )
    : portArb;
}

/** What makes a rule invalid (the API server would refuse it) or unknown to this agent: fail closed. */
function cnpBrokenRuleArb(dir: 'ingress' | 'egress') {
  const peerField = dir === 'ingress' ? 'from' : 'to';
  const action = fc.constantFrom('Accept', 'Deny', 'Pass');
  const pods = { namespaces: {} };
  return fc.oneof(
    // A peer of a newer API version.
    action.map((a) => ({ action: a, [peerField]: [{ serviceAccounts: { name: 'x' } }] })),
    // A reversed range (CEL: start < end).
    action.map((a) => ({
      action: a,
      [peerField]: [pods],
      protocols: [{ tcp: { destinationPort: { range: { start: 9000, end: 80 } } } }],
    })),
    // No peers at all (MinItems=1).
    action.map((a) => ({ action: a, [peerField]: [] })),
    // An empty peer (MinProperties=1).
    action.map((a) => ({ action: a, [peerField]: [{}] })),
    ...(dir === 'egress'
      ? [
          // A named port with a networks peer (CEL rule of the egress rule).
          action.map((a) => ({ action: a, to: [{ networks: ['0.0.0.0/0'] }], protocols: [{ destinationNamedPort: 'http' }] })),
          // domainNames: not enforced in an Accept, Deny all (fail closed) elsewhere.
          action.map((a) => ({ action: a, to: [{ domainNames: ['example.com'] }] })),
        ]
      : []),
  );
}

function cnpRuleArb(a: Addresses, dir: 'ingress' | 'egress', i: number) {
  const action = fc.constantFrom('Accept', 'Deny', 'Pass');
  const podPeer = cnpPodsArb();
  const peer =
    dir === 'ingress'
      ? podPeer
      : fc.oneof(
          { arbitrary: podPeer, weight: 3 },
          { arbitrary: cnpNetworksArb(a), weight: 3 },
          { arbitrary: cnpNodesArb, weight: 1 },
        );
  const valid = fc
    .record({
      action,
      peers: fc.array(peer, { minLength: 1, maxLength: 2 }),
      withPorts: fc.boolean(),
      named: fc.boolean(),
    })
    .chain((r) => {
      // Named ports only where the API allows them: not beside networks or nodes peers.
      const named = r.named && r.peers.every((p) => 'namespaces' in p || 'pods' in p);
      const protocols = r.withPorts
        ? fc.array(cnpProtocolArb(named), { minLength: 1, maxLength: 2 }).map((x) => x as unknown[])
        : fc.constant(undefined);
      return protocols.map((ps) => ({ action: r.action, [dir === 'ingress' ? 'from' : 'to']: r.peers, protocols: ps }));
    });
  return fc
    .oneof({ arbitrary: valid, weight: 12 }, { arbitrary: cnpBrokenRuleArb(dir), weight: 1 })
    .map((r) => clean({ name: `${dir === 'ingress' ? 'in' : 'eg'}${i}`, ...r }));
}

function cnpRulesArb(a: Addresses, dir: 'ingress' | 'egress') {
  return fc
    .tuple(fc.constantFrom(0, 1, 1, 2, 3), fc.tuple(...[0, 1, 2].map((i) => cnpRuleArb(a, dir, i))))
    .map(([n, rs]) => (n === 0 ? undefined : rs.slice(0, n)));
}

function clusterPolicyArb(a: Addresses, i: number) {
  return fc
    .record({
      tier: fc.constantFrom('Admin', 'Baseline'),
      priority: fc.constantFrom(...CNP_PRIORITIES),
      subject: cnpPodsArb(),
      ingress: cnpRulesArb(a, 'ingress'),
      egress: cnpRulesArb(a, 'egress'),
    })
    .map((p): RawObject =>
      clean({
        apiVersion: 'policy.networking.k8s.io/v1alpha2',
        kind: 'ClusterNetworkPolicy',
        metadata: { name: `cnp${i}` },
        spec: { tier: p.tier, priority: p.priority, subject: p.subject, ingress: p.ingress, egress: p.egress },
      }),
    );
}

function clusterPoliciesArb(a: Addresses) {
  // Half the scenarios have none (the first value: what shrinking goes to).
  return fc
    .tuple(fc.constantFrom(0, 0, 0, 0, 1, 2, 3, 4), fc.tuple(...[0, 1, 2, 3].map((i) => clusterPolicyArb(a, i))))
    .map(([n, ps]) => ps.slice(0, n));
}

const nodeLabelsArb = fc.tuple(
  ...NODES.map(() => fc.dictionary(fc.constantFrom('zone'), fc.constantFrom('a', 'b'), { maxKeys: 1 })),
);

const podArb: fc.Arbitrary<GenPod> = fc.record({
  namespace: fc.constantFrom(...NAMESPACES),
  labels: fc.dictionary(fc.constantFrom(...POD_KEYS), fc.constantFrom(...POD_VALUES), { maxKeys: 2 }),
  phase: fc.constantFrom<GenPod['phase']>('Running', 'Running', 'Running', 'Running', 'Pending', 'Succeeded'),
  ports: fc
    .uniqueArray(
      fc.record({
        name: fc.constantFrom(...PORT_NAMES),
        port: fc.constantFrom<number>(...PORT_POOL),
        protocol: fc.constantFrom<Protocol>('TCP', 'TCP', 'UDP', 'SCTP'),
      }),
      { maxLength: 3, selector: (p) => p.name },
    )
    .map((ps) => ps.filter((p, i) => ps.findIndex((q) => q.port === p.port && q.protocol === p.protocol) === i)),
});

const ENDPOINTS_FROM = [
  ...Array.from({ length: SLOTS }, (_, i) => slotKey(i)),
  OUTSIDE_KEY,
  nodeKey('node-1'),
  nodeKey('node-2'),
];
const ENDPOINTS_TO = [...Array.from({ length: SLOTS }, (_, i) => slotKey(i)), OUTSIDE_KEY, nodeKey('node-1'), nodeKey('node-2')];

const probeArb: fc.Arbitrary<Probe> = fc
  .record({
    from: fc.constantFrom(...ENDPOINTS_FROM),
    to: fc.constantFrom(...ENDPOINTS_TO),
    protocol: fc.constantFrom<Protocol>('TCP', 'TCP', 'TCP', 'UDP', 'UDP', 'SCTP'),
    port: fc.constantFrom<number>(...PORT_POOL),
    family: fc.constantFrom<Family>(4, 6),
    via: fc.constantFrom<'service' | 'pod'>('service', 'pod'),
  })
  .filter((p) => {
    if (p.from === p.to) return false;
    const toNode = p.to.startsWith('node:');
    const fromOther = !p.from.startsWith('slot/');
    // Nodes serve TCP/UDP 80 and 81 and count no SCTP; outside/node to outside/node is not pod traffic.
    if (toNode && (p.protocol === 'SCTP' || (p.port !== 80 && p.port !== 81))) return false;
    return !(fromOther && !p.to.startsWith('slot/'));
  })
  .map((p) => (p.to.startsWith('slot/') ? p : { ...p, via: 'pod' as const }));

export function scenarioArb(c: Cluster, opts: { maxProbes?: number } = {}): fc.Arbitrary<Scenario> {
  const a: Addresses = {
    slots: Array.from({ length: SLOTS }, (_, i) => c.pod(slotKey(i)).ips),
    nodes: c.nodes.map((n) => n.addresses),
  };
  return fc.record({
    nsLabels: fc.tuple(
      ...NAMESPACES.map(() => fc.dictionary(fc.constantFrom(...NS_KEYS), fc.constantFrom(...NS_VALUES), { maxKeys: 1 })),
    ),
    pods: fc.tuple(...Array.from({ length: SLOTS }, () => fc.option(podArb, { nil: null, freq: 8 }))),
    policies: fc
      .tuple(fc.integer({ min: 0, max: 5 }), fc.tuple(...[0, 1, 2, 3, 4].map((i) => policyArb(a, i))))
      .map(([n, ps]) => ps.slice(0, n)),
    // size 'max': long probe lists by default (one ruleset, many probes), still shrinkable to one.
    probes: fc.array(probeArb, { minLength: 1, maxLength: opts.maxProbes ?? 40, size: 'max' }),
    denyAction: fc.constantFrom<'drop' | 'reject'>('reject', 'reject', 'reject', 'drop'),
    tenancy: tenancyArb(a),
    clusterPolicies: clusterPoliciesArb(a),
    nodeLabels: nodeLabelsArb,
  });
}

// ---- from a scenario to objects, state and oracle ----

const podName = (i: number) => `p${i}`;

export function scenarioObjects(c: Cluster, s: Scenario): RawObject[] {
  const t = s.tenancy;
  const namespaces = NAMESPACES.map((name, i) => {
    const ws = t.workspaceOf[i] ?? null;
    return {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: {
        name,
        labels: { ...s.nsLabels[i], [NAMESPACE_NAME_LABEL]: name, ...(ws === null ? {} : { 'kubesphere.io/workspace': ws }) },
        ...(t.isolatedProjects[i] === true ? { annotations: { 'kubesphere.io/network-isolate': 'enabled' } } : {}),
      },
    };
  });
  const workspaces = WORKSPACES.map((name, i) => ({
    apiVersion: 'tenant.kubesphere.io/v1alpha1',
    kind: 'Workspace',
    metadata: { name },
    spec: { networkIsolation: t.isolatedWorkspaces[i] === true },
  }));
  const pods = s.pods.flatMap((g, i) => {
    if (g === null) return [];
    const slot = c.pod(slotKey(i));
    return [
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: podName(i),
          namespace: g.namespace,
          ...(Object.keys(g.labels).length === 0 ? {} : { labels: g.labels }),
        },
        spec: {
          nodeName: slot.node,
          containers: [
            {
              name: 'main',
              image: 'agnhost',
              ...(g.ports.length === 0
                ? {}
                : { ports: g.ports.map((p) => ({ name: p.name, containerPort: p.port, protocol: p.protocol })) }),
            },
          ],
        },
        status: { phase: g.phase, podIP: slot.ips.v4, podIPs: [{ ip: slot.ips.v4 }, { ip: slot.ips.v6 }] },
      },
    ];
  });
  const nodes = c.nodeObjects().map((n) => {
    const extra = s.nodeLabels[NODES.indexOf(n.metadata.name)] ?? {};
    return { ...n, metadata: { ...n.metadata, labels: { ...n.metadata.labels, ...extra } } };
  });
  return [
    ...namespaces,
    ...pods,
    ...nodes,
    ...s.policies,
    ...workspaces,
    ...t.services,
    ...t.namespacePolicies,
    ...s.clusterPolicies,
  ];
}

/** A scenario's (or regression's) objects as the state the agent sees, tenancy on (FUZZ_TENANCY). */
export function fuzzState(objects: readonly unknown[]): ClusterState {
  return { ...buildState(objects).state, tenancy: FUZZ_TENANCY };
}

function slotPod(state: ClusterState, s: Scenario, key: string) {
  const i = Number(key.slice(5));
  const g = s.pods[i];
  return g === null || g === undefined ? undefined : state.pods.find((p) => p.namespace === g.namespace && p.name === podName(i));
}

function endpoint(c: Cluster, state: ClusterState, s: Scenario, key: string, f: Family): Endpoint {
  const pick = (ips: { v4: string; v6: string }) => (f === 4 ? ips.v4 : ips.v6);
  if (key === OUTSIDE_KEY) return { kind: 'ip', ip: pick(c.outside.ips) };
  if (key.startsWith('node:')) return { kind: 'ip', ip: pick(c.node(key.slice(5)).addresses) };
  const pod = slotPod(state, s, key);
  return pod === undefined ? { kind: 'ip', ip: pick(c.pod(key).ips) } : { kind: 'pod', pod };
}

export function scenarioVerdict(c: Cluster, state: ClusterState, s: Scenario, p: Probe) {
  // Services map every pool port to itself: the policy port is the dialled one.
  return verdict(state, endpoint(c, state, s, p.from, p.family), endpoint(c, state, s, p.to, p.family), p.protocol, p.port, {
    family: p.family,
  });
}

export interface Mismatch {
  readonly outcome: ProbeOutcome;
  readonly expected: boolean;
  readonly reason: string;
}

export interface RunResult {
  readonly state: ClusterState;
  readonly mismatches: readonly Mismatch[];
  readonly probes: number;
  /** Probes the oracle expects to be blocked. */
  readonly blocked: number;
  /** ClusterNetworkPolicies in the scenario. */
  readonly clusterPolicies: number;
  /** Probes a ClusterNetworkPolicy rule decided (Accept, Deny) or passed on, per action. */
  readonly tiered: TieredCounts;
}

export interface TieredCounts {
  readonly Accept: number;
  readonly Deny: number;
  readonly Pass: number;
}

/** How many probes each tiered action decided (a Pass counts where it handed a probe on). */
function tieredCounts(verdicts: Iterable<ReturnType<typeof verdict>>): TieredCounts {
  const n = { Accept: 0, Deny: 0, Pass: 0 };
  for (const v of verdicts) {
    const seen = new Set<string>();
    for (const d of [v.egress, v.ingress]) {
      if (d.decidedBy !== undefined) seen.add(d.decidedBy.action);
      for (const p of d.passed) seen.add(p.action);
    }
    for (const a of seen) n[a as keyof typeof n]++;
  }
  return n;
}

/**
 * The layout of the tiers a scenario is compiled with (compile/tiers.ts):
 * each of them in turn, picked from the scenario without drawing from the
 * random stream (the seeds keep their scenarios).
 */
export function scenarioTierLayout(s: Scenario): TierLayout {
  const layouts: readonly TierLayout[] = ['auto', 'per-class', 'shared'];
  return layouts[(s.pods.filter((p) => p !== null).length + s.clusterPolicies.length) % layouts.length]!;
}

/**
 * The split threshold a scenario is compiled with (compile/peer-split.ts):
 * every other scenario 1 (the biggest identity of each pod peer map is in a
 * plain set), the others the default (nothing split at this size); picked
 * without drawing from the random stream.
 */
export function scenarioSplitMin(s: Scenario): number | undefined {
  return s.policies.length % 2 === 0 ? 1 : undefined;
}

/** Applies a scenario and probes it; mismatches are probes whose result differs from the oracle's. */
export async function runScenario(c: Cluster, s: Scenario, mutate?: EnforceOptions['mutate']): Promise<RunResult> {
  const state = fuzzState(scenarioObjects(c, s));
  await applyState(c, state, {
    denyAction: s.denyAction,
    tierLayout: scenarioTierLayout(s),
    peerSplitMin: scenarioSplitMin(s),
    ...(mutate === undefined ? {} : { mutate }),
  });
  const expected = new Map(s.probes.map((p) => [p, scenarioVerdict(c, state, s, p)]));
  const outcomes = await runProbes(c, s.probes, { expect: (r) => expected.get(r.probe)?.allowed });
  const mismatches = outcomes.flatMap((o) => {
    const v = expected.get(o.probe)!;
    const why = v.allowed
      ? `allowed: egress: ${v.egress.reason} ingress: ${v.ingress.reason}`
      : `blocked: ${v.egress.allowed ? v.ingress.reason : v.egress.reason}`;
    return o.connected === v.allowed ? [] : [{ outcome: o, expected: v.allowed, reason: why }];
  });
  return {
    state,
    mismatches,
    probes: s.probes.length,
    blocked: [...expected.values()].filter((v) => !v.allowed).length,
    clusterPolicies: s.clusterPolicies.length,
    tiered: tieredCounts(expected.values()),
  };
}

// ---- the reproduction ----

/** The scenario as a standalone regression: pods under their own names, empty slots as unlisted addresses. */
export function toRegression(c: Cluster, s: Scenario, mismatches: readonly Mismatch[], description: string): Regression {
  const keyOf = (key: string): string => {
    if (!key.startsWith('slot/')) return key;
    const i = Number(key.slice(5));
    const g = s.pods[i];
    return g === null || g === undefined ? key : `${g.namespace}/${podName(i)}`;
  };
  const used = new Set(mismatches.flatMap((m) => [m.outcome.probe.from, m.outcome.probe.to]));
  // Empty slots, and pods that have finished (no pod semantics), are plain addresses on the network.
  const unlistedPods: UnlistedPod[] = [...used]
    .filter(
      (k) =>
        k.startsWith('slot/') &&
        (s.pods[Number(k.slice(5))] ?? null)?.phase !== 'Running' &&
        s.pods[Number(k.slice(5))]?.phase !== 'Pending',
    )
    .sort()
    .map((k) => ({ key: keyOf(k), node: c.pod(k).node, ipv4: c.pod(k).ips.v4, ipv6: c.pod(k).ips.v6 }));
  const probes: RegressionProbe[] = mismatches.map((m) => ({
    from: keyOf(m.outcome.probe.from),
    to: keyOf(m.outcome.probe.to),
    protocol: m.outcome.probe.protocol,
    port: m.outcome.probe.port,
    family: m.outcome.probe.family,
    via: m.outcome.probe.via ?? 'service',
    expect: m.expected ? 'allowed' : 'blocked',
    observed: m.outcome.connected ? 'connected' : m.outcome.detail,
    reason: m.reason,
  }));
  return { description, styles: [c.style], denyAction: s.denyAction, unlistedPods, probes, objects: scenarioObjects(c, s) };
}

export interface FuzzOptions {
  readonly seed: number;
  readonly runs: number;
  readonly maxProbes?: number;
  /** Called after every run (progress output). */
  readonly onRun?: (r: RunResult, n: number) => void;
  /** Shrinking stops this long after the first failure (ms). Default 120 000. */
  readonly shrinkBudgetMs?: number;
  /** Test hook passed to applyState (see EnforceOptions.mutate). */
  readonly mutate?: EnforceOptions['mutate'];
}

export interface FuzzReport {
  readonly ok: boolean;
  readonly runs: number;
  readonly probes: number;
  /** Scenarios with at least one ClusterNetworkPolicy. */
  readonly cnpScenarios: number;
  /** Probes decided or passed on by a ClusterNetworkPolicy rule, per action. */
  readonly tiered: TieredCounts;
  /** The shrunk failure as a regression file (YAML), with the probe lines first in its header. */
  readonly reproduction?: string;
  readonly summary: string;
}

export async function fuzz(c: Cluster, opts: FuzzOptions): Promise<FuzzReport> {
  let probes = 0;
  let blocked = 0;
  let n = 0;
  let cnpScenarios = 0;
  const tiered = { Accept: 0, Deny: 0, Pass: 0 };
  let firstFailure: number | undefined;
  const budget = opts.shrinkBudgetMs ?? 120_000;
  const property = fc.asyncProperty(
    scenarioArb(c, opts.maxProbes === undefined ? {} : { maxProbes: opts.maxProbes }),
    async (s) => {
      // Every shrink candidate costs real probes: past the budget, candidates
      // "pass" untried, so fast-check keeps the smallest failure found so far.
      if (firstFailure !== undefined && Date.now() - firstFailure > budget) return true;
      const r = await runScenario(c, s, opts.mutate);
      n += 1;
      probes += r.probes;
      blocked += r.blocked;
      if (r.clusterPolicies > 0) cnpScenarios++;
      for (const k of ['Accept', 'Deny', 'Pass'] as const) tiered[k] += r.tiered[k];
      opts.onRun?.(r, n);
      if (r.mismatches.length > 0) firstFailure ??= Date.now();
      return r.mismatches.length === 0;
    },
  );
  const details = await fc.check(property, { seed: opts.seed, numRuns: opts.runs, endOnFailure: false });
  const counts = { cnpScenarios, tiered };
  const cnpSummary = `${cnpScenarios} with ClusterNetworkPolicies, whose rules decided ${tiered.Accept} Accept, ${tiered.Deny} Deny and passed ${tiered.Pass} probes`;
  if (!details.failed)
    return {
      ok: true,
      runs: n,
      probes,
      ...counts,
      summary: `${details.numRuns} scenarios (${cnpSummary}), ${probes} probes (${blocked} expected blocked), all as the oracle says`,
    };
  if (details.counterexample === null) {
    return {
      ok: false,
      runs: n,
      probes,
      ...counts,
      summary: `fuzz failed without a counterexample: ${String(details.errorInstance)}`,
    };
  }
  const [s] = details.counterexample;
  let again: RunResult;
  try {
    again = await runScenario(c, s, opts.mutate);
  } catch (e) {
    // Not a probe mismatch: rendering or applying the ruleset failed.
    const description = `applying the scenario failed (fuzz seed ${opts.seed}, ${c.style}): ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`;
    const reproduction = regressionToYaml(
      { description, styles: [c.style], denyAction: s.denyAction, unlistedPods: [], probes: [], objects: scenarioObjects(c, s) },
      description,
    );
    return {
      ok: false,
      runs: n,
      probes,
      ...counts,
      reproduction,
      summary: `seed ${opts.seed}: ${e instanceof Error ? e.message : String(e)}`,
    };
  }
  if (again.mismatches.length === 0) {
    return {
      ok: false,
      runs: n,
      probes,
      ...counts,
      summary: `seed ${opts.seed}: a mismatch was seen but did not reproduce on the shrunk scenario (flaky?)\n${fc.stringify(s)}`,
    };
  }
  const description = `datapath differs from verdict() (fuzz seed ${opts.seed}, ${c.style}, tier layout ${scenarioTierLayout(s)}, path ${details.counterexamplePath ?? '?'})`;
  const lines = again.mismatches.map(
    (m) => `${describeOutcome(m.outcome)}; the oracle says ${m.expected ? 'allowed' : 'blocked'}: ${m.reason}`,
  );
  const header = [
    description,
    'Replay: save as test/datapath/regressions/<name>.yaml and run node --test test/datapath/regressions.test.ts',
    ...lines,
  ].join('\n');
  const reproduction = regressionToYaml(toRegression(c, s, again.mismatches, description), header);
  return {
    ok: false,
    runs: n,
    probes,
    ...counts,
    reproduction,
    summary: `seed ${opts.seed}: ${again.mismatches.length} probe(s) differ from the oracle after shrinking (${details.numShrinks} shrinks):\n${lines.map((l) => `  ${l}`).join('\n')}`,
  };
}
