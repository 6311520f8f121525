// Fail closed for local pods the agent does not know yet: with the node's pod
// CIDRs, every active local pod is in the dispatch maps (accept when nothing
// isolates it) and any other address of those CIDRs is dropped in the
// forward chains. Without podCIDRs, or with unknownLocalEndpoints 'allow',
// nothing changes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileNode } from '../../src/compile/compile.ts';
import type { CompiledRuleset } from '../../src/ruleset/ir.ts';
import type { RenderOptions } from '../../src/ruleset/options.ts';
import { podChainName, podId } from '../../src/ruleset/ids.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import type { ClusterState, Node } from '../../src/model/types.ts';
import { pod, policy, sel, state } from '../support/state-builder.ts';
import { renderLog } from '../nft/nft-support.ts';
import { chain, mapEntries, rules } from './ir-query.ts';
import { elementTexts } from '../../src/nft/elements.ts';

const log = renderLog();

const withCIDRs = (podCIDRs?: string[]): Node => ({
  name: 'node-1',
  addresses: ['192.168.100.1'],
  ...(podCIDRs === undefined ? {} : { podCIDRs }),
});

const pods = [
  pod('a', 'web', { labels: { app: 'web' }, ips: ['10.0.1.2', 'fd00:1::2'] }),
  pod('a', 'batch', { labels: { app: 'batch' }, ips: ['10.0.1.3', 'fd00:1::3'] }),
  pod('a', 'v4-only', { labels: { app: 'batch' }, ips: ['10.0.1.4'] }),
  pod('a', 'done', { labels: { app: 'batch' }, ips: ['10.0.1.5'], phase: 'Succeeded' }),
  pod('a', 'host', { labels: { app: 'batch' }, ips: ['192.168.100.1'], hostNetwork: true }),
  pod('a', 'no-ip', { labels: { app: 'batch' }, phase: 'Pending' }),
  pod('a', 'remote', { labels: { app: 'batch' }, ips: ['10.0.2.2'], node: 'node-2' }),
];
const webOnly = policy('a', 'web-ingress', { podSelector: sel({ app: 'web' }) });

function compile(label: string, node: Node, o?: Partial<RenderOptions>): CompiledRuleset {
  const s: ClusterState = state({
    pods,
    policies: [webOnly],
    nodes: [node, { name: 'node-2', addresses: [], podCIDRs: ['10.0.2.0/24'] }],
  });
  const c = compileNode(s, 'node-1', { unknownLocalEndpoints: 'drop', ...o });
  log.add(label, renderRuleset(c));
  return c;
}

test('with podCIDRs: every active local pod is dispatched; not isolated = accept', () => {
  const c = compile('cidrs', withCIDRs(['10.0.1.0/24', 'fd00:1::/64']));
  const webIn = podChainName(podId('a', 'web'), 'ingress');
  assert.deepEqual(mapEntries(c, 'ingress', 4), { '10.0.1.2': webIn, '10.0.1.3': 'accept', '10.0.1.4': 'accept' });
  assert.deepEqual(mapEntries(c, 'ingress', 6), {
    'fd00:1::2': podChainName(podId('a', 'web'), 'ingress'),
    'fd00:1::3': 'accept',
  });
  // web is not isolated for egress: accept there too. Finished, hostNetwork, IP-less and remote pods never appear.
  assert.deepEqual(mapEntries(c, 'egress', 4), { '10.0.1.2': 'accept', '10.0.1.3': 'accept', '10.0.1.4': 'accept' });
  assert.deepEqual(mapEntries(c, 'egress', 6), { 'fd00:1::2': 'accept', 'fd00:1::3': 'accept' });
  assert.match(
    renderRuleset(c),
    /^\t\telements = \{ 10\.0\.1\.2 : goto KUBE-POD-FW-[0-9a-f]{12}-IN, 10\.0\.1\.3 : accept, 10\.0\.1\.4 : accept \}$/m,
  );
});

test('with podCIDRs: unknown local endpoints dropped after the dispatch, in forward and (not from the node itself) input', () => {
  const c = compile('cidrs chains', withCIDRs(['10.0.1.0/24', 'fd00:1::/64']));
  assert.deepEqual(
    c.sets.filter((s) => s.name.startsWith('local-')).map((s) => [s.name, s.type, s.interval, elementTexts(s)]),
    [
      ['local-pod-cidrs-v4', 'ipv4_addr', true, ['10.0.1.0/24']],
      ['local-pod-cidrs-v6', 'ipv6_addr', true, ['fd00:1::/64']],
    ],
  );
  const nd = 'icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, nd-router-advert } accept';
  // What policies allow is accepted through the peer identities, looked up after the dispatch from the pod
  // chains (compile/identities.ts): the lookup chain of each direction, for the families isolated pods have.
  const peers = [
    'ip daddr vmap @egress-peers-v4',
    'ip daddr vmap @egress-ranges-v4',
    'ip6 daddr vmap @egress-peers-v6',
    'ip6 daddr vmap @egress-ranges-v6',
  ];
  const isolatedEg = c.maps.some(
    (m) => m.kind === 'dispatch' && m.direction === 'egress' && m.elements.some((e) => e.chain !== undefined),
  );
  assert.deepEqual(rules(chain(c, 'egress-peers')!), isolatedEg ? peers : []);
  for (const ch of c.chains.filter((x) => x.role === 'pod'))
    assert.equal(rules(ch)[0], `jump ${ch.name.endsWith('-IN') ? 'ingress' : 'egress'}-peers`);
  assert.deepEqual(rules(chain(c, 'forward-egress')!), [
    'ct state established,related accept',
    nd,
    'ip saddr vmap @egress-v4',
    'ip6 saddr vmap @egress-v6',
    'ip saddr @local-pod-cidrs-v4 counter drop comment "unknown local endpoint"',
    'ip6 saddr @local-pod-cidrs-v6 counter drop comment "unknown local endpoint"',
  ]);
  assert.deepEqual(rules(chain(c, 'forward-ingress')!).slice(4), [
    'ip daddr @local-pod-cidrs-v4 counter drop comment "unknown local endpoint"',
    'ip6 daddr @local-pod-cidrs-v6 counter drop comment "unknown local endpoint"',
  ]);
  // An unknown pod reaching the node (its kubelet) is dropped too; the node's own gateway address
  // may lie in its pod CIDR, so sources the node holds itself (the node talking to itself) pass.
  assert.deepEqual(rules(chain(c, 'input-egress')!), [
    'ct state established,related accept',
    nd,
    'ip saddr vmap @egress-v4',
    'ip6 saddr vmap @egress-v6',
    'ip saddr @local-pod-cidrs-v4 fib saddr type != local counter drop comment "unknown local endpoint"',
    'ip6 saddr @local-pod-cidrs-v6 fib saddr type != local counter drop comment "unknown local endpoint"',
  ]);
  // --allow-pod-to-node: traffic to the node's own addresses is accepted before the dispatch, from any pod.
  const open = compile('cidrs chains, pod to node', withCIDRs(['10.0.1.0/24', 'fd00:1::/64']), { allowPodToNode: true });
  assert.deepEqual(rules(chain(open, 'input-egress')!).slice(2, 3), [
    'fib daddr type local accept comment "pod to its own node (--allow-pod-to-node)"',
  ]);
  assert.deepEqual(rules(chain(open, 'forward-egress')!), rules(chain(c, 'forward-egress')!), 'forward is not affected');
});

test('one family of podCIDRs: only that family is dropped', () => {
  const c = compile('v4 cidr', withCIDRs(['10.0.1.0/24']));
  assert.deepEqual(
    c.sets.filter((s) => s.name.startsWith('local-')).map((s) => s.name),
    ['local-pod-cidrs-v4'],
  );
  assert.deepEqual(rules(chain(c, 'forward-ingress')!).slice(4), [
    'ip daddr @local-pod-cidrs-v4 counter drop comment "unknown local endpoint"',
  ]);
  // The maps still list every local pod in both families: a v6 address is known even without a v6 CIDR.
  assert.equal(mapEntries(c, 'ingress', 6)['fd00:1::3'], 'accept');
});

test('without podCIDRs, or with unknownLocalEndpoints allow: exactly the behaviour without protection', () => {
  const plain = compile('no cidrs', withCIDRs());
  assert.deepEqual(mapEntries(plain, 'ingress', 4), { '10.0.1.2': podChainName(podId('a', 'web'), 'ingress') });
  assert.deepEqual(mapEntries(plain, 'egress', 4), {});
  assert.ok(!plain.sets.some((s) => s.name.startsWith('local-')));
  assert.ok(!renderRuleset(plain).includes('unknown local endpoint'));
  assert.equal(renderRuleset(compile('empty cidrs', withCIDRs([]))), renderRuleset(plain));
  const allowed = compile('allow', withCIDRs(['10.0.1.0/24', 'fd00:1::/64']), { unknownLocalEndpoints: 'allow' });
  assert.equal(renderRuleset(allowed), renderRuleset(plain));
  assert.throws(
    () => compile('bad option', withCIDRs(), { unknownLocalEndpoints: 'maybe' as 'drop' }),
    /invalid unknownLocalEndpoints "maybe": drop or allow/,
  );
  assert.throws(
    () => compile('bad option', withCIDRs(), { allowPodToNode: 'yes' as unknown as boolean }),
    /invalid allowPodToNode "yes": true or false/,
  );
});

test('podCIDRs of another node, or of no node object, change nothing', () => {
  const s: ClusterState = state({
    pods,
    policies: [webOnly],
    nodes: [{ name: 'node-2', addresses: [], podCIDRs: ['10.0.2.0/24'] }],
  });
  const c = compileNode(s, 'node-1', { unknownLocalEndpoints: 'drop' });
  assert.ok(!c.sets.some((x) => x.name.startsWith('local-')));
  assert.deepEqual(mapEntries(c, 'egress', 4), {});
});

test('stats count the CIDR sets and the accept elements', () => {
  const c = compile('stats', withCIDRs(['10.0.1.0/24', 'fd00:1::/64']));
  // Map elements: ingress 3 + 2, egress 3 + 2; CIDR sets 2 elements.
  assert.equal(
    c.stats.elements,
    10 + 2 + c.sets.filter((s) => !s.name.startsWith('local-')).reduce((n, s) => n + s.elements.length, 0),
  );
  assert.equal(
    c.stats.rules,
    c.chains.reduce((n, ch) => n + ch.rules.length, 0),
  );
});

log.registerCheck();
