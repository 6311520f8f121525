// The `nft monitor destroy rules` line parser and the own/foreign decision:
// on lines nft 1.0.6 prints, and on the real notifications of marked and
// unmarked transactions in a scratch network namespace.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createInterface } from 'node:readline';
import { execa } from 'execa';
import {
  ForeignFilter,
  LineSplitter,
  markTransaction,
  parseMonitorLine,
  type MonitorEvent,
} from '../../src/agent/table-monitor.ts';
import { runNft } from '../../src/nft/exec.ts';
import { renderCleanup } from '../../src/nft/render.ts';
import { requireDatapath } from '../harness/requirements.ts';
import { createNetns, deleteNetns, uniquePrefix } from '../harness/netns.ts';
import { eventually } from './agent-process.ts';

test('monitor lines: rule deletions in our table and our markers; everything else ignored', () => {
  const lines = [
    'delete rule inet nft-netpol forward-ingress handle 321',
    'delete rule inet nft-netpol KUBE-PEERS-6d520959c60d-IN handle 180',
    'delete rule inet nft-netpol-tx begin handle 2',
    'delete rule inet nft-netpol-tx end handle 2',
    'delete rule inet nft-netpol-tx other handle 2',
    'delete chain inet nft-netpol KUBE-POD-FW-bd50afd5728b-IN',
    'delete table inet nft-netpol',
    'delete rule inet nft-netpol-probe c handle 3',
    'delete rule inet other c handle 3',
    'delete rule ip nft-netpol c handle 3',
    'add rule inet nft-netpol c handle 3',
    '# ERROR: We lost some netlink events!',
    '',
  ];
  assert.deepEqual(
    lines.map((l) => parseMonitorLine(l, 'nft-netpol')?.kind),
    ['deleted', 'deleted', 'own-begin', 'own-end', ...Array.from({ length: 7 }, () => undefined), 'lost', undefined],
  );
  assert.deepEqual(parseMonitorLine(lines[0] ?? '', 'nft-netpol'), { kind: 'deleted', object: lines[0] });
});

test('deletions between our markers are ours; before, after and between two of ours are foreign', () => {
  const f = new ForeignFilter();
  const ev = (kind: MonitorEvent['kind']): MonitorEvent =>
    kind === 'deleted' ? { kind, object: 'delete rule inet nft-netpol c handle 3' } : { kind };
  const seq: MonitorEvent['kind'][] = ['deleted', 'own-begin', 'deleted', 'deleted', 'own-end', 'deleted'];
  seq.push('own-begin', 'own-end', 'deleted');
  // Lost notifications may have taken an end marker with them.
  seq.push('own-begin', 'lost', 'deleted');
  assert.deepEqual(
    seq.map((k) => f.foreign(ev(k))?.kind),
    [
      'deleted',
      undefined,
      undefined,
      undefined,
      undefined,
      'deleted',
      undefined,
      undefined,
      'deleted',
      undefined,
      'lost',
      'deleted',
    ],
  );
});

test('lines split across chunks; a runaway line (a misprinting nft) is dropped, not buffered', () => {
  const got: string[] = [];
  const s = new LineSplitter((l) => got.push(l));
  s.push('delete rule inet t c handle 1\ndelete ru');
  s.push('le inet t c handle 2\n\nadd element inet t s { 10.0.0.2 . 6 . 90-0x');
  for (let i = 0; i < 100; i++) s.push('7400000000000000'.repeat(1000));
  s.push('00 }\ndelete rule inet t c handle 3\npartial');
  assert.deepEqual(got, ['delete rule inet t c handle 1', 'delete rule inet t c handle 2', '', 'delete rule inet t c handle 3']);
});

test('real notifications: marked transactions are ours, unmarked flushes and deletes are foreign, range elements do not kill the monitor', async (t) => {
  if (!requireDatapath(t)) return;
  const ns = `${uniquePrefix()}m`;
  await createNetns([ns]);
  const mon = execa('ip', ['netns', 'exec', ns, 'nft', 'monitor', 'destroy', 'rules'], { reject: false, buffer: false });
  t.after(async () => {
    mon.kill();
    await mon;
    await deleteNetns([ns]);
  });
  let exited = false;
  void mon.then(() => (exited = true));
  const filter = new ForeignFilter();
  const foreign: string[] = [];
  const lines: string[] = [];
  createInterface({ input: mon.stdout }).on('line', (l) => {
    lines.push(l);
    const e = filter.foreign(parseMonitorLine(l, 'nft-netpol'));
    if (e !== undefined) foreign.push(e.kind === 'deleted' ? e.object : e.kind);
  });
  // 40 sets of 5 `address . protocol . port-range` elements with comments:
  // what nft 1.0.6's unfiltered monitor misprints and crashes on (adding
  // them crashes `nft monitor`, deleting them `nft monitor destroy`).
  const ranges = (set: number): string[] =>
    Array.from(
      { length: 5 },
      (_, i) => `10.0.${set}.${i + 1} . tcp . ${1000 + i}-${1010 + i} comment "ns/p${set} ingress[${i}]"`,
    );
  const sets = Array.from({ length: 40 }, (_, n) => n);
  const full = [
    '# a full load',
    'table inet nft-netpol {}',
    'delete table inet nft-netpol',
    'table inet nft-netpol {',
    ...sets.flatMap((n) => [
      `\tset allow4-${n} {`,
      '\t\ttype ipv4_addr . inet_proto . inet_service',
      '\t\tflags interval',
      `\t\telements = { ${ranges(n).join(', ')} }`,
      '\t}',
    ]),
    '\tchain c {',
    '\t\ttype filter hook forward priority filter; policy accept;',
    ...sets.map((n) => `\t\tip daddr . meta l4proto . th dport @allow4-${n} accept`),
    '\t}',
    '}',
    '',
  ].join('\n');
  const increment = sets
    .map(
      (n) =>
        `delete element inet nft-netpol allow4-${n} { ${ranges(n)
          .slice(0, 3)
          .map((r) => r.replace(/ comment .*/, ''))
          .join(', ')} }\n`,
    )
    .join('');
  const nft = async (script: string): Promise<void> => {
    const r = await runNft(script, { netns: ns });
    assert.ok(r.ok, r.ok ? '' : r.error);
  };
  // The monitor is subscribed once it has printed something.
  await eventually('monitor listening', async () => {
    await nft(markTransaction(renderCleanup('nft-netpol'), 'nft-netpol'));
    return lines.length > 0;
  });
  for (let i = 0; i < 5; i++) {
    await nft(markTransaction(full, 'nft-netpol'));
    await nft(markTransaction(increment, 'nft-netpol'));
  }
  await nft('flush table inet nft-netpol\n');
  await nft(markTransaction(full, 'nft-netpol'));
  await nft('flush ruleset\n');
  await nft(markTransaction(full, 'nft-netpol'));
  await nft('delete table inet nft-netpol\n');
  await eventually(
    'all lines seen',
    () => lines.filter((l) => l.startsWith('delete rule inet nft-netpol-tx end')).length >= 13 && foreign.length >= 3,
  );
  assert.equal(exited, false, `the monitor is still running:\n${lines.join('\n')}`);
  // Per unmarked transaction, the table's 40 rules (handles restart with each new table).
  const rules = sets.map((n) => `delete rule inet nft-netpol c handle ${n + 42}`);
  assert.deepEqual(foreign, [...rules, ...rules, ...rules]);
  // The marker table never stays (and ours was deleted last).
  const r = await execa('ip', ['netns', 'exec', ns, 'nft', 'list', 'tables']);
  assert.equal(r.stdout.trim(), '');
});
