// The biggest pod identity out of its pod peer map (compile/peer-split.ts):
// which identity is chosen, the set and its rule in the rendered text
// (appearing and disappearing with the counts), and the decisions of the
// ruleset walked packet by packet against the reference evaluator. The
// incremental paths are checked against fresh compiles in
// node-compiler.test.ts; real packets in test/datapath/peer-split.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileNode } from '../../src/compile/compile.ts';
import { chooseSplit, SPLIT_IDENTITIES, SPLIT_MIN } from '../../src/compile/peer-split.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { renderUpdate } from '../../src/nft/update.ts';
import { verdict } from '../../src/policy/verdict.ts';
import type { ClusterState, Pod } from '../../src/model/types.ts';
import type { CompiledRuleset } from '../../src/ruleset/ir.ts';
import { node, pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';
import { walk } from '../support/ir-eval.ts';

test('chooseSplit: identities with a chain and at least min addresses, by powers of two, then by key', () => {
  const chains: Record<string, string | undefined> = { a: 'A', b: 'B', c: undefined, d: 'D', e: 'E' };
  const chainOf = (k: string): string | undefined => chains[k];
  // a, b and d are all 2^10..2^11-1: the first key; c allows nothing; e is below the minimum.
  const counts = new Map([
    ['d', 2047],
    ['c', 5000],
    ['b', 1100],
    ['a', 1500],
    ['e', 1023],
  ]);
  assert.deepEqual(chooseSplit(counts, chainOf, SPLIT_MIN), [{ key: 'a', chain: 'A' }]);
  // b crossing 2^11 takes the place; a count within its power of two does not.
  counts.set('b', 2048);
  assert.deepEqual(chooseSplit(counts, chainOf, SPLIT_MIN), [{ key: 'b', chain: 'B' }]);
  counts.set('a', 2047);
  assert.deepEqual(chooseSplit(counts, chainOf, SPLIT_MIN), [{ key: 'b', chain: 'B' }]);
  // K identities in rank order; none below the minimum.
  assert.deepEqual(
    chooseSplit(counts, chainOf, SPLIT_MIN, 3).map((c) => c.key),
    ['b', 'a', 'd'],
  );
  assert.deepEqual(chooseSplit(new Map([['e', 1023]]), chainOf, SPLIT_MIN), []);
  assert.equal(chooseSplit(counts, chainOf, SPLIT_MIN).length, SPLIT_IDENTITIES);
  // The iteration order of the counts does not matter.
  const reversed = new Map([...counts].reverse());
  assert.deepEqual(chooseSplit(reversed, chainOf, SPLIT_MIN, 3), chooseSplit(counts, chainOf, SPLIT_MIN, 3));
});

const NODES = [node('node-1', ['192.168.100.1']), node('node-2', ['192.168.100.2'])];
const TARGET = pod('x', 'target', { labels: { app: 'db' }, ips: ['10.0.1.2'], node: 'node-1' });
const POLICIES = [
  // From web pods of every namespace, and from the pods of namespace y: two identities (and their overlap).
  policy('x', 'db', {
    podSelector: sel({ app: 'db' }),
    ingress: [
      rule([podPeer(sel({ app: 'web' }), sel())], [port('TCP', 80)]),
      rule([podPeer(sel(), sel({ ns: 'y' }))], [port('TCP', 81)]),
    ],
  }),
];

function remote(ns: string, i: number, app: string): Pod {
  return pod(ns, `p-${i}`, { labels: { app }, ips: [`10.0.2.${i + 10}`], node: 'node-2' });
}

function clusterOf(pods: readonly Pod[]): ClusterState {
  return state({
    pods: [TARGET, ...pods],
    policies: POLICIES,
    nodes: NODES,
    namespaces: [
      { name: 'x', labels: { ns: 'x' } },
      { name: 'y', labels: { ns: 'y' } },
      { name: 'z', labels: { ns: 'z' } },
    ],
  });
}

const split = (rs: CompiledRuleset) => rs.sets.filter((x) => x.split !== undefined);

/** Every remote pod's probes to the target (TCP 80 and 81), walked through the ruleset, against the evaluator. */
function checkDecisions(s: ClusterState, rs: CompiledRuleset, label: string): void {
  for (const p of s.pods) {
    if (p === TARGET) continue;
    for (const dport of [80, 81, 82]) {
      const want = verdict(s, { kind: 'pod', pod: p }, { kind: 'pod', pod: TARGET }, 'TCP', dport).ingress.allowed;
      const got = walk(rs, { family: 4, saddr: p.ips[0]!, daddr: TARGET.ips[0]!, proto: 'tcp', dport });
      assert.equal(got === 'accept', want, `${label}: ${p.namespace}/${p.name} port ${dport}`);
    }
  }
}

test('render: the biggest identity leaves the pod map for a set and a rule after the map, and comes back below the threshold', () => {
  const opts = { peerSplitMin: 3 };
  // Web pods in z (identity "web") and pods of y (identity "ns y"), one web pod in y (both).
  const small = [remote('z', 0, 'web'), remote('z', 1, 'web'), remote('y', 2, 'api'), remote('y', 3, 'web')];
  const s1 = clusterOf(small);
  const rs1 = compileNode(s1, 'node-1', opts);
  // Below the threshold (2, 1 and 1 addresses): nothing split, no set, no rule.
  assert.deepEqual(split(rs1), []);
  const text1 = renderRuleset(rs1);
  assert.doesNotMatch(text1, /-big/);
  assert.match(text1, /elements = \{ 10\.0\.2\.10 : jump /);
  checkDecisions(s1, rs1, 'none split');

  // A third web pod in z: "web" has 3 addresses, it leaves the map.
  const s2 = clusterOf([...small, remote('z', 4, 'web')]);
  const rs2 = compileNode(s2, 'node-1', opts);
  const [big] = split(rs2);
  assert.ok(big !== undefined);
  assert.equal(big.name, 'ingress-peers-v4-big');
  assert.deepEqual(
    big.elements.map((e) => (e.kind === 'addr' ? e.addr : '')),
    ['10.0.2.10', '10.0.2.11', '10.0.2.14'],
  );
  const text2 = renderRuleset(rs2);
  assert.match(
    text2,
    /\tset ingress-peers-v4-big \{\n\t\ttype ipv4_addr\n[^}]*elements = \{ 10\.0\.2\.10, 10\.0\.2\.11, 10\.0\.2\.14 \}/,
  );
  // The set's rule right after the map's lookup, before the ranges map.
  assert.match(
    text2,
    new RegExp(
      `chain ingress-peers \\{\\n[^\\n]*\\n\\t\\tip saddr vmap @ingress-peers-v4\\n\\t\\tip saddr @ingress-peers-v4-big jump ${big.split!.chain}\\n\\t\\tip saddr @ingress-peers-v4-recent jump ingress-recent-v4\\n\\t\\tip saddr vmap @ingress-ranges-v4\\n`,
    ),
  );
  // Each address in one of map and set: the map keeps the others (y's pods).
  const map = rs2.maps.find((m) => m.name === 'ingress-peers-v4')!;
  assert.deepEqual(
    map.elements.map((e) => e.key),
    ['10.0.2.12', '10.0.2.13'],
  );
  assert.ok(!map.elements.some((e) => e.chain === big.split!.chain));
  checkDecisions(s2, rs2, 'web split');
  // Deterministic: the same state renders the same text.
  assert.equal(renderRuleset(compileNode(s2, 'node-1', opts)), text2);

  // The update between the two: the set and its rule come, the addresses leave the map, in one script.
  const u = renderUpdate(rs1, rs2);
  assert.equal(u.kind, 'incremental');
  assert.match(u.text, /add set inet nft-netpol ingress-peers-v4-big/);
  assert.match(u.text, /delete element inet nft-netpol ingress-peers-v4 \{ 10\.0\.2\.10, 10\.0\.2\.11 \}/);
  const back = renderUpdate(rs2, rs1);
  assert.equal(back.kind, 'incremental');
  assert.match(back.text, /delete set inet nft-netpol ingress-peers-v4-big/);
  // The set goes after the rule naming it (the lookup chain is flushed first).
  assert.ok(back.text.indexOf('flush chain inet nft-netpol ingress-peers') < back.text.indexOf('delete set'));

  // Without the lowered threshold (the default 1024), nothing is split.
  assert.deepEqual(split(compileNode(s2, 'node-1')), []);

  // "ns y" grows to 4 (2^2): it outranks "web" (3, 2^1) and takes the set.
  const s3 = clusterOf([...small, remote('z', 4, 'web'), remote('y', 5, 'api'), remote('y', 6, 'api'), remote('y', 7, 'api')]);
  const rs3 = compileNode(s3, 'node-1', opts);
  const [big3] = split(rs3);
  assert.ok(big3 !== undefined && big3.split!.chain !== big.split!.chain);
  assert.deepEqual(
    big3.elements.map((e) => (e.kind === 'addr' ? e.addr : '')),
    ['10.0.2.12', '10.0.2.15', '10.0.2.16', '10.0.2.17'],
  );
  checkDecisions(s3, rs3, 'ns y split');
  const moved = renderUpdate(rs2, rs3);
  assert.equal(moved.kind, 'incremental');
});
