// The long-lived nft -i (nft/session.ts) and the one-line form of a script
// it reads (nft/one-line.ts): pure cases, then the real nft in a scratch
// namespace (transactions all or nothing, errors reported, a killed or hung
// nft replaced, the history bounded by starting a new nft).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { oneLine } from '../../src/nft/one-line.ts';
import { NftSession, runScript, SESSION_MAX_CHARS } from '../../src/nft/session.ts';
import { markTransaction } from '../../src/agent/table-monitor.ts';
import { listTable } from '../../src/nft/exec.ts';
import { withNetns } from './netns-support.ts';
import { haveNft } from './nft-support.ts';

test('oneLine: commands joined by "; ", element lists continued, comments dropped', () => {
  const script = [
    '# nft-netpol-agent incremental update: 2 elements added',
    'add chain inet t KUBE-POD-FW-x { comment "pod a/b # not a comment"; }',
    'add element inet t s { 10.0.0.1,',
    '\t10.0.0.2 }',
    'add rule inet t c tcp dport 80 accept  # trailing',
    '',
  ].join('\n');
  assert.equal(
    oneLine(script),
    'add chain inet t KUBE-POD-FW-x { comment "pod a/b # not a comment"; }; add element inet t s { 10.0.0.1, 10.0.0.2 }; add rule inet t c tcp dport 80 accept',
  );
  // The monitor's begin marker shares the header's line and ends in ";".
  const marked = markTransaction('# header\nadd element inet t s { 1.2.3.4 }\n', 't');
  const line = oneLine(marked);
  assert.ok(line !== undefined && !line.includes('\n') && !line.includes('#'), line);
  assert.match(line, /delete table inet t-tx; add element inet t s \{ 1\.2\.3\.4 \}; add table inet t-tx;/);
  assert.ok(!line.includes(';;'), line);
});

test('oneLine: no form for blocks across lines, strings across lines, unbalanced braces or carriage returns', () => {
  assert.equal(oneLine('table inet t {\n\tchain c {\n\t\taccept\n\t}\n}\n'), undefined);
  assert.equal(oneLine('add element inet t s { 1.2.3.4\n 5.6.7.8 }'), undefined);
  assert.equal(oneLine('add rule inet t c accept comment "a\nb"'), undefined);
  assert.equal(oneLine('add element inet t s { 1.2.3.4'), undefined);
  assert.equal(oneLine('add element inet t s 1.2.3.4 }'), undefined);
  assert.equal(oneLine('add table inet t\r\nadd chain inet t c'), undefined);
  assert.equal(oneLine('add table inet t \\\nadd chain inet t c'), undefined);
  assert.equal(oneLine('# only a comment\n'), '');
});

async function elements(netns: string): Promise<string> {
  const l = (await listTable('sess', { netns })) ?? '';
  return /elements = \{([^}]*)\}/.exec(l)?.[1]?.replace(/\s+/g, ' ').trim() ?? '';
}

test("kernel: each line is one transaction, all or nothing, with nft's error; a killed nft is replaced", async (t) => {
  if (!(await haveNft(t))) return;
  await withNetns(1, async ([ns]) => {
    if (ns === undefined) return;
    const events: { kind: string; pid?: number; detail?: string }[] = [];
    const s = new NftSession({ netns: ns }, { onEvent: (e) => events.push(e) });
    try {
      assert.deepEqual(await s.run('add table inet sess; add set inet sess s { type ipv4_addr; }'), { ok: true });
      assert.deepEqual(await s.run('add element inet sess s { 10.0.0.1 }'), { ok: true });
      // A later command fails: the earlier one of the same line is not applied.
      const bad = await s.run('add element inet sess s { 10.0.0.2 }; delete element inet sess s { 10.0.0.99 }');
      assert.equal(bad.ok, false);
      assert.match(bad.ok ? '' : bad.error, /^Error: Could not process rule: No such file or directory/);
      assert.equal(await elements(ns), '10.0.0.1');
      const syntax = await s.run('add element inet sess s {');
      assert.equal(syntax.ok, false);
      assert.match(syntax.ok ? '' : syntax.error, /syntax error/);
      // Transactions queued together run one after another, each answered.
      const all = await Promise.all([
        s.run('add element inet sess s { 10.0.0.3 }'),
        s.run('delete element inet sess s { 10.0.0.1 }'),
        s.run('add element inet sess s { 10.0.0.4 }'),
      ]);
      assert.deepEqual(all, [{ ok: true }, { ok: true }, { ok: true }]);
      assert.equal(await elements(ns), '10.0.0.3, 10.0.0.4');
      // Not one line: refused, nothing sent.
      assert.equal((await s.run('add element inet sess s { 10.0.0.5 }\nadd table inet x')).ok, false);
      // Someone kills nft: the next transaction starts another one.
      const first = events.find((e) => e.kind === 'started')?.pid;
      assert.ok(first !== undefined);
      process.kill(first, 'SIGKILL');
      for (let i = 0; i < 100 && !events.some((e) => e.kind === 'exited'); i++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(
        events.some((e) => e.kind === 'exited' && e.pid === first),
        JSON.stringify(events),
      );
      assert.deepEqual(await s.run('add element inet sess s { 10.0.0.6 }'), { ok: true });
      const started = events.filter((e) => e.kind === 'started').map((e) => e.pid);
      assert.equal(started.length, 2);
      assert.notEqual(started[1], first);
      assert.equal(await elements(ns), '10.0.0.3, 10.0.0.4, 10.0.0.6');
      // It had answered before: still in use.
      assert.equal(s.unusable, undefined);
    } finally {
      s.close();
    }
  });
});

test('kernel: a new nft after maxTransactions (its history grows with every line); a hung one is killed', async (t) => {
  if (!(await haveNft(t))) return;
  await withNetns(1, async ([ns]) => {
    if (ns === undefined) return;
    const started: number[] = [];
    const s = new NftSession(
      { netns: ns },
      { maxTransactions: 3, onEvent: (e) => (e.kind === 'started' && e.pid !== undefined ? started.push(e.pid) : 0) },
    );
    try {
      assert.deepEqual(await s.run('add table inet sess; add set inet sess s { type ipv4_addr; }'), { ok: true });
      for (let i = 1; i <= 7; i++) assert.deepEqual(await s.run(`add element inet sess s { 10.0.1.${i} }`), { ok: true });
      assert.equal(started.length, 3, `8 transactions at 3 per nft: ${started.join(',')}`);
      assert.equal(new Set(started).size, 3);
      assert.match(await elements(ns), /^10\.0\.1\.1, .*10\.0\.1\.7$/);
    } finally {
      s.close();
    }
    // Not an nft: it ends at once, and says why.
    const wrong = new NftSession({ netns: ns, nftPath: '/bin/cat' });
    const w = await wrong.run('add element inet sess s { 10.0.2.1 }');
    assert.equal(w.ok, false);
    assert.match(w.ok ? '' : w.error, /^nft -i ended \(exit code 1\): .*invalid option/);
    // It never answered: the session is given up, and runScript sends everything to nft -f.
    assert.match(wrong.unusable ?? '', /exit code 1/);
    assert.deepEqual(await runScript(wrong, 'add element inet sess s { 10.0.2.2 }', { netns: ns }), { ok: true });
    assert.match(await elements(ns), /10\.0\.2\.2$/);
    // One that never answers (`sort -i` reads until its input ends) is killed after the timeout.
    const hung = new NftSession({ netns: ns, nftPath: 'sort' }, { timeoutMs: 200 });
    try {
      const r = await hung.run('add element inet sess s { 10.0.2.1 }');
      assert.equal(r.ok, false);
      assert.match(r.ok ? '' : r.error, /timed out after 200 ms/);
    } finally {
      hung.close();
    }
  });
});

test('kernel: runScript sends small one-line scripts to the session and the rest to nft -f, with the same result', async (t) => {
  if (!(await haveNft(t))) return;
  await withNetns(1, async ([ns]) => {
    if (ns === undefined) return;
    const started: number[] = [];
    const s = new NftSession({ netns: ns }, { onEvent: (e) => (e.kind === 'started' ? started.push(1) : 0) });
    try {
      // A full script (a table block) has no one-line form: nft -f.
      const full = 'table inet sess {\n\tset s {\n\t\ttype ipv4_addr\n\t\tflags interval\n\t}\n}\n';
      assert.deepEqual(await runScript(s, full, { netns: ns }), { ok: true });
      assert.equal(started.length, 0);
      const small = markTransaction('# update\nadd element inet sess s { 10.0.3.0/24,\n\t10.0.5.1 }\n', 'sess');
      assert.deepEqual(await runScript(s, small, { netns: ns }), { ok: true });
      assert.equal(started.length, 1);
      // Bigger than the session takes: nft -f, whatever its form.
      const many = Array.from({ length: 2000 }, (_, i) => `10.1.${i >> 8}.${i & 255}`);
      const big = `add element inet sess s { ${many.join(', ')} }\n`;
      assert.ok(big.length > SESSION_MAX_CHARS);
      assert.deepEqual(await runScript(s, big, { netns: ns }), { ok: true });
      const l = (await listTable('sess', { netns: ns })) ?? '';
      assert.match(l, /10\.0\.3\.0\/24/);
      assert.match(l, /10\.1\.0\.0,/);
      assert.match(l, /10\.1\.7\.207 \}/);
      // The marker table never stays.
      assert.equal(await listTable('sess-tx', { netns: ns }), undefined);
    } finally {
      s.close();
    }
  });
});
