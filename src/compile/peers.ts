// A rule's peers as address intervals per family: the IPs of the active pods
// its pod peers select plus its ipBlocks (cidr minus excepts). Merged and
// sorted, so they render as non-overlapping interval set elements.
import { cidrInterval, mergeIntervals, parseCIDR, subtractIntervals } from '../model/ip.ts';
import type { Interval } from '../model/ip.ts';
import { formatSelector, selectorMatches } from '../model/selector.ts';
import type { Family, LabelSelector, Peer, Pod } from '../model/types.ts';
import type { ClusterIndex } from './cluster-index.ts';
import { mergeV4, parseV4 } from './v4.ts';

export interface FamilyIntervals {
  readonly 4: readonly Interval[];
  readonly 6: readonly Interval[];
}

export const NO_ADDRESSES: FamilyIntervals = { 4: [], 6: [] };

function byFamily(merged: readonly Interval[]): FamilyIntervals {
  return { 4: merged.filter((iv) => iv.family === 4), 6: merged.filter((iv) => iv.family === 6) };
}

interface PodPeerResult {
  readonly pods: readonly Pod[];
  readonly intervals: readonly Interval[];
  /** What decides the result: pods in these namespaces matching this selector (undefined = all). */
  readonly namespaces: ReadonlySet<string>;
  readonly selector: LabelSelector | undefined;
  /** formatSelector of the peer's namespaceSelector, if it has one. */
  readonly nsSelector: string | undefined;
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
 * outlives one compile when the index is advanced by a pod diff: invalidate()
 * drops exactly the results a changed pod could be part of.
 */
export class PeerResolver {
  readonly #idx: ClusterIndex;
  readonly #memo = new Map<string, PodPeerResult>();
  readonly #ruleMemo = new Map<string, RuleResult>();
  /** Keys read since the last sweep(). */
  readonly #used = new Set<string>();
  readonly #usedRules = new Set<string>();

  constructor(idx: ClusterIndex) {
    this.#idx = idx;
  }

  /**
   * Forgets every result that one of these pods (old or new objects of
   * changed pods) is, or may now be, part of: its namespace in the scope and
   * its labels matching the selector. Namespaces must not have changed.
   */
  invalidate(changed: readonly Pod[]): void {
    if (changed.length === 0) return;
    const dropped = new Set<string>();
    for (const [key, r] of this.#memo) {
      if (
        changed.some((p) => r.namespaces.has(p.namespace) && (r.selector === undefined || selectorMatches(r.selector, p.labels)))
      ) {
        this.#memo.delete(key);
        dropped.add(key);
      }
    }
    if (dropped.size === 0) return;
    for (const [def, r] of this.#ruleMemo) if (r.deps.some((k) => dropped.has(k))) this.#ruleMemo.delete(def);
  }

  /**
   * Drops what no lookup since the last sweep asked for (selectors of deleted
   * or edited policies), so a resolver kept across compiles does not grow
   * with policy churn. Returns how many results it keeps.
   */
  sweep(): { peers: number; rules: number; nsSelectors: Set<string>; labelKeys: Set<string> } {
    for (const k of this.#ruleMemo.keys()) if (!this.#usedRules.has(k)) this.#ruleMemo.delete(k);
    // A kept rule result is invalidated through its pod peer results: keep those too.
    for (const r of this.#ruleMemo.values()) for (const k of r.deps) this.#used.add(k);
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

  #podPeer(peer: Extract<Peer, { kind: 'pods' }>, policyNs: string): PodPeerResult {
    const key = podPeerKey(peer, policyNs);
    this.#used.add(key);
    let r = this.#memo.get(key);
    if (r === undefined) {
      const namespaces = peer.namespaceSelector === undefined ? [policyNs] : this.#idx.namespacesMatching(peer.namespaceSelector);
      const pods = this.#idx.podsMatching(namespaces, peer.podSelector);
      const idx = this.#idx;
      let intervals: readonly Interval[] | undefined;
      r = {
        pods,
        // On first use: the tiers (compile/tiers.ts) read only the pods.
        get intervals(): readonly Interval[] {
          return (intervals ??= podIntervals(pods, idx));
        },
        namespaces: new Set(namespaces),
        selector: peer.podSelector,
        nsSelector: peer.namespaceSelector === undefined ? undefined : formatSelector(peer.namespaceSelector),
      };
      this.#memo.set(key, r);
    }
    return r;
  }

  /** Address intervals of one peer of a policy in `policyNs`. */
  peerIntervals(peer: Peer, policyNs: string): readonly Interval[] {
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
          : byFamily(mergeIntervals(peers.flatMap((p) => this.peerIntervals(p, policyNs))));
      r = { intervals, deps: peers.flatMap((p) => (p.kind === 'pods' ? [podPeerKey(p, policyNs)] : [])) };
      this.#ruleMemo.set(definition, r);
    }
    return r.intervals;
  }

  /** Only ipBlock peers, per family: the part of a rule's addresses that never changes with pods. */
  blockIntervals(peers: readonly Peer[]): FamilyIntervals {
    return byFamily(mergeIntervals(peers.flatMap((p) => (p.kind === 'ipBlock' ? ipBlockIntervals(p) : []))));
  }

  /** The pods one pod peer of a policy in `policyNs` selects. */
  podsOf(peer: Extract<Peer, { kind: 'pods' }>, policyNs: string): readonly Pod[] {
    return this.#podPeer(peer, policyNs).pods;
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

/** The merged address intervals of these pods' IPs. */
function podIntervals(pods: readonly Pod[], idx: ClusterIndex): readonly Interval[] {
  // IPv4 as plain numbers: sorting tens of thousands of bigints is the slow part otherwise.
  const v4: number[] = [];
  const other: Interval[] = [];
  for (const pod of pods) {
    for (const text of pod.ips) {
      const n = parseV4(text);
      if (n !== undefined) {
        v4.push(n);
        continue;
      }
      const ip = idx.ip(text);
      if (ip !== undefined) other.push({ family: ip.family, lo: ip.value, hi: ip.value });
    }
  }
  // (A non-canonical IPv4 text would land in `other`: then merge all together.)
  const fast = mergeV4(v4);
  return other.some((iv) => iv.family === 4) ? mergeIntervals([...fast, ...other]) : [...fast, ...mergeIntervals(other)];
}

/** Is `value` inside one of the sorted, disjoint intervals? */
export function intervalsContain(ivs: readonly Interval[], family: Family, value: bigint): boolean {
  let lo = 0;
  let hi = ivs.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const iv = ivs[mid];
    if (iv === undefined || iv.family !== family) return false;
    if (value < iv.lo) hi = mid - 1;
    else if (value > iv.hi) lo = mid + 1;
    else return true;
  }
  return false;
}
