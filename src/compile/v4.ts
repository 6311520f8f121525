// IPv4 fast paths for the hot loops of big clusters: pod addresses as plain
// numbers (no bigint, no regex) while collecting and sorting. Results are
// identical to model/ip.ts (tested).
import { formatIP, formatV4 } from '../model/ip.ts';
import type { Interval } from '../model/ip.ts';
import type { SetElement } from '../ruleset/ir.ts';
import { ChunkedList, chunksOf, spliceEdits } from '../model/list.ts';
import type { ListEdit, ReadonlyList } from '../model/list.ts';

export { formatV4 };

/** A canonical dotted quad as a number; undefined for anything else (callers fall back to parseIP). */
export function parseV4(s: string): number | undefined {
  let v = 0;
  let part = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 46) {
      if (digits === 0 || part > 255) return undefined;
      v = v * 256 + part;
      part = 0;
      digits = 0;
      dots++;
    } else if (c >= 48 && c <= 57 && digits < 3) {
      if (digits > 0 && part === 0) return undefined; // leading zero: not canonical
      part = part * 10 + (c - 48);
      digits++;
    } else {
      return undefined;
    }
  }
  if (dots !== 3 || digits === 0 || part > 255) return undefined;
  return v * 256 + part;
}

/** Sorted, merged intervals of a list of IPv4 addresses (numbers; duplicates fine). */
export function mergeV4(addrs: readonly number[]): Interval[] {
  const sorted = new Float64Array(addrs).sort();
  const out: Interval[] = [];
  let i = 0;
  while (i < sorted.length) {
    const lo = sorted[i] as number;
    let hi = lo;
    i++;
    while (i < sorted.length && (sorted[i] as number) <= hi + 1) hi = Math.max(hi, sorted[i++] as number);
    // One bigint for a single address (most pod addresses): bigints are values, sharing one is safe.
    const blo = BigInt(lo);
    out.push({ family: 4, lo: blo, hi: hi === lo ? blo : BigInt(hi) });
  }
  return out;
}

/**
 * Every address of the intervals, in order: the elements of a plain (hash)
 * set. Only for intervals merged from single pod addresses, where every
 * address in a range is one of them.
 */
export function addresses(ivs: ReadonlyList<Interval>): string[] {
  const out: string[] = [];
  // The first three octets' text kept while they stay the same (sorted addresses share them by the node's /24):
  // one string per address, not one per octet and dot.
  let prefixOf = -1;
  let prefix = '';
  for (const chunk of chunksOf(ivs))
    for (let i = 0; i < chunk.length; i++) {
      const iv = chunk[i]!;
      if (iv.family !== 4) {
        for (let v = iv.lo; v <= iv.hi; v++) out.push(formatIP({ family: 6, value: v }));
        continue;
      }
      const hi = Number(iv.hi);
      for (let n = Number(iv.lo); n <= hi; n++) {
        const top = Math.floor(n / 256);
        if (top !== prefixOf) {
          prefixOf = top;
          prefix = formatV4(n - (n % 256)).slice(0, -1);
        }
        out.push(prefix + String(n % 256));
      }
    }
  return out;
}

/** One window of a patch: the entries [a, b) of the list patched replaced by `by`. */
export interface IntervalWindow {
  readonly a: number;
  readonly b: number;
  readonly by: readonly Interval[];
}

/** How a patched list was made (peers.ts patchIntervals): windows of `from`, in order and apart, replaced; every other entry kept. */
export interface IntervalPatch {
  readonly from: ReadonlyList<Interval>;
  readonly windows: readonly IntervalWindow[];
}

function sizeOf(iv: Interval): number {
  return iv.lo === iv.hi ? 1 : Number(iv.hi - iv.lo) + 1;
}

// How many addresses a chunk of intervals holds: chunks never change once
// made, and a patch shares all but the ones it touched with the last list.
const sizeOfChunk = new WeakMap<readonly Interval[], number>();

function chunkSize(chunk: readonly Interval[]): number {
  let n = sizeOfChunk.get(chunk);
  if (n === undefined) {
    n = 0;
    for (let i = 0; i < chunk.length; i++) n += sizeOf(chunk[i]!);
    sizeOfChunk.set(chunk, n);
  }
  return n;
}

/** For each index of `at` (ascending), where the addresses of the interval there begin in addresses(ivs). */
function textOffsets(ivs: ReadonlyList<Interval>, at: readonly number[]): number[] {
  const out: number[] = [];
  let k = 0;
  let start = 0; // index of the chunk's first interval
  let text = 0; // addresses before it
  for (const chunk of chunksOf(ivs)) {
    if (k >= at.length) break;
    const end = start + chunk.length;
    if (at[k]! >= end) {
      text += chunkSize(chunk);
      start = end;
      continue;
    }
    // Inside this chunk: walk it up to each index that falls here.
    let i = start;
    let t = text;
    while (k < at.length && at[k]! < end) {
      for (; i < at[k]!; i++) t += sizeOf(chunk[i - start]!);
      out.push(t);
      k++;
    }
    text += chunkSize(chunk);
    start = end;
  }
  for (; k < at.length; k++) out.push(text); // the end of the list
  return out;
}

/**
 * addresses() of a patched interval list, made from `prevList` = the
 * addresses of the list it was patched from: each window's old text is
 * replaced by its new intervals' addresses, every other address kept. A
 * pod's change in a peer set of tens of thousands of addresses formats the
 * addresses of an interval or two, and the list is a chunked one that
 * shares every chunk the change does not touch with `prevList` (a new array
 * per change was ~0.2 MB per big peer set into V8's old generation at 100k
 * pods: issue 24, memory).
 */
export function addressesFrom(prevList: ReadonlyList<string>, patch: IntervalPatch): ChunkedList<string> {
  const bounds: number[] = [];
  for (const w of patch.windows) bounds.push(w.a, w.b);
  const text = textOffsets(patch.from, bounds);
  const edits: ListEdit<string>[] = [];
  for (let i = 0; i < patch.windows.length; i++)
    spliceEdits(edits, text[2 * i]!, text[2 * i + 1]!, addresses(patch.windows[i]!.by));
  return ChunkedList.of(prevList).edit(edits);
}

/** Address elements, one per address or interval. */
export function addressElements(addrs: ReadonlyList<string | Interval>): SetElement[] {
  return addrs.map((addr) => ({ kind: 'addr', addr }));
}
