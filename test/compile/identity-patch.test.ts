// symmetricDifference (compile/identity-patch.ts): the addresses in one of two
// sorted address lists and not the other, with the chunks the lists share
// (one patched from the other, model/list.ts) stepped over whole.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { symmetricDifference } from '../../src/compile/identity-patch.ts';
import { ChunkedList } from '../../src/model/list.ts';
import type { ListEdit } from '../../src/model/list.ts';

const text = (n: number): string => `10.0.${n >> 8}.${n & 255}`;

test('property: symmetricDifference of a chunked list and one patched from it = the sets difference', () => {
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.integer({ min: 0, max: 3000 }), { maxLength: 300 }),
      fc.uniqueArray(fc.integer({ min: 0, max: 3000 }), { maxLength: 8 }),
      fc.integer({ min: 1, max: 9 }),
      fc.boolean(),
      (start, flips, chunk, asArray) => {
        const before = [...start].sort((x, y) => x - y);
        const a = ChunkedList.from(before.map(text), chunk);
        // Each flip removes the address when there, inserts it where it goes when not: one edit list, in index order.
        const edits: ListEdit<string>[] = [];
        for (const n of [...flips].sort((x, y) => x - y)) {
          const at = before.findIndex((m) => m >= n);
          const i = at < 0 ? before.length : at;
          edits.push(before[i] === n ? { at: i, insert: false, now: undefined } : { at: i, insert: true, now: text(n) });
        }
        const b = a.edit(edits);
        const after = new Set(before);
        for (const n of flips) if (!after.delete(n)) after.add(n);
        const want = new Set(flips.map(text));
        const out = new Set<string>();
        // Either side may be a plain array (a fresh resolution) against a chunked one.
        assert.equal(symmetricDifference(asArray ? [...a] : a, b, 4, out, 10_000), true);
        assert.deepEqual([...out].sort(), [...want].sort());
        assert.deepEqual([...b], [...after].sort((x, y) => x - y).map(text));
        const back = new Set<string>();
        symmetricDifference(b, a, 4, back, 10_000);
        assert.deepEqual([...back].sort(), [...want].sort());
      },
    ),
    { numRuns: 1000, seed: 1130 },
  );
});

test('symmetricDifference stops past the limit', () => {
  const a = ChunkedList.from([1, 2, 3, 4, 5].map(text), 2);
  const out = new Set<string>();
  assert.equal(symmetricDifference(a, [], 4, out, 3), false);
});
