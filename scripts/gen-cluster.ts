// Seeded synthetic cluster for benchmarks: namespaces with team/env labels,
// apps of several tiers spread over nodes (a fixed number of pods per node),
// named container ports, and a realistic mix of policies: default deny,
// same-namespace tiers, namespace selectors, cluster-wide peers (every
// namespace), AND peers, matchExpressions,
// ipBlocks with excepts, endPort ranges (overlapping), named ports, egress to
// DNS and the internet. The same cluster is available as a normalized
// ClusterState (generateCluster().state) and as raw Kubernetes objects
// (clusterObjects()), so benchmarks can start from either side.
//
// CLI: node scripts/gen-cluster.ts --pods 1000 --policies 100 --namespaces 50
//        [--pods-per-node 110] [--seed 1] [--dual-stack] [-o cluster.yaml]
import { writeFileSync } from 'node:fs';
import { stringify } from 'yaml';
import { canonicalIP } from '../src/model/ip.ts';
import { scriptArgs } from './script-args.ts';
import type {
  ClusterState,
  ContainerPort,
  LabelSelector,
  Namespace,
  NetworkPolicy,
  Node,
  Peer,
  Pod,
  PortSpec,
  Rule,
  SelectorRequirement,
} from '../src/model/types.ts';

export interface GenOptions {
  readonly pods: number;
  readonly policies: number;
  readonly namespaces: number;
  readonly podsPerNode: number;
  readonly seed: number;
  /** Give every pod an IPv6 address too. */
  readonly dualStack: boolean;
}

export const DEFAULT_GEN: GenOptions = { pods: 1000, policies: 100, namespaces: 50, podsPerNode: 110, seed: 1, dualStack: false };

export interface GeneratedCluster {
  readonly options: GenOptions;
  readonly state: ClusterState;
  /** Node names, sorted; nodes[0] is full (podsPerNode pods, minus inactive ones). */
  readonly nodes: readonly string[];
}

/** mulberry32: tiny, fast, good enough for synthetic data. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TIERS = ['frontend', 'backend', 'db', 'cache'] as const;
type Tier = (typeof TIERS)[number];
const ENVS = ['prod', 'staging', 'dev'];
const TEAMS = 50;
const APPS_PER_NS = 6;

// Sorted by name, the order the normalizer keeps them in.
const TIER_PORTS: Record<Tier, ContainerPort[]> = {
  frontend: [p('http', 8080), p('metrics', 9090)],
  backend: [p('grpc', 9000), p('http', 8080), p('metrics', 9090)],
  db: [p('db', 5432), p('metrics', 9187)],
  cache: [p('db', 6379), p('metrics', 9121)],
};

function p(name: string | undefined, port: number, protocol: ContainerPort['protocol'] = 'TCP'): ContainerPort {
  return { name, port, protocol };
}

function sel(matchLabels: Record<string, string> = {}, matchExpressions: SelectorRequirement[] = []): LabelSelector {
  return { matchLabels, matchExpressions };
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

function nsName(i: number): string {
  return i === 0 ? 'kube-system' : i === 1 ? 'monitoring' : `ns-${pad(i, 5)}`;
}

function appOf(i: number): { app: string; tier: Tier } {
  const a = i % APPS_PER_NS;
  return { app: `app-${a}`, tier: TIERS[a % TIERS.length] ?? 'backend' };
}

export function generateCluster(opts: Partial<GenOptions> = {}): GeneratedCluster {
  const o: GenOptions = { ...DEFAULT_GEN, ...opts };
  const rand = rng(o.seed);
  const K = Math.max(2, o.namespaces);

  const namespaces: Namespace[] = [];
  for (let i = 0; i < K; i++) {
    const name = nsName(i);
    namespaces.push({
      name,
      labels: { 'kubernetes.io/metadata.name': name, team: `team-${i % TEAMS}`, env: ENVS[i % ENVS.length] ?? 'dev' },
    });
  }

  const nodeCount = Math.max(1, Math.ceil(o.pods / o.podsPerNode));
  const nodeNames = Array.from({ length: nodeCount }, (_, i) => `node-${pad(i, 5)}`);
  const nodes: Node[] = nodeNames.map((name, i) => {
    const address = `172.${16 + ((i + 1) >> 16)}.${((i + 1) >> 8) & 255}.${(i + 1) & 255}`;
    return { name, addresses: [address], internalIPs: [address] };
  });

  // Every node gets podsPerNode slots (the last one what is left), in random order.
  const slots: number[] = [];
  for (let n = 0; n < nodeCount; n++) for (let k = 0; k < o.podsPerNode; k++) slots.push(n);
  for (let i = slots.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [slots[i], slots[j]] = [slots[j] as number, slots[i] as number];
  }
  // Fill node 0 first so the benchmark node is always full.
  slots.sort((a, b) => (a === 0 ? -1 : 0) - (b === 0 ? -1 : 0));
  const perNodeUsed = new Array<number>(nodeCount).fill(0);

  const pods: Pod[] = [];
  for (let j = 0; j < o.pods; j++) {
    const n = slots[j] ?? 0;
    const k = perNodeUsed[n] ?? 0;
    perNodeUsed[n] = k + 1;
    // 1 in 500 pods is a DNS server (kube-system), 1 in 1000 a Prometheus
    // (monitoring); the rest spread over the other namespaces.
    const nsIdx = j % 500 === 7 ? 0 : j % 1000 === 13 || K === 2 ? 1 : 2 + Math.floor(rand() * (K - 2));
    const namespace = nsName(nsIdx);
    const roll = rand();
    const a = appOf(Math.floor(rand() * APPS_PER_NS));
    const labels: Record<string, string> =
      nsIdx === 0
        ? { 'k8s-app': 'kube-dns' }
        : nsIdx === 1
          ? { app: 'prometheus', tier: 'backend' }
          : { app: a.app, tier: a.tier, version: rand() < 0.8 ? 'v1' : 'v2' };
    const ports =
      nsIdx === 0
        ? [p('dns', 53, 'UDP'), p('dns-tcp', 53), p('metrics', 9153)]
        : nsIdx === 1
          ? [p('http', 9090)]
          : (TIER_PORTS[a.tier] ?? []);
    const v4 = `10.${(n >> 8) & 255}.${n & 255}.${k + 2}`;
    const v6 = o.dualStack ? canonicalIP(`fd00:10:${n.toString(16)}::${(k + 2).toString(16)}`) : undefined;
    const ips = roll < 0.01 ? [] : v6 !== undefined ? [v4, v6] : [v4];
    pods.push({
      namespace,
      name: `${labels.app ?? 'coredns'}-${pad(j, 6)}`,
      labels,
      nodeName: nodeNames[n],
      hostNetwork: false,
      // ~1% pending without IP, ~1% finished.
      phase: roll < 0.01 ? 'Pending' : roll < 0.02 ? 'Succeeded' : 'Running',
      ips,
      ports,
    });
  }

  const policies: NetworkPolicy[] = [];
  for (let i = 0; i < o.policies; i++) {
    const nsIdx = 2 + (i % Math.max(1, K - 2));
    const namespace = nsName(Math.min(nsIdx, K - 1));
    const a = appOf(Math.floor(rand() * APPS_PER_NS));
    const kind = rand();
    const base = { namespace, errors: [] };
    let pol: NetworkPolicy;
    if (kind < 0.1) {
      pol = {
        ...base,
        name: `default-deny-${i}`,
        podSelector: sel(),
        types: { ingress: true, egress: false },
        ingress: [],
        egress: [],
      };
    } else if (kind < 0.15) {
      // Cluster-wide peers: every frontend of every namespace (big sets).
      pol = {
        ...base,
        name: `allow-all-frontends-${i}`,
        podSelector: sel({ tier: 'backend' }),
        types: { ingress: true, egress: false },
        ingress: [rule([{ kind: 'pods', podSelector: sel({ tier: 'frontend' }), namespaceSelector: sel() }], [named('grpc')])],
        egress: [],
      };
    } else if (kind < 0.35) {
      pol = {
        ...base,
        name: `allow-frontend-${i}`,
        podSelector: sel({ tier: 'backend' }),
        types: { ingress: true, egress: false },
        ingress: [rule([{ kind: 'pods', podSelector: sel({ tier: 'frontend' }), namespaceSelector: undefined }], [tcp(8080)])],
        egress: [],
      };
    } else if (kind < 0.45) {
      pol = {
        ...base,
        name: `allow-team-${i}`,
        podSelector: sel({ app: a.app }),
        types: { ingress: true, egress: false },
        ingress: [
          rule(
            [{ kind: 'pods', podSelector: undefined, namespaceSelector: sel({ team: `team-${Math.floor(rand() * TEAMS)}` }) }],
            [named('http')],
          ),
        ],
        egress: [],
      };
    } else if (kind < 0.55) {
      pol = {
        ...base,
        name: `allow-monitoring-${i}`,
        podSelector: sel(),
        types: { ingress: true, egress: false },
        ingress: [
          rule(
            [
              {
                kind: 'pods',
                podSelector: sel({ app: 'prometheus' }),
                namespaceSelector: sel({ 'kubernetes.io/metadata.name': 'monitoring' }),
              },
            ],
            [named('metrics')],
          ),
        ],
        egress: [],
      };
    } else if (kind < 0.7) {
      pol = {
        ...base,
        name: `egress-dns-internet-${i}`,
        podSelector: rand() < 0.5 ? sel() : sel({ tier: a.tier }),
        types: { ingress: false, egress: true },
        ingress: [],
        egress: [
          rule(
            [
              {
                kind: 'pods',
                podSelector: sel({ 'k8s-app': 'kube-dns' }),
                namespaceSelector: sel({ 'kubernetes.io/metadata.name': 'kube-system' }),
              },
            ],
            [{ protocol: 'UDP', port: 53, endPort: undefined }, tcp(53)],
          ),
          rule([{ kind: 'ipBlock', cidr: '0.0.0.0/0', except: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'] }], [tcp(443)]),
        ],
      };
    } else if (kind < 0.8) {
      pol = {
        ...base,
        name: `nodeports-${i}`,
        podSelector: sel({ app: a.app }),
        types: { ingress: true, egress: false },
        ingress: [
          rule(
            [{ kind: 'ipBlock', cidr: '192.168.0.0/16', except: ['192.168.10.0/24'] }],
            [tcp(30000, 32767), tcp(8000, 8100), tcp(8050, 8200)],
          ),
        ],
        egress: [],
      };
    } else if (kind < 0.9) {
      pol = {
        ...base,
        name: `expressions-${i}`,
        podSelector: sel({}, [{ key: 'tier', operator: 'In', values: ['backend', 'frontend'] }]),
        types: { ingress: true, egress: false },
        ingress: [
          rule(
            [
              {
                kind: 'pods',
                podSelector: sel({}, [{ key: 'app', operator: 'NotIn', values: [a.app] }]),
                namespaceSelector: sel({}, [
                  { key: 'env', operator: 'In', values: ['prod', 'staging'] },
                  { key: 'team', operator: 'In', values: [`team-${i % TEAMS}`] },
                ]),
              },
            ],
            [tcp(8080), { protocol: 'UDP', port: undefined, endPort: undefined }],
          ),
        ],
        egress: [],
      };
    } else {
      pol = {
        ...base,
        name: `backend-to-db-${i}`,
        podSelector: sel({ tier: 'backend' }),
        types: { ingress: false, egress: true },
        ingress: [],
        egress: [rule([{ kind: 'pods', podSelector: sel({ tier: 'db' }), namespaceSelector: undefined }], [named('db')])],
      };
    }
    policies.push(pol);
  }

  const byKey = (x: { namespace: string; name: string }, y: { namespace: string; name: string }) =>
    x.namespace < y.namespace ? -1 : x.namespace > y.namespace ? 1 : x.name < y.name ? -1 : x.name > y.name ? 1 : 0;
  const state: ClusterState = {
    namespaces: namespaces.sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0)),
    pods: pods.sort(byKey),
    policies: policies.sort(byKey),
    nodes,
  };
  return { options: o, state, nodes: nodeNames };
}

function rule(peers: Peer[] | undefined, ports: PortSpec[] | undefined): Rule {
  return { peers, ports, invalid: false };
}

function tcp(port: number, endPort?: number): PortSpec {
  return { protocol: 'TCP', port, endPort };
}

function named(name: string): PortSpec {
  return { protocol: 'TCP', port: name, endPort: undefined };
}

// ---- raw Kubernetes objects (what `kubectl get -o yaml` would show) ----

function rawSelector(s: LabelSelector): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (Object.keys(s.matchLabels).length > 0) out.matchLabels = { ...s.matchLabels };
  if (s.matchExpressions.length > 0) {
    out.matchExpressions = s.matchExpressions.map((r) =>
      r.operator === 'Exists' || r.operator === 'DoesNotExist'
        ? { key: r.key, operator: r.operator }
        : { key: r.key, operator: r.operator, values: [...r.values] },
    );
  }
  return out;
}

function rawPeer(peer: Peer): Record<string, unknown> {
  if (peer.kind === 'ipBlock')
    return { ipBlock: peer.except.length > 0 ? { cidr: peer.cidr, except: [...peer.except] } : { cidr: peer.cidr } };
  const out: Record<string, unknown> = {};
  if (peer.podSelector !== undefined) out.podSelector = rawSelector(peer.podSelector);
  if (peer.namespaceSelector !== undefined) out.namespaceSelector = rawSelector(peer.namespaceSelector);
  return out;
}

function rawRule(r: Rule, peerField: 'from' | 'to'): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (r.peers !== undefined) out[peerField] = r.peers.map(rawPeer);
  if (r.ports !== undefined) {
    out.ports = r.ports.map((s) => {
      const o: Record<string, unknown> = { protocol: s.protocol };
      if (s.port !== undefined) o.port = s.port;
      if (s.endPort !== undefined) o.endPort = s.endPort;
      return o;
    });
  }
  return out;
}

export function policyObject(pol: NetworkPolicy): Record<string, unknown> {
  const policyTypes = [...(pol.types.ingress ? ['Ingress'] : []), ...(pol.types.egress ? ['Egress'] : [])];
  const spec: Record<string, unknown> = { podSelector: rawSelector(pol.podSelector), policyTypes };
  if (pol.types.ingress && pol.ingress.length > 0) spec.ingress = pol.ingress.map((r) => rawRule(r, 'from'));
  if (pol.types.egress && pol.egress.length > 0) spec.egress = pol.egress.map((r) => rawRule(r, 'to'));
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { namespace: pol.namespace, name: pol.name },
    spec,
  };
}

export function podObject(pod: Pod): Record<string, unknown> {
  const status: Record<string, unknown> = {};
  if (pod.phase !== undefined) status.phase = pod.phase;
  if (pod.ips.length > 0) {
    status.podIP = pod.ips[0];
    status.podIPs = pod.ips.map((ip) => ({ ip }));
  }
  const spec: Record<string, unknown> = {
    containers: [
      {
        name: 'main',
        image: 'registry.example/app:1',
        ports: pod.ports.map((cp) => ({
          ...(cp.name === undefined ? {} : { name: cp.name }),
          containerPort: cp.port,
          protocol: cp.protocol,
        })),
      },
    ],
  };
  if (pod.nodeName !== undefined) spec.nodeName = pod.nodeName;
  if (pod.hostNetwork) spec.hostNetwork = true;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { namespace: pod.namespace, name: pod.name, labels: { ...pod.labels } },
    spec,
    status,
  };
}

export function clusterObjects(c: GeneratedCluster): Record<string, unknown>[] {
  const s = c.state;
  return [
    ...s.namespaces.map((ns) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns.name, labels: { ...ns.labels } } })),
    ...s.nodes.map((n) => ({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: n.name },
      status: { addresses: n.addresses.map((address) => ({ type: 'InternalIP', address })) },
    })),
    ...s.pods.map(podObject),
    ...s.policies.map(policyObject),
  ];
}

function main(): void {
  const { values } = scriptArgs(import.meta.url, {
    options: {
      pods: { type: 'string' },
      policies: { type: 'string' },
      namespaces: { type: 'string' },
      'pods-per-node': { type: 'string' },
      seed: { type: 'string' },
      'dual-stack': { type: 'boolean' },
      output: { type: 'string', short: 'o' },
    },
  });
  const num = (v: string | undefined, d: number): number => {
    if (v === undefined) return d;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new Error(`not a non-negative integer: ${v}`);
    return n;
  };
  const c = generateCluster({
    pods: num(values.pods, DEFAULT_GEN.pods),
    policies: num(values.policies, DEFAULT_GEN.policies),
    namespaces: num(values.namespaces, DEFAULT_GEN.namespaces),
    podsPerNode: Math.max(1, Math.min(254, num(values['pods-per-node'], DEFAULT_GEN.podsPerNode))),
    seed: num(values.seed, DEFAULT_GEN.seed),
    dualStack: values['dual-stack'] === true,
  });
  const yaml = clusterObjects(c)
    .map((o) => stringify(o))
    .join('---\n');
  if (values.output === undefined) process.stdout.write(yaml);
  else writeFileSync(values.output, yaml);
}

if (import.meta.main) main();
