// The IPv4 fast paths must agree exactly with model/ip.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { formatIP, mergeIntervals, parseIP } from '../../src/model/ip.ts';
import type { Interval } from '../../src/model/ip.ts';
import { patchIntervals, takePredecessor } from '../../src/compile/peers.ts';
import { addresses, addressesFrom, formatV4, mergeV4, parseV4 } from '../../src/compile/v4.ts';
import { ChunkedList } from '../../src/model/list.ts';
import type { ReadonlyList } from '../../src/model/list.ts';

const u32 = fc.integer({ min: 0, max: 2 ** 32 - 1 });

test('parseV4/formatV4 agree with parseIP on canonical addresses', () => {
  fc.assert(
    fc.property(u32, (n) => {
      const text = formatV4(n);
      assert.equal(parseIP(text)?.value, BigInt(n));
      assert.equal(parseV4(text), n);
    }),
  );
});

test('parseV4 refuses what is not a canonical dotted quad (callers fall back to parseIP)', () => {
  for (const bad of [
    '',
    '1.2.3',
    '1.2.3.4.5',
    '256.0.0.1',
    '01.2.3.4',
    '1..2.3',
    '1.2.3.',
    'fd00::1',
    '1.2.3.4 ',
    'a.b.c.d',
    '1234.1.1.1',
  ]) {
    assert.equal(parseV4(bad), undefined, bad);
  }
  assert.equal(parseV4('0.0.0.0'), 0);
  assert.equal(parseV4('255.255.255.255'), 2 ** 32 - 1);
});

test('mergeV4 = mergeIntervals over single addresses', () => {
  fc.assert(
    fc.property(fc.array(fc.oneof(u32, fc.integer({ min: 100, max: 140 })), { maxLength: 60 }), (addrs) => {
      const want = mergeIntervals(addrs.map((n) => ({ family: 4 as const, lo: BigInt(n), hi: BigInt(n) })));
      assert.deepEqual(mergeV4(addrs), want);
    }),
  );
});

test('addresses lists every address of the intervals as formatIP does (across /24 and family boundaries)', () => {
  const iv = fc
    .tuple(u32, fc.integer({ min: 0, max: 600 }))
    .map(([lo, n]): Interval => ({ family: 4, lo: BigInt(lo), hi: BigInt(Math.min(2 ** 32 - 1, lo + n)) }));
  fc.assert(
    fc.property(fc.array(iv, { maxLength: 4 }), fc.boolean(), (ivs, v6) => {
      const all = v6 ? [...ivs, { family: 6 as const, lo: 2n ** 64n + 250n, hi: 2n ** 64n + 260n }] : ivs;
      const want: string[] = [];
      for (const x of all) for (let v = x.lo; v <= x.hi; v++) want.push(formatIP({ family: x.family, value: v }));
      assert.deepEqual(addresses(all), want);
    }),
  );
});

// A peer set patched by a pod diff (peers.ts patchIntervals) keeps its
// other interval objects in place and records the windows it replaced;
// addressesFrom replaces the text of those windows only. Chunks of a few
// intervals, so that windows and offsets cross chunk boundaries.
const chunkSizes = fc.constantFrom(1, 2, 3, 5, 1024);

test('addressesFrom = addresses of the patched intervals, whatever one patch added or removed', () => {
  const small = fc.integer({ min: 0, max: 300 });
  fc.assert(
    fc.property(
      fc.array(small, { maxLength: 120 }),
      fc.array(fc.record({ add: fc.boolean(), n: small }), { maxLength: 12 }),
      fc.boolean(),
      chunkSizes,
      chunkSizes,
      (start, ops, v6, ivChunk, textChunk) => {
        const fam: 4 | 6 = v6 ? 6 : 4;
        const one = (n: number): Interval => ({ family: fam, lo: BigInt(n), hi: BigInt(n) });
        const prev = ChunkedList.from(mergeIntervals(start.map(one)), ivChunk);
        const pts = (add: boolean) => ops.filter((o) => o.add === add).map((o) => ({ family: fam, value: BigInt(o.n) }));
        const next = patchIntervals(prev, pts(false), pts(true));
        const patch = takePredecessor(next);
        const text = ChunkedList.from(addresses(prev), textChunk);
        // No patch: nothing to do, the same list handed back.
        if (patch === undefined) assert.equal(next, prev);
        else {
          assert.equal(patch.from, prev);
          assert.equal(takePredecessor(next), undefined, 'given once');
        }
        assert.deepEqual([...(patch === undefined ? text : addressesFrom(text, patch))], addresses(next));
      },
    ),
  );
});

// As the resolver uses it: each patched list's text made from the last one's,
// step after step, both families in one list.
test('addressesFrom chained over a stream of patches = addresses of each list', () => {
  const small = fc.integer({ min: 0, max: 200 });
  fc.assert(
    fc.property(
      fc.array(fc.record({ v6: fc.boolean(), n: small }), { maxLength: 80 }),
      fc.array(fc.array(fc.record({ add: fc.boolean(), v6: fc.boolean(), n: small }), { minLength: 1, maxLength: 6 }), {
        maxLength: 15,
      }),
      chunkSizes,
      (start, steps, size) => {
        const pt = (v6: boolean, n: number) => ({ family: (v6 ? 6 : 4) as 4 | 6, value: BigInt(n) });
        let ivs: ReadonlyList<Interval> = ChunkedList.from(
          mergeIntervals(start.map((a) => ({ family: a.v6 ? 6 : 4, lo: BigInt(a.n), hi: BigInt(a.n) }))),
          size,
        );
        let text: ReadonlyList<string> = ChunkedList.from(addresses(ivs), size);
        for (const step of steps) {
          const next = patchIntervals(
            ivs,
            step.filter((o) => !o.add).map((o) => pt(o.v6, o.n)),
            step.filter((o) => o.add).map((o) => pt(o.v6, o.n)),
          );
          const patch = takePredecessor(next);
          if (patch !== undefined) text = addressesFrom(text, patch);
          else assert.equal(next, ivs);
          ivs = next;
          assert.deepEqual([...text], addresses(ivs));
        }
      },
    ),
  );
});

test('a patch shares the chunks it does not touch, of the intervals and of their text, with the lists it was patched from', () => {
  // 20,000 single addresses 10 apart: one address more joins one of them (a new interval object), one fewer removes one.
  const single: Interval[] = [];
  for (let r = 0; r < 20_000; r++) single.push({ family: 4, lo: BigInt(r * 10), hi: BigInt(r * 10) });
  const ivs = ChunkedList.from(single);
  const list = ChunkedList.from(addresses(ivs));
  const next = patchIntervals(ivs, [{ family: 4, value: 150_000n }], [{ family: 4, value: 50_001n }]);
  assert.ok(next instanceof ChunkedList);
  assert.deepEqual(
    [...next],
    mergeIntervals([...single.filter((iv) => iv.lo !== 150_000n), { family: 4, lo: 50_001n, hi: 50_001n }]),
  );
  // Two places changed: at most four chunks copied of twenty, for the intervals and for their text.
  assert.ok(next.sharedChunks(ivs) >= ivs.chunkCount - 4, `${next.sharedChunks(ivs)} of ${ivs.chunkCount} shared`);
  const got = addressesFrom(list, takePredecessor(next)!);
  assert.deepEqual([...got], addresses(next));
  assert.ok(got.sharedChunks(list) >= list.chunkCount - 4, `${got.sharedChunks(list)} of ${list.chunkCount} shared`);
});
