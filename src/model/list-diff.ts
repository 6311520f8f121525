// What changed from one sorted object list to the next, recorded by whoever
// made the next from the previous (the agent's sorted view: it knows the keys
// it moved), so that a consumer diffing two lists (the compiler's pod diff)
// reads it instead of walking both (~2 ms at 100k pods per change).
import { chunksOf, type ReadonlyList } from './list.ts';
export interface ListChange<T> {
  /** Objects of the previous list not in the next (old versions of changed objects included). */
  readonly removed: readonly T[];
  /** Objects of the next list not in the previous one. */
  readonly added: readonly T[];
}

// The previous list is held weakly: a strong reference would chain every
// list since the last rebuild to the newest (800 KB each at 100k pods).
const changes = new WeakMap<
  ReadonlyList<object>,
  { readonly prev: WeakRef<ReadonlyList<object>>; readonly change: ListChange<object> }
>();

/** `next` was made from `prev` by exactly `change` (by object identity). */
export function recordListChange<T extends object>(prev: ReadonlyList<T>, next: ReadonlyList<T>, change: ListChange<T>): void {
  changes.set(next, { prev: new WeakRef(prev), change });
}

/** What `next` was made from and how, if that was recorded and the earlier list is still alive. */
export function recordedChange<T extends object>(
  next: readonly T[],
): { readonly prev: readonly T[]; readonly change: ListChange<T> } | undefined;
export function recordedChange<T extends object>(
  next: ReadonlyList<T>,
): { readonly prev: ReadonlyList<T>; readonly change: ListChange<T> } | undefined;
export function recordedChange<T extends object>(
  next: ReadonlyList<T>,
): { readonly prev: ReadonlyList<T>; readonly change: ListChange<T> } | undefined {
  const c = changes.get(next);
  const prev = c?.prev.deref();
  return c === undefined || prev === undefined ? undefined : { prev: prev as ReadonlyList<T>, change: c.change as ListChange<T> };
}

/** The recorded change from `prev` to `next`, if `next` was made from exactly `prev`. */
export function listChange<T extends object>(prev: ReadonlyList<T>, next: ReadonlyList<T>): ListChange<T> | undefined {
  const c = changes.get(next);
  return c !== undefined && c.prev.deref() === prev ? (c.change as ListChange<T>) : undefined;
}

/**
 * How many leading and trailing entries two lists share by identity (`same`):
 * what one change to a list leaves alone, found without looking at the middle.
 * Entries that are the same object are passed over in a tight loop (no call
 * per entry: the head and tail of a 43k-element map, of 10k policies); `same`
 * is asked only where the objects differ.
 */
export function commonEnds<A, B = A>(
  a: readonly A[],
  b: readonly B[],
  same?: (x: A, y: B) => boolean,
): { readonly head: number; readonly tail: number } {
  const max = Math.min(a.length, b.length);
  let head = 0;
  for (;;) {
    while (head < max && (a[head] as unknown) === b[head]) head++;
    if (head < max && same !== undefined && same(a[head]!, b[head]!)) head++;
    else break;
  }
  let tail = 0;
  const room = max - head;
  for (;;) {
    while (tail < room && (a[a.length - 1 - tail] as unknown) === b[b.length - 1 - tail]) tail++;
    if (tail < room && same !== undefined && same(a[a.length - 1 - tail]!, b[b.length - 1 - tail]!)) tail++;
    else break;
  }
  return { head, tail };
}

/**
 * commonEnds by identity of two lists whose common entries are in the same
 * order (sorted lists, a list edited in places), where `next` was
 * made from `prev` by a recorded change (recordListChange) of at most `limit`
 * entries: from the changed entries' places (`indexOf`, a builtin's scan)
 * instead of a walk of both lists in JS. In the agent commonEnds' loops run
 * unoptimized for long stretches (V8 deoptimizes them on each new array shape
 * its many callers pass): ~0.4-0.7 ms per 10k-entry list against ~25 µs.
 * Without a recorded change, commonEnds.
 */
export function changedEnds<T extends object>(
  prev: readonly T[],
  next: readonly T[],
  limit = 64,
): { readonly head: number; readonly tail: number } {
  const change = listChange(prev, next);
  if (change === undefined || change.removed.length + change.added.length > limit) return commonEnds(prev, next);
  const min = Math.min(prev.length, next.length);
  let head = min;
  let lastPrev = -1;
  let lastNext = -1;
  for (const x of change.removed) {
    const i = prev.indexOf(x);
    if (i < 0) return commonEnds(prev, next);
    if (i < head) head = i;
    if (i > lastPrev) lastPrev = i;
  }
  for (const x of change.added) {
    const i = next.indexOf(x);
    if (i < 0) return commonEnds(prev, next);
    if (i < head) head = i;
    if (i > lastNext) lastNext = i;
  }
  const tail = Math.min(prev.length - 1 - lastPrev, next.length - 1 - lastNext, min - head);
  return { head, tail };
}

/**
 * changedEnds for lists that may be ChunkedLists (list.ts): an edit shares
 * the chunks it did not touch with the list it came from, so the leading and
 * trailing chunks are compared by identity (a pointer each), and entries only
 * within the chunks that differ. Two arrays: changedEnds.
 */
export function listEnds<T extends object>(
  prev: ReadonlyList<T>,
  next: ReadonlyList<T>,
): { readonly head: number; readonly tail: number } {
  if (Array.isArray(prev) && Array.isArray(next)) return changedEnds(prev as readonly T[], next as readonly T[]);
  const a = chunksOf(prev);
  const b = chunksOf(next);
  const max = Math.min(prev.length, next.length);
  let head = 0;
  let ia = 0;
  while (ia < a.length && ia < b.length && a[ia] === b[ia] && head + a[ia]!.length <= max) head += a[ia++]!.length;
  let ib = ia;
  let oa = 0;
  let ob = 0;
  while (head < max) {
    while (oa >= a[ia]!.length) {
      ia++;
      oa = 0;
    }
    while (ob >= b[ib]!.length) {
      ib++;
      ob = 0;
    }
    if (a[ia]![oa] !== b[ib]![ob]) break;
    head++;
    oa++;
    ob++;
  }
  const room = max - head;
  let tail = 0;
  let ja = a.length - 1;
  let jb = b.length - 1;
  while (ja >= 0 && jb >= 0 && a[ja] === b[jb] && tail + a[ja]!.length <= room) {
    tail += a[ja]!.length;
    ja--;
    jb--;
  }
  let pa = ja < 0 ? -1 : a[ja]!.length - 1;
  let pb = jb < 0 ? -1 : b[jb]!.length - 1;
  while (tail < room) {
    while (pa < 0) pa = a[--ja]!.length - 1;
    while (pb < 0) pb = b[--jb]!.length - 1;
    if (a[ja]![pa] !== b[jb]![pb]) break;
    tail++;
    pa--;
    pb--;
  }
  return { head, tail };
}
