// Drift detection compares two listings of the table made by the kernel
// (`nft list table`), never our own script with a listing: nft re-formats
// what it prints (merged intervals, element order, defaults). The canonical
// listing is captured right after each successful apply.
import { promisify } from 'node:util';
import { deflateRaw, deflateRawSync, inflateRawSync } from 'node:zlib';
import type { CompiledRuleset } from '../ruleset/ir.ts';

const deflateRawAsync = promisify(deflateRaw);
const SYNC_PACK_CHARS = 256 * 1024;

/**
 * A normalized listing as it is kept between applies: deflated (at 100k pods
 * ~2.3 MB of text, a tenth of that packed), unpacked only for a drift check.
 * Kept as text it stayed in the V8 heap, which grows in proportion to what
 * stays live (issue 24). Packing runs on the thread pool, not the event loop.
 */
export class PackedListing {
  readonly #packed: Buffer;

  private constructor(packed: Buffer) {
    this.#packed = packed;
  }

  static async of(normalized: string): Promise<PackedListing> {
    // A small listing packs in well under a millisecond: at once, without the
    // hop to the thread pool (the canonical listing is then there as soon as
    // the read-back ends, as when it was kept as text).
    if (normalized.length < SYNC_PACK_CHARS) return new PackedListing(deflateRawSync(normalized, { level: 1 }));
    return new PackedListing(await deflateRawAsync(normalized, { level: 1 }));
  }

  text(): string {
    return inflateRawSync(this.#packed).toString('utf8');
  }

  /** Packed size in bytes. */
  get size(): number {
    return this.#packed.length;
  }
}

/**
 * Removes what changes without anyone editing the table: counter values
 * (traffic), the expiry of timed set elements, and trailing whitespace.
 */
export function normalizeListing(listing: string): string {
  // Line by line (trimEnd each line of the split, drop the empty ones, join),
  // as whole-text replaces: no string per line and no arrays of them (a
  // listing at 100k pods has ~50k lines, read back after every apply).
  return listing
    .replace(/packets \d+ bytes \d+/g, 'packets 0 bytes 0')
    .replace(/ expires [0-9dhms.]+/g, '')
    .replace(/[^\S\n]+(?=\n|$)/g, '')
    .replace(/\n{2,}/g, '\n')
    .replace(/^\n|\n$/g, '');
}

export type DriftCheck =
  | { readonly drifted: false }
  | { readonly drifted: true; readonly why: 'table missing' | 'table changed'; readonly firstDifference: string | undefined };

/**
 * Compares the kernel's listing now (undefined: no such table) with the
 * normalized canonical listing captured after the last apply.
 */
export function checkDrift(canonical: string, current: string | undefined): DriftCheck {
  if (current === undefined) return { drifted: true, why: 'table missing', firstDifference: undefined };
  const now = normalizeListing(current);
  if (now === canonical) return { drifted: false };
  return { drifted: true, why: 'table changed', firstDifference: firstDifference(canonical, now) };
}

/** The first differing line, for the log: `line 12: "expected" != "found"`. */
export function firstDifference(a: string, b: string): string | undefined {
  const la = a.split('\n');
  const lb = b.split('\n');
  const n = Math.max(la.length, lb.length);
  for (let i = 0; i < n; i++) {
    if (la[i] !== lb[i]) {
      const clip = (s: string | undefined): string => (s === undefined ? '<end>' : JSON.stringify(s.trim().slice(0, 160)));
      return `line ${i + 1}: expected ${clip(la[i])}, found ${clip(lb[i])}`;
    }
  }
  return undefined;
}

/**
 * The named objects of a table (chains, sets, maps), from our script or from
 * a kernel listing: both print `chain NAME {`, `set NAME {`, `map NAME {`.
 * The read-back after an apply must have exactly the script's objects; if
 * not, someone changed the table in between and the listing is not canonical.
 */
export function tableObjects(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/^\s*(chain|set|map) (\S+) \{\s*$/gm)) out.push(`${m[1]} ${m[2]}`);
  return out.sort();
}

/** The named objects of a compiled ruleset, as tableObjects() gives them. */
export function compiledObjects(c: CompiledRuleset): string[] {
  return [
    ...c.chains.map((x) => `chain ${x.name}`),
    ...c.sets.map((x) => `set ${x.name}`),
    ...c.maps.map((x) => `map ${x.name}`),
    ...c.decisions.map((x) => `map ${x.name}`),
  ].sort();
}

/** Does the listing hold exactly these objects (sorted, as tableObjects() gives them)? */
export function sameObjects(objects: readonly string[], listing: string): boolean {
  const a = objects;
  const b = tableObjects(listing);
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
