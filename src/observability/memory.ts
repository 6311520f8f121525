// Gives the memory of a big one-off allocation back to the system. After a
// full apply at 100k pods the process holds the initial lists, the full
// script and the read-back's listing as garbage in V8's old and large-object
// spaces; V8 collects it only when the old generation reaches its limit,
// which it sets as a factor of what was live at the last full GC. One full
// GC once that garbage is dead returns the pages and lowers that limit
// (docs/benchmarks.md, "Memory after a full apply").
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let collect: (() => void) | undefined;

/** A full, synchronous garbage collection; returns its duration in ms. */
export function collectGarbage(): number {
  if (collect === undefined) {
    // --expose-gc set after start-up only exposes gc() to new contexts.
    setFlagsFromString('--expose-gc');
    collect = runInNewContext('gc') as () => void;
  }
  const t = performance.now();
  collect();
  return performance.now() - t;
}
