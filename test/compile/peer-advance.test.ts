// PeerResolver.advance (compile/peers.ts) patches a big pod peer's result by
// a pod diff instead of resolving it again. Whatever the diff, the patched
// result must be what a fresh resolver gives on the new state: the same
// pods (in key order) and the same merged address intervals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ClusterIndex } from '../../src/compile/cluster-index.ts';
import { PeerResolver, patchIntervals, patchSorted } from '../../src/compile/peers.ts';
import { ChunkedList, listArray } from '../../src/model/list.ts';
import type { ReadonlyList } from '../../src/model/list.ts';
import { mergeIntervals } from '../../src/model/ip.ts';
import type { Interval } from '../../src/model/ip.ts';
import type { ClusterState, Peer, Pod } from '../../src/model/types.ts';
import { byObjectKey } from '../../src/model/state.ts';
import { ns, pod, podPeer, sel, state } from '../support/state-builder.ts';

test('property: patchIntervals of one address at a time equals merging the address set again', () => {
  const addr = fc.record({ family: fc.constantFrom(4 as const, 6 as const), v: fc.bigInt({ min: 0n, max: 40n }) });
  // The list patched is an array or chunks of a few intervals (windows across chunk boundaries).
  const shape = fc.constantFrom(0, 1, 2, 3);
  fc.assert(
    fc.property(
      fc.array(addr, { maxLength: 30 }),
      fc.array(fc.tuple(fc.boolean(), addr), { maxLength: 20 }),
      shape,
      (start, ops, size) => {
        const have = new Map<string, { family: 4 | 6; v: bigint }>();
        const key = (a: { family: 4 | 6; v: bigint }): string => `${a.family}/${a.v}`;
        for (const a of start) have.set(key(a), a);
        const merged = (): Interval[] => mergeIntervals([...have.values()].map((a) => ({ family: a.family, lo: a.v, hi: a.v })));
        let ivs: ReadonlyList<Interval> = size === 0 ? merged() : ChunkedList.from(merged(), size);
        for (const [add, a] of ops) {
          if (add) have.set(key(a), a);
          else have.delete(key(a));
          const pt = [{ family: a.family, value: a.v }];
          ivs = add ? patchIntervals(ivs, [], pt) : patchIntervals(ivs, pt, []);
          assert.deepEqual(listArray(ivs), merged());
        }
      },
    ),
    { numRuns: 500, seed: 1127 },
  );
});

test('property: patchIntervals (a whole diff in one pass) equals merging the address set again, untouched intervals kept', () => {
  const addr = fc.record({ family: fc.constantFrom(4 as const, 6 as const), v: fc.bigInt({ min: 0n, max: 40n }) });
  fc.assert(
    fc.property(
      fc.array(addr, { maxLength: 30 }),
      fc.array(addr, { maxLength: 12 }),
      fc.array(addr, { maxLength: 12 }),
      (start, removes, adds) => {
        const key = (a: { family: 4 | 6; v: bigint }): string => `${a.family}/${a.v}`;
        const have = new Map(start.map((a) => [key(a), a]));
        const before = mergeIntervals([...have.values()].map((a) => ({ family: a.family, lo: a.v, hi: a.v })));
        for (const a of removes) have.delete(key(a));
        for (const a of adds) have.set(key(a), a);
        const want = mergeIntervals([...have.values()].map((a) => ({ family: a.family, lo: a.v, hi: a.v })));
        const pts = (l: typeof removes) => l.map((a) => ({ family: a.family, value: a.v }));
        const got = patchIntervals(before, pts(removes), pts(adds));
        assert.deepEqual(listArray(got), want);
        // An interval no address of the diff is in or next to is handed on as the same object.
        const touched = (iv: Interval): boolean =>
          [...removes, ...adds].some((a) => a.family === iv.family && a.v >= iv.lo - 1n && a.v <= iv.hi + 1n);
        for (const iv of before) if (!touched(iv)) assert.ok(listArray(got).includes(iv), `kept ${iv.family}/${iv.lo}-${iv.hi}`);
      },
    ),
    { numRuns: 1000, seed: 1128 },
  );
});

test('property: patchSorted equals dropping and inserting in an array; chunks it does not touch are shared', () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 0, max: 150 }), { minLength: 100, maxLength: 200 }),
      fc.array(fc.nat(), { maxLength: 3 }),
      fc.array(fc.integer({ min: 0, max: 150 }), { maxLength: 3 }),
      (names, dropAt, addNames) => {
        const mk = (n: number): Pod => pod('a', `p${String(n).padStart(2, '0')}`);
        const before = names.map(mk).sort(byObjectKey);
        const drop = before.length === 0 ? [] : [...new Set(dropAt.map((d) => d % before.length))];
        const add = addNames.map(mk);
        const list = ChunkedList.from(before, 8);
        const got = patchSorted(list, drop, add);
        const want = [...before.filter((_, i) => !drop.includes(i)), ...add].sort(byObjectKey);
        // Same keys in the same order; among equal keys the added ones after the kept ones (as insertByObjectKey).
        assert.deepEqual(
          [...got].map((p) => p.name),
          want.map((p) => p.name),
        );
        for (const p of add) assert.ok([...got].includes(p));
        // A chunk is copied only where an edit lands: at most two per edit.
        assert.ok(got.sharedChunks(list) >= list.chunkCount - 2 * (drop.length + add.length));
      },
    ),
    { numRuns: 500, seed: 1129 },
  );
});

const NSS = ['a', 'b', 'c'];
const APPS = ['web', 'db'];
const PEERS: Peer[] = [
  podPeer(sel({ app: 'web' })),
  podPeer(sel({}), sel({})),
  podPeer(sel({ app: 'db' }), sel({ team: 'x' })),
  podPeer(undefined, sel({ team: 'y' })),
];

test('property: a patched peer result equals a fresh resolution after every pod diff', () => {
  const podArb = fc.record({
    ns: fc.constantFrom(...NSS),
    name: fc.constantFrom('p0', 'p1', 'p2', 'p3', 'p4', 'p5'),
    app: fc.constantFrom(...APPS),
    ip: fc.integer({ min: 1, max: 12 }),
    v6: fc.boolean(),
    done: fc.boolean(),
    back: fc.boolean(),
  });
  const make = (x: { ns: string; name: string; app: string; ip: number; v6: boolean; done: boolean }): Pod =>
    pod(x.ns, x.name, {
      labels: { app: x.app },
      ips: x.v6 ? [`10.0.0.${x.ip}`, `fd00::${x.ip}`] : [`10.0.0.${x.ip}`],
      ...(x.done ? { phase: 'Succeeded' as const } : {}),
    });
  fc.assert(
    fc.property(
      fc.array(podArb, { maxLength: 12 }),
      fc.array(fc.tuple(fc.array(podArb, { minLength: 1, maxLength: 3 }), fc.boolean()), { maxLength: 8 }),
      (start, steps) => {
        const namespaces = NSS.map((n, i) => ns(n, { team: i === 2 ? 'y' : 'x' }));
        const byKey = new Map<string, Pod>();
        // Every object a key had: a step may bring an earlier one back (the same object, gone between two reads).
        const history = new Map<string, Pod[]>();
        const remember = (k: string, p: Pod): Pod => {
          history.set(k, [...(history.get(k) ?? []), p]);
          return p;
        };
        for (const x of start) byKey.set(`${x.ns}/${x.name}`, remember(`${x.ns}/${x.name}`, make(x)));
        const snapshot = (): ClusterState => state({ namespaces, pods: [...byKey.values()].sort(byObjectKey) });
        let s = snapshot();
        const idx = new ClusterIndex(s, 0);
        const peers = new PeerResolver(idx, 0);
        // Addresses computed up front: the patch then works on intervals, not only on pods.
        for (const p of PEERS) peers.peerIntervals(p, 'a');
        // Read after some steps only: the diffs of the others wait in the results and are applied together.
        for (const [i, [step, read]] of steps.entries()) {
          const removed: Pod[] = [];
          const added: Pod[] = [];
          for (const x of step) {
            const k = `${x.ns}/${x.name}`;
            const old = byKey.get(k);
            if (old !== undefined) removed.push(old);
            if (x.ip === 12)
              byKey.delete(k); // 12: the pod is deleted
            else {
              const earlier = x.back ? history.get(k)?.find((q) => q !== old) : undefined;
              const p = earlier ?? remember(k, make(x));
              byKey.set(k, p);
              added.push(p);
            }
          }
          const next = snapshot();
          const gone = removed.filter((p) => ![...next.pods].includes(p));
          const came = added.filter((p) => [...next.pods].includes(p) && ![...s.pods].includes(p));
          idx.advance(next, [...new Set(gone)], [...new Set(came)]);
          peers.advance([...new Set(gone)], [...new Set(came)]);
          s = next;
          if (!read && i < steps.length - 1) continue;
          const fresh = new PeerResolver(new ClusterIndex(s, 0), 0);
          for (const p of PEERS) {
            assert.deepEqual(listArray(peers.peerIntervals(p, 'a')), listArray(fresh.peerIntervals(p, 'a')), JSON.stringify(p));
            assert.deepEqual(
              peers.destinations([p], 'a').pods.map((q) => `${q.namespace}/${q.name}`),
              fresh.destinations([p], 'a').pods.map((q) => `${q.namespace}/${q.name}`),
            );
          }
        }
      },
    ),
    { numRuns: 300, seed: 2711 },
  );
});
