// Elements as nft prints them (src/nft/elements.ts): the IR's values
// (ruleset/ir.ts) become text only here, and equal values mean equal text.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { formatIntervalElement } from '../../src/model/ip.ts';
import type { Interval } from '../../src/model/ip.ts';
import { elementText, elementTexts, formatInterval, keyText, sameElement } from '../../src/nft/elements.ts';
import type { ElementKey, SetElement } from '../../src/ruleset/ir.ts';

const u32 = fc.integer({ min: 0, max: 2 ** 32 - 1 });

test('formatInterval = formatIntervalElement for any IPv4 interval (prefixes, ranges, /0)', () => {
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
    assert.equal(formatInterval(iv), formatIntervalElement(iv), `${lo}-${hi}`);
  }
  fc.assert(
    fc.property(u32, fc.integer({ min: 0, max: 32 }), fc.boolean(), (a, bits, aligned) => {
      const size = 2 ** bits;
      const lo = aligned ? a - (a % size) : a;
      const hi = Math.min(2 ** 32 - 1, lo + size - 1);
      const iv: Interval = { family: 4, lo: BigInt(lo), hi: BigInt(hi) };
      assert.equal(formatInterval(iv), formatIntervalElement(iv));
    }),
  );
  const v6: Interval = { family: 6, lo: 1n, hi: 2n };
  assert.equal(formatInterval(v6), formatIntervalElement(v6));
});

test('keys print as nft concatenations; comments are quoted and sanitized', () => {
  const iv = (lo: number, hi: number): Interval => ({ family: 4, lo: BigInt(lo), hi: BigInt(hi) });
  const cases: [ElementKey, string][] = [
    [{ kind: 'addr', addr: '10.0.0.5' }, '10.0.0.5'],
    [{ kind: 'addr', addr: iv(0x0a000000, 0x0a0000ff) }, '10.0.0.0/24'],
    [{ kind: 'addr', addr: iv(0x0a000000, 0x0a000009) }, '10.0.0.0-10.0.0.9'],
    [{ kind: 'addr', addr: { family: 6, lo: 0xfd00n << 112n, hi: (0xfd00n << 112n) + 0xffffn } }, 'fd00::/112'],
    [{ kind: 'proto-port', proto: 'tcp', port: 80 }, 'tcp . 80'],
    [{ kind: 'proto-port', proto: 'udp', port: { lo: 80, hi: 90 } }, 'udp . 80-90'],
    [{ kind: 'addr-proto-port', addr: '10.0.0.5', proto: 'tcp', port: 8080 }, '10.0.0.5 . tcp . 8080'],
    [{ kind: 'addr-proto-port', addr: 'fd00::5', proto: 'sctp', port: { lo: 1000, hi: 2000 } }, 'fd00::5 . sctp . 1000-2000'],
    [{ kind: 'addr-proto', addr: '10.0.0.5', proto: 'udp' }, '10.0.0.5 . udp'],
  ];
  for (const [k, want] of cases) assert.equal(keyText(k), want);
  const e: SetElement = { kind: 'addr-proto-port', addr: '10.0.0.5', proto: 'tcp', port: 8080, comment: 'shop/web ingress[0]' };
  assert.equal(elementText(e), '10.0.0.5 . tcp . 8080 comment "shop/web ingress[0]"');
  // A hand-built comment cannot break out of its quotes.
  assert.doesNotMatch(elementText({ kind: 'addr', addr: '10.0.0.5', comment: 'x" drop' }), /x" drop/);
  assert.deepEqual(elementTexts({ elements: [e, { kind: 'addr', addr: '10.0.0.6' }] }), [elementText(e), '10.0.0.6']);
});

test('sameElement holds exactly when the texts are equal (within one key form)', () => {
  const port = fc.oneof(
    fc.integer({ min: 0, max: 3 }),
    fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 4, max: 5 })).map(([lo, hi]) => ({ lo, hi })),
  );
  const addr = fc.oneof(
    fc.constantFrom('10.0.0.1', '10.0.0.2'),
    fc
      .tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 4, max: 7 }))
      .map(([lo, hi]) => ({ family: 4 as const, lo: BigInt(lo), hi: BigInt(hi) })),
  );
  const proto = fc.constantFrom('tcp' as const, 'udp' as const);
  const comment = fc.option(fc.constantFrom('a', 'b'), { nil: undefined });
  const element: fc.Arbitrary<SetElement> = fc.oneof(
    fc.record({ kind: fc.constant('addr' as const), addr, comment }),
    fc.record({ kind: fc.constant('proto-port' as const), proto, port, comment }),
    fc.record({ kind: fc.constant('addr-proto-port' as const), addr, proto, port, comment }),
    fc.record({ kind: fc.constant('addr-proto' as const), addr, proto, comment }),
  );
  fc.assert(
    fc.property(element, element, (a, b) => {
      if (a.kind !== b.kind) return;
      assert.equal(sameElement(a, b), elementText(a) === elementText(b), `${elementText(a)} vs ${elementText(b)}`);
    }),
  );
});
