// Table listings compared as sets of objects: an incremental update appends
// new chains and sets at the end of the kernel's lists, a full apply lists
// them in the script's order, and order is not semantics for named objects.

/** The listing with its top-level `set`/`map`/`chain` blocks sorted by header. */
export function sortedObjects(listing: string): string {
  const lines = listing.split('\n');
  const head: string[] = [];
  const blocks: string[][] = [];
  let cur: string[] | undefined;
  for (const l of lines) {
    if (cur === undefined && /^\t(set|map|chain) \S+ \{$/.test(l)) cur = [l];
    else if (cur !== undefined) {
      cur.push(l);
      if (l === '\t}') {
        blocks.push(cur);
        cur = undefined;
      }
    } else if (l.trim() !== '') head.push(l);
  }
  if (cur !== undefined) blocks.push(cur);
  const sorted = blocks.map((b) => b.join('\n')).sort();
  return [...head, ...sorted].join('\n');
}
