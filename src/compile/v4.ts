// IPv4 fast paths for the hot loops of big clusters: pod addresses as plain
// numbers (no bigint, no regex) while collecting and sorting. Results are
// identical to model/ip.ts (tested).
import { formatIP, formatV4 } from '../model/ip.ts';
import type { Interval } from '../model/ip.ts';
import type { SetElement } from '../ruleset/ir.ts';
import { ChunkedList } from '../model/list.ts';
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
export function addresses(ivs: readonly Interval[]): string[] {
  const out: string[] = [];
  // The first three octets' text kept while they stay the same (sorted addresses share them by the node's /24):
  // one string per address, not one per octet and dot.
  let prefixOf = -1;
  let prefix = '';
  for (let i = 0; i < ivs.length; i++) {
    const iv = ivs[i]!;
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

function sizeOf(iv: Interval): number {
  return iv.lo === iv.hi ? 1 : Number(iv.hi - iv.lo) + 1;
}

// Where each interval's addresses start in addresses(ivs), and their total
// last, per interval list: made by addressesFrom for the list it returns, so
// the next patch finds the text to reuse without adding up interval sizes.
const offsetsOf = new WeakMap<readonly Interval[], Int32Array>();

function offsets(ivs: readonly Interval[]): Int32Array {
  let o = offsetsOf.get(ivs);
  if (o === undefined) {
    o = new Int32Array(ivs.length + 1);
    let at = 0;
    for (let i = 0; i < ivs.length; i++) {
      o[i] = at;
      at += sizeOf(ivs[i]!);
    }
    o[ivs.length] = at;
    offsetsOf.set(ivs, o);
  }
  return o;
}

/**
 * addresses(ivs), patched from `prevList` = addresses(prevIvs) for the
 * intervals the two lists share by object (a result patched address by
 * address keeps every other interval object): a pod's change in a peer set
 * of tens of thousands of addresses formats the addresses of one interval,
 * and the list is a chunked one that shares every chunk the change does not
 * touch with `prevList` (a new array per change was ~0.2 MB per big peer set
 * into V8's old generation at 100k pods: issue 24, memory).
 */
export function addressesFrom(
  prevIvs: readonly Interval[],
  prevList: ReadonlyList<string>,
  ivs: readonly Interval[],
): ChunkedList<string> {
  const po = offsets(prevIvs);
  const no = new Int32Array(ivs.length + 1);
  // Edits of prevList in index order (at one index the insertions first): the
  // old intervals no new one shares are removed, the new ones inserted.
  const edits: ListEdit<string>[] = [];
  const remove = (k: number): void => {
    for (let a = po[k]!; a < po[k + 1]!; a++) edits.push({ at: a, insert: false, now: undefined });
  };
  let total = 0;
  let i = 0;
  let j = 0;
  while (j < ivs.length) {
    const iv = ivs[j]!;
    let p = prevIvs[i];
    while (p !== undefined && p !== iv && (p.family < iv.family || (p.family === iv.family && p.hi < iv.lo))) {
      remove(i);
      p = prevIvs[++i];
    }
    if (p === iv) {
      let r = 1;
      while (j + r < ivs.length && ivs[j + r] === prevIvs[i + r]) r++;
      const from = po[i]!;
      for (let k = 0; k < r; k++) no[j + k] = total + po[i + k]! - from;
      total += po[i + r]! - from;
      i += r;
      j += r;
    } else {
      // Before the old interval at i (if any), which a later step keeps or removes.
      const at = i < prevIvs.length ? po[i]! : po[prevIvs.length]!;
      const text = addresses([iv]);
      no[j++] = total;
      for (const t of text) edits.push({ at, insert: true, now: t });
      total += text.length;
    }
  }
  while (i < prevIvs.length) remove(i++);
  no[ivs.length] = total;
  const base = ChunkedList.of(prevList);
  const out = base.edit(edits);
  offsetsOf.set(ivs, no);
  return out;
}

/** Address elements, one per address or interval. */
export function addressElements(addrs: ReadonlyList<string | Interval>): SetElement[] {
  return addrs.map((addr) => ({ kind: 'addr', addr }));
}
