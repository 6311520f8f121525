// diffInvalid over policy lists made from each other (as the agent's sorted
// view makes them, recording the change): the invalid policies it carries from
// list to list equal a fresh read of each list.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { diffInvalid } from '../../src/agent/invalid-policies.ts';
import { recordListChange } from '../../src/model/list-diff.ts';
import { byObjectKey } from '../../src/model/state.ts';
import type { NetworkPolicy } from '../../src/model/types.ts';
import { policy, state } from '../support/state-builder.ts';
import { withErrors } from './fakes.ts';

const empty = state({});

test('property: the invalid policies of each list of a recorded stream equal a fresh read', () => {
  const make = (n: number, err: string | undefined): NetworkPolicy =>
    err === undefined ? policy(`ns${n % 3}`, `p${n}`) : withErrors(policy(`ns${n % 3}`, `p${n}`), err);
  const op = fc.record({ add: fc.boolean(), err: fc.option(fc.constantFrom('x', 'y')), at: fc.nat(), n: fc.nat(40) });
  fc.assert(
    fc.property(fc.array(fc.array(op, { minLength: 1, maxLength: 3 }), { maxLength: 25 }), (steps) => {
      let list: NetworkPolicy[] = [];
      let index = diffInvalid(new Map(), { ...empty, policies: list }).next;
      for (const [i, step] of steps.entries()) {
        const next = [...list];
        const removed: NetworkPolicy[] = [];
        const added: NetworkPolicy[] = [];
        for (const o of step) {
          const p = make(o.n, o.err ?? undefined);
          const at = next.findIndex((q) => byObjectKey(q, p) === 0);
          if (o.add) {
            // A new or replaced object (one per key, the list sorted).
            if (at >= 0) removed.push(...next.splice(at, 1, p));
            else next.push(p);
            added.push(p);
          } else if (next.length > 0) removed.push(...next.splice(o.at % next.length, 1));
        }
        next.sort(byObjectKey);
        recordListChange(list, next, {
          removed: removed.filter((p) => !added.includes(p)).sort(byObjectKey),
          added: added.filter((p) => next.includes(p)).sort(byObjectKey),
        });
        list = next;
        const got = diffInvalid(index, { ...empty, policies: list });
        const fresh = diffInvalid(index, { ...empty, policies: [...list] });
        assert.deepEqual(got, fresh, `after step ${i}`);
        index = got.next;
      }
    }),
    { numRuns: 300, seed: 20261127 },
  );
});
