// commonEnds: the head and tail two lists share, by object or by `same`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { commonEnds } from '../../src/model/list-diff.ts';

/** The definition: the longest head, then the longest tail of what is left, entry by entry. */
function reference<T>(a: readonly T[], b: readonly T[], same: (x: T, y: T) => boolean): { head: number; tail: number } {
  const max = Math.min(a.length, b.length);
  let head = 0;
  while (head < max && same(a[head]!, b[head]!)) head++;
  let tail = 0;
  while (tail < max - head && same(a[a.length - 1 - tail]!, b[b.length - 1 - tail]!)) tail++;
  return { head, tail };
}

test('property: commonEnds equals the entry-by-entry definition, by identity and with a value comparison', () => {
  // Objects from a small pool, some with equal values: identity and value comparisons differ.
  const pool = Array.from({ length: 6 }, (_, i) => ({ v: i % 3 }));
  const list = fc.array(fc.nat(5), { maxLength: 30 }).map((xs) => xs.map((i) => pool[i]!));
  fc.assert(
    fc.property(list, list, fc.boolean(), (a, b, shareTail) => {
      const bb = shareTail ? [...b, ...a.slice(-5)] : b;
      const byValue = (x: { v: number }, y: { v: number }) => x.v === y.v;
      assert.deepEqual(
        commonEnds(a, bb),
        reference(a, bb, (x, y) => x === y),
      );
      assert.deepEqual(commonEnds(a, bb, byValue), reference(a, bb, byValue));
    }),
    { numRuns: 500, seed: 20261127 },
  );
});
