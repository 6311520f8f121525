// The per-class tier layout's folded decisions (compile/tiers.ts
// foldedDecisions), on the benchmark's ClusterNetworkPolicies over a small
// cluster, where some identities decide a port and a range (folded into
// their chain) and others, named by many rules, decide more (maps). What the
// rules do is checked with packets in test/datapath/tier-fold.test.ts and
// against the kernel by the property tests (every layout).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withClusterPolicies } from '../../scripts/bench-render.ts';
import { generateCluster } from '../../scripts/gen-cluster.ts';
import { compileNode } from '../../src/compile/compile.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import type { Chain, CompiledRuleset } from '../../src/ruleset/ir.ts';

const cluster = generateCluster({ pods: 1_000, policies: 100, namespaces: 50, podsPerNode: 110, seed: 3 });
const state = withClusterPolicies(cluster.state, 'narrow');
const node = cluster.nodes[0] ?? '';

/** Identity chains of the tiers: `KUBE-PEERS-*` chains that decide with l4 rules or decision maps of protocol and port. */
function tierIdentityChains(rs: CompiledRuleset): Chain[] {
  const classMaps = new Set(rs.decisions.filter((m) => m.key === 'l4port' || m.key === 'l4proto').map((m) => m.name));
  return rs.chains.filter(
    (ch) =>
      ch.role === 'peers' &&
      ch.rules.some(
        (r) =>
          r.matches.some((m) => m.kind === 'l4port' || m.kind === 'l4proto') ||
          (r.verdict.kind === 'decisionVmap' && classMaps.has(r.verdict.map)),
      ),
  );
}

test('per-class: up to four decisions are rules (goto or return, in lookup order), more stay in maps', () => {
  const rs = compileNode(state, node, { tierLayout: 'per-class' });
  const chains = tierIdentityChains(rs);
  const byName = new Map(rs.decisions.map((m) => [m.name, m]));
  let folded = 0;
  let mapped = 0;
  for (const ch of chains) {
    const l4 = ch.rules.filter((r) => r.matches.some((m) => m.kind === 'l4port' || m.kind === 'l4proto'));
    const vmaps = ch.rules.filter((r) => r.verdict.kind === 'decisionVmap');
    assert.ok(l4.length === 0 || vmaps.length === 0, `${ch.name}: rules or maps, not both`);
    if (l4.length > 0) {
      folded++;
      assert.ok(l4.length <= 4, `${ch.name}: ${l4.length} folded rules`);
      for (const r of l4) assert.ok(r.verdict.kind === 'goto' || r.verdict.kind === 'return', ch.name);
      // Ports before protocol defaults: the order the maps were looked up in.
      const kinds = l4.map((r) => r.matches[0]?.kind);
      assert.deepEqual(
        kinds,
        [...kinds].sort((a, b) => (a === b ? 0 : a === 'l4port' ? -1 : 1)),
        ch.name,
      );
    } else {
      mapped++;
      let elements = 0;
      for (const r of vmaps) if (r.verdict.kind === 'decisionVmap') elements += byName.get(r.verdict.map)?.elements.length ?? 0;
      assert.ok(elements > 4, `${ch.name}: ${elements} decisions in maps`);
    }
  }
  assert.ok(folded > 0 && mapped > 0, `folded ${folded}, in maps ${mapped}`);
  // The text says the same: `meta l4proto tcp th dport N goto KUBE-NWPLCY-...`.
  const text = renderRuleset(rs);
  assert.match(text, /\n\t\tmeta l4proto tcp th dport \d+ goto KUBE-NWPLCY-[0-9a-f]{12}-(IN|EG)-\d+\n/);
  assert.match(text, /\n\t\tmeta l4proto tcp th dport \d+-\d+ goto KUBE-NWPLCY-/);
});

test('the shared layout is not folded: its identities decide with maps keyed by the local address', () => {
  const rs = compileNode(state, node, { tierLayout: 'shared' });
  assert.equal(tierIdentityChains(rs).length, 0);
  // (The chains of held-out peer addresses, nft/recent-peers.ts, go to NetworkPolicy identities.)
  const recent = /^(ingress|egress)-recent-v[46]$/;
  assert.ok(!rs.chains.some((ch) => !recent.test(ch.name) && ch.rules.some((r) => r.verdict.kind === 'goto')));
  assert.ok(rs.decisions.some((m) => m.key === 'port' || m.key === 'proto'));
});
