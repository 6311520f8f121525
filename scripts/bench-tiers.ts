// The cost the ClusterNetworkPolicy tiers add to a full compile + render at
// 100k pods, in one process and in alternation (so that a loaded machine
// weighs on every variant alike): the 100k cluster without them, and with
// bench-render's 100 ClusterNetworkPolicies (withClusterPolicies) in each
// layout of compile/tiers.ts. Figures are CPU time (user + system) per
// compile + render; the minimum is the least disturbed.
//   node scripts/bench-tiers.ts [--rounds 7] [--peers narrow|wide]
import { parseArgs } from 'node:util';
import { compileNode } from '../src/compile/compile.ts';
import { renderRuleset } from '../src/nft/render.ts';
import type { TierLayout } from '../src/ruleset/options.ts';
import { withClusterPolicies } from './bench-render.ts';
import { generateCluster } from './gen-cluster.ts';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '7' }, peers: { type: 'string', default: 'narrow' } },
});
const peers = values.peers === 'wide' ? 'wide' : 'narrow';
const g = generateCluster({ pods: 100_000, policies: 10_000, namespaces: 5_000, podsPerNode: 110 });
const withCnp = withClusterPolicies(g.state, peers);
const node = g.nodes[0] ?? '';

const variants: { name: string; run: () => number }[] = [
  { name: '100k', run: () => renderRuleset(compileNode({ ...g.state }, node)).length },
  ...(['shared', 'per-class', 'auto'] as const satisfies readonly TierLayout[]).map((tierLayout) => ({
    name: `100k-cnp ${tierLayout}`,
    run: () => renderRuleset(compileNode({ ...withCnp }, node, { tierLayout })).length,
  })),
];
const cpu: Record<string, number[]> = {};
const bytes: Record<string, number> = {};
for (let r = 0; r < Number(values.rounds); r++) {
  for (const v of variants) {
    const c0 = process.cpuUsage();
    bytes[v.name] = v.run();
    const c = process.cpuUsage(c0);
    (cpu[v.name] ??= []).push((c.user + c.system) / 1000);
  }
}
const base = Math.min(...(cpu['100k'] ?? [1]));
console.log(`compile + render CPU ms over ${values.rounds} alternating rounds (${peers} peers)`);
for (const v of variants) {
  const xs = [...(cpu[v.name] ?? [])].sort((a, b) => a - b);
  const min = xs[0] ?? 0;
  console.log(
    `${v.name.padEnd(20)} min ${min.toFixed(0).padStart(5)}  median ${(xs[xs.length >> 1] ?? 0).toFixed(0).padStart(5)}  ` +
      `vs 100k ${((min / base - 1) * 100).toFixed(0).padStart(4)} %  text ${Math.round((bytes[v.name] ?? 0) / 1024)} KiB`,
  );
}
