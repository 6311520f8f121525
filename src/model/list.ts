// A list that one snapshot hands to the next without a copy of itself. The
// agent's pod list (~94k entries on a busy node at 100k pods) changes by a
// few pods per snapshot, yet a new array per snapshot was one allocation of
// ~0.75 MB straight into V8's old generation: under 200 changes/s about a
// quarter of all it collected there, and what paced its mark-compacts and
// the heap's growth (issue 24, memory). A ChunkedList keeps its entries in
// chunks that never change once made; an edit copies the chunks it touches
// and the list of chunks, and shares the others with the list it came from.

/** What consumers of a sorted object list read: an array is one too. */
export interface ReadonlyList<T> extends Iterable<T> {
  readonly length: number;
  at(index: number): T | undefined;
  filter(keep: (x: T, index: number) => boolean): T[];
  some(test: (x: T, index: number) => boolean): boolean;
  find(test: (x: T, index: number) => boolean): T | undefined;
  map<U>(f: (x: T, index: number) => U): U[];
}

/** The entries as an array: the array itself when it is one (no copy). */
export function listArray<T>(list: ReadonlyList<T>): readonly T[] {
  if (Array.isArray(list)) return list as readonly T[];
  // One concatenation of the chunks: the spread of a ChunkedList runs its generator per entry.
  if (list instanceof ChunkedList) return ([] as T[]).concat(...(list as ChunkedList<T>).chunks);
  return [...list];
}

/**
 * The entries as arrays in order: the array itself, or a ChunkedList's
 * chunks. Walks that index their input (by blocks, pod-walk.ts) run per
 * chunk without a lookup per entry.
 */
export function chunksOf<T>(list: ReadonlyList<T>): readonly (readonly T[])[] {
  if (Array.isArray(list)) return [list as readonly T[]];
  if (list instanceof ChunkedList) return list.chunks;
  return [[...list]];
}

/** One edit of a list, at an index of the list it edits. */
export interface ListEdit<T> {
  /** The index of the entry replaced or removed, or the insertion point (before the entry there). */
  readonly at: number;
  /** true: `now` goes in before the entry at `at`; false: the entry at `at` is replaced by `now`, or removed (undefined). */
  readonly insert: boolean;
  readonly now: T | undefined;
}

/**
 * Appends to `edits` (in index order, as ChunkedList.edit takes them) those
 * that replace the entries [a, b) of a list by `by`: replacements, then the
 * rest of `by` inserted before the entry at b, or the rest of [a, b) removed.
 */
export function spliceEdits<T>(edits: ListEdit<T>[], a: number, b: number, by: readonly T[]): void {
  const n = Math.min(b - a, by.length);
  for (let k = 0; k < n; k++) edits.push({ at: a + k, insert: false, now: by[k] });
  for (let k = n; k < by.length; k++) edits.push({ at: b, insert: true, now: by[k] });
  for (let i = a + n; i < b; i++) edits.push({ at: i, insert: false, now: undefined });
}

/**
 * Entries per chunk as made; an edited chunk is split past twice this. An
 * edit copies the chunks it touches and the list of chunks: near the square
 * root of the biggest lists (~94k pods, ~26k intervals) both stay small
 * (with 1,024 the chunk copies were ~2.5 times the garbage under load).
 */
export const CHUNK_SIZE = 256;

export class ChunkedList<T> implements ReadonlyList<T> {
  readonly #chunks: readonly (readonly T[])[];
  /** Index of each chunk's first entry. */
  readonly #starts: readonly number[];
  readonly #chunkSize: number;
  readonly length: number;

  private constructor(chunks: readonly (readonly T[])[], chunkSize: number) {
    this.#chunks = chunks;
    const starts = new Array<number>(chunks.length);
    let n = 0;
    for (let c = 0; c < chunks.length; c++) {
      starts[c] = n;
      n += chunks[c]!.length;
    }
    this.#starts = starts;
    this.length = n;
    this.#chunkSize = chunkSize;
  }

  /** The entries of `items`, in chunks of `chunkSize` (tests use small ones). */
  static from<T>(items: Iterable<T>, chunkSize: number = CHUNK_SIZE): ChunkedList<T> {
    if (!Number.isInteger(chunkSize) || chunkSize < 1) throw new Error(`chunk size must be a positive integer: ${chunkSize}`);
    const all = Array.isArray(items) ? (items as readonly T[]) : [...items];
    const chunks: T[][] = [];
    for (let i = 0; i < all.length; i += chunkSize) chunks.push(all.slice(i, i + chunkSize));
    return new ChunkedList(chunks, chunkSize);
  }

  /** `list` itself when it is a ChunkedList (its chunks stay shared), else its entries in chunks. */
  static of<T>(list: ReadonlyList<T>): ChunkedList<T> {
    return list instanceof ChunkedList ? (list as ChunkedList<T>) : ChunkedList.from(list);
  }

  /** The chunk holding `index` (0 <= index < length). */
  #chunkOf(index: number): number {
    const s = this.#starts;
    let lo = 0;
    let hi = s.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (s[mid]! <= index) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** As Array.prototype.at: a fraction is cut to an integer, a negative index counts from the end. */
  at(index: number): T | undefined {
    const n = Math.trunc(index) || 0;
    const i = n < 0 ? n + this.length : n;
    if (i < 0 || i >= this.length) return undefined;
    const c = this.#chunkOf(i);
    return this.#chunks[c]![i - this.#starts[c]!];
  }

  *[Symbol.iterator](): Iterator<T> {
    for (const chunk of this.#chunks) yield* chunk;
  }

  filter(keep: (x: T, index: number) => boolean): T[] {
    const out: T[] = [];
    let n = 0;
    for (const chunk of this.#chunks) for (let i = 0; i < chunk.length; i++, n++) if (keep(chunk[i]!, n)) out.push(chunk[i]!);
    return out;
  }

  some(test: (x: T, index: number) => boolean): boolean {
    let n = 0;
    for (const chunk of this.#chunks) for (let i = 0; i < chunk.length; i++, n++) if (test(chunk[i]!, n)) return true;
    return false;
  }

  find(test: (x: T, index: number) => boolean): T | undefined {
    let n = 0;
    for (const chunk of this.#chunks) for (let i = 0; i < chunk.length; i++, n++) if (test(chunk[i]!, n)) return chunk[i];
    return undefined;
  }

  map<U>(f: (x: T, index: number) => U): U[] {
    const out = new Array<U>(this.length);
    let n = 0;
    for (const chunk of this.#chunks) for (let i = 0; i < chunk.length; i++, n++) out[n] = f(chunk[i]!, n);
    return out;
  }

  /** An array of the entries, as JSON writes the list. */
  toJSON(): T[] {
    return [...this];
  }

  /**
   * A new list: these edits (indices of this list, in order of `at`; at one
   * place the insertions first, in their order, then the entry's own edit)
   * applied. Chunks no edit touches are shared with this list.
   */
  edit(edits: readonly ListEdit<T>[]): ChunkedList<T> {
    if (edits.length === 0) return this;
    const out: (readonly T[])[] = [];
    let e = 0;
    for (let c = 0; c < this.#chunks.length; c++) {
      const chunk = this.#chunks[c]!;
      const start = this.#starts[c]!;
      const end = start + chunk.length;
      // Insertions at `end` belong to the next chunk (before its first entry), except after the last one.
      const last = c === this.#chunks.length - 1;
      if (e >= edits.length || edits[e]!.at > end || (edits[e]!.at === end && !last)) {
        out.push(chunk);
        continue;
      }
      const next: T[] = [];
      let r = 0;
      while (e < edits.length && (edits[e]!.at < end || (last && edits[e]!.at === end))) {
        const ed = edits[e++]!;
        const to = ed.at - start;
        while (r < to) next.push(chunk[r++]!);
        if (!ed.insert) r++;
        if (ed.now !== undefined) next.push(ed.now);
      }
      while (r < chunk.length) next.push(chunk[r++]!);
      this.#pushSplit(out, next);
    }
    // Insertions into an empty list.
    if (this.#chunks.length === 0) {
      const next: T[] = [];
      for (; e < edits.length; e++) if (edits[e]!.now !== undefined) next.push(edits[e]!.now!);
      this.#pushSplit(out, next);
    }
    return new ChunkedList(out, this.#chunkSize);
  }

  /**
   * `entries` as one chunk, or several of the chunk size when it grew past
   * twice that; none when empty. A chunk shrunk below a quarter joins the
   * chunk before it (when together they fit), so that removals do not leave
   * ever more, ever smaller chunks behind.
   */
  #pushSplit(out: (readonly T[])[], entries: T[]): void {
    if (entries.length === 0) return;
    const before = out[out.length - 1];
    if (entries.length < this.#chunkSize >> 2 && before !== undefined && before.length + entries.length <= 2 * this.#chunkSize) {
      out[out.length - 1] = before.concat(entries);
      return;
    }
    if (entries.length <= 2 * this.#chunkSize) {
      out.push(entries);
      return;
    }
    for (let i = 0; i < entries.length; i += this.#chunkSize) out.push(entries.slice(i, i + this.#chunkSize));
  }

  /** The chunks, in order (never empty ones): see chunksOf. */
  get chunks(): readonly (readonly T[])[] {
    return this.#chunks;
  }

  /** Chunks shared with `other` (by object): what an edit did not copy (tests). */
  sharedChunks(other: ChunkedList<T>): number {
    const mine = new Set(this.#chunks);
    let n = 0;
    for (const c of other.#chunks) if (mine.has(c)) n++;
    return n;
  }

  /** The number of chunks (tests). */
  get chunkCount(): number {
    return this.#chunks.length;
  }
}
