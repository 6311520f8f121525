// Differential fuzzing, bounded for CI: fixed seeds, a fixed number of random
// scenarios per pod-network style, every probe compared with verdict(). More:
// `npm run fuzz:datapath -- --runs 200` (or FUZZ_RUNS / FUZZ_SEED here).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Cluster, NETWORK_STYLES } from '../harness/cluster.ts';
import { fuzz, fuzzClusterSpec } from '../harness/fuzz.ts';
import { parseRegression } from '../harness/regression.ts';
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
    test(`seed ${seed}, ${RUNS} scenarios: every probe ends as the oracle says`, async () => {
      const report = await fuzz(c, { seed, runs: RUNS });
      if (!report.ok) assert.fail(`${report.summary}\n\n${report.reproduction ?? ''}`);
      assert.equal(report.runs, RUNS);
      assert.ok(report.probes >= RUNS, report.summary);
    });

    if (style === 'routed') {
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
        // What isolates: NetworkPolicies, NamespaceNetworkPolicies, or a tenancy switch (an
        // annotated namespace, an isolated Workspace), whichever the shrunk scenario kept: a few
        // (shrinking stops after 30 s here; tenancy gives it more to remove than NetworkPolicies alone).
        const isolating = r.objects.filter((o) => {
          const x = o as {
            kind?: string;
            metadata?: { annotations?: Record<string, string> };
            spec?: { networkIsolation?: boolean };
          };
          if (x.kind === 'NetworkPolicy' || x.kind === 'NamespaceNetworkPolicy') return true;
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
