// The node agent end to end: how long from a write to the API server until the
// node's kernel enforces it, what the agent process costs in memory, and how
// long one nft transaction takes as the ruleset grows.
//
//   node scripts/bench-agent.ts [--sizes 1000,10000,100000] [--samples 100] [--warmup 2] [--source]
//                               [--rate 200 --duration 30] [--baseline REF [--rounds 2]]
//                               [--dump-log DIR [--log-level debug]] [--node-options '...'] [--node-args=--trace-gc]
//                               [--baseline-node-args='...'] [--no-gc-between] [--debounce 50ms] [--drift-interval 60s]
//
// Per size: scripts/gen-cluster.ts's seeded cluster (pods, pods/10 policies,
// pods/20 namespaces, 110 pods per node) is loaded into the in-repo fake API
// server (in this process); the agent runs as a real child process
// (`nft-netpol-agent run --node <first node> --netns <scratch>`) and applies
// into a scratch network namespace with the real nft. Needs root. The agent
// runs compiled (tsc -p tsconfig.build.json into a temporary directory), as
// the image does; --source runs src/ through Node's type stripping instead
// (about 30 MiB more RSS).
//
// Latency = end of the agent's apply whose "ruleset applied" log line names
// the changed object, minus the time just before the API write: watch
// delivery + render + `nft -f` commit, to 0.1 ms (the apply's `monoMs` from
// the agent's start line's `timeOrigin`, against this process's clock; the
// line's whole-ms `time` for agents before 2026-11-29, whose ratios of 5 ms
// figures were then quantized by +-1 ms) (a change reaching an idle agent is
// applied at once; --debounce, 10ms here unless given, the test harness's
// value, spaces applies under load: the DaemonSet ships 50ms; --drift-interval,
// the DaemonSet's 60s unless given, 0 before 2026-11-28 16:00). Changes:
//   local pod   delete / re-create a running pod of the agent's node
//   remote peer create / delete a pod on another node that a local policy's
//               peer selector picks (its IP enters / leaves a peer set)
//   policy      add / remove an extra ingress rule of a policy that selects a
//               local pod
// Samples are taken one at a time (the agent idle in between), so each is one
// uncoalesced event. The first --warmup (2) changes of each kind are applied
// and printed but not counted: the first of a kind runs code V8 has not
// optimized yet (at 100k pods 70-110 ms of compile, once per agent process),
// which the p99 of a day of changes does not see (until 2026-11-27 they
// were counted). Between samples this process, which plays the API server
// and holds the generated cluster, collects its own garbage (a full GC),
// so that its pauses fall outside the samples' watch deliveries
// (--no-gc-between: where they fall, as before 2026-11-27 18:00).
//
// --rate R --duration D: after the samples, drive R changes per second for D
// seconds at the agent's node, the busiest node's mix: 20 % local pods (a pod
// of the node created or deleted, with the labels of an isolated pod, so its
// chains come and go), 70 % remote peers (a pod of another node that a local
// policy's peer selector picks, created or deleted: its IP enters or leaves a
// peer set), 10 % policy updates (a rule added to / removed from a policy
// selecting a local pod). Every created pod has its own name, so each change
// is found in the reasons of the apply that enforced it (at most 16 reasons
// per apply: the first 16 the apply took, i.e. its oldest; the others are
// younger and enforced by the same apply). Reported: change-to-enforced
// p50/p99 of the named changes over the whole run and per 5 s window, the
// applies' own latencyMs (the age of the oldest change each apply took, from
// its arrival: the queue's wait; a queue that grows shows as a rising
// maximum per window), applies and changes per second, the time from the
// last write to the last apply (drain), the agent's CPU seconds per second
// (/proc/<pid>/stat utime+stime; in brackets with the nft processes it ran)
// and its RSS peak.
//
// --baseline REF: also builds REF (git archive of src/) and runs each size
// with both agents in alternation (--rounds times each, the order swapped
// every round), so that before/after figures share the machine's load.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { cpus, loadavg, totalmem } from 'node:os';
import { PerformanceObserver } from 'node:perf_hooks';
import type { ClusterState, NetworkPolicy, Pod } from '../src/model/types.ts';
import { selectorMatches } from '../src/model/selector.ts';
import { isActivePod } from '../src/model/types.ts';
import { FakeApiServer, type KubeObject } from '../test/support/fake-apiserver.ts';
import { createNetns, deleteNetns, uniquePrefix } from '../test/harness/netns.ts';
import { AgentProcess, eventually, listTableIn, scratch, type LogLine } from '../test/agent/agent-process.ts';
import { clusterObjects, generateCluster, podObject, policyObject } from './gen-cluster.ts';
import { compileNode } from '../src/compile/compile.ts';
import { renderRuleset } from '../src/nft/render.ts';
import { daemonsetEnv } from './daemonset-env.ts';
import { listTable, runNft } from '../src/nft/exec.ts';
import { collectGarbage } from '../src/observability/memory.ts';
import { FOLD_REASON } from '../src/agent/reconciler.ts';
import { scriptArgs } from './script-args.ts';

/** Unix ms with a fraction: this process's start plus its monotonic clock. */
const nowMs = (): number => performance.timeOrigin + performance.now();

/** Each agent's start line's timeOrigin (null: an agent that logs none), looked up once. */
const origins = new WeakMap<AgentProcess, unknown>();

/**
 * When an apply ended, in Unix ms: sub-millisecond from the agent's start
 * (`timeOrigin` on its start line) plus the apply's `monoMs`; agents that log
 * neither (older baselines) give the line's whole-millisecond `time`.
 */
function appliedAt(agent: AgentProcess, line: LogLine): number {
  let origin = origins.get(agent);
  if (origin === undefined) {
    origin = agent.lines.find((l) => typeof l['timeOrigin'] === 'number')?.['timeOrigin'] ?? null;
    origins.set(agent, origin);
  }
  const mono = line['monoMs'];
  return typeof origin === 'number' && typeof mono === 'number' ? origin + mono : Date.parse(String(line['time']));
}

const { values: args } = scriptArgs(import.meta.url, {
  options: {
    sizes: { type: 'string', default: '1000,10000,100000' },
    /** Per change kind; p99 is then the second slowest (with 40 it was the slowest: one collection decided it). */
    samples: { type: 'string', default: '100' },
    /** Changes of each kind applied first and not counted (the first of a kind runs cold code). */
    warmup: { type: 'string', default: '2' },
    source: { type: 'boolean', default: false },
    /** Keep this process's garbage collections where they fall (before 2026-11-27 18:00: also in samples). */
    'no-gc-between': { type: 'boolean', default: false },
    /** The agent's --debounce: the test harness's 10ms by default (all figures before 2026-11-27 18:30), 50ms ships. */
    debounce: { type: 'string', default: '10ms' },
    rate: { type: 'string', default: '0' },
    duration: { type: 'string', default: '30' },
    baseline: { type: 'string' },
    rounds: { type: 'string', default: '1' },
    /** Write the agent's log lines of each run to this directory. */
    'dump-log': { type: 'string' },
    /** The agent's --log-level (debug: the runs nothing logs at info, e.g. a change's wait in --dump-log). */
    'log-level': { type: 'string', default: 'info' },
    /** The agent's --drift-interval: the DaemonSet's 60s (0 in all figures before 2026-11-28 16:00: no periodic check). */
    'drift-interval': { type: 'string', default: '60s' },
    /** NODE_OPTIONS for the agent instead of the DaemonSet's (to try V8 flags). */
    'node-options': { type: 'string' },
    /** Node/V8 flags for the agent's command line (those NODE_OPTIONS refuses, e.g. --trace-gc; lines kept in --dump-log). */
    'node-args': { type: 'string' },
    /** NODE_OPTIONS of the baseline's agent only (--baseline HEAD with this: flags against flags). */
    'baseline-node-options': { type: 'string' },
    /** Command-line Node/V8 flags of the baseline's agent only (default: --node-args). */
    'baseline-node-args': { type: 'string' },
  },
});
const RATE = Number(args.rate);
const GC_BETWEEN = !args['no-gc-between'];
const DURATION_S = Number(args.duration);
const ROUNDS = Number(args.rounds);
/**
 * The agent's runtime settings, read from the DaemonSet (daemonset/daemonset.yaml
 * env, docs/operations.md) so the benchmark measures what ships: heap bounded
 * below the 512Mi memory limit, young generation capped (V8 would otherwise
 * grow it to 2 x 64 MiB of resident semi-spaces), two glibc malloc arenas.
 */
const AGENT_ENV = daemonsetEnv(fileURLToPath(new URL('../daemonset/daemonset.yaml', import.meta.url)), [
  'NODE_OPTIONS',
  'MALLOC_ARENA_MAX',
]);
if (args['node-options'] !== undefined) AGENT_ENV['NODE_OPTIONS'] = args['node-options'];
const SIZES = args.sizes.split(',').map(Number);
const SAMPLES = Number(args.samples);
const WARMUP = Number(args.warmup);
for (const [name, v] of Object.entries({ rate: RATE, duration: DURATION_S, rounds: ROUNDS, samples: SAMPLES, warmup: WARMUP }))
  if (!Number.isInteger(v) || v < 0)
    throw new Error(`--${name} must be a whole number >= 0, not "${String(args[name as keyof typeof args])}"`);
const MiB = 1024 * 1024;

function pct(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? NaN;
}

/** VmRSS = RssAnon (heap, malloc, stacks) + RssFile (mostly the node binary's code) + RssShmem. */
function rssOf(pid: number): { rss: number; hwm: number; anon: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM'), anon: kb('RssAnon'), file: kb('RssFile') };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// This process's garbage collections (start and duration, performance.now() ms).
const benchGcs: { start: number; ms: number }[] = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) benchGcs.push({ start: e.startTime, ms: e.duration });
}).observe({ entryTypes: ['gc'] });

interface Change {
  /** Object key as it appears in the agent's change reasons ("ns/name"). */
  readonly key: string;
  apply(api: FakeApiServer, i: number): void;
}

function localPodChange(pod: Pod): Change {
  const obj = podObject(pod) as unknown as KubeObject;
  return {
    key: `${pod.namespace}/${pod.name}`,
    apply(api, i) {
      if (i % 2 === 0) api.delete('pods', pod.namespace, pod.name);
      else api.create('pods', structuredClone(obj));
    },
  };
}

function remotePeerChange(ns: string, labels: Record<string, string>, node: string): Change {
  const name = 'bench-remote-peer';
  const obj: KubeObject = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { namespace: ns, name, labels },
    spec: { nodeName: node, containers: [{ name: 'main', image: 'x' }] },
    status: { phase: 'Running', podIP: '100.64.0.7', podIPs: [{ ip: '100.64.0.7' }] },
  };
  return {
    key: `${ns}/${name}`,
    apply(api, i) {
      if (i % 2 === 0) api.create('pods', structuredClone(obj));
      else api.delete('pods', ns, name);
    },
  };
}

function policyChange(pol: NetworkPolicy): Change {
  const base = policyObject(pol) as unknown as KubeObject & { spec: Record<string, unknown> };
  const dir = pol.types.ingress ? 'ingress' : 'egress';
  const extra = structuredClone(base);
  extra.spec[dir] = [...((base.spec[dir] as unknown[] | undefined) ?? []), { ports: [{ protocol: 'TCP', port: 12345 }] }];
  return {
    key: `${pol.namespace}/${pol.name}`,
    apply(api, i) {
      api.update('networkpolicies', structuredClone(i % 2 === 0 ? extra : base));
    },
  };
}

/** Medians of 5 runs of each step of one apply, in this process, into the scratch namespace. */
async function applySteps(
  state: ClusterState,
  node: string,
  netns: string,
): Promise<{ render: number; nft: number; list: number; scriptKiB: number }> {
  const times = { render: [] as number[], nft: [] as number[], list: [] as number[] };
  let text = '';
  for (let i = 0; i < 5; i++) {
    let t = performance.now();
    text = renderRuleset(compileNode(state, node));
    times.render.push(performance.now() - t);
    t = performance.now();
    const r = await runNft(text, { netns });
    if (!r.ok) throw new Error(`nft -f failed: ${r.error}`);
    times.nft.push(performance.now() - t);
    t = performance.now();
    await listTable('nft-netpol', { netns });
    times.list.push(performance.now() - t);
  }
  return {
    render: pct(times.render, 50),
    nft: pct(times.nft, 50),
    list: pct(times.list, 50),
    scriptKiB: Buffer.byteLength(text) / 1024,
  };
}

/** CPU seconds of a process: its own (utime + stime) and its reaped children's (the nft and conntrack it ran). */
function cpuSeconds(pid: number): { own: number; children: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields 14-17 of stat(5) (utime stime cutime cstime), counted after the command: indexes 11-14; ticks of 1/100 s (CLK_TCK).
  const tick = (i: number) => Number(f[i]) / 100;
  return { own: tick(11) + tick(12), children: tick(13) + tick(14) };
}

interface LoadResult {
  rate: number;
  durationS: number;
  written: number;
  matched: number;
  unmatched: number;
  p50: number;
  p99: number;
  /** p99 of change-to-enforced per 5 s window. */
  windowsP99: number[];
  /** The applies' own latencyMs (the age of the oldest change each took: the queue's wait), max per 5 s window. */
  windowsOldest: number[];
  appliesPerS: number;
  /** The applies' own latencyMs (oldest change of each apply): p50 / p99. */
  agentP50: number;
  agentP99: number;
  applyP50: number;
  applyP99: number;
  cpuPerS: number;
  /** With the nft processes it ran. */
  cpuChildrenPerS: number;
  hwm: number;
  /** From the last write until every change was enforced. */
  drainMs: number;
}

interface LoadTargets {
  node: string;
  other: string;
  localTemplate: Pod;
  peer: { ns: string; labels: Record<string, string> };
  policy: Change;
}

/** Drives RATE changes per second for DURATION_S seconds (the mix in the header) and measures the agent. */
async function driveLoad(api: FakeApiServer, agent: AgentProcess, t: LoadTargets): Promise<LoadResult> {
  // key: the reason the agent logs for it ("pods add ns/name"), so an add and a delete of one pod are told apart.
  const writes: { key: string; at: number; policy: boolean }[] = [];
  const localLive: string[] = [];
  const peerLive: string[] = [];
  let seq = 0;
  let policyFlip = 0;
  const ip = (n: number) => `100.${64 + ((n >> 16) & 63)}.${(n >> 8) & 255}.${n & 255}`;
  const localObj = podObject(t.localTemplate) as unknown as KubeObject & { metadata: { name: string } };
  const one = (): void => {
    const r = (seq * 7919) % 100;
    const n = ++seq;
    const at = nowMs();
    if (r < 20) {
      const ns = t.localTemplate.namespace;
      if (localLive.length >= 20 || (localLive.length > 0 && n % 2 === 0)) {
        const name = localLive.shift() ?? '';
        api.delete('pods', ns, name);
        writes.push({ key: `pods delete ${ns}/${name}`, at, policy: false });
      } else {
        const o = structuredClone(localObj);
        const name = `bench-load-local-${n}`;
        o.metadata.name = name;
        (o as unknown as { status: Record<string, unknown> }).status = {
          phase: 'Running',
          podIP: ip(n),
          podIPs: [{ ip: ip(n) }],
        };
        api.create('pods', o);
        localLive.push(name);
        writes.push({ key: `pods add ${ns}/${name}`, at, policy: false });
      }
    } else if (r < 90) {
      const ns = t.peer.ns;
      if (peerLive.length >= 50 || (peerLive.length > 0 && n % 2 === 0)) {
        const name = peerLive.shift() ?? '';
        api.delete('pods', ns, name);
        writes.push({ key: `pods delete ${ns}/${name}`, at, policy: false });
      } else {
        const name = `bench-load-peer-${n}`;
        api.create('pods', {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { namespace: ns, name, labels: t.peer.labels },
          spec: { nodeName: t.other, containers: [{ name: 'main', image: 'x' }] },
          status: { phase: 'Running', podIP: ip(n), podIPs: [{ ip: ip(n) }] },
        });
        peerLive.push(name);
        writes.push({ key: `pods add ${ns}/${name}`, at, policy: false });
      }
    } else {
      t.policy.apply(api, policyFlip++);
      writes.push({ key: `networkpolicies update ${t.policy.key}`, at, policy: true });
    }
  };
  const seen = agent.lines.length;
  const cpu0 = cpuSeconds(agent.pid);
  const start = Date.now();
  const total = Math.round(RATE * DURATION_S);
  // Paced by the clock, not by timer counts: a late timer catches up.
  while (seq < total) {
    const due = Math.min(total, Math.floor(((Date.now() - start) / 1000) * RATE) + 1);
    while (seq < due) one();
    await sleep(5);
  }
  const lastWrite = Date.now();
  const cpu1 = cpuSeconds(agent.pid);
  const loadS = (lastWrite - start) / 1000;
  const appliedLines = () => agent.lines.slice(seen).filter((l) => l['event'] === 'apply' && l['result'] === 'applied');
  // Enforced = the end of the first apply (after the write) that names the change.
  const match = (): (number | undefined)[] => {
    const applies = appliedLines().map((l) => ({
      end: appliedAt(agent, l),
      start: appliedAt(agent, l) - Number(l['durationMs']),
      reasons: (l['reasons'] as string[] | undefined) ?? [],
    }));
    return writes.map((w) => {
      const a = applies.find((x) => x.end >= w.at && (!w.policy || x.start >= w.at) && x.reasons.includes(w.key));
      return a?.end;
    });
  };
  // The agent's own applies that fold held peer addresses (nft/recent-peers.ts) enforce no change.
  const changeApplies = (ls: LogLine[]): LogLine[] =>
    ls.filter((l) => {
      const r = l['reasons'];
      return !(Array.isArray(r) && r.length > 0 && r.every((x) => x === FOLD_REASON));
    });
  const drainDeadline = Date.now() + 60_000;
  // Drained: an apply ended after the last write, and none came for twice the
  // longest gap between applies under load (at least 1 s).
  while (Date.now() < drainDeadline) {
    const ends = changeApplies(appliedLines()).map((l) => Date.parse(String(l['time'])));
    const gaps = ends.slice(1).map((e, i) => e - (ends[i] ?? e));
    const last = ends.at(-1);
    if (last !== undefined && last > lastWrite && Date.now() - last > Math.max(1_000, 2 * Math.max(0, ...gaps))) break;
    await sleep(200);
  }
  const enforced = match();
  const applies = appliedLines();
  const lastApplyEnd = Math.max(...changeApplies(applies).map((l) => Date.parse(String(l['time']))));
  const lat: number[] = [];
  const win = new Map<number, number[]>();
  enforced.forEach((e, i) => {
    const w = writes[i];
    if (e === undefined || w === undefined) return;
    const ms = Math.round(e - w.at);
    lat.push(ms);
    const k = Math.floor((w.at - start) / 5000);
    win.set(k, [...(win.get(k) ?? []), ms]);
  });
  const windows = [...win.keys()].sort((a, b) => a - b);
  const oldest = new Map<number, number>();
  for (const l of applies) {
    const k = Math.floor((Date.parse(String(l['time'])) - start) / 5000);
    const v = Number(l['latencyMs']);
    if (Number.isFinite(v) && Date.parse(String(l['time'])) <= lastWrite + 1000) oldest.set(k, Math.max(oldest.get(k) ?? 0, v));
  }
  const during = applies.filter((l) => Date.parse(String(l['time'])) <= lastWrite);
  const agentLat = applies.map((l) => Number(l['latencyMs'])).filter((x) => Number.isFinite(x));
  const durs = applies.map((l) => Number(l['durationMs']));
  return {
    rate: RATE,
    durationS: loadS,
    written: writes.length,
    matched: lat.length,
    unmatched: writes.length - lat.length,
    p50: pct(lat, 50),
    p99: pct(lat, 99),
    windowsP99: windows.map((k) => pct(win.get(k) ?? [], 99)),
    windowsOldest: [...oldest.keys()].sort((a, b) => a - b).map((k) => Math.round(oldest.get(k) ?? 0)),
    appliesPerS: during.length / loadS,
    agentP50: pct(agentLat, 50),
    agentP99: pct(agentLat, 99),
    applyP50: pct(durs, 50),
    applyP99: pct(durs, 99),
    cpuPerS: (cpu1.own - cpu0.own) / loadS,
    cpuChildrenPerS: (cpu1.own + cpu1.children - cpu0.own - cpu0.children) / loadS,
    hwm: rssOf(agent.pid).hwm,
    drainMs: lastApplyEnd - lastWrite,
  };
}

interface SizeResult {
  label: string;
  pods: number;
  policies: number;
  readyMs: number;
  rssAfterSync: number;
  anonAfterSync: number;
  fileAfterSync: number;
  heapAfterSync: number;
  rssEnd: number;
  hwm: number;
  latency: Record<string, { p50: number; p99: number; max: number; n: number; missed: number }>;
  applyMs: { p50: number; p99: number };
  stats: LogLine;
  listingKiB: number;
  steps: { render: number; nft: number; list: number; scriptKiB: number };
  load: LoadResult | undefined;
}

async function benchSize(
  pods: number,
  entry: string | undefined,
  label: string,
  env: Record<string, string>,
  nodeArgs: string | undefined,
): Promise<SizeResult> {
  const policies = Math.round(pods / 10);
  const gen = generateCluster({ pods, policies, namespaces: Math.round(pods / 20) });
  const node = gen.nodes[0] ?? 'node-00000';
  const other = gen.nodes[1] ?? node;
  const st = gen.state;
  const local = st.pods.filter((p) => p.nodeName === node && isActivePod(p));
  const selectsLocal = (pol: NetworkPolicy) =>
    local.some((p) => p.namespace === pol.namespace && selectorMatches(pol.podSelector, p.labels));
  const localPols = st.policies.filter(selectsLocal);
  // A same-namespace pod peer with plain labels, of a policy enforced here.
  let peer: { ns: string; labels: Record<string, string> } | undefined;
  for (const pol of localPols) {
    for (const r of pol.ingress) {
      const pe = r.peers?.find(
        (x) =>
          x.kind === 'pods' &&
          x.namespaceSelector === undefined &&
          x.podSelector !== undefined &&
          x.podSelector.matchExpressions.length === 0,
      );
      if (pe?.kind === 'pods' && pe.podSelector !== undefined)
        peer ??= { ns: pol.namespace, labels: { ...pe.podSelector.matchLabels, app: 'bench-peer' } };
    }
  }
  // An isolated pod: one that a policy selects, so that it has rules of its own.
  const isolated = local.filter((p) =>
    localPols.some((pol) => pol.namespace === p.namespace && selectorMatches(pol.podSelector, p.labels)),
  );
  const localPod = isolated[Math.floor(isolated.length / 2)];
  const pol = localPols.find((p) => p.types.ingress) ?? localPols[0];
  if (localPod === undefined || pol === undefined || peer === undefined)
    throw new Error(`size ${pods}: no suitable local pod / policy / peer`);
  const changes: Record<string, Change> = {
    'local pod': localPodChange(localPod),
    'remote peer': remotePeerChange(peer.ns, peer.labels, other),
    policy: policyChange(pol),
  };

  const api = await FakeApiServer.start();
  api.load(clusterObjects(gen) as unknown as KubeObject[]);
  const netns = `${uniquePrefix()}bench`;
  await createNetns([netns]);
  const s = await scratch(api);
  const steps = await applySteps(st, node, netns);
  await execa('ip', ['netns', 'exec', netns, 'nft', 'delete', 'table', 'inet', 'nft-netpol']);
  const t0 = Date.now();
  const agent = AgentProcess.start({
    node,
    netns,
    kubeconfig: s.kubeconfig,
    args: ['--log-level', args['log-level'], '--drift-interval', args['drift-interval'], '--debounce', args.debounce],
    env,
    ...(entry === undefined ? {} : { entry }),
    ...(nodeArgs === undefined ? {} : { nodeArgs: nodeArgs.split(' ').filter((a) => a !== '') }),
  });
  try {
    await agent.waitReady(300_000);
    const readyMs = Date.now() - t0;
    // Synced = after the first apply's read-back (1-3 s at 100k pods) and
    // what follows it; was 1 s after ready until 2026-11-27.
    await sleep(4000);
    // This process's own setup garbage (the generated cluster, five compiles
    // of the full ruleset) collected now, not by a major GC during a sample:
    // the fake API server is the cluster's control plane, not the node's.
    collectGarbage();
    const synced = rssOf(agent.pid);
    const heapAfterSync = await agent.metric('nodejs_heap_size_used_bytes');

    const latency: SizeResult['latency'] = {};
    for (const [kind, ch] of Object.entries(changes)) {
      const xs: number[] = [];
      // Where each sample's time went: the watch delivery (API write to the agent's change notice, the
      // fake API server's side included), the wait in the agent's queue, and the apply's own phases.
      const parts: Record<string, number[]> = { delivery: [], queue: [], snapshot: [], compile: [], update: [], nft: [] };
      let missed = 0;
      const cold: number[] = [];
      const windows: [number, number][] = [];
      for (let i = 0; i < WARMUP + SAMPLES; i++) {
        const seen = agent.lines.length;
        const before = nowMs();
        const t0 = performance.now();
        ch.apply(api, i);
        let line: LogLine | undefined;
        try {
          await eventually(
            `${kind} applied`,
            () => {
              line = agent.lines
                .slice(seen)
                .find((l) => l['event'] === 'apply' && (l['reasons'] as string[] | undefined)?.some((r) => r.includes(ch.key)));
              return line !== undefined;
            },
            30_000,
          );
        } catch {
          missed++;
          continue;
        }
        if (line?.['result'] === 'applied' && i < WARMUP) cold.push(Math.round(appliedAt(agent, line) - before));
        else if (line?.['result'] === 'applied') {
          // To 0.1 ms: a ratio of p50s of 5 ms is not to be read in whole milliseconds.
          const total = Math.round((appliedAt(agent, line) - before) * 10) / 10;
          xs.push(total);
          parts['delivery']?.push(total - Number(line['latencyMs']));
          parts['queue']?.push(Number(line['latencyMs']) - Number(line['durationMs']));
          const ph = (line['phasesMs'] ?? {}) as Record<string, number>;
          for (const k of ['snapshot', 'compile', 'update', 'nft']) parts[k]?.push(Number(ph[k] ?? 0));
        } else missed++;
        // This process plays the API server: its own garbage (a 100k-pod
        // cluster's objects, the polling above) is collected between samples,
        // so that its collections do not land in a sample's watch delivery
        // (--no-gc-between keeps the old behaviour).
        if (i >= WARMUP) windows.push([t0, performance.now()]);
        if (GC_BETWEEN) collectGarbage();
        // Let follow-up work (peer re-plans) settle so the next sample is alone;
        // the jitter keeps samples from locking onto the agent's own rhythm.
        await sleep(150 + Math.floor(Math.random() * 150));
      }
      latency[kind] = { p50: pct(xs, 50), p99: pct(xs, 99), max: Math.max(...xs), n: xs.length, missed };
      // This process's own collections that began while a sample ran (its API server side waited for them).
      const inSamples = benchGcs.filter((g) => windows.some(([a, b]) => g.start >= a && g.start <= b)).map((g) => g.ms);
      benchGcs.length = 0;
      const split = Object.entries(parts)
        .map(([k, v]) => `${k} ${Math.round(pct(v, 50))}/${Math.round(pct(v, 99))}`)
        .join(', ');
      process.stderr.write(
        `  ${pods} pods, ${kind}: p50 ${pct(xs, 50)} ms, p99 ${pct(xs, 99)} ms (${xs.length} samples, ${missed} missed; warm-up ${cold.join(', ')} ms); p50/p99 ms: ${split}; this process's GCs during samples: ${inSamples.length}, ${Math.round(inSamples.reduce((a, b) => a + b, 0))} ms\n`,
      );
    }
    const applies = agent.lines.filter((l) => l['event'] === 'apply' && l['result'] === 'applied');
    const hwmSamples = rssOf(agent.pid).hwm;
    const load =
      RATE > 0
        ? await driveLoad(api, agent, { node, other, localTemplate: localPod, peer, policy: policyChange(pol) })
        : undefined;
    if (load !== undefined)
      process.stderr.write(
        `  ${pods} pods, ${RATE}/s for ${DURATION_S} s: p50 ${load.p50} ms, p99 ${load.p99} ms, ${load.appliesPerS.toFixed(1)} applies/s, cpu ${load.cpuPerS.toFixed(2)} s/s, oldest change per 5 s ${load.windowsOldest.join(' ')} ms\n`,
      );
    const steady = applies.slice(1).map((l) => Number(l['durationMs']));
    const last = applies[applies.length - 1] ?? {};
    const listing = (await listTableIn(netns)) ?? '';
    const end = rssOf(agent.pid);
    return {
      label,
      pods,
      policies,
      readyMs,
      rssAfterSync: synced.rss,
      anonAfterSync: synced.anon,
      fileAfterSync: synced.file,
      heapAfterSync,
      rssEnd: end.rss,
      hwm: RATE > 0 ? hwmSamples : end.hwm,
      latency,
      applyMs: { p50: pct(steady, 50), p99: pct(steady, 99) },
      stats: last,
      listingKiB: Buffer.byteLength(listing) / 1024,
      steps,
      load,
    };
  } finally {
    if (args['dump-log'] !== undefined)
      writeFileSync(
        join(args['dump-log'], `agent-${pods}-${label.replace(/\W+/g, '_') || 'run'}.jsonl`),
        agent.lines.map((l) => JSON.stringify(l)).join('\n'),
      );
    await agent.stop();
    await deleteNetns([netns]);
    await api.close();
    await s.cleanup();
  }
}

/** Compiles src/ (of `ref`: a git archive of it) like the image build; returns the entry point and a cleanup. */
async function compiled(ref?: string): Promise<{ entry: string | undefined; cleanup: () => void }> {
  if (args.source && ref === undefined) return { entry: undefined, cleanup: () => {} };
  const root = fileURLToPath(new URL('../', import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), 'nftnp-bench-'));
  let tree = root;
  if (ref !== undefined) {
    tree = join(dir, 'tree');
    mkdirSync(tree);
    const tar = await execa(
      'git',
      ['-C', root, 'archive', '--format=tar', ref, 'src', 'package.json', 'tsconfig.json', 'tsconfig.build.json'],
      {
        encoding: 'buffer',
      },
    );
    await execa('tar', ['-x', '-C', tree], { input: tar.stdout });
    symlinkSync(join(root, 'node_modules'), join(tree, 'node_modules'));
  }
  await execa(process.execPath, [
    join(root, 'node_modules/typescript/bin/tsc'),
    '-p',
    join(tree, 'tsconfig.build.json'),
    '--outDir',
    join(dir, 'dist'),
  ]);
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  copyFileSync(join(root, 'package.json'), join(dir, 'package.json'));
  return { entry: join(dir, 'dist/cli/main.js'), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

const build = await compiled();
const base = args.baseline === undefined ? undefined : await compiled(args.baseline);
const baseOptions = args['baseline-node-options'];
const baseArgs = args['baseline-node-args'] ?? args['node-args'];
const variants: { label: string; entry: string | undefined; env: Record<string, string>; nodeArgs: string | undefined }[] = [
  { label: base === undefined ? '' : 'this tree', entry: build.entry, env: AGENT_ENV, nodeArgs: args['node-args'] },
  ...(base === undefined
    ? []
    : [
        {
          label: `baseline ${args.baseline}${baseOptions === undefined ? '' : ` with ${baseOptions}`}${baseArgs === args['node-args'] ? '' : ` args ${baseArgs ?? '(none)'}`}`,
          entry: base.entry,
          env: baseOptions === undefined ? AGENT_ENV : { ...AGENT_ENV, NODE_OPTIONS: baseOptions },
          nodeArgs: baseArgs,
        },
      ]),
];
const results: SizeResult[] = [];
try {
  for (const n of SIZES) {
    for (let round = 0; round < (base === undefined ? 1 : ROUNDS); round++) {
      // Alternate which goes first, so neither always meets the same load.
      const order = round % 2 === 0 ? variants : [...variants].reverse();
      for (const v of order) {
        process.stderr.write(`size ${n} pods${v.label === '' ? '' : ` (${v.label}, round ${round + 1})`}...\n`);
        results.push(await benchSize(n, v.entry, v.label, v.env, v.nodeArgs));
      }
    }
  }
} finally {
  build.cleanup();
  base?.cleanup();
}

const cpu = cpus()[0]?.model ?? 'unknown CPU';
console.log(
  `machine: ${cpus().length} x ${cpu}, ${Math.round(totalmem() / 1024 ** 3)} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}`,
);
console.log(
  `samples per change kind: ${SAMPLES}; debounce ${args.debounce} (the DaemonSet's default is 50ms: --debounce 50ms); drift interval ${args['drift-interval']} (the DaemonSet's: 60s); latency = API write -> nft commit; agent ${build.entry === undefined ? 'from src/ (type stripping)' : 'compiled'}, ${Object.entries(
    AGENT_ENV,
  )
    .map(([k, v]) => `${k}=${v}`)
    .join(' ')}; load average at the end ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}`,
);
console.log('');
console.log(
  '| cluster | ready s | local pod p50/p99 ms | remote peer p50/p99 ms | policy p50/p99 ms | apply p50/p99 ms | heap synced MiB | RSS synced MiB | RSS peak MiB | rules | sets+maps | elements | listing KiB |',
);
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const r of results) {
  const l = (k: string) => {
    const x = r.latency[k];
    return x === undefined ? '-' : `${x.p50} / ${x.p99}${x.missed > 0 ? ` (${x.missed} missed)` : ''}`;
  };
  const s = r.stats;
  console.log(
    `| ${r.pods / 1000}k pods, ${r.policies} policies${r.label === '' ? '' : ` (${r.label})`} | ${(r.readyMs / 1000).toFixed(1)} | ${l('local pod')} | ${l('remote peer')} | ${l('policy')} | ${r.applyMs.p50.toFixed(0)} / ${r.applyMs.p99.toFixed(0)} | ${(r.heapAfterSync / MiB).toFixed(0)} | ${(r.rssAfterSync / MiB).toFixed(0)} | ${(r.hwm / MiB).toFixed(0)} | ${String(s['rules'])} | ${Number(s['sets']) + Number(s['maps'])} | ${String(s['elements'])} | ${r.listingKiB.toFixed(0)} |`,
  );
}

console.log('');
console.log(
  `RSS synced = anonymous (V8 heap, malloc, stacks) + file-backed (the node binary's pages, shared and reclaimable): ${results.map((r) => `${r.pods / 1000}k pods ${(r.anonAfterSync / MiB).toFixed(0)} + ${(r.fileAfterSync / MiB).toFixed(0)} MiB`).join('; ')}`,
);
const loaded = results.filter((r) => r.load !== undefined);
if (loaded.length > 0) {
  console.log('');
  console.log(
    `Under load (${RATE} changes/s for ${DURATION_S} s: 20 % local pods, 70 % remote peers, 10 % policy updates; change-to-enforced = API write -> end of the apply naming it):`,
  );
  console.log('');
  console.log(
    '| cluster | changes | p50 / p99 ms (named) | p99 per 5 s ms | oldest change max per 5 s ms | applies/s | changes/apply | oldest change p50 / p99 ms | apply p50 / p99 ms | CPU s/s (+nft) | RSS peak MiB | drain ms | named |',
  );
  console.log('|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of loaded) {
    const x = r.load;
    if (x === undefined) continue;
    console.log(
      `| ${r.pods / 1000}k pods${r.label === '' ? '' : ` (${r.label})`} | ${x.written} | ${x.p50} / ${x.p99} | ${x.windowsP99.join(' ')} | ${x.windowsOldest.join(' ')} | ${x.appliesPerS.toFixed(1)} | ${(x.written / x.durationS / x.appliesPerS).toFixed(1)} | ${x.agentP50} / ${x.agentP99} | ${x.applyP50.toFixed(0)} / ${x.applyP99.toFixed(0)} | ${x.cpuPerS.toFixed(2)} (${x.cpuChildrenPerS.toFixed(2)}) | ${(x.hwm / MiB).toFixed(0)} | ${x.drainMs} | ${x.matched} |`,
    );
  }
}
console.log('');
console.log('Steps of one apply, medians of 5 in the benchmark process (nft through `ip netns exec`, ~5 ms of it):');
console.log('');
console.log('| cluster | render ms | nft -f ms | nft list ms | script KiB |');
console.log('|---|---:|---:|---:|---:|');
for (const r of results.filter((x) => x.label === variants[0]?.label)) {
  console.log(
    `| ${r.pods / 1000}k pods | ${r.steps.render.toFixed(0)} | ${r.steps.nft.toFixed(0)} | ${r.steps.list.toFixed(0)} | ${r.steps.scriptKiB.toFixed(0)} |`,
  );
}
