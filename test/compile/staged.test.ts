// The staged policies' shadow path as compiled (compile/staged.ts): nothing
// changes without a staged policy selecting a local pod (byte-identical
// text); with one, the enforced ruleset is unchanged but for one jump before
// the deny verdict of affected pods, the copy run after a denial can never
// accept, and the copy run after an accept can never deny.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileNode } from '../../src/compile/compile.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import type { Chain, CompiledRuleset } from '../../src/ruleset/ir.ts';
import type { ClusterState, NetworkPolicy } from '../../src/model/types.ts';
import { withClusterPolicies } from '../../scripts/bench-render.ts';
import { generateCluster } from '../../scripts/gen-cluster.ts';
import { pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';

const staged = (p: NetworkPolicy): NetworkPolicy => ({ ...p, staged: true });
const pods = [
  pod('a', 'web', { labels: { app: 'web' }, ips: ['10.0.0.2', 'fd00::2'] }),
  pod('a', 'db', { labels: { app: 'db' }, ips: ['10.0.0.3'] }),
  pod('b', 'x', { labels: { app: 'x' }, node: 'node-2', ips: ['10.0.1.2'] }),
];
const dbFromWeb = policy('a', 'db-from-web', {
  podSelector: sel({ app: 'db' }),
  ingress: [rule([podPeer(sel({ app: 'web' }))])],
});
const dbOn80 = policy('a', 'db-on-80', {
  podSelector: sel({ app: 'db' }),
  ingress: [rule([podPeer(undefined, sel())], [port('TCP', 80)])],
});
const webNoEgress = policy('a', 'web-no-egress', { podSelector: sel({ app: 'web' }), types: { ingress: false, egress: true } });
const OPTS = [{}, { denyAction: 'reject' as const, logDenied: { group: 3, ratePerSecond: 5, burst: 5 } }];

/** E as it would be without the shadow path: shadow objects and the jumps into them removed. */
function enforcedPart(c: CompiledRuleset): string {
  const isShadowName = (n: string): boolean => n.startsWith('STG-') || n.startsWith('stg-');
  const chains = c.chains
    .filter((ch) => !isShadowName(ch.name) && ch.shadow !== true)
    .map((ch) => ({ ...ch, rules: ch.rules.filter((r) => !(r.verdict.kind === 'jump' && isShadowName(r.verdict.chain))) }));
  return renderRuleset({
    ...c,
    chains,
    sets: c.sets.filter((s) => !isShadowName(s.name)),
    maps: c.maps.filter((m) => m.shadow !== true && !isShadowName(m.name)),
    decisions: c.decisions.filter((m) => !isShadowName(m.name)),
  });
}

test('no staged policy selecting a local pod: the same text as without the annotation', () => {
  for (const o of OPTS) {
    const plain = renderRuleset(compileNode(state({ pods, policies: [dbFromWeb] }), 'node-1', o));
    // x is on node-2: a staged policy selecting it adds nothing on node-1.
    const elsewhere = policy('b', 'x-only', { podSelector: sel({ app: 'x' }) });
    assert.equal(renderRuleset(compileNode(state({ pods, policies: [dbFromWeb, staged(elsewhere)] }), 'node-1', o)), plain);
    // A generated cluster with ClusterNetworkPolicies: staging nothing is no change at all.
    const cl = withClusterPolicies(
      generateCluster({ pods: 120, policies: 15, namespaces: 5, podsPerNode: 30, seed: 9 }).state,
      'narrow',
    );
    const noop: ClusterState = { ...cl, policies: cl.policies.map((p) => ({ ...p })) };
    assert.equal(renderRuleset(compileNode(noop, 'node-00001', o)), renderRuleset(compileNode(cl, 'node-00001', o)));
  }
});

test("staged policies leave the enforced ruleset as it is, but for the jump before an affected pod's deny verdict", () => {
  const cl = withClusterPolicies(
    generateCluster({ pods: 120, policies: 15, namespaces: 5, podsPerNode: 30, seed: 9 }).state,
    'narrow',
  );
  const stagedHalf: ClusterState = {
    ...cl,
    policies: [...cl.policies, ...cl.policies.map((p) => ({ ...p, name: `${p.name}-s`, staged: true as const }))],
    clusterPolicies: (cl.clusterPolicies ?? []).map((p, i) => (i % 2 === 0 ? { ...p, staged: true as const } : p)),
  };
  const enforcedOnly: ClusterState = { ...cl, clusterPolicies: (cl.clusterPolicies ?? []).filter((_, i) => i % 2 !== 0) };
  for (const o of OPTS) {
    const c = compileNode(stagedHalf, 'node-00001', o);
    assert.ok(
      c.chains.some((ch) => ch.shadow === true),
      'a shadow path was built',
    );
    assert.equal(enforcedPart(c), renderRuleset(compileNode(enforcedOnly, 'node-00001', o)));
  }
});

function byPrefix(c: CompiledRuleset, prefix: string): Chain[] {
  return c.chains.filter((ch) => ch.name.startsWith(prefix));
}

test('the copy after a denial never accepts and ends every pod chain finally; the copy after an accept never denies', () => {
  for (const o of OPTS) {
    const c = compileNode(
      state({
        pods,
        policies: [dbFromWeb, webNoEgress, staged(dbOn80), staged(policy('a', 'web-in', { podSelector: sel({ app: 'web' }) }))],
      }),
      'node-1',
      o,
    );
    const den = byPrefix(c, 'STG-DEN-');
    const acc = byPrefix(c, 'STG-ACC-');
    assert.ok(den.length > 0 && acc.length > 0);
    for (const ch of den) {
      assert.ok(!ch.rules.some((r) => r.verdict.kind === 'accept'), `${ch.name} accepts`);
      if (ch.role === 'pod') {
        const last = ch.rules.at(-1)?.verdict;
        assert.ok(
          last?.kind === 'drop' || last?.kind === 'reject' || (last?.kind === 'jump' && last.chain.startsWith('STG-WA-')),
          `${ch.name} ends in ${JSON.stringify(last)}`,
        );
      }
    }
    for (const ch of acc)
      assert.ok(!ch.rules.some((r) => r.verdict.kind === 'drop' || r.verdict.kind === 'reject'), `${ch.name} denies`);
    // Would-allow tallies deny (the enforced action); would-deny tallies accept; both count.
    for (const ch of byPrefix(c, 'STG-WA-').filter((x) => x.role === 'tally')) {
      assert.ok(
        ch.rules.some((r) => r.counter && (r.verdict.kind === 'drop' || r.verdict.kind === 'reject')),
        ch.name,
      );
      assert.ok(!ch.rules.some((r) => r.verdict.kind === 'accept'), ch.name);
    }
    for (const ch of byPrefix(c, 'STG-WD-').filter((x) => x.role === 'tally'))
      assert.ok(
        ch.rules.some((r) => r.counter && r.verdict.kind === 'accept'),
        ch.name,
      );
    // Tallies for exactly the affected pods and directions: db ingress, web ingress; no "would deny"
    // for db: enforced db-from-web isolates it already and only a staged NetworkPolicy selects it.
    assert.deepEqual(
      c.chains.filter((ch) => ch.role === 'tally').map((ch) => ch.comment),
      ['staged: would deny ingress to a/web', 'staged: would allow ingress to a/db', 'staged: would allow ingress to a/web'],
    );
    // The enforced pod chain of db (isolated by db-from-web) enters the copy right before its deny.
    const dbIn = c.chains.find((ch) => ch.role === 'pod' && ch.comment === 'ingress of pod a/db');
    const at = dbIn?.rules.findIndex((r) => r.verdict.kind === 'jump' && r.verdict.chain.startsWith('STG-DEN-')) ?? -1;
    assert.ok(at > 0);
    assert.ok(dbIn!.rules.slice(at + 1).every((r) => r.verdict.kind === 'drop' || r.verdict.kind === 'reject'));
  }
});

test('no after-accept path for a pod enforced NetworkPolicies isolate where only staged NetworkPolicies select it; a staged ClusterNetworkPolicy keeps it', () => {
  const dbIsolated = state({ pods, policies: [dbFromWeb, staged(dbOn80)] });
  const c = compileNode(dbIsolated, 'node-1', {});
  // Allow-lists only add: nothing E accepts for db can be denied, so no would-deny path at all.
  assert.ok(!c.chains.some((ch) => ch.base !== undefined && ch.shadow === true), 'no staged base chain');
  assert.deepEqual(byPrefix(c, 'STG-ACC-'), []);
  assert.ok(byPrefix(c, 'STG-DEN-').length > 0, 'the would-allow path stays');
  // Not isolated by an enforced policy: the staged one may deny what E accepts.
  const dbOpen = compileNode(state({ pods, policies: [staged(dbOn80)] }), 'node-1', {});
  assert.ok(dbOpen.chains.some((ch) => ch.base !== undefined && ch.shadow === true));
  assert.ok(byPrefix(dbOpen, 'STG-ACC-').length > 0);
  // A staged ClusterNetworkPolicy selecting db decides before the NetworkPolicy tier: it may deny.
  const cnp = compileNode(
    {
      ...dbIsolated,
      clusterPolicies: [
        {
          name: 'deny-web',
          sourceKind: 'ClusterNetworkPolicy',
          tier: 'Admin',
          priority: 1,
          subject: { namespaceSelector: sel(), podSelector: sel({ app: 'db' }) },
          ingress: [
            {
              name: 'no-web',
              action: 'Deny',
              peers: [{ kind: 'pods', namespaceSelector: sel(), podSelector: sel({ app: 'web' }) }],
              protocols: undefined,
              invalid: false,
            },
          ],
          egress: [],
          errors: [],
          staged: true,
        },
      ],
    },
    'node-1',
    {},
  );
  assert.ok(cnp.chains.some((ch) => ch.role === 'tally' && ch.comment === 'staged: would deny ingress to a/db'));
  assert.ok(byPrefix(cnp, 'STG-ACC-').length > 0);
});

test('the denied path asks the shadow copy only for the ports staged allow-lists name; a staged default-deny adds no jump there', () => {
  const podChain = (c: CompiledRuleset): Chain | undefined =>
    c.chains.find(
      (ch) => ch.role === 'pod' && !ch.name.startsWith('STG-') && ch.rules.some((r) => r.comment === 'deny ingress to a/db'),
    );
  const shadowJump = (ch: Chain | undefined) =>
    ch?.rules.find((r) => r.verdict.kind === 'jump' && r.verdict.chain.startsWith('STG-'));
  // Enforced: db only from web. Staged: db on TCP 80 from anywhere.
  const withPorts = compileNode(state({ pods, policies: [dbFromWeb, staged(dbOn80)] }), 'node-1');
  const jump = shadowJump(podChain(withPorts));
  assert.ok(jump !== undefined, 'the denied path still asks the shadow copy');
  assert.equal(jump.matches.length, 1);
  const m = jump.matches[0];
  assert.ok(m?.kind === 'portSet');
  const set = withPorts.sets.find((s) => s.name === m.set);
  assert.deepEqual(set?.elements, [{ kind: 'proto-port', proto: 'tcp', port: 80 }]);
  // A staged default-deny (no rules) cannot allow anything: no jump.
  const denyAll = policy('a', 'db-deny-all', { podSelector: sel({ app: 'db' }) });
  const defaultDeny = compileNode(state({ pods, policies: [dbFromWeb, staged(denyAll)] }), 'node-1');
  assert.notEqual(podChain(defaultDeny), undefined);
  assert.equal(shadowJump(podChain(defaultDeny)), undefined);
  assert.ok(!defaultDeny.sets.some((s) => s.comment?.startsWith("staged policies' ports") === true), 'no empty port set');
});
