// relevantPolicies over a stream of policy lists: the grouping it keeps per
// kind and patches from the last list (a few policies added, removed,
// replaced, also out of order) gives what a fresh grouping gives.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { relevantPolicies } from '../../src/compile/policy-chains.ts';
import type { ContributedPolicy, PolicyKind } from '../../src/kinds/kind.ts';
import { contributeNetworkPolicy } from '../../src/kinds/network-policy.ts';
import { ChunkedList, type ReadonlyList } from '../../src/model/list.ts';
import type { NetworkPolicy } from '../../src/model/types.ts';
import { editedFrom } from '../support/chunked-edit.ts';
import { pod, policy, sel, state } from '../support/state-builder.ts';

const NSS = ['a', 'b', 'c', 'd'];
const local = NSS.flatMap((ns) => [
  pod(ns, `${ns}-web`, { labels: { app: 'web' } }),
  pod(ns, `${ns}-db`, { labels: { app: 'db' } }),
]);

/** A kind that lists `current` as given (maybe out of order, maybe with duplicates). */
function listKind(current: () => ReadonlyList<ContributedPolicy>): PolicyKind {
  return { kind: 'Test', tier: 'allow-list', policies: () => current() } as unknown as PolicyKind;
}

const names = (ps: ReturnType<typeof relevantPolicies>) =>
  ps.map((p) => `${p.policy.key}:${p.targets.map((t) => t.name).join(',')}`);

// The agent's NetworkPolicy kind lists chunks, each list edited from the last (network-policy.ts).
for (const shape of ['array', 'chunked'] as const) {
  test(`property (${shape}): the kept and patched grouping equals a fresh one after every list of a stream`, () => {
    const make = (ns: string, n: number, app: string): NetworkPolicy =>
      policy(ns, `p${n}`, { podSelector: app === 'any' ? sel() : sel({ app }) });
    const op = fc.oneof(
      fc.record({
        op: fc.constant('add' as const),
        ns: fc.constantFrom(...NSS),
        n: fc.nat(30),
        app: fc.constantFrom('web', 'db', 'any'),
      }),
      fc.record({ op: fc.constant('remove' as const), at: fc.nat() }),
      fc.record({ op: fc.constant('replace' as const), at: fc.nat(), app: fc.constantFrom('web', 'db', 'none') }),
      fc.record({ op: fc.constant('shuffle' as const), at: fc.nat() }),
    );
    fc.assert(
      fc.property(fc.array(fc.array(op, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 25 }), (steps) => {
        let list: ContributedPolicy[] = [];
        let given: ReadonlyList<ContributedPolicy> = shape === 'array' ? list : ChunkedList.from(list, 2);
        const kept = listKind(() => given);
        const s = state({ pods: local });
        for (const [i, step] of steps.entries()) {
          const next = [...list];
          for (const o of step) {
            if (o.op === 'add') next.push(contributeNetworkPolicy(make(o.ns, o.n, o.app)));
            else if (next.length === 0) continue;
            else if (o.op === 'remove') next.splice(o.at % next.length, 1);
            else if (o.op === 'replace') {
              const old = next[o.at % next.length]!;
              next[o.at % next.length] = contributeNetworkPolicy(make(old.namespace, Number(old.key.split('/p')[1]), o.app));
            } else {
              const j = o.at % next.length;
              [next[0], next[j]] = [next[j]!, next[0]!];
            }
          }
          // Mostly sorted, as the sources give them; the shuffles test the fallback.
          if (i % 3 !== 2) next.sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
          const prev = list;
          const prevGiven = given;
          list = next;
          const nextGiven = prevGiven instanceof ChunkedList ? editedFrom(prevGiven, next) : next;
          given = nextGiven;
          // A copy: groupings are kept per list object, so the same object would hand the kept kind this one.
          const fresh = relevantPolicies(s, local, [listKind(() => [...next])]);
          assert.deepEqual(names(relevantPolicies(s, local, [kept])), names(fresh), `after step ${i}`);
          // Back to the previous list object and forth again (a staged policy's
          // shadow state does that): the grouping is patched, never reused stale.
          if (i % 2 === 1) {
            given = prevGiven;
            const back = relevantPolicies(s, local, [listKind(() => [...prev])]);
            assert.deepEqual(names(relevantPolicies(s, local, [kept])), names(back), `back before step ${i}`);
            given = nextGiven;
            assert.deepEqual(names(relevantPolicies(s, local, [kept])), names(fresh), `forth after step ${i}`);
          }
        }
      }),
      { numRuns: 300, seed: 20261127 },
    );
  });
}
