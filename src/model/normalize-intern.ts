// Sharing of equal, immutable parts of normalized objects.
//
// A node agent keeps every pod its policies need (100k+ in a large cluster
// with cluster-wide peers), and most of what a pod normalizes to repeats
// across pods: the pods of one ReplicaSet carry the same labels and the same
// container ports, thousands of pods share a node name, a namespace and a
// phase. The normalizers hand out one shared instance for equal values
// instead of one copy per pod. Shared objects are frozen (the model is
// read-only anyway); sharing changes no value, only identity.
//
// The pools never keep a value alive: objects are held through WeakRefs
// (a pool entry whose value no pod uses any more is swept away), strings in
// a bounded table that is emptied when full. Neither is needed for
// correctness: a value that is not found is simply not shared.

/** 32-bit FNV-1a of a string, continued from `h` (start with FNV_OFFSET). */
export function fnv1a(s: string, h: number): number {
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export const FNV_OFFSET = 0x811c9dc5;

/**
 * Equal strings as one instance. A strong table bounded to `limit` entries
 * (emptied when full): strings are small, and the values shared this way
 * (node names, namespaces, phases) are few.
 */
export class StringPool {
  readonly #limit: number;
  readonly #map = new Map<string, string>();

  constructor(limit = 16_384) {
    this.#limit = limit;
  }

  intern(s: string): string {
    const hit = this.#map.get(s);
    if (hit !== undefined) return hit;
    if (this.#map.size >= this.#limit) this.#map.clear();
    this.#map.set(s, s);
    return s;
  }

  get size(): number {
    return this.#map.size;
  }
}

/**
 * Equal objects as one instance, held weakly. Keyed by a 32-bit hash of the
 * content with the content compared on a hit; a hash collision only means
 * the newer value takes the slot (and the older one is shared no more).
 * Entries whose object has been collected are swept when the table has
 * doubled since the last sweep, so it stays proportional to the live values.
 */
export class WeakPool<T extends object> {
  readonly #same: (a: T, b: T) => boolean;
  readonly #refs = new Map<number, WeakRef<T>>();
  #sweepAt = 1_024;

  constructor(same: (a: T, b: T) => boolean) {
    this.#same = same;
  }

  /** The pooled object equal to `value` (whose content hashes to `hash`), else `value`, pooled from now on. */
  intern(hash: number, value: T): T {
    const key = hash | 0; // a small integer: no number object per key
    const hit = this.#refs.get(key)?.deref();
    if (hit !== undefined && this.#same(hit, value)) return hit;
    this.#refs.set(key, new WeakRef(value));
    if (this.#refs.size >= this.#sweepAt) this.#sweep();
    return value;
  }

  /** Entries (live or not yet swept). */
  get size(): number {
    return this.#refs.size;
  }

  #sweep(): void {
    for (const [h, r] of this.#refs) if (r.deref() === undefined) this.#refs.delete(h);
    this.#sweepAt = Math.max(1_024, this.#refs.size * 2);
  }
}

/** The one frozen empty list (no IPs, no ports, no errors). */
export const EMPTY: readonly never[] = Object.freeze([]);
