// Walks over tens of thousands of pods (a cluster-wide peer's addresses, the
// index's walk, the label postings) are bound by memory latency, not by their
// work: a pod, its ips array, its labels and their strings are separate
// objects scattered over the heap. A loop that parses or matches as it goes
// keeps about one pod's chain of cache misses in flight at a time; a loop that
// only loads lets the CPU overlap the misses of dozens of pods. So these walks
// go by chunks: first a loop that only loads (warms) a chunk's objects, then
// the work, on objects now in cache. Same results; about 3x faster at 100k
// pods (docs/benchmarks.md, eighth round).
import type { Labels, Pod } from '../model/types.ts';

/** Pods per chunk: their objects stay in cache between the warming loop and the work. */
export const CHUNK = 128;

/** Where the warming loops put what they read, so that the loads are not optimized away. */
let sink = 0;

/**
 * The ips arrays of pods[from..to) into `out` (from index 0), each pod's
 * first address text touched: the chunk's misses taken together.
 */
export function warmIPs(pods: readonly Pod[], from: number, to: number, out: (readonly string[])[]): void {
  for (let p = from; p < to; p++) out[p - from] = pods[p]!.ips;
  let n = 0;
  for (let k = 0; k < to - from; k++) {
    const ips = out[k]!;
    if (ips.length > 0) n += ips[0]!.length;
  }
  sink += n;
}

/**
 * The labels of pods[from..to) into `out` and their values at `key` into
 * `values` (from index 0; a value may be inherited: check Object.hasOwn before
 * taking it): the chunk's misses taken together.
 */
export function warmLabels(
  pods: readonly Pod[],
  from: number,
  to: number,
  key: string,
  out: Labels[],
  values: (string | undefined)[],
): void {
  for (let p = from; p < to; p++) out[p - from] = pods[p]!.labels;
  let n = 0;
  for (let k = 0; k < to - from; k++) {
    const v = out[k]![key];
    values[k] = v;
    // The text too: comparing it with a selector's value reads it.
    if (typeof v === 'string') n += v.length;
  }
  sink += n;
}

const nsTexts: string[] = new Array<string>(CHUNK);
const ipLists: (readonly string[])[] = new Array<readonly string[]>(CHUNK);

/** Pods pods[from..to) (at most CHUNK), their namespace text and ips array touched: what isActivePod and a walk by namespace read. */
export function warmPods(pods: readonly Pod[], from: number, to: number): void {
  for (let p = from; p < to; p++) {
    const pod = pods[p]!;
    nsTexts[p - from] = pod.namespace;
    ipLists[p - from] = pod.ips;
  }
  let n = 0;
  for (let k = 0; k < to - from; k++) n += nsTexts[k]!.length + ipLists[k]!.length;
  sink += n;
}

/** What the warming loops summed: exported so that their loads stay observable (nothing needs the value). */
export function warmed(): number {
  return sink;
}
