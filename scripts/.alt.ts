import { generateCluster } from './gen-cluster.ts';
import { withClusterPolicies } from './bench-render.ts';
import { compileNode } from '../src/compile/compile.ts';
import { renderRuleset } from '../src/nft/render.ts';
const g = generateCluster({ pods: 100_000, policies: 10_000, namespaces: 5_000, podsPerNode: 110 });
const cnp = withClusterPolicies(g.state, 'narrow');
const node = g.nodes[0]!;
const variants: [string, () => void][] = [
  ['100k', () => void renderRuleset(compileNode({ ...g.state }, node))],
  // ['cnp shared', () => void renderRuleset(compileNode({ ...cnp }, node, { tierLayout: 'shared' }))],
  ['cnp auto', () => void renderRuleset(compileNode({ ...cnp }, node, { tierLayout: 'auto' }))],
];
const t: Record<string, number[]> = {};
for (let r = 0; r < Number(process.argv[2] ?? 7); r++)
  for (const [n, f] of variants) {
    const c0 = process.cpuUsage();
    f();
    const c = process.cpuUsage(c0);
    (t[n] ??= []).push((c.user + c.system) / 1000);
  }
for (const [n, xs] of Object.entries(t)) {
  const s = [...xs].sort((a, b) => a - b);
  console.log(n.padEnd(12), 'min', s[0]!.toFixed(0), 'median', s[s.length >> 1]!.toFixed(0));
}
console.log(JSON.stringify((globalThis as any).PHT));
