// Replays every reproduction in test/datapath/regressions/ (written by the
// differential fuzzer, or by hand in the same format) in both pod-network
// styles: the oracle must still give the recorded answer, and the datapath
// must agree with it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { NETWORK_STYLES } from '../harness/cluster.ts';
import { loadRegressions } from '../harness/regression.ts';
import { replayRegression } from '../harness/replay.ts';
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
        const r = await replayRegression(regression, style);
        assert.deepEqual(r.oracleChanged, [], `the oracle's answer changed in ${file}`);
        if (r.wrong.length > 0) assert.fail(`${file}:\n${r.wrong.map((w) => `  ${w}`).join('\n')}`);
      });
    }
  });
}
