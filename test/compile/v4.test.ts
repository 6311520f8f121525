// The IPv4 fast paths must agree exactly with model/ip.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { formatIntervalElement, mergeIntervals, parseIP } from '../../src/model/ip.ts';
import type { Interval } from '../../src/model/ip.ts';
import { formatElement, formatV4, mergeV4, parseV4 } from '../../src/compile/v4.ts';

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

test('formatElement = formatIntervalElement for any IPv4 interval (prefixes, ranges, /0)', () => {
  const edge: [number, number][] = [
    [0, 2 ** 32 - 1],
    [0, 2 ** 31 - 1],
    [2 ** 31, 2 ** 32 - 1],
    [0, 3 * 2 ** 30 - 1],
    [10, 10],
    [8, 15],
    [8, 16],
  ];
  for (const [lo, hi] of edge) {
    const iv: Interval = { family: 4, lo: BigInt(lo), hi: BigInt(hi) };
    assert.equal(formatElement(iv), formatIntervalElement(iv), `${lo}-${hi}`);
  }
  fc.assert(
    fc.property(u32, fc.integer({ min: 0, max: 32 }), fc.boolean(), (a, bits, aligned) => {
      const size = 2 ** bits;
      const lo = aligned ? a - (a % size) : a;
      const hi = Math.min(2 ** 32 - 1, lo + size - 1);
      const iv: Interval = { family: 4, lo: BigInt(lo), hi: BigInt(hi) };
      assert.equal(formatElement(iv), formatIntervalElement(iv));
    }),
  );
  const v6: Interval = { family: 6, lo: 1n, hi: 2n };
  assert.equal(formatElement(v6), formatIntervalElement(v6));
});

test('mergeV4 = mergeIntervals over single addresses', () => {
  fc.assert(
    fc.property(fc.array(fc.oneof(u32, fc.integer({ min: 100, max: 140 })), { maxLength: 60 }), (addrs) => {
      const want = mergeIntervals(addrs.map((n) => ({ family: 4 as const, lo: BigInt(n), hi: BigInt(n) })));
      assert.deepEqual(mergeV4(addrs), want);
    }),
  );
});
