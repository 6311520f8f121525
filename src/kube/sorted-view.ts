// A sorted list of watched namespaced objects, advanced by the keys that
// changed instead of sorted anew for every snapshot (issue 24: at 100k pods
// the sort was 40-60 ms of every change).
import { recordListChange } from '../model/list-diff.ts';

type Keyed = { readonly namespace: string; readonly name: string };

function compareKey(ns: string, name: string, x: Keyed): number {
  return ns < x.namespace ? -1 : ns > x.namespace ? 1 : name < x.name ? -1 : name > x.name ? 1 : 0;
}

/** Index of the object with this key in `list` (sorted by namespace, name), or -(insertion point) - 1. */
export function findKey(list: readonly Keyed[], ns: string, name: string): number {
  let lo = 0;
  let hi = list.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const c = compareKey(ns, name, list[mid] as Keyed);
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

export class SortedView<T extends Keyed> {
  #list: readonly T[] | undefined;
  readonly #dirty = new Set<string>();
  #rebuilds = 0;

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
   * The current objects sorted by namespace and name. A new array when
   * anything changed (the previous one belongs to an earlier snapshot and
   * stays as it was); the same array when nothing did.
   */
  list(src: SortedSource<T>): readonly T[] {
    const prev = this.#list;
    // Past this many changes a sort is as cheap as the splices (each moves the tail).
    if (prev === undefined || this.#dirty.size > Math.max(32, prev.length >> 9)) {
      const all = src.all();
      all.sort((a, b) => compareKey(a.namespace, a.name, b));
      this.#list = all;
      this.#dirty.clear();
      this.#rebuilds++;
      return all;
    }
    if (this.#dirty.size === 0) return prev;
    // What each changed key does at its place in prev, then one pass that
    // copies prev into a new array of the exact length: a copy and a splice
    // per insertion allocated the list up to three times (the copy, then a
    // backing store grown by half for the first insertion): ~2-3 MB of
    // garbage per snapshot at 100k pods, most of the agent's allocation under
    // a stream of changes (issue 24, memory).
    const ops: { at: number; insert: boolean; now: T | undefined }[] = [];
    const removed: T[] = [];
    const added: T[] = [];
    let delta = 0;
    for (const key of this.#dirty) {
      const slash = key.indexOf('/');
      const ns = key.slice(0, slash);
      const name = key.slice(slash + 1);
      const now = src.get(ns, name);
      const at = findKey(prev, ns, name);
      if (at >= 0) {
        const was = prev[at]!;
        if (was === now) continue;
        removed.push(was);
        if (now === undefined) delta--;
        else added.push(now);
        ops.push({ at, insert: false, now });
      } else if (now !== undefined) {
        added.push(now);
        delta++;
        ops.push({ at: -at - 1, insert: true, now });
      }
    }
    // By place; insertions before the object at their place, among themselves by key.
    ops.sort((a, b) =>
      a.at !== b.at
        ? a.at - b.at
        : a.insert !== b.insert
          ? a.insert
            ? -1
            : 1
          : compareKey(a.now!.namespace, a.now!.name, b.now!),
    );
    const next = new Array<T>(prev.length + delta);
    let w = 0;
    let r = 0;
    for (const op of ops) {
      while (r < op.at) next[w++] = prev[r++]!;
      if (!op.insert) r++;
      if (op.now !== undefined) next[w++] = op.now;
    }
    while (r < prev.length) next[w++] = prev[r++]!;
    this.#dirty.clear();
    this.#list = next;
    // In list order, as a walk of the two lists would give them.
    const byKey = (a: T, b: T): number => compareKey(a.namespace, a.name, b);
    recordListChange(prev, next, { removed: removed.sort(byKey), added: added.sort(byKey) });
    return next;
  }
}
