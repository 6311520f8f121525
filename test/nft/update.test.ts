// Incremental updates (nft/update.ts): which changes are incremental, what
// the script holds, and, in scratch network namespaces, that applying prev in
// full and then the update leaves exactly what applying next in full leaves
// (pod churn, policy churn, both); a failing update changes nothing.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { compileNode } from '../../src/compile/compile.ts';
import type { CompiledRuleset } from '../../src/ruleset/ir.ts';
import type { RenderOptions } from '../../src/ruleset/options.ts';
import { listTable, runNft } from '../../src/nft/exec.ts';
import { oneLine } from '../../src/nft/one-line.ts';
import { NftSession, runScript, SESSION_MAX_CHARS } from '../../src/nft/session.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { isEmptyUpdate, renderUpdate } from '../../src/nft/update.ts';
import type { ClusterState, NetworkPolicy, Node, Pod } from '../../src/model/types.ts';
import { cport, ipBlock, ns, pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';
import { canonicalListing, withNetns } from './netns-support.ts';
import { sortedObjects } from './listing-objects.ts';
import { haveNft } from './nft-support.ts';
import { buildState } from '../../src/model/normalize.ts';
import { applyCnpChanges, cnpConformanceCases } from '../cases/cnp-conformance.ts';
import { cnpModel } from '../cases/cnp-conformance-model.ts';
import { withClusterPolicies } from '../../scripts/bench-render.ts';
import { generateCluster } from '../../scripts/gen-cluster.ts';

const NODE1: Node = { name: 'node-1', addresses: ['192.168.100.1'], podCIDRs: ['10.0.1.0/24', 'fd00:1::/64'] };
const NODE2: Node = { name: 'node-2', addresses: ['192.168.100.2'], podCIDRs: ['10.0.2.0/24', 'fd00:2::/64'] };

function elementCount(c: CompiledRuleset): number {
  return (
    c.sets.reduce((n, s) => n + s.elements.length, 0) +
    c.maps.reduce((n, m) => n + m.elements.length, 0) +
    c.decisions.reduce((n, m) => n + m.elements.length, 0)
  );
}

// ---- pure: what an update holds ----

const web = pod('a', 'web', { labels: { app: 'web' }, ips: ['10.0.1.2', 'fd00:1::2'], ports: [cport('http', 8080)] });
const client = (i: number, app = 'client', node = 'node-2'): Pod =>
  pod('a', `client-${i}`, { labels: { app }, ips: [`10.0.2.${i}`], node });
const webPolicy = policy('a', 'web', {
  podSelector: sel({ app: 'web' }),
  ingress: [rule([podPeer(sel({ app: 'client' }))], [port('TCP', 'http')])],
  egress: [rule([podPeer(sel({ app: 'client' })), ipBlock('192.168.0.0/16')], [port('TCP', 443)])],
});
const base = (pods: Pod[], o?: Partial<RenderOptions>): CompiledRuleset =>
  compileNode(state({ pods: [web, ...pods], policies: [webPolicy], nodes: [NODE1, NODE2] }), 'node-1', {
    unknownLocalEndpoints: 'drop',
    ...o,
  });
const DROP = { unknownLocalEndpoints: 'drop' } as const;

test('no previous ruleset, another table, or changed base chains: the full script', () => {
  const prev = base([client(5)]);
  assert.deepEqual(renderUpdate(undefined, prev), { kind: 'full', text: renderRuleset(prev), reason: 'no previous ruleset' });
  const renamed = base([client(5)], { table: 'other' });
  assert.equal(renderUpdate(prev, renamed).kind, 'full');
  // Dropping unknown local endpoints or not is in the base chains.
  const u = renderUpdate(prev, base([client(5)], { unknownLocalEndpoints: 'allow' }));
  assert.equal(u.kind, 'full');
  assert.ok(u.kind === 'full' && u.reason === 'base chains or verdict maps changed', u.kind === 'full' ? u.reason : '');
  assert.equal(u.text, renderRuleset(base([client(5)], { unknownLocalEndpoints: 'allow' })));
});

test('a chain declared differently under the same name (its comment, its hook or priority): the full script; rules made anew with the same text: nothing', () => {
  const prev = base([client(5)]);
  const i = prev.chains.findIndex((c) => c.base === undefined && c.name.startsWith('KUBE-NWPLCY-'));
  assert.ok(i >= 0);
  const withChain = (f: (c: CompiledRuleset['chains'][number]) => CompiledRuleset['chains'][number]): CompiledRuleset => ({
    ...prev,
    chains: prev.chains.map((c, j) => (j === i ? f(c) : c)),
  });
  const commented = renderUpdate(
    prev,
    withChain((c) => ({ ...c, comment: `${c.comment ?? ''} (edited)` })),
  );
  assert.ok(commented.kind === 'full' && commented.reason === `chain ${prev.chains[i]!.name} declared differently`);
  const hooked = renderUpdate(
    prev,
    withChain((c) => ({ ...c, base: { hook: 'input', priority: 3 } })),
  );
  assert.ok(hooked.kind === 'full' && hooked.reason === `chain ${prev.chains[i]!.name} declared differently`);
  const b = prev.chains.findIndex((c) => c.base !== undefined);
  const prevBase = prev.chains[b]!.base!;
  const moved: CompiledRuleset = { ...prev, chains: prev.chains.map((c, j) => (j === i ? { ...c, base: prevBase } : c)) };
  const reprioritized: CompiledRuleset = {
    ...prev,
    chains: prev.chains.map((c, j) => (j === i ? { ...c, base: { ...prevBase, priority: prevBase.priority + 1 } } : c)),
  };
  // The same declaration in a new object: not a difference; another priority: one.
  assert.equal(
    renderUpdate(moved, { ...moved, chains: moved.chains.map((c, j) => (j === i ? { ...c, base: { ...prevBase } } : c)) }).kind,
    'incremental',
  );
  assert.ok(renderUpdate(moved, reprioritized).kind === 'full');
  const copied = renderUpdate(
    prev,
    withChain((c) => ({ ...c, rules: c.rules.map((r) => ({ ...r })) })),
  );
  assert.ok(copied.kind === 'incremental' && isEmptyUpdate(copied), 'rules with the same text: no flush');
});

test('same ruleset: an incremental update with nothing in it', () => {
  const a = base([client(5)]);
  const u = renderUpdate(a, base([client(5)]));
  assert.equal(u.kind, 'incremental');
  assert.ok(u.kind === 'incremental' && isEmptyUpdate(u));
  assert.equal(
    u.text,
    '# nft-netpol-agent incremental update for node node-1: 0 elements added, 0 removed; chains 0 added, 0 changed, 0 deleted; sets 0 added, 0 deleted\n',
  );
});

test('peer churn: element commands for exactly the difference, deletes first, no chain touched', () => {
  const prev = base([client(5), client(6), client(9)]);
  const next = base([client(5), client(7), client(9), client(20, 'other')]);
  const u = renderUpdate(prev, next);
  assert.equal(u.kind, 'incremental');
  if (u.kind !== 'incremental') return;
  const lines = u.text.trimEnd().split('\n');
  assert.match(
    lines[0] ?? '',
    /^# nft-netpol-agent incremental update for node node-1: \d+ elements added, \d+ removed; chains 0 added, 0 changed, 0 deleted; sets 0 added, 0 deleted$/,
  );
  const cmds = lines.slice(1);
  assert.ok(
    cmds.every((l) => /^(add|delete) element inet nft-netpol (ingress|egress)-(peers|ranges)-v[46] \{ .* \}$/.test(l)),
    cmds.join('\n'),
  );
  const firstAdd = cmds.findIndex((l) => l.startsWith('add'));
  assert.ok(firstAdd > 0 && cmds.slice(firstAdd).every((l) => l.startsWith('add')), 'all deletes come first');
  // Ingress peers are pods only (the hash map of pod addresses): 10.0.2.6 out, 10.0.2.7 in. Egress
  // peers include an ipBlock (the interval map of ranges): 10.0.2.5-10.0.2.6 becomes 10.0.2.5 and 10.0.2.7.
  assert.deepEqual(
    cmds.map((l) => l.replace(/-[0-9a-f]{12}-/g, '-H-')),
    [
      'delete element inet nft-netpol ingress-peers-v4 { 10.0.2.6 }',
      'delete element inet nft-netpol egress-ranges-v4 { 10.0.2.5-10.0.2.6 }',
      'add element inet nft-netpol ingress-peers-v4 { 10.0.2.7 : jump KUBE-PEERS-H-IN }',
      'add element inet nft-netpol egress-ranges-v4 { 10.0.2.5 : jump KUBE-PEERS-H-EG, 10.0.2.7 : jump KUBE-PEERS-H-EG }',
    ],
  );
  assert.equal(u.removed, 2);
  assert.equal(u.added, 3);
  assert.equal(elementCount(next), elementCount(prev) + u.added - u.removed);
});

test('fail-closed maps: a known pod that is not isolated is an element update', () => {
  const prev = base([client(5)]);
  const next = base([client(5), pod('a', 'batch', { labels: { app: 'batch' }, ips: ['10.0.1.9', 'fd00:1::9'] })]);
  const u = renderUpdate(prev, next);
  assert.equal(u.kind, 'incremental');
  assert.ok(u.kind === 'incremental' && u.text.includes('add element inet nft-netpol ingress-v4 { 10.0.1.9 : accept }'), u.text);
  assert.ok(u.text.includes('add element inet nft-netpol egress-v6 { fd00:1::9 : accept }'), u.text);
  assert.ok(u.kind === 'incremental' && u.added === 4 && u.removed === 0);
  // And back: deleted from the maps by key.
  const back = renderUpdate(next, prev);
  assert.ok(
    back.kind === 'incremental' && back.text.includes('delete element inet nft-netpol ingress-v4 { 10.0.1.9 }'),
    back.text,
  );
});

test('a map key whose verdict changes is deleted and added in one transaction', () => {
  const pods = (ipA: string, ipB: string): Pod[] => [
    pod('a', 'x', { labels: { app: 'web' }, ips: [ipA] }),
    pod('a', 'y', { labels: { app: 'web' }, ips: [ipB] }),
  ];
  const s = (ipA: string, ipB: string): ClusterState =>
    state({ pods: pods(ipA, ipB), policies: [policy('a', 'deny', { podSelector: sel({ app: 'web' }) })], nodes: [NODE1] });
  // Two isolated pods swap addresses (the model allows it; chains stay, map values move).
  const u = renderUpdate(
    compileNode(s('10.0.1.2', '10.0.1.3'), 'node-1', DROP),
    compileNode(s('10.0.1.3', '10.0.1.2'), 'node-1', DROP),
  );
  assert.equal(u.kind, 'incremental');
  assert.ok(u.kind === 'incremental' && u.added === 2 && u.removed === 2, u.text);
  assert.match(u.text, /^delete element inet nft-netpol ingress-v4 \{ 10\.0\.1\.2, 10\.0\.1\.3 \}$/m);
  assert.match(
    u.text,
    /^add element inet nft-netpol ingress-v4 \{ 10\.0\.1\.2 : goto KUBE-POD-FW-[0-9a-f]{12}-IN, 10\.0\.1\.3 : goto KUBE-POD-FW-[0-9a-f]{12}-IN \}$/m,
  );
});

/** The commands of an update script (header dropped), with hashes blanked. */
function commands(text: string): string[] {
  return text
    .trimEnd()
    .split('\n')
    .slice(1)
    .map((l) => l.replace(/[0-9a-f]{12}/g, 'H'));
}

test('a new isolated local pod: its chains are added before the map entries that reach them', () => {
  const prev = base([client(5)]);
  const next = base([client(5), pod('a', 'web-2', { labels: { app: 'web' }, ips: ['10.0.1.3'] })]);
  const u = renderUpdate(prev, next);
  assert.equal(u.kind, 'incremental');
  if (u.kind !== 'incremental') return;
  assert.deepEqual([u.chainsAdded, u.chainsChanged, u.chainsDeleted, u.setsAdded, u.setsDeleted], [2, 0, 0, 0, 0]);
  const cmds = commands(u.text);
  const addChain = cmds.findIndex((l) => l.startsWith('add chain inet nft-netpol KUBE-POD-FW-H-IN'));
  const addRule = cmds.findIndex((l) => l.startsWith('add rule inet nft-netpol KUBE-POD-FW-H-IN counter drop'));
  // What its egress policy allows it: an element of the identity's allow set, added after the chains.
  const addAllow = cmds.findIndex(
    (l) =>
      l === 'add element inet nft-netpol allow4-H { 10.0.1.3 . tcp . 443 comment "a/web egress[0]" : goto KUBE-NWPLCY-H-EG-0 }',
  );
  assert.ok(addAllow > addChain, cmds.join('\n'));
  const addMap = cmds.findIndex((l) =>
    /^add element inet nft-netpol ingress-v4 \{ 10\.0\.1\.3 : goto KUBE-POD-FW-H-IN \}$/.test(l),
  );
  assert.ok(addChain >= 0 && addRule > addChain && addMap > addChain, cmds.join('\n'));
  assert.match(u.text, /^add chain inet nft-netpol KUBE-POD-FW-[0-9a-f]{12}-IN \{ comment "ingress of pod a\/web-2"; \}$/m);
  // The pod's address also joins the egress policy's peer set (web is a client of nothing; the
  // map entry for its egress chain, and a drop rule per chain).
  assert.ok(
    cmds.some((l) => /^add rule inet nft-netpol KUBE-POD-FW-H-(IN|EG) counter drop comment /.test(l)),
    cmds.join('\n'),
  );
  assert.ok(!cmds.some((l) => l.startsWith('flush') || l.startsWith('delete chain') || l.startsWith('add set')), cmds.join('\n'));
});

test('a deleted isolated local pod: map entries deleted, then its chains flushed and deleted', () => {
  const prev = base([client(5), pod('a', 'web-2', { labels: { app: 'web' }, ips: ['10.0.1.3'] })]);
  const next = base([client(5)]);
  const u = renderUpdate(prev, next);
  assert.ok(u.kind === 'incremental' && u.chainsDeleted === 2 && u.chainsAdded === 0 && u.chainsChanged === 0, u.text);
  const cmds = commands(u.text);
  const delMap = cmds.findIndex((l) => l === 'delete element inet nft-netpol ingress-v4 { 10.0.1.3 }');
  const flush = cmds.findIndex((l) => l === 'flush chain inet nft-netpol KUBE-POD-FW-H-IN');
  const del = cmds.findIndex((l) => l === 'delete chain inet nft-netpol KUBE-POD-FW-H-IN');
  assert.ok(delMap >= 0 && flush > delMap && del > flush, cmds.join('\n'));
});

test('a policy changes: the allow elements of its peer identities change, nothing else; the deny action refills pod chains', () => {
  const mk = (p: number): CompiledRuleset =>
    compileNode(
      state({
        pods: [web, client(5)],
        policies: [
          policy('a', 'web', {
            podSelector: sel({ app: 'web' }),
            ingress: [rule([podPeer(sel({ app: 'client' }))], [port('TCP', p)])],
          }),
        ],
        nodes: [NODE1, NODE2],
      }),
      'node-1',
      DROP,
    );
  const u = renderUpdate(mk(80), mk(81));
  assert.equal(u.kind, 'incremental');
  if (u.kind !== 'incremental') return;
  assert.deepEqual([u.chainsAdded, u.chainsChanged, u.chainsDeleted, u.setsAdded, u.setsDeleted], [0, 0, 0, 0, 0]);
  // The element names the policy rule it comes from, and goes to its counting chain.
  assert.deepEqual(commands(u.text), [
    'delete element inet nft-netpol allow4-H { 10.0.1.2 . tcp . 80 }',
    'add element inet nft-netpol allow4-H { 10.0.1.2 . tcp . 81 comment "a/web ingress[0]" : goto KUBE-NWPLCY-H-IN-0 }',
  ]);
  // The deny action is in every pod chain: each is flushed and refilled, nothing else.
  const r = renderUpdate(
    mk(80),
    compileNode(
      state({
        pods: [web, client(5)],
        policies: [
          policy('a', 'web', {
            podSelector: sel({ app: 'web' }),
            ingress: [rule([podPeer(sel({ app: 'client' }))], [port('TCP', 80)])],
          }),
        ],
        nodes: [NODE1, NODE2],
      }),
      'node-1',
      { ...DROP, denyAction: 'reject' },
    ),
  );
  assert.ok(
    r.kind === 'incremental' && r.chainsChanged === 1 && r.added + r.removed === 0 && r.setsAdded + r.setsDeleted === 0,
    r.text,
  );
});

// ---- against the kernel ----

async function applyOk(script: string, netns: string, label: string): Promise<void> {
  const r = await runNft(script, { netns });
  assert.ok(r.ok, `${label}: ${r.ok ? '' : r.error}\n${script.slice(0, 3000)}`);
}

// Updates go as the agent sends them: small ones through a long-lived nft -i
// (one per namespace), the rest through nft -f.
const sessions = new Map<string, NftSession>();
const viaSession = { count: 0 };
after(() => {
  for (const s of sessions.values()) s.close();
});

function sessionOf(netns: string): NftSession {
  let s = sessions.get(netns);
  if (s === undefined) sessions.set(netns, (s = new NftSession({ netns })));
  return s;
}

function applyUpdate(script: string, netns: string): ReturnType<typeof runNft> {
  if (script.length <= SESSION_MAX_CHARS && oneLine(script) !== undefined) viaSession.count++;
  return runScript(sessionOf(netns), script, { netns });
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
  const r = await applyUpdate(u.text, a);
  assert.ok(r.ok, `${label} ${u.kind} update: ${r.ok ? '' : r.error}\n${u.text.slice(0, 3000)}`);
  await applyOk(renderRuleset(next), b, `${label} next`);
  assert.equal(
    await listing(next.table, a),
    await listing(next.table, b),
    `${label}: ${u.kind} update\n${u.text.slice(0, 3000)}`,
  );
  return u;
}

test('kernel: the hand-made cases above give the same table as a full apply of next', async (t) => {
  if (!(await haveNft(t))) return;
  await withNetns(2, async (nss) => {
    const cases: [string, CompiledRuleset, CompiledRuleset, 'incremental' | 'full'][] = [
      [
        'interval split',
        base([client(5), client(6), client(9)]),
        base([client(5), client(7), client(9), client(20, 'other')]),
        'incremental',
      ],
      ['interval merge', base([client(5), client(7)]), base([client(5), client(6), client(7)]), 'incremental'],
      ['last peer leaves', base([client(5)]), base([]), 'incremental'],
      ['non-isolated local pod', base([]), base([pod('a', 'batch', { ips: ['10.0.1.9', 'fd00:1::9'] })]), 'incremental'],
      ['new isolated pod', base([]), base([pod('a', 'web-2', { labels: { app: 'web' }, ips: ['10.0.1.3'] })]), 'incremental'],
      ['isolated pod deleted', base([pod('a', 'web-2', { labels: { app: 'web' }, ips: ['10.0.1.3'] })]), base([]), 'incremental'],
      ['deny action', base([client(5)]), base([client(5)], { denyAction: 'reject' }), 'incremental'],
      ['unknown endpoints allowed', base([client(5)]), base([client(5)], { unknownLocalEndpoints: 'allow' }), 'full'],
    ];
    for (const [label, prev, next, kind] of cases) assert.equal((await checkUpdate(prev, next, nss, label)).kind, kind, label);
  });
});

// Random small clusters and random churn on them.
const APPS = ['web', 'db', 'api'];
const NSS = ['a', 'b'];

interface PodSpec {
  readonly ns: string;
  readonly app: string;
  readonly node: 'node-1' | 'node-2';
  readonly dual: boolean;
}

const podSpec: fc.Arbitrary<PodSpec> = fc.record({
  ns: fc.constantFrom(...NSS),
  app: fc.constantFrom(...APPS),
  node: fc.constantFrom('node-1' as const, 'node-2' as const, 'node-2' as const),
  dual: fc.boolean(),
});

type Churn =
  | { readonly op: 'add'; readonly spec: PodSpec }
  | { readonly op: 'delete'; readonly at: number }
  | { readonly op: 'relabel'; readonly at: number; readonly app: string }
  | { readonly op: 'finish'; readonly at: number }
  /** Delete a pod and give its IPs to a new pod (another name, maybe other labels or namespace). */
  | { readonly op: 'reuse'; readonly at: number; readonly spec: PodSpec };

const churn: fc.Arbitrary<Churn> = fc.oneof(
  podSpec.map((spec) => ({ op: 'add' as const, spec })),
  fc.nat().map((at) => ({ op: 'delete' as const, at })),
  fc.tuple(fc.nat(), fc.constantFrom(...APPS)).map(([at, app]) => ({ op: 'relabel' as const, at, app })),
  fc.nat().map((at) => ({ op: 'finish' as const, at })),
  fc.tuple(fc.nat(), podSpec).map(([at, spec]) => ({ op: 'reuse' as const, at, spec })),
);

const policyArb = fc
  .record({
    ns: fc.constantFrom(...NSS),
    target: fc.constantFrom(...APPS, 'any'),
    peerApp: fc.constantFrom(...APPS),
    wide: fc.boolean(),
    block: fc.boolean(),
    named: fc.boolean(),
    egress: fc.boolean(),
    numeric: fc.constantFrom(port('TCP', 80), port('TCP', 443), port('UDP', 8000, 8100), port('SCTP')),
  })
  .map((r) => (i: number) => {
    const peers = [
      podPeer(sel({ app: r.peerApp }), r.wide ? sel() : undefined),
      ...(r.block ? [ipBlock('10.0.2.0/25', ['10.0.2.16/28'])] : []),
    ];
    const ports = r.named ? [port('TCP', 'http'), r.numeric] : [r.numeric];
    return policy(r.ns, `pol-${i}`, {
      podSelector: r.target === 'any' ? sel() : sel({ app: r.target }),
      ingress: [rule(peers, ports)],
      ...(r.egress ? { egress: [rule(peers, ports)] } : {}),
    });
  });

/** Policy churn: a policy added, deleted, or replaced by another one of the same name. */
type PolicyChurn =
  | { readonly op: 'add'; readonly make: (i: number) => NetworkPolicy }
  | { readonly op: 'delete'; readonly at: number }
  | { readonly op: 'replace'; readonly at: number; readonly make: (i: number) => NetworkPolicy };

const policyChurn: fc.Arbitrary<PolicyChurn> = fc.oneof(
  policyArb.map((make) => ({ op: 'add' as const, make })),
  fc.nat().map((at) => ({ op: 'delete' as const, at })),
  fc.tuple(fc.nat(), policyArb).map(([at, make]) => ({ op: 'replace' as const, at, make })),
);

/** Policies named pol-<i>, i unique; a replacement keeps the name (and so the chain names). */
function churnPolicies(
  start: readonly ((i: number) => NetworkPolicy)[],
  ops: readonly PolicyChurn[],
): { before: NetworkPolicy[]; after: NetworkPolicy[] } {
  const before = start.map((f, i) => f(i));
  const after = [...before];
  let next = before.length;
  for (const op of ops) {
    if (op.op === 'add') after.push(op.make(next++));
    else if (after.length === 0) continue;
    else if (op.op === 'delete') after.splice(op.at % after.length, 1);
    else {
      const at = op.at % after.length;
      const i = Number((after[at]?.name ?? 'pol-0').slice(4));
      after[at] = op.make(i);
    }
  }
  return { before, after };
}

class Cluster {
  pods: Pod[] = [];
  #next = 0;
  #ipOf = new Map<string, number>();

  add(spec: PodSpec, reuse?: readonly string[]): void {
    const i = this.#next++;
    const host = 2 + i;
    const net = spec.node === 'node-1' ? 1 : 2;
    const ips =
      reuse !== undefined
        ? [...reuse]
        : spec.dual
          ? [`10.0.${net}.${host}`, `fd00:${net}::${host.toString(16)}`]
          : [`10.0.${net}.${host}`];
    // A reused IP keeps the subnet of its first owner: the new pod lands on that node.
    const node = reuse === undefined ? spec.node : (reuse[0] ?? '').startsWith('10.0.1.') ? 'node-1' : 'node-2';
    this.pods.push(pod(spec.ns, `pod-${i}`, { labels: { app: spec.app }, ips, node, ports: [cport('http', 8000 + (i % 3))] }));
    this.#ipOf.set(`${spec.ns}/pod-${i}`, i);
  }

  /** remoteOnly: the churn only touches pods of node-2 (and adds pods there). */
  apply(c: Churn, remoteOnly = false): void {
    if (c.op === 'add') return this.add(remoteOnly ? { ...c.spec, node: 'node-2' } : c.spec);
    const candidates = this.pods.map((p, i) => [p, i] as const).filter(([p]) => !remoteOnly || p.nodeName === 'node-2');
    if (candidates.length === 0) return;
    const [p, at] = candidates[c.at % candidates.length] as (typeof candidates)[number];
    if (c.op === 'delete') this.pods.splice(at, 1);
    else if (c.op === 'relabel') this.pods[at] = { ...p, labels: { app: c.app } };
    else if (c.op === 'finish') this.pods[at] = { ...p, phase: 'Succeeded' };
    else {
      this.pods.splice(at, 1);
      this.add(c.spec, p.ips);
    }
  }
}

test('kernel, property: prev + update == next, for random clusters, random pod churn and random policy churn', async (t) => {
  if (!(await haveNft(t))) return;
  let elementsOnly = 0;
  let structural = 0;
  let setsChanged = 0;
  const sessionBefore = viaSession.count;
  await withNetns(2, async (nss) => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(podSpec, { minLength: 3, maxLength: 12 }),
        fc.array(policyArb, { minLength: 1, maxLength: 4 }),
        fc.array(churn, { minLength: 0, maxLength: 6 }),
        fc.array(policyChurn, { minLength: 0, maxLength: 3 }),
        fc.boolean(),
        fc.boolean(),
        async (specs, pols, ops, polOps, cidrs, remoteOnly) => {
          const cl = new Cluster();
          // A local web pod per namespace first, so that most policies isolate something on node-1.
          for (const s of [...NSS.map((n): PodSpec => ({ ns: n, app: 'web', node: 'node-1', dual: true })), ...specs]) cl.add(s);
          const nodes = cidrs ? [NODE1, NODE2] : [{ name: 'node-1', addresses: [] }];
          const { before, after } = churnPolicies(pols, polOps);
          const mk = (policies: NetworkPolicy[]): CompiledRuleset =>
            compileNode(state({ namespaces: [ns('a'), ns('b')], pods: cl.pods, policies, nodes }), 'node-1', DROP);
          const prev = mk(before);
          for (const op of ops) cl.apply(op, remoteOnly);
          const next = mk(after);
          const u = await checkUpdate(prev, next, nss, 'random');
          // Pod and policy churn never touch base chains or maps: never the full script.
          assert.equal(u.kind, 'incremental', u.kind === 'full' ? u.reason : '');
          if (u.kind !== 'incremental') return;
          assert.equal(elementCount(next), elementCount(prev) + u.added - u.removed);
          const chains = (c: CompiledRuleset): number => c.chains.length;
          assert.equal(chains(next), chains(prev) + u.chainsAdded - u.chainsDeleted);
          const sets = (c: CompiledRuleset): number => c.sets.length + c.decisions.length;
          assert.equal(sets(next), sets(prev) + u.setsAdded - u.setsDeleted);
          if (u.chainsAdded + u.chainsChanged + u.chainsDeleted > 0) structural++;
          else if (!isEmptyUpdate(u)) elementsOnly++;
          if (u.setsAdded + u.setsDeleted > 0) setsChanged++;
        },
      ),
      { numRuns: 100, seed: 424242 },
    );
  });
  const summary = `element-only ${elementsOnly}, with chain changes ${structural}, with set changes ${setsChanged}, through nft -i ${viaSession.count - sessionBefore}`;
  t.diagnostic(summary);
  // The agent's path for small transactions, the long-lived nft -i, ran most of them.
  assert.ok(viaSession.count - sessionBefore >= 80, summary);
  // The property must exercise both kinds, not just empty updates.
  assert.ok(elementsOnly >= 5, summary);
  assert.ok(structural >= 25, summary);
  assert.ok(setsChanged >= 10, summary);
});

test("property: churn of other nodes' pods never touches pod chains: elements, and at most peer identities coming and going", () => {
  let nonEmpty = 0;
  fc.assert(
    fc.property(
      fc.array(podSpec, { minLength: 3, maxLength: 12 }),
      fc.array(policyArb, { minLength: 1, maxLength: 4 }),
      fc.array(churn, { minLength: 1, maxLength: 8 }),
      (specs, pols, ops) => {
        const cl = new Cluster();
        for (const s of [...NSS.map((n): PodSpec => ({ ns: n, app: 'web', node: 'node-1', dual: true })), ...specs]) cl.add(s);
        const policies = pols.map((f, i) => f(i));
        const mk = (): CompiledRuleset =>
          compileNode(state({ namespaces: [ns('a'), ns('b')], pods: cl.pods, policies, nodes: [NODE1, NODE2] }), 'node-1', DROP);
        const prev = mk();
        for (const op of ops) cl.apply(op, true);
        const next = mk();
        const u = renderUpdate(prev, next);
        // A remote pod moves between peer identities: map elements, and an identity's chain and
        // allow sets when it is the first or last address of it. Pod chains never change.
        assert.equal(u.kind, 'incremental', u.kind === 'full' ? u.reason : '');
        if (u.kind !== 'incremental') return;
        // The chain that sends held-out addresses to their identities (nft/recent-peers.ts) has one rule per identity.
        const recentChain = /^\S+ chain inet nft-netpol (ingress|egress)-recent-v[46]$/;
        assert.equal(
          u.chainsChanged,
          u.text.split('\n').filter((l) => /^flush chain /.test(l) && recentChain.test(l)).length,
          u.text,
        );
        for (const l of u.text.split('\n')) {
          if (/^(add|flush|delete) chain /.test(l) && !recentChain.test(l))
            assert.match(l, /^\S+ chain inet nft-netpol KUBE-PEERS-[0-9a-f]{12}-(IN|EG)\b/);
          if (/^(add|delete) set /.test(l))
            assert.match(
              l,
              /^\S+ set inet nft-netpol (allow(all|range)?[46]-[0-9a-f]{12}|(ingress|egress)-peers-v[46]-r-KUBE-PEERS-[0-9a-f]{12}-(IN|EG))\b/,
            );
          if (/^add rule /.test(l)) assert.match(l, /^add rule inet nft-netpol (KUBE-PEERS-|(ingress|egress)-recent-v[46] )/);
        }
        if (u.added + u.removed > 0) nonEmpty++;
      },
    ),
    { numRuns: 300, seed: 99 },
  );
  assert.ok(nonEmpty >= 100, `only ${nonEmpty} non-empty updates`);
});

test('kernel: an update that fails (kernel is not prev) changes nothing; the full script recovers', async (t) => {
  if (!(await haveNft(t))) return;
  await withNetns(2, async ([a, b]) => {
    if (a === undefined || b === undefined) return;
    const kernel = base([client(5)]);
    // The agent believes a client 10.0.2.30 exists (it never reached the kernel).
    const believed = base([client(5), client(30)]);
    const next = base([client(7), client(40), pod('a', 'batch', { ips: ['10.0.1.9'] })]);
    const u = renderUpdate(believed, next);
    assert.equal(u.kind, 'incremental');
    // Adds that would succeed on their own, and a delete of an element the kernel lacks.
    assert.match(u.text, /^add element inet nft-netpol ingress-v4 \{ 10\.0\.1\.9 : accept \}$/m);
    assert.match(u.text, /^delete element inet nft-netpol ingress-peers-v4 \{ 10\.0\.2\.5, 10\.0\.2\.30 \}$/m);
    await applyOk(renderRuleset(kernel), a, 'kernel state');
    const before = await listing(kernel.table, a);
    for (const apply of [(x: string) => runNft(x, { netns: a }), (x: string) => sessionOf(a).run(oneLine(x) ?? '')]) {
      const r = await apply(u.text);
      assert.equal(r.ok, false, 'the update must fail');
      assert.equal(await listing(kernel.table, a), before, 'a failed update leaves the table exactly as it was');
    }
    // Without any table at all it fails too, and creates nothing.
    const none = await runNft(u.text, { netns: b });
    assert.equal(none.ok, false);
    assert.equal((await sessionOf(b).run(oneLine(u.text) ?? '')).ok, false);
    assert.equal(await listTable(kernel.table, { netns: b }), undefined);
    // Recovery: the full script of next.
    await applyOk(renderRuleset(next), a, 'recovery');
    await applyOk(renderRuleset(next), b, 'reference');
    assert.equal(await listing(next.table, a), await listing(next.table, b));
  });
});

test('kernel: ClusterNetworkPolicy steps (tier decision maps diffed by value) give the same table as a full apply of next', async (t) => {
  if (!(await haveNft(t))) return;
  let decisionChanges = 0;
  await withNetns(2, async (nss) => {
    for (const kase of cnpConformanceCases()) {
      let objects = [...cnpModel(), ...kase.manifests];
      let prev: CompiledRuleset[] | undefined;
      for (const [i, step] of kase.steps.entries()) {
        objects = applyCnpChanges(objects, step.changes);
        const s = buildState(objects).state;
        const next = s.nodes.map((n) => compileNode(s, n.name, DROP));
        for (const [j, c] of next.entries()) {
          const p = prev?.[j];
          if (p === undefined) continue;
          const u = renderUpdate(p, c);
          // Only the steps that change a decision map need the kernel here.
          const names = [...p.decisions, ...c.decisions].map((m) => m.name);
          if (u.kind !== 'incremental' || !names.some((m) => u.text.includes(` ${m} `))) continue;
          decisionChanges++;
          assert.equal((await checkUpdate(p, c, nss, `${kase.id} step ${i} ${c.node}`)).kind, 'incremental');
        }
        prev = next;
      }
    }
    // Local pods coming and going under many ClusterNetworkPolicies: decision keys change inside existing maps.
    const cl = withClusterPolicies(
      generateCluster({ pods: 200, policies: 20, namespaces: 8, podsPerNode: 50, seed: 1 }).state,
      'narrow',
    );
    const churned = { ...cl, pods: cl.pods.filter((_, i) => i % 13 !== 2) };
    for (const node of ['node-00000', 'node-00003']) {
      const [a, b] = [compileNode(cl, node, DROP), compileNode(churned, node, DROP)];
      for (const [p, c] of [
        [a, b],
        [b, a],
      ] as const) {
        const kept = new Set(p.decisions.map((m) => m.name));
        assert.ok(c.decisions.some((m) => kept.has(m.name)));
        decisionChanges++;
        assert.equal((await checkUpdate(p, c, nss, `pod churn under CNPs ${node}`)).kind, 'incremental');
      }
    }
  });
  t.diagnostic(`${decisionChanges} steps changed a decision map`);
  assert.ok(decisionChanges >= 10, `only ${decisionChanges} steps changed a decision map`);
});

test('kernel: staging, editing and unstaging policies (NetworkPolicy and ClusterNetworkPolicy) are incremental and give the same table as a full apply', async (t) => {
  if (!(await haveNft(t))) return;
  const cl = withClusterPolicies(
    generateCluster({ pods: 200, policies: 30, namespaces: 8, podsPerNode: 50, seed: 3 }).state,
    'narrow',
  );
  const stage = (s: ClusterState, every: number, from = 0): ClusterState => ({
    ...s,
    policies: s.policies.map((p, i) => (i % every === from ? { ...p, staged: true as const } : p)),
    clusterPolicies: (s.clusterPolicies ?? []).map((p, i) => (i % every === from ? { ...p, staged: true as const } : p)),
  });
  const steps: [string, ClusterState][] = [
    ['nothing staged', cl],
    ['every third policy staged', stage(cl, 3)],
    ['also pod churn', { ...stage(cl, 3), pods: cl.pods.filter((_, i) => i % 11 !== 4) }],
    ['other policies staged', stage(cl, 3, 1)],
    ['all unstaged (enforced)', cl],
  ];
  let shadowSteps = 0;
  await withNetns(2, async (nss) => {
    for (const node of ['node-00000', 'node-00002']) {
      for (const opts of [
        DROP,
        { ...DROP, logDenied: { group: 7, ratePerSecond: 10, burst: 5 }, denyAction: 'reject' as const },
      ]) {
        let prev: CompiledRuleset | undefined;
        for (const [what, s] of steps) {
          const next = compileNode(s, node, opts);
          if (next.chains.some((c) => c.shadow === true)) shadowSteps++;
          if (prev !== undefined) {
            const u = await checkUpdate(prev, next, nss, `${node} ${what}`);
            assert.equal(u.kind, 'incremental', `${node} ${what}: ${u.kind === 'full' ? u.reason : ''}`);
          }
          prev = next;
        }
      }
    }
  });
  assert.ok(shadowSteps >= 6, `the staged steps built a shadow path (${shadowSteps})`);
});
