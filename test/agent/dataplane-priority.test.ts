// The counters listing runs beside the applies (outside their queue) and
// yields the CPU to them: its nft runs at COUNTERS_LISTING_NICE. A stand-in
// nft (a shell script) reports the niceness it runs at, read from /proc
// after the agent had the moment to lower it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { getPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { COUNTERS_LISTING_NICE, nftDataplane } from '../../src/agent/dataplane.ts';

const STAND_IN = `#!/bin/sh
sleep 0.3
echo "{\\"nice\\": $(awk '{print $19}' /proc/$$/stat)}"
`;

test('the counters listing runs at COUNTERS_LISTING_NICE unless told otherwise; the transactions at the agent priority', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'nnp-dataplane-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const nft = join(dir, 'nft');
  await writeFile(nft, STAND_IN);
  await chmod(nft, 0o755);
  const target = { table: 'nft-netpol', nftPath: nft, netns: undefined };
  const niceOf = (json: string | undefined): number => (JSON.parse(json ?? '{}') as { nice: number }).nice;

  const own = getPriority();
  assert.ok(own < COUNTERS_LISTING_NICE, 'the test runs at a priority the listing can be lowered from');
  const dp = nftDataplane(target, { session: false });
  assert.equal(niceOf(await dp.listCounters!()), COUNTERS_LISTING_NICE);

  const asAgent = nftDataplane(target, { session: false, countersNice: 0 });
  assert.equal(niceOf(await asAgent.listCounters!()), own);
  // The read-back and drift listings stay at the agent's priority: they run in the apply queue.
  assert.equal(niceOf(await dp.list()), own);
});
