// Benchmark: the cost of one pod's churn at 100k pods / 10k policies, as a
// full replacement script versus an element update (nft/update.ts): script
// size, time to compute it, and `nft -f` time on top of the previous ruleset
// in a scratch network namespace. Prints figures; asserts nothing.
//
//   node scripts/bench-update.ts              100k pods, 10k policies
//   node scripts/bench-update.ts --pods 10000 --policies 1000 --namespaces 500
//
// The node is the busiest one (see bench-render.ts), given its pod CIDR so
// that unknown local endpoints are dropped and non-isolated local pods are
// map elements. Scenarios, each from the same previous state:
//   remote-replace   a frontend elsewhere is replaced by one with a new IP (a rollout step)
//   remote-relabel   a frontend elsewhere stops being one
//   local-plain      a pod nothing isolates starts on this node (map element)
//   local-isolated   a pod a policy isolates starts on this node (new chains: full)
//   policy-edit      a policy isolating pods of this node gets one more ingress rule
//                    (a new port on TCP, from the same peers)
// With --cnp the cluster also has the 100 ClusterNetworkPolicies of bench-render.ts (100k-cnp),
// and three more scenarios edit one that selects pods of this node:
//   cnp-priority     its priority moves behind every other policy
//   cnp-action       its first rule's action changes (Accept <-> Deny, Pass -> Accept)
//   cnp-rule-swap    its first two rules change places
import { execa } from 'execa';
import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import { compileNode } from '../src/compile/compile.ts';
import type { CompiledRuleset } from '../src/ruleset/ir.ts';
import { runNft } from '../src/nft/exec.ts';
import { renderRuleset } from '../src/nft/render.ts';
import { renderUpdate } from '../src/nft/update.ts';
import type { ClusterState, Pod } from '../src/model/types.ts';
import { busiestNode, withClusterPolicies } from './bench-render.ts';
import { generateCluster } from './gen-cluster.ts';
import { scriptArgs } from './script-args.ts';

const RUNS = 5;
const ms = (t0: bigint): number => Number(process.hrtime.bigint() - t0) / 1e6;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

interface Scenario {
  readonly name: string;
  readonly next: ClusterState;
}

/** Edits of one ClusterNetworkPolicy whose subject selects a pod of `node` (the first one, by name). */
function cnpScenarios(state: ClusterState, node: string): Scenario[] {
  const local = state.pods.filter((p) => p.nodeName === node);
  const env = (ns: string): string | undefined => state.namespaces.find((n) => n.name === ns)?.labels.env;
  const cnps = state.clusterPolicies ?? [];
  const target = cnps.find((c) =>
    local.some(
      (p) =>
        Object.entries(c.subject.namespaceSelector.matchLabels).every(([k, v]) => k === 'env' && env(p.namespace) === v) &&
        Object.keys(c.subject.podSelector.matchLabels).length === 0,
    ),
  );
  if (target === undefined) throw new Error('no ClusterNetworkPolicy selects a pod of the node');
  const edit = (changed: typeof target): ClusterState => ({
    ...state,
    clusterPolicies: cnps.map((c) => (c === target ? changed : c)),
  });
  const rules = target.ingress.length > 0 ? 'ingress' : 'egress';
  const list = target[rules];
  const [r0, r1] = [list[0]!, list[1]!];
  const flipped = { ...r0, action: r0.action === 'Accept' ? ('Deny' as const) : ('Accept' as const) };
  return [
    { name: 'cnp-priority', next: edit({ ...target, priority: 1000 }) },
    { name: 'cnp-action', next: edit({ ...target, [rules]: [flipped, ...list.slice(1)] }) },
    { name: 'cnp-rule-swap', next: edit({ ...target, [rules]: [r1, r0, ...list.slice(2)] }) },
  ];
}

function scenarios(state: ClusterState, node: string): Scenario[] {
  const frontend = state.pods.find(
    (p) => p.nodeName !== node && p.labels.tier === 'frontend' && p.ips.length > 0 && p.phase === 'Running',
  );
  if (frontend === undefined) throw new Error('no remote frontend pod');
  const other = state.pods.find((p) => p.nodeName !== node && p.nodeName !== frontend.nodeName)?.nodeName;
  const without = state.pods.filter((p) => p !== frontend);
  const sorted = (pods: Pod[]): ClusterState => ({
    ...state,
    pods: pods.sort((a, b) =>
      a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
    ),
  });
  const local = state.pods.find((p) => p.nodeName === node && p.ips.length > 0);
  const prefix = (local?.ips[0] ?? '10.0.0.1').split('.').slice(0, 3).join('.');
  // The generator fills .2 up to .111 of each node's /24: .250 is free.
  const newLocal = (name: string, labels: Record<string, string>, namespace: string): Pod => ({
    ...frontend,
    namespace,
    name,
    labels,
    nodeName: node,
    ips: [`${prefix}.250`],
  });
  // A namespace with a default-deny policy isolates every pod in it.
  const denyNs = state.policies.find((p) => p.name.startsWith('default-deny-'))?.namespace ?? '';
  const quietNs = state.namespaces.find((n) => !state.policies.some((p) => p.namespace === n.name))?.name ?? 'kube-system';
  // A policy that isolates local pods for ingress: a rule more (what `kubectl edit` of one policy does).
  const localNs = new Set(state.pods.filter((p) => p.nodeName === node).map((p) => p.namespace));
  const edited = state.policies.find((p) => localNs.has(p.namespace) && p.types.ingress && p.ingress.length > 0);
  if (edited === undefined) throw new Error('no policy in a namespace of the node');
  const extra = { ...edited.ingress[0]!, ports: [{ protocol: 'TCP' as const, port: 65000, endPort: undefined }] };
  const policies = state.policies.map((p) => (p === edited ? { ...p, ingress: [...p.ingress, extra] } : p));
  return [
    {
      name: 'remote-replace',
      next: sorted([...without, { ...frontend, name: `${frontend.name}-new`, nodeName: other, ips: ['10.250.0.1'] }]),
    },
    { name: 'remote-relabel', next: sorted([...without, { ...frontend, labels: { ...frontend.labels, tier: 'batch' } }]) },
    { name: 'local-plain', next: sorted([...state.pods, newLocal('bench-plain', { app: 'bench' }, quietNs)]) },
    { name: 'local-isolated', next: sorted([...state.pods, newLocal('bench-isolated', { app: 'bench' }, denyNs)]) },
    { name: 'policy-edit', next: { ...state, policies } },
  ];
}

async function timeApply(netns: string, prev: string, script: string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const reset = await runNft(prev, { netns });
    if (!reset.ok) throw new Error(`prev: ${reset.error.slice(0, 300)}`);
    const t0 = process.hrtime.bigint();
    const r = await runNft(script, { netns });
    times.push(ms(t0));
    if (!r.ok) throw new Error(`apply: ${r.error.slice(0, 300)}`);
  }
  return median(times);
}

async function main(): Promise<void> {
  const { values } = scriptArgs(import.meta.url, {
    options: {
      pods: { type: 'string' },
      policies: { type: 'string' },
      namespaces: { type: 'string' },
      'no-nft': { type: 'boolean' },
      cnp: { type: 'boolean' },
    },
  });
  const pods = Number(values.pods ?? 100_000);
  const cluster = generateCluster({
    pods,
    policies: Number(values.policies ?? 10_000),
    namespaces: Number(values.namespaces ?? 5_000),
    podsPerNode: 110,
  });
  const { node } = busiestNode(cluster.state);
  const idx = Number(node.replace(/^node-0*/, '') || '0');
  // The generator gives node n the addresses 10.(n >> 8).(n & 255).x.
  const podCIDR = `10.${(idx >> 8) & 255}.${idx & 255}.0/24`;
  const withNode: ClusterState = {
    ...cluster.state,
    nodes: cluster.state.nodes.map((n) => (n.name === node ? { ...n, podCIDRs: [podCIDR] } : n)),
  };
  const state = values.cnp === true ? withClusterPolicies(withNode, 'narrow') : withNode;
  // Unknown local endpoints dropped (opt-in in the agent): pods nothing isolates are `accept` map elements.
  const prev: CompiledRuleset = compileNode(state, node, { unknownLocalEndpoints: 'drop' });
  const prevText = renderRuleset(prev);
  console.log(`node ${process.version}, ${cpus().length} x ${cpus()[0]?.model ?? '?'}, ${new Date().toISOString().slice(0, 10)}`);
  console.log(
    `${pods} pods; ${node} (pod CIDR ${podCIDR}): ${prev.stats.elements} elements, ${(Buffer.byteLength(prevText) / 1024).toFixed(0)} KiB full script`,
  );
  console.log(
    `update ms = renderUpdate(prev, next), median of ${RUNS} warm runs (compile excluded); nft ms = median of ${RUNS} applies on top of prev in a scratch netns`,
  );

  const netns = `nftnp-bench-${randomBytes(4).toString('hex')}`;
  const withNft = values['no-nft'] !== true;
  if (withNft) await execa('ip', ['netns', 'add', netns]);
  try {
    const rows: string[][] = [
      ['scenario', 'kind', 'elements +/-', 'update ms', 'update bytes', 'nft ms', 'full bytes', 'full nft ms'],
    ];
    for (const sc of [...scenarios(state, node), ...(values.cnp === true ? cnpScenarios(state, node) : [])]) {
      const next = compileNode(sc.next, node, { unknownLocalEndpoints: 'drop' });
      const times: number[] = [];
      let u = renderUpdate(prev, next);
      for (let i = 0; i < RUNS; i++) {
        const t0 = process.hrtime.bigint();
        u = renderUpdate(prev, next);
        times.push(ms(t0));
      }
      const updateMs = median(times);
      const full = renderRuleset(next);
      const nftMs = withNft ? (await timeApply(netns, prevText, u.text)).toFixed(0) : '-';
      const fullMs = withNft ? (u.kind === 'full' ? nftMs : (await timeApply(netns, prevText, full)).toFixed(0)) : '-';
      rows.push([
        sc.name,
        u.kind,
        u.kind === 'incremental' ? `+${u.added} -${u.removed}` : u.reason,
        updateMs.toFixed(1),
        String(Buffer.byteLength(u.text)),
        nftMs,
        String(Buffer.byteLength(full)),
        fullMs,
      ]);
    }
    const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
    for (const r of rows) console.log(r.map((c, i) => c.padStart(widths[i] ?? 0)).join('  '));
  } finally {
    if (withNft) await execa('ip', ['netns', 'del', netns], { reject: false });
  }
}

await main();
