// commonEnds (and changedEnds, from a recorded change; listEnds, of chunked lists): the head and tail two lists share, by object or by `same`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { changedEnds, commonEnds, listEnds, recordListChange } from '../../src/model/list-diff.ts';
import { ChunkedList } from '../../src/model/list.ts';
import { editedFrom } from '../support/chunked-edit.ts';

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

test('property: changedEnds of a recorded change equals commonEnds; an unrecorded or wrong record falls back to it', () => {
  // Sorted lists of distinct objects by key; `next` drops, replaces (a new object, same key) and inserts keys.
  const pool = Array.from({ length: 40 }, (_, k) => ({ k }));
  const edit = fc.record({
    keep: fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }),
    replace: fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }),
    present: fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }),
  });
  fc.assert(
    fc.property(edit, fc.nat(3), ({ keep, replace, present }, mode) => {
      const prev = pool.filter((_, k) => present[k]);
      const next: { k: number }[] = [];
      for (const k of pool.keys()) {
        if (present[k] ? !keep[k] : !(keep[k] && replace[k])) continue; // dropped, or a key not added
        next.push(present[k] && replace[k] ? { k } : pool[k]!);
      }
      const inNext = new Set(next);
      const inPrev = new Set(prev);
      const change = { removed: prev.filter((x) => !inNext.has(x)), added: next.filter((x) => !inPrev.has(x)) };
      // 0: recorded; 1: recorded with a wrong entry (an object of neither list); 2: over the limit; 3: not recorded.
      if (mode === 0 || mode === 2) recordListChange(prev, next, change);
      if (mode === 1) recordListChange(prev, next, { removed: [...change.removed, { k: -1 }], added: change.added });
      const want = commonEnds(prev, next);
      assert.deepEqual(changedEnds(prev, next, mode === 2 ? 0 : 64), want);
    }),
    { numRuns: 1000, seed: 20261128 },
  );
});

// The agent's policy lists are ChunkedLists, each edited from the last
// (kube/sorted-view.ts): listEnds compares their shared chunks by identity.
test('property: listEnds of arrays, of chunked lists edited from one another, and of mixed shapes equals commonEnds', () => {
  const entries = Array.from({ length: 12 }, (_, i) => ({ i }));
  const op = fc.oneof(
    fc.record({ op: fc.constant('replace' as const), at: fc.nat(), by: fc.nat({ max: 11 }) }),
    fc.record({ op: fc.constant('delete' as const), at: fc.nat() }),
    fc.record({ op: fc.constant('insert' as const), at: fc.nat(), by: fc.nat({ max: 11 }) }),
  );
  fc.assert(
    fc.property(
      fc.array(fc.nat({ max: 11 }), { maxLength: 40 }),
      fc.array(op, { maxLength: 4 }),
      fc.integer({ min: 1, max: 5 }),
      (start, ops, size) => {
        const prevArr = start.map((k) => entries[k]!);
        const nextArr = [...prevArr];
        for (const o of ops) {
          const at = nextArr.length === 0 ? 0 : o.at % nextArr.length;
          if (o.op === 'replace' && nextArr.length > 0) nextArr[at] = { ...entries[o.by]! };
          else if (o.op === 'delete') nextArr.splice(at, 1);
          else if (o.op === 'insert') nextArr.splice(at, 0, entries[o.by]!);
        }
        const want = commonEnds(prevArr, nextArr);
        const prev = ChunkedList.from(prevArr, size);
        const next = editedFrom(prev, nextArr);
        assert.deepEqual([...next], nextArr);
        assert.deepEqual(listEnds(prev, next), want, 'edited chunks');
        assert.deepEqual(listEnds(prev, ChunkedList.from(nextArr, size + 1)), want, 'no chunk shared');
        assert.deepEqual(listEnds(prevArr, next), want, 'an array and chunks');
        assert.deepEqual(listEnds(prevArr, nextArr), want, 'arrays');
      },
    ),
    { numRuns: 500, seed: 20261128 },
  );
});
