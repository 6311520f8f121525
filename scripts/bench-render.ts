// Benchmark: compile + render of one node's ruleset on synthetic clusters
// (scripts/gen-cluster.ts), plus loading the largest ruleset with `nft -f`
// into a scratch network namespace. Prints figures; asserts nothing.
// The first node of each cluster is rendered, and at 100k pods also the
// busiest node: the one most cluster-wide peer rules select pods on (rules
// whose pod peers have `namespaceSelector: {}`: the biggest sets).
//
//   node scripts/bench-render.ts            all cases (each in its own process, for clean RSS)
//   node scripts/bench-render.ts --case 1k  one case (100k-cnp: the 100k cluster with 100 ClusterNetworkPolicies;
//                                           --tier-layout auto|shared|per-class: the tiers' layout, compile/tiers.ts;
//                                           default the agent's, DEFAULT_TIER_LAYOUT)
//   node scripts/bench-render.ts --no-nft   skip the nft -f timing
import { DEFAULT_TIER_LAYOUT, parseTierLayout, resolveOptions, type TierLayout } from '../src/ruleset/options.ts';
import { execa } from 'execa';
import { randomBytes } from 'node:crypto';
import { arch, cpus, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { getHeapStatistics } from 'node:v8';
import { compileNode } from '../src/compile/compile.ts';
import { selectorIsEmpty, selectorMatches } from '../src/model/selector.ts';
import { isActivePod } from '../src/model/types.ts';
import type { ClusterNetworkPolicy, ClusterPolicyPeer, ClusterPolicyRule, ClusterState, Pod } from '../src/model/types.ts';
import { runNft } from '../src/nft/exec.ts';
import { renderRuleset } from '../src/nft/render.ts';
import { generateCluster } from './gen-cluster.ts';
import { DEFAULT_TENANCY } from '../src/model/tenancy-config.ts';
import type { GenOptions } from './gen-cluster.ts';
import { scriptArgs } from './script-args.ts';

const CASES: Record<
  string,
  Partial<GenOptions> & { busiest?: boolean; workspaces?: number; clusterPolicies?: 'narrow' | 'wide' }
> = {
  '1k': { pods: 1_000, policies: 100, namespaces: 50, podsPerNode: 110 },
  '10k': { pods: 10_000, policies: 1_000, namespaces: 500, podsPerNode: 110 },
  '100k': { pods: 100_000, policies: 10_000, namespaces: 5_000, podsPerNode: 110 },
  '100k-busiest': { pods: 100_000, policies: 10_000, namespaces: 5_000, podsPerNode: 110, busiest: true },
  // The 100k cluster with tenancy: its namespaces in 500 workspaces, all isolated (docs/tenancy.md).
  '100k-tenancy': { pods: 100_000, policies: 10_000, namespaces: 5_000, podsPerNode: 110, workspaces: 500 },
  // The 100k cluster with 100 ClusterNetworkPolicies of 25 rules each (withClusterPolicies): rules naming
  // a few pods each (as bench-datapath's), or (wide) whole teams' namespaces and an env's frontends.
  '100k-cnp': { pods: 100_000, policies: 10_000, namespaces: 5_000, podsPerNode: 110, clusterPolicies: 'narrow' },
  '100k-cnp-wide': { pods: 100_000, policies: 10_000, namespaces: 5_000, podsPerNode: 110, clusterPolicies: 'wide' },
};

/**
 * 100 ClusterNetworkPolicies of 25 rules, half Admin, half Baseline, priorities
 * 0..99. The first 50 apply to the namespaces of one env (a third of the pods:
 * of every node), the others to the db pods of one team's namespaces. Rules
 * cycle Accept, Deny, Pass on one port and one 50-port range each, over
 * peers that select (narrow) one app of one namespace or a /24, or (wide) a
 * team's namespaces, the frontend pods of an env, or a /24: together nearly
 * every pod of the cluster.
 */
export function withClusterPolicies(state: ClusterState, peers: 'narrow' | 'wide'): ClusterState {
  const envs = ['prod', 'staging', 'dev'];
  const actions = ['Accept', 'Deny', 'Pass'] as const;
  const sel = (matchLabels: Record<string, string>) => ({ matchLabels, matchExpressions: [] });
  const clusterPolicies: ClusterNetworkPolicy[] = Array.from({ length: 100 }, (_, i) => {
    const rules: ClusterPolicyRule[] = Array.from({ length: 25 }, (_, j) => {
      const k = (i * 25 + j) % 150;
      const ns = state.namespaces[2 + ((i * 25 + j) % Math.max(1, state.namespaces.length - 2))]?.name ?? 'default';
      const peer: ClusterPolicyPeer =
        peers === 'narrow'
          ? k % 3 === 2
            ? { kind: 'networks', cidrs: [`192.168.${k}.0/24`] }
            : {
                kind: 'pods',
                namespaceSelector: sel({ 'kubernetes.io/metadata.name': ns }),
                podSelector: sel({ app: `app-${j % 6}` }),
              }
          : k % 3 === 0
            ? { kind: 'pods', namespaceSelector: sel({ team: `team-${k % 50}` }), podSelector: sel({}) }
            : k % 3 === 1
              ? { kind: 'pods', namespaceSelector: sel({ env: envs[k % 3] ?? 'dev' }), podSelector: sel({ tier: 'frontend' }) }
              : { kind: 'networks', cidrs: [`192.168.${k}.0/24`] };
      return {
        name: `r${j}`,
        action: actions[(i + j) % 3] ?? 'Deny',
        peers: [peer],
        protocols: [
          { kind: 'port', protocol: 'TCP', port: 1000 + j, endPort: undefined },
          { kind: 'port', protocol: 'TCP', port: 20000 + 100 * j, endPort: 20000 + 100 * j + 50 },
        ],
        invalid: false,
      };
    });
    return {
      name: `cnp-${String(i).padStart(3, '0')}`,
      sourceKind: 'ClusterNetworkPolicy',
      tier: i % 2 === 0 ? 'Admin' : 'Baseline',
      priority: i,
      subject:
        i < 50
          ? { namespaceSelector: sel({ env: envs[i % 3] ?? 'dev' }), podSelector: sel({}) }
          : { namespaceSelector: sel({ team: `team-${i % 50}` }), podSelector: sel({ tier: 'db' }) },
      ingress: i % 4 < 2 ? rules : [],
      egress: i % 4 < 2 ? [] : rules,
      errors: [],
    };
  });
  return { ...state, clusterPolicies };
}

/**
 * The state with tenancy on: every namespace but kube-system and monitoring
 * labelled into one of `n` workspaces (round robin), every workspace isolated,
 * and the kube-dns Service the DNS allowance names.
 */
export function withWorkspaces(state: ClusterState, n: number): ClusterState {
  let i = 0;
  const namespaces = state.namespaces.map((ns) =>
    ns.name === 'kube-system' || ns.name === 'monitoring'
      ? ns
      : { ...ns, labels: { ...ns.labels, 'kubesphere.io/workspace': `ws-${String(i++ % n).padStart(3, '0')}` } },
  );
  return {
    ...state,
    namespaces,
    workspaces: Array.from({ length: n }, (_, k) => ({ name: `ws-${String(k).padStart(3, '0')}`, networkIsolation: true })),
    services: [
      {
        namespace: 'kube-system',
        name: 'kube-dns',
        selector: { 'k8s-app': 'kube-dns' },
        ports: [{ name: 'dns', protocol: 'UDP', port: 53, targetPort: 53 }],
      },
    ],
    tenancy: DEFAULT_TENANCY,
  };
}

/**
 * The node with the most (policy, rule) pairs whose pod peers span every
 * namespace and whose policy selects one of its pods; ties: first by name.
 */
export function busiestNode(state: ClusterState): { node: string; clusterWideRules: number } {
  const podsByNs = new Map<string, Pod[]>();
  for (const p of state.pods) {
    if (!isActivePod(p) || p.nodeName === undefined) continue;
    let l = podsByNs.get(p.namespace);
    if (l === undefined) podsByNs.set(p.namespace, (l = []));
    l.push(p);
  }
  const count = new Map<string, number>();
  for (const pol of state.policies) {
    const wide = [...pol.ingress, ...pol.egress].filter((r) =>
      r.peers?.some((x) => x.kind === 'pods' && x.namespaceSelector !== undefined && selectorIsEmpty(x.namespaceSelector)),
    ).length;
    if (wide === 0) continue;
    const nodes = new Set<string>();
    for (const p of podsByNs.get(pol.namespace) ?? [])
      if (selectorMatches(pol.podSelector, p.labels) && p.nodeName !== undefined) nodes.add(p.nodeName);
    for (const n of nodes) count.set(n, (count.get(n) ?? 0) + wide);
  }
  let best = { node: state.nodes[0]?.name ?? '', clusterWideRules: 0 };
  for (const [node, n] of [...count].sort((a, b) => (a[0] < b[0] ? -1 : 1)))
    if (n > best.clusterWideRules) best = { node, clusterWideRules: n };
  return best;
}
const RUNS = 5;

interface CaseResult {
  readonly name: string;
  readonly node: string;
  readonly clusterWideRules: number;
  readonly genMs: number;
  readonly firstMs: number;
  readonly compileMs: number;
  readonly renderMs: number;
  readonly totalMs: number;
  readonly cpuMs: number;
  readonly heapMiB: number;
  /** RSS with the generated cluster in memory, before any compile. */
  readonly stateRssMiB: number;
  readonly rssMiB: number;
  readonly bytes: number;
  readonly stats: ReturnType<typeof compileNode>['stats'];
  readonly nft?: { applyMs: number; reapplyMs: number; ok: boolean; error?: string };
}

const mib = (b: number): number => Math.round((b / 1048576) * 10) / 10;
const ms = (t0: bigint): number => Number(process.hrtime.bigint() - t0) / 1e6;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

async function nftTiming(text: string): Promise<CaseResult['nft']> {
  const netns = `nftnp-bench-${randomBytes(4).toString('hex')}`;
  const add = await execa('ip', ['netns', 'add', netns], { reject: false });
  if (add.failed) return { applyMs: 0, reapplyMs: 0, ok: false, error: `ip netns add: ${add.stderr || add.message}` };
  try {
    let t0 = process.hrtime.bigint();
    const first = await runNft(text, { netns });
    const applyMs = ms(t0);
    if (!first.ok) return { applyMs, reapplyMs: 0, ok: false, error: first.error.slice(0, 300) };
    t0 = process.hrtime.bigint();
    const again = await runNft(text, { netns });
    return { applyMs, reapplyMs: ms(t0), ok: again.ok, ...(again.ok ? {} : { error: again.error.slice(0, 300) }) };
  } finally {
    await execa('ip', ['netns', 'del', netns], { reject: false });
  }
}

async function runCase(name: string, withNft: boolean, tierLayout: TierLayout = DEFAULT_TIER_LAYOUT): Promise<CaseResult> {
  const opts = CASES[name];
  if (opts === undefined) throw new Error(`unknown case ${name}; one of ${Object.keys(CASES).join(', ')}`);
  let t0 = process.hrtime.bigint();
  const generated = generateCluster(opts);
  const withTenancy =
    opts.workspaces === undefined ? generated : { ...generated, state: withWorkspaces(generated.state, opts.workspaces) };
  const cluster =
    opts.clusterPolicies === undefined
      ? withTenancy
      : { ...withTenancy, state: withClusterPolicies(withTenancy.state, opts.clusterPolicies) };
  const genMs = ms(t0);
  const stateRssMiB = mib(process.memoryUsage().rss);
  const { node, clusterWideRules } =
    opts.busiest === true ? busiestNode(cluster.state) : { node: cluster.nodes[0] ?? '', clusterWideRules: -1 };

  // First (cold) run: what the agent pays on start-up.
  t0 = process.hrtime.bigint();
  const ro = resolveOptions({ tierLayout });
  const cold = renderRuleset(compileNode(cluster.state, node, ro));
  const firstMs = ms(t0);

  const compileTimes: number[] = [];
  const renderTimes: number[] = [];
  // CPU time (user + system, all threads) of each compile + render: what a loaded machine distorts least.
  const cpuTimes: number[] = [];
  let text = cold;
  let compiled = compileNode(cluster.state, node, ro);
  for (let i = 0; i < RUNS; i++) {
    // A new snapshot object each time, as the agent's: nothing memoized per state (the tenancy kinds) carries over.
    const snapshot = { ...cluster.state };
    const cpu0 = process.cpuUsage();
    t0 = process.hrtime.bigint();
    compiled = compileNode(snapshot, node, ro);
    compileTimes.push(ms(t0));
    t0 = process.hrtime.bigint();
    text = renderRuleset(compiled);
    renderTimes.push(ms(t0));
    const cpu = process.cpuUsage(cpu0);
    cpuTimes.push((cpu.user + cpu.system) / 1000);
  }
  if (text !== cold) throw new Error('non-deterministic output');
  const heap = getHeapStatistics();
  const result: CaseResult = {
    name,
    node,
    clusterWideRules,
    genMs,
    firstMs,
    compileMs: median(compileTimes),
    renderMs: median(renderTimes),
    totalMs: median(compileTimes.map((c, i) => c + (renderTimes[i] ?? 0))),
    cpuMs: median(cpuTimes),
    heapMiB: mib(heap.used_heap_size),
    stateRssMiB,
    rssMiB: mib(process.resourceUsage().maxRSS * 1024),
    bytes: Buffer.byteLength(text),
    stats: compiled.stats,
  };
  return withNft ? { ...result, nft: await nftTiming(text) } : result;
}

function print(rs: readonly CaseResult[]): void {
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  console.log(
    `node ${process.version}, ${cpus().length} x ${cpu}, ${mib(totalmem())} MiB, ${arch()}, ${new Date().toISOString().slice(0, 10)}`,
  );
  console.log(
    `compile/render: median of ${RUNS} warm runs; cpu = CPU time of compile+render (all threads); first = cold compile+render; heap = used after the runs;`,
  );
  console.log("state RSS = process with the generated cluster loaded; peak RSS = peak of the case's process");
  const rows = [
    [
      'case',
      'gen ms',
      'first ms',
      'compile ms',
      'render ms',
      'total ms',
      'cpu ms',
      'heap MiB',
      'state RSS MiB',
      'peak RSS MiB',
      'local pods',
      'policies',
      'chains',
      'rules',
      'sets',
      'elements',
      'KiB',
    ],
    ...rs.map((r) => [
      r.name,
      r.genMs.toFixed(0),
      r.firstMs.toFixed(1),
      r.compileMs.toFixed(1),
      r.renderMs.toFixed(1),
      r.totalMs.toFixed(1),
      r.cpuMs.toFixed(1),
      String(r.heapMiB),
      String(r.stateRssMiB),
      String(r.rssMiB),
      String(r.stats.localPods),
      String(r.stats.policies),
      String(r.stats.chains),
      String(r.stats.rules),
      String(r.stats.sets),
      String(r.stats.elements),
      (r.bytes / 1024).toFixed(0),
    ]),
  ];
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((row) => (row[i] ?? '').length))) ?? [];
  for (const row of rows) console.log(row.map((c, i) => c.padStart(widths[i] ?? 0)).join('  '));
  for (const r of rs)
    if (r.clusterWideRules >= 0)
      console.log(`${r.name}: ${r.node}, ${r.clusterWideRules} cluster-wide peer rules select its pods`);
  for (const r of rs) {
    if (r.nft === undefined) continue;
    console.log(
      r.nft.ok
        ? `nft -f (${r.name}, scratch netns): first load ${r.nft.applyMs.toFixed(0)} ms, replace ${r.nft.reapplyMs.toFixed(0)} ms`
        : `nft -f (${r.name}) failed: ${r.nft.error ?? ''}`,
    );
  }
}

async function main(): Promise<void> {
  const { values } = scriptArgs(import.meta.url, {
    options: {
      case: { type: 'string' },
      'no-nft': { type: 'boolean' },
      json: { type: 'boolean' },
      // Default: the agent's (DEFAULT_TIER_LAYOUT, compile/tiers.ts).
      'tier-layout': { type: 'string' },
    },
  });
  const withNft = values['no-nft'] !== true;
  if (values.case !== undefined) {
    const layout = parseTierLayout(values['tier-layout']);
    const r = await runCase(values.case, withNft && values.case.startsWith('100k'), layout);
    if (values.json === true) console.log(JSON.stringify(r));
    else print([r]);
    return;
  }
  // One child process per case: peak RSS then belongs to that case alone.
  const self = fileURLToPath(import.meta.url);
  const results: CaseResult[] = [];
  for (const name of Object.keys(CASES)) {
    const args = [self, '--case', name, '--json', ...(withNft ? [] : ['--no-nft'])];
    const r = await execa(process.execPath, args, { reject: false });
    if (r.failed) throw new Error(`case ${name} failed: ${r.stderr || r.message}`);
    results.push(JSON.parse(r.stdout) as CaseResult);
  }
  print(results);
}

// Only when run as a script: bench-update.ts imports busiestNode from here.
if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
