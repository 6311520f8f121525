// The CLI as a process, as a user meets it (issue #21, items 5-7): a closed
// pipe ends it quietly, --version names the build, and the bin works under
// whatever Node.js is first on PATH (Debian's 20 on this machine) and via npx
// without npm warnings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { clusterObjects, generateCluster } from '../../scripts/gen-cluster.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = join(ROOT, 'bin/nft-netpol-agent.js');
const MAIN = join(ROOT, 'src/cli/main.ts');
const PACKAGE_VERSION = (
  JSON.parse(
    spawnSync(process.execPath, ['-p', 'JSON.stringify(require("./package.json"))'], { cwd: ROOT, encoding: 'utf8' }).stdout,
  ) as { version: string }
).version;

/** Runs a command, closing our end of its stdout after the first chunk; resolves with its exit status and stderr. */
function readFirstChunk(
  cmd: string,
  args: string[],
): Promise<{ code: number | null; signal: string | null; err: string; first: string }> {
  return new Promise((done, fail) => {
    const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    let first = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout.once('data', (d: Buffer) => {
      first = d.toString();
      child.stdout.destroy(); // like `| head -1` exiting
    });
    child.on('error', fail);
    child.on('close', (code, signal) => done({ code, signal, err, first }));
  });
}

test('a reader that goes away (| head) ends render quietly with status 141, as kubectl does', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'nftnp-pipe-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  // node-00000's ruleset is about 200 KB: more than a pipe holds (64 KB) plus one read.
  const file = join(dir, 'cluster.yaml');
  const objects = clusterObjects(generateCluster({ pods: 300, policies: 300, namespaces: 10 }));
  await writeFile(file, objects.map((o) => stringify(o)).join('---\n'));
  for (const args of [[MAIN], [BIN]]) {
    const r = await readFirstChunk(process.execPath, [...args, 'render', '--node', 'node-00000', '-f', file]);
    assert.match(r.first, /^# nft-netpol-agent ruleset for node node-00000/);
    assert.equal(r.err, '', 'nothing on stderr: no EPIPE stack trace');
    assert.equal(r.code, 141);
  }
});

test('--version prints the package version, the commit and the Node.js version', () => {
  const r = spawnSync(process.execPath, [MAIN, '--version'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const git = spawnSync('git', ['-C', ROOT, 'rev-parse', 'HEAD'], { encoding: 'utf8' });
  const commit = git.status === 0 ? git.stdout.trim() : 'unknown';
  assert.equal(r.stdout, `nft-netpol-agent ${PACKAGE_VERSION} (commit ${commit}, Node.js ${process.version})\n`);
  // The image has no .git: the Dockerfile hands the commit over as NFTNP_COMMIT.
  const image = spawnSync(process.execPath, [MAIN, 'version'], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, NFTNP_COMMIT: '0123456789abcdef0123456789abcdef01234567' },
  });
  assert.match(image.stdout, /\(commit 0123456789abcdef0123456789abcdef01234567, /);
  assert.match(
    spawnSync(process.execPath, [MAIN, '--help'], { cwd: ROOT, encoding: 'utf8' }).stdout,
    /--version/,
    'the top help names it',
  );
});

// The machine's own Node.js (Debian's), when it is older than the project needs.
const SYSTEM_NODE = ['/usr/bin/node', '/usr/local/bin/node'].find((p) => existsSync(p));
const systemNodeMajor =
  SYSTEM_NODE === undefined
    ? undefined
    : Number(spawnSync(SYSTEM_NODE, ['-p', 'process.versions.node.split(".")[0]'], { encoding: 'utf8' }).stdout);
const OLD_NODE = systemNodeMajor !== undefined && systemNodeMajor < 22 ? SYSTEM_NODE : undefined;

test(
  'bin/nft-netpol-agent.js under an old Node.js re-executes with the locked one',
  { skip: OLD_NODE === undefined && 'no Node.js < 22 on this machine' },
  () => {
    const env = { ...process.env, PATH: `${dirname(OLD_NODE ?? '')}:${process.env['PATH'] ?? ''}` };
    const r = spawnSync(OLD_NODE ?? 'node', [BIN, '--version'], { cwd: ROOT, encoding: 'utf8', env });
    assert.equal(r.stderr, '');
    assert.equal(r.status, 0);
    assert.match(r.stdout, /^nft-netpol-agent \S+ \(commit \S+, Node\.js v(\d+)\./);
    assert.ok(Number(/Node\.js v(\d+)/.exec(r.stdout)?.[1]) >= 24, 'the locked Node.js runs it');
    // Exit codes pass through.
    const bad = spawnSync(OLD_NODE ?? 'node', [BIN, 'render', '-f', 'examples/'], { cwd: ROOT, encoding: 'utf8', env });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /--node is required/);
  },
);

const SYSTEM_NPX = ['/usr/bin/npx', '/usr/local/bin/npx'].find((p) => existsSync(p));

test(
  "the README's npx commands print no npm warnings (a fresh npx cache, the machine's npm and Node.js)",
  { skip: SYSTEM_NPX === undefined && 'no npx on this machine' },
  async (t) => {
    const cache = await mkdtemp(join(tmpdir(), 'nftnp-npm-cache-'));
    t.after(() => rm(cache, { recursive: true, force: true }));
    const env = { ...process.env, PATH: `${dirname(SYSTEM_NPX ?? '')}:${process.env['PATH'] ?? ''}`, npm_config_cache: cache };
    for (const args of [['--version'], ['validate', '-f', 'examples/']]) {
      const r = spawnSync(SYSTEM_NPX ?? 'npx', ['nft-netpol-agent', ...args], { cwd: ROOT, encoding: 'utf8', env });
      assert.equal(r.status, 0, r.stderr);
      assert.doesNotMatch(r.stderr, /npm warn|EBADENGINE/i);
      assert.match(r.stdout, args[0] === '--version' ? /^nft-netpol-agent / : /^ok: /);
    }
  },
);
