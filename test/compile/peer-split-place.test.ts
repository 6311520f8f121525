// placeAddresses (compile/peer-split.ts): the map and split sets patched from
// the last ones must be what cutting the whole new list gives (partition),
// for any mix of addresses changing chain, gaining or losing their element,
// and any change of the split choice (identities joining, leaving, changing
// rank); and the change it records for renderUpdate must be exactly the
// objects that left and came, in address order. Lists may come in chunks
// (a patched list is a ChunkedList; small chunks here, to cross their edges).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { partition, placeAddresses, type Placement, type SplitChoice } from '../../src/compile/peer-split.ts';
import { listChange } from '../../src/model/list-diff.ts';
import { ChunkedList, type ReadonlyList } from '../../src/model/list.ts';
import type { MapElement } from '../../src/ruleset/ir.ts';

const addr = (n: number): string => `10.0.${n >> 8}.${n & 255}`;
const CHAINS = ['A', 'B', 'C'] as const;

/** Every address with a chain, in address order. */
function fullList(assign: ReadonlyMap<number, string | undefined>): MapElement[] {
  return [...assign]
    .filter(([, chain]) => chain !== undefined)
    .sort((a, b) => a[0] - b[0])
    .map(([n, chain]) => ({ key: addr(n), chain }));
}

/** The placement with plain arrays (what partition makes), to compare. */
function plain(p: Placement): unknown {
  return { map: [...p.map], split: p.split.map((s) => ({ ...s, elements: [...s.elements] })) };
}

/** The placement with its lists in chunks of `size`. */
function inChunks(p: Placement, size: number): Placement {
  return {
    map: ChunkedList.from(p.map, size),
    split: p.split.map((s) => ({ ...s, elements: ChunkedList.from(s.elements, size) })),
  };
}

const choiceArb = fc
  .uniqueArray(fc.constantFrom(...CHAINS), { maxLength: 2 })
  .map((cs): SplitChoice[] => cs.map((chain) => ({ key: `k${chain}`, chain })));

test('property: placeAddresses equals partitioning the new list, and records exactly what changed', () => {
  let recorded = 0;
  let choiceChanged = 0;
  let edited = 0;
  let merged = 0;
  fc.assert(
    fc.property(
      // Short lists (many changes for their size: one merge) and long ones (few: edits).
      fc.oneof(
        fc.uniqueArray(fc.record({ n: fc.nat(700), chain: fc.constantFrom<string | undefined>(...CHAINS, undefined) }), {
          selector: (e) => e.n,
          maxLength: 60,
        }),
        fc.uniqueArray(fc.record({ n: fc.nat(700), chain: fc.constantFrom<string | undefined>(...CHAINS, undefined) }), {
          selector: (e) => e.n,
          minLength: 300,
          maxLength: 500,
        }),
      ),
      fc.uniqueArray(fc.record({ n: fc.nat(700), chain: fc.constantFrom<string | undefined>(...CHAINS, undefined) }), {
        selector: (e) => e.n,
        maxLength: 25,
      }),
      // Addresses named as moved though their chain stays (the compiler's patches do that).
      fc.uniqueArray(fc.nat(700), { maxLength: 5 }),
      choiceArb,
      choiceArb,
      fc.boolean(),
      fc.option(fc.integer({ min: 1, max: 9 }), { nil: undefined }),
      (initial, moves, extra, before, after, all, chunk) => {
        const assign = new Map<number, string | undefined>(initial.map((e) => [e.n, e.chain]));
        const cut = partition(fullList(assign), before);
        const prev = chunk === undefined ? cut : inChunks(cut, chunk);
        const next = new Map(assign);
        for (const m of moves) next.set(m.n, m.chain);
        const moved = new Set([...moves.map((m) => addr(m.n)), ...extra.map(addr)]);
        const byAddr = new Map([...next].map(([n, chain]) => [addr(n), chain]));
        const got = placeAddresses(prev, after, moved, (a) => byAddr.get(a), 4, all);
        const want = partition(fullList(next), after);
        assert.deepEqual(plain(got), plain(want));
        if (got.map !== prev.map) {
          if (got.map instanceof ChunkedList) edited++;
          else merged++;
        }
        if (JSON.stringify(before) !== JSON.stringify(after)) choiceChanged++;
        // The recorded change of each list that changed: what left and what came, by object, in address order.
        const lists: [ReadonlyList<object>, ReadonlyList<object>][] = [[prev.map, got.map]];
        got.split.forEach((s, j) => {
          const p = prev.split[j];
          if (p !== undefined && p.key === s.key) lists.push([p.elements, s.elements]);
        });
        for (const [a, b] of lists) {
          if (a === b) continue;
          const rec = listChange(a, b);
          assert.ok(rec !== undefined, 'a changed list records its change');
          recorded++;
          const inB = new Set(b);
          const inA = new Set(a);
          assert.deepEqual(
            rec.removed,
            a.filter((x) => !inB.has(x)),
          );
          assert.deepEqual(
            rec.added,
            b.filter((x) => !inA.has(x)),
          );
        }
      },
    ),
    { numRuns: 1500, seed: 20261127 },
  );
  assert.ok(recorded > 500 && choiceChanged > 500, `recorded ${recorded}, choice changed ${choiceChanged}`);
  // Both ways of patching a list ran: edits into chunks (few changes) and one merge (many).
  assert.ok(edited > 100 && merged > 100, `edited ${edited}, merged ${merged}`);
});
