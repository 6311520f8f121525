// The cost the ClusterNetworkPolicy tiers add to a full compile + render at
// 100k pods, in one process and in alternation (so that a loaded machine
// weighs on every variant alike): the 100k cluster without them, and with
// bench-render's 100 ClusterNetworkPolicies (withClusterPolicies) in each
// layout of compile/tiers.ts. Figures are CPU time (user + system) per
// compile + render of node 0; the minimum is the least disturbed. The
// order of the variants rotates each round, and every other round runs
// backwards (the garbage one leaves is collected during the next: in a fixed
// order, or a rotation of one, whatever follows the CNP case paid for part of
// it).
//   node scripts/bench-tiers.ts [--rounds 7] [--peers narrow|wide]
//
// --baseline REF: the "+20 % over today", measured against the code
// of REF (issue 22 was filed at 809f622, before any tier work). REF's `src/`,
// `scripts/` and package.json are extracted with `git archive` into a temp
// dir (node_modules symlinked; Node strips the types), and REF's compileNode
// and renderRuleset are imported from there. The 100k cluster is generated
// once by each tree's own generator; when REF's equals HEAD's (deep equality),
// both trees compile the one state object, else each compiles its own (said
// in the output). Then REF-100k, HEAD-100k and HEAD-100k-cnp alternate, and
// the ratios printed are HEAD-cnp / REF-100k
// (the target) and HEAD-cnp / HEAD-100k (the same code with and without the
// policies), by min and by median; HEAD-100k-cnp runs in the shared and the
// per-class layout (the agent's default, DEFAULT_TIER_LAYOUT, is the target's;
// --tier-layout L runs only L). The first round's text of each is hashed:
// REF and HEAD render the 100k cluster differently (the NetworkPolicy
// datapath changed since), so their sizes differ by about 1 %.
//   node scripts/bench-tiers.ts --baseline 809f622 [--rounds 9] [--tier-layout shared|per-class|auto]
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { compileNode } from '../src/compile/compile.ts';
import type { ClusterState } from '../src/model/types.ts';
import { renderRuleset } from '../src/nft/render.ts';
import { DEFAULT_TIER_LAYOUT, parseTierLayout } from '../src/ruleset/options.ts';
import type { TierLayout } from '../src/ruleset/options.ts';
import { withClusterPolicies } from './bench-render.ts';
import { generateCluster } from './gen-cluster.ts';
import type { GenOptions } from './gen-cluster.ts';
import { scriptArgs } from './script-args.ts';

const { values } = scriptArgs(import.meta.url, {
  options: {
    rounds: { type: 'string', default: '7' },
    peers: { type: 'string', default: 'narrow' },
    baseline: { type: 'string' },
    'tier-layout': { type: 'string' },
  },
});
const peers = values.peers === 'wide' ? 'wide' : 'narrow';
// With --baseline: the default layout (the agent's) and the other of shared and per-class, the default first.
const layout = parseTierLayout(values['tier-layout']);
const layouts: readonly TierLayout[] =
  layout !== undefined ? [layout] : DEFAULT_TIER_LAYOUT === 'per-class' ? ['per-class', 'shared'] : ['shared', 'per-class'];
const GEN: Partial<GenOptions> = { pods: 100_000, policies: 10_000, namespaces: 5_000, podsPerNode: 110 };
const g = generateCluster(GEN);
const withCnp = withClusterPolicies(g.state, peers);
const node = g.nodes[0] ?? '';

interface Variant {
  readonly name: string;
  readonly run: () => string;
}

const variants: Variant[] = [];
let cleanup = (): void => {};
if (values.baseline !== undefined) {
  const ref = values.baseline;
  const root = fileURLToPath(new URL('..', import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), 'bench-tiers-ref-'));
  cleanup = () => rmSync(dir, { recursive: true, force: true });
  const tar = join(dir, 'ref.tar');
  execFileSync('git', ['-C', root, 'archive', '--format=tar', '-o', tar, ref, 'src', 'scripts', 'package.json']);
  execFileSync('tar', ['-xf', tar, '-C', dir]);
  symlinkSync(realpathSync(join(root, 'node_modules')), join(dir, 'node_modules'));
  const at = (p: string): string => pathToFileURL(join(dir, p)).href;
  const refCompile = (await import(at('src/compile/compile.ts'))) as {
    compileNode: (s: ClusterState, n: string) => unknown;
  };
  const refRender = (await import(at('src/nft/render.ts'))) as { renderRuleset: (c: unknown) => string };
  const refGen = (await import(at('scripts/gen-cluster.ts'))) as {
    generateCluster: (o: Partial<GenOptions>) => { state: ClusterState; nodes: string[] };
  };
  const rg = refGen.generateCluster(GEN);
  const same = isDeepStrictEqual(rg.state, g.state) && rg.nodes[0] === node;
  const refState = same ? g.state : rg.state;
  const refNode = rg.nodes[0] ?? '';
  const commit = execFileSync('git', ['-C', root, 'rev-parse', '--short', ref], { encoding: 'utf8' }).trim();
  console.log(
    `baseline ${ref} (${commit}): its generator's 100k cluster ${same ? 'equals' : 'DIFFERS FROM'} HEAD's` +
      `${same ? ' (one state object for both)' : ' (each tree compiles its own)'}; node ${refNode}`,
  );
  variants.push({ name: `REF 100k`, run: () => refRender.renderRuleset(refCompile.compileNode({ ...refState }, refNode)) });
  variants.push({ name: 'HEAD 100k', run: () => renderRuleset(compileNode({ ...g.state }, node)) });
  for (const tierLayout of layouts)
    variants.push({
      name: `HEAD 100k-cnp ${tierLayout}`,
      run: () => renderRuleset(compileNode({ ...withCnp }, node, { tierLayout })),
    });
} else {
  variants.push({ name: '100k', run: () => renderRuleset(compileNode({ ...g.state }, node)) });
  for (const tierLayout of ['shared', 'per-class', 'auto'] as const satisfies readonly TierLayout[])
    variants.push({
      name: `100k-cnp ${tierLayout}`,
      run: () => renderRuleset(compileNode({ ...withCnp }, node, { tierLayout })),
    });
}

const cpu: Record<string, number[]> = {};
const bytes: Record<string, number> = {};
/** Of the first round's text: whether REF and HEAD render the 100k cluster alike. */
const digest: Record<string, string> = {};
try {
  for (let r = 0; r < Number(values.rounds); r++) {
    // The order rotates by one each round: a variant's garbage is collected
    // during the next one, and the CNP case leaves the most. A rotation keeps
    // who follows whom, so every other round runs backwards: each variant
    // follows both of its neighbours in turn.
    for (let k = 0; k < variants.length; k++) {
      const at = r % 2 === 0 ? k + r : r - k + variants.length;
      const v = variants[at % variants.length]!;
      const c0 = process.cpuUsage();
      const text = v.run();
      const c = process.cpuUsage(c0);
      (cpu[v.name] ??= []).push((c.user + c.system) / 1000);
      bytes[v.name] = text.length;
      if (r === 0) digest[v.name] = createHash('sha256').update(text).digest('hex').slice(0, 12);
    }
  }
} finally {
  cleanup();
}

const sorted = (name: string): number[] => [...(cpu[name] ?? [])].sort((a, b) => a - b);
const minOf = (name: string): number => sorted(name)[0] ?? 0;
const medianOf = (name: string): number => {
  const xs = sorted(name);
  return xs[xs.length >> 1] ?? 0;
};
const pct = (a: number, b: number): string => `${((a / b - 1) * 100).toFixed(0).padStart(4)} %`;
const base = variants[0]!.name;
console.log(`compile + render CPU ms over ${values.rounds} alternating rounds (${peers} peers), node ${node}`);
for (const v of variants) {
  console.log(
    `${v.name.padEnd(22)} min ${minOf(v.name).toFixed(0).padStart(5)}  median ${medianOf(v.name).toFixed(0).padStart(5)}  ` +
      `min vs ${base} ${pct(minOf(v.name), minOf(base))}  text ${Math.round((bytes[v.name] ?? 0) / 1024)} KiB ` +
      `(${bytes[v.name] ?? 0} B, sha256 ${digest[v.name] ?? ''})`,
  );
}
if (values.baseline !== undefined) {
  const rows: [string, string, string][] = [];
  for (const l of layouts) {
    const cnp = `HEAD 100k-cnp ${l}`;
    const mark = l === DEFAULT_TIER_LAYOUT ? ' (the target: at most +20 %)' : '';
    rows.push(
      [`HEAD-cnp ${l} vs REF-100k${mark}`, cnp, 'REF 100k'],
      [`HEAD-cnp ${l} vs HEAD-100k (same code)`, cnp, 'HEAD 100k'],
    );
  }
  if (layouts.includes('per-class') && layouts.includes('shared'))
    rows.push(['HEAD-cnp per-class vs HEAD-cnp shared', 'HEAD 100k-cnp per-class', 'HEAD 100k-cnp shared']);
  rows.push(['HEAD-100k vs REF-100k', 'HEAD 100k', 'REF 100k']);
  for (const [label, num, other] of rows)
    console.log(`${label.padEnd(50)} by min ${pct(minOf(num), minOf(other))}  by median ${pct(medianOf(num), medianOf(other))}`);
}
