// Which pods and policies a node's ruleset covers, and how traffic reaches
// their chains: local active pods only, policies selecting >= 1 of them,
// dispatch through verdict maps per direction and family.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileRules } from '../../src/compile/compile.ts';
import { localPods } from '../../src/compile/local-endpoints.ts';
import { relevantPolicies } from '../../src/compile/policy-chains.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { podChainName, podId, policyChainName, policyId } from '../../src/ruleset/ids.ts';
import type { ClusterState } from '../../src/model/types.ts';
import { cport, ipBlock, node, pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';
import { renderLog } from '../nft/nft-support.ts';
import { chain, mapEntries, podChain, policyChain, rules } from './ir-query.ts';

const log = renderLog();
function compile(label: string, s: ClusterState, nodeName = 'node-1', opts?: Parameters<typeof compileRules>[2]) {
  const c = compileRules(s, nodeName, opts);
  log.add(label, renderRuleset(c));
  return c;
}

test('local pods: active pods of this node only', () => {
  const s = state({
    pods: [
      pod('a', 'running', { ips: ['10.0.0.1'] }),
      pod('a', 'pending-with-ip', { ips: ['10.0.0.2'], phase: 'Pending' }),
      pod('a', 'unknown-phase', { ips: ['10.0.0.3'], phase: 'Unknown' }),
      pod('a', 'succeeded', { ips: ['10.0.0.4'], phase: 'Succeeded' }),
      pod('a', 'failed', { ips: ['10.0.0.5'], phase: 'Failed' }),
      pod('a', 'host-net', { ips: ['192.168.0.1'], hostNetwork: true }),
      pod('a', 'no-ip', {}),
      pod('a', 'elsewhere', { ips: ['10.0.1.1'], node: 'node-2' }),
      pod('a', 'unscheduled', { ips: [], node: undefined }),
    ],
  });
  assert.deepEqual(
    localPods(s, 'node-1').map((p) => p.name),
    ['pending-with-ip', 'running', 'unknown-phase'],
  );
  assert.deepEqual(localPods(s, 'node-3'), []);
  const c = compile('local pods', state({ ...s, pods: [...s.pods], policies: [policy('a', 'deny-all')] }));
  assert.equal(c.stats.localPods, 3);
  assert.deepEqual(mapEntries(c, 'ingress', 4), {
    '10.0.0.1': podChainName(podId('a', 'running'), 'ingress'),
    '10.0.0.2': podChainName(podId('a', 'pending-with-ip'), 'ingress'),
    '10.0.0.3': podChainName(podId('a', 'unknown-phase'), 'ingress'),
  });
});

test('relevant policies: only those selecting a local pod, in namespace/name order', () => {
  const s = state({
    pods: [
      pod('a', 'web', { labels: { app: 'web' }, ips: ['10.0.0.1'] }),
      pod('a', 'db', { labels: { app: 'db' }, ips: ['10.0.1.1'], node: 'node-2' }),
      pod('b', 'web', { labels: { app: 'web' }, ips: ['10.0.1.2'], node: 'node-2' }),
    ],
    policies: [
      policy('a', 'z-web', { podSelector: sel({ app: 'web' }) }),
      policy('a', 'a-all', {}),
      policy('a', 'db-only', { podSelector: sel({ app: 'db' }) }),
      policy('b', 'web-in-b', { podSelector: sel({ app: 'web' }) }),
      policy('a', 'no-types', { types: { ingress: false, egress: false } }),
    ],
  });
  const rel = relevantPolicies(s, localPods(s, 'node-1'));
  assert.deepEqual(
    rel.map((r) => r.policy.origin.name),
    ['a-all', 'z-web'],
  );
  const c = compile('relevant', s);
  assert.equal(c.stats.policies, 2);
  assert.ok(policyChain(c, 'a', 'a-all', 'ingress'));
  assert.equal(policyChain(c, 'a', 'db-only', 'ingress'), undefined);
  assert.equal(policyChain(c, 'b', 'web-in-b', 'ingress'), undefined);
  // The pod chain jumps to each selecting policy (sorted), then denies.
  assert.deepEqual(rules(podChain(c, 'a', 'web', 'ingress')!), [
    `jump ${policyChainName(policyId('a', 'a-all'), 'ingress')} comment "a/a-all"`,
    `jump ${policyChainName(policyId('a', 'z-web'), 'ingress')} comment "a/z-web"`,
    'counter drop comment "deny ingress to a/web"',
  ]);
});

test('directions: a pod gets a chain and map entry only for directions it is isolated in', () => {
  const s = state({
    pods: [
      pod('a', 'in-only', { labels: { r: 'in' }, ips: ['10.0.0.1'] }),
      pod('a', 'eg-only', { labels: { r: 'eg' }, ips: ['10.0.0.2'] }),
      pod('a', 'free', { ips: ['10.0.0.3'] }),
    ],
    policies: [
      policy('a', 'ingress', { podSelector: sel({ r: 'in' }) }),
      policy('a', 'egress', {
        podSelector: sel({ r: 'eg' }),
        types: { ingress: false, egress: true },
        egress: [rule(undefined, [port('UDP', 53)])],
      }),
    ],
  });
  const c = compile('directions', s);
  assert.deepEqual(Object.keys(mapEntries(c, 'ingress', 4)), ['10.0.0.1']);
  assert.deepEqual(Object.keys(mapEntries(c, 'egress', 4)), ['10.0.0.2']);
  assert.ok(podChain(c, 'a', 'in-only', 'ingress'));
  assert.equal(podChain(c, 'a', 'in-only', 'egress'), undefined);
  assert.equal(podChain(c, 'a', 'eg-only', 'ingress'), undefined);
  assert.equal(podChain(c, 'a', 'free', 'ingress'), undefined);
  assert.equal(policyChain(c, 'a', 'egress', 'ingress'), undefined);
  assert.deepEqual(rules(policyChain(c, 'a', 'ingress', 'ingress')!), [], 'ingress: [] denies all');
});

test('dual-stack pods are dispatched in both families; map keys sorted by address', () => {
  const s = state({
    pods: [
      pod('a', 'p1', { ips: ['10.0.0.10', 'fd00::a'] }),
      pod('a', 'p2', { ips: ['10.0.0.9', 'fd00::9'] }),
      pod('a', 'p3', { ips: ['fd00::1'] }),
    ],
    policies: [policy('a', 'all', { egress: [] })],
  });
  const c = compile('dual-stack', s);
  assert.deepEqual(Object.keys(mapEntries(c, 'ingress', 4)), ['10.0.0.9', '10.0.0.10']);
  assert.deepEqual(Object.keys(mapEntries(c, 'egress', 6)), ['fd00::1', 'fd00::9', 'fd00::a']);
  assert.equal(mapEntries(c, 'egress', 6)['fd00::1'], podChainName(podId('a', 'p3'), 'egress'));
});

test('no local pod or no policy: base chains and empty maps only', () => {
  for (const [label, s] of [
    ['empty cluster', state({})],
    ['no policies', state({ pods: [pod('a', 'x', { ips: ['10.0.0.1'] })] })],
    ['no local pods', state({ pods: [pod('a', 'x', { ips: ['10.0.0.1'], node: 'node-2' })], policies: [policy('a', 'deny')] })],
  ] as const) {
    const c = compile(label, s);
    assert.deepEqual(
      c.chains.map((ch) => ch.name),
      ['forward-egress', 'forward-ingress', 'input-egress'],
      label,
    );
    assert.equal(c.sets.length, 0, label);
    assert.deepEqual(
      c.maps.map((m) => [m.name, m.elements.length]),
      [
        ['egress-v4', 0],
        ['egress-v6', 0],
        ['ingress-v4', 0],
        ['ingress-v6', 0],
      ],
      label,
    );
  }
});

test('base chains: reply traffic and IPv6 ND first, then one vmap per family', () => {
  const c = compile('base', state({ pods: [pod('a', 'x', { ips: ['10.0.0.1'] })], policies: [policy('a', 'deny')] }));
  const nd = 'icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, nd-router-advert } accept';
  assert.deepEqual(rules(chain(c, 'forward-egress')!), [
    'ct state established,related accept',
    nd,
    'ip saddr vmap @egress-v4',
    'ip6 saddr vmap @egress-v6',
  ]);
  assert.deepEqual(rules(chain(c, 'forward-ingress')!), [
    'ct state established,related accept',
    nd,
    'ip daddr vmap @ingress-v4',
    'ip6 daddr vmap @ingress-v6',
  ]);
  assert.deepEqual(rules(chain(c, 'input-egress')!), [
    'ct state established,related accept',
    nd,
    'ip saddr vmap @egress-v4',
    'ip6 saddr vmap @egress-v6',
  ]);
  assert.deepEqual(
    c.chains.filter((ch) => ch.base !== undefined).map((ch) => [ch.name, ch.base?.hook, ch.base?.priority]),
    [
      ['forward-egress', 'forward', 0],
      ['forward-ingress', 'forward', 1],
      ['input-egress', 'input', 0],
    ],
  );
});

test('size follows local pods + policies + peer addresses, never pods x peers x ports', () => {
  const locals = Array.from({ length: 20 }, (_, i) =>
    pod('a', `web-${i}`, { labels: { app: 'web' }, ips: [`10.0.0.${i + 1}`], ports: [cport('http', 8080)] }),
  );
  const clients = Array.from({ length: 50 }, (_, i) =>
    pod('a', `client-${i}`, { labels: { app: 'client' }, ips: [`10.0.2.${2 * i + 1}`], node: 'node-2' }),
  );
  const ports = Array.from({ length: 30 }, (_, i) => port('TCP', 1000 + 2 * i));
  const s = state({
    pods: [...locals, ...clients],
    policies: [
      policy('a', 'web', {
        podSelector: sel({ app: 'web' }),
        ingress: [rule([podPeer(sel({ app: 'client' })), ipBlock('192.168.0.0/16')], [...ports, port('TCP', 'http')])],
      }),
    ],
  });
  const c = compile('scaling', s);
  // One numeric and one named-port rule, whatever the number of pods, peers and ports.
  assert.equal(policyChain(c, 'a', 'web', 'ingress')!.rules.length, 2);
  // Elements: 50 clients + 1 block; 30 ports; 20 named-port triples; 20 map entries.
  assert.equal(c.stats.elements, 51 + 30 + 20 + 20);
  // A remote pod nobody selects changes nothing.
  const more = compile(
    'scaling+1',
    state({ pods: [...locals, ...clients, pod('z', 'far', { ips: ['10.9.0.1'], node: 'node-9' })], policies: [...s.policies] }),
  );
  assert.equal(renderRuleset(more), renderRuleset(c));
});

test('stats count what the IR holds', () => {
  const s = state({
    pods: [
      pod('a', 'web', { labels: { app: 'web' }, ips: ['10.0.0.1', 'fd00::1'] }),
      pod('a', 'c', { ips: ['10.0.0.2'], node: 'node-2' }),
    ],
    policies: [
      policy('a', 'p', { ingress: [rule([podPeer(sel())], [port('TCP', 80)])], egress: [rule([ipBlock('0.0.0.0/0')])] }),
    ],
    nodes: [node('node-1'), node('node-2')],
  });
  const c = compile('stats', s);
  const rulesCount = c.chains.reduce((n, ch) => n + ch.rules.length, 0);
  const elements = c.sets.reduce((n, x) => n + x.elements.length, 0) + c.maps.reduce((n, m) => n + m.elements.length, 0);
  assert.deepEqual(c.stats, {
    chains: c.chains.length,
    rules: rulesCount,
    sets: c.sets.length,
    maps: 4,
    elements,
    localPods: 1,
    policies: 1,
  });
  // 1 pod x 2 directions + 1 policy x 2 directions + 3 base chains.
  assert.equal(c.stats.chains, 7);
});

log.registerCheck();
