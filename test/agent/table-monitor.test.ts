// The nft monitor parser and the own/foreign decision, on the lines nft 1.0
// prints (captured from `nft monitor` in a network namespace).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isForeign, MonitorParser, type MonitoredTransaction, type OwnTransactions } from '../../src/agent/table-monitor.ts';

const LINES = `add table inet nft-netpol
add chain inet nft-netpol c { type filter hook input priority filter; policy accept; }
add set inet nft-netpol s { type ipv4_addr; }
add element inet nft-netpol s { 1.2.3.4 }
# new generation 2 by process 16213 (nft)
add element inet nft-netpol s { 5.6.7.8 }
# new generation 3 by process 16214 (nft)
delete rule inet other c handle 3
delete table inet other
delete rule inet nft-netpol c handle 3
delete set inet nft-netpol s
delete chain inet nft-netpol c
delete table inet nft-netpol
# new generation 4 by process 16217 (nft)
add table inet other
# new generation 5 by process 16218 (firewalld)
delete table inet nft-netpol
add table inet nft-netpol
add chain inet nft-netpol c
# new generation 6
add table inet nft-netpol-probe
delete table inet nft-netpol-probe
# new generation 7 by process 9 (nft)`;

function parse(text: string): MonitoredTransaction[] {
  const p = new MonitorParser('nft-netpol');
  return text.split('\n').flatMap((l) => p.line(l) ?? []);
}

test('monitor lines group into transactions: which touched the table, which left it deleted, by whom', () => {
  const txs = parse(LINES);
  assert.deepEqual(
    txs.map((t) => [t.generation, t.pid, t.comm, t.touched, t.removed]),
    [
      [2, 16213, 'nft', true, false],
      [3, 16214, 'nft', true, false],
      [4, 16217, 'nft', true, true],
      [5, 16218, 'firewalld', false, false],
      [6, undefined, undefined, true, false],
      [7, 9, 'nft', false, false],
    ],
  );
});

test('own transactions are ignored; a deleted table is foreign even while the agent applies', () => {
  const own = (pids: number[], busy: boolean): OwnTransactions => ({ isOwn: (p) => pids.includes(p), busy: () => busy });
  const [add, element, deleted, other, replaced] = parse(LINES);
  assert.ok(add !== undefined && element !== undefined && deleted !== undefined && other !== undefined && replaced !== undefined);
  assert.equal(isForeign(add, own([16213], false)), false, 'our pid');
  assert.equal(isForeign(element, own([], false)), true, 'someone else, agent idle');
  assert.equal(isForeign(element, own([], true)), false, 'unmatched pid while ours is in flight: presumed ours');
  assert.equal(isForeign(deleted, own([], true)), true, 'the agent never leaves its table deleted');
  assert.equal(isForeign(deleted, own([16217], true)), false);
  assert.equal(isForeign(other, own([], false)), false, 'another table');
  assert.equal(isForeign(replaced, own([], false)), true, 'no pid printed');
});
