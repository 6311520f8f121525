// Scripts reach nft whole (nft/private-file.ts): a writer killed right after
// nft starts leaves nft the whole script, not the prefix a pipe held; the
// session reads each transaction from a private file; with no private file
// to write, both fall back to the pipe and still apply. Real nft in scratch
// namespaces.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runNft } from '../../src/nft/exec.ts';
import { NftSession, runScript } from '../../src/nft/session.ts';
import {
  onPrivateFiles,
  privateFileFailures,
  privateFilesProblem,
  privateInput,
  removePrivateFile,
  sweepPrivateFiles,
  usePrivateDir,
  writePrivateFile,
} from '../../src/nft/private-file.ts';
import { inNetns, withNetns } from './netns-support.ts';
import { haveNft } from './nft-support.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

function addresses(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
}

async function elementCount(netns: string, table: string): Promise<number> {
  const out = await inNetns(netns, 'nft', ['-j', 'list', 'set', 'inet', table, 's']);
  const set = (JSON.parse(out) as { nftables: { set?: { elem?: unknown[] } }[] }).nftables.find((x) => x.set !== undefined);
  return set?.set?.elem?.length ?? 0;
}

/** Runs feed-and-die.ts, kills it as soon as it has spawned nft, and waits for that nft to end. */
async function feedAndDie(netns: string, scriptPath: string, mode: string[]): Promise<number> {
  const child = spawn(process.execPath, [join(ROOT, 'test/nft/feed-and-die.ts'), netns, scriptPath, ...mode], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const pid = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      out += chunk;
      const m = /spawned (\d+)/.exec(out);
      if (m !== null) resolve(Number(m[1]));
    });
    child.on('exit', (code) => reject(new Error(`feed-and-die exited (${String(code)}) before spawning nft`)));
  });
  child.kill('SIGKILL');
  await new Promise((r) => child.once('close', r));
  // nft goes on alone (reparented); it ends when its input does.
  for (let i = 0; i < 2400 && existsSync(`/proc/${pid}`); i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(!existsSync(`/proc/${pid}`), `nft ${pid} still running after 120 s`);
  return child.pid ?? -1;
}

test('kernel: nft -f gets the whole script when its writer is killed as nft starts', { timeout: 300_000 }, async (t) => {
  if (!(await haveNft(t))) return;
  await withNetns(1, async ([ns]) => {
    if (ns === undefined) return;
    const dir = mkdtempSync(join(tmpdir(), 'nftnp-feed-'));
    try {
      assert.deepEqual(await runNft('table inet feed {\n\tset s {\n\t\ttype ipv4_addr\n\t}\n}\n', { netns: ns }), { ok: true });
      // One command per line: every prefix that ends at a line end is a valid, smaller transaction.
      const n = 40_000;
      const script = addresses(n)
        .map((a) => `add element inet feed s { ${a} }\n`)
        .join('');
      const path = join(dir, 'script.nft');
      writeFileSync(path, script);
      const writer = await feedAndDie(ns, path, []);
      assert.equal(await elementCount(ns, 'feed'), n, 'all of the transaction, not a prefix');
      // Nothing of it is left in the private directory.
      assert.deepEqual(
        readdirSync('/dev/shm').filter((f) => f.startsWith(`nft-netpol-script-${String(writer)}-`)),
        [],
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

test('kernel: the session reads transactions from private files; no private file, the line, same result', async (t) => {
  if (!(await haveNft(t))) return;
  await withNetns(1, async ([ns]) => {
    if (ns === undefined) return;
    const where = { netns: ns };
    const s = new NftSession(where);
    const before = usePrivateDir('/dev/shm');
    try {
      assert.deepEqual(await runNft('table inet sess {\n\tset s {\n\t\ttype ipv4_addr\n\t}\n}\n', where), { ok: true });
      const some = addresses(300);
      // Two commands, the second fails: nothing of the first stays (one transaction), the error names the command.
      const bad = `add element inet sess s { ${some.slice(0, 100).join(', ')} }\ndelete element inet sess s { 192.0.2.1 }\n`;
      const r = await runScript(s, bad, where);
      assert.equal(r.ok, false);
      assert.ok(!r.ok && /delete element inet sess s/.test(r.error) && !/In file included/.test(r.error), JSON.stringify(r));
      assert.equal(await elementCount(ns, 'sess'), 0);
      assert.deepEqual(await runScript(s, `add element inet sess s { ${some.slice(0, 100).join(', ')} }\n`, where), { ok: true });
      assert.equal(await elementCount(ns, 'sess'), 100);
      assert.deepEqual(
        readdirSync('/dev/shm').filter((f) => f.includes(`-${String(process.pid)}-`)),
        [],
      );
      // No private file can be written: the line through the session, the script through nft -f's pipe.
      usePrivateDir('/nonexistent-dir');
      assert.deepEqual(await runScript(s, `add element inet sess s { ${some.slice(100, 200).join(', ')} }\n`, where), {
        ok: true,
      });
      assert.match(privateFilesProblem() ?? '', /nonexistent-dir/);
      const big = `add element inet sess s { ${addresses(2000).slice(200).join(', ')} }\n`;
      assert.deepEqual(await runNft(big, where), { ok: true });
      assert.equal(await elementCount(ns, 'sess'), 2000);
    } finally {
      usePrivateDir(before);
      s.close();
    }
  });
});

test("sweepPrivateFiles: removes files of gone processes and of this pid, keeps a live process's and others", () => {
  const d = mkdtempSync(join(tmpdir(), 'nftnp-sweep-'));
  const before = usePrivateDir(d);
  try {
    // pid 2^22 + 1 is above Linux's pid_max limit: never a live process.
    const names = {
      gone: 'nft-netpol-tx-4194305-0123456789ab',
      mine: `nft-netpol-script-${String(process.pid)}-0123456789ab`,
      live: 'nft-netpol-tx-1-0123456789ab',
      other: 'something-else',
    };
    for (const n of Object.values(names)) writeFileSync(join(d, n), 'x');
    assert.equal(sweepPrivateFiles(), 2);
    assert.deepEqual(readdirSync(d).sort(), [names.live, names.other].sort());
  } finally {
    usePrivateDir(before);
    rmSync(d, { recursive: true, force: true });
  }
});

test('private files failing mid-run: each script counted, the listener told of the problem and of the recovery', () => {
  const good = mkdtempSync(join(tmpdir(), 'nftnp-listen-'));
  const spaced = mkdtempSync(join(tmpdir(), 'nftnp listen '));
  const before = usePrivateDir(good);
  // A file written first: whatever an earlier test left failing has recovered.
  const first = writePrivateFile('tx', 'x');
  if (first !== undefined) removePrivateFile(first);
  const told: string[] = [];
  const prior = onPrivateFiles({ failed: (p) => told.push(`failed ${p}`), recovered: () => told.push('recovered') });
  try {
    const start = privateFileFailures();
    const ok = writePrivateFile('tx', 'x');
    assert.ok(ok !== undefined && existsSync(ok));
    removePrivateFile(ok);
    assert.equal(told.length, 0);
    usePrivateDir('/nonexistent-dir');
    assert.equal(writePrivateFile('tx', 'x'), undefined);
    assert.equal(privateInput('script', 'x'), undefined);
    assert.equal(privateFileFailures(), start + 2);
    assert.equal(told.length, 2);
    assert.match(told[0] ?? '', /^failed \/nonexistent-dir: .*ENOENT/);
    // A path nft's include cannot quote: refused before anything is written.
    usePrivateDir(spaced);
    assert.equal(writePrivateFile('tx', 'x', true), undefined);
    assert.deepEqual(readdirSync(spaced), []);
    assert.match(told[2] ?? '', /include can quote/);
    assert.equal(privateFileFailures(), start + 3);
    // Files work again: one recovery, however many files follow.
    usePrivateDir(good);
    for (let i = 0; i < 3; i++) {
      const p = writePrivateFile('tx', 'x', true);
      assert.ok(p !== undefined);
      removePrivateFile(p);
    }
    assert.deepEqual(told.slice(3), ['recovered']);
    usePrivateDir('/nonexistent-dir');
    writePrivateFile('tx', 'x');
    usePrivateDir(good);
    const p = writePrivateFile('tx', 'x');
    if (p !== undefined) removePrivateFile(p);
    assert.deepEqual(
      told.slice(4).map((x) => x.split(' ')[0]),
      ['failed', 'recovered'],
    );
    assert.equal(privateFilesProblem(), undefined);
  } finally {
    onPrivateFiles(prior);
    usePrivateDir(before);
    rmSync(good, { recursive: true, force: true });
    rmSync(spaced, { recursive: true, force: true });
  }
});
