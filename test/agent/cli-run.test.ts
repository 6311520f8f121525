// `run` and `cleanup` exit codes that need no root: help, usage, bind failure,
// bad kubeconfig. Each runs the real CLI in a child process.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';

const MAIN = new URL('../../src/cli/main.ts', import.meta.url).pathname;
// --netns names a namespace that does not exist: any attempt to run nft would fail loudly.
const SAFE = ['--netns', 'nftnp-test-does-not-exist'];

async function cli(args: string[], env: Record<string, string> = {}) {
  const r = await execa(process.execPath, [MAIN, ...args], { reject: false, timeout: 30_000, env: { NODE_NAME: '', ...env } });
  return { code: r.exitCode, out: String(r.stdout), err: String(r.stderr) };
}

test('run --help and cleanup --help exit 0', async () => {
  const r = await cli(['run', '--help']);
  assert.equal(r.code, 0);
  assert.match(r.out, /Usage: nft-netpol-agent run --node NAME/);
  assert.match(r.out, /--drift-interval/);
  const c = await cli(['cleanup', '-h']);
  assert.equal(c.code, 0);
  assert.match(c.out, /Usage: nft-netpol-agent cleanup/);
});

test('usage errors exit 2 with the reason', async () => {
  const cases: [string[], RegExp][] = [
    [['run'], /usage error: --node \(or NODE_NAME\) is required/],
    [['run', '--node', 'n', '--deny-action', 'accept'], /--deny-action must be drop or reject/],
    [['run', '--node', 'n', '--frobnicate'], /frobnicate/],
    [['cleanup', '--table', 'a b'], /--table/],
  ];
  for (const [args, re] of cases) {
    const r = await cli(args);
    assert.equal(r.code, 2, args.join(' '));
    assert.match(r.err, re, args.join(' '));
    assert.match(r.err, /--help/);
  }
});

test('a port in use is a clear error, exit 1, before anything is applied; the start line names the build', async (t) => {
  const busy = createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  t.after(() => busy.close());
  const port = (busy.address() as { port: number }).port;
  const dir = await mkdtemp(join(tmpdir(), 'nftnp-run-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const r = await cli(
    ['run', '--node', 'n1', '--from-dir', dir, '--metrics-addr', `127.0.0.1:${port}`, '--debug-addr', '', ...SAFE],
    { NFTNP_COMMIT: '0123456789abcdef0123456789abcdef01234567' },
  );
  assert.equal(r.code, 1);
  const start = r.out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((l) => l['event'] === 'start');
  assert.equal(start?.['commit'], '0123456789abcdef0123456789abcdef01234567');
  assert.equal(start?.['nodejs'], process.version);
  assert.match(String(start?.['version']), /^\d+\.\d+\.\d+/);
  assert.match(
    r.err,
    new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port} for metrics \\(--metrics-addr\\): the address is already in use`),
  );
  assert.doesNotMatch(r.out, /"event":"apply"/);
});

test('an unreadable kubeconfig is a clear error, exit 1', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'nftnp-run-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const kc = join(dir, 'kubeconfig');
  await writeFile(kc, 'this: is: not: yaml: [');
  const r = await cli(['run', '--node', 'n1', '--metrics-addr', '', '--debug-addr', '', ...SAFE], { KUBECONFIG: kc });
  assert.equal(r.code, 1);
  assert.match(r.err, /cannot load the Kubernetes client configuration/);
});
