// The pod identities of one direction and family patched from the last
// compile's instead of built from every address again (identities.ts
// podIdentities), when a compile's pod sources differ from the last ones by a
// few addresses: a local pod's change (its address enters or leaves the peer
// sets it is in; PeerChurn does the same for remote pods without a compile).
// Only the addresses whose membership changed get a new key: those in the
// symmetric difference of a changed source's old and new address lists (both
// in numeric order, peers.ts), and every address of a source that came or
// went; for egress named-port sources (the ports each address serves), the
// addresses of the triples in one list and not the other. Too many addresses:
// undefined, build afresh. The result equals podIdentities' (property-tested
// through NodeCompiler against compileNode).
import { parseIP } from '../model/ip.ts';
import { chunksOf } from '../model/list.ts';
import type { ReadonlyList } from '../model/list.ts';
import type { Family } from '../model/types.ts';
import type { MapElement } from '../ruleset/ir.ts';
import type { PortRange, PortTriple } from './ports.ts';
import type { Term } from './terms.ts';
import { parseV4 } from './v4.ts';

/** Past this many changed addresses a patch costs about what building afresh does. */
export const PATCH_LIMIT = 512;

/** An address of the compiler's text, as a number of its family (sortAddresses' order). */
export function addrValue(text: string, f: Family): bigint | number {
  if (f === 4) {
    const n = parseV4(text);
    if (n !== undefined) return n;
  }
  return parseIP(text)?.value ?? 0n;
}

/** Position of `addr` in elements sorted by address: found, or where it goes. */
export function findElement(els: ReadonlyList<MapElement>, addr: string, f: Family): { at: number; found: boolean } {
  const v = addrValue(addr, f);
  let lo = 0;
  let hi = els.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const k = els.at(mid)!.key;
    const m = typeof k === 'string' ? addrValue(k, f) : k.lo;
    if (m < v) lo = mid + 1;
    else hi = mid;
  }
  const at = els.at(lo);
  return { at: lo, found: at !== undefined && at.key === addr };
}

function contains(sorted: ReadonlyList<string>, addr: string, v: bigint | number, f: Family): boolean {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const m = sorted.at(mid)!;
    if (m === addr) return true;
    if (addrValue(m, f) < v) lo = mid + 1;
    else hi = mid;
  }
  return false;
}

/**
 * Adds the addresses in one sorted list and not the other to `out`; false
 * past `limit`. Chunks the two lists share (a list patched from the other,
 * list.ts) are stepped over whole when both walks reach one at its start: a
 * pod's change in a peer set of tens of thousands of addresses compares the
 * chunks around it, not every address.
 */
export function symmetricDifference(
  a: ReadonlyList<string>,
  b: ReadonlyList<string>,
  f: Family,
  out: Set<string>,
  limit: number,
): boolean {
  const ca = chunksOf(a);
  const cb = chunksOf(b);
  // Chunk and offset in it, per list; x and y the current entries.
  let ia = 0;
  let oa = 0;
  let ib = 0;
  let ob = 0;
  for (;;) {
    while (ia < ca.length && oa === ca[ia]!.length) {
      ia++;
      oa = 0;
    }
    while (ib < cb.length && ob === cb[ib]!.length) {
      ib++;
      ob = 0;
    }
    if (oa === 0 && ob === 0 && ia < ca.length && ca[ia] === cb[ib]) {
      ia++;
      ib++;
      continue;
    }
    const x = ia < ca.length ? ca[ia]![oa] : undefined;
    const y = ib < cb.length ? cb[ib]![ob] : undefined;
    if (x === undefined && y === undefined) return true;
    if (x !== undefined && x === y) {
      oa++;
      ob++;
      continue;
    }
    const c = x === undefined ? 1 : y === undefined ? -1 : addrValue(x, f) < addrValue(y, f) ? -1 : 1;
    if (c < 0) {
      out.add(x!);
      oa++;
    } else {
      out.add(y!);
      ob++;
    }
    if (out.size > limit) return false;
  }
}

/** Adds the addresses of the triples in one sorted list (by key) and not the other to `out`; false past `limit`. */
function tripleDifference(a: readonly PortTriple[], b: readonly PortTriple[], out: Set<string>, limit: number): boolean {
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const x = a[i];
    const y = b[j];
    if (x !== undefined && y !== undefined && x.key === y.key && x.addr === y.addr) {
      i++;
      j++;
      continue;
    }
    if (y === undefined || (x !== undefined && x.key < y.key)) {
      out.add(x!.addr);
      i++;
    } else if (x === undefined || y.key < x.key) {
      out.add(y.addr);
      j++;
    } else {
      // Same key, other text (a non-canonical address): both move.
      out.add(x.addr).add(y.addr);
      i++;
      j++;
    }
    if (out.size > limit) return false;
  }
  return true;
}

/** Do two lists hold the same values (addresses, or triples by key and text)? */
export function sameContent(a: readonly unknown[], b: readonly unknown[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    if (x === y) continue;
    if (typeof x !== 'object' || typeof y !== 'object' || x === null || y === null) return false;
    const tx = x as PortTriple;
    const ty = y as PortTriple;
    if (tx.key !== ty.key || tx.addr !== ty.addr) return false;
  }
  return true;
}

/** The ports `addr` serves in a named source's triples (sorted by key: an address's triples are adjacent). */
function portsOf(triples: readonly PortTriple[], addr: string, v: bigint | number): PortRange[] {
  const from = BigInt(v) << 18n;
  let lo = 0;
  let hi = triples.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (triples[mid]!.key < from) lo = mid + 1;
    else hi = mid;
  }
  const out: PortRange[] = [];
  for (let i = lo; i < triples.length && triples[i]!.key >> 18n === BigInt(v); i++) {
    const t = triples[i]!;
    if (t.addr === addr) out.push({ proto: t.proto, lo: t.port, hi: t.port });
  }
  return out;
}

/** A named source's token for an address serving `ports` (podIdentities' form). */
export function namedToken(source: string, ports: readonly PortRange[]): string {
  return `${source}=${ports
    .map((r) => `${r.proto} . ${r.lo}`)
    .sort()
    .join(',')}`;
}

function sourcesOf(
  terms: readonly Term[],
  f: Family,
): { pods: Map<string, ReadonlyList<string>>; named: Map<string, readonly PortTriple[]> } {
  const pods = new Map<string, ReadonlyList<string>>();
  const named = new Map<string, readonly PortTriple[]>();
  for (const t of terms) {
    const s = t.source;
    if (t.family !== f) continue;
    if (s.kind === 'pods') pods.set(s.key, s.addrs);
    else if (s.kind === 'named') named.set(s.key, s.triples);
  }
  return { pods, named };
}

/** A token's source key (named tokens are `key=ports`). */
export function tokenSource(token: string): string {
  const i = token.indexOf('=');
  return i < 0 ? token : token.slice(0, i);
}

/** The order of an identity key's tokens: by source key (podIdentities adds them so). */
export function byTokenSource(x: string, y: string): number {
  const sx = tokenSource(x);
  const sy = tokenSource(y);
  return sx < sy ? -1 : sx > sy ? 1 : 0;
}

export interface PatchedIdentities {
  readonly keys: Map<string, string>;
  /** The addresses whose key was looked at again. */
  readonly affected: ReadonlySet<string>;
  /** Named tokens of the new keys: source key and the remote ports (identities.ts NamedTokens). */
  readonly named: ReadonlyMap<string, { readonly source: string; readonly ports: readonly PortRange[] }>;
}

/**
 * The address -> identity key map of `terms` (one direction, family `f`),
 * from the last compile's part; undefined when a patch does not fit.
 */
export function patchPodKeys(
  old: {
    readonly terms: readonly Term[];
    readonly keys: Map<string, string>;
    /** Addresses whose key changed after `terms` were compiled. */
    readonly dirty?: ReadonlySet<string> | undefined;
  },
  terms: readonly Term[],
  f: Family,
  limit = PATCH_LIMIT,
  /** Addresses per key, moved along with the keys (the split's choice reads it, peer-split.ts). */
  counts?: Map<string, number>,
): PatchedIdentities | undefined {
  const before = sourcesOf(old.terms, f);
  const after = sourcesOf(terms, f);
  // Addresses PeerChurn moved since the old lists were compiled: their lists do not show it.
  const affected = new Set<string>(old.dirty ?? []);
  if (affected.size > limit) return undefined;
  // A source that came or went as a whole (a policy's peers, with the last or
  // first local pod it selects) adds or drops its token on every address of
  // it: done per distinct key below, without a look at the other sources.
  const whole: { readonly source: string; readonly addrs: ReadonlyList<string>; readonly came: boolean }[] = [];
  for (const k of new Set([...before.pods.keys(), ...after.pods.keys()])) {
    const a = before.pods.get(k);
    const b = after.pods.get(k);
    if (a === b) continue;
    if (a === undefined || b === undefined) whole.push({ source: k, addrs: (a ?? b)!, came: a === undefined });
    else if (!symmetricDifference(a, b, f, affected, limit)) return undefined;
  }
  // A compile lists a named source's triples anew: only a different content moves addresses.
  for (const k of new Set([...before.named.keys(), ...after.named.keys()])) {
    const a = before.named.get(k);
    const b = after.named.get(k);
    if (
      a !== b &&
      !(a !== undefined && b !== undefined && sameContent(a, b)) &&
      !tripleDifference(a ?? [], b ?? [], affected, limit)
    )
      return undefined;
  }
  const sources = [...after.pods.keys()];
  const namedSources = [...after.named.keys()];
  const named = new Map<string, { readonly source: string; readonly ports: readonly PortRange[] }>();
  // Every new key first, then into the map: the last compile's map is this
  // compile's (as PeerChurn moves keys in place), with nothing half-done.
  const updates: [string, string | undefined][] = [];
  for (const addr of affected) {
    const v = addrValue(addr, f);
    const tokens: string[] = [];
    for (const k of namedSources) {
      const ports = portsOf(after.named.get(k)!, addr, v);
      if (ports.length === 0) continue;
      const token = namedToken(k, ports);
      if (!named.has(token)) named.set(token, { source: k, ports });
      tokens.push(token);
    }
    for (const k of sources) if (contains(after.pods.get(k)!, addr, v, f)) tokens.push(k);
    tokens.sort(byTokenSource);
    updates.push([addr, tokens.length === 0 ? undefined : tokens.join('|')]);
  }
  const moved = whole.length === 0 ? affected : new Set(affected);
  if (whole.length > 0) {
    // Addresses in no changed list but a whole source's: their key is the old one with that token added or dropped.
    const next = new Map<string, string | undefined>();
    for (const w of whole) {
      const memo = new Map<string | undefined, string | undefined>();
      for (const addr of w.addrs) {
        if (affected.has(addr)) continue;
        const cur = next.has(addr) ? next.get(addr) : old.keys.get(addr);
        let key = memo.get(cur);
        if (key === undefined && !memo.has(cur)) memo.set(cur, (key = withToken(cur, w.source, w.came)));
        next.set(addr, key);
        moved.add(addr);
      }
    }
    for (const [addr, key] of next) updates.push([addr, key]);
  }
  const keys = old.keys;
  for (const [addr, key] of updates) {
    if (counts !== undefined) moveCount(counts, keys.get(addr), key);
    if (key === undefined) keys.delete(addr);
    else keys.set(addr, key);
  }
  return { keys, affected: moved, named };
}

/** An identity key with the token of pod source `source` added (came) or dropped; undefined: no token left. */
function withToken(key: string | undefined, source: string, came: boolean): string | undefined {
  const tokens = key === undefined ? [] : key.split('|');
  const rest = tokens.filter((t) => t !== source);
  if (came) rest.push(source);
  rest.sort(byTokenSource);
  return rest.length === 0 ? undefined : rest.join('|');
}

/** One address moved from key `from` to key `to` (undefined: none) in a count of addresses per key. */
export function moveCount(counts: Map<string, number>, from: string | undefined, to: string | undefined): void {
  if (from === to) return;
  if (from !== undefined) {
    const n = (counts.get(from) ?? 0) - 1;
    if (n > 0) counts.set(from, n);
    else counts.delete(from);
  }
  if (to !== undefined) counts.set(to, (counts.get(to) ?? 0) + 1);
}
