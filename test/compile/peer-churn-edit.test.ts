// PeerChurn's edit of the pod map's elements (src/compile/peer-churn.ts
// editElements) in one copy must give what a splice per address gave: the
// same elements, in address order, for any mix of replaced, dropped and
// inserted addresses (several inserted at one place too).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { editElements } from '../../src/compile/peer-churn.ts';
import { findElement } from '../../src/compile/identity-patch.ts';
import type { MapElement } from '../../src/ruleset/ir.ts';

const addr = (n: number): string => `10.0.${n >> 8}.${n & 255}`;

test('property: editElements = one splice per touched address', () => {
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.nat(600), { maxLength: 40 }),
      fc.uniqueArray(fc.record({ n: fc.nat(600), chain: fc.option(fc.constantFrom('a', 'b'), { nil: undefined }) }), {
        selector: (e) => e.n,
        maxLength: 20,
      }),
      (have, touched) => {
        const els: MapElement[] = [...have].sort((x, y) => x - y).map((n) => ({ key: addr(n), chain: 'old' }));
        // The splice per address, as PeerChurn.apply made them.
        const want = [...els];
        const edits: { at: number; found: boolean; a: string; el: MapElement | undefined }[] = [];
        for (const t of touched) {
          const a = addr(t.n);
          const at = findElement(els, a, 4);
          if (!at.found && t.chain === undefined) continue;
          edits.push({ ...at, a, el: t.chain === undefined ? undefined : { key: a, chain: t.chain } });
          const w = findElement(want, a, 4);
          if (t.chain === undefined) want.splice(w.at, 1);
          else if (w.found) want[w.at] = { key: a, chain: t.chain };
          else want.splice(w.at, 0, { key: a, chain: t.chain });
        }
        const got = editElements(els, edits, 4);
        assert.deepEqual(got, want);
        assert.equal(els.length, have.length, 'the last list stays as it was');
      },
    ),
  );
});
