// Reliability soak: two real agents (compiled, as the image runs them) in the
// node namespaces of the simulated cluster (test/harness), watching the
// in-repo API server (test/support/fake-apiserver.ts), under seeded churn
// with faults injected, while continuous probes watch a connection that must
// never open and one that must always stay open.
//
//   node scripts/soak.ts [--minutes 15] [--rate 5] [--seed 1] [--source]
//
// Churn (about --rate changes per second): pods created, deleted and
// relabelled, pod IPs reused by new pods, policies created, edited and
// deleted, namespaces relabelled, in three churn namespaces (~40 pods, ~44
// policies), and ClusterNetworkPolicies (~8, Admin and Baseline, subjects in
// the churn namespaces) created, deleted, re-prioritized (equal priorities
// included), their rules' actions changed, rules swapped and specs replaced.
// The probes run between pods of namespace `guard`, which churn never
// touches: guard/intruder -> guard/vault (isolated by a policy that admits no
// existing pod; an Admin Pass hands intruder's traffic to it, a Baseline
// Accept it must not reach) must stay denied; guard/intruder -> guard/open
// (an Admin Deny) and guard/intruder -> guard/client (a Baseline Deny) must
// stay denied; guard/client -> guard/open (no NetworkPolicy selects it; an
// Admin Accept before that Deny) must stay allowed. At every convergence check
// verdict() is asked too: it must give each guard probe its expected answer.
//
// Faults, spread over the run: agent SIGKILL mid-apply (node-2), API server
// outage 30 s, compaction (410 Gone), `nft flush ruleset` and `nft delete
// table` (node-2, where guard/vault runs), the nft binary failing for 15 s (a wrapper, both
// nodes), API connections reset, the ClusterNetworkPolicy CRD removed for
// 10 s and reinstalled (the agents keep enforcing what they had; the CNPs
// churned right after the reinstall must reach them). Convergence per fault: from the end of the
// fault to both agents' applied ruleset equal to the ruleset rendered from
// the API server's objects and their kernel listing matching it (churn pauses
// before each fault until both agents have caught up, runs during the fault,
// and pauses again from its end until convergence).
//
// node-1's agent runs with the DaemonSet's environment (NODE_OPTIONS,
// MALLOC_ARENA_MAX from daemonset/daemonset.yaml), node-2's without; RSS and
// V8 heap are sampled every 10 s from /metrics. Prints a table and a verdict
// against the targets of issue 15: no never-open violation outside the first
// second after a flush/delete, convergence under 5 s for every fault but the
// API server outage, RSS flat over the last 10 minutes (less than 10 MiB
// growth by linear fit) and under 200 MiB with the DaemonSet environment.
// Exit code 0 when the verdict is PASS. Needs root, nft, ip, python3.
import { copyFileSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { buildState } from '../src/model/normalize.ts';
import type { ClusterState } from '../src/model/types.ts';
import { verdict } from '../src/policy/verdict.ts';
import { renderNode } from '../test/support/render-node.ts';
import {
  FakeApiServer,
  clusterNetworkPolicy,
  namespace,
  networkPolicy,
  pod,
  type KubeObject,
  type Resource,
} from '../test/support/fake-apiserver.ts';
import { Cluster } from '../test/harness/cluster.ts';
import { runProbes, type Probe } from '../test/harness/probe.ts';
import { AgentProcess, nftIn, scratch, type Scratch } from '../test/agent/agent-process.ts';
import { daemonsetEnv } from './daemonset-env.ts';
import { scriptArgs } from './script-args.ts';

const { values: args } = scriptArgs(import.meta.url, {
  options: {
    minutes: { type: 'string', default: '15' },
    rate: { type: 'string', default: '5' },
    seed: { type: 'string', default: '1' },
    /** Only the faults whose name contains one of these (comma-separated); default all. */
    faults: { type: 'string', default: '' },
    source: { type: 'boolean', default: false },
  },
});
const MINUTES = Number(args.minutes);
const RATE = Number(args.rate);
const ROOT = fileURLToPath(new URL('../', import.meta.url));
const DS_ENV = daemonsetEnv(join(ROOT, 'daemonset/daemonset.yaml'), ['NODE_OPTIONS', 'MALLOC_ARENA_MAX']);
const MiB = 1024 * 1024;

// ---- seeded randomness ----
let seed = Number(args.seed) >>> 0 || 1;
function rand(): number {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const now = (): number => performance.now();

// ---- build the agent like the image ----
async function compiled(): Promise<{ entry: string | undefined; cleanup: () => void }> {
  if (args.source) return { entry: undefined, cleanup: () => {} };
  const dir = mkdtempSync(join(tmpdir(), 'nftnp-soak-'));
  await execa(process.execPath, [
    join(ROOT, 'node_modules/typescript/bin/tsc'),
    '-p',
    join(ROOT, 'tsconfig.build.json'),
    '--outDir',
    join(dir, 'dist'),
  ]);
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  copyFileSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
  return { entry: join(dir, 'dist/cli/main.js'), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

// ---- the cluster ----
const CHURN_NS = ['team-a', 'team-b', 'team-c'];
const APPS = ['web', 'api', 'db', 'cache', 'batch'];
const TEAMS = ['blue', 'green', 'red'];

interface World {
  readonly c: Cluster;
  readonly api: FakeApiServer;
  readonly s: Scratch;
  /** Free pod IPs per node (API-only pods: no namespace behind them). */
  readonly free: Map<string, string[]>;
  /** Recently released IPs, reused first. */
  readonly released: { node: string; ip: string }[];
  serial: number;
  /** Is the ClusterNetworkPolicy CRD installed? (While it is not, the API refuses CNP writes: churn skips them.) */
  cnpCrd: boolean;
}

function ipsOf(w: World, nodeName: string): string[] {
  const n = w.c.nodes.find((x) => x.name === nodeName);
  if (n === undefined) throw new Error(`no node ${nodeName}`);
  const base = n.podCIDRs.v4.split('/')[0]?.split('.').slice(0, 3).join('.') ?? '10.0.0';
  return Array.from({ length: 100 }, (_, i) => `${base}.${100 + i}`);
}

function randomPolicy(ns: string, name: string): KubeObject {
  const peer = (): Record<string, unknown> => {
    const r = rand();
    if (r < 0.4) return { podSelector: { matchLabels: { app: pick(APPS) } } };
    if (r < 0.7) return { namespaceSelector: { matchLabels: { team: pick(TEAMS) } } };
    if (r < 0.85)
      return { namespaceSelector: { matchLabels: { team: pick(TEAMS) } }, podSelector: { matchLabels: { app: pick(APPS) } } };
    return { ipBlock: { cidr: '10.0.0.0/8', except: [`10.${Math.floor(rand() * 250)}.0.0/16`] } };
  };
  const ports = (): Record<string, unknown>[] => {
    const p = pick([80, 443, 5432, 8080]);
    return rand() < 0.3 ? [{ port: p, endPort: p + Math.floor(rand() * 100) }] : [{ port: p, protocol: pick(['TCP', 'UDP']) }];
  };
  const rules = (): Record<string, unknown>[] =>
    Array.from({ length: 1 + Math.floor(rand() * 2) }, () => ({ from: [peer()], ports: ports() }));
  const spec: Record<string, unknown> = {
    podSelector: rand() < 0.15 ? {} : { matchLabels: { app: pick(APPS) } },
    ingress: rules(),
  };
  if (rand() < 0.3) {
    spec['egress'] = rules().map((r) => ({ to: r['from'], ports: r['ports'] }));
    spec['policyTypes'] = ['Ingress', 'Egress'];
  }
  return networkPolicy(ns, name, spec);
}

function churnPod(w: World, ns: string, nodeName: string, ip: string): KubeObject {
  w.serial++;
  return pod(ns, `p-${w.serial}`, { app: pick(APPS), tier: pick(['fe', 'be']) }, nodeName, ip, { ips: [ip] });
}

function takeIP(w: World): { node: string; ip: string } | undefined {
  const r = w.released.shift();
  if (r !== undefined) return r;
  const node = pick(w.c.nodes.map((n) => n.name));
  const ip = w.free.get(node)?.shift();
  return ip === undefined ? undefined : { node, ip };
}

// ---- ClusterNetworkPolicies: subjects only in the churn namespaces, never guard ----
const CNP_GROUP = 'policy.networking.k8s.io';
const CNP_CRD = `clusternetworkpolicies.${CNP_GROUP}`;
const CNP_PRIORITIES = [0, 5, 10, 10, 20, 50, 100, 1000];
const CHURN_NAMESPACES = { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: CHURN_NS }] };

function randomCnpRule(dir: 'ingress' | 'egress', i: number): Record<string, unknown> {
  const peer = (): Record<string, unknown> => {
    const r = rand();
    if (r < 0.35) return { namespaces: { matchLabels: { team: pick(TEAMS) } } };
    if (r < 0.7 || dir === 'ingress')
      return {
        pods: { namespaceSelector: { matchLabels: { team: pick(TEAMS) } }, podSelector: { matchLabels: { app: pick(APPS) } } },
      };
    if (r < 0.9) return { networks: [pick(['10.0.0.0/8', '0.0.0.0/0', '10.244.2.0/24', 'fd00::/8'])] };
    return { nodes: { matchLabels: { 'kubernetes.io/hostname': pick(['node-1', 'node-2']) } } };
  };
  const peers = Array.from({ length: 1 + Math.floor(rand() * 2) }, peer);
  const rule: Record<string, unknown> = {
    name: `${dir}-${i}`,
    action: pick(['Accept', 'Deny', 'Pass']),
    [dir === 'ingress' ? 'from' : 'to']: peers,
  };
  if (rand() < 0.7) {
    const p = pick([80, 443, 5432, 8080]);
    rule['protocols'] = [
      rand() < 0.3
        ? { tcp: { destinationPort: { range: { start: p, end: p + 1 + Math.floor(rand() * 100) } } } }
        : { [pick(['tcp', 'udp'])]: { destinationPort: { number: p } } },
    ];
  }
  return rule;
}

function randomCnpSpec(): Record<string, unknown> {
  const subject =
    rand() < 0.5
      ? { namespaces: rand() < 0.5 ? CHURN_NAMESPACES : { matchLabels: { team: pick(TEAMS) } } }
      : { pods: { namespaceSelector: CHURN_NAMESPACES, podSelector: { matchLabels: { app: pick(APPS) } } } };
  const spec: Record<string, unknown> = {
    tier: rand() < 0.6 ? 'Admin' : 'Baseline',
    priority: pick(CNP_PRIORITIES),
    subject,
    ingress: Array.from({ length: 1 + Math.floor(rand() * 3) }, (_, i) => randomCnpRule('ingress', i)),
  };
  if (rand() < 0.5) spec['egress'] = Array.from({ length: 1 + Math.floor(rand() * 2) }, (_, i) => randomCnpRule('egress', i));
  return spec;
}

/** The guard's ClusterNetworkPolicies: what keeps the CNP-decided never-open probes closed and the always-open one open. */
function guardCnps(): KubeObject[] {
  const guard = (app: string) => ({
    pods: {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'guard' } },
      podSelector: { matchLabels: { app } },
    },
  });
  return [
    clusterNetworkPolicy('guard-admin', {
      tier: 'Admin',
      priority: 10,
      subject: guard('open'),
      ingress: [
        { name: 'client-in', action: 'Accept', from: [guard('client')] },
        { name: 'intruder-out', action: 'Deny', from: [guard('intruder')] },
      ],
    }),
    clusterNetworkPolicy('guard-pass', {
      tier: 'Admin',
      priority: 10,
      subject: guard('vault'),
      ingress: [{ name: 'to-networkpolicy', action: 'Pass', from: [guard('intruder')] }],
    }),
    clusterNetworkPolicy('guard-baseline', {
      tier: 'Baseline',
      priority: 0,
      subject: guard('client'),
      ingress: [{ name: 'intruder', action: 'Deny', from: [guard('intruder')] }],
    }),
    // Reached only if the Baseline tier were wrongly put before the NetworkPolicy isolating vault.
    clusterNetworkPolicy('guard-baseline-vault', {
      tier: 'Baseline',
      priority: 0,
      subject: guard('vault'),
      ingress: [{ name: 'never-reached', action: 'Accept', from: [{ namespaces: {} }] }],
    }),
  ];
}

/** One seeded ClusterNetworkPolicy change (the churn CNPs only: names cnp-N). */
function churnCnp(w: World): string {
  const cnps = w.api.list('clusternetworkpolicies').filter((o) => o.metadata.name.startsWith('cnp-'));
  const r = rand();
  if ((r < 0.2 && cnps.length < 12) || cnps.length < 4) {
    w.serial++;
    w.api.create('clusternetworkpolicies', clusterNetworkPolicy(`cnp-${w.serial}`, randomCnpSpec()));
    return 'cnp-create';
  }
  const p = structuredClone(pick(cnps));
  const spec = p['spec'] as {
    priority: number;
    tier: string;
    ingress?: Record<string, unknown>[];
    egress?: Record<string, unknown>[];
  };
  if (r < 0.35) {
    w.api.delete('clusternetworkpolicies', undefined, p.metadata.name);
    return 'cnp-delete';
  }
  if (r < 0.55) {
    // Equal priorities included: ties are broken by name, the same on every node and in the renderer.
    spec.priority = pick(CNP_PRIORITIES);
    w.api.update('clusternetworkpolicies', p);
    return 'cnp-priority';
  }
  const rules = [...(spec.ingress ?? []), ...(spec.egress ?? [])];
  if (r < 0.75 && rules.length > 0) {
    const rule = pick(rules);
    rule['action'] = pick(['Accept', 'Deny', 'Pass'].filter((a) => a !== rule['action']));
    w.api.update('clusternetworkpolicies', p);
    return 'cnp-action';
  }
  if (r < 0.87 && (spec.ingress?.length ?? 0) >= 2) {
    spec.ingress = [...(spec.ingress ?? [])].reverse();
    w.api.update('clusternetworkpolicies', p);
    return 'cnp-swap';
  }
  if (r < 0.93) {
    spec.tier = spec.tier === 'Admin' ? 'Baseline' : 'Admin';
    w.api.update('clusternetworkpolicies', p);
    return 'cnp-tier';
  }
  w.api.update('clusternetworkpolicies', clusterNetworkPolicy(p.metadata.name, randomCnpSpec()));
  return 'cnp-replace';
}

const list = (w: World, r: Resource, nsIn: readonly string[]): KubeObject[] =>
  w.api.list(r).filter((o) => o.metadata.namespace !== undefined && nsIn.includes(o.metadata.namespace));

/** One seeded change through the API. */
function churnOnce(w: World): string {
  const pods = list(w, 'pods', CHURN_NS);
  const pols = list(w, 'networkpolicies', CHURN_NS);
  // About one change in seven is a ClusterNetworkPolicy's (none while its CRD is not installed).
  if (rand() < 0.15) return w.cnpCrd ? churnCnp(w) : 'none';
  const r = rand();
  if (r < 0.18 && pods.length < 50) {
    const at = takeIP(w);
    if (at === undefined) return 'none';
    w.api.create('pods', churnPod(w, pick(CHURN_NS), at.node, at.ip));
    return 'pod-create';
  }
  if (r < 0.32 && pods.length > 25) {
    const p = pick(pods);
    w.api.delete('pods', p.metadata.namespace, p.metadata.name);
    const ip = (p as { status?: { podIP?: string } }).status?.podIP;
    const node = (p as { spec?: { nodeName?: string } }).spec?.nodeName;
    if (ip !== undefined && node !== undefined) w.released.push({ node, ip });
    return 'pod-delete';
  }
  if (r < 0.42 && pods.length > 0) {
    // IP reuse: a pod goes and a new one takes its IP at once.
    const p = pick(pods);
    const ip = (p as { status?: { podIP?: string } }).status?.podIP;
    const node = (p as { spec?: { nodeName?: string } }).spec?.nodeName;
    w.api.delete('pods', p.metadata.namespace, p.metadata.name);
    if (ip !== undefined && node !== undefined) w.api.create('pods', churnPod(w, pick(CHURN_NS), node, ip));
    return 'ip-reuse';
  }
  if (r < 0.6 && pods.length > 0) {
    const p = pick(pods);
    w.api.patchLabels('pods', p.metadata.namespace, p.metadata.name, { app: pick(APPS) });
    return 'pod-relabel';
  }
  if (r < 0.7 && pols.length < 50) {
    w.serial++;
    w.api.create('networkpolicies', randomPolicy(pick(CHURN_NS), `np-${w.serial}`));
    return 'policy-create';
  }
  if (r < 0.85 && pols.length > 0) {
    const p = pick(pols);
    w.api.update('networkpolicies', randomPolicy(p.metadata.namespace ?? 'default', p.metadata.name));
    return 'policy-edit';
  }
  if (r < 0.93 && pols.length > 30) {
    const p = pick(pols);
    w.api.delete('networkpolicies', p.metadata.namespace, p.metadata.name);
    return 'policy-delete';
  }
  w.api.patchLabels('namespaces', undefined, pick(CHURN_NS), { team: pick(TEAMS) });
  return 'namespace-relabel';
}

// ---- agents ----
interface AgentSlot {
  readonly node: string;
  readonly netns: string;
  readonly env: Record<string, string>;
  agent: AgentProcess;
  /** Samples since this incarnation started: [seconds since soak start, rss MiB, heap used MiB]. */
  samples: [number, number, number][];
  restarts: number;
}

/** Agents killed on purpose (the SIGKILL fault, the end of the run); any other exit is a failure. */
const expectedExits = new WeakSet<AgentProcess>();
const unexpectedExits: string[] = [];
let soakStart = 0;

function startAgent(w: World, node: string, netns: string, env: Record<string, string>, entry: string | undefined): AgentProcess {
  const a = startAgentProcess(w, node, netns, env, entry);
  void a.exited.then(({ code, signal }) => {
    if (expectedExits.has(a)) return;
    const what = `[${((now() - soakStart) / 1000).toFixed(0)} s] ${node}: agent exited on its own (code ${code}, signal ${signal})`;
    unexpectedExits.push(what);
    process.stdout.write(`${what}\n${a.tail(40)}\n`);
  });
  return a;
}

function startAgentProcess(
  w: World,
  node: string,
  netns: string,
  env: Record<string, string>,
  entry: string | undefined,
): AgentProcess {
  return AgentProcess.start({
    node,
    netns,
    kubeconfig: w.s.kubeconfig,
    nft: w.s.nft,
    args: ['--deny-action', 'reject', '--log-level', 'info', '--debounce', '50ms', '--crd-recheck', '1s'],
    env,
    ...(entry === undefined ? {} : { entry }),
  });
}

/** The guard probes and what they must do: never open (a tier or a NetworkPolicy denies), always open. */
const GUARD_PROBES: readonly { readonly from: string; readonly to: string; readonly allowed: boolean }[] = [
  { from: 'guard/intruder', to: 'guard/vault', allowed: false },
  { from: 'guard/intruder', to: 'guard/open', allowed: false },
  { from: 'guard/intruder', to: 'guard/client', allowed: false },
  { from: 'guard/client', to: 'guard/open', allowed: true },
];
/** Moments the evaluator disagreed with a guard probe's expectation (the probes' expectations are its). */
const oracleDisagreements: string[] = [];

function checkGuardOracle(state: ClusterState): void {
  for (const g of GUARD_PROBES) {
    const [from, to] = [g.from, g.to].map((k) => state.pods.find((p) => `${p.namespace}/${p.name}` === k));
    if (from === undefined || to === undefined) continue;
    const v = verdict(state, { kind: 'pod', pod: from }, { kind: 'pod', pod: to }, 'TCP', 80, { family: 4 });
    if (v.allowed !== g.allowed)
      oracleDisagreements.push(`${g.from} -> ${g.to}: verdict() says ${v.allowed ? 'allowed' : `blocked (${v.ingress.reason})`}`);
  }
}

/** Undefined when both agents enforce the API server's state; else why not. */
async function notConverged(w: World, slots: readonly AgentSlot[]): Promise<string | undefined> {
  const resources: Resource[] = ['namespaces', 'pods', 'networkpolicies', 'nodes', 'clusternetworkpolicies'];
  const { state } = buildState(resources.flatMap((r) => w.api.list(r)));
  checkGuardOracle(state);
  for (const s of slots) {
    // /debug/state is cheap; /debug/ruleset lists the kernel table: only once the agent says it is in sync.
    const st = await s.agent.get('/debug/state').catch(() => undefined);
    if (st === undefined || st.status !== 200) return `${s.node}: /debug/state ${st?.status ?? 'unreachable'}`;
    const phase = (JSON.parse(st.body) as { phase?: string }).phase;
    if (phase !== 'in-sync') return `${s.node}: ${phase}`;
    const want = renderNode(state, s.node, { denyAction: 'reject' }).text;
    const got = await s.agent.get('/debug/ruleset').catch(() => undefined);
    if (got === undefined || got.status !== 200) return `${s.node}: /debug/ruleset ${got?.status ?? 'unreachable'}`;
    const body = JSON.parse(got.body) as { kernelMatches: boolean | null; ruleset: string; detail: string | null };
    if (body.ruleset !== want) return `${s.node}: applied ruleset is not the API server's state`;
    if (body.kernelMatches !== true) return `${s.node}: kernel matches ${body.kernelMatches} (${body.detail})`;
  }
  return undefined;
}

// ---- probes ----
interface ProbeStats {
  attempts: number;
  neverOpenViolations: number[];
  /** Violations per never-open destination. */
  neverOpenBy: Map<string, number>;
  alwaysOpenFailures: number[];
}

async function probeLoop(w: World, stop: { done: boolean }, stats: ProbeStats, t0: number): Promise<void> {
  const tcp = (from: string, to: string): Probe => ({ from, to, protocol: 'TCP', port: 80, family: 4, via: 'pod' });
  // Denied by a NetworkPolicy (after an Admin Pass), an Admin Deny, a Baseline Deny.
  const never = GUARD_PROBES.filter((g) => !g.allowed).map((g) => tcp(g.from, g.to));
  const always = GUARD_PROBES.filter((g) => g.allowed).map((g) => tcp(g.from, g.to))[0]!;
  while (!stop.done) {
    const at = (now() - t0) / 1000;
    const out = await runProbes(w.c, [...never, always], { timeoutMs: 1000, retries: 0 }).catch(() => []);
    // About 100 connection attempts per second, as in the issue's run.
    await sleep(15);
    for (const o of out) {
      stats.attempts++;
      if (never.includes(o.probe) && o.connected) {
        stats.neverOpenViolations.push(at);
        stats.neverOpenBy.set(o.probe.to, (stats.neverOpenBy.get(o.probe.to) ?? 0) + 1);
      }
      if (o.probe === always && !o.connected) stats.alwaysOpenFailures.push(at);
    }
  }
}

// ---- faults ----
interface FaultResult {
  readonly name: string;
  readonly atS: number;
  /** Seconds from the end of the fault to convergence; undefined: not within 60 s. */
  readonly convergeS: number | undefined;
  readonly detail: string;
}

type Fault = {
  readonly name: string;
  /** Injects it and returns when the fault is over (churn keeps running meanwhile). */
  readonly run: (w: World, slots: AgentSlot[], entry: string | undefined) => Promise<string>;
  readonly outage?: boolean;
  /** Never-open probes failing within 1 s of the injection are "the moment of the flush". */
  readonly flush?: boolean;
};

const FAULTS: readonly Fault[] = [
  {
    name: 'agent SIGKILL mid-apply (node-2)',
    run: async (w, slots, entry) => {
      const s = slots[1]!;
      // A burst of changes so that an apply is in flight, then the kill.
      for (let i = 0; i < 5; i++) churnOnce(w);
      await sleep(30);
      expectedExits.add(s.agent);
      s.agent.kill('SIGKILL');
      await s.agent.exited;
      s.agent = startAgent(w, s.node, s.netns, s.env, entry);
      s.restarts++;
      s.samples = [];
      await s.agent.waitReady(60_000);
      return 'restarted, ready';
    },
  },
  {
    name: 'API server outage 30 s',
    outage: true,
    run: async (w) => {
      await w.api.refuse();
      w.api.resetConnections();
      await sleep(30_000);
      await w.api.accept();
      return 'refused 30 s';
    },
  },
  {
    name: 'compaction (410 Gone)',
    run: (w) => {
      w.api.compact();
      w.api.endStreams();
      return Promise.resolve('history compacted, watches ended');
    },
  },
  {
    name: 'nft flush ruleset (node-2)',
    flush: true,
    run: async (w) => {
      await nftIn(w.c.nodes[1]!.netns, ['flush', 'ruleset']);
      return 'flushed';
    },
  },
  {
    name: 'nft delete table (node-2)',
    flush: true,
    run: async (w) => {
      await nftIn(w.c.nodes[1]!.netns, ['delete', 'table', 'inet', 'nft-netpol']);
      return 'deleted';
    },
  },
  {
    name: 'nft binary failing 15 s',
    run: async (w) => {
      await w.s.flag('fail', true);
      await sleep(15_000);
      await w.s.flag('fail', false);
      return 'wrapper failed every transaction for 15 s';
    },
  },
  {
    name: 'ClusterNetworkPolicy CRD removed 10 s, reinstalled',
    run: async (w) => {
      // The agents' CNP watches fail and retry, keeping what they had (fail closed: the guard's
      // Admin and Baseline Denies stay in force); churn of everything else goes on.
      w.cnpCrd = false;
      w.api.removeCRDs([CNP_GROUP, CNP_CRD]);
      w.api.endStreams('clusternetworkpolicies');
      await sleep(10_000);
      w.api.installCRDs([CNP_GROUP]);
      w.cnpCrd = true;
      // Changes right after the reinstall: converged means the watches are back.
      const ops = Array.from({ length: 3 }, () => churnCnp(w));
      return `removed 10 s, reinstalled, then ${ops.join(', ')}`;
    },
  },
  {
    name: 'API connections reset',
    run: (w) => {
      w.api.resetConnections();
      return Promise.resolve('reset');
    },
  },
];

async function sampleMemory(slots: readonly AgentSlot[], t0: number): Promise<void> {
  for (const s of slots) {
    const m = await s.agent.get('/metrics', 'metrics').catch(() => undefined);
    if (m === undefined || m.status !== 200) continue;
    const v = (name: string): number => {
      const line = m.body.split('\n').find((l) => l.startsWith(`${name} `));
      return Number(line?.split(' ')[1] ?? NaN);
    };
    s.samples.push([(now() - t0) / 1000, v('process_resident_memory_bytes') / MiB, v('nodejs_heap_size_used_bytes') / MiB]);
  }
}

/** Least-squares slope (per second) of y over x. */
function slope(points: readonly [number, number][]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((a, p) => a + p[0], 0) / n;
  const my = points.reduce((a, p) => a + p[1], 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

// ---- main ----
async function main(): Promise<number> {
  const build = await compiled();
  const c = await Cluster.create({
    style: 'routed',
    nodes: [{ name: 'node-1' }, { name: 'node-2' }],
    pods: [
      { key: 'guard/intruder', node: 'node-1' },
      { key: 'guard/client', node: 'node-1' },
      { key: 'guard/vault', node: 'node-2' },
      { key: 'guard/open', node: 'node-2' },
    ],
  });
  const api = await FakeApiServer.start();
  const s = await scratch(api);
  const w: World = { c, api, s, free: new Map(), released: [], serial: 0, cnpCrd: true };
  const slots: AgentSlot[] = [];
  try {
    for (const n of c.nodes) w.free.set(n.name, ipsOf(w, n.name));
    for (const n of c.nodeObjects()) api.create('nodes', structuredClone(n) as KubeObject);
    api.create('namespaces', namespace('guard'));
    for (const ns of CHURN_NS) api.create('namespaces', namespace(ns, { team: pick(TEAMS) }));
    for (const key of ['guard/intruder', 'guard/client', 'guard/vault', 'guard/open']) {
      const p = c.pod(key);
      api.create('pods', pod(p.namespace, p.name, { app: p.name }, p.node, p.ips.v4, { ips: [p.ips.v4, p.ips.v6] }));
    }
    api.create(
      'networkpolicies',
      networkPolicy('guard', 'vault-isolated', {
        podSelector: { matchLabels: { app: 'vault' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'trusted' } } }] }],
      }),
    );
    for (let i = 0; i < 36; i++) {
      const at = takeIP(w);
      if (at !== undefined) api.create('pods', churnPod(w, pick(CHURN_NS), at.node, at.ip));
    }
    for (let i = 0; i < 43; i++) {
      w.serial++;
      api.create('networkpolicies', randomPolicy(pick(CHURN_NS), `np-${w.serial}`));
    }
    for (const g of guardCnps()) api.create('clusternetworkpolicies', g);
    for (let i = 0; i < 8; i++) {
      w.serial++;
      api.create('clusternetworkpolicies', clusterNetworkPolicy(`cnp-${w.serial}`, randomCnpSpec()));
    }
    const [n1, n2] = c.nodes;
    if (n1 === undefined || n2 === undefined) throw new Error('two nodes expected');
    for (const [n, env] of [
      [n1, DS_ENV],
      [n2, {}],
    ] as const) {
      slots.push({
        node: n.name,
        netns: n.netns,
        env,
        agent: startAgent(w, n.name, n.netns, env, build.entry),
        samples: [],
        restarts: 0,
      });
    }
    for (const sl of slots) await sl.agent.waitReady(60_000);

    const t0 = now();
    soakStart = t0;
    const endAt = t0 + MINUTES * 60_000;
    const stop = { done: false };
    const stats: ProbeStats = { attempts: 0, neverOpenViolations: [], neverOpenBy: new Map(), alwaysOpenFailures: [] };
    const probing = probeLoop(w, stop, stats, t0);
    const paused = { on: false };
    const ops = new Map<string, number>();
    const churning = (async () => {
      const gap = 1000 / RATE;
      let next = now();
      while (!stop.done) {
        next += gap;
        if (!paused.on) {
          const op = churnOnce(w);
          ops.set(op, (ops.get(op) ?? 0) + 1);
        }
        await sleep(Math.max(0, next - now()));
      }
    })();
    const sampling = (async () => {
      while (!stop.done) {
        await sampleMemory(slots, t0);
        await sleep(10_000);
      }
    })();

    // Faults spread evenly between the first and the last minute (at least 20 s apart).
    const results: FaultResult[] = [];
    const flushMoments: number[] = [];
    const only = args.faults.split(',').filter((x) => x !== '');
    const faults = FAULTS.filter((f) => only.length === 0 || only.some((o) => f.name.includes(o)));
    const span = Math.max(faults.length * 20_000, MINUTES * 60_000 - 90_000);
    for (const [i, f] of faults.entries()) {
      const at = t0 + 30_000 + (span * i) / faults.length;
      await sleep(Math.max(0, at - now()));
      if (now() > endAt) break;
      // Churn pauses until both agents have caught up, so that the time
      // measured below is the fault's, not the backlog of this shared
      // machine; it resumes for the fault itself.
      paused.on = true;
      const settleStart = now();
      while (now() - settleStart < 30_000 && (await notConverged(w, slots)) !== undefined) await sleep(200);
      paused.on = false;
      const injectedS = (now() - t0) / 1000;
      if (f.flush === true) flushMoments.push(injectedS);
      const detail = await f.run(w, slots, build.entry);
      paused.on = true;
      const endS = now();
      let convergeS: number | undefined;
      let why: string | undefined;
      while (now() - endS < 60_000) {
        const before = now();
        const not = await notConverged(w, slots);
        if (not === undefined) {
          convergeS = (before - endS) / 1000;
          break;
        }
        why = not;
        await sleep(200);
      }
      paused.on = false;
      results.push({ name: f.name, atS: injectedS, convergeS, detail });
      process.stderr.write(
        `[${injectedS.toFixed(0)} s] ${f.name}: converged in ${convergeS?.toFixed(2) ?? '>60'} s${why === undefined ? '' : ` (last waited for: ${why})`}\n`,
      );
    }
    await sleep(Math.max(0, endAt - now()));
    stop.done = true;
    await Promise.all([probing, churning, sampling]);

    // ---- report ----
    const inFlush = (t: number): boolean => flushMoments.some((m) => t >= m && t < m + 1);
    const violations = stats.neverOpenViolations.filter((t) => !inFlush(t));
    if (oracleDisagreements.length > 0)
      process.stderr.write(`verdict() disagreed with the probes: ${[...new Set(oracleDisagreements)].join('; ')}\n`);
    if (violations.length > 0)
      process.stderr.write(`never-open violations outside flushes at (s): ${violations.map((t) => t.toFixed(2)).join(' ')}\n`);
    process.stderr.write(`flushes at (s): ${flushMoments.map((t) => t.toFixed(2)).join(' ')}\n`);
    const metrics = await Promise.all(
      slots.map(async (sl) => ({
        repairs: await sl.agent.metric('nftnp_drift_repairs_total'),
        monitorRestarts: await sl.agent.metric('nftnp_table_monitor_restarts_total'),
        applies: await sl.agent.metric('nftnp_nft_restore_calls_total'),
        errors: await sl.agent.metric('nftnp_nft_restore_errors_total'),
      })),
    );
    const out: string[] = [];
    out.push(
      `soak: ${MINUTES} min, churn ${RATE}/s (seed ${args.seed}), ${[...ops.values()].reduce((a, b) => a + b, 0)} changes: ${[...ops.entries()].map(([k, v]) => `${k} ${v}`).join(', ')}`,
    );
    out.push(
      `cluster at the end: ${list(w, 'pods', CHURN_NS).length + 4} pods, ${api.list('networkpolicies').length} policies, ${api.list('clusternetworkpolicies').length} cluster network policies; load average ${loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')} (2 cores, shared)`,
    );
    out.push('');
    out.push('| fault | at (s) | converged after (s) |');
    out.push('| --- | ---: | ---: |');
    for (const r of results) out.push(`| ${r.name} | ${r.atS.toFixed(0)} | ${r.convergeS?.toFixed(2) ?? '> 60'} |`);
    out.push('');
    out.push(
      `probes: ${stats.attempts} connection attempts; never-open violations ${stats.neverOpenViolations.length} (${stats.neverOpenViolations.length - violations.length} within 1 s of a flush/delete, ${violations.length} outside${stats.neverOpenBy.size === 0 ? '' : `; to ${[...stats.neverOpenBy].map(([k, v]) => `${k} ${v}`).join(', ')}`}); always-open failures ${stats.alwaysOpenFailures.length}`,
    );
    out.push('');
    out.push(
      '| agent | env | restarts | drift repairs | monitor restarts | nft transactions (errors) | RSS first / max / last (MiB) | heap used max / last (MiB) | RSS trend, last 10 min (MiB per 10 min) |',
    );
    out.push('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    const trends: number[] = [];
    for (const [i, sl] of slots.entries()) {
      const m = metrics[i]!;
      const last10 = sl.samples.filter((p) => p[0] >= MINUTES * 60 - 600);
      const trend = slope(last10.map((p) => [p[0], p[1]])) * 600;
      trends.push(trend);
      const rss = sl.samples.map((p) => p[1]);
      const heap = sl.samples.map((p) => p[2]);
      const f = (x: number | undefined): string => (x === undefined || Number.isNaN(x) ? '?' : x.toFixed(0));
      out.push(
        `| ${sl.node} | ${Object.keys(sl.env).length > 0 ? 'DaemonSet' : 'none'} | ${sl.restarts} | ${m.repairs} | ${m.monitorRestarts} | ${m.applies} (${m.errors}) | ${f(rss[0])} / ${f(Math.max(...rss))} / ${f(rss.at(-1))} | ${f(Math.max(...heap))} / ${f(heap.at(-1))} | ${trend.toFixed(1)} |`,
      );
    }
    const slow = results.filter((r) => r.name !== 'API server outage 30 s' && (r.convergeS === undefined || r.convergeS >= 5));
    const outage = results.find((r) => r.name === 'API server outage 30 s');
    const dsMax = Math.max(...(slots[0]?.samples.map((p) => p[1]) ?? [0]));
    const checks: [string, boolean][] = [
      ['no agent exited on its own', unexpectedExits.length === 0],
      ['no never-open violation outside the moment of a flush', violations.length === 0],
      ['no always-open failure', stats.alwaysOpenFailures.length === 0],
      ["verdict() always agreed with the guard probes' expectations", oracleDisagreements.length === 0],
      ['every fault but the outage converged in < 5 s', slow.length === 0 && results.length === faults.length],
      ['the outage converged', outage?.convergeS !== undefined],
      ['RSS with the DaemonSet env < 200 MiB', dsMax < 200],
    ];
    // The target is for the DaemonSet's environment (node-1); node-2's trend is reported for comparison.
    if (MINUTES >= 12)
      checks.push(['RSS with the DaemonSet env flat over the last 10 min (< 10 MiB growth)', (trends[0] ?? Infinity) < 10]);
    out.push('');
    for (const [what, ok] of checks) out.push(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
    const pass = checks.every(([, ok]) => ok);
    out.push(`verdict: ${pass ? 'PASS' : 'FAIL'}`);
    process.stdout.write(`${out.join('\n')}\n`);
    return pass ? 0 : 1;
  } finally {
    for (const sl of slots) {
      expectedExits.add(sl.agent);
      await sl.agent.stop();
    }
    await c.destroy();
    await api.close();
    await s.cleanup();
    build.cleanup();
  }
}

process.exitCode = await main();
