// A packet walked through a CompiledRuleset as nftables would walk the text
// render makes of it: base chains in priority order, rules in order, `jump`
// (come back), `goto` (no coming back), `return` and the chain's end (back to
// the last jump; in a base chain, its policy: accept), verdict maps and sets
// looked up by the packet's fields. For compile tests that check a ruleset's
// decisions against the reference evaluator without a kernel (the datapath
// tests do it with one). Only the first packet of a connection (no conntrack
// state), TCP, UDP or SCTP; a `log` and a `limit` do not stop the walk.
import { parseIP } from '../../src/model/ip.ts';
import type { Family } from '../../src/model/types.ts';
import type {
  AddressKey,
  Chain,
  CompiledRuleset,
  DecisionElement,
  DecisionMap,
  ElementKey,
  Match,
  NamedSet,
  PortKey,
  Proto,
  Rule,
  VerdictMap,
} from '../../src/ruleset/ir.ts';

export interface Packet {
  readonly family: Family;
  readonly saddr: string;
  readonly daddr: string;
  readonly proto: Proto;
  readonly dport: number;
}

export type Outcome = 'accept' | 'drop' | 'reject';

export interface WalkOptions {
  /** Addresses the node holds (`fib ... type local`). */
  readonly local?: readonly string[];
  /** The base chains the packet traverses, in order (default: every base chain of the `forward` hook, by priority). */
  readonly hooks?: readonly string[];
}

const value = (text: string): bigint => {
  const ip = parseIP(text);
  if (ip === undefined) throw new Error(`not an address: ${text}`);
  return ip.value;
};

function addrMatches(key: AddressKey, addr: string): boolean {
  if (typeof key === 'string') return value(key) === value(addr);
  const v = value(addr);
  return key.lo <= v && v <= key.hi;
}

function portMatches(key: PortKey, port: number): boolean {
  return typeof key === 'number' ? key === port : key.lo <= port && port <= key.hi;
}

function keyMatches(k: ElementKey, addr: string | undefined, p: Packet): boolean {
  switch (k.kind) {
    case 'addr':
      return addr !== undefined && addrMatches(k.addr, addr);
    case 'proto':
      return k.proto === p.proto;
    case 'proto-port':
      return k.proto === p.proto && portMatches(k.port, p.dport);
    case 'addr-proto':
      return addr !== undefined && addrMatches(k.addr, addr) && k.proto === p.proto;
    case 'addr-proto-port':
      return addr !== undefined && addrMatches(k.addr, addr) && k.proto === p.proto && portMatches(k.port, p.dport);
  }
}

type Step =
  | { readonly kind: 'continue' }
  | { readonly kind: 'jump' | 'goto'; readonly chain: string }
  | { readonly kind: 'return' }
  | { readonly kind: Outcome };

/** Walks `p` through `rs`: accept unless a base chain drops or rejects it. */
export function walk(rs: CompiledRuleset, p: Packet, opts: WalkOptions = {}): Outcome {
  const chains = new Map<string, Chain>(rs.chains.map((c) => [c.name, c]));
  const sets = new Map<string, NamedSet>(rs.sets.map((s) => [s.name, s]));
  const maps = new Map<string, VerdictMap>(rs.maps.map((m) => [m.name, m]));
  const decisions = new Map<string, DecisionMap>(rs.decisions.map((m) => [m.name, m]));
  const local = new Set((opts.local ?? []).map((a) => value(a)));
  const field = (f: 'saddr' | 'daddr'): string => (f === 'saddr' ? p.saddr : p.daddr);
  const familyOk = (f: Family): boolean => f === p.family;

  const set = (name: string): NamedSet => {
    const s = sets.get(name);
    if (s === undefined) throw new Error(`no set ${name}`);
    return s;
  };
  const matches = (m: Match): boolean => {
    switch (m.kind) {
      case 'ctState':
      case 'icmpv6Types':
        return false;
      case 'l4proto':
        return m.proto === p.proto;
      case 'l4port':
        return m.proto === p.proto && portMatches(m.port, p.dport);
      case 'addrSet':
        return familyOk(m.family) && set(m.set).elements.some((e) => keyMatches(e, field(m.field), p));
      case 'portSet':
        return set(m.set).elements.some((e) => keyMatches(e, undefined, p));
      case 'namedPortSet':
        return familyOk(m.family) && set(m.set).elements.some((e) => keyMatches(e, p.daddr, p));
      case 'localPortSet':
        return familyOk(m.family) && set(m.set).elements.some((e) => keyMatches(e, field(m.field), p));
      case 'fibLocal':
        return local.has(value(field(m.field))) === m.local;
      case 'limit':
        return true;
    }
  };
  const fromMap = (m: VerdictMap, addr: string): Step => {
    const e = m.elements.find((x) => addrMatches(x.key, addr));
    if (e === undefined) return { kind: 'continue' };
    if (e.chain === undefined) return { kind: 'accept' };
    return { kind: m.kind === 'peers' ? 'jump' : 'goto', chain: e.chain };
  };
  const fromDecision = (m: DecisionMap, addr: string): Step => {
    const e: DecisionElement | undefined = m.elements.find((x) => keyMatches(x.key, addr, p));
    if (e === undefined) return { kind: 'continue' };
    return e.verdict.kind === 'return' ? { kind: 'return' } : { kind: 'goto', chain: e.verdict.chain };
  };
  const step = (r: Rule): Step => {
    if (!r.matches.every(matches)) return { kind: 'continue' };
    const v = r.verdict;
    switch (v.kind) {
      case 'accept':
      case 'drop':
        return { kind: v.kind };
      case 'reject':
        return { kind: 'reject' };
      case 'jump':
      case 'goto':
        return { kind: v.kind, chain: v.chain };
      case 'return':
        return { kind: 'return' };
      case 'vmap': {
        if (!familyOk(v.family)) return { kind: 'continue' };
        const m = maps.get(v.map);
        if (m === undefined) throw new Error(`no map ${v.map}`);
        return fromMap(m, field(v.field));
      }
      case 'decisionVmap': {
        if (!familyOk(v.family)) return { kind: 'continue' };
        const m = decisions.get(v.map);
        if (m === undefined) throw new Error(`no decision map ${v.map}`);
        return fromDecision(m, field(v.field));
      }
      case 'log':
        return { kind: 'continue' };
    }
  };

  const bases =
    opts.hooks?.map((n) => chains.get(n)!) ??
    rs.chains.filter((c) => c.base?.hook === 'forward').sort((a, b) => (a.base?.priority ?? 0) - (b.base?.priority ?? 0));
  for (const base of bases) {
    // The frames to come back to: a chain and the rule after the jump.
    const stack: { chain: Chain; at: number }[] = [];
    let chain = base;
    let at = 0;
    let outcome: Outcome | undefined;
    for (let steps = 0; outcome === undefined; steps++) {
      if (steps > 10_000) throw new Error(`no verdict after 10000 rules (a loop?) in ${chain.name}`);
      const r = chain.rules[at];
      const s: Step = r === undefined ? { kind: 'return' } : step(r);
      at++;
      switch (s.kind) {
        case 'continue':
          break;
        case 'jump':
        case 'goto': {
          const next = chains.get(s.chain);
          if (next === undefined) throw new Error(`no chain ${s.chain}`);
          if (s.kind === 'jump') stack.push({ chain, at });
          chain = next;
          at = 0;
          break;
        }
        case 'return': {
          const back = stack.pop();
          if (back === undefined) outcome = 'accept';
          else ({ chain, at } = back);
          break;
        }
        default:
          outcome = s.kind;
      }
    }
    if (outcome !== 'accept') return outcome;
  }
  return 'accept';
}
