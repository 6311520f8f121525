// SortedView (kube/sorted-view.ts) advances a sorted list by the keys that
// changed: after any stream of changes it must equal sorting the source anew,
// leave earlier lists as they were, not rebuild for a few changes, and
// record what it changed as a walk of the two lists would find it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ChunkedSortedView, findKey } from '../../src/kube/sorted-view.ts';
import type { ReadonlyList } from '../../src/model/list.ts';
import { byObjectKey } from '../../src/model/state.ts';
import { listChange } from '../../src/model/list-diff.ts';
import { diffPods } from '../../src/compile/node-compiler.ts';
import type { Pod } from '../../src/model/types.ts';

interface Obj {
  readonly namespace: string;
  readonly name: string;
  readonly v: number;
}

// The pods' view hands out chunked lists (model/list.ts): chunks of 2 here, so that small lists have many.
const VIEWS: [
  string,
  () => {
    list(src: { all(): Obj[]; get(ns: string, name: string): Obj | undefined }): ReadonlyList<Obj>;
    readonly rebuilds: number;
    touch(k: string): void;
  },
][] = [
  ['one chunk', () => new ChunkedSortedView<Obj>()],
  ['chunks of 2', () => new ChunkedSortedView<Obj>(2)],
];

for (const [shape, makeView] of VIEWS) {
  test(`property (${shape}): the advanced list equals a fresh sort after every batch; earlier lists stay as they were`, () => {
    const key = fc.record({
      ns: fc.constantFrom('a', 'b', 'c', 'a-b', 'a.b'),
      name: fc.constantFrom('x', 'y', 'z', 'x-1', 'x0'),
    });
    const change = fc.record({ key, put: fc.boolean(), v: fc.nat(9) });
    fc.assert(
      fc.property(fc.array(fc.array(change, { maxLength: 6 }), { minLength: 1, maxLength: 20 }), (batches) => {
        const store = new Map<string, Obj>();
        const view = makeView();
        const src = {
          all: () => [...store.values()],
          get: (ns: string, name: string) => store.get(`${ns}/${name}`),
        };
        const kept: { list: ReadonlyList<Obj>; copy: Obj[] }[] = [];
        assert.deepEqual([...view.list(src)], []);
        for (const batch of batches) {
          for (const c of batch) {
            const k = `${c.key.ns}/${c.key.name}`;
            if (c.put) store.set(k, { namespace: c.key.ns, name: c.key.name, v: c.v });
            else store.delete(k);
            view.touch(k);
          }
          const list = view.list(src);
          const fresh = [...store.values()].sort(byObjectKey);
          assert.deepEqual([...list], fresh);
          assert.equal(list.length, fresh.length);
          for (let i = 0; i < fresh.length; i++) assert.equal(list.at(i), fresh[i]);
          // The change it records is what a walk of the two lists finds (the compiler reads it instead).
          const prev = kept[kept.length - 1]?.list;
          if (prev !== undefined && prev !== list) {
            const walked = diffPods([...prev] as unknown as Pod[], [...list] as unknown as Pod[], Infinity);
            assert.deepEqual(listChange(prev, list), walked);
          }
          kept.push({ list, copy: [...list] });
        }
        for (const k of kept) assert.deepEqual([...k.list], k.copy, 'a list handed out never changes');
        assert.equal(view.rebuilds, 1, 'only the first list is a full build');
      }),
      { numRuns: 300, seed: 27 },
    );
  });
}

test('an unchanged view hands out the same list; invalidate rebuilds; many changes rebuild', () => {
  const store = new Map<string, Obj>();
  for (let i = 0; i < 1000; i++) store.set(`ns/${i}`, { namespace: 'ns', name: String(i), v: i });
  const src = { all: () => [...store.values()], get: (ns: string, name: string) => store.get(`${ns}/${name}`) };
  const view = new ChunkedSortedView<Obj>();
  const first = view.list(src);
  assert.equal(view.list(src), first);
  view.touch('ns/5');
  store.set('ns/5', { namespace: 'ns', name: '5', v: -1 });
  const second = view.list(src);
  assert.notEqual(second, first);
  assert.equal(second.at(findKey(second, 'ns', '5'))?.v, -1);
  assert.equal(first.at(findKey(first, 'ns', '5'))?.v, 5);
  assert.equal(view.rebuilds, 1);
  for (let i = 0; i < 100; i++) view.touch(`ns/${i}`);
  view.list(src);
  assert.equal(view.rebuilds, 2, 'past the limit a sort');
  view.invalidate();
  view.list(src);
  assert.equal(view.rebuilds, 3);
});

test('findKey: the index of a key or where it would go', () => {
  const list = [
    { namespace: 'a', name: 'x' },
    { namespace: 'a', name: 'z' },
    { namespace: 'b', name: 'a' },
  ];
  assert.equal(findKey(list, 'a', 'z'), 1);
  assert.equal(findKey(list, 'a', 'y'), -2);
  assert.equal(findKey(list, 'c', 'a'), -4);
  assert.equal(findKey([], 'a', 'a'), -1);
});

test('a list does not keep the lists before it alive (the change it records holds the previous one weakly)', async () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const store = new Map<string, Obj>();
  for (let i = 0; i < 100; i++) store.set(`a/p${i}`, { namespace: 'a', name: `p${i}`, v: i });
  const view = new ChunkedSortedView<Obj>();
  const src = { all: () => [...store.values()], get: (ns: string, name: string) => store.get(`${ns}/${name}`) };
  view.list(src);
  const first = (() => {
    store.set('a/p1', { namespace: 'a', name: 'p1', v: -1 });
    view.touch('a/p1');
    return new WeakRef(view.list(src));
  })();
  let latest: ReadonlyList<Obj> = [];
  for (let i = 0; i < 5; i++) {
    store.set(`a/p${i + 2}`, { namespace: 'a', name: `p${i + 2}`, v: -1 });
    view.touch(`a/p${i + 2}`);
    latest = view.list(src);
  }
  await new Promise((r) => setImmediate(r));
  gc();
  assert.equal(first.deref(), undefined, 'an earlier list was collected while a later one lives');
  assert.equal(latest.length, 100);
});
