// hasStaged over a stream of policy lists made from each other (as the
// agent's sorted view makes them, recording the change): the count it carries
// from list to list equals a walk of each list.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { recordListChange } from '../../src/model/list-diff.ts';
import { hasStaged } from '../../src/model/staged.ts';
import type { NetworkPolicy } from '../../src/model/types.ts';
import { policy, state } from '../support/state-builder.ts';

const empty = state({});

test('property: hasStaged of each list of a recorded stream equals a walk of the list', () => {
  const make = (n: number, staged: boolean): NetworkPolicy => {
    const p = policy('ns', `p${n}`);
    return staged ? { ...p, staged: true } : p;
  };
  const op = fc.record({ add: fc.boolean(), staged: fc.boolean(), at: fc.nat(), n: fc.nat(50) });
  fc.assert(
    fc.property(fc.array(fc.array(op, { minLength: 1, maxLength: 3 }), { maxLength: 30 }), fc.nat(3), (steps, skipEvery) => {
      let list: NetworkPolicy[] = [make(0, false)];
      for (const [i, step] of steps.entries()) {
        const next = [...list];
        const removed: NetworkPolicy[] = [];
        const added: NetworkPolicy[] = [];
        for (const o of step) {
          if (o.add || next.length === 0) {
            const p = make(o.n, o.staged);
            next.push(p);
            added.push(p);
          } else removed.push(...next.splice(o.at % next.length, 1));
        }
        // Objects removed in the same step they were added are in neither.
        const gone = removed.filter((p) => !added.includes(p));
        recordListChange(list, next, { removed: gone, added: added.filter((p) => !removed.includes(p)) });
        list = next;
        // Not every list is asked about (then the next one walks).
        if (skipEvery > 0 && i % (skipEvery + 1) === skipEvery) continue;
        assert.equal(
          hasStaged({ ...empty, policies: list }),
          list.some((p) => p.staged === true),
          `after step ${i}`,
        );
      }
    }),
    { numRuns: 300, seed: 20261127 },
  );
});
