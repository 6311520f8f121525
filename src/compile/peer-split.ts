// The biggest pod identities out of their pod peer map (issue 24). A commit
// that adds a `jump`/`goto` makes the kernel validate the table's jump graph,
// which walks every element of every verdict map (~180 ns each): at 100k pods
// `ingress-peers-v4` holds ~45k `jump` elements, ~26k of them to one identity.
// Here the biggest identity of a pod peer map leaves it: its addresses go to
// a plain set (no verdicts, nothing to validate) tested by one rule after the
// map's lookup in the direction's lookup chain (identities.ts lookupChain):
//
//   ingress-peers:  ip saddr vmap @ingress-peers-v4
//                   ip saddr @ingress-peers-v4-big jump KUBE-PEERS-<cid>-IN
//                   ip saddr vmap @ingress-ranges-v4
//
// Each address is in the map or in the set, never both: the same chains run
// for every packet. Which identity: among those with a chain and at least
// `min` addresses, the one with the most addresses by powers of two
// (floor(log2(count)) descending), then by key: a function of the cluster
// state alone (a fresh compile and every incremental path agree), and the
// choice changes only when a count crosses a power of two, not at every
// pod. The cost per packet: a packet of a map identity pays one set lookup
// that misses, one no identity accepts pays it too (docs/benchmarks.md).
import { recordListChange } from '../model/list-diff.ts';
import { ChunkedList, chunksOf } from '../model/list.ts';
import type { ListEdit, ReadonlyList } from '../model/list.ts';
import type { Family } from '../model/types.ts';
import type { MapElement } from '../ruleset/ir.ts';
import { addrValue, findElement } from './identity-patch.ts';

/** How many identities per pod peer map leave it at most (each costs a denied packet one more lookup). */
export const SPLIT_IDENTITIES = 1;

/** The fewest addresses an identity needs to leave its map (below, the kernel's walk of it costs little). */
export const SPLIT_MIN = 1024;

/** An element of a split set: the address alone (the rule after the map's lookup names the chain). */
export interface SplitElement {
  readonly kind: 'addr';
  readonly addr: string;
}

/** One identity out of the map: its key, its chain and its addresses (sorted, as the map's). */
export interface SplitPart {
  readonly key: string;
  readonly chain: string;
  readonly elements: ReadonlyList<SplitElement>;
}

/** Where a pod peer map's addresses are: the map, and the split identities' sets in rank order. */
export interface Placement {
  readonly map: ReadonlyList<MapElement>;
  readonly split: readonly SplitPart[];
}

/** An identity chosen to leave the map, with its chain. */
export interface SplitChoice {
  readonly key: string;
  readonly chain: string;
}

/** floor(log2(n)) for 1 <= n < 2^31. */
function magnitude(n: number): number {
  return 31 - Math.clz32(n);
}

/**
 * The identities to split out of one pod peer map, in rank order. `counts`:
 * addresses per identity key; `chainOf`: the identity's chain (undefined:
 * it allows nothing, its addresses have no element). A walk of the
 * identities (tens), never of the addresses.
 */
export function chooseSplit(
  counts: ReadonlyMap<string, number>,
  chainOf: (key: string) => string | undefined,
  min: number,
  k: number = SPLIT_IDENTITIES,
): SplitChoice[] {
  const floor = Math.max(1, min);
  const candidates: { key: string; chain: string; m: number }[] = [];
  counts.forEach((n, key) => {
    if (n < floor) return;
    const chain = chainOf(key);
    if (chain !== undefined) candidates.push({ key, chain, m: magnitude(n) });
  });
  candidates.sort((a, b) => b.m - a.m || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return candidates.slice(0, k).map(({ key, chain }) => ({ key, chain }));
}

/** Does `placement` split exactly these identities (same keys, same chains, same ranks)? */
export function sameChoice(split: readonly SplitPart[], next: readonly SplitChoice[]): boolean {
  return split.length === next.length && split.every((s, i) => s.key === next[i]!.key && s.chain === next[i]!.chain);
}

/**
 * A full list of elements (sorted by address, every address with a chain)
 * cut into map and sets: one walk (a fresh compile walks its addresses anyway).
 */
export function partition(all: readonly MapElement[], next: readonly SplitChoice[]): Placement {
  if (next.length === 0) return { map: all, split: [] };
  const sets = next.map((): SplitElement[] => []);
  const map = new Array<MapElement>(all.length);
  let w = 0;
  for (const e of all) {
    const j = indexOf(next, e.chain);
    if (j < 0) map[w++] = e;
    else sets[j]!.push({ kind: 'addr', addr: e.key as string });
  }
  map.length = w;
  return { map, split: next.map((s, j) => ({ key: s.key, chain: s.chain, elements: sets[j]! })) };
}

function indexOf(next: readonly SplitChoice[], chain: string | undefined): number {
  if (chain === undefined) return -1;
  for (let j = 0; j < next.length; j++) if (next[j]!.chain === chain) return j;
  return -1;
}

/** Position of `addr` in a split set's elements: found, or where it goes. */
function findSplit(els: ReadonlyList<SplitElement>, addr: string, f: Family): { at: number; found: boolean } {
  const at = lowerBound(els, addrValue(addr, f), (e) => e.addr, f);
  return { at, found: els.at(at)?.addr === addr };
}

/** One container's edits: positions of its old list to drop, and new elements (any order) to merge in. */
interface Edits<T> {
  readonly drop: number[];
  readonly add: T[];
}

const NONE = -2;
const MAP = -1;

/**
 * The placement after addresses moved: `moved` (with `all`: every address
 * is looked at again) get their chain from `chainFor` (undefined: no element)
 * and go to the map or the set of their identity under the choice `next`;
 * when the choice differs from `prev`'s, the identities that leave or join
 * the sets move all their addresses (a walk of the map, only then: the
 * choice changes when a count crosses a power of two). Each list is copied
 * once; the map's and every kept set's change is recorded for renderUpdate
 * (no walk of 43k elements to print it).
 */
export function placeAddresses(
  prev: Placement,
  next: readonly SplitChoice[],
  moved: ReadonlySet<string>,
  chainFor: (addr: string) => string | undefined,
  f: Family,
  /** Every element's chain looked up again (chains came or went), not only the moved addresses'. */
  all = false,
): Placement {
  const isMoved = (addr: string): boolean => all || moved.has(addr);
  const target = (chain: string | undefined): number => (chain === undefined ? NONE : indexOf(next, chain));
  // A set keeps its old list as its base when it splits the same identity at the same rank.
  const kept = next.map((s, j) => prev.split[j]?.key === s.key && prev.split[j]?.chain === s.chain);
  const prevKeys = new Set(prev.split.map((s) => s.key));
  const mapEdits: Edits<MapElement> = { drop: [], add: [] };
  const setEdits = next.map((): Edits<SplitElement> => ({ drop: [], add: [] }));
  const seen = new Set<string>();
  const send = (t: number, addr: string, chain: string): void => {
    if (t === MAP) mapEdits.add.push({ key: addr, chain });
    else if (t >= 0) setEdits[t]!.add.push({ kind: 'addr', addr });
  };
  // The map: walked when every address is looked at or an identity joins the
  // sets from it (its addresses are found by their chain); else the moved
  // addresses are found by a binary search each.
  const joining = next.some((s, j) => !kept[j] && !prevKeys.has(s.key));
  if (all || joining) {
    let r = 0;
    // By chunk (a ChunkedList's own iterator is a generator: slower per entry).
    for (const chunk of chunksOf(prev.map))
      for (let i = 0; i < chunk.length; i++, r++) {
        const e = chunk[i]!;
        const addr = e.key as string;
        let chain = e.chain;
        if (isMoved(addr)) {
          seen.add(addr);
          chain = chainFor(addr);
        }
        const t = target(chain);
        if (t === MAP && chain === e.chain) continue;
        mapEdits.drop.push(r);
        send(t, addr, chain!);
      }
  } else {
    for (const addr of moved) {
      const at = findElement(prev.map, addr, f);
      if (!at.found) continue;
      seen.add(addr);
      const e = prev.map.at(at.at)!;
      const chain = chainFor(addr);
      const t = target(chain);
      if (t === MAP && chain === e.chain) continue;
      mapEdits.drop.push(at.at);
      send(t, addr, chain!);
    }
  }
  // The old sets: a kept one is searched for the moved addresses (or walked);
  // one whose identity left (or changed rank) sends every address on.
  prev.split.forEach((s, i) => {
    const keep = i < next.length && kept[i];
    const visit = (r: number, addr: string): void => {
      let chain: string | undefined = s.chain;
      if (isMoved(addr)) {
        seen.add(addr);
        chain = chainFor(addr);
      }
      const t = target(chain);
      if (keep && t === i) return;
      if (keep) setEdits[i]!.drop.push(r);
      send(t, addr, chain!);
    };
    if (keep && !all && moved.size < s.elements.length) {
      for (const addr of moved) {
        if (seen.has(addr)) continue;
        const at = findSplit(s.elements, addr, f);
        if (at.found) visit(at.at, addr);
      }
    } else {
      let r = 0;
      for (const chunk of chunksOf(s.elements)) for (let i = 0; i < chunk.length; i++) visit(r++, chunk[i]!.addr);
    }
  });
  // Moved addresses that had no element.
  for (const addr of moved) {
    if (seen.has(addr)) continue;
    const chain = chainFor(addr);
    send(target(chain), addr, chain!);
  }
  const map = applyEdits(prev.map, mapEdits, (e) => e.key as string, f);
  const split = next.map((s, j): SplitPart => {
    const base = kept[j] ? prev.split[j]!.elements : [];
    const elements = applyEdits(base, setEdits[j]!, (e) => e.addr, f);
    return kept[j] && elements === base ? prev.split[j]! : { key: s.key, chain: s.chain, elements };
  });
  return { map, split };
}

/** Past this share of a list's length changed, one merge into a new list costs less than edits at binary-searched places. */
const EDIT_SHARE = 8;

/**
 * `els` (sorted by address) without the dropped positions, with the added
 * elements in address order; the change recorded (list-diff.ts). Unchanged:
 * `els` itself. A few edits go into a ChunkedList, which copies only the
 * chunks they touch: a copy of the whole map (18.6k elements at 100k pods)
 * per apply went straight into V8's large-object space (issue 24, GC).
 */
function applyEdits<T extends object>(
  els: ReadonlyList<T>,
  edits: Edits<T>,
  addrOf: (t: T) => string,
  f: Family,
): ReadonlyList<T> {
  const { drop, add } = edits;
  if (drop.length === 0 && add.length === 0) return els;
  drop.sort((a, b) => a - b);
  const added = sortByAddress(add, addrOf, f);
  const removed = drop.map((r) => els.at(r)!);
  const out =
    (drop.length + added.length) * EDIT_SHARE < els.length
      ? ChunkedList.of(els).edit(listEdits(els, drop, added, addrOf, f))
      : merged(els, drop, added, addrOf, f);
  // What renderUpdate prints: removed and added in address order (drop positions are).
  recordListChange(els, out, { removed, added });
  return out;
}

/** The drops and the added elements (in address order) as edits in order of place: at one place insertions first. */
function listEdits<T>(
  els: ReadonlyList<T>,
  drop: readonly number[],
  added: readonly T[],
  addrOf: (t: T) => string,
  f: Family,
): ListEdit<T>[] {
  const out: ListEdit<T>[] = [];
  let d = 0;
  for (const e of added) {
    const at = lowerBound(els, addrValue(addrOf(e), f), addrOf, f);
    while (d < drop.length && drop[d]! < at) out.push({ at: drop[d++]!, insert: false, now: undefined });
    out.push({ at, insert: true, now: e });
  }
  while (d < drop.length) out.push({ at: drop[d++]!, insert: false, now: undefined });
  return out;
}

/** One walk of `els` merging the edits into an array of the exact length. */
function merged<T>(els: ReadonlyList<T>, drop: readonly number[], added: readonly T[], addrOf: (t: T) => string, f: Family): T[] {
  const out = new Array<T>(els.length - drop.length + added.length);
  let w = 0;
  let d = 0;
  let k = 0;
  let r = 0;
  let kv = k < added.length ? addrValue(addrOf(added[k]!), f) : undefined;
  for (const chunk of chunksOf(els))
    for (let i = 0; i < chunk.length; i++) {
      const e = chunk[i]!;
      if (kv !== undefined) {
        const ev = addrValue(addrOf(e), f);
        while (kv !== undefined && kv <= ev) {
          out[w++] = added[k++]!;
          kv = k < added.length ? addrValue(addrOf(added[k]!), f) : undefined;
        }
      }
      if (d < drop.length && drop[d] === r++) {
        d++;
        continue;
      }
      out[w++] = e;
    }
  while (k < added.length) out[w++] = added[k++]!;
  return out;
}

function lowerBound<T>(els: ReadonlyList<T>, v: bigint | number, addrOf: (t: T) => string, f: Family): number {
  let lo = 0;
  let hi = els.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (addrValue(addrOf(els.at(mid)!), f) < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** `list` in address order (each address's value computed once). */
function sortByAddress<T>(list: readonly T[], addrOf: (t: T) => string, f: Family): T[] {
  if (list.length < 2) return [...list];
  const values = list.map((t) => addrValue(addrOf(t), f));
  const order = list.map((_, i) => i);
  // Runs that come sorted (a set's addresses moving back to the map) cost one compare each.
  order.sort((x, y) => {
    const a = values[x]!;
    const b = values[y]!;
    return a < b ? -1 : a > b ? 1 : 0;
  });
  return order.map((i) => list[i]!);
}
