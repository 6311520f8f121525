// Benchmark: what tenancy costs the compiler. The 100k-pod cluster of
// bench-render.ts (10k policies, 5k namespaces, 110 pods per node) rendered
// for its first node, plain and with its namespaces in 500 workspaces, all
// isolated (withWorkspaces: every isolated namespace gets isolation rules with
// DNS and node allowances). The two are compiled and rendered alternately in
// one process, each from a new snapshot object (as the agent's: nothing
// memoized per state carries over), so that load on a shared machine hits
// both alike. A third variant writes the same isolation as one NetworkPolicy
// per namespace (what KubeSphere's controller creates), to compare tenancy
// with doing it by hand. Prints medians, fastest runs and ratios; asserts nothing.
//
//   node scripts/bench-tenancy.ts [--rounds 9] [--workspaces 500] [--pods 100000]
import { compileNode } from '../src/compile/compile.ts';
import { contributedPolicies } from '../src/kinds/registry.ts';
import type { ClusterState, NetworkPolicy, Peer, PortSpec } from '../src/model/types.ts';
import { renderRuleset } from '../src/nft/render.ts';
import { withWorkspaces } from './bench-render.ts';
import { generateCluster } from './gen-cluster.ts';
import { scriptArgs } from './script-args.ts';

const { values } = scriptArgs(import.meta.url, {
  options: { rounds: { type: 'string' }, workspaces: { type: 'string' }, pods: { type: 'string' } },
});
const rounds = Number(values.rounds ?? 9);
const workspaces = Number(values.workspaces ?? 500);
const pods = Number(values.pods ?? 100_000);

const ms = (t0: bigint): number => Number(process.hrtime.bigint() - t0) / 1e6;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
const min = (xs: number[]): number => Math.min(...xs);

const cluster = generateCluster({ pods, policies: pods / 10, namespaces: pods / 20, podsPerNode: 110 });
const node = cluster.nodes[0] ?? '';
const plain = cluster.state;
const tenancy = withWorkspaces(plain, workspaces);

/** The isolation of `tenancy` as plain NetworkPolicies (tenancy off): the same rules, written by hand. */
function asNetworkPolicies(t: ClusterState): ClusterState {
  const extra: NetworkPolicy[] = contributedPolicies(t)
    .filter((p) => p.origin.kind === 'WorkspaceIsolation')
    .map((p) => ({
      namespace: p.namespace,
      name: 'network-isolate',
      podSelector: p.podSelector,
      types: p.types,
      ingress: p.ingress.map((r) => ({
        peers: r.peers as readonly Peer[] | undefined,
        ports: r.ports as readonly PortSpec[] | undefined,
        invalid: false,
      })),
      egress: p.egress.map((r) => ({
        peers: r.peers as readonly Peer[] | undefined,
        ports: r.ports as readonly PortSpec[] | undefined,
        invalid: false,
      })),
      errors: [],
    }));
  const { tenancy: _off, ...rest } = t;
  return {
    ...rest,
    policies: [...t.policies, ...extra].sort((a, b) =>
      a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : a.name < b.name ? -1 : 1,
    ),
  };
}
const byHand = asNetworkPolicies(tenancy);

function once(state: ClusterState): { ms: number; text: string; stats: ReturnType<typeof compileNode>['stats'] } {
  const snapshot = { ...state };
  const t0 = process.hrtime.bigint();
  const compiled = compileNode(snapshot, node);
  const text = renderRuleset(compiled);
  return { ms: ms(t0), text, stats: compiled.stats };
}

const cold = { plain: once(plain).ms, tenancy: once(tenancy).ms, byHand: once(byHand).ms };
const times = { plain: [] as number[], tenancy: [] as number[], byHand: [] as number[] };
let last = { plain: once(plain), tenancy: once(tenancy), byHand: once(byHand) };
for (let i = 0; i < rounds; i++) {
  const a = once(plain);
  const b = once(tenancy);
  const c = once(byHand);
  times.plain.push(a.ms);
  times.tenancy.push(b.ms);
  times.byHand.push(c.ms);
  if (a.text !== last.plain.text || b.text !== last.tenancy.text) throw new Error('non-deterministic output');
  last = { plain: a, tenancy: b, byHand: c };
}
const isolated = contributedPolicies(tenancy).filter((p) => p.origin.kind === 'WorkspaceIsolation').length;
const mp = median(times.plain);
const mt = median(times.tenancy);
console.log(
  `${pods} pods, ${plain.policies.length} NetworkPolicies, ${plain.namespaces.length} namespaces, node ${node}; ` +
    `tenancy: ${workspaces} isolated workspaces, ${isolated} isolated namespaces`,
);
console.log(`compile+render of ${rounds} alternating warm runs: median and fastest (cold = first run, plain first):`);
for (const [name, xs, c, s] of [
  ['plain', times.plain, cold.plain, last.plain.stats],
  ['tenancy', times.tenancy, cold.tenancy, last.tenancy.stats],
  ['by hand', times.byHand, cold.byHand, last.byHand.stats],
] as const) {
  console.log(
    `  ${name.padEnd(8)} median ${median(xs).toFixed(1).padStart(7)} ms  fastest ${min(xs).toFixed(1).padStart(7)} ms  (cold ${c.toFixed(0)} ms)  policies ${s.policies}  chains ${s.chains}  rules ${s.rules}  sets ${s.sets}  elements ${s.elements}`,
  );
}
const pct = (r: number): string => `${r.toFixed(2)} (${r >= 1 ? '+' : ''}${((r - 1) * 100).toFixed(0)}%)`;
console.log(`  ratio tenancy/plain: median ${pct(mt / mp)}, fastest ${pct(min(times.tenancy) / min(times.plain))}`);
console.log(
  `  ratio tenancy/by hand: median ${pct(mt / median(times.byHand))}, fastest ${pct(min(times.tenancy) / min(times.byHand))}`,
);
