// Replays every reproduction in test/datapath/regressions/ (written by the
// differential fuzzer, or by hand in the same format) in both pod-network
// styles: the oracle must still give the recorded answer, and the datapath
// must agree with it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Cluster, NETWORK_STYLES } from '../harness/cluster.ts';
import { checkProbes } from '../harness/check.ts';
import { applyState } from '../harness/enforce.ts';
import { clusterSpecFromState } from '../harness/from-state.ts';
import { fuzzState } from '../harness/fuzz.ts';
import { loadRegressions, oracle, toProbe } from '../harness/regression.ts';
import { datapathSkip } from '../harness/requirements.ts';

const skip = datapathSkip();
const REGRESSIONS = loadRegressions();

test('regression files load and name their probes', () => {
  assert.ok(REGRESSIONS.length >= 1, 'test/datapath/regressions/ holds at least one case');
  for (const { file, regression } of REGRESSIONS) assert.ok(regression.probes.length >= 1, `${file} has no probes`);
});

for (const { file, regression } of REGRESSIONS) {
  describe(`regression ${file}: ${regression.description}`, { skip }, () => {
    for (const style of NETWORK_STYLES) {
      test(`${style} pod network`, async () => {
        // As the fuzzer judged it: tenancy on (it changes nothing for files without tenancy objects).
        const state = fuzzState(regression.objects);
        const ports = [...new Set(regression.probes.map((p) => p.port))];
        const extraPods = regression.unlistedPods.map((u) => ({
          key: u.key,
          node: u.node,
          ips: { v4: u.ipv4, v6: u.ipv6 },
          tcp: ports,
          udp: ports,
        }));
        const c = await Cluster.create(clusterSpecFromState(state, style, { extraPods, extraPorts: ports }));
        try {
          await applyState(c, state, { denyAction: regression.denyAction });
          const probes = regression.probes.map(toProbe);
          regression.probes.forEach((r, i) => {
            const v = oracle(c, state, probes[i]!);
            assert.equal(
              v.allowed ? 'allowed' : 'blocked',
              r.expect,
              `the oracle's answer changed for probe ${i} (${r.from} -> ${r.to}): ${v.egress.reason} ${v.ingress.reason}`,
            );
          });
          const wrong = await checkProbes(
            c,
            probes.map((probe, i) => ({ probe, allowed: regression.probes[i]!.expect === 'allowed' })),
          );
          if (wrong.length > 0) assert.fail(`${file}:\n${wrong.map((w) => `  ${w}`).join('\n')}`);
        } finally {
          await c.destroy();
        }
      });
    }
  });
}
