// IPv4/IPv6 addresses and CIDRs as bigints, plus the interval arithmetic the
// evaluator (containment) and the compiler (set elements) share.
import { isIPv4, isIPv6 } from 'node:net';
import type { Family } from './types.ts';

export interface IP {
  readonly family: Family;
  readonly value: bigint;
}

export interface CIDR {
  readonly family: Family;
  /** Network address (host bits cleared). */
  readonly base: bigint;
  readonly prefix: number;
}

/** Inclusive address range of one family. */
export interface Interval {
  readonly family: Family;
  readonly lo: bigint;
  readonly hi: bigint;
}

export function familyBits(f: Family): number {
  return f === 4 ? 32 : 128;
}

function parseV4(s: string): bigint {
  let v = 0n;
  for (const part of s.split('.')) v = (v << 8n) | BigInt(Number(part));
  return v;
}

function parseV6(s: string): bigint {
  let str = s;
  // Embedded IPv4 tail (::ffff:1.2.3.4).
  const lastColon = str.lastIndexOf(':');
  const tail = str.slice(lastColon + 1);
  if (tail.includes('.')) {
    const v4 = parseV4(tail);
    str = `${str.slice(0, lastColon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head = '', rest] = str.split('::');
  const h = head === '' ? [] : head.split(':');
  const t = rest === undefined || rest === '' ? [] : rest.split(':');
  const groups = rest === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  let v = 0n;
  for (const g of groups) v = (v << 16n) | BigInt(parseInt(g, 16));
  return v;
}

/** Parses an IP address; undefined when it is not a valid v4 or v6 address. */
export function parseIP(s: string): IP | undefined {
  if (typeof s !== 'string') return undefined;
  if (isIPv4(s)) return { family: 4, value: parseV4(s) };
  // Zone ids (fe80::1%eth0) are not pod or policy addresses.
  if (isIPv6(s) && !s.includes('%')) return { family: 6, value: parseV6(s) };
  return undefined;
}

export function formatIP(ip: IP): string {
  if (ip.family === 4) {
    const v = ip.value;
    return [24n, 16n, 8n, 0n].map((sh) => String((v >> sh) & 0xffn)).join('.');
  }
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((ip.value >> BigInt(i * 16)) & 0xffffn));
  // RFC 5952: compress the longest run (length >= 2) of zero groups, leftmost on ties.
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  const left = hex.slice(0, bestStart).join(':');
  const right = hex.slice(bestStart + bestLen).join(':');
  return `${left}::${right}`;
}

/** Canonical text of an address, or undefined when invalid. */
export function canonicalIP(s: string): string | undefined {
  const ip = parseIP(s);
  return ip === undefined ? undefined : formatIP(ip);
}

export type CIDRParse = { ok: true; cidr: CIDR } | { ok: false; error: string };

/**
 * Parses `addr/prefix`. Like the API server (which uses netip.ParsePrefix), a
 * prefix with host bits set is accepted and its host bits are cleared.
 */
export function parseCIDR(s: string): CIDRParse {
  if (typeof s !== 'string' || s === '') return { ok: false, error: 'must be a valid CIDR (e.g. 10.0.0.0/16)' };
  const slash = s.indexOf('/');
  if (slash < 0) return { ok: false, error: `must be a valid CIDR, not a bare address: "${s}"` };
  const ip = parseIP(s.slice(0, slash));
  const pstr = s.slice(slash + 1);
  if (ip === undefined) return { ok: false, error: `must be a valid CIDR: bad address in "${s}"` };
  if (!/^\d{1,3}$/.test(pstr)) return { ok: false, error: `must be a valid CIDR: bad prefix length in "${s}"` };
  const prefix = Number(pstr);
  if (prefix > familyBits(ip.family))
    return { ok: false, error: `must be a valid CIDR: prefix length ${prefix} too long for IPv${ip.family}` };
  return { ok: true, cidr: { family: ip.family, base: ip.value & prefixMask(ip.family, prefix), prefix } };
}

export function prefixMask(f: Family, prefix: number): bigint {
  const bits = BigInt(familyBits(f));
  const all = (1n << bits) - 1n;
  return prefix === 0 ? 0n : (all >> (bits - BigInt(prefix))) << (bits - BigInt(prefix));
}

export function formatCIDR(c: CIDR): string {
  return `${formatIP({ family: c.family, value: c.base })}/${c.prefix}`;
}

export function cidrInterval(c: CIDR): Interval {
  const hostBits = BigInt(familyBits(c.family) - c.prefix);
  return { family: c.family, lo: c.base, hi: c.base + (1n << hostBits) - 1n };
}

export function cidrContains(c: CIDR, ip: IP): boolean {
  return c.family === ip.family && (ip.value & prefixMask(c.family, c.prefix)) === c.base;
}

/** True when `inner` lies entirely within `outer` (same family). */
export function cidrWithin(inner: CIDR, outer: CIDR): boolean {
  return (
    inner.family === outer.family &&
    inner.prefix >= outer.prefix &&
    (inner.base & prefixMask(outer.family, outer.prefix)) === outer.base
  );
}

/** Sorted, merged (disjoint, non-adjacent) intervals of one family. */
export function mergeIntervals(list: readonly Interval[]): Interval[] {
  const sorted = [...list].sort((a, b) => a.family - b.family || (a.lo < b.lo ? -1 : a.lo > b.lo ? 1 : 0));
  const out: Interval[] = [];
  for (const iv of sorted) {
    const last = out[out.length - 1];
    if (last !== undefined && last.family === iv.family && iv.lo <= last.hi + 1n) {
      if (iv.hi > last.hi) out[out.length - 1] = { family: last.family, lo: last.lo, hi: iv.hi };
    } else {
      out.push(iv);
    }
  }
  return out;
}

/** `from` minus every interval of `cut` (any order), sorted and merged. */
export function subtractIntervals(from: readonly Interval[], cut: readonly Interval[]): Interval[] {
  let cur = mergeIntervals(from);
  for (const c of mergeIntervals(cut)) {
    const next: Interval[] = [];
    for (const iv of cur) {
      if (iv.family !== c.family || c.hi < iv.lo || c.lo > iv.hi) {
        next.push(iv);
        continue;
      }
      if (c.lo > iv.lo) next.push({ family: iv.family, lo: iv.lo, hi: c.lo - 1n });
      if (c.hi < iv.hi) next.push({ family: iv.family, lo: c.hi + 1n, hi: iv.hi });
    }
    cur = next;
  }
  return cur;
}

/**
 * nft text of one set element for an interval: an address, a prefix when the
 * interval is exactly one, otherwise `lo-hi`.
 */
/** A dotted quad from its number (0..2^32-1): formatIP without bigint, for hot loops. */
export function formatV4(n: number): string {
  return `${Math.floor(n / 16777216) % 256}.${Math.floor(n / 65536) % 256}.${Math.floor(n / 256) % 256}.${n % 256}`;
}

export function formatIntervalElement(iv: Interval): string {
  const lo = formatIP({ family: iv.family, value: iv.lo });
  if (iv.lo === iv.hi) return lo;
  const size = iv.hi - iv.lo + 1n;
  if ((size & (size - 1n)) === 0n && (iv.lo & (size - 1n)) === 0n) {
    let bits = 0;
    while (1n << BigInt(bits) < size) bits++;
    return `${lo}/${familyBits(iv.family) - bits}`;
  }
  return `${lo}-${formatIP({ family: iv.family, value: iv.hi })}`;
}

/** The fewest CIDRs that cover exactly one interval (aligned blocks, lowest first). */
export function intervalCIDRs(iv: Interval): CIDR[] {
  const bits = familyBits(iv.family);
  const out: CIDR[] = [];
  let lo = iv.lo;
  while (lo <= iv.hi) {
    let k = 0;
    while (k < bits && (lo & ((1n << BigInt(k + 1)) - 1n)) === 0n && lo + (1n << BigInt(k + 1)) - 1n <= iv.hi) k++;
    out.push({ family: iv.family, base: lo, prefix: bits - k });
    lo += 1n << BigInt(k);
  }
  return out;
}
