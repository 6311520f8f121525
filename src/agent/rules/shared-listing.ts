// One kernel listing for every reader that asks at about the same time: the
// deny counters and the per-rule counters both read `nft -t -j list table`
// before a scrape, and on a large node one listing costs about a full table
// listing (docs/benchmarks.md).

/** `list`, with calls made while one runs, or within `reuseMs` of its end, answered by that one. */
export function sharedListing(
  list: () => Promise<string | undefined>,
  reuseMs = 500,
  now: () => number = Date.now,
): () => Promise<string | undefined> {
  let running: Promise<string | undefined> | undefined;
  let last: { at: number; value: Promise<string | undefined> } | undefined;
  return () => {
    if (running !== undefined) return running;
    if (last !== undefined && now() - last.at < reuseMs) return last.value;
    const p = list();
    running = p;
    const done = (): void => {
      running = undefined;
      last = { at: now(), value: p };
    };
    p.then(done, done);
    return p;
  };
}
