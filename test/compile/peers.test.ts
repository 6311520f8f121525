// Peers -> address interval sets: pod selectors (own namespace, namespace
// selectors, AND inside a peer, OR across peers), ipBlocks minus excepts in
// both families, merging, and families with no address.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClusterIndex } from '../../src/compile/cluster-index.ts';
import { compileRules } from '../../src/compile/compile.ts';
import { PeerResolver } from '../../src/compile/peers.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import type { ClusterState, Peer, Pod } from '../../src/model/types.ts';
import { ipBlock, ns, pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';
import { renderLog } from '../nft/nft-support.ts';
import { elementsByKind, mustPolicyChain, setOf, shapes } from './ir-query.ts';
import { elementTexts } from '../../src/nft/elements.ts';

const log = renderLog();

const target = pod('prod', 'db', { labels: { app: 'db' }, ips: ['10.0.0.2', 'fd00::2'] });

const cluster: Pod[] = [
  target,
  pod('prod', 'web', { labels: { app: 'web' }, ips: ['10.1.0.1', 'fd00:1::1'], node: 'node-2' }),
  pod('prod', 'web-2', { labels: { app: 'web' }, ips: ['10.1.0.2'], node: 'node-2' }),
  pod('prod', 'batch', { labels: { app: 'batch' }, ips: ['10.1.0.9'], node: 'node-2' }),
  pod('prod', 'web-done', { labels: { app: 'web' }, ips: ['10.1.0.3'], node: 'node-2', phase: 'Succeeded' }),
  pod('dev', 'web', { labels: { app: 'web' }, ips: ['10.2.0.1'], node: 'node-3' }),
  pod('dev', 'tools', { labels: { app: 'tools' }, ips: ['10.2.0.5'], node: 'node-3' }),
  pod('staging', 'web', { labels: { app: 'web' }, ips: ['10.3.0.1'], node: 'node-3' }),
  // No Namespace object: matches no namespaceSelector (labels unknown).
  pod('ghost', 'web', { labels: { app: 'web' }, ips: ['10.4.0.1'], node: 'node-3' }),
];

const namespaces = [ns('prod', { env: 'prod' }), ns('dev', { env: 'dev' }), ns('staging', { env: 'staging' })];

function compileFor(
  label: string,
  peers: Peer[] | undefined,
  dir: 'ingress' | 'egress' = 'ingress',
  extraPods: Pod[] = [],
  o: { v4Only?: boolean } = {},
) {
  const r = rule(peers, [port('TCP', 5432)]);
  const pol = policy('prod', 'db', {
    podSelector: sel({ app: 'db' }),
    types: { ingress: dir === 'ingress', egress: dir === 'egress' },
    ...(dir === 'ingress' ? { ingress: [r] } : { egress: [r] }),
  });
  const local = o.v4Only === true ? { ...target, ips: ['10.0.0.2'] } : target;
  const s: ClusterState = state({
    namespaces,
    pods: [local, ...cluster.slice(1), ...extraPods],
    policies: [pol],
    strictNamespaces: true,
  });
  const c = compileRules(s, 'node-1');
  log.add(label, renderRuleset(c));
  const ch = mustPolicyChain(c, 'prod', 'db', dir);
  return { c, ch, v4: elementsByKind(c, ch, 'addrSet', 4).flat(), v6: elementsByKind(c, ch, 'addrSet', 6).flat() };
}

test('pod peers: selector semantics', () => {
  const cases: { name: string; peers: Peer[]; v4: string[]; v6: string[] }[] = [
    {
      name: 'podSelector only: own namespace, active pods',
      peers: [podPeer(sel({ app: 'web' }))],
      v4: ['10.1.0.1', '10.1.0.2'],
      v6: ['fd00:1::1'],
    },
    {
      name: 'empty podSelector: every pod of own namespace',
      peers: [podPeer(sel())],
      v4: ['10.0.0.2', '10.1.0.1', '10.1.0.2', '10.1.0.9'],
      v6: ['fd00::2', 'fd00:1::1'],
    },
    {
      name: 'namespaceSelector only: all pods of those namespaces',
      peers: [podPeer(undefined, sel({ env: 'dev' }))],
      v4: ['10.2.0.1', '10.2.0.5'],
      v6: [],
    },
    {
      name: 'empty namespaceSelector: every known namespace',
      peers: [podPeer(sel({ app: 'web' }), sel())],
      v4: ['10.1.0.1', '10.1.0.2', '10.2.0.1', '10.3.0.1'],
      v6: ['fd00:1::1'],
    },
    {
      name: 'AND: namespaceSelector and podSelector in one peer',
      peers: [podPeer(sel({ app: 'web' }), sel({ env: 'dev' }))],
      v4: ['10.2.0.1'],
      v6: [],
    },
    {
      name: 'OR: the same selectors as two peers',
      peers: [podPeer(sel({ app: 'web' })), podPeer(undefined, sel({ env: 'dev' }))],
      v4: ['10.1.0.1', '10.1.0.2', '10.2.0.1', '10.2.0.5'],
      v6: ['fd00:1::1'],
    },
    {
      name: 'matchExpressions NotIn/Exists',
      peers: [
        podPeer(
          sel({}, [{ key: 'app', operator: 'NotIn', values: ['web', 'db'] }]),
          sel({}, [{ key: 'env', operator: 'Exists', values: [] }]),
        ),
      ],
      v4: ['10.1.0.9', '10.2.0.5'],
      v6: [],
    },
  ];
  for (const k of cases) {
    const r = compileFor(k.name, k.peers);
    assert.deepEqual(r.v4, k.v4, `${k.name} v4`);
    assert.deepEqual(r.v6, k.v6, `${k.name} v6`);
  }
});

test('ipBlocks: cidr minus excepts as merged intervals, per family', () => {
  const cases: { name: string; peers: Peer[]; v4: string[]; v6: string[] }[] = [
    { name: 'plain', peers: [ipBlock('172.17.0.0/16')], v4: ['172.17.0.0/16'], v6: [] },
    {
      name: 'except in the middle',
      peers: [ipBlock('172.17.0.0/16', ['172.17.1.0/24'])],
      v4: ['172.17.0.0/24', '172.17.2.0-172.17.255.255'],
      v6: [],
    },
    {
      name: 'several excepts, one at each edge',
      peers: [ipBlock('10.8.0.0/24', ['10.8.0.0/26', '10.8.0.255/32', '10.8.0.128/27'])],
      v4: ['10.8.0.64/26', '10.8.0.160-10.8.0.254'],
      v6: [],
    },
    { name: 'except covers everything', peers: [ipBlock('10.8.0.0/24', ['10.8.0.0/23'])], v4: [], v6: [] },
    {
      name: 'IPv6 with except',
      peers: [ipBlock('2001:db8::/32', ['2001:db8:1::/48'])],
      v4: [],
      v6: ['2001:db8::/48', '2001:db8:2::-2001:db8:ffff:ffff:ffff:ffff:ffff:ffff'],
    },
    { name: 'everything, both families', peers: [ipBlock('0.0.0.0/0'), ipBlock('::/0')], v4: ['0.0.0.0/0'], v6: ['::/0'] },
    {
      name: 'overlapping blocks and pod IPs merge into disjoint elements',
      peers: [ipBlock('10.1.0.0/24'), ipBlock('10.1.0.128/25'), podPeer(sel({ app: 'web' })), ipBlock('10.1.1.0/24')],
      v4: ['10.1.0.0/23'],
      v6: ['fd00:1::1'],
    },
  ];
  for (const k of cases) {
    const r = compileFor(k.name, k.peers);
    assert.deepEqual(r.v4, k.v4, `${k.name} v4`);
    assert.deepEqual(r.v6, k.v6, `${k.name} v6`);
  }
});

test('families never mix: ip saddr for v4 sets, ip6 saddr for v6 sets', () => {
  const { c, ch } = compileFor('families', [podPeer(sel({ app: 'web' }))]);
  assert.equal(setOf(c, ch, 'addrSet', 4).type, 'ipv4_addr');
  assert.equal(setOf(c, ch, 'addrSet', 6).type, 'ipv6_addr');
  assert.deepEqual(shapes(ch), [
    'ip saddr @peer4-* meta l4proto . th dport @port-* accept comment "ingress[0]"',
    'ip6 saddr @peer6-* meta l4proto . th dport @port-* accept comment "ingress[0]"',
  ]);
  // One port set serves both families.
  setOf(c, ch, 'portSet');
});

test('pod addresses only: a plain hash set of addresses; with an ipBlock: an interval set', () => {
  // nft 1.0.x reads every interval set back before each command: big pod sets stay hash sets.
  const pods = compileFor('pods only', [podPeer(sel({ app: 'web' })), podPeer(sel({ app: 'batch' }))]);
  const p4 = setOf(pods.c, pods.ch, 'addrSet', 4);
  assert.equal(p4.interval, false);
  assert.deepEqual(elementTexts(p4), ['10.1.0.1', '10.1.0.2', '10.1.0.9'], 'adjacent addresses stay single elements');
  assert.doesNotMatch(renderRuleset(pods.c).split(`set ${p4.name} {`)[1]?.split('}')[0] ?? '', /flags interval/);
  const mixed = compileFor('pods and block', [podPeer(sel({ app: 'web' })), ipBlock('10.1.0.3/32')]);
  const m4 = setOf(mixed.c, mixed.ch, 'addrSet', 4);
  assert.equal(m4.interval, true);
  assert.deepEqual(elementTexts(m4), ['10.1.0.1-10.1.0.3']);
  assert.equal(setOf(mixed.c, mixed.ch, 'addrSet', 6).interval, true);
  assert.equal(compileFor('block', [ipBlock('10.1.0.0/16')]).c.sets.find((x) => x.type === 'ipv4_addr')?.interval, true);
});

test('egress peers match the destination address', () => {
  const { ch } = compileFor('egress', [ipBlock('10.96.0.0/12')], 'egress');
  assert.deepEqual(shapes(ch), ['ip daddr @peer4-* meta l4proto . th dport @port-* accept comment "egress[0]"']);
});

test('ipBlocks only: a family without addresses gets no rule and no set', () => {
  const v4only = compileFor('v4 only', [ipBlock('192.168.0.0/16')]);
  assert.equal(v4only.ch.rules.length, 1);
  assert.ok(!v4only.c.sets.some((s) => s.type === 'ipv6_addr'), 'no empty v6 set');
  const v6only = compileFor('v6 only', [ipBlock('2001:db8::/32')]);
  assert.deepEqual(shapes(v6only.ch), ['ip6 saddr @peer6-* meta l4proto . th dport @port-* accept comment "ingress[0]"']);
});

test("pod peers selecting nobody: empty sets in the node's families, which allow nothing", () => {
  // The target is dual-stack, so the node uses both families. The rules stay,
  // with empty sets: a matching pod appearing later is an element update.
  for (const [label, peers] of [
    ['nobody', [podPeer(sel({ app: 'nobody' }))]],
    ['unknown namespace', [podPeer(sel(), sel({ env: 'ghost' }))]],
  ] as const) {
    const r = compileFor(label, [...peers]);
    assert.deepEqual(
      shapes(r.ch),
      [
        'ip saddr @peer4-* meta l4proto . th dport @port-* accept comment "ingress[0]"',
        'ip6 saddr @peer6-* meta l4proto . th dport @port-* accept comment "ingress[0]"',
      ],
      label,
    );
    assert.deepEqual([r.v4, r.v6], [[], []], label);
  }
  // A family no local pod uses gets no rule even with peer addresses in it (nothing could reach it).
  const v4node = compileFor('v4-only node', [podPeer(sel({ app: 'web' }))], 'ingress', [], { v4Only: true });
  assert.deepEqual(shapes(v4node.ch), ['ip saddr @peer4-* meta l4proto . th dport @port-* accept comment "ingress[0]"']);
  // ...unless an ipBlock of the rule has addresses there (fixed content, as without pod peers).
  const mixed = compileFor('v4-only node, v6 block', [podPeer(sel({ app: 'web' })), ipBlock('fd00:9::/64')], 'ingress', [], {
    v4Only: true,
  });
  assert.deepEqual(mixed.v6, ['fd00:1::1', 'fd00:9::/64']);
});

test('peers undefined: no address match at all', () => {
  const { ch, c } = compileFor('any peer', undefined);
  assert.deepEqual(shapes(ch), ['meta l4proto . th dport @port-* accept comment "ingress[0]"']);
  assert.deepEqual(
    c.sets.map((s) => s.name),
    [setOf(c, ch, 'portSet').name],
  );
});

test('a peer pod that stops being active leaves the set', () => {
  const before = compileFor('active', [podPeer(sel({ app: 'tools' }), sel())], 'ingress');
  assert.deepEqual(before.v4, ['10.2.0.5']);
  const after = compileFor('finished', [podPeer(sel({ app: 'tools' }), sel())], 'ingress', [
    pod('dev', 'tools-2', { labels: { app: 'tools' }, ips: ['10.2.0.6'], node: 'node-3', phase: 'Failed' }),
    pod('dev', 'tools-host', { labels: { app: 'tools' }, ips: ['192.168.9.9'], node: 'node-3', hostNetwork: true }),
  ]);
  assert.deepEqual(after.v4, ['10.2.0.5']);
});

test('PeerResolver.derived: kept while no pod diff touches its pod peers, made again after one does, dropped when unused', () => {
  const webPeer = podPeer(sel({ app: 'web' }));
  if (webPeer.kind !== 'pods') throw new Error('a pod peer');
  const s0 = state({ pods: cluster, namespaces });
  const idx = new ClusterIndex(s0);
  const peers = new PeerResolver(idx);
  let made = 0;
  const value = (): string[] =>
    peers.derived('web-names', [webPeer], 'prod', () => {
      made++;
      return [...peers.podsOf(webPeer, 'prod')].map((p) => p.name);
    });
  assert.deepEqual(value(), ['web', 'web-2']);
  assert.equal(value(), value(), 'the same value while nothing changed');
  assert.equal(made, 1);
  // A pod outside the peer (dev/tools is not in prod) changes: kept.
  const tools = cluster.find((p) => p.namespace === 'dev' && p.name === 'tools')!;
  const tools2 = { ...tools, labels: { app: 'tools', v: '2' } };
  const s1 = state({ pods: cluster.map((p) => (p === tools ? tools2 : p)), namespaces });
  idx.advance(s1, [tools], [tools2]);
  peers.advance([tools], [tools2]);
  value();
  assert.equal(made, 1, 'a diff outside the peers keeps the value');
  // A web pod of prod joins: made again, with it.
  const web3 = pod('prod', 'web-3', { labels: { app: 'web' }, ips: ['10.1.0.7'], node: 'node-2' });
  const s2 = state({ pods: [...s1.pods, web3], namespaces });
  idx.advance(s2, [], [web3]);
  peers.advance([], [web3]);
  assert.deepEqual(value(), ['web', 'web-2', 'web-3']);
  assert.equal(made, 2);
  // A compile that does not ask for it sweeps it away.
  peers.beginCompile();
  peers.sweep();
  value();
  assert.equal(made, 3, 'swept when no compile asked for it');
});

log.registerCheck();
