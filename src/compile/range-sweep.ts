// Address ranges of several sources cut into non-overlapping segments of
// constant membership: the range identities of identities.ts (NetworkPolicy
// peers) and of tiers.ts (ClusterNetworkPolicy tiers).
import { familyBits } from '../model/ip.ts';
import type { Interval } from '../model/ip.ts';
import type { Family } from '../model/types.ts';

export interface RangeSegment {
  readonly iv: Interval;
  /** Keys of the sources covering the segment, sorted. */
  readonly tokens: readonly string[];
  /** The tokens `|`-joined. */
  readonly key: string;
}

/**
 * A sweep over the interval boundaries: between two boundaries the covering
 * sources are constant. Segments covered by no source are left out; adjacent
 * segments with the same sources are one. In address order.
 */
export function rangeSegments(sources: Iterable<readonly [string, readonly Interval[]]>, f: Family): RangeSegment[] {
  const max = (1n << BigInt(familyBits(f))) - 1n;
  const events: { at: bigint; key: string; delta: number }[] = [];
  for (const [key, ivs] of sources) {
    for (const iv of ivs) {
      events.push({ at: iv.lo, key, delta: 1 });
      if (iv.hi < max) events.push({ at: iv.hi + 1n, key, delta: -1 });
    }
  }
  events.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
  const active = new Map<string, number>();
  const out: { iv: { family: Family; lo: bigint; hi: bigint }; tokens: string[]; key: string }[] = [];
  for (let i = 0; i < events.length;) {
    const at = events[i]!.at;
    while (i < events.length && events[i]!.at === at) {
      const e = events[i++]!;
      const n = (active.get(e.key) ?? 0) + e.delta;
      if (n === 0) active.delete(e.key);
      else active.set(e.key, n);
    }
    const end = i < events.length ? events[i]!.at - 1n : max;
    if (active.size === 0) continue;
    const tokens = [...active.keys()].sort();
    const key = tokens.join('|');
    const last = out[out.length - 1];
    if (last !== undefined && last.key === key && last.iv.hi + 1n === at) last.iv.hi = end;
    else out.push({ iv: { family: f, lo: at, hi: end }, tokens, key });
  }
  return out;
}
