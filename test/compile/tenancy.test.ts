// Tenancy compiled through the seam: the isolation and NamespaceNetworkPolicy
// kinds become ordinary policy chains over shared sets (a workspace's pods are
// one set, used by every namespace of the workspace on the node), the rules
// carry their causes in comments, tenancy off contributes nothing, and the
// output is deterministic and accepted by nft.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileNode, compileRules } from '../../src/compile/compile.ts';
import { cidrInterval, formatCIDR, intervalCIDRs, parseIP } from '../../src/model/ip.ts';
import { buildState } from '../../src/model/normalize.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { nsnpObject, tenancyObjects, tenancyState } from '../cases/tenancy-cluster.ts';
import { renderLog } from '../nft/nft-support.ts';

const log = renderLog();

test('a workspace is one peer set shared by its namespaces; causes in comments; nft accepts it', () => {
  const s = tenancyState({
    isolatedWorkspaces: ['acme', 'beta'],
    isolatedProjects: ['lab'],
    extra: [
      nsnpObject('shop', 'to-api', {
        policyTypes: ['Egress'],
        egress: [{ to: [{ service: { name: 'api', namespace: 'cart' } }] }],
      }),
    ],
  });
  const r = compileRules(s, 'node-1');
  const text = renderRuleset(r);
  log.add('tenancy node-1', text);
  // What the kernel gets (peer identities) is valid nft too, and names the causes on its allow elements.
  const flat = renderRuleset(compileNode(s, 'node-1'));
  log.add('tenancy node-1 flattened', flat);
  assert.match(flat, /comment "[^"]*workspace isolation of acme (ingress|egress)\[\d+\]/);
  const wsSets = r.sets.filter((x) => x.comment?.includes('kubesphere.io/workspace=acme') === true);
  assert.equal(wsSets.length, 2, 'one set per family for workspace acme');
  // Both namespaces of acme on this node (shop/a, cart/a) jump to chains matching the same set.
  const users = r.chains.filter((c) =>
    c.rules.some((x) => x.matches.some((m) => m.kind === 'addrSet' && wsSets.some((w) => w.name === m.set))),
  );
  assert.equal(users.length, 4, users.map((c) => c.comment).join('; ')); // shop and cart, ingress and egress
  // The cluster DNS and node address sets are shared by every isolated namespace too.
  for (const what of ['k8s-app=kube-dns', '192.168.56.11']) {
    const sets = r.sets.filter((x) => x.comment?.includes(what) === true);
    assert.ok(sets.length >= 1 && sets.length <= 2, what);
  }
  assert.match(text, /project isolation of ns lab/);
  assert.match(text, /workspace isolation of acme/);
  assert.match(text, /NamespaceNetworkPolicy shop\/to-api/);
  assert.equal(
    renderRuleset(
      compileRules(
        tenancyState({
          isolatedWorkspaces: ['acme', 'beta'],
          isolatedProjects: ['lab'],
          extra: [
            nsnpObject('shop', 'to-api', {
              policyTypes: ['Egress'],
              egress: [{ to: [{ service: { name: 'api', namespace: 'cart' } }] }],
            }),
          ],
        }),
        'node-1',
      ),
    ),
    text,
  );
});

test('a NamespaceNetworkPolicy rule with plain and Service peers (several contributed rules, one index): one counting chain', () => {
  // The differential fuzzer found it: the compiler threw an identifier collision on the rule's chain.
  const s = tenancyState({
    isolatedWorkspaces: ['acme', 'beta'],
    isolatedProjects: [],
    extra: [
      nsnpObject('shop', 'to-api', {
        policyTypes: ['Egress'],
        egress: [{ to: [{ namespace: { name: 'cart' } }, { service: { name: 'api', namespace: 'cart' } }] }],
      }),
    ],
  });
  const c = compileNode(s, 'node-1');
  const mine = c.chains.filter((x) => x.role === 'rule' && x.counts?.policy === 'to-api');
  assert.deepEqual(
    mine.map((x) => [x.counts?.kind, x.counts?.namespace, x.counts?.direction, x.counts?.rule, x.counts?.action]),
    [['NamespaceNetworkPolicy', 'shop', 'egress', '0', 'Allow']],
  );
  // Every allow element of its rule goes to that one chain.
  const targets = new Set(
    c.decisions.flatMap((m) =>
      m.elements.flatMap((e) => (e.verdict.kind === 'goto' && e.comment?.includes('to-api') === true ? [e.verdict.chain] : [])),
    ),
  );
  assert.deepEqual([...targets], [mine[0]?.name]);
  log.add('nsnp with service and namespace peers', renderRuleset(c));
});

test('tenancy off (state.tenancy absent): annotations, workspaces and NSNPs contribute nothing', () => {
  const objs = tenancyObjects({ isolatedWorkspaces: ['acme'], isolatedProjects: ['lab'] });
  const off = buildState(objs).state;
  const r = compileNode(off, 'node-1');
  assert.equal(r.stats.policies, 0);
  assert.equal(
    renderRuleset(r),
    renderRuleset(compileNode(buildState(objs.filter((o) => o.kind !== 'Workspace')).state, 'node-1')),
  );
});

log.registerCheck();

test('intervalCIDRs: the fewest aligned CIDRs covering exactly an interval (the nodes-address blocks)', () => {
  const iv = (a: string, b: string) => {
    const lo = parseIP(a)!;
    const hi = parseIP(b)!;
    return { family: lo.family, lo: lo.value, hi: hi.value };
  };
  const cover = (a: string, b: string) => intervalCIDRs(iv(a, b)).map(formatCIDR);
  assert.deepEqual(cover('10.0.0.0', '10.0.0.255'), ['10.0.0.0/24']);
  assert.deepEqual(cover('172.16.0.1', '172.16.0.6'), ['172.16.0.1/32', '172.16.0.2/31', '172.16.0.4/31', '172.16.0.6/32']);
  assert.deepEqual(cover('fd00::1', 'fd00::1'), ['fd00::1/128']);
  assert.deepEqual(cover('0.0.0.0', '255.255.255.255'), ['0.0.0.0/0']);
  // Exactly the interval: every address inside one block, none outside.
  for (const [a, b] of [
    ['172.16.3.7', '172.16.9.200'],
    ['10.1.2.3', '10.1.2.3'],
  ] as const) {
    const blocks = intervalCIDRs(iv(a, b)).map(cidrInterval);
    let next = iv(a, b).lo;
    for (const x of blocks) {
      assert.equal(x.lo, next);
      next = x.hi + 1n;
    }
    assert.equal(next - 1n, iv(a, b).hi);
  }
});
