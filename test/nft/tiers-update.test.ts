// Incremental updates with the ordered tiers (ClusterNetworkPolicy Admin and
// Baseline; src/compile/tiers.ts): in scratch network namespaces, applying
// prev in full and then the update leaves exactly what applying next in full
// leaves, under ClusterNetworkPolicy churn (priorities, tiers and actions
// changed, rules swapped, added and removed, subjects changed, policies
// created and deleted) with pod churn underneath. The tier-peers maps are
// fixed objects while any tiered policy exists, so the update is incremental
// whenever the cluster has tiered policies before and after; only the first
// one created or the last one deleted changes the base maps (a full apply).
import type { TierLayout } from '../../src/ruleset/options.ts';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { compileNode } from '../../src/compile/compile.ts';
import type { CompiledRuleset } from '../../src/ruleset/ir.ts';
import { listTable, runNft } from '../../src/nft/exec.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { isEmptyUpdate, renderUpdate } from '../../src/nft/update.ts';
import type {
  ClusterNetworkPolicy,
  ClusterPolicyAction,
  ClusterPolicyPeer,
  ClusterPolicyProtocol,
  ClusterPolicyRule,
  ClusterState,
  NamespacedPods,
  NetworkPolicy,
  Node,
  Pod,
} from '../../src/model/types.ts';
import { ALL, cport, ns, pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';
import { canonicalListing, withNetns } from './netns-support.ts';
import { sortedObjects } from './listing-objects.ts';
import { haveNft } from './nft-support.ts';

const NODE1: Node = {
  name: 'node-1',
  addresses: ['192.168.100.1', 'fd00:100::1'],
  podCIDRs: ['10.0.1.0/24', 'fd00:1::/64'],
  labels: { 'kubernetes.io/hostname': 'node-1', zone: 'a' },
};
const NODE2: Node = {
  name: 'node-2',
  addresses: ['192.168.100.2', 'fd00:100::2'],
  podCIDRs: ['10.0.2.0/24', 'fd00:2::/64'],
  labels: { 'kubernetes.io/hostname': 'node-2', zone: 'b' },
};
const DROP = { unknownLocalEndpoints: 'drop' } as const;
const APPS = ['web', 'db', 'api'];
const NSS = ['a', 'b'];

function elementCount(c: CompiledRuleset): number {
  return (
    c.sets.reduce((n, s) => n + s.elements.length, 0) +
    c.maps.reduce((n, m) => n + m.elements.length, 0) +
    c.decisions.reduce((n, d) => n + d.elements.length, 0)
  );
}

// ---- against the kernel ----

async function applyOk(script: string, netns: string, label: string): Promise<void> {
  const r = await runNft(script, { netns });
  assert.ok(r.ok, `${label}: ${r.ok ? '' : r.error}\n${script.slice(0, 3000)}`);
}

async function listing(table: string, netns: string): Promise<string> {
  const l = await listTable(table, { netns });
  assert.ok(l !== undefined, `no table ${table} in ${netns}`);
  return sortedObjects(canonicalListing(l));
}

/** prev in full then the update in A; next in full in B: same table. */
async function checkUpdate(
  prev: CompiledRuleset,
  next: CompiledRuleset,
  [a, b]: string[],
  label: string,
): Promise<ReturnType<typeof renderUpdate>> {
  if (a === undefined || b === undefined) throw new Error('two namespaces needed');
  const u = renderUpdate(prev, next);
  await applyOk(renderRuleset(prev), a, `${label} prev`);
  await applyOk(u.text, a, `${label} ${u.kind} update`);
  await applyOk(renderRuleset(next), b, `${label} next`);
  assert.equal(
    await listing(next.table, a),
    await listing(next.table, b),
    `${label}: ${u.kind} update\n${u.text.slice(0, 3000)}`,
  );
  return u;
}

// ---- generated ClusterNetworkPolicies (the normalized model) ----

const nsSel = fc.constantFrom(ALL, sel({ 'kubernetes.io/metadata.name': 'a' }), sel({ 'kubernetes.io/metadata.name': 'b' }));
const appSel = fc.oneof(
  fc.constant(ALL),
  fc.constantFrom(...APPS).map((app) => sel({ app })),
);
const subjectArb: fc.Arbitrary<NamespacedPods> = fc.record({ namespaceSelector: nsSel, podSelector: appSel });

const podsPeer: fc.Arbitrary<ClusterPolicyPeer> = subjectArb.map((s) => ({ kind: 'pods' as const, ...s }));
const egressPeer: fc.Arbitrary<ClusterPolicyPeer> = fc.oneof(
  { arbitrary: podsPeer, weight: 3 },
  {
    arbitrary: fc
      .constantFrom(
        ['10.0.2.0/25'],
        ['0.0.0.0/0', '::/0'],
        ['fd00:2::/64'],
        ['10.0.1.0/24', '10.0.2.16/28'],
        ['192.168.100.0/24'],
      )
      .map((cidrs) => ({ kind: 'networks' as const, cidrs: [...cidrs].sort() })),
    weight: 2,
  },
  {
    arbitrary: fc
      .constantFrom(ALL, sel({ zone: 'b' }), sel({ 'kubernetes.io/hostname': 'node-1' }))
      .map((nodeSelector) => ({ kind: 'nodes' as const, nodeSelector })),
    weight: 1,
  },
);

const numbered: fc.Arbitrary<ClusterPolicyProtocol> = fc.constantFrom<ClusterPolicyProtocol>(
  { kind: 'port', protocol: 'TCP', port: 80, endPort: undefined },
  { kind: 'port', protocol: 'TCP', port: 443, endPort: undefined },
  { kind: 'port', protocol: 'UDP', port: 8000, endPort: 8100 },
  { kind: 'port', protocol: 'TCP', port: 1, endPort: 1000 },
  { kind: 'port', protocol: 'SCTP', port: 9000, endPort: undefined },
);

function ruleArb(dir: 'ingress' | 'egress'): fc.Arbitrary<ClusterPolicyRule> {
  return fc
    .record({
      action: fc.constantFrom<ClusterPolicyAction>('Accept', 'Deny', 'Pass'),
      peers: fc.array(dir === 'ingress' ? podsPeer : egressPeer, { minLength: 1, maxLength: 2 }),
      ports: fc.option(fc.array(numbered, { minLength: 1, maxLength: 2 }), { nil: undefined }),
      named: fc.boolean(),
      invalid: fc.constantFrom(false, false, false, false, false, false, false, true),
    })
    .map((r) => {
      // Named ports only beside pod peers (the API's CEL rule).
      const named = r.named && r.peers.every((p) => p.kind === 'pods');
      const protocols: ClusterPolicyProtocol[] | undefined =
        r.ports === undefined && !named
          ? undefined
          : [...(r.ports ?? []), ...(named ? [{ kind: 'named' as const, name: 'http' }] : [])];
      return r.invalid
        ? { name: '', action: r.action, peers: [], protocols: [], invalid: true }
        : { name: '', action: r.action, peers: r.peers, protocols, invalid: false };
    });
}

interface GenCnp {
  readonly tier: 'Admin' | 'Baseline';
  readonly priority: number;
  readonly subject: NamespacedPods;
  readonly ingress: readonly ClusterPolicyRule[];
  readonly egress: readonly ClusterPolicyRule[];
}

const cnpArb: fc.Arbitrary<GenCnp> = fc.record({
  tier: fc.constantFrom('Admin' as const, 'Baseline' as const),
  priority: fc.constantFrom(0, 10, 10, 20, 500),
  subject: subjectArb,
  ingress: fc.array(ruleArb('ingress'), { maxLength: 3 }),
  egress: fc.array(ruleArb('egress'), { maxLength: 3 }),
});

function named(i: number, g: GenCnp): ClusterNetworkPolicy {
  const names = (rs: readonly ClusterPolicyRule[], d: string) => rs.map((r, k) => ({ ...r, name: `${d}${k}` }));
  return {
    name: `cnp-${i}`,
    sourceKind: 'ClusterNetworkPolicy',
    tier: g.tier,
    priority: g.priority,
    subject: g.subject,
    ingress: names(g.ingress, 'in'),
    egress: names(g.egress, 'eg'),
    errors: [],
  };
}

/** One ClusterNetworkPolicy change, as an admin makes them. */
type CnpChurn =
  | { readonly op: 'create'; readonly cnp: GenCnp }
  | { readonly op: 'delete'; readonly at: number }
  | { readonly op: 'priority'; readonly at: number; readonly priority: number }
  | { readonly op: 'tier'; readonly at: number }
  | { readonly op: 'action'; readonly at: number; readonly rule: number; readonly action: ClusterPolicyAction }
  | { readonly op: 'swap'; readonly at: number; readonly dir: 'ingress' | 'egress' }
  | { readonly op: 'add-rule'; readonly at: number; readonly rule: ClusterPolicyRule; readonly dir: 'ingress' | 'egress' }
  | { readonly op: 'remove-rule'; readonly at: number; readonly rule: number; readonly dir: 'ingress' | 'egress' }
  | { readonly op: 'subject'; readonly at: number; readonly subject: NamespacedPods };

const dirArb = fc.constantFrom('ingress' as const, 'egress' as const);
const cnpChurn: fc.Arbitrary<CnpChurn> = fc.oneof(
  cnpArb.map((cnp) => ({ op: 'create' as const, cnp })),
  fc.nat().map((at) => ({ op: 'delete' as const, at })),
  fc.tuple(fc.nat(), fc.constantFrom(0, 10, 15, 20, 1000)).map(([at, priority]) => ({ op: 'priority' as const, at, priority })),
  fc.nat().map((at) => ({ op: 'tier' as const, at })),
  fc
    .tuple(fc.nat(), fc.nat(), fc.constantFrom<ClusterPolicyAction>('Accept', 'Deny', 'Pass'))
    .map(([at, r, action]) => ({ op: 'action' as const, at, rule: r, action })),
  fc.tuple(fc.nat(), dirArb).map(([at, dir]) => ({ op: 'swap' as const, at, dir })),
  dirArb.chain((dir) => fc.tuple(fc.nat(), ruleArb(dir)).map(([at, r]) => ({ op: 'add-rule' as const, at, rule: r, dir }))),
  fc.tuple(fc.nat(), fc.nat(), dirArb).map(([at, r, dir]) => ({ op: 'remove-rule' as const, at, rule: r, dir })),
  fc.tuple(fc.nat(), subjectArb).map(([at, subject]) => ({ op: 'subject' as const, at, subject })),
);

/** Applies the churn; policies keep their names (and so their chain names) across edits. */
function churnCnps(
  start: readonly GenCnp[],
  ops: readonly CnpChurn[],
): { before: ClusterNetworkPolicy[]; after: ClusterNetworkPolicy[] } {
  const before = start.map((g, i) => named(i, g));
  let after = [...before];
  let next = before.length;
  const renamed = (p: ClusterNetworkPolicy): ClusterNetworkPolicy => ({
    ...p,
    ingress: p.ingress.map((r, k) => ({ ...r, name: `in${k}` })),
    egress: p.egress.map((r, k) => ({ ...r, name: `eg${k}` })),
  });
  for (const op of ops) {
    if (op.op === 'create') {
      after.push(named(next++, op.cnp));
      continue;
    }
    if (after.length === 0) continue;
    const at = op.at % after.length;
    const p = after[at]!;
    let q: ClusterNetworkPolicy | undefined = p;
    switch (op.op) {
      case 'delete':
        q = undefined;
        break;
      case 'priority':
        q = { ...p, priority: op.priority };
        break;
      case 'tier':
        q = { ...p, tier: p.tier === 'Admin' ? 'Baseline' : 'Admin' };
        break;
      case 'action': {
        const all = [...p.ingress, ...p.egress];
        if (all.length === 0) break;
        const k = op.rule % all.length;
        const change = (rs: readonly ClusterPolicyRule[], off: number) =>
          rs.map((r, i) => (i + off === k ? { ...r, action: op.action } : r));
        q = { ...p, ingress: change(p.ingress, 0), egress: change(p.egress, p.ingress.length) };
        break;
      }
      case 'swap': {
        const rs = [...p[op.dir]];
        if (rs.length < 2) break;
        [rs[0], rs[rs.length - 1]] = [rs[rs.length - 1]!, rs[0]!];
        q = renamed({ ...p, [op.dir]: rs });
        break;
      }
      case 'add-rule':
        q = renamed({ ...p, [op.dir]: [...p[op.dir], op.rule] });
        break;
      case 'remove-rule': {
        const rs = [...p[op.dir]];
        if (rs.length === 0) break;
        rs.splice(op.rule % rs.length, 1);
        q = renamed({ ...p, [op.dir]: rs });
        break;
      }
      case 'subject':
        q = { ...p, subject: op.subject };
        break;
    }
    after = q === undefined ? after.filter((_, i) => i !== at) : after.map((x, i) => (i === at ? q : x));
  }
  return { before, after };
}

// ---- pods underneath ----

interface PodSpec {
  readonly ns: string;
  readonly app: string;
  readonly node: 'node-1' | 'node-2';
  readonly dual: boolean;
}

const podSpec: fc.Arbitrary<PodSpec> = fc.record({
  ns: fc.constantFrom(...NSS),
  app: fc.constantFrom(...APPS),
  node: fc.constantFrom('node-1' as const, 'node-2' as const),
  dual: fc.boolean(),
});

type PodChurn =
  | { readonly op: 'add'; readonly spec: PodSpec }
  | { readonly op: 'delete'; readonly at: number }
  | { readonly op: 'relabel'; readonly at: number; readonly app: string };

const podChurn: fc.Arbitrary<PodChurn> = fc.oneof(
  podSpec.map((spec) => ({ op: 'add' as const, spec })),
  fc.nat().map((at) => ({ op: 'delete' as const, at })),
  fc.tuple(fc.nat(), fc.constantFrom(...APPS)).map(([at, app]) => ({ op: 'relabel' as const, at, app })),
);

class Pods {
  list: Pod[] = [];
  #next = 0;

  add(spec: PodSpec): void {
    const i = this.#next++;
    const net = spec.node === 'node-1' ? 1 : 2;
    const host = 2 + i;
    const ips = spec.dual ? [`10.0.${net}.${host}`, `fd00:${net}::${host.toString(16)}`] : [`10.0.${net}.${host}`];
    this.list.push(
      pod(spec.ns, `pod-${i}`, { labels: { app: spec.app }, ips, node: spec.node, ports: [cport('http', 8000 + (i % 3))] }),
    );
  }

  apply(c: PodChurn): void {
    if (c.op === 'add') return this.add(c.spec);
    if (this.list.length === 0) return;
    const at = c.at % this.list.length;
    if (c.op === 'delete') this.list.splice(at, 1);
    else this.list[at] = { ...this.list[at]!, labels: { app: c.app } };
  }
}

/** A NetworkPolicy beside the tiers, so that the Admin -> NetworkPolicy -> Baseline order has all three. */
const WEB_POLICY: NetworkPolicy = policy('a', 'web', {
  podSelector: sel({ app: 'web' }),
  ingress: [rule([podPeer(sel({ app: 'api' }))], [port('TCP', 80)])],
});

function clusterState(pods: readonly Pod[], cnps: readonly ClusterNetworkPolicy[], withPolicy: boolean): ClusterState {
  const s = state({ namespaces: NSS.map((n) => ns(n)), pods, policies: withPolicy ? [WEB_POLICY] : [], nodes: [NODE1, NODE2] });
  return { ...s, clusterPolicies: [...cnps].sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0)) };
}

test('kernel, property: prev + update == next under ClusterNetworkPolicy churn with pod churn underneath; incremental while tiered policies exist before and after', async (t) => {
  if (!(await haveNft(t))) return;
  const n = { tieredBoth: 0, transitions: 0, structural: 0, elementsOnly: 0, decisions: 0, none: 0, perClass: 0, shared: 0 };
  await withNetns(2, async (nss) => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(podSpec, { minLength: 2, maxLength: 10 }),
        // Sometimes none before (the first one is created), often a few.
        fc.array(cnpArb, { minLength: 0, maxLength: 4 }),
        fc.array(cnpChurn, { minLength: 1, maxLength: 5 }),
        fc.array(podChurn, { maxLength: 4 }),
        fc.boolean(),
        fc.constantFrom<TierLayout>('auto', 'shared', 'per-class'),
        async (specs, cnps, ops, podOps, withPolicy, tierLayout) => {
          const opts = { ...DROP, tierLayout };
          const pods = new Pods();
          // A local pod per namespace and app first: most subjects select something on node-1.
          for (const n2 of NSS) for (const app of APPS) pods.add({ ns: n2, app, node: 'node-1', dual: true });
          for (const s of specs) pods.add(s);
          const { before, after } = churnCnps(cnps, ops);
          const prev = compileNode(clusterState(pods.list, before, withPolicy), 'node-1', opts);
          for (const op of podOps) pods.apply(op);
          const next = compileNode(clusterState(pods.list, after, withPolicy), 'node-1', opts);
          const u = await checkUpdate(prev, next, nss, 'cnp churn');
          const had = before.length > 0;
          const has = after.length > 0;
          if (had && has) {
            // The tier-peers maps exist before and after: never the full script.
            assert.equal(u.kind, 'incremental', u.kind === 'full' ? u.reason : '');
            n.tieredBoth++;
          } else if (had !== has) {
            // The first tiered policy or the last one deleted: the tier maps and their lookups come or go.
            assert.equal(u.kind, 'full', 'the tier-peers maps are created or removed with the first/last tiered policy');
            n.transitions++;
            return;
          } else {
            assert.equal(u.kind, 'incremental', u.kind === 'full' ? u.reason : '');
            n.none++;
          }
          if (u.kind !== 'incremental') return;
          assert.equal(elementCount(next), elementCount(prev) + u.added - u.removed, u.text.slice(0, 2000));
          assert.equal(next.chains.length, prev.chains.length + u.chainsAdded - u.chainsDeleted);
          if (u.chainsAdded + u.chainsChanged + u.chainsDeleted > 0) n.structural++;
          else if (!isEmptyUpdate(u)) n.elementsOnly++;
          if (/^(add|delete) (element|map) inet nft-netpol tdec/m.test(u.text)) n.decisions++;
          // Which layout the tiers took (both can meet in one ruleset under 'auto').
          if (next.decisions.some((m) => m.key === 'peer')) n.perClass++;
          if (next.maps.some((m) => m.kind === 'tier-peers' && m.elements.length > 0)) n.shared++;
        },
      ),
      { numRuns: 120, seed: 20261127 },
    );
  });
  const summary = Object.entries(n)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  t.diagnostic(summary);
  // The property must exercise what it claims: churn among existing tiered policies (chains
  // and decision maps changing), and the first/last tiered policy (the full applies).
  assert.ok(n.tieredBoth >= 60, summary);
  assert.ok(n.structural >= 30, summary);
  assert.ok(n.decisions >= 30, summary);
  assert.ok(n.transitions >= 5, summary);
  assert.ok(n.perClass >= 20 && n.shared >= 20, summary);
});
