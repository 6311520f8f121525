// The agent's side of private script files failing mid-run (cli/run.ts
// watchPrivateFiles): every script that no private file took is counted in
// nftnp_private_file_failures_total, a warning is logged when they start
// failing (once, not per script), a line when they work again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { watchPrivateFiles } from '../../src/cli/run.ts';
import {
  onPrivateFiles,
  privateFileFailures,
  removePrivateFile,
  usePrivateDir,
  writePrivateFile,
} from '../../src/nft/private-file.ts';
import { captureLogger, metricValue, testMetrics } from '../agent/fakes.ts';

test('private files failing mid-run: counted per script, one warning, one line when they work again', async () => {
  const good = mkdtempSync(join(tmpdir(), 'nftnp-watch-'));
  const before = usePrivateDir(good);
  const { metrics } = testMetrics();
  const { log, lines } = captureLogger();
  const write = (): void => {
    const p = writePrivateFile('tx', 'x');
    if (p !== undefined) removePrivateFile(p);
  };
  try {
    write();
    // Failures before the agent watched (the start's probe) are counted too.
    usePrivateDir('/nonexistent-dir');
    write();
    const early = privateFileFailures();
    assert.ok(early >= 1);
    watchPrivateFiles(metrics, log, true);
    assert.equal(await metricValue(metrics, 'nftnp_private_file_failures_total'), early);
    // Already failing at start (the preflight warned): no second warning.
    write();
    write();
    assert.equal(await metricValue(metrics, 'nftnp_private_file_failures_total'), early + 2);
    assert.deepEqual(
      lines.filter((l) => l['event'] === 'private-files'),
      [],
    );
    usePrivateDir(good);
    write();
    write();
    usePrivateDir('/nonexistent-dir');
    write();
    write();
    write();
    assert.equal(await metricValue(metrics, 'nftnp_private_file_failures_total'), early + 5);
    const said = lines.filter((l) => l['event'] === 'private-files');
    assert.deepEqual(
      said.map((l) => [l['level'], String(l['msg']).split(' (')[0]]),
      [
        [30, 'nft scripts go through private files again'],
        [40, 'nft scripts go through pipes'],
      ],
    );
    assert.match(String(said[1]?.['detail']), /nonexistent-dir/);
  } finally {
    onPrivateFiles(undefined);
    usePrivateDir(before);
    rmSync(good, { recursive: true, force: true });
  }
});
