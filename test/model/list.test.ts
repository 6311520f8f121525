// ChunkedList (model/list.ts): a list whose edits share untouched chunks with
// the list they came from. It must read exactly as the array the same edits
// give, never change once handed out, share what no edit touched, and not
// fragment into ever smaller chunks under a long stream of edits.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ChunkedList, listArray, type ListEdit } from '../../src/model/list.ts';

/** The array these edits give (the reference). */
function applied<T>(list: readonly T[], edits: readonly ListEdit<T>[]): T[] {
  const out: T[] = [];
  let r = 0;
  for (const e of edits) {
    while (r < e.at) out.push(list[r++]!);
    if (!e.insert) r++;
    if (e.now !== undefined) out.push(e.now);
  }
  while (r < list.length) out.push(list[r++]!);
  return out;
}

/** Random edits of a list of `n` entries, in the order edit() takes them. */
function editsOf(n: number): fc.Arbitrary<ListEdit<number>[]> {
  const one = fc.record({
    at: fc.nat(n),
    insert: fc.boolean(),
    remove: fc.boolean(),
    v: fc.integer({ min: 1000, max: 9999 }),
  });
  return fc.array(one, { maxLength: 12 }).map((raw) => {
    const byPlace = new Map<number, ListEdit<number>>();
    const inserts: ListEdit<number>[] = [];
    for (const e of raw) {
      if (e.insert || e.at === n) inserts.push({ at: e.at, insert: true, now: e.v });
      else if (!byPlace.has(e.at)) byPlace.set(e.at, { at: e.at, insert: false, now: e.remove ? undefined : e.v });
    }
    return [...inserts, ...byPlace.values()].sort((a, b) => a.at - b.at || (a.insert === b.insert ? 0 : a.insert ? -1 : 1));
  });
}

function reads<T>(list: ChunkedList<T>, want: readonly T[]): void {
  assert.deepEqual([...list], want);
  assert.equal(list.length, want.length);
  for (let i = 0; i < want.length; i++) assert.equal(list.at(i), want[i]);
  assert.equal(list.at(-1), want[want.length - 1]);
  assert.equal(list.at(want.length), undefined);
  // The same answers as an array's at() for what is not a plain index.
  for (const odd of [-want.length, -want.length - 1, 1.7, -0.5, NaN, Infinity, -Infinity])
    assert.equal(list.at(odd), want.at(odd), `at(${odd})`);
  assert.deepEqual(list.toJSON(), want);
  assert.deepEqual(
    list.map((x, i) => [x, i]),
    want.map((x, i) => [x, i]),
  );
  assert.deepEqual(
    list.filter((_, i) => i % 2 === 0),
    want.filter((_, i) => i % 2 === 0),
  );
  const last = want[want.length - 1];
  assert.equal(
    list.some((x) => x === last),
    want.length > 0,
  );
  assert.equal(
    list.find((x) => x === last),
    last,
  );
}

test('property: a stream of edits reads as the same edits of an array; every list handed out stays as it was', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 5 }),
      fc.array(fc.integer({ min: 0, max: 999 }), { maxLength: 30 }),
      fc.array(fc.nat(), { minLength: 1, maxLength: 15 }),
      (chunkSize, start, seeds) => {
        let list = ChunkedList.from(start, chunkSize);
        let want = [...start];
        reads(list, want);
        const kept: { list: ChunkedList<number>; copy: number[] }[] = [{ list, copy: [...want] }];
        for (const seed of seeds) {
          const edits = fc.sample(editsOf(want.length), { numRuns: 1, seed })[0]!;
          list = list.edit(edits);
          want = applied(want, edits);
          reads(list, want);
          kept.push({ list, copy: [...want] });
        }
        for (const k of kept) assert.deepEqual([...k.list], k.copy);
      },
    ),
    { numRuns: 400, seed: 41 },
  );
});

test('an edit copies only the chunks it touches', () => {
  const list = ChunkedList.from(
    Array.from({ length: 10_000 }, (_, i) => i),
    1024,
  );
  assert.equal(list.chunkCount, 10);
  const next = list.edit([{ at: 5000, insert: false, now: -1 }]);
  assert.equal(next.at(5000), -1);
  assert.equal(list.at(5000), 5000, 'the list it came from is unchanged');
  assert.equal(next.sharedChunks(list), 9);
  assert.equal(list.edit([]), list, 'no edit, the same list');
});

test('a long stream of removals and insertions does not leave ever more, ever smaller chunks', () => {
  let list = ChunkedList.from(
    Array.from({ length: 4096 }, (_, i) => i * 2),
    64,
  );
  let next = 1;
  for (let round = 0; round < 2000; round++) {
    // Remove one entry and insert one elsewhere: the length stays, the chunks move.
    const at = (round * 7919) % list.length;
    const to = (round * 104729) % list.length;
    const edits: ListEdit<number>[] =
      at < to
        ? [
            { at, insert: false, now: undefined },
            { at: to, insert: true, now: next++ },
          ]
        : at > to
          ? [
              { at: to, insert: true, now: next++ },
              { at, insert: false, now: undefined },
            ]
          : [{ at, insert: false, now: next++ }];
    list = list.edit(edits);
  }
  assert.equal(list.length, 4096);
  // Every chunk holds at least a quarter of the chunk size, but for joins that did not fit: at most twice the fresh count.
  assert.ok(list.chunkCount <= 2 * (4096 / 64), `chunks: ${list.chunkCount}`);
  // Removals spread over every chunk: the shrunk chunks join their neighbours.
  let k = 0;
  while (list.length > 512) list = list.edit([{ at: (k++ * 13) % list.length, insert: false, now: undefined }]);
  assert.ok(list.chunkCount <= 512 / (64 / 4) + 1, `chunks after removals: ${list.chunkCount}`);
  // Removals down to nothing leave no empty chunks.
  let shrinking = list;
  while (shrinking.length > 0) shrinking = shrinking.edit([{ at: 0, insert: false, now: undefined }]);
  assert.equal(shrinking.chunkCount, 0);
  assert.deepEqual([...shrinking.edit([{ at: 0, insert: true, now: 7 }])], [7], 'an empty list takes insertions');
});

test('JSON writes the entries as an array; listArray hands an array back as it is', () => {
  const list = ChunkedList.from([1, 2, 3], 2);
  assert.equal(JSON.stringify({ pods: list }), '{"pods":[1,2,3]}');
  const arr = [1, 2];
  assert.equal(listArray(arr), arr);
  assert.deepEqual(listArray(list), [1, 2, 3]);
  // ChunkedList.of: a chunked list as it is (chunks shared), an array in chunks.
  assert.equal(ChunkedList.of(list), list);
  assert.deepEqual([...ChunkedList.of(arr)], arr);
  assert.ok(ChunkedList.of(arr) instanceof ChunkedList);
  assert.throws(() => ChunkedList.from([1], 0), /chunk size/);
});
