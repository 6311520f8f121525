// A rule's peers as address intervals per family: the IPs of the active pods
// its pod peers select plus its ipBlocks (cidr minus excepts). Merged and
// sorted, so they render as non-overlapping interval set elements.
import { cidrInterval, mergeIntervals, parseCIDR, subtractIntervals } from '../model/ip.ts';
import type { Interval } from '../model/ip.ts';
import { formatSelector, selectorMatches } from '../model/selector.ts';
import { isActivePod } from '../model/types.ts';
import type { Family, LabelSelector, Peer, Pod } from '../model/types.ts';
import { byObjectKey } from '../model/state.ts';
import { ChunkedList, chunksOf, listArray, spliceEdits } from '../model/list.ts';
import type { ListEdit, ReadonlyList } from '../model/list.ts';
import type { ClusterIndex } from './cluster-index.ts';
import { CHUNK, warmIPs } from './pod-walk.ts';
import { mergeV4, parseV4 } from './v4.ts';
import type { IntervalPatch, IntervalWindow } from './v4.ts';

/** Per family; a big pod peer's list is a ChunkedList once patched (patchIntervals), else an array. */
export interface FamilyIntervals {
  readonly 4: ReadonlyList<Interval>;
  readonly 6: ReadonlyList<Interval>;
}

export const NO_ADDRESSES: FamilyIntervals = { 4: [], 6: [] };

/** Sorted, merged intervals (IPv4 first) split by family: a binary search, not a walk (20k intervals per rule read). */
function byFamily(merged: ReadonlyList<Interval>): FamilyIntervals {
  const first = merged.at(0);
  const last = merged.at(-1);
  // One family (the common case): the list itself, so that takePredecessor still knows it.
  if (first === undefined || last === undefined || last.family === 4) return { 4: merged, 6: [] };
  if (first.family === 6) return { 4: [], 6: merged };
  // Both families in one peer set (dual-stack pods): two copies, and the text made afresh.
  const all = listArray(merged);
  const at = lowerBound(all, 6, 0n);
  return { 4: all.slice(0, at), 6: all.slice(at) };
}

/** A patched list -> the patch that made it (see takePredecessor). */
const predecessors = new WeakMap<ReadonlyList<Interval>, IntervalPatch>();

/**
 * The patch that made `ivs` from the last list (patchIntervals), if any: what
 * was derived from the old list can be patched by the same windows
 * (policy-rules.ts, the hash sets' address text). Given once: the link
 * would keep the old list alive.
 */
export function takePredecessor(ivs: ReadonlyList<Interval>): IntervalPatch | undefined {
  const patch = predecessors.get(ivs);
  predecessors.delete(ivs);
  return patch;
}

/** formatSelector of a pod peer's namespaceSelector (undefined without one) and of its podSelector ('{}' without one). */
export interface SelectorTexts {
  readonly ns: string | undefined;
  readonly pod: string;
}

/** Results holding at least this many pods are patched by a pod diff (PeerResolver.advance); smaller ones are resolved again. */
export const PATCH_ABOVE = 256;

/** A pod peer's pods (sorted by key) and, on first use, their addresses (the tiers read only the pods). */
class PodPeerResult {
  /** What decides the result: pods in these namespaces matching this selector (undefined = all). */
  readonly #namespaces: readonly string[];
  /** The namespaces as a set, made on the first scopes() (a fresh compile resolves thousands of results and asks none). */
  #nsSet: ReadonlySet<string> | undefined;
  readonly selector: LabelSelector | undefined;
  /** formatSelector of the peer's namespaceSelector, if it has one. */
  readonly nsSelector: string | undefined;
  readonly idx: ClusterIndex;
  /** An array as resolved; chunks (copy on write) once patched: a patch then copies the chunks it touches, not the list. */
  #pods: ReadonlyList<Pod>;
  /** An array as merged; chunks once patched, as the pods. */
  #intervals: ReadonlyList<Interval> | undefined;
  /** With the intervals: addresses two or more of the pods hold (a reused IP), and how many. */
  #shared: Map<string, number> | undefined;
  /** Pod diffs not applied yet (advance): gone objects, and added ones this result scopes. */
  #gone: Set<Pod> | undefined;
  #added: Set<Pod> | undefined;

  constructor(
    pods: readonly Pod[],
    namespaces: readonly string[],
    selector: LabelSelector | undefined,
    nsSelector: string | undefined,
    idx: ClusterIndex,
  ) {
    this.#pods = pods;
    this.#namespaces = namespaces;
    this.selector = selector;
    this.nsSelector = nsSelector;
    this.idx = idx;
  }

  /** Pods before the pending diffs: enough to tell a big result from a small one. */
  get size(): number {
    return this.#pods.length;
  }

  get pods(): ReadonlyList<Pod> {
    this.#settle();
    return this.#pods;
  }

  get intervals(): ReadonlyList<Interval> {
    this.#settle();
    if (this.#intervals === undefined) {
      const r = podIntervals(this.#pods, this.idx);
      this.#intervals = r.ivs;
      this.#shared = r.shared;
    }
    return this.#intervals;
  }

  /** Could this pod (old or new object of a change) be part of the result? */
  scopes(p: Pod): boolean {
    this.#nsSet ??= new Set(this.#namespaces);
    return this.#nsSet.has(p.namespace) && (this.selector === undefined || selectorMatches(this.selector, p.labels));
  }

  /**
   * Takes a pod diff (`gone`: old objects, `added`: new ones) without
   * resolving again, and without work until the result is read (the
   * remote-pod path never reads it): the lists and handed-out arrays stay as
   * they were, a read gets the result of every diff since.
   */
  advance(gone: ReadonlySet<Pod>, added: readonly Pod[]): void {
    // Pending diffs compose: an object added by one and gone by a later one
    // was never here; one gone and back (the same object) stays where it was.
    for (const p of gone) if (this.scopes(p) && this.#added?.delete(p) !== true) (this.#gone ??= new Set()).add(p);
    for (const p of added)
      if (isActivePod(p) && this.scopes(p) && this.#gone?.delete(p) !== true) (this.#added ??= new Set()).add(p);
  }

  /**
   * Applies the pending diffs: the gone pods taken out and the added ones put
   * in place, the addresses (if computed) patched in one pass. The same
   * pods and intervals a fresh resolution gives (tested against it).
   */
  #settle(): void {
    if (this.#gone === undefined && this.#added === undefined) return; // nothing pending: every fresh result
    const gone = this.#gone ?? new Set<Pod>();
    const coming = [...(this.#added ?? [])].filter((p) => !gone.has(p));
    if (gone.size === 0 && coming.length === 0) {
      this.#added = undefined;
      return;
    }
    const before = this.#pods;
    // The list is sorted by object key: each gone pod found by a binary search, not a filter of every pod.
    const drop: number[] = [];
    const removed: Pod[] = [];
    for (const p of gone) {
      const at = indexOfObject(before, p);
      if (at >= 0) {
        drop.push(at);
        removed.push(p);
      }
    }
    const left = patchSorted(before, drop, coming);
    const old = this.#intervals;
    let ivs = old;
    if (old !== undefined) {
      // Removed: the addresses of pods that were here (the intervals hold theirs) and went, unless another pod here holds them.
      const shared = (this.#shared ??= new Map());
      const removes: Point[] = [];
      for (const p of removed)
        for (const text of p.ips) {
          const n = shared.get(text);
          if (n === undefined) {
            const pt = this.#point(text);
            if (pt !== undefined) removes.push(pt);
          } else if (n > 2) shared.set(text, n - 1);
          else shared.delete(text);
        }
      const removedKeys = new Set(removes.map(pointKey));
      const adds: Point[] = [];
      const addedKeys = new Set<string>();
      for (const p of coming)
        for (const text of p.ips) {
          const pt = this.#point(text);
          if (pt === undefined) continue;
          const k = pointKey(pt);
          // Already there (and not removed above), or added by a pod before it: one holder more.
          if ((holdsAddress(old, pt.family, pt.value) && !removedKeys.has(k)) || addedKeys.has(k))
            shared.set(text, (shared.get(text) ?? 1) + 1);
          else {
            adds.push(pt);
            addedKeys.add(k);
          }
        }
      // One pass for every address of the diff (a list copy per address was ~50 MB/s of garbage under load).
      ivs = removes.length + adds.length === 0 ? old : patchIntervals(old, removes, adds);
      // One step back only: a chain of links would keep every earlier list.
      if (ivs !== old) predecessors.delete(old);
    }
    this.#pods = left;
    this.#intervals = ivs;
    this.#gone = undefined;
    this.#added = undefined;
  }

  #point(text: string): Point | undefined {
    const v4 = parseV4(text);
    if (v4 !== undefined) return { family: 4, value: BigInt(v4) };
    const ip = this.idx.ip(text);
    return ip === undefined ? undefined : { family: ip.family, value: ip.value };
  }
}

interface RuleResult {
  readonly intervals: FamilyIntervals;
  /** Keys of the pod peer results it was built from. */
  readonly deps: readonly string[];
}

/** The destinations a rule's peers name: pods by selector, plus address blocks. */
export interface PeerDestinations {
  /** Active pods matched by the pod peers (deduplicated, any order). */
  readonly pods: readonly Pod[];
  /** ipBlock peers only, per family. */
  readonly blocks: FamilyIntervals;
}

function ipBlockIntervals(peer: Extract<Peer, { kind: 'ipBlock' }>): Interval[] {
  const c = parseCIDR(peer.cidr);
  if (!c.ok) return []; // normalize rejects these; never widen on bad input
  const cut: Interval[] = [];
  for (const e of peer.except) {
    const x = parseCIDR(e);
    if (x.ok) cut.push(cidrInterval(x.cidr));
  }
  return subtractIntervals([cidrInterval(c.cidr)], cut);
}

function podPeerScope(peer: Extract<Peer, { kind: 'pods' }>, policyNs: string): string {
  return peer.namespaceSelector === undefined ? `ns:${policyNs}` : `sel:${formatSelector(peer.namespaceSelector)}`;
}

// An absent podSelector (only meaningful with a namespaceSelector) selects every pod, like `{}`.
function podSelectorText(peer: Extract<Peer, { kind: 'pods' }>): string {
  return peer.podSelector === undefined ? '{}' : formatSelector(peer.podSelector);
}

function peerDefinition(peer: Peer, policyNs: string): string {
  if (peer.kind === 'ipBlock') return `block ${peer.cidr} except ${[...peer.except].sort().join(',')}`;
  return `pods ${podPeerScope(peer, policyNs)} ${podSelectorText(peer)}`;
}

/**
 * Canonical text of a rule's peers (the union they select): the same for
 * every rule, of any policy, whose peers select the same addresses by
 * definition. Pod peers without a namespaceSelector carry the policy's
 * namespace. Names the shared peer sets (see ruleset/ids.ts setId).
 */
export function peersDefinition(peers: readonly Peer[], policyNs: string): string {
  return [...new Set(peers.map((p) => peerDefinition(p, policyNs)))].sort().join('\n');
}

/** Does the rule's address set follow pods (changes with churn), or only ipBlocks (fixed)? */
export function hasPodPeers(peers: readonly Peer[]): boolean {
  return peers.some((p) => p.kind === 'pods');
}

/** Short human text of a peer definition in one family, for set comments (within the comment charset). */
export function describePeers(peers: readonly Peer[], policyNs: string, family: Family): string {
  const sel = (text: string): string => (text === '{}' ? 'all' : text);
  const parts: string[] = [];
  for (const p of peers) {
    if (p.kind === 'ipBlock') {
      const c = parseCIDR(p.cidr);
      if (c.ok && c.cidr.family !== family) continue;
      parts.push(p.except.length === 0 ? p.cidr : `${p.cidr} except ${[...p.except].sort().join(' ')}`);
    } else {
      const where = p.namespaceSelector === undefined ? `ns ${policyNs}` : `ns(${sel(formatSelector(p.namespaceSelector))})`;
      parts.push(`pods(${sel(podSelectorText(p))}) in ${where}`);
    }
  }
  return [...new Set(parts)].sort().join(' or ');
}

function podPeerKey(peer: Extract<Peer, { kind: 'pods' }>, policyNs: string): string {
  return `${podPeerScope(peer, policyNs)}|${podSelectorText(peer)}`;
}

/**
 * Resolves pod peers, memoized by (namespace scope, pod selector). The memo
 * outlives one compile when the index is advanced by a pod diff: advance()
 * patches or drops exactly the results a changed pod could be part of.
 */
export class PeerResolver {
  readonly #idx: ClusterIndex;
  readonly #memo = new Map<string, PodPeerResult>();
  readonly #ruleMemo = new Map<string, RuleResult>();
  /** Values derived from a rule's pod peers alone (derived()), kept and dropped like the rule results. */
  readonly #derivedMemo = new Map<string, { readonly value: unknown; readonly deps: readonly string[] }>();
  /** Keys read since the last sweep(). */
  readonly #used = new Set<string>();
  readonly #usedRules = new Set<string>();

  readonly #patchAbove: number;

  /** patchAbove: see PATCH_ABOVE (tests lower it to exercise the patching on small clusters). */
  constructor(idx: ClusterIndex, patchAbove = PATCH_ABOVE) {
    this.#idx = idx;
    this.#patchAbove = patchAbove;
  }

  /**
   * Follows a pod diff of the index (`removed`: old objects, `added`: new
   * ones; a changed pod is both): a result one of them is, or may now be,
   * part of is patched when big (a cluster-wide peer: resolving it again
   * walks its tens of thousands of pods and sorts their addresses) and
   * forgotten when small; the rule results built from it are forgotten.
   */
  advance(removed: readonly Pod[], added: readonly Pod[]): void {
    if (removed.length + added.length === 0) return;
    const changed = [...removed, ...added];
    const gone = new Set(removed);
    const dropped = new Set<string>();
    for (const [key, r] of this.#memo) {
      if (!changed.some((p) => r.scopes(p))) continue;
      dropped.add(key);
      if (r.size < this.#patchAbove) this.#memo.delete(key);
      else r.advance(gone, added);
    }
    if (dropped.size === 0) return;
    for (const [def, r] of this.#ruleMemo) if (r.deps.some((k) => dropped.has(k))) this.#ruleMemo.delete(def);
    for (const [key, r] of this.#derivedMemo) if (r.deps.some((k) => dropped.has(k))) this.#derivedMemo.delete(key);
  }

  /**
   * A compile begins: what sweep() keeps is what it asks for. Lookups between
   * compiles (PeerChurn counting a set's pods) do not keep a result alive
   * past the policy it came from.
   */
  beginCompile(): void {
    this.#used.clear();
    this.#usedRules.clear();
  }

  /**
   * Drops what no lookup since the last sweep asked for (selectors of deleted
   * or edited policies), so a resolver kept across compiles does not grow
   * with policy churn. Returns how many results it keeps.
   */
  sweep(): { peers: number; rules: number; nsSelectors: Set<string>; labelKeys: Set<string> } {
    for (const k of this.#ruleMemo.keys()) if (!this.#usedRules.has(k)) this.#ruleMemo.delete(k);
    for (const k of this.#derivedMemo.keys()) if (!this.#usedRules.has(k)) this.#derivedMemo.delete(k);
    // A kept rule result is invalidated through its pod peer results: keep those too.
    for (const r of this.#ruleMemo.values()) for (const k of r.deps) this.#used.add(k);
    for (const r of this.#derivedMemo.values()) for (const k of r.deps) this.#used.add(k);
    for (const k of this.#memo.keys()) if (!this.#used.has(k)) this.#memo.delete(k);
    this.#used.clear();
    this.#usedRules.clear();
    // What the kept results are recomputed from (see ClusterIndex.sweep).
    const nsSelectors = new Set<string>();
    const labelKeys = new Set<string>();
    for (const r of this.#memo.values()) {
      if (r.nsSelector !== undefined) nsSelectors.add(r.nsSelector);
      for (const k of Object.keys(r.selector?.matchLabels ?? {})) labelKeys.add(k);
    }
    return { peers: this.#memo.size, rules: this.#ruleMemo.size, nsSelectors, labelKeys };
  }

  #podPeer(peer: Extract<Peer, { kind: 'pods' }>, policyNs: string, texts?: SelectorTexts): PodPeerResult {
    // podPeerKey, with the namespaceSelector's text made once for the key, the index's memo and the result.
    const nsText =
      texts !== undefined ? texts.ns : peer.namespaceSelector === undefined ? undefined : formatSelector(peer.namespaceSelector);
    const key = `${nsText === undefined ? `ns:${policyNs}` : `sel:${nsText}`}|${texts?.pod ?? podSelectorText(peer)}`;
    this.#used.add(key);
    let r = this.#memo.get(key);
    if (r === undefined) {
      const namespaces =
        peer.namespaceSelector === undefined ? [policyNs] : this.#idx.namespacesMatching(peer.namespaceSelector, nsText);
      r = new PodPeerResult(
        this.#idx.podsMatching(namespaces, peer.podSelector),
        namespaces,
        peer.podSelector,
        nsText,
        this.#idx,
      );
      this.#memo.set(key, r);
    }
    return r;
  }

  /** Address intervals of one peer of a policy in `policyNs`. */
  peerIntervals(peer: Peer, policyNs: string): ReadonlyList<Interval> {
    return peer.kind === 'ipBlock' ? ipBlockIntervals(peer) : this.#podPeer(peer, policyNs).intervals;
  }

  /**
   * Union of all peers of a rule, per family; memoized by `definition`
   * (peersDefinition of the same peers): rules sharing it share the result.
   */
  ruleIntervals(
    peers: readonly Peer[],
    policyNs: string,
    definition: string = peersDefinition(peers, policyNs),
  ): FamilyIntervals {
    this.#usedRules.add(definition);
    let r = this.#ruleMemo.get(definition);
    if (r === undefined) {
      // A single peer is already merged (the common case; skips a re-sort).
      const intervals =
        peers.length === 1 && peers[0] !== undefined
          ? byFamily(this.peerIntervals(peers[0], policyNs))
          : byFamily(mergeIntervals(peers.flatMap((p) => listArray(this.peerIntervals(p, policyNs)))));
      r = { intervals, deps: peers.flatMap((p) => (p.kind === 'pods' ? [podPeerKey(p, policyNs)] : [])) };
      this.#ruleMemo.set(definition, r);
    }
    return r.intervals;
  }

  /**
   * A value made from what a rule's pod peers select and nothing else (no
   * ipBlock peers), kept across compiles until a pod diff touches one of
   * them, as the rule results are: an egress rule's named-port triples walk
   * every destination pod (thousands at 100k pods), once per compile before.
   * `key` names the value and everything `make` reads besides the peers.
   */
  derived<T>(key: string, peers: readonly Extract<Peer, { kind: 'pods' }>[], policyNs: string, make: () => T): T {
    this.#usedRules.add(key);
    const hit = this.#derivedMemo.get(key);
    if (hit !== undefined) {
      // Read as a fresh compile would: the results stay in use (and are advanced) while the value is.
      for (const p of peers) this.#podPeer(p, policyNs);
      return hit.value as T;
    }
    const value = make();
    this.#derivedMemo.set(key, { value, deps: peers.map((p) => podPeerKey(p, policyNs)) });
    return value;
  }

  /** Only ipBlock peers, per family: the part of a rule's addresses that never changes with pods. */
  blockIntervals(peers: readonly Peer[]): FamilyIntervals {
    return byFamily(mergeIntervals(peers.flatMap((p) => (p.kind === 'ipBlock' ? ipBlockIntervals(p) : []))));
  }

  /** The pods one pod peer of a policy in `policyNs` selects; `texts`: its selectors formatted, when the caller has them. */
  podsOf(peer: Extract<Peer, { kind: 'pods' }>, policyNs: string, texts?: SelectorTexts): ReadonlyList<Pod> {
    return this.#podPeer(peer, policyNs, texts).pods;
  }

  /** Pods and blocks a rule's peers name (for resolving named ports on destinations). */
  destinations(peers: readonly Peer[], policyNs: string): PeerDestinations {
    const pods = new Set<Pod>();
    const blocks: Interval[] = [];
    for (const p of peers) {
      if (p.kind === 'ipBlock') blocks.push(...ipBlockIntervals(p));
      else for (const pod of this.#podPeer(p, policyNs).pods) pods.add(pod);
    }
    return { pods: [...pods], blocks: byFamily(mergeIntervals(blocks)) };
  }
}

/**
 * `sorted` without the objects at `drop` and with `add` inserted, each after
 * the objects of its key (as insertByObjectKey one by one would), as a
 * chunked list: the chunks no edit touches are shared with `sorted` (a copy
 * of the list per change was ~1 MB per big peer set at 100k pods, straight
 * into V8's old generation: issue 24, memory).
 */
export function patchSorted(sorted: ReadonlyList<Pod>, drop: readonly number[], add: readonly Pod[]): ChunkedList<Pod> {
  const ds = [...new Set(drop)].sort((a, b) => a - b);
  const as = [...add].sort(byObjectKey); // stable: equal keys in the given order
  const edits: ListEdit<Pod>[] = [];
  let d = 0;
  for (const x of as) {
    const at = upperBound(sorted, x);
    while (d < ds.length && ds[d]! < at) edits.push({ at: ds[d++]!, insert: false, now: undefined });
    edits.push({ at, insert: true, now: x });
  }
  while (d < ds.length) edits.push({ at: ds[d++]!, insert: false, now: undefined });
  const list = ChunkedList.of(sorted);
  return list.edit(edits);
}

/** The first index whose object sorts after `x` (byObjectKey). */
function upperBound(list: ReadonlyList<Pod>, x: Pod): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (byObjectKey(list.at(mid)!, x) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Where this very object is in a list sorted by byObjectKey, or -1. */
function indexOfObject(list: ReadonlyList<Pod>, p: Pod): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (byObjectKey(list.at(mid)!, p) < 0) lo = mid + 1;
    else hi = mid;
  }
  for (let i = lo; i < list.length && byObjectKey(list.at(i)!, p) === 0; i++) if (list.at(i) === p) return i;
  // Not where the order puts it: absent (a pod the result never held), or a list out of order; a scan tells.
  let i = 0;
  for (const q of list) {
    if (q === p) return i;
    i++;
  }
  return -1;
}

/**
 * The merged address intervals of these pods' IPs, and the addresses more
 * than one of them holds (text -> holders; a patch removes such an address
 * with its last holder).
 */
function podIntervals(
  list: ReadonlyList<Pod>,
  idx: ClusterIndex,
): { ivs: readonly Interval[]; shared: Map<string, number> | undefined } {
  // IPv4 as plain numbers: sorting tens of thousands of bigints is the slow part otherwise.
  const v4: number[] = [];
  const other: Interval[] = [];
  let texts = 0;
  // By chunks, their objects warmed first (pod-walk.ts): tens of thousands of pods per cluster-wide peer.
  const lists: (readonly string[])[] = new Array<readonly string[]>(Math.min(CHUNK, list.length));
  for (const pods of chunksOf(list))
    for (let from = 0; from < pods.length; from += CHUNK) {
      const to = Math.min(pods.length, from + CHUNK);
      warmIPs(pods, from, to, lists);
      for (let k = 0; k < to - from; k++) {
        const ips = lists[k]!;
        texts += ips.length;
        for (let i = 0; i < ips.length; i++) {
          const text = ips[i]!;
          const n = parseV4(text);
          if (n !== undefined) {
            v4.push(n);
            continue;
          }
          const ip = idx.ip(text);
          if (ip !== undefined) other.push({ family: ip.family, lo: ip.value, hi: ip.value });
        }
      }
    }
  // (A non-canonical IPv4 text would land in `other`: then merge all together.)
  const fast = mergeV4(v4);
  const ivs = other.some((iv) => iv.family === 4) ? mergeIntervals([...fast, ...other]) : [...fast, ...mergeIntervals(other)];
  // How many distinct addresses: as numbers for IPv4 (no bigint per interval), else bigints.
  let distinct = 0;
  if (other.length === 0) for (const iv of ivs) distinct += Number(iv.hi) - Number(iv.lo) + 1;
  else {
    let d = 0n;
    for (const iv of ivs) d += iv.hi - iv.lo + 1n;
    distinct = Number(d);
  }
  return { ivs, shared: distinct === texts ? undefined : holders(list) };
}

/** The texts more than one of the pods hold, with their counts (when the intervals hold fewer addresses than the pods have). */
function holders(pods: ReadonlyList<Pod>): Map<string, number> {
  const shared = new Map<string, number>();
  const seen = new Map<string, number>();
  for (const pod of pods) for (const t of pod.ips) seen.set(t, (seen.get(t) ?? 0) + 1);
  for (const [t, n] of seen) if (n > 1) shared.set(t, n);
  return shared;
}

/** Where (family, value) is or would go in sorted, merged intervals: the first interval not wholly before it. */
function lowerBound(ivs: ReadonlyList<Interval>, family: Family, value: bigint): number {
  let lo = 0;
  let hi = ivs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const iv = ivs.at(mid)!;
    if (iv.family < family || (iv.family === family && iv.hi < value)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** One address of a family. */
export interface Point {
  readonly family: Family;
  readonly value: bigint;
}

function pointKey(p: Point): string {
  return `${p.family}/${p.value}`;
}

function comparePoint(family: Family, value: bigint, b: Point): number {
  return family - b.family || (value < b.value ? -1 : value > b.value ? 1 : 0);
}

function byPoint(a: Point, b: Point): number {
  return comparePoint(a.family, a.value, b);
}

/**
 * Sorted, merged intervals without the `removes` and with the `adds` (removed
 * first): what merging all the addresses again gives. Only the windows
 * around the diff's addresses are walked (the interval at or after each
 * address and the one before it, which an added address may join); every
 * other interval stays, the same object in the same place. The result is a
 * chunked list that shares the chunks no window touches with `ivs` (an
 * array of the list per change, 26k intervals in a cluster-wide peer set at
 * 100k pods, went straight into V8's old generation: 12-33 MB of every 10 s
 * it collected under 200 changes/s, issue 24), and its patch is kept for
 * takePredecessor.
 */
export function patchIntervals(
  ivs: ReadonlyList<Interval>,
  removes: readonly Point[],
  adds: readonly Point[],
): ReadonlyList<Interval> {
  const windows: { a: number; b: number; removes: Point[]; adds: Point[] }[] = [];
  const at = (pt: Point, isAdd: boolean): { a: number; b: number; pt: Point; isAdd: boolean } => {
    const l = lowerBound(ivs, pt.family, pt.value);
    return { a: Math.max(0, l - 1), b: Math.min(ivs.length, l + 1), pt, isAdd };
  };
  const spots = [...removes.map((pt) => at(pt, false)), ...adds.map((pt) => at(pt, true))].sort((x, y) => x.a - y.a);
  for (const sp of spots) {
    const last = windows[windows.length - 1];
    // Windows that meet are walked together: an address may join the intervals on both sides.
    const w = last !== undefined && sp.a <= last.b ? last : undefined;
    const into = w ?? { a: sp.a, b: sp.b, removes: [], adds: [] };
    if (w === undefined) windows.push(into);
    into.b = Math.max(into.b, sp.b);
    (sp.isAdd ? into.adds : into.removes).push(sp.pt);
  }
  const patched: IntervalWindow[] = [];
  const edits: ListEdit<Interval>[] = [];
  for (const w of windows) {
    const part: Interval[] = [];
    for (let i = w.a; i < w.b; i++) part.push(ivs.at(i)!);
    const by = patchWalk(part, w.removes, w.adds);
    patched.push({ a: w.a, b: w.b, by });
    spliceEdits(edits, w.a, w.b, by);
  }
  if (edits.length === 0) return ivs; // nothing to do (an empty diff, or removes from an empty list): no patch
  const out = ChunkedList.of(ivs).edit(edits);
  predecessors.set(out, { from: ivs, windows: patched });
  return out;
}

/** patchIntervals by walking every interval: for the few around the diff's addresses. */
function patchWalk(ivs: readonly Interval[], removes: readonly Point[], adds: readonly Point[]): Interval[] {
  const rs = [...removes].sort(byPoint);
  const as = [...adds].sort(byPoint);
  // One array, sized for the most the result can hold (a remove splits at
  // most one interval in two), trimmed at the end: grown by push, the list
  // and a list of the cut intervals before it were allocated about three
  // times over (issue 24, memory).
  const out = new Array<Interval>(ivs.length + rs.length + as.length);
  let w = 0;
  const push = (iv: Interval): void => {
    const last = w > 0 ? out[w - 1] : undefined;
    if (last !== undefined && last.family === iv.family && last.hi + 1n >= iv.lo) {
      if (iv.hi > last.hi) out[w - 1] = { family: iv.family, lo: last.lo, hi: iv.hi };
    } else out[w++] = iv;
  };
  let k = 0;
  // The intervals without the removes, in order, each merged with the adds before it.
  const cut = (iv: Interval): void => {
    while (k < as.length && comparePoint(iv.family, iv.lo, as[k]!) > 0) {
      const a = as[k++]!;
      push({ family: a.family, lo: a.value, hi: a.value });
    }
    push(iv);
  };
  let j = 0;
  for (const iv of ivs) {
    while (j < rs.length && comparePoint(iv.family, iv.lo, rs[j]!) > 0) j++;
    let lo = iv.lo;
    let touched = false;
    while (j < rs.length && rs[j]!.family === iv.family && rs[j]!.value <= iv.hi) {
      const v = rs[j++]!.value;
      if (v < lo) continue; // a duplicate
      touched = true;
      if (v > lo) cut({ family: iv.family, lo, hi: v - 1n });
      lo = v + 1n;
    }
    if (!touched) cut(iv);
    else if (lo <= iv.hi) cut({ family: iv.family, lo, hi: iv.hi });
  }
  for (; k < as.length; k++) push({ family: as[k]!.family, lo: as[k]!.value, hi: as[k]!.value });
  out.length = w;
  return out;
}

/** Do the sorted, merged intervals (of both families) hold (family, value)? */
function holdsAddress(ivs: ReadonlyList<Interval>, family: Family, value: bigint): boolean {
  const at = ivs.at(lowerBound(ivs, family, value));
  return at !== undefined && at.family === family && at.lo <= value;
}

/** Is `value` inside one of the sorted, disjoint intervals? */
export function intervalsContain(ivs: ReadonlyList<Interval>, family: Family, value: bigint): boolean {
  let lo = 0;
  let hi = ivs.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const iv = ivs.at(mid);
    if (iv === undefined || iv.family !== family) return false;
    if (value < iv.lo) hi = mid - 1;
    else if (value > iv.hi) lo = mid + 1;
    else return true;
  }
  return false;
}
