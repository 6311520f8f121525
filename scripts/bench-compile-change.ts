// Benchmark: in process, what one change costs the compiler on the busiest
// node (see bench-render.ts): NodeCompiler.compile of the changed snapshot
// (advanced from the previous one) and renderUpdate(prev, next) (the
// incremental script), per change kind, p50/p99 at 1k/10k/100k pods. Prints
// figures; asserts nothing (the property test in test/compile/ checks that
// the advanced compile equals a fresh one; here the last compile of each case
// is compared with compileNode all the same).
//
//   node scripts/bench-compile-change.ts                    1k, 10k, 100k
//   node scripts/bench-compile-change.ts --sizes 100k --samples 40 --kinds remote
//   node scripts/bench-compile-change.ts --node first      the agent benchmark's node instead of the busiest
//   node scripts/bench-compile-change.ts --baseline /tmp/base
//       also runs the NodeCompiler and renderUpdate of another checkout
//       (e.g. `git worktree add /tmp/base <commit>`), alternating with this
//       one change by change over the same snapshots: ratios that hold on a
//       shared, loaded machine.
//
// Change kinds (one at a time, each one uncoalesced change, as bench-agent's):
//   remote   a frontend pod on another node (a cluster-wide peer) is deleted,
//            then re-created under a new name with a new IP
//   local    an isolated pod of the node is deleted, then re-created
//   policy   a policy selecting a pod of the node gets an extra ingress rule, then loses it
import { cpus, loadavg } from 'node:os';
import { compileNode } from '../src/compile/compile.ts';
import { NodeCompiler } from '../src/compile/node-compiler.ts';
import { byObjectKey } from '../src/model/state.ts';
import type { ClusterState, NetworkPolicy, Pod } from '../src/model/types.ts';
import { renderRuleset } from '../src/nft/render.ts';
import { renderUpdate } from '../src/nft/update.ts';
import type { CompiledRuleset } from '../src/ruleset/ir.ts';
import { busiestNode } from './bench-render.ts';
import { generateCluster } from './gen-cluster.ts';
import { scriptArgs } from './script-args.ts';

const SIZES: Record<string, { pods: number; policies: number; namespaces: number }> = {
  '1k': { pods: 1_000, policies: 100, namespaces: 50 },
  '10k': { pods: 10_000, policies: 1_000, namespaces: 500 },
  '100k': { pods: 100_000, policies: 10_000, namespaces: 5_000 },
};

interface Impl {
  readonly name: string;
  readonly make: (node: string) => { compile(s: ClusterState): CompiledRuleset };
  readonly update: (prev: CompiledRuleset, next: CompiledRuleset) => { kind: string };
  /** compileNode of the same checkout (the baseline may order output differently). */
  readonly fresh: (s: ClusterState, node: string) => CompiledRuleset;
}

interface Step {
  readonly kind: 'remote' | 'local' | 'policy';
  readonly state: ClusterState;
}

const ms = (t0: bigint): number => Number(process.hrtime.bigint() - t0) / 1e6;
const pct = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? 0;
};

function withPods(state: ClusterState, pods: Pod[]): ClusterState {
  return { ...state, pods: pods.sort(byObjectKey) };
}

/** The change stream: `samples` changes of each kind, interleaved, each from the state before. */
function changes(start: ClusterState, node: string, samples: number, kinds: readonly Step['kind'][]): Step[] {
  const steps: Step[] = [];
  let state = start;
  const remote = start.pods.filter(
    (p) => p.nodeName !== node && p.labels.tier === 'frontend' && p.ips.length > 0 && p.phase === 'Running',
  );
  const localNs = new Set(start.pods.filter((p) => p.nodeName === node).map((p) => p.namespace));
  const isolating = start.policies.filter((p) => localNs.has(p.namespace) && p.types.ingress && p.ingress.length > 0);
  const isolated = start.pods.filter(
    (p) => p.nodeName === node && p.ips.length > 0 && p.phase === 'Running' && isolating.some((x) => x.namespace === p.namespace),
  );
  if (remote.length === 0 || isolated.length === 0 || isolating.length === 0) throw new Error('no change candidates');
  for (let i = 0; i < samples; i++) {
    const kind = kinds[i % kinds.length]!;
    const k = Math.floor(i / kinds.length);
    if (kind === 'remote') {
      // Delete one remote frontend, then re-create it elsewhere in the cluster with a new IP (a rollout step).
      const p = remote[(k * 7919) % remote.length]!;
      const gone = state.pods.filter((x) => x.namespace !== p.namespace || x.name !== p.name);
      state = withPods(state, gone);
      steps.push({ kind, state });
      const again: Pod = { ...p, name: `${p.name}-r${i}`, ips: [`10.250.${(i >> 8) & 255}.${i & 255}`] };
      state = withPods(state, [...gone, again]);
      steps.push({ kind, state });
    } else if (kind === 'local') {
      const p = isolated[k % isolated.length]!;
      const gone = state.pods.filter((x) => x.namespace !== p.namespace || x.name !== p.name);
      state = withPods(state, gone);
      steps.push({ kind, state });
      state = withPods(state, [...gone, { ...p }]);
      steps.push({ kind, state });
    } else {
      const pol = isolating[k % isolating.length]!;
      const extra = { ...pol.ingress[0]!, ports: [{ protocol: 'TCP' as const, port: 65000 - k, endPort: undefined }] };
      const edit = (to: NetworkPolicy): ClusterState => ({
        ...state,
        policies: state.policies.map((x) => (x.namespace === pol.namespace && x.name === pol.name ? to : x)),
      });
      const cur = state.policies.find((x) => x.namespace === pol.namespace && x.name === pol.name)!;
      state = edit({ ...cur, ingress: [...cur.ingress, extra] });
      steps.push({ kind, state });
      state = edit(cur);
      steps.push({ kind, state });
    }
  }
  return steps;
}

async function loadImpls(baseline: string | undefined): Promise<Impl[]> {
  const here: Impl = { name: 'this', make: (n) => new NodeCompiler(n), update: renderUpdate, fresh: compileNode };
  if (baseline === undefined) return [here];
  const nc = (await import(`${baseline}/src/compile/node-compiler.ts`)) as {
    NodeCompiler: new (n: string) => { compile(s: ClusterState): CompiledRuleset };
  };
  const up = (await import(`${baseline}/src/nft/update.ts`)) as { renderUpdate: Impl['update'] };
  const cn = (await import(`${baseline}/src/compile/compile.ts`)) as { compileNode: Impl['fresh'] };
  return [here, { name: 'baseline', make: (n) => new nc.NodeCompiler(n), update: up.renderUpdate, fresh: cn.compileNode }];
}

interface Row {
  size: string;
  impl: string;
  kind: string;
  compile: number[];
  update: number[];
  /** NodeCompiler.lastMode counts. */
  modes: Map<string, number>;
}

async function runSize(
  size: string,
  samples: number,
  impls: readonly Impl[],
  kinds: readonly Step['kind'][],
  whichNode: string,
): Promise<Row[]> {
  const o = SIZES[size];
  if (o === undefined) throw new Error(`unknown size ${size}; one of ${Object.keys(SIZES).join(', ')}`);
  const cluster = generateCluster({ ...o, podsPerNode: 110 });
  // The busiest node (cluster-wide peers), or with --node first the agent benchmark's node (bench-agent.ts).
  const node = whichNode === 'first' ? (cluster.nodes[0] ?? '') : busiestNode(cluster.state).node;
  const start = cluster.state;
  const steps = changes(start, node, samples, kinds);
  const runs = impls.map((impl) => {
    const c = impl.make(node);
    return { impl, c, prev: c.compile(start) };
  });
  const rows = new Map<string, Row>();
  const row = (impl: string, kind: string): Row => {
    const key = `${impl}/${kind}`;
    let r = rows.get(key);
    if (r === undefined) rows.set(key, (r = { size, impl, kind, compile: [], update: [], modes: new Map() }));
    return r;
  };
  // Warm up (JIT) on the first few changes, untimed.
  const warm = Math.min(6, steps.length);
  steps.forEach((step, i) => {
    // Alternate which implementation goes first, so neither always runs right after the other's garbage.
    const order = i % 2 === 0 ? runs : [...runs].reverse();
    for (const r of order) {
      let t0 = process.hrtime.bigint();
      const next = r.c.compile(step.state);
      const tc = ms(t0);
      t0 = process.hrtime.bigint();
      r.impl.update(r.prev, next);
      const tu = ms(t0);
      r.prev = next;
      if (i < warm) continue;
      const x = row(r.impl.name, step.kind);
      const mode = (r.c as { lastMode?: string }).lastMode ?? '?';
      x.modes.set(mode, (x.modes.get(mode) ?? 0) + 1);
      x.compile.push(tc);
      x.update.push(tu);
    }
  });
  // The advanced compile must be the fresh one (the property test checks this thoroughly).
  const last = steps[steps.length - 1]!.state;
  for (const r of runs)
    if (renderRuleset(r.prev) !== renderRuleset(r.impl.fresh(last, node)))
      throw new Error(`${size}: ${r.impl.name}'s advanced compile differs from compileNode`);
  console.log(
    `${size}: ${node}, ${runs[0]!.prev.stats.elements} elements, ${runs[0]!.prev.stats.chains} chains; load ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  return [...rows.values()];
}

async function main(): Promise<void> {
  const { values } = scriptArgs(import.meta.url, {
    options: {
      sizes: { type: 'string' },
      samples: { type: 'string' },
      baseline: { type: 'string' },
      kinds: { type: 'string' },
      node: { type: 'string', default: 'busiest' },
    },
  });
  const sizes = (values.sizes ?? '1k,10k,100k').split(',');
  const samples = Number(values.samples ?? 90);
  const impls = await loadImpls(values.baseline);
  const kinds = (values.kinds ?? 'remote,local,policy').split(',') as Step['kind'][];
  console.log(
    `node ${process.version}, ${cpus().length} x ${cpus()[0]?.model ?? '?'}, ${new Date().toISOString()}, load ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  console.log(`per change: compile = NodeCompiler.compile, update = renderUpdate(prev, next); ms p50 / p99`);
  const all: Row[] = [];
  for (const s of sizes) all.push(...(await runSize(s, samples, impls, kinds, values.node)));
  const f = (xs: number[]): string => `${pct(xs, 50).toFixed(1)} / ${pct(xs, 99).toFixed(1)}`;
  const lines = [['size', 'impl', 'change', 'n', 'compile ms', 'update ms', 'compile+update ms', 'modes']];
  for (const r of all)
    lines.push([
      r.size,
      r.impl,
      r.kind,
      String(r.compile.length),
      f(r.compile),
      f(r.update),
      f(r.compile.map((c, i) => c + r.update[i]!)),
      [...r.modes].map(([m, n]) => `${m} ${n}`).join(', '),
    ]);
  const widths = lines[0]!.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
  for (const l of lines) console.log(l.map((c, i) => c.padStart(widths[i]!)).join('  '));
  if (impls.length > 1) {
    console.log('ratio this / baseline, p50 (compile+update):');
    for (const r of all.filter((x) => x.impl === 'this')) {
      const b = all.find((x) => x.impl === 'baseline' && x.size === r.size && x.kind === r.kind);
      if (b === undefined) continue;
      const sum = (x: Row): number[] => x.compile.map((c, i) => c + x.update[i]!);
      console.log(`  ${r.size} ${r.kind}: ${(pct(sum(r), 50) / pct(sum(b), 50)).toFixed(2)}`);
    }
  }
}

await main();
