// `status` where a user first meets it: right after an API server restart
// (429 "storage is (re)initializing" with Retry-After, 503), and without a
// usable kubeconfig (none, a name that does not exist, a directory, garbage,
// a plain-HTTP server, nothing listening). Each failure is one line on stderr
// and exit code 1; a server that becomes ready within the retries is simply
// read. Against the test API server, which answers 429/503 as a real one does.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { statusCommand, type StatusOptions } from '../../src/cli/status.ts';
import { DEFAULT_RETRY, type RetryPolicy } from '../../src/kube/api-retry.ts';
import { FakeApiServer, namespace, node, pod } from '../support/fake-apiserver.ts';

const AGENT_NS = 'nft-netpol-system';
const ROOT = join(import.meta.dirname, '..', '..');

async function server(t: TestContext): Promise<FakeApiServer> {
  const api = await FakeApiServer.start();
  t.after(() => api.close());
  api.create('namespaces', namespace('shop'));
  api.create('nodes', node('node-1', ['172.18.0.11']));
  api.create('pods', pod('shop', 'web', { app: 'web' }, 'node-1', '10.244.1.10'));
  api.create('leases', {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { namespace: AGENT_NS, name: 'node-1' },
    spec: { holderIdentity: 'nft-netpol-agent/node-1', leaseDurationSeconds: 90, renewTime: new Date().toISOString() },
  });
  api.create('nodepolicystatuses', {
    apiVersion: 'nft-netpol.io/v1alpha1',
    kind: 'NodePolicyStatus',
    metadata: { name: 'node-1' },
    spec: { nodeName: 'node-1' },
    status: { inSync: true, lastApplyResult: 'Applied', policies: [] },
  });
  return api;
}

/** A retry policy that records the waits asked for instead of sleeping them. */
function recording(over: Partial<RetryPolicy> = {}): { policy: RetryPolicy; waits: number[] } {
  const waits: number[] = [];
  return {
    waits,
    policy: {
      ...DEFAULT_RETRY,
      ...over,
      sleep: (ms) => {
        waits.push(ms);
        return Promise.resolve();
      },
    },
  };
}

async function run(
  argv: string[],
  opts: StatusOptions,
  api?: FakeApiServer,
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io = { out: (x: string) => (out += `${x}\n`), err: (x: string) => (err += `${x}\n`) };
  const code = await statusCommand([...argv, '--agent-namespace', AGENT_NS], io, api?.kubeConfig(), opts);
  return { code, out, err };
}

const STORAGE = { retryAfterSeconds: 1, message: 'storage is (re)initializing' };

test('429 "storage is (re)initializing" with Retry-After: every request waits as asked and the status is read', async (t) => {
  const api = await server(t);
  api.failNext(4, 429, STORAGE);
  const { policy, waits } = recording();
  const r = await run([], { retry: policy }, api);
  assert.equal(r.code, 0, r.err + r.out);
  assert.equal(r.err, '');
  assert.match(r.out, /Everything is in force/);
  assert.deepEqual(waits, [1000, 1000, 1000, 1000], 'one wait of Retry-After per 429');
  assert.equal(api.requests.filter((q) => q.status === 429).length, 4);
});

test('with the real clock: two 429s then the answer (Retry-After: 1 is slept)', async (t) => {
  const api = await server(t);
  api.failNext(2, 429, STORAGE);
  const r = await run([], { retry: DEFAULT_RETRY }, api);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /Everything is in force/);
  // Each refused request was asked again and answered.
  const refused = api.requests.filter((q) => q.status === 429).map((q) => q.path);
  for (const p of refused)
    assert.ok(
      api.requests.some((q) => q.path === p && q.status === 200),
      p,
    );
});

test('503 without Retry-After waits the default second; other errors are not retried', async (t) => {
  const api = await server(t);
  api.failNext(1, 503);
  const { policy, waits } = recording();
  assert.equal((await run([], { retry: policy }, api)).code, 0);
  assert.deepEqual(waits, [1000]);
  api.failNext(1, 500, { retryAfterSeconds: 1 });
  const again = recording();
  const r = await run([], { retry: again.policy }, api);
  assert.equal(r.code, 1);
  assert.deepEqual(again.waits, [], '500 is final');
  assert.match(r.err, /^error: 500 InternalError: injected failure 500\n$/);
});

test('a server that stays unready: one clear line after the bounded retries, exit 1', async (t) => {
  const api = await server(t);
  api.failNext(1000, 429, STORAGE);
  const { policy, waits } = recording();
  const r = await run([], { retry: policy }, api);
  assert.equal(r.code, 1);
  assert.equal(r.out, '');
  assert.match(
    r.err,
    /^error: the API server is not ready: 429 TooManyRequests: storage is \(re\)initializing \(gave up after 10 attempts and 9 s of waiting; Retry-After asked for 1 s more\); try again later\n$/,
  );
  assert.ok(waits.every((w) => w === 1000));
  // A Retry-After beyond the total bound ends the retries at once.
  api.clearFaults();
  api.failNext(1000, 503, { retryAfterSeconds: 120 });
  const long = recording();
  const r2 = await run([], { retry: long.policy }, api);
  assert.equal(r2.code, 1);
  assert.deepEqual(long.waits, []);
  assert.match(
    r2.err,
    /^error: the API server is not ready: 503 ServiceUnavailable: .*gave up after 1 attempt and 0 s.*120 s more/,
  );
  api.clearFaults();
});

// ---- kubeconfigs

function scratch(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'status-kubeconfig-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const kubeconfig = (server: string, skipTLSVerify: boolean): string =>
  [
    'apiVersion: v1',
    'kind: Config',
    `clusters: [{name: c, cluster: {server: "${server}"${skipTLSVerify ? ', insecure-skip-tls-verify: true' : ''}}}]`,
    'users: [{name: u, user: {token: t}}]',
    'contexts: [{name: x, context: {cluster: c, user: u}}]',
    'current-context: x',
    '',
  ].join('\n');

test('no usable kubeconfig: one line each, naming the file and the fix, exit 1', async (t) => {
  const dir = scratch(t);
  const home = join(dir, 'home');
  mkdirSync(home);
  const garbage = join(dir, 'garbage');
  writeFileSync(garbage, 'clusters: [\n');
  const http = join(dir, 'http');
  writeFileSync(http, kubeconfig('http://127.0.0.1:8080', false));
  const cases: [string, string[], StatusOptions['env'], RegExp][] = [
    [
      'none anywhere',
      [],
      { HOME: home },
      new RegExp(
        `^error: no kubeconfig: set KUBECONFIG or --kubeconfig, or create ${home}/\\.kube/config \\(not in a pod either`,
      ),
    ],
    [
      'KUBECONFIG names no file',
      [],
      { KUBECONFIG: join(dir, 'nope'), HOME: home },
      /^error: no kubeconfig: KUBECONFIG names .*nope, which does not exist/,
    ],
    [
      '--kubeconfig names no file',
      ['--kubeconfig', join(dir, 'nope')],
      { HOME: home },
      /^error: no kubeconfig: --kubeconfig .*nope: no such file/,
    ],
    ['a directory', [], { KUBECONFIG: dir, HOME: home }, /^error: cannot read kubeconfig .*: is a directory, not a file/],
    ['not YAML', [], { KUBECONFIG: garbage, HOME: home }, /^error: cannot read kubeconfig .*garbage: not a kubeconfig \(/],
    [
      'a plain-HTTP server without TLS settings',
      [],
      { KUBECONFIG: http, HOME: home },
      /^error: kubeconfig .*http: cluster "c" is plain HTTP \(http:\/\/127\.0\.0\.1:8080\); use its https:\/\/ address, or set insecure-skip-tls-verify: true/,
    ],
  ];
  for (const [what, argv, env, want] of cases) {
    const r = await run(argv, { env, retry: recording().policy });
    assert.equal(r.code, 1, what);
    assert.equal(r.out, '', what);
    assert.match(r.err, want, what);
    assert.equal(r.err.split('\n').length, 2, `${what}: one line: ${r.err}`);
    assert.doesNotMatch(r.err, /ENOENT ENOENT|skipTLSVerify is not set|at .*\.ts:\d+/, what);
  }
  // ~/.kube/config is found when KUBECONFIG is unset, and a server that answers is read.
  const api = await server(t);
  mkdirSync(join(home, '.kube'));
  writeFileSync(join(home, '.kube', 'config'), kubeconfig(api.url, true));
  const ok = await run([], { env: { HOME: home }, retry: recording().policy });
  assert.equal(ok.code, 0, ok.err);
});

test('the CLI: no kubeconfig, and nothing listening, are one line on stderr with exit code 1', (t) => {
  const dir = scratch(t);
  const refused = join(dir, 'refused');
  writeFileSync(refused, kubeconfig('https://127.0.0.1:2', true));
  const cli = (env: Record<string, string>): { status: number | null; stderr: string; stdout: string } =>
    spawnSync(process.execPath, [join(ROOT, 'bin', 'nft-netpol-agent.js'), 'status'], {
      env: { PATH: process.env.PATH ?? '', ...env },
      encoding: 'utf8',
    });
  const none = cli({ HOME: dir });
  assert.equal(none.status, 1, none.stderr);
  assert.equal(none.stdout, '');
  assert.match(none.stderr, /^error: no kubeconfig: set KUBECONFIG or --kubeconfig, or create .*\n$/);
  const down = cli({ HOME: dir, KUBECONFIG: refused });
  assert.equal(down.status, 1, down.stderr);
  assert.match(down.stderr, /^error: cannot reach the API server https:\/\/127\.0\.0\.1:2: .*ECONNREFUSED.*\n$/);
});
