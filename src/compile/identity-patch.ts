// The pod identities of one direction and family patched from the last
// compile's instead of built from every address again (identities.ts
// podIdentities), when a compile's pod sources differ from the last ones by a
// few addresses: a local pod's change (its address enters or leaves the peer
// sets it is in; PeerChurn does the same for remote pods without a compile).
// Only the addresses whose membership changed get a new key: those in the
// symmetric difference of a changed source's old and new address lists (both
// in numeric order, peers.ts), and every address of a source that came or
// went. Egress named-port sources changed, or too many addresses: undefined,
// build afresh. The result equals podIdentities' (property-tested through
// NodeCompiler against compileNode).
import { parseIP } from '../model/ip.ts';
import type { Family } from '../model/types.ts';
import type { MapElement } from '../ruleset/ir.ts';
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
export function findElement(els: readonly MapElement[], addr: string, f: Family): { at: number; found: boolean } {
  const v = addrValue(addr, f);
  let lo = 0;
  let hi = els.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const k = els[mid]!.key;
    const m = typeof k === 'string' ? addrValue(k, f) : k.lo;
    if (m < v) lo = mid + 1;
    else hi = mid;
  }
  const at = els[lo];
  return { at: lo, found: at !== undefined && at.key === addr };
}

function contains(sorted: readonly string[], addr: string, v: bigint | number, f: Family): boolean {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const m = sorted[mid]!;
    if (m === addr) return true;
    if (addrValue(m, f) < v) lo = mid + 1;
    else hi = mid;
  }
  return false;
}

/** Adds the addresses in one sorted list and not the other to `out`; false past `limit`. */
function symmetricDifference(a: readonly string[], b: readonly string[], f: Family, out: Set<string>, limit: number): boolean {
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const x = a[i];
    const y = b[j];
    if (x !== undefined && x === y) {
      i++;
      j++;
      continue;
    }
    const c = x === undefined ? 1 : y === undefined ? -1 : addrValue(x, f) < addrValue(y, f) ? -1 : 1;
    if (c < 0) {
      out.add(x!);
      i++;
    } else {
      out.add(y!);
      j++;
    }
    if (out.size > limit) return false;
  }
  return true;
}

type Lists = Map<string, readonly unknown[]>;

function sourcesOf(terms: readonly Term[], f: Family): { pods: Map<string, readonly string[]>; named: Lists } {
  const pods = new Map<string, readonly string[]>();
  const named: Lists = new Map();
  for (const t of terms) {
    const s = t.source;
    if (t.family !== f) continue;
    if (s.kind === 'pods') pods.set(s.key, s.addrs);
    else if (s.kind === 'named') named.set(s.key, s.triples);
  }
  return { pods, named };
}

function sameLists(a: Lists, b: Lists): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}

/** A token's source key (named tokens are `key=ports`). */
export function tokenSource(token: string): string {
  const i = token.indexOf('=');
  return i < 0 ? token : token.slice(0, i);
}

export interface PatchedIdentities {
  readonly keys: Map<string, string>;
  /** The addresses whose key was looked at again. */
  readonly affected: ReadonlySet<string>;
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
): PatchedIdentities | undefined {
  const before = sourcesOf(old.terms, f);
  const after = sourcesOf(terms, f);
  if (!sameLists(before.named, after.named)) return undefined;
  // Addresses PeerChurn moved since the old lists were compiled: their lists do not show it.
  const affected = new Set<string>(old.dirty ?? []);
  if (affected.size > limit) return undefined;
  for (const k of new Set([...before.pods.keys(), ...after.pods.keys()])) {
    const a = before.pods.get(k);
    const b = after.pods.get(k);
    if (a !== b && !symmetricDifference(a ?? [], b ?? [], f, affected, limit)) return undefined;
  }
  const sources = [...after.pods.keys()];
  // Every new key first, then into the map: the last compile's map is this
  // compile's (as PeerChurn moves keys in place), with nothing half-done.
  const updates: [string, string | undefined][] = [];
  for (const addr of affected) {
    const v = addrValue(addr, f);
    const prev = old.keys.get(addr);
    // Named sources are the same lists (checked above) and PeerChurn never moves their addresses: their tokens stay.
    const tokens = (prev === undefined ? [] : prev.split('|')).filter((t) => after.named.has(tokenSource(t)));
    for (const k of sources) if (contains(after.pods.get(k)!, addr, v, f)) tokens.push(k);
    tokens.sort((x, y) => {
      const sx = tokenSource(x);
      const sy = tokenSource(y);
      return sx < sy ? -1 : sx > sy ? 1 : 0;
    });
    updates.push([addr, tokens.length === 0 ? undefined : tokens.join('|')]);
  }
  const keys = old.keys;
  for (const [addr, key] of updates) {
    if (key === undefined) keys.delete(addr);
    else keys.set(addr, key);
  }
  return { keys, affected };
}
