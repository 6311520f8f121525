// Optional conntrack cleanup of released pod IPs, in a scratch namespace.
// Needs root, ip and the conntrack tool (Debian package conntrack); the
// feature is optional, so without the tool the test is skipped, in CI too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { execa } from 'execa';
import { readdir } from 'node:fs/promises';
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
  assert.deepEqual(r, { commands: 2, batched: false, failed: [] }, 'one deletion per direction of the valid IP');
  const left = (await execa('ip', ['netns', 'exec', netns, 'conntrack', '-L'], { reject: false })).stdout;
  assert.doesNotMatch(left, /10\.0\.0\.1\b/);
  assert.match(left, /src=10\.0\.0\.3 dst=10\.0\.0\.2/);
});

test('many released IPs: one conntrack -R for all of them, IPv4 and IPv6; others stay', { skip, timeout: 60_000 }, async (t) => {
  const netns = `${uniquePrefix()}ctb`;
  await createNetns([netns]);
  t.after(() => deleteNetns([netns]));
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
      'udp',
      '--sport',
      String(sport),
      '--dport',
      '53',
      '-t',
      '120',
    ]);
  await insert('10.0.1.1', '10.0.9.9', 2001);
  await insert('10.0.9.9', '10.0.1.2', 2002);
  await insert('fd00::1', 'fd00::99', 2003);
  await insert('10.0.9.9', '10.0.9.8', 2004); // unrelated
  const list = async (fam: string) =>
    (await execa('ip', ['netns', 'exec', netns, 'conntrack', '-L', '-f', fam], { reject: false })).stdout;
  assert.match(await list('ipv6'), /src=fd00::1 /, 'the IPv6 entry is there before');
  const r = await deleteConntrack(netns, ['10.0.1.1', '10.0.1.2', 'fd00::1', '10.0.1.3']);
  assert.deepEqual(r, { commands: 8, batched: true, failed: [] });
  const left = await list('ipv4');
  const left6 = await list('ipv6');
  assert.doesNotMatch(left, /10\.0\.1\.[12]\b/);
  assert.doesNotMatch(left6, /fd00::1\b/);
  assert.match(left, /src=10\.0\.9\.9 dst=10\.0\.9\.8/);
  // The batch file is gone.
  assert.deepEqual(
    (await readdir('/dev/shm')).filter((f) => f.startsWith(`nft-netpol-conntrack-${process.pid}-`)),
    [],
  );
});
