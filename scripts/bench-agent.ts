// The node agent end to end: how long from a write to the API server until the
// node's kernel enforces it, what the agent process costs in memory, and how
// long one nft transaction takes as the ruleset grows.
//
//   node scripts/bench-agent.ts [--sizes 1000,10000,100000] [--samples 40] [--source]
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
// Latency = time of the agent's "ruleset applied" log line whose reasons name
// the changed object, minus the time just before the API write: watch
// delivery + debounce (50 ms default) + render + `nft -f` commit. Changes:
//   local pod   delete / re-create a running pod of the agent's node
//   remote peer create / delete a pod on another node that a local policy's
//               peer selector picks (its IP enters / leaves a peer set)
//   policy      add / remove an extra ingress rule of a policy that selects a
//               local pod
// Samples are taken one at a time (the agent idle in between), so each is one
// uncoalesced event.
import { copyFileSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { cpus, loadavg, totalmem } from 'node:os';
import { parseArgs } from 'node:util';
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

const { values: args } = parseArgs({
  options: {
    sizes: { type: 'string', default: '1000,10000,100000' },
    samples: { type: 'string', default: '40' },
    source: { type: 'boolean', default: false },
  },
});
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
const SIZES = args.sizes.split(',').map(Number);
const SAMPLES = Number(args.samples);
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

interface SizeResult {
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
}

async function benchSize(pods: number): Promise<SizeResult> {
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
    args: ['--log-level', 'info', '--drift-interval', '0'],
    env: AGENT_ENV,
    ...(ENTRY === undefined ? {} : { entry: ENTRY }),
  });
  try {
    await agent.waitReady(300_000);
    const readyMs = Date.now() - t0;
    await sleep(1000);
    const synced = rssOf(agent.pid);
    const heapAfterSync = await agent.metric('nodejs_heap_size_used_bytes');

    const latency: SizeResult['latency'] = {};
    for (const [kind, ch] of Object.entries(changes)) {
      const xs: number[] = [];
      let missed = 0;
      for (let i = 0; i < SAMPLES; i++) {
        const seen = agent.lines.length;
        const before = Date.now();
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
        if (line?.['result'] === 'applied') xs.push(Date.parse(String(line['time'])) - before);
        else missed++;
        // Let follow-up work (peer re-plans) settle so the next sample is alone;
        // the jitter keeps samples from locking onto the agent's own rhythm.
        await sleep(150 + Math.floor(Math.random() * 150));
      }
      latency[kind] = { p50: pct(xs, 50), p99: pct(xs, 99), max: Math.max(...xs), n: xs.length, missed };
      process.stderr.write(
        `  ${pods} pods, ${kind}: p50 ${pct(xs, 50)} ms, p99 ${pct(xs, 99)} ms (${xs.length} samples, ${missed} missed)\n`,
      );
    }
    const applies = agent.lines.filter((l) => l['event'] === 'apply' && l['result'] === 'applied');
    const steady = applies.slice(1).map((l) => Number(l['durationMs']));
    const last = applies[applies.length - 1] ?? {};
    const listing = (await listTableIn(netns)) ?? '';
    const end = rssOf(agent.pid);
    return {
      pods,
      policies,
      readyMs,
      rssAfterSync: synced.rss,
      anonAfterSync: synced.anon,
      fileAfterSync: synced.file,
      heapAfterSync,
      rssEnd: end.rss,
      hwm: end.hwm,
      latency,
      applyMs: { p50: pct(steady, 50), p99: pct(steady, 99) },
      stats: last,
      listingKiB: Buffer.byteLength(listing) / 1024,
      steps,
    };
  } finally {
    await agent.stop();
    await deleteNetns([netns]);
    await api.close();
    await s.cleanup();
  }
}

/** Compiles src/ like the image build; returns the entry point and a cleanup. */
async function compiled(): Promise<{ entry: string | undefined; cleanup: () => void }> {
  if (args.source) return { entry: undefined, cleanup: () => {} };
  const root = fileURLToPath(new URL('../', import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), 'nftnp-bench-'));
  await execa(process.execPath, [
    join(root, 'node_modules/typescript/bin/tsc'),
    '-p',
    join(root, 'tsconfig.build.json'),
    '--outDir',
    join(dir, 'dist'),
  ]);
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  copyFileSync(join(root, 'package.json'), join(dir, 'package.json'));
  return { entry: join(dir, 'dist/cli/main.js'), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

const build = await compiled();
const ENTRY: string | undefined = build.entry;
const results: SizeResult[] = [];
try {
  for (const n of SIZES) {
    process.stderr.write(`size ${n} pods...\n`);
    results.push(await benchSize(n));
  }
} finally {
  build.cleanup();
}

const cpu = cpus()[0]?.model ?? 'unknown CPU';
console.log(
  `machine: ${cpus().length} x ${cpu}, ${Math.round(totalmem() / 1024 ** 3)} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}`,
);
console.log(
  `samples per change kind: ${SAMPLES}; debounce 50 ms (default); latency = API write -> nft commit; agent ${ENTRY === undefined ? 'from src/ (type stripping)' : 'compiled'}, ${Object.entries(
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
    `| ${r.pods / 1000}k pods, ${r.policies} policies | ${(r.readyMs / 1000).toFixed(1)} | ${l('local pod')} | ${l('remote peer')} | ${l('policy')} | ${r.applyMs.p50.toFixed(0)} / ${r.applyMs.p99.toFixed(0)} | ${(r.heapAfterSync / MiB).toFixed(0)} | ${(r.rssAfterSync / MiB).toFixed(0)} | ${(r.hwm / MiB).toFixed(0)} | ${String(s['rules'])} | ${Number(s['sets']) + Number(s['maps'])} | ${String(s['elements'])} | ${r.listingKiB.toFixed(0)} |`,
  );
}

console.log('');
console.log(
  `RSS synced = anonymous (V8 heap, malloc, stacks) + file-backed (the node binary's pages, shared and reclaimable): ${results.map((r) => `${r.pods / 1000}k pods ${(r.anonAfterSync / MiB).toFixed(0)} + ${(r.fileAfterSync / MiB).toFixed(0)} MiB`).join('; ')}`,
);
console.log('');
console.log('Steps of one apply, medians of 5 in the benchmark process (nft through `ip netns exec`, ~5 ms of it):');
console.log('');
console.log('| cluster | render ms | nft -f ms | nft list ms | script KiB |');
console.log('|---|---:|---:|---:|---:|');
for (const r of results) {
  console.log(
    `| ${r.pods / 1000}k pods | ${r.steps.render.toFixed(0)} | ${r.steps.nft.toFixed(0)} | ${r.steps.list.toFixed(0)} | ${r.steps.scriptKiB.toFixed(0)} |`,
  );
}
