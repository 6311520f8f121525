// Set and map elements as nft prints them: the IR holds them as values
// (ruleset/ir.ts ElementKey); this is the only place they become text.
//   address            10.0.0.5, fd00::5
//   address interval   10.0.0.0/24 (aligned power of two), 10.0.0.0-10.0.0.9, 10.0.0.5 (one address)
//   port (interval)    80, 1000-2000
//   concatenation      10.0.0.5 . tcp . 80
//   comment            ... comment "shop/web ingress[0]"
import { formatIntervalElement, formatV4 } from '../model/ip.ts';
import type { Interval } from '../model/ip.ts';
import { sanitizeComment } from '../ruleset/ids.ts';
import type { AddressKey, ElementKey, NamedSet, PortKey, SetElement } from '../ruleset/ir.ts';

/** Same text as formatIntervalElement (model/ip.ts), without bigint arithmetic for IPv4. */
export function formatInterval(iv: Interval): string {
  if (iv.family !== 4) return formatIntervalElement(iv);
  const lo = Number(iv.lo);
  const hi = Number(iv.hi);
  if (lo === hi) return formatV4(lo);
  const size = hi - lo + 1;
  // Power-of-two size and aligned start: a prefix (sizes reach 2^32: no int32 bit tricks).
  const bits = Math.round(Math.log2(size));
  if (2 ** bits === size && lo % size === 0) return `${formatV4(lo)}/${32 - bits}`;
  return `${formatV4(lo)}-${formatV4(hi)}`;
}

export function addressText(a: AddressKey): string {
  return typeof a === 'string' ? a : formatInterval(a);
}

export function portText(p: PortKey): string {
  return typeof p === 'number' ? String(p) : `${p.lo}-${p.hi}`;
}

/** `10.0.0.5`, `tcp . 80`, `10.0.0.5 . tcp . 1000-2000`, `10.0.0.5 . tcp`. */
export function keyText(k: ElementKey): string {
  switch (k.kind) {
    case 'addr':
      return addressText(k.addr);
    case 'proto-port':
      return `${k.proto} . ${portText(k.port)}`;
    case 'addr-proto-port':
      return `${addressText(k.addr)} . ${k.proto} . ${portText(k.port)}`;
    case 'addr-proto':
      return `${addressText(k.addr)} . ${k.proto}`;
    case 'proto':
      return k.proto;
  }
}

/** A set element with its comment, as in `elements = { ... }` and `add/delete element`. */
export function elementText(e: SetElement): string {
  const key = keyText(e);
  return e.comment === undefined ? key : `${key} comment "${sanitizeComment(e.comment)}"`;
}

/** Every element of a set as text, in order (for logs, tests and benchmarks). */
export function elementTexts(s: Pick<NamedSet, 'elements'>): string[] {
  return s.elements.map(elementText);
}

export function sameAddress(a: AddressKey, b: AddressKey): boolean {
  if (typeof a === 'string' || typeof b === 'string') return a === b;
  return a.lo === b.lo && a.hi === b.hi && a.family === b.family;
}

function samePort(a: PortKey, b: PortKey): boolean {
  if (typeof a === 'number' || typeof b === 'number') return a === b;
  return a.lo === b.lo && a.hi === b.hi;
}

/** Equal keys print equal text (and, within one set type, the other way round). */
export function sameKey(a: ElementKey, b: ElementKey): boolean {
  switch (a.kind) {
    case 'addr':
      return b.kind === 'addr' && sameAddress(a.addr, b.addr);
    case 'proto-port':
      return b.kind === 'proto-port' && a.proto === b.proto && samePort(a.port, b.port);
    case 'addr-proto-port':
      return b.kind === 'addr-proto-port' && a.proto === b.proto && samePort(a.port, b.port) && sameAddress(a.addr, b.addr);
    case 'addr-proto':
      return b.kind === 'addr-proto' && a.proto === b.proto && sameAddress(a.addr, b.addr);
    case 'proto':
      return b.kind === 'proto' && a.proto === b.proto;
  }
}

/** Same key and same comment: the same element text. */
export function sameElement(a: SetElement, b: SetElement): boolean {
  return a.comment === b.comment && sameKey(a, b);
}
