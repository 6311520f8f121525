// The `nft monitor destroy` line parser and the own/foreign decision: on
// lines nft 1.0.6 prints, and on the real notifications of marked and
// unmarked transactions in a scratch network namespace.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createInterface } from 'node:readline';
import { execa } from 'execa';
import {
  ForeignFilter,
  markTransaction,
  parseMonitorLine,
  type Deletion,
  type MonitorEvent,
} from '../../src/agent/table-monitor.ts';
import { runNft } from '../../src/nft/exec.ts';
import { renderCleanup } from '../../src/nft/render.ts';
import { requireDatapath } from '../harness/requirements.ts';
import { createNetns, deleteNetns, uniquePrefix } from '../harness/netns.ts';
import { eventually } from './agent-process.ts';

test('monitor lines: deletions in our table, our markers, everything else ignored', () => {
  const lines = [
    'delete rule inet nft-netpol forward-ingress handle 321',
    'delete set inet nft-netpol allow4-6d520959c60d',
    'delete chain inet nft-netpol KUBE-POD-FW-bd50afd5728b-IN',
    'delete map inet nft-netpol ingress-peers-v4',
    'delete table inet nft-netpol',
    'delete chain inet nft-netpol-tx begin',
    'delete chain inet nft-netpol-tx end',
    'delete table inet nft-netpol-tx',
    'delete chain inet nft-netpol-tx other',
    'delete table inet nft-netpol-probe',
    'delete rule inet other c handle 3',
    'delete table ip nft-netpol',
    'add table inet nft-netpol',
    '# new generation 4 by process 16217 (nft)',
    '',
  ];
  assert.deepEqual(
    lines.map((l) => parseMonitorLine(l, 'nft-netpol')?.kind),
    [
      ...['deleted', 'deleted', 'deleted', 'deleted', 'table-deleted', 'own-begin', 'own-end'],
      ...Array.from({ length: 8 }, () => undefined),
    ],
  );
  assert.deepEqual(parseMonitorLine(lines[0] ?? '', 'nft-netpol'), { kind: 'deleted', object: lines[0] });
});

test('deletions between our markers are ours; before, after and between two of ours are foreign', () => {
  const f = new ForeignFilter();
  const ev = (kind: MonitorEvent['kind']): MonitorEvent =>
    kind === 'deleted' ? { kind, object: 'delete rule inet nft-netpol c handle 3' } : ({ kind } as MonitorEvent);
  const seq: MonitorEvent['kind'][] = ['deleted', 'own-begin', 'deleted', 'table-deleted', 'own-end', 'table-deleted'];
  seq.push('own-begin', 'own-end', 'deleted');
  assert.deepEqual(
    seq.map((k) => f.foreign(ev(k))?.kind),
    ['deleted', undefined, undefined, undefined, undefined, 'table-deleted', undefined, undefined, 'deleted'],
  );
});

test('real notifications: a marked full load is ours, an unmarked flush and delete are foreign', async (t) => {
  if (!requireDatapath(t)) return;
  const ns = `${uniquePrefix()}m`;
  await createNetns([ns]);
  const mon = execa('ip', ['netns', 'exec', ns, 'nft', 'monitor', 'destroy'], { reject: false, buffer: false });
  t.after(async () => {
    mon.kill();
    await mon;
    await deleteNetns([ns]);
  });
  const filter = new ForeignFilter();
  const foreign: Deletion[] = [];
  const lines: string[] = [];
  createInterface({ input: mon.stdout }).on('line', (l) => {
    lines.push(l);
    const e = filter.foreign(parseMonitorLine(l, 'nft-netpol'));
    if (e !== undefined) foreign.push(e);
  });
  const full = [
    '# a full load',
    'table inet nft-netpol {}',
    'delete table inet nft-netpol',
    'table inet nft-netpol {',
    '\tchain c {',
    '\t\ttype filter hook forward priority filter; policy accept;',
    '\t\tct state established accept',
    '\t}',
    '}',
    '',
  ].join('\n');
  const nft = async (script: string): Promise<void> => {
    const r = await runNft(script, { netns: ns });
    assert.ok(r.ok, r.ok ? '' : r.error);
  };
  // The monitor is subscribed once it has printed something.
  await eventually('monitor listening', async () => {
    await nft(markTransaction(renderCleanup('nft-netpol'), 'nft-netpol'));
    return lines.length > 0;
  });
  await nft(markTransaction(full, 'nft-netpol'));
  await nft(markTransaction(full, 'nft-netpol'));
  await nft('flush table inet nft-netpol\n');
  await nft(markTransaction(full, 'nft-netpol'));
  await nft('delete table inet nft-netpol\n');
  await eventually(
    'all lines seen',
    () =>
      lines.filter((l) => l === 'delete chain inet nft-netpol-tx end').length >= 4 &&
      foreign.some((e) => e.kind === 'table-deleted'),
  );
  assert.deepEqual(
    foreign.map((e) => (e.kind === 'deleted' ? e.object : e.kind)),
    [
      // flush table: its rules
      'delete rule inet nft-netpol c handle 2',
      // delete table: everything in it, then the table
      'delete rule inet nft-netpol c handle 2',
      'delete chain inet nft-netpol c',
      'table-deleted',
    ],
    lines.join('\n'),
  );
  // The marker table never stays (and ours was deleted last).
  const r = await execa('ip', ['netns', 'exec', ns, 'nft', 'list', 'tables']);
  assert.equal(r.stdout.trim(), '');
});
