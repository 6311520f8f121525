// What applied status costs the API server at scale: N simulated agents (the
// real StatusWriter and Heartbeat, default intervals, real HTTP through
// @kubernetes/client-node) in this process, against the in-repo test API
// server in a child process (its own event loop, as an API server has its own
// cores). Phases:
//   create   every node writes its first status (object created, owned by its Node)
//   steady   no change for --steady seconds: only Lease renewals may be written
//   change   one policy selecting a pod on every node gets a new generation:
//            writes per node, bytes per write, and the time until the status
//            report (the `status` command's logic) says it is in force everywhere
//   churn    --churn-rate pod label flips per second for --churn seconds, each
//            changing its node's selected-pod counts and the set elements of
//            --peers other nodes: writes per second and per event
//   tenancy  tenancy on, a NamespaceNetworkPolicy in a namespace with a pod on
//            every node gets a new generation (and one in a namespace without
//            pods is created): writes per affected node, time until in force
// plus the size of one node's status with and without --irrelevant policies
// that select nothing on it.
//
//   node scripts/bench-status.ts [--nodes 1000] [--steady 60] [--churn 30] [--churn-rate 50]
//                                [--peers 10] [--irrelevant 5000]
//
// Agents "apply" a change after a random 0-50 ms (what the kernel would take);
// the ruleset itself is not compiled (its hash is a per-node version).
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createInterface } from 'node:readline';
import pino from 'pino';
import { Heartbeat } from '../src/agent/heartbeat.ts';
import { StatusWriter } from '../src/agent/status-writer.ts';
import { readStatusInput } from '../src/cli/status.ts';
import { kubeStatusApi } from '../src/kube/status-client.ts';
import { makeState, normalizeNamespacePolicy, normalizePod, normalizePolicy } from '../src/model/normalize.ts';
import { DEFAULT_TENANCY } from '../src/model/tenancy-config.ts';
import type { ClusterState, NamespaceNetworkPolicy, NetworkPolicy, Pod } from '../src/model/types.ts';
import { buildStatus, type StatusInput } from '../src/status/build.ts';
import { buildReport } from '../src/status/report.ts';
import type { LeaseObject, NodePolicyStatusObject } from '../src/status/types.ts';
import { makeKubeConfig, namespace, networkPolicy, node, pod } from '../test/support/fake-apiserver.ts';
import type { KubeObject, RequestRecord } from '../test/support/fake-apiserver.ts';
import { scriptArgs } from './script-args.ts';

const { values: v } = scriptArgs(import.meta.url, {
  options: {
    nodes: { type: 'string', default: '1000' },
    steady: { type: 'string', default: '60' },
    churn: { type: 'string', default: '30' },
    'churn-rate': { type: 'string', default: '50' },
    peers: { type: 'string', default: '10' },
    irrelevant: { type: 'string', default: '5000' },
  },
});
const N = Number(v.nodes);
const STEADY_S = Number(v.steady);
const CHURN_S = Number(v.churn);
const CHURN_RATE = Number(v['churn-rate']);
const PEERS = Number(v.peers);
const IRRELEVANT = Number(v.irrelevant);
const TEAMS = 100;
const PODS_PER_NODE = 10;
const AGENT_NS = 'nft-netpol-system';
const STATUS_INTERVAL_MS = 5000;
const HEARTBEAT_MS = 30_000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const log = pino({ level: process.env.BENCH_LOG ?? 'error' });
const nodeName = (i: number): string => `node-${String(i).padStart(4, '0')}`;

// ---------------------------------------------------------------- cluster

const seed: KubeObject[] = [];
seed.push(namespace('shared'));
for (let t = 0; t < TEAMS; t++) seed.push(namespace(`team-${t}`));
for (let i = 0; i < N; i++) {
  const n = nodeName(i);
  seed.push(node(n, [`10.1.${i >> 8}.${i & 255}`]));
  seed.push(pod('shared', `probe-${n}`, { app: 'probe' }, n, `10.2.${i >> 8}.${i & 255}`));
  for (let k = 1; k < PODS_PER_NODE; k++) {
    const t = (i * PODS_PER_NODE + k) % TEAMS;
    seed.push(pod(`team-${t}`, `p-${n}-${k}`, { app: k % 2 === 0 ? 'web' : 'api' }, n, `10.${2 + k}.${i >> 8}.${i & 255}`));
  }
}
seed.push(networkPolicy('shared', 'every-node', { podSelector: {}, ingress: [{ ports: [{ port: 9100 }] }] }));
for (let t = 0; t < TEAMS; t++) {
  for (const [name, app] of [
    ['web', 'web'],
    ['api', 'api'],
    ['deny', undefined],
  ] as const)
    seed.push(
      networkPolicy(`team-${t}`, name, { podSelector: app === undefined ? {} : { matchLabels: { app } }, ingress: [{}] }),
    );
}
for (let k = 0; k < IRRELEVANT; k++) seed.push(networkPolicy(`idle-${k % 500}`, `p-${k}`, { podSelector: {} }));

function norm<T>(items: readonly unknown[], f: (o: unknown) => { ok: true; value: T } | { ok: false }): T[] {
  return items.flatMap((o) => {
    const r = f(o);
    return r.ok ? [r.value] : [];
  });
}

const server = spawn(process.execPath, ['test/support/fake-apiserver.ts', '--port', '0', '--bookmark-ms', '0'], {
  cwd: new URL('..', import.meta.url).pathname,
  stdio: ['ignore', 'pipe', 'inherit'],
});
const url = await new Promise<string>((resolve, reject) => {
  server.once('exit', (c) => reject(new Error(`the test API server exited (${String(c)})`)));
  createInterface({ input: server.stdout }).once('line', resolve);
});
async function call(path: string, init?: RequestInit): Promise<unknown> {
  const r = await fetch(`${url}${path}`, init);
  if (!r.ok) throw new Error(`${init?.method ?? 'GET'} ${path}: ${r.status} ${await r.text()}`);
  return r.json();
}
const post = (objs: readonly KubeObject[]): Promise<unknown> =>
  call('/_fake/objects', { method: 'POST', body: JSON.stringify({ kind: 'List', items: objs }) });
const list = async (path: string): Promise<unknown[]> => ((await call(path)) as { items: unknown[] }).items;
const requestsFrom = async (from: number): Promise<{ total: number; items: RequestRecord[] }> =>
  (await call(`/_fake/requests?from=${from}`)) as { total: number; items: RequestRecord[] };
const requestCount = async (): Promise<number> => (await requestsFrom(Number.MAX_SAFE_INTEGER)).total;
await post(seed);
const kc = makeKubeConfig(url);
let pods: Pod[] = norm(await list('/api/v1/pods'), normalizePod);
let policies: NetworkPolicy[] = norm(await list('/apis/networking.k8s.io/v1/networkpolicies'), normalizePolicy);
let state: ClusterState = makeState({ namespaces: [], pods, policies, nodes: [] });

// ---------------------------------------------------------------- agents

const statusApi = kubeStatusApi(kc);
interface Agent {
  readonly node: string;
  readonly writer: StatusWriter;
  readonly heartbeat: Heartbeat;
  version: number;
  elements: number;
  localPods: number;
  /** Its pods (an agent's snapshot has them at hand: Enforced.localPods). */
  local: Pod[];
}
const agents: Agent[] = [];
for (let i = 0; i < N; i++) {
  const n = nodeName(i);
  agents.push({
    node: n,
    writer: new StatusWriter(statusApi, log, { node: n, intervalMs: STATUS_INTERVAL_MS }),
    heartbeat: new Heartbeat(statusApi, log, { namespace: AGENT_NS, node: n, intervalMs: HEARTBEAT_MS }),
    version: 1,
    elements: 100,
    localPods: PODS_PER_NODE,
    local: [],
  });
}
const byNode = new Map(agents.map((a) => [a.node, a]));
for (const p of pods) if (p.nodeName !== undefined) byNode.get(p.nodeName)?.local.push(p);
const inputOf = (a: Agent, at: number) => (): StatusInput => ({
  node: a.node,
  applied: {
    state,
    localPods: a.local,
    stats: { chains: 40, rules: 80, sets: 20, maps: 4, elements: a.elements, localPods: a.localPods, policies: 4 },
    hash: `sha256:${createHash('sha256').update(`${a.node}/${a.version}`).digest('hex')}`,
    atUnixMs: at,
  },
  last: { result: 'Applied', atUnixMs: at, error: undefined },
  inSync: true,
  agentVersion: 'bench',
  nftVersion: 'nftables v1.0.6',
});
/** The agent applies (after 0-50 ms, as the kernel would take) and hands the outcome to its writer. */
function applied(a: Agent): void {
  setTimeout(() => a.writer.update(inputOf(a, Date.now())), Math.random() * 50);
}

const writes = async (from: number, to?: number): Promise<RequestRecord[]> => {
  const r = await requestsFrom(from);
  return r.items.slice(0, to === undefined ? undefined : to - from).filter((x) => x.method !== 'GET');
};
const statusPatches = (rs: readonly RequestRecord[]): RequestRecord[] =>
  rs.filter((r) => r.method === 'PATCH' && r.path.endsWith('/status') && r.bytes !== undefined && r.bytes > 2);
const leaseWrites = (rs: readonly RequestRecord[]): RequestRecord[] => rs.filter((r) => r.path.includes('/leases'));
const avg = (xs: readonly number[]): number => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);

async function report(policyNs?: string, policyName?: string): Promise<ReturnType<typeof buildReport>> {
  return buildReport({
    now: Date.now(),
    nodes: agents.map((a) => a.node),
    statuses: (await list('/apis/nft-netpol.io/v1alpha1/nodepolicystatuses')) as NodePolicyStatusObject[],
    leases: (await list(`/apis/coordination.k8s.io/v1/namespaces/${AGENT_NS}/leases`)) as LeaseObject[],
    policies: policyNs === undefined ? policies : policies.filter((p) => p.namespace === policyNs && p.name === policyName),
    pods,
  });
}

const rows: [string, string][] = [];
const out = (k: string, val: string): void => {
  rows.push([k, val]);
  process.stdout.write(`${k}: ${val}\n`);
};

// create
let t0 = Date.now();
let mark = await requestCount();
for (const a of agents) applied(a);
while (agents.some((a) => a.writer.stats().writes === 0)) await sleep(100);
const createMs = Date.now() - t0;
const created = await writes(mark);
out('create: time until every node has written its status', `${(createMs / 1000).toFixed(1)} s`);
out('create: API writes (POST + PATCH)', `${created.length} (${(created.length / N).toFixed(2)} per node)`);

// steady: heartbeats start at random times within one interval (as agents do), then nothing changes
for (const a of agents) setTimeout(() => a.heartbeat.start(), Math.random() * HEARTBEAT_MS);
await sleep(HEARTBEAT_MS + 1000);
mark = await requestCount();
t0 = Date.now();
await sleep(STEADY_S * 1000);
const steady = await writes(mark);
const steadyS = (Date.now() - t0) / 1000;
out(
  `steady (${STEADY_S} s, no change): API writes/s`,
  `${(steady.length / steadyS).toFixed(1)} (Lease ${(leaseWrites(steady).length / steadyS).toFixed(1)}/s, status ${(statusPatches(steady).length / steadyS).toFixed(1)}/s; expected Lease ${(N / (HEARTBEAT_MS / 1000)).toFixed(1)}/s)`,
);
out('steady: Lease renewal bytes per write', `${avg(leaseWrites(steady).map((r) => r.bytes ?? 0)).toFixed(0)} B`);

// change: one policy selecting a pod on every node gets a new generation
mark = await requestCount();
t0 = Date.now();
await post([networkPolicy('shared', 'every-node', { podSelector: {}, ingress: [{ ports: [{ port: 9101 }] }] })]);
const upd = (await call('/apis/networking.k8s.io/v1/namespaces/shared/networkpolicies/every-node')) as KubeObject;
policies = norm(await list('/apis/networking.k8s.io/v1/networkpolicies'), normalizePolicy);
state = makeState({ namespaces: [], pods, policies, nodes: [] });
for (const a of agents) {
  a.version++;
  applied(a);
}
const gen = Number(upd.metadata.generation);
for (;;) {
  const r = await report('shared', 'every-node');
  const p = r.policies[0];
  if (p !== undefined && p.inForce.length === N) break;
  await sleep(250);
}
const inForceMs = Date.now() - t0;
const perNode = agents.map((a) => (a.writer.stats().lastWriteAt ?? t0) - t0).sort((x, y) => x - y);
await sleep(STATUS_INTERVAL_MS + 1500); // anything still coalescing lands
const change = await writes(mark);
const patches = statusPatches(change.filter((r) => !r.path.includes('/leases')));
const bytes = patches.map((r) => r.bytes ?? 0).sort((a, b) => a - b);
out(
  `change (generation ${gen} of a policy on all ${N} nodes): status writes`,
  `${patches.length} (${(patches.length / N).toFixed(2)} per affected node)`,
);
out('change: bytes per status write', `median ${bytes[Math.floor(bytes.length / 2)] ?? 0} B, max ${bytes.at(-1) ?? 0} B`);
out('change: time until the status report says "in force on every node"', `${(inForceMs / 1000).toFixed(2)} s`);
out(
  'change: per node, time from the change to its status write',
  `median ${perNode[Math.floor(perNode.length / 2)] ?? 0} ms, p95 ${perNode[Math.floor(perNode.length * 0.95)] ?? 0} ms, max ${perNode.at(-1) ?? 0} ms`,
);
const t1 = Date.now();
const input = await readStatusInput(
  kc,
  { namespace: undefined, policy: undefined, output: 'json', agentNamespace: AGENT_NS, tenancy: true },
  Date.now(),
);
const full = buildReport(input);
out(
  `\`nft-netpol-agent status\` (whole cluster: ${N} nodes, ${pods.length} pods, ${policies.length} policies)`,
  `${Date.now() - t1} ms, ok=${String(full.ok)}`,
);

// churn: pod label flips; each changes its node's selected-pod counts and the set elements of PEERS other nodes
mark = await requestCount();
t0 = Date.now();
let events = 0;
const teamPods = pods.map((p, i) => [p, i] as const).filter(([p]) => p.namespace.startsWith('team-'));
while (Date.now() - t0 < CHURN_S * 1000) {
  const pick = teamPods[Math.floor(Math.random() * teamPods.length)];
  if (pick !== undefined) {
    const [, i] = pick;
    const p = pods[i];
    if (p === undefined) continue;
    const flipped: Pod = { ...p, labels: { app: p.labels.app === 'web' ? 'api' : 'web' } };
    pods = [...pods.slice(0, i), flipped, ...pods.slice(i + 1)];
    state = { ...state, pods }; // same order: one pod replaced
    const home = p.nodeName === undefined ? undefined : byNode.get(p.nodeName);
    if (home !== undefined) home.local = home.local.map((x) => (x === p ? flipped : x));
    const touched = new Set<Agent>(home === undefined ? [] : [home]);
    for (let k = 0; k < PEERS; k++) {
      const peer = agents[Math.floor(Math.random() * N)];
      if (peer !== undefined) touched.add(peer);
    }
    for (const a of touched) {
      a.version++;
      if (a !== home) a.elements += Math.random() < 0.5 ? 1 : -1;
      applied(a);
    }
    events++;
  }
  await sleep(1000 / CHURN_RATE);
}
const churnS = (Date.now() - t0) / 1000;
const churnEnd = await requestCount();
await sleep(STATUS_INTERVAL_MS + 1500);
const during = statusPatches((await writes(mark, churnEnd)).filter((r) => !r.path.includes('/leases')));
const churnPatches = statusPatches((await writes(mark)).filter((r) => !r.path.includes('/leases')));
out(
  `churn (${events} pod changes in ${churnS.toFixed(0)} s, each touching ${PEERS + 1} nodes): status writes/s`,
  `${(during.length / churnS).toFixed(1)} (cap ${(N / (STATUS_INTERVAL_MS / 1000)).toFixed(0)}/s; ${((events * (PEERS + 1)) / churnS).toFixed(0)} node updates/s before coalescing); ${(churnPatches.length / events).toFixed(2)} writes per pod change, trailing writes included`,
);
out(
  'churn: bytes per status write',
  `median ${churnPatches.map((r) => r.bytes ?? 0).sort((a, b) => a - b)[Math.floor(churnPatches.length / 2)] ?? 0} B`,
);

// size of one node's status with and without policies that are not relevant to it
const a0 = agents[0];
if (a0 !== undefined) {
  const base = inputOf(a0, 0)();
  const lean = buildStatus(
    {
      ...base,
      applied: base.applied && {
        ...base.applied,
        state: makeState({ namespaces: [], pods, policies: policies.filter((p) => !p.namespace.startsWith('idle-')), nodes: [] }),
      },
    },
    undefined,
  );
  const fat = buildStatus(base, undefined);
  out(
    `one node's status object with 0 vs ${IRRELEVANT} policies not relevant to it`,
    `${JSON.stringify(lean).length} B vs ${JSON.stringify(fat).length} B`,
  );
}

// tenancy: the agents enforce NamespaceNetworkPolicies; one in `shared` (a pod on every node) changes
const nsnp = (ns: string, name: string, port: number): KubeObject => ({
  apiVersion: 'network.kubesphere.io/v1alpha1',
  kind: 'NamespaceNetworkPolicy',
  metadata: { namespace: ns, name },
  spec: { policyTypes: ['Ingress'], ingress: [{ from: [{ namespace: { name: ns } }], ports: [{ port }] }] },
});
let nsnps: NamespaceNetworkPolicy[] = [];
const tenancyApplied = async (objs: readonly KubeObject[]): Promise<void> => {
  await post(objs);
  nsnps = norm(await list('/apis/network.kubesphere.io/v1alpha1/namespacenetworkpolicies'), normalizeNamespacePolicy);
  state = makeState({ namespaces: [], pods, policies, nodes: [], namespacePolicies: nsnps, tenancy: DEFAULT_TENANCY });
  for (const a of agents) {
    a.version++;
    applied(a);
  }
};
async function nsnpInForce(generation: number): Promise<void> {
  for (;;) {
    const r = buildReport({
      now: Date.now(),
      nodes: agents.map((a) => a.node),
      statuses: (await list('/apis/nft-netpol.io/v1alpha1/nodepolicystatuses')) as NodePolicyStatusObject[],
      leases: (await list(`/apis/coordination.k8s.io/v1/namespaces/${AGENT_NS}/leases`)) as LeaseObject[],
      policies: [],
      pods,
      tenancy: { namespacePolicies: nsnps.filter((p) => p.namespace === 'shared'), namespaces: [], workspaces: [] },
    });
    const p = r.policies[0];
    if (p !== undefined && p.generation === generation && p.inForce.length === N) return;
    await sleep(250);
  }
}
await tenancyApplied([nsnp('shared', 'every-node', 9100)]);
await nsnpInForce(1);
await sleep(STATUS_INTERVAL_MS + 1500);
mark = await requestCount();
t0 = Date.now();
await tenancyApplied([nsnp('shared', 'every-node', 9101), nsnp('idle-0', 'nowhere', 9101)]);
await nsnpInForce(2);
const nsnpMs = Date.now() - t0;
await sleep(STATUS_INTERVAL_MS + 1500);
const nsnpPatches = statusPatches((await writes(mark)).filter((r) => !r.path.includes('/leases')));
out(
  `tenancy change (generation 2 of a NamespaceNetworkPolicy on all ${N} nodes, one more in a namespace without pods): status writes`,
  `${nsnpPatches.length} (${(nsnpPatches.length / N).toFixed(2)} per affected node), in force everywhere after ${(nsnpMs / 1000).toFixed(2)} s`,
);

out(
  'failed requests (retried)',
  `status writer ${agents.reduce((n, a) => n + a.writer.stats().failures, 0)}, Lease renewal ${agents.reduce((n, a) => n + a.heartbeat.failures, 0)}`,
);
for (const a of agents) {
  await a.writer.stop();
  await a.heartbeat.stop();
}
server.kill('SIGTERM');
process.stdout.write('\n| measure | value |\n| --- | --- |\n');
for (const [k, val] of rows) process.stdout.write(`| ${k} | ${val} |\n`);
process.exit(0);
