// Differential fuzzing, bounded for CI: fixed seeds, a fixed number of random
// scenarios per pod-network style, every probe compared with verdict(). More:
// `npm run fuzz:datapath -- --runs 200` (or FUZZ_RUNS / FUZZ_SEED here).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Cluster, NETWORK_STYLES } from '../harness/cluster.ts';
import { fuzz, fuzzClusterSpec } from '../harness/fuzz.ts';
import { parseRegression } from '../harness/regression.ts';
import { replayRegression } from '../harness/replay.ts';
import { datapathSkip } from '../harness/requirements.ts';

const skip = datapathSkip();
const RUNS = Number(process.env.FUZZ_RUNS ?? 25);
const SEEDS: Record<string, number> = { routed: 20240611, bridged: 20240612 };

for (const style of NETWORK_STYLES) {
  describe(`differential fuzzing against verdict(), ${style} pod network`, { skip }, () => {
    let c: Cluster;
    before(async () => {
      c = await Cluster.create(fuzzClusterSpec(style));
    });
    after(async () => {
      await c?.destroy();
    });

    const seed = process.env.FUZZ_SEED === undefined ? SEEDS[style]! : Number(process.env.FUZZ_SEED);
    test(`seed ${seed}, ${RUNS} scenarios: every probe ends as the oracle says`, async (t) => {
      const report = await fuzz(c, { seed, runs: RUNS });
      t.diagnostic(report.summary);
      if (!report.ok) assert.fail(`${report.summary}\n\n${report.reproduction ?? ''}`);
      assert.equal(report.runs, RUNS);
      assert.ok(report.probes >= RUNS, report.summary);
      // ClusterNetworkPolicies were exercised: about half the scenarios hold some, and their
      // rules decided probes with every action (a Pass handing probes on to the next tier).
      if (RUNS >= 20) {
        assert.ok(report.cnpScenarios >= RUNS / 5 && report.cnpScenarios < RUNS, report.summary);
        const { Accept, Deny, Pass } = report.tiered;
        assert.ok(Accept >= 1 && Deny >= 1 && Pass >= 1 && Accept + Deny + Pass >= 10, report.summary);
      }
    });

    if (style === 'routed') {
      test('a deliberately broken tier datapath (ClusterNetworkPolicy Deny rules accept) is found, shrunk to a regression holding the CNP, which replays clean on the real ruleset', async () => {
        const broken = (text: string): string =>
          text.replace(/counter (?:drop|reject with [a-z -]+) comment "([^"]*: Deny)"/g, 'counter accept comment "$1"');
        const report = await fuzz(c, { seed: 11, runs: 40, shrinkBudgetMs: 30_000, mutate: broken });
        assert.equal(report.ok, false, report.summary);
        const r = parseRegression(report.reproduction ?? '', 'reproduction');
        assert.ok(r.probes.length >= 1 && r.probes.every((p) => p.expect === 'blocked'), report.reproduction);
        // The YAML carries the deciding ClusterNetworkPolicies (and the nodes with their labels).
        const named = (kind: string): string[] =>
          r.objects.flatMap((o) => {
            const x = o as { kind?: string; metadata?: { name?: string } };
            return x.kind === kind ? [x.metadata?.name ?? ''] : [];
          });
        const deciding = new Set(
          r.probes.flatMap((p) => [...(p.reason ?? '').matchAll(/ClusterNetworkPolicy (\S+) \(/g)].map((m) => m[1]!)),
        );
        assert.ok(deciding.size >= 1, report.reproduction);
        for (const name of deciding)
          assert.ok(named('ClusterNetworkPolicy').includes(name), `${name} is missing:\n${report.reproduction}`);
        assert.equal(named('Node').length, 2, report.reproduction);
        // As a regression file: the real ruleset passes it, the broken one does not.
        const real = await replayRegression(r, style);
        assert.deepEqual([...real.oracleChanged, ...real.wrong], [], report.reproduction);
        const again = await replayRegression(r, style, broken);
        assert.ok(again.wrong.length >= 1, `the broken ruleset passes the reproduction:\n${report.reproduction}`);
      });

      test('a deliberately broken ruleset (IPv6 egress never dispatched) is found and shrunk to a small reproduction', async () => {
        const report = await fuzz(c, {
          seed: 5,
          runs: 30,
          shrinkBudgetMs: 30_000,
          mutate: (text) => text.replace(/^\s*ip6 saddr vmap @egress-v6$/m, ''),
        });
        assert.equal(report.ok, false, report.summary);
        const r = parseRegression(report.reproduction ?? '', 'reproduction');
        assert.ok(r.probes.length >= 1 && r.probes.every((p) => p.family === 6 && p.expect === 'blocked'), report.reproduction);
        // What isolates: NetworkPolicies, NamespaceNetworkPolicies, ClusterNetworkPolicies (a Deny), or a tenancy switch (an
        // annotated namespace, an isolated Workspace), whichever the shrunk scenario kept: a few
        // (shrinking stops after 30 s here; tenancy gives it more to remove than NetworkPolicies alone).
        const isolating = r.objects.filter((o) => {
          const x = o as {
            kind?: string;
            metadata?: { annotations?: Record<string, string> };
            spec?: { networkIsolation?: boolean };
          };
          if (x.kind === 'NetworkPolicy' || x.kind === 'NamespaceNetworkPolicy' || x.kind === 'ClusterNetworkPolicy') return true;
          if (x.kind === 'Namespace') return x.metadata?.annotations?.['kubesphere.io/network-isolate'] === 'enabled';
          return x.kind === 'Workspace' && x.spec?.networkIsolation === true;
        });
        assert.ok(
          isolating.length >= 1 && isolating.length <= 6,
          `shrunk to ${isolating.length} policies or isolation switches:\n${report.reproduction}`,
        );
      });
    }
  });
}
