// Optional conntrack cleanup of released pod IPs, in a scratch namespace.
// Needs root, ip and the conntrack tool (Debian package conntrack); the
// feature is optional, so without the tool the test is skipped, in CI too.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { execa } from 'execa';
import { readdir } from 'node:fs/promises';
import { conntrackAvailable, conntrackEach, deleteConntrack } from '../../src/agent/dataplane.ts';
import { createNetns, deleteNetns, uniquePrefix } from '../harness/netns.ts';
import { missingRequirements } from '../harness/requirements.ts';

const hasConntrack = spawnSync('conntrack', ['--version']).status === 0;
const skip =
  missingRequirements().length > 0
    ? `needs root and ip: ${missingRequirements().join('; ')}`
    : !hasConntrack
      ? 'conntrack is not installed (optional feature; Debian package conntrack)'
      : false;

/** A scratch namespace with conntrack entries inserted by hand, and its listing. */
async function scratchConntrack(t: TestContext, suffix: string) {
  const netns = `${uniquePrefix()}${suffix}`;
  await createNetns([netns]);
  t.after(() => deleteNetns([netns]));
  const ct = (args: string[]) => execa('ip', ['netns', 'exec', netns, 'conntrack', ...args], { reject: false });
  return {
    netns,
    /** An entry from src to dst: TCP to port 80 (established), or UDP to port 53. */
    insert: async (proto: 'tcp' | 'udp', src: string, dst: string, sport: number) => {
      const state = proto === 'tcp' ? ['--state', 'ESTABLISHED', '-u', 'ASSURED'] : [];
      const r = await ct([
        '-I',
        '-s',
        src,
        '-d',
        dst,
        '-p',
        proto,
        '--sport',
        String(sport),
        '--dport',
        proto === 'tcp' ? '80' : '53',
        '-t',
        '120',
        ...state,
      ]);
      assert.equal(r.exitCode, 0, r.stderr);
    },
    list: async (fam?: 'ipv4' | 'ipv6') => (await ct(['-L', ...(fam === undefined ? [] : ['-f', fam])])).stdout,
  };
}

test('entries to and from released IPs are deleted; others stay', { skip, timeout: 60_000 }, async (t) => {
  const c = await scratchConntrack(t, 'ct');
  assert.equal(await conntrackAvailable(c.netns), true);
  await c.insert('tcp', '10.0.0.1', '10.0.0.2', 1001); // from the released pod
  await c.insert('tcp', '10.0.0.3', '10.0.0.1', 1002); // to the released pod
  await c.insert('tcp', '10.0.0.3', '10.0.0.2', 1003); // unrelated
  const r = await deleteConntrack(c.netns, ['10.0.0.1', 'not-an-ip']);
  assert.deepEqual(r, { commands: 2, batched: true, failed: [] }, 'one deletion per direction of the valid IP, one process');
  const left = await c.list();
  assert.doesNotMatch(left, /10\.0\.0\.1\b/);
  assert.match(left, /src=10\.0\.0\.3 dst=10\.0\.0\.2/);
});

test(
  'the fallback after a failed batch: one process per command, nothing matched is no failure',
  { skip, timeout: 60_000 },
  async (t) => {
    const c = await scratchConntrack(t, 'cte');
    await c.insert('tcp', '10.0.2.1', '10.0.2.2', 3001);
    await c.insert('tcp', '10.0.2.3', '10.0.2.2', 3002); // unrelated
    const failed = await conntrackEach(c.netns, [
      ['-D', '-f', 'ipv4', '--orig-src', '10.0.2.1'],
      ['-D', '-f', 'ipv4', '--orig-dst', '10.0.2.1'], // matches nothing: exit code 1
      ['-D', '-f', 'ipv4', '--no-such-option', '10.0.2.9'],
    ]);
    assert.equal(failed.length, 1, failed.join('; '));
    assert.match(failed[0] ?? '', /^10\.0\.2\.9: /);
    const left = await c.list();
    assert.doesNotMatch(left, /src=10\.0\.2\.1 /);
    assert.match(left, /src=10\.0\.2\.3 dst=10\.0\.2\.2/);
  },
);

test('many released IPs: one conntrack -R for all of them, IPv4 and IPv6; others stay', { skip, timeout: 60_000 }, async (t) => {
  const c = await scratchConntrack(t, 'ctb');
  await c.insert('udp', '10.0.1.1', '10.0.9.9', 2001);
  await c.insert('udp', '10.0.9.9', '10.0.1.2', 2002);
  await c.insert('udp', 'fd00::1', 'fd00::99', 2003);
  await c.insert('udp', '10.0.9.9', '10.0.9.8', 2004); // unrelated
  assert.match(await c.list('ipv6'), /src=fd00::1 /, 'the IPv6 entry is there before');
  const r = await deleteConntrack(c.netns, ['10.0.1.1', '10.0.1.2', 'fd00::1', '10.0.1.3']);
  assert.deepEqual(r, { commands: 8, batched: true, failed: [] });
  const left = await c.list('ipv4');
  assert.doesNotMatch(left, /10\.0\.1\.[12]\b/);
  assert.doesNotMatch(await c.list('ipv6'), /fd00::1\b/);
  assert.match(left, /src=10\.0\.9\.9 dst=10\.0\.9\.8/);
  // The batch file is gone.
  assert.deepEqual(
    (await readdir('/dev/shm')).filter((f) => f.startsWith(`nft-netpol-conntrack-${process.pid}-`)),
    [],
  );
});
