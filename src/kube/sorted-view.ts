// A sorted list of watched namespaced objects, advanced by the keys that
// changed instead of sorted anew for every snapshot (issue 24: at 100k pods
// the sort was 40-60 ms of every change).
import { recordListChange } from '../model/list-diff.ts';
import { ChunkedList, type ListEdit, type ReadonlyList } from '../model/list.ts';

type Keyed = { readonly namespace: string; readonly name: string };

function compareKey(ns: string, name: string, x: Keyed): number {
  return ns < x.namespace ? -1 : ns > x.namespace ? 1 : name < x.name ? -1 : name > x.name ? 1 : 0;
}

/** Index of the object with this key in `list` (sorted by namespace, name), or -(insertion point) - 1. */
export function findKey(list: ReadonlyList<Keyed>, ns: string, name: string): number {
  let lo = 0;
  let hi = list.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const c = compareKey(ns, name, list.at(mid)!);
    if (c === 0) return mid;
    if (c < 0) hi = mid - 1;
    else lo = mid + 1;
  }
  return -lo - 1;
}

export interface SortedSource<T extends Keyed> {
  /** Every current object, in any order, one per key (a rebuild). */
  all(): T[];
  /** The current object of a key, or undefined. */
  get(namespace: string, name: string): T | undefined;
}

/**
 * What each changed key does at its place in `prev`, by place (insertions
 * before the object at their place, among themselves by key), and the
 * objects removed and added (old versions of changed objects among the
 * removed), in list order.
 */
function plan<T extends Keyed>(
  prev: ReadonlyList<T>,
  dirty: ReadonlySet<string>,
  src: SortedSource<T>,
): { edits: ListEdit<T>[]; removed: T[]; added: T[] } {
  const edits: { at: number; insert: boolean; now: T | undefined }[] = [];
  const removed: T[] = [];
  const added: T[] = [];
  for (const key of dirty) {
    const slash = key.indexOf('/');
    const ns = key.slice(0, slash);
    const name = key.slice(slash + 1);
    const now = src.get(ns, name);
    const at = findKey(prev, ns, name);
    if (at >= 0) {
      const was = prev.at(at)!;
      if (was === now) continue;
      removed.push(was);
      if (now !== undefined) added.push(now);
      edits.push({ at, insert: false, now });
    } else if (now !== undefined) {
      added.push(now);
      edits.push({ at: -at - 1, insert: true, now });
    }
  }
  edits.sort((a, b) =>
    a.at !== b.at ? a.at - b.at : a.insert !== b.insert ? (a.insert ? -1 : 1) : compareKey(a.now!.namespace, a.now!.name, b.now!),
  );
  const byKey = (a: T, b: T): number => compareKey(a.namespace, a.name, b);
  return { edits, removed: removed.sort(byKey), added: added.sort(byKey) };
}

/**
 * Advances a sorted list by the keys that changed, in chunks shared from one
 * list to the next (model/list.ts: the pods, ~94k on a busy node at 100k
 * pods, change by a few per snapshot; the NetworkPolicies, 10k, by one per
 * policy change).
 */
export class ChunkedSortedView<T extends Keyed> {
  #list: ChunkedList<T> | undefined;
  readonly #dirty = new Set<string>();
  #rebuilds = 0;
  readonly #chunkSize: number | undefined;

  /** chunkSize: tests use small chunks, so that small lists have many. */
  constructor(chunkSize?: number) {
    this.#chunkSize = chunkSize;
  }

  /** The next list is built from scratch (the sources changed as a whole: a watch added, dropped or refiltered). */
  invalidate(): void {
    this.#list = undefined;
    this.#dirty.clear();
  }

  /** The object of `namespace/name` may have changed. */
  touch(key: string): void {
    if (this.#list !== undefined) this.#dirty.add(key);
  }

  /** Full builds so far (tests: changes must not rebuild). */
  get rebuilds(): number {
    return this.#rebuilds;
  }

  /**
   * The current objects sorted by namespace and name. A new list when
   * anything changed (the previous one belongs to an earlier snapshot and
   * stays as it was); the same list when nothing did.
   */
  list(src: SortedSource<T>): ChunkedList<T> {
    const prev = this.#list;
    // Past this many changes a sort is as cheap as the edits.
    if (prev === undefined || this.#dirty.size > Math.max(32, prev.length >> 9)) {
      const all = src.all();
      all.sort((a, b) => compareKey(a.namespace, a.name, b));
      const built = ChunkedList.from(all, this.#chunkSize);
      this.#list = built;
      this.#dirty.clear();
      this.#rebuilds++;
      return built;
    }
    if (this.#dirty.size === 0) return prev;
    const p = plan(prev, this.#dirty, src);
    this.#dirty.clear();
    if (p.edits.length === 0) return prev;
    const next = prev.edit(p.edits);
    this.#list = next;
    recordListChange(prev, next, { removed: p.removed, added: p.added });
    return next;
  }
}
