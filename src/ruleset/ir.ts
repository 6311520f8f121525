// The compiled ruleset of one node as plain data: what the compiler produces,
// what the renderer prints and what compile tests assert on. It sits beneath
// both (see docs/architecture.md): neither imports the other. Everything is
// already sorted; rendering is a straight walk.
import type { Direction, Family } from '../model/types.ts';

export interface RulesetStats {
  readonly chains: number;
  readonly rules: number;
  readonly sets: number;
  readonly maps: number;
  /** Elements of sets and maps together. */
  readonly elements: number;
  /** Active pods scheduled on the node. */
  readonly localPods: number;
  /** Policies selecting at least one local pod. */
  readonly policies: number;
}

export type AddrField = 'saddr' | 'daddr';

export type Match =
  | { readonly kind: 'ctState'; readonly states: readonly ('established' | 'related')[] }
  | { readonly kind: 'icmpv6Types'; readonly types: readonly string[] }
  | { readonly kind: 'l4proto'; readonly proto: 'tcp' }
  /** `ip saddr @set` / `ip6 daddr @set` */
  | { readonly kind: 'addrSet'; readonly family: Family; readonly field: AddrField; readonly set: string }
  /** `meta l4proto . th dport @set` */
  | { readonly kind: 'portSet'; readonly set: string }
  /** `ip daddr . meta l4proto . th dport @set` */
  | { readonly kind: 'namedPortSet'; readonly family: Family; readonly set: string }
  /** `ip saddr . meta l4proto . th dport @set` (egress) / `ip daddr ...` (ingress): the local pod, protocol and port. */
  | { readonly kind: 'localPortSet'; readonly family: Family; readonly field: AddrField; readonly set: string }
  /**
   * `fib daddr type local` / `fib saddr type != local`: the address is (not)
   * one the node itself holds, whatever its interface.
   */
  | { readonly kind: 'fibLocal'; readonly field: AddrField; readonly local: boolean }
  /** `limit name "x"`: true while the named limit (a table object) has budget left. */
  | { readonly kind: 'limit'; readonly name: string };

export type Verdict =
  | { readonly kind: 'accept' }
  | { readonly kind: 'drop' }
  | { readonly kind: 'reject'; readonly with: 'tcp reset' | 'icmpx port-unreachable' }
  | { readonly kind: 'jump'; readonly chain: string }
  /** `ip saddr vmap @map`: the verdict comes from the map. */
  | { readonly kind: 'vmap'; readonly family: Family; readonly field: AddrField; readonly map: string }
  /** Not a verdict: copies the packet's headers to an NFLOG group and goes on with the next rule. */
  | { readonly kind: 'log'; readonly group: number; readonly prefix: string; readonly snaplen: number };

export interface Rule {
  readonly matches: readonly Match[];
  readonly counter: boolean;
  readonly verdict: Verdict;
  readonly comment: string | undefined;
}

export interface BaseHook {
  readonly hook: 'forward' | 'input';
  /** Offset from the `filter` priority (0 = `priority filter`). */
  readonly priority: number;
}

/**
 * policy: one policy direction's rules (the per-policy form of compileRules);
 * peers: what one peer identity may reach (the rendered form, identities.ts);
 * lookup: a direction's peer map lookups, jumped to from every pod chain of
 * that direction (identities.ts).
 */
export type ChainRole = 'base' | 'pod' | 'policy' | 'peers' | 'lookup';

export interface Chain {
  readonly name: string;
  readonly role: ChainRole;
  /** Only for base chains (policy accept). */
  readonly base: BaseHook | undefined;
  readonly comment: string | undefined;
  readonly rules: readonly Rule[];
}

export type SetType =
  | 'ipv4_addr'
  | 'ipv6_addr'
  | 'inet_proto . inet_service'
  | 'ipv4_addr . inet_proto . inet_service'
  | 'ipv6_addr . inet_proto . inet_service';

/** The element type of a family's address sets and verdict maps. */
export function addressType(f: Family): 'ipv4_addr' | 'ipv6_addr' {
  return f === 4 ? 'ipv4_addr' : 'ipv6_addr';
}

/** The element type of a family's named-port sets (destination address . protocol . port). */
export function namedPortType(f: Family): `${'ipv4_addr' | 'ipv6_addr'} . inet_proto . inet_service` {
  return `${addressType(f)} . inet_proto . inet_service`;
}

export interface NamedSet {
  readonly name: string;
  readonly type: SetType;
  readonly interval: boolean;
  /** nft element text, sorted and (for interval sets) non-overlapping. */
  readonly elements: readonly string[];
  readonly comment: string | undefined;
}

export interface MapElement {
  /** Canonical pod address (dispatch, peer maps) or interval element text (range maps). */
  readonly key: string;
  /**
   * Dispatch maps: `goto` target; undefined = `accept`: a known local pod
   * nothing isolates in this direction (only listed when unknown local
   * endpoints are dropped). Peer maps: `jump` target (never undefined).
   */
  readonly chain: string | undefined;
}

/**
 * dispatch: local pod address -> `goto` its KUBE-POD-FW chain (base chains);
 * peers: remote address (or, with `interval`, address range) -> `jump` to the
 * chain of its peer identity (pod chains; see compile/identities.ts).
 */
export type MapKind = 'dispatch' | 'peers';

export interface VerdictMap {
  readonly name: string;
  readonly kind: MapKind;
  readonly family: Family;
  readonly direction: Direction;
  readonly interval: boolean;
  readonly elements: readonly MapElement[];
}

/** A named `limit` object of the table (`rate N/second burst M packets`). */
export interface NamedLimit {
  readonly name: string;
  readonly ratePerSecond: number;
  readonly burst: number;
}

export interface CompiledRuleset {
  readonly table: string;
  readonly comment: string;
  readonly node: string;
  /**
   * The local pod CIDR sets, then the rules' sets in order of first use;
   * each set once, however many rules share it.
   */
  readonly sets: readonly NamedSet[];
  /** Peer maps, then dispatch maps. */
  readonly maps: readonly VerdictMap[];
  /** Named limits (the deny path's log limit when --log-denied is on). */
  readonly limits: readonly NamedLimit[];
  /** Policy or peer-identity chains, then pod chains, then base chains. */
  readonly chains: readonly Chain[];
  readonly stats: RulesetStats;
}

/** How many chains, rules, sets, maps and elements these objects hold. */
export function countObjects(
  sets: readonly NamedSet[],
  maps: readonly VerdictMap[],
  chains: readonly Chain[],
): Pick<RulesetStats, 'chains' | 'rules' | 'sets' | 'maps' | 'elements'> {
  let rules = 0;
  for (const c of chains) rules += c.rules.length;
  let elements = 0;
  for (const s of sets) elements += s.elements.length;
  for (const m of maps) elements += m.elements.length;
  return { chains: chains.length, rules, sets: sets.length, maps: maps.length, elements };
}
