import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SerialBatches } from '../../src/agent/serial-batches.ts';

/** A run that waits until released, recording each batch. */
function gated(): { batches: string[][]; release: () => void; run: (b: readonly string[]) => Promise<void> } {
  const batches: string[][] = [];
  let open: (() => void)[] = [];
  return {
    batches,
    release: () => {
      const o = open;
      open = [];
      for (const f of o) f();
    },
    run: (b) => {
      batches.push([...b]);
      return new Promise<void>((r) => open.push(r));
    },
  };
}

test('items that arrive while a run is in flight go to the next run together, once each', async () => {
  const g = gated();
  const s = new SerialBatches<string>(g.run);
  const first = s.add(['a']);
  void s.add(['b', 'c']);
  void s.add(['c', 'd']);
  assert.deepEqual(g.batches, [['a']], 'one run at a time');
  assert.equal(s.pending, 3);
  g.release();
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(g.batches, [['a'], ['b', 'c', 'd']]);
  g.release();
  await first;
  assert.equal(s.pending, 0);
  // Idle again: the next item runs at once.
  const again = s.add(['e']);
  assert.deepEqual(g.batches.at(-1), ['e']);
  g.release();
  await again;
});

test('a failed run does not stop later ones; close drops what waits', async () => {
  const seen: string[][] = [];
  let fail = true;
  const s = new SerialBatches<string>(async (b) => {
    seen.push([...b]);
    if (fail) throw new Error('conntrack failed');
  });
  await assert.rejects(s.add(['a']), /conntrack failed/);
  fail = false;
  await s.add(['b']);
  assert.deepEqual(seen, [['a'], ['b']]);
  s.close();
  await s.add(['c']);
  assert.deepEqual(seen, [['a'], ['b']], 'nothing runs after close');
});
