// Optional conntrack cleanup of released pod IPs, in a scratch namespace.
// Needs root, ip and the conntrack tool (Debian package conntrack); the
// feature is optional, so without the tool the test is skipped, in CI too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { execa } from 'execa';
import { conntrackAvailable, deleteConntrack } from '../../src/agent/dataplane.ts';
import { createNetns, deleteNetns, uniquePrefix } from '../harness/netns.ts';
import { missingRequirements } from '../harness/requirements.ts';

const hasConntrack = spawnSync('conntrack', ['--version']).status === 0;
const skip =
  missingRequirements().length > 0
    ? `needs root and ip: ${missingRequirements().join('; ')}`
    : !hasConntrack
      ? 'conntrack is not installed (optional feature; Debian package conntrack)'
      : false;

test('entries to and from released IPs are deleted; others stay', { skip, timeout: 60_000 }, async (t) => {
  const netns = `${uniquePrefix()}ct`;
  await createNetns([netns]);
  t.after(() => deleteNetns([netns]));
  assert.equal(await conntrackAvailable(netns), true);
  const insert = (src: string, dst: string, sport: number) =>
    execa('ip', [
      'netns',
      'exec',
      netns,
      'conntrack',
      '-I',
      '-s',
      src,
      '-d',
      dst,
      '-p',
      'tcp',
      '--sport',
      String(sport),
      '--dport',
      '80',
      '--state',
      'ESTABLISHED',
      '-t',
      '120',
      '-u',
      'ASSURED',
    ]);
  await insert('10.0.0.1', '10.0.0.2', 1001); // from the released pod
  await insert('10.0.0.3', '10.0.0.1', 1002); // to the released pod
  await insert('10.0.0.3', '10.0.0.2', 1003); // unrelated
  const r = await deleteConntrack(netns, ['10.0.0.1', 'not-an-ip']);
  assert.deepEqual(r.failed, []);
  assert.equal(r.deleted, 2, 'one command per direction found entries');
  const left = (await execa('ip', ['netns', 'exec', netns, 'conntrack', '-L'], { reject: false })).stdout;
  assert.doesNotMatch(left, /10\.0\.0\.1\b/);
  assert.match(left, /src=10\.0\.0\.3 dst=10\.0\.0\.2/);
});
