// A rule's peers as address intervals per family: the IPs of the active pods
// its pod peers select plus its ipBlocks (cidr minus excepts). Merged and
// sorted, so they render as non-overlapping interval set elements.
import { cidrInterval, mergeIntervals, parseCIDR, subtractIntervals } from '../model/ip.ts';
import type { Interval } from '../model/ip.ts';
import { formatSelector } from '../model/selector.ts';
import type { Family, Peer, Pod } from '../model/types.ts';
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

/** Resolves pod peers, memoized by (namespace scope, pod selector). */
export class PeerResolver {
  readonly #idx: ClusterIndex;
  readonly #memo = new Map<string, PodPeerResult>();

  constructor(idx: ClusterIndex) {
    this.#idx = idx;
  }

  #podPeer(peer: Extract<Peer, { kind: 'pods' }>, policyNs: string): PodPeerResult {
    const scope = peer.namespaceSelector === undefined ? `ns:${policyNs}` : `sel:${formatSelector(peer.namespaceSelector)}`;
    const key = `${scope}|${peer.podSelector === undefined ? '*' : formatSelector(peer.podSelector)}`;
    let r = this.#memo.get(key);
    if (r === undefined) {
      const namespaces = peer.namespaceSelector === undefined ? [policyNs] : this.#idx.namespacesMatching(peer.namespaceSelector);
      const pods = this.#idx.podsMatching(namespaces, peer.podSelector);
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
          const ip = this.#idx.ip(text);
          if (ip !== undefined) other.push({ family: ip.family, lo: ip.value, hi: ip.value });
        }
      }
      // (A non-canonical IPv4 text would land in `other`: then merge all together.)
      const fast = mergeV4(v4);
      r = { pods, intervals: other.some((iv) => iv.family === 4) ? mergeIntervals([...fast, ...other]) : [...fast, ...mergeIntervals(other)] };
      this.#memo.set(key, r);
    }
    return r;
  }

  /** Address intervals of one peer of a policy in `policyNs`. */
  peerIntervals(peer: Peer, policyNs: string): readonly Interval[] {
    return peer.kind === 'ipBlock' ? ipBlockIntervals(peer) : this.#podPeer(peer, policyNs).intervals;
  }

  /** Union of all peers of a rule, per family. */
  ruleIntervals(peers: readonly Peer[], policyNs: string): FamilyIntervals {
    // A single peer is already merged (the common case; skips a re-sort).
    if (peers.length === 1 && peers[0] !== undefined) return byFamily(this.peerIntervals(peers[0], policyNs));
    return byFamily(mergeIntervals(peers.flatMap((p) => this.peerIntervals(p, policyNs))));
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
