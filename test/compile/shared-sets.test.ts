// Sets are named by their definition (canonical peer expression, port list,
// named-port destinations), so rules with the same definition share one set,
// rendered once, and a set keeps its name while pods come and go.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileNode } from '../../src/compile/compile.ts';
import type { CompiledRuleset, NamedSet } from '../../src/ruleset/ir.ts';
import { SharedSets } from '../../src/compile/shared-sets.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import type { Peer, Pod } from '../../src/model/types.ts';
import { cport, ipBlock, ns, pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';
import { renderLog } from '../nft/nft-support.ts';
import { mustPolicyChain, rules, setOf } from './ir-query.ts';

const log = renderLog();

const namespaces = [ns('a', { env: 'prod' }), ns('b', { env: 'prod' }), ns('c', { env: 'dev' })];
const frontends = (n: number): Pod[] =>
  Array.from({ length: n }, (_, i) =>
    pod(['a', 'b', 'c'][i % 3] ?? 'a', `fe-${i}`, {
      labels: { tier: 'frontend' },
      ips: [`10.1.${i}.1`],
      node: 'node-2',
      ports: [cport('http', 8080)],
    }),
  );
const backends = [
  pod('a', 'be', { labels: { tier: 'backend' }, ips: ['10.0.0.1'] }),
  pod('b', 'be', { labels: { tier: 'backend' }, ips: ['10.0.0.2'] }),
];
const allFrontends: Peer = podPeer(sel({ tier: 'frontend' }), sel());

function compile(label: string, pods: Pod[], policies: ReturnType<typeof policy>[]): CompiledRuleset {
  const c = compileNode(state({ namespaces, pods, policies, strictNamespaces: true }), 'node-1');
  log.add(label, renderRuleset(c));
  return c;
}

const widePolicies = [
  policy('a', 'all-frontends', { podSelector: sel({ tier: 'backend' }), ingress: [rule([allFrontends], [port('TCP', 8080)])] }),
  policy('a', 'all-frontends-2', { podSelector: sel({ tier: 'backend' }), ingress: [rule([allFrontends], [port('TCP', 9090)])] }),
  // Same peers written differently: reordered, duplicated, podSelector in another key order.
  policy('b', 'all-frontends', {
    podSelector: sel({ tier: 'backend' }),
    ingress: [
      rule([ipBlock('192.168.0.0/16'), allFrontends], [port('TCP', 8080)]),
      rule([allFrontends, allFrontends, ipBlock('192.168.0.0/16')], [port('TCP', 8080)]),
    ],
  }),
];

test('the same peer definition in several rules and policies: one set, rendered once', () => {
  const c = compile('shared', [...backends, ...frontends(30)], widePolicies);
  const sets = widePolicies.map((p) => setOf(c, mustPolicyChain(c, p.namespace, p.name, 'ingress'), 'addrSet', 4).name);
  assert.equal(sets[0], sets[1], 'two policies, same peers: same set');
  assert.notEqual(sets[2], sets[0], 'an extra ipBlock is another definition');
  const bChain = mustPolicyChain(c, 'b', 'all-frontends', 'ingress');
  assert.equal(
    new Set(bChain.rules.flatMap((r) => r.matches.flatMap((m) => (m.kind === 'addrSet' ? [m.set] : [])))).size,
    1,
    'reordered and duplicated peers: same set',
  );
  // Each set is declared once; 30 frontends + 1 block in one, 30 in the other.
  const text = renderRuleset(c);
  for (const name of new Set(sets)) assert.equal(text.split(`\tset ${name} {`).length - 1, 1, name);
  assert.deepEqual(
    c.sets.filter((s) => s.type === 'ipv4_addr').map((s) => s.elements.length),
    [30, 31],
  );
  // The port set of tcp . 8080 is shared too (by content).
  assert.equal(c.sets.filter((s) => s.type === 'inet_proto . inet_service').length, 2);
  assert.equal(c.stats.sets, c.sets.length);
  assert.equal(new Set(c.sets.map((s) => s.name)).size, c.sets.length);
});

test('definitions, not rules: what makes two peer sets the same or different', () => {
  const peerSet = (label: string, polNs: string, peers: Peer[]): string => {
    const c = compile(
      label,
      [...backends, ...frontends(6)],
      [policy(polNs, 'p', { podSelector: sel({ tier: 'backend' }), ingress: [rule(peers, [port('TCP', 80)])] })],
    );
    return setOf(c, mustPolicyChain(c, polNs, 'p', 'ingress'), 'addrSet', 4).name;
  };
  // A pod peer without namespaceSelector means the policy's namespace: different per namespace.
  assert.notEqual(
    peerSet('own ns a', 'a', [podPeer(sel({ tier: 'frontend' }))]),
    peerSet('own ns b', 'b', [podPeer(sel({ tier: 'frontend' }))]),
  );
  // ...while a namespaceSelector or an ipBlock means the same in every namespace.
  assert.equal(peerSet('wide from a', 'a', [allFrontends]), peerSet('wide from b', 'b', [allFrontends]));
  assert.equal(
    peerSet('block from a', 'a', [ipBlock('10.1.0.0/16', ['10.1.0.0/24'])]),
    peerSet('block from b', 'b', [ipBlock('10.1.0.0/16', ['10.1.0.0/24'])]),
  );
  // An absent podSelector next to a namespaceSelector selects every pod, as `{}` does.
  assert.equal(
    peerSet('no podSelector', 'a', [podPeer(undefined, sel({ env: 'prod' }))]),
    peerSet('empty podSelector', 'a', [podPeer(sel(), sel({ env: 'prod' }))]),
  );
  // Label selector text is canonical (key order, value order).
  assert.equal(
    peerSet('expr 1', 'a', [
      podPeer(sel({}, [{ key: 'tier', operator: 'In', values: ['frontend', 'x'] }]), sel({ env: 'prod' })),
    ]),
    peerSet('expr 2', 'a', [
      podPeer(sel({}, [{ key: 'tier', operator: 'In', values: ['x', 'frontend'] }]), sel({ env: 'prod' })),
    ]),
  );
  assert.notEqual(
    peerSet('prod', 'a', [podPeer(sel(), sel({ env: 'prod' }))]),
    peerSet('dev', 'a', [podPeer(sel(), sel({ env: 'dev' }))]),
  );
});

test('names follow the definition, not the elements: pod churn keeps every name', () => {
  const before = compile('churn before', [...backends, ...frontends(30)], widePolicies);
  const churned = [
    ...frontends(30).slice(3),
    pod('c', 'fe-new', { labels: { tier: 'frontend' }, ips: ['10.9.9.9'], node: 'node-3' }),
  ];
  const after = compile('churn after', [...backends, ...churned], widePolicies);
  assert.deepEqual(
    after.sets.map((s) => s.name),
    before.sets.map((s) => s.name),
  );
  assert.notDeepEqual(
    after.sets.map((s) => s.elements),
    before.sets.map((s) => s.elements),
  );
  // A policy edit that changes the peers is a new definition: a new name.
  const edited = compile(
    'edited',
    [...backends, ...frontends(30)],
    [
      policy('a', 'all-frontends', {
        podSelector: sel({ tier: 'backend' }),
        ingress: [rule([podPeer(sel({ tier: 'frontend' }), sel({ env: 'prod' }))], [port('TCP', 8080)])],
      }),
    ],
  );
  assert.ok(
    !before.sets.some(
      (s) => s.name === setOf(edited, mustPolicyChain(edited, 'a', 'all-frontends', 'ingress'), 'addrSet', 4).name,
    ),
  );
});

test('named-port sets are shared by definition too', () => {
  const fe = frontends(9);
  const egress = (namespace: string, name: string): ReturnType<typeof policy> =>
    policy(namespace, name, {
      podSelector: sel({ tier: 'backend' }),
      types: { ingress: false, egress: true },
      egress: [rule([allFrontends], [port('TCP', 'http')])],
    });
  const ingress = (name: string): ReturnType<typeof policy> =>
    policy('a', name, { podSelector: sel({ tier: 'backend' }), ingress: [rule(undefined, [port('TCP', 'http')])] });
  const servingBackends = backends.map((p) => ({ ...p, ports: [cport('http', 8443)] }));
  const c = compile(
    'named shared',
    [...servingBackends, ...fe],
    [egress('a', 'e1'), egress('b', 'e2'), ingress('i1'), ingress('i2')],
  );
  const named = (namespace: string, name: string, d: 'ingress' | 'egress'): string =>
    setOf(c, mustPolicyChain(c, namespace, name, d), 'namedPortSet', 4).name;
  assert.equal(named('a', 'e1', 'egress'), named('b', 'e2', 'egress'), 'egress: same destinations and port names');
  assert.equal(named('a', 'i1', 'ingress'), named('a', 'i2', 'ingress'), 'ingress: same namespace and podSelector');
  assert.equal(c.sets.filter((s) => s.name.startsWith('named4-')).length, 2);
});

test('a set shared by an ingress and an egress rule: each matches it its own way', () => {
  const both = policy('a', 'both', {
    podSelector: sel({ tier: 'backend' }),
    ingress: [rule([allFrontends], [port('TCP', 80)])],
    egress: [rule([allFrontends], [port('TCP', 80)])],
  });
  const c = compile('both directions', [...backends, ...frontends(6)], [both]);
  const inCh = mustPolicyChain(c, 'a', 'both', 'ingress');
  const egCh = mustPolicyChain(c, 'a', 'both', 'egress');
  assert.equal(setOf(c, inCh, 'addrSet', 4).name, setOf(c, egCh, 'addrSet', 4).name);
  assert.match(rules(inCh)[0] ?? '', /^ip saddr @peer4-/);
  assert.match(rules(egCh)[0] ?? '', /^ip daddr @peer4-/);
});

test('a hash collision between two definitions is an error, never a merge', () => {
  const shared = new SharedSets();
  const make = () => ({
    name: 'peer4-000000000000',
    type: 'ipv4_addr' as const,
    interval: true,
    elements: [],
    comment: undefined,
  });
  const created: NamedSet[] = [];
  const first = shared.use('peer4-000000000000', 'one', make, created);
  assert.equal(created.length, 1);
  assert.equal(shared.use('peer4-000000000000', 'one', make, created), first, 'second use: the same set');
  assert.equal(created.length, 1, 'second use: no new set');
  assert.throws(() => shared.use('peer4-000000000000', 'two', make, created), /identifier collision on peer4-000000000000/);
});

log.registerCheck();
