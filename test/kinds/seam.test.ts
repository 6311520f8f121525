// The seam for policy kinds (src/kinds): a kind registered next to
// NetworkPolicy reaches the compiler, the reference evaluator and explain
// through its contributed policies alone, in registry order, and every
// allowance names its origin.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { compileNode, compileRules } from '../../src/compile/compile.ts';
import type { ContributedPolicy, PolicyKind, PolicyOrigin } from '../../src/kinds/kind.ts';
import { contributeNetworkPolicy, networkPolicyKind } from '../../src/kinds/network-policy.ts';
import { contributedPolicies, POLICY_KINDS } from '../../src/kinds/registry.ts';
import { listChange, recordListChange } from '../../src/model/list-diff.ts';
import { ChunkedList, type ReadonlyList } from '../../src/model/list.ts';
import { objectKey } from '../../src/model/types.ts';
import type { ClusterState, NetworkPolicy } from '../../src/model/types.ts';
import { decisionElementText, renderRuleset } from '../../src/nft/render.ts';
import { runNft } from '../../src/nft/exec.ts';
import { explainText } from '../../src/policy/explain.ts';
import { verdict, type Endpoint } from '../../src/policy/verdict.ts';
import { policyChainName, policyKeyId } from '../../src/ruleset/ids.ts';
import { haveNft } from '../nft/nft-support.ts';
import { chain, podChain, rules } from '../compile/ir-query.ts';
import { editedFrom } from '../support/chunked-edit.ts';
import { ALL, ns, pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';

// A toy kind: namespaces labelled isolate=yes isolate every pod for ingress;
// allowed: the same namespace (rule 0), and TCP 9100 from anywhere (rule 1,
// invalid when the namespace says so: fail closed).
const ISOLATION = 'Isolation';
const isolationKind: PolicyKind = {
  kind: ISOLATION,
  tier: 'allow-list',
  policies: (s: ClusterState) =>
    s.namespaces
      .filter((n) => n.labels.isolate === 'yes')
      .map((n): ContributedPolicy => {
        const origin: PolicyOrigin = { kind: ISOLATION, namespace: n.name, name: n.name, label: `isolation of ns ${n.name}` };
        const at = (index: number, what: string) => ({
          policy: origin,
          direction: 'ingress' as const,
          index,
          description: `isolation of ns ${n.name}: ${what}`,
        });
        return {
          origin,
          key: `${ISOLATION}/${n.name}`,
          namespace: n.name,
          podSelector: ALL,
          types: { ingress: true, egress: false },
          ingress: [
            { origin: at(0, 'same namespace'), peers: [podPeer(ALL)], ports: undefined, invalid: false },
            { origin: at(1, 'metrics'), peers: undefined, ports: [port('TCP', 9100)], invalid: n.labels.broken === 'yes' },
          ],
          egress: [],
        };
      }),
};
const KINDS = [networkPolicyKind, isolationKind];

const cluster = (nsLabels: Record<string, string>): ClusterState =>
  state({
    namespaces: [ns('shop', { isolate: 'yes', ...nsLabels }), ns('other')],
    pods: [
      pod('shop', 'web', { labels: { app: 'web' }, ips: ['10.0.0.1'] }),
      pod('shop', 'cart', { labels: { app: 'cart' }, ips: ['10.0.0.2'], node: 'node-2' }),
      pod('other', 'client', { labels: { app: 'client' }, ips: ['10.0.1.1'], node: 'node-2' }),
    ],
    policies: [
      policy('shop', 'web-from-client', {
        podSelector: sel({ app: 'web' }),
        ingress: [rule([podPeer(sel({ app: 'client' }), ALL)])],
      }),
    ],
  });

const ep = (s: ClusterState, key: string): Endpoint => {
  const p = s.pods.find((x) => objectKey(x) === key);
  assert.ok(p, key);
  return { kind: 'pod', pod: p };
};

test('NetworkPolicy is the first registered kind, and contributes each policy once with its origin', () => {
  assert.equal(POLICY_KINDS[0], networkPolicyKind);
  const s = cluster({});
  const [c] = contributedPolicies(s);
  assert.deepEqual(c?.origin, {
    kind: 'NetworkPolicy',
    namespace: 'shop',
    name: 'web-from-client',
    label: 'shop/web-from-client',
  });
  assert.equal(c?.ingress[0]?.origin.description, 'shop/web-from-client ingress[0]');
  assert.equal(contributedPolicies(s)[0], c, 'memoized per object');
});

function exactDiff<T>(a: readonly T[], b: readonly T[]): { removed: T[]; added: T[] } {
  const inA = new Set(a);
  const inB = new Set(b);
  return { removed: a.filter((x) => !inB.has(x)), added: b.filter((x) => !inA.has(x)) };
}

// A policy change gives a list that differs from the last one in a few
// places: its translation is patched from the last list's (network-policy.ts).
// The agent's lists are chunked, each edited from the last (sorted-view.ts);
// files and tests give arrays.
for (const shape of ['array', 'chunked'] as const) {
  test(`property (${shape}): the NetworkPolicy kind's list, patched from the last one, equals translating every policy`, () => {
    const pols = Array.from({ length: 12 }, (_, i) => {
      const p = policy('shop', `p${i}`, { podSelector: sel({ app: 'web' }), ingress: [rule([])] });
      return i % 4 === 3 ? { ...p, staged: true as const } : p;
    });
    const edit = fc.oneof(
      fc.record({ op: fc.constant('replace' as const), at: fc.nat(), by: fc.nat({ max: 11 }) }),
      fc.record({ op: fc.constant('delete' as const), at: fc.nat() }),
      fc.record({ op: fc.constant('insert' as const), at: fc.nat(), by: fc.nat({ max: 11 }) }),
    );
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.array(edit, { maxLength: 3 }), fc.boolean()), { maxLength: 10 }),
        fc.integer({ min: 1, max: 4 }),
        (steps, chunk) => {
          const empty = state({});
          let list = pols.slice(0, 8);
          let given: ReadonlyList<NetworkPolicy> = shape === 'array' ? list : ChunkedList.from(list, chunk);
          let prevGot: ReadonlyList<ContributedPolicy> | undefined;
          for (const [step, recorded] of steps) {
            const prevGiven = given;
            list = list.slice();
            for (const e of step) {
              const at = list.length === 0 ? 0 : e.at % list.length;
              // A fresh object (an edited policy), staged or not as its template.
              if (e.op === 'replace' && list.length > 0) list[at] = { ...pols[e.by]! };
              else if (e.op === 'delete') list.splice(at, 1);
              else if (e.op === 'insert') list.splice(at, 0, { ...pols[e.by]! });
            }
            given = prevGiven instanceof ChunkedList ? editedFrom(prevGiven, list) : list;
            // As the agent's source does: what changed, recorded (half the steps), found by the kind from it.
            if (recorded) recordListChange(prevGiven, given, exactDiff([...prevGiven], list));
            // The list as it is (state() would sort it).
            const got = networkPolicyKind.policies({ ...empty, policies: given });
            const want = list.filter((p) => p.staged !== true).map((p) => contributeNetworkPolicy(p));
            assert.deepEqual([...got], want);
            [...got].forEach((c, i) => assert.equal(c, want[i], 'the same translation object per policy'));
            // The kind records how its list changed (the grouping reads it): exactly the difference.
            const change = prevGot === undefined ? undefined : listChange(prevGot, got);
            if (change !== undefined) {
              const diff = exactDiff([...prevGot!], [...got]);
              assert.deepEqual(new Set(change.removed), new Set(diff.removed));
              assert.deepEqual(new Set(change.added), new Set(diff.added));
            }
            prevGot = got;
          }
        },
      ),
      { numRuns: 200, seed: 27 },
    );
  });
}

test('a registered kind is compiled: its chain, jumped to after the NetworkPolicies, named by its origin', () => {
  const s = cluster({});
  const c = compileRules(s, 'node-1', {}, KINDS);
  const iso = chain(c, policyChainName(policyKeyId('Isolation/shop'), 'ingress'));
  assert.ok(iso, 'the kind has its policy chain');
  assert.equal(iso.comment, 'ingress policy isolation of ns shop');
  assert.equal(iso.rules.length, 2);
  assert.deepEqual(
    rules(iso).map((r) => r.replace(/@\S+/g, '@SET')),
    ['ip saddr @SET accept comment "ingress[0]"', 'meta l4proto . th dport @SET accept comment "ingress[1]"'],
  );
  const web = podChain(c, 'shop', 'web', 'ingress');
  assert.ok(web);
  assert.deepEqual(
    web.rules.map((r) => r.comment),
    ['shop/web-from-client', 'isolation of ns shop', 'deny ingress to shop/web'],
  );
  assert.equal(c.stats.policies, 2);
  // Flattened into peer identities (what the kernel gets), its rules still name their origin.
  const flat = compileNode(s, 'node-1', {}, KINDS);
  // (The allow maps: each element goes to its first allowing rule's counting chain, and names every allowing rule.)
  const allowTexts = flat.decisions.flatMap((m) => m.elements.map(decisionElementText));
  assert.ok(
    allowTexts.some((e) => /"isolation of ns shop ingress\[1\]" : goto KUBE-NWPLCY-/.test(e)),
    allowTexts.join('\n'),
  );
  // Without the kind, only the NetworkPolicy is compiled.
  assert.equal(compileNode(s, 'node-1').stats.policies, 1);
});

test('an invalid contributed rule allows nothing, and the chain says so', () => {
  const c = compileRules(cluster({ broken: 'yes' }), 'node-1', {}, KINDS);
  const iso = chain(c, policyChainName(policyKeyId('Isolation/shop'), 'ingress'));
  assert.ok(iso);
  assert.equal(iso.comment, 'ingress policy (invalid ingress[1] allow nothing) isolation of ns shop');
  assert.equal(iso.rules.length, 1);
});

test('the evaluator judges a registered kind with NetworkPolicy semantics, naming the cause', () => {
  const s = cluster({});
  const v = (from: string, to: string, p = 80) => verdict(s, ep(s, from), ep(s, to), 'TCP', p, { kinds: KINDS });
  const same = v('shop/cart', 'shop/web');
  assert.equal(same.allowed, true);
  assert.deepEqual(same.ingress.policies, ['isolation of ns shop', 'shop/web-from-client']);
  assert.deepEqual(same.ingress.allowedBy, [
    {
      policy: 'isolation of ns shop',
      direction: 'ingress',
      rule: 0,
      kind: 'Isolation',
      description: 'isolation of ns shop: same namespace',
    },
  ]);
  assert.match(same.ingress.reason, /allowed by isolation of ns shop: same namespace\./);
  assert.match(explainText(same, ep(s, 'shop/cart'), ep(s, 'shop/web')), /isolation of ns shop: same namespace/);
  // The union: the NetworkPolicy still opens its path; the kind's metrics rule too.
  assert.equal(v('other/client', 'shop/web').allowed, true);
  assert.equal(v('other/client', 'shop/cart', 9100).allowed, true);
  const denied = v('other/client', 'shop/cart');
  assert.equal(denied.allowed, false);
  assert.match(denied.ingress.reason, /isolated for ingress by isolation of ns shop/);
  // Without the kind, shop/cart is not isolated at all.
  assert.equal(verdict(s, ep(s, 'other/client'), ep(s, 'shop/cart'), 'TCP', 80).allowed, true);
});

test('the ruleset with a registered kind is valid nft', async (t) => {
  if (!(await haveNft(t))) return;
  const text = renderRuleset(compileNode(cluster({}), 'node-1', { table: 'seam_test' }, KINDS));
  assert.deepEqual(await runNft(text, { check: true }), { ok: true });
});
