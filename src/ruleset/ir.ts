// The compiled ruleset of one node as plain data: what the compiler produces,
// what the renderer prints and what compile tests assert on. It sits beneath
// both (see docs/architecture.md): neither imports the other. Everything is
// already sorted; rendering is a straight walk.
import type { ReadonlyList } from '../model/list.ts';
import type { Interval } from '../model/ip.ts';
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
  | { readonly kind: 'l4proto'; readonly proto: Proto }
  /** `meta l4proto tcp th dport 80` (or a range, `1000-2000`): a tier identity's folded decision (compile/tiers.ts). */
  | { readonly kind: 'l4port'; readonly proto: Proto; readonly port: PortKey }
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
  /** Like a decision map's `goto`: the chain's `return` goes back past this chain (a folded tier decision, compile/tiers.ts). */
  | { readonly kind: 'goto'; readonly chain: string }
  /** `ip saddr vmap @map`: the verdict comes from the map. */
  | { readonly kind: 'vmap'; readonly family: Family; readonly field: AddrField; readonly map: string }
  /**
   * A tier decision lookup (compile/tiers.ts): `ip daddr . meta l4proto . th dport vmap @map`
   * (key 'port'), `ip daddr . meta l4proto vmap @map` ('proto'), `ip daddr vmap @map` ('addr').
   */
  | {
      readonly kind: 'decisionVmap';
      readonly family: Family;
      readonly field: AddrField;
      readonly key: DecisionKey;
      readonly map: string;
    }
  /** Back to the calling chain (a Pass: the next tier decides). */
  | { readonly kind: 'return' }
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
 * that direction (identities.ts), or a tier's (tiers.ts);
 * rule: one rule of a policy (KUBE-NWPLCY-<policy>-<dir>-<index>): its
 * counter and action, reached from a tier's decision maps (tiers.ts) or an
 * identity's allow maps (identities.ts);
 * tally: counts (and logs) one local pod's staged verdict changes in one
 * direction (compile/staged.ts); tally-lookup: a direction's local address to
 * its tally chain (for the shared chains of the shadow path).
 */
export type ChainRole = 'base' | 'pod' | 'policy' | 'peers' | 'lookup' | 'rule' | 'tally' | 'tally-lookup';

/**
 * What a rule chain counts for (role 'rule'): the policy rule whose decided
 * connections its counter holds. The agent exports these counters
 * (nftnp_policy_rule_connections_total) with these labels; nft never sees them.
 */
export interface CountedRule {
  /** The policy's kind, e.g. `NetworkPolicy`, `ClusterNetworkPolicy`. */
  readonly kind: string;
  /** '' for cluster-scoped policies. */
  readonly namespace: string;
  readonly policy: string;
  /** The rule's name when it has one (ClusterNetworkPolicy), else its index in its direction. */
  readonly rule: string;
  readonly direction: Direction;
  /** `Allow` (allow-list kinds), or a tiered rule's action: `Accept`, `Deny`, `Pass`. */
  readonly action: string;
}

export interface Chain {
  readonly name: string;
  readonly role: ChainRole;
  /** Only for rule chains: the rule their counter counts for. */
  readonly counts?: CountedRule;
  /** Only for base chains (policy accept). */
  readonly base: BaseHook | undefined;
  readonly comment: string | undefined;
  readonly rules: readonly Rule[];
  /**
   * Part of the staged policies' shadow path (compile/staged.ts): present
   * only while a staged policy selects a local pod, so a base chain marked so
   * comes and goes in incremental updates (nft/update.ts).
   */
  readonly shadow?: true;
}

export type SetType =
  | 'ipv4_addr'
  | 'ipv6_addr'
  | 'inet_proto . inet_service'
  | 'ipv4_addr . inet_proto . inet_service'
  | 'ipv6_addr . inet_proto . inet_service'
  | 'ipv4_addr . inet_proto'
  | 'ipv6_addr . inet_proto'
  | 'inet_proto';

/** The element type of a family's address sets and verdict maps. */
export function addressType(f: Family): 'ipv4_addr' | 'ipv6_addr' {
  return f === 4 ? 'ipv4_addr' : 'ipv6_addr';
}

/** The element type of a family's named-port sets (destination address . protocol . port). */
export function namedPortType(f: Family): `${'ipv4_addr' | 'ipv6_addr'} . inet_proto . inet_service` {
  return `${addressType(f)} . inet_proto . inet_service`;
}

// Set and map elements are values; src/nft prints them (`10.0.0.0/24`,
// `10.0.0.5 . tcp . 80-90 comment "..."`).

export type Proto = 'tcp' | 'udp' | 'sctp';

/**
 * An address: canonical text (the model's form, as in Pod.ips), or, in
 * interval sets and maps, an interval of addresses (printed as an address, a
 * prefix or a range).
 */
export type AddressKey = string | Interval;

/** A port, or an interval of ports (both ends included; printed `lo-hi` even when they are equal). */
export type PortKey = number | { readonly lo: number; readonly hi: number };

/** An element's key: its parts in the order of the set type's concatenation (see keyKindOf). */
export type ElementKey =
  /** `ipv4_addr` / `ipv6_addr` */
  | { readonly kind: 'addr'; readonly addr: AddressKey }
  /** `inet_proto . inet_service` */
  | { readonly kind: 'proto-port'; readonly proto: Proto; readonly port: PortKey }
  /** `ipv4_addr . inet_proto . inet_service` */
  | { readonly kind: 'addr-proto-port'; readonly addr: AddressKey; readonly proto: Proto; readonly port: PortKey }
  /** `ipv4_addr . inet_proto` */
  | { readonly kind: 'addr-proto'; readonly addr: AddressKey; readonly proto: Proto }
  /** `inet_proto` */
  | { readonly kind: 'proto'; readonly proto: Proto };

export type ElementKind = ElementKey['kind'];

/** The key form of a set type. */
export function keyKindOf(t: SetType): ElementKind {
  switch (t) {
    case 'ipv4_addr':
    case 'ipv6_addr':
      return 'addr';
    case 'inet_proto . inet_service':
      return 'proto-port';
    case 'ipv4_addr . inet_proto . inet_service':
    case 'ipv6_addr . inet_proto . inet_service':
      return 'addr-proto-port';
    case 'ipv4_addr . inet_proto':
    case 'ipv6_addr . inet_proto':
      return 'addr-proto';
    case 'inet_proto':
      return 'proto';
  }
}

/** A set element: its key and an optional comment (already sanitized, like every comment of the IR). */
export type SetElement = ElementKey & { readonly comment?: string };

export interface NamedSet {
  readonly name: string;
  readonly type: SetType;
  readonly interval: boolean;
  /** Keys of the form keyKindOf(type), sorted and (for interval sets) non-overlapping. */
  /** A split identity's set (compile/peer-split.ts) is a ChunkedList: a patch copies the chunks it touches. */
  readonly elements: ReadonlyList<SetElement>;
  readonly comment: string | undefined;
  /**
   * Only for an identity split out of a pod peer map (compile/peer-split.ts):
   * its addresses jump to `chain` (a rule after the map's lookup says so).
   */
  readonly split?: { readonly direction: Direction; readonly family: Family; readonly chain: string };
  /**
   * Only for the sets of a pod peer map's held-out addresses (nft/recent-peers.ts),
   * empty in every compile: the gate (`chain` undefined) or one identity's.
   */
  readonly recent?: { readonly direction: Direction; readonly family: Family; readonly chain: string | undefined };
}

export interface MapElement {
  /** Canonical pod address (dispatch, peer maps) or an address interval (range maps). */
  readonly key: AddressKey;
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
 * chain of its peer identity (pod chains; see compile/identities.ts);
 * tier-peers: the same for a tier's identities, `goto` (compile/tiers.ts: a
 * pod address's identity includes the ranges holding it, so the range map
 * is not consulted after a hit);
 * tally: local pod address -> `goto` its tally chain (compile/staged.ts).
 */
export type MapKind = 'dispatch' | 'peers' | 'tier-peers' | 'tally';

export interface VerdictMap {
  readonly name: string;
  readonly kind: MapKind;
  /** Only for tier-peers: which tier. */
  readonly tier?: 'admin' | 'baseline';
  readonly family: Family;
  readonly direction: Direction;
  readonly interval: boolean;
  /** A patched pod peer map (compile/peer-split.ts) is a ChunkedList: a patch copies the chunks it touches. */
  readonly elements: ReadonlyList<MapElement>;
  /** Part of the staged shadow path: comes and goes with it (see Chain.shadow), matched by name in updates. */
  readonly shadow?: true;
}

/**
 * What a decision map is keyed by. Keyed by the local address (the shared
 * layout of compile/tiers.ts): local address . protocol . port ('port'),
 * local address . protocol ('proto'), local address ('addr'). Per class of
 * local pods: protocol . port ('l4port'), protocol ('l4proto'), and the
 * remote address to its identity's chain ('peer').
 */
export type DecisionKey = 'port' | 'proto' | 'addr' | 'l4port' | 'l4proto' | 'peer';

export type DecisionVerdict =
  /** To a tiered rule's chain (KUBE-NWPLCY-...), which counts and decides. */
  | { readonly kind: 'goto'; readonly chain: string }
  /** No rule of the tier matches: the next tier decides. */
  | { readonly kind: 'return' };

export interface DecisionElement {
  /** Of the map's decisionKeyType: `10.0.0.5 . tcp . 80`, `10.0.0.5 . tcp . 1000-2000`, `10.0.0.5 . tcp`, `10.0.0.5`. */
  readonly key: Extract<ElementKey, { readonly kind: 'addr' | 'addr-proto-port' | 'addr-proto' | 'proto-port' | 'proto' }>;
  readonly verdict: DecisionVerdict;
  /** Already sanitized; the allow maps of identities.ts name every rule allowing the element. */
  readonly comment?: string;
}

/**
 * What one tier identity decides (compile/tiers.ts): local address, protocol
 * and port to the first matching rule of the tier; or what one peer identity
 * allows (compile/identities.ts: the allow maps), to the chain of the first
 * allowing rule, which counts and accepts. Like sets, these come and
 * go with policies and local pods (not fixed per node like VerdictMap).
 */
export interface DecisionMap {
  readonly name: string;
  readonly family: Family;
  readonly key: DecisionKey;
  readonly interval: boolean;
  /** Sorted by key; non-overlapping. */
  readonly elements: readonly DecisionElement[];
  readonly comment: string | undefined;
}

/** The part of a decision element after its local address: protocol and port, protocol, or nothing (see DecisionBlock). */
export interface DecisionTail {
  readonly proto: Proto | undefined;
  /** Only with a protocol. */
  readonly port: PortKey | undefined;
  readonly verdict: DecisionVerdict;
}

/**
 * Elements as a cross product: every address with every tail, addresses
 * outer (`10.0.0.5 . tcp . 80`, `10.0.0.5 . tcp`, `10.0.0.5`). The shared
 * tier layout (compile/tiers.ts) decides alike for the local pods of one
 * class, so its maps are a few such blocks: render writes their text without
 * an element object per address, and `elements` lists them on first read.
 */
export interface DecisionBlock {
  readonly addrs: readonly string[];
  readonly tails: readonly DecisionTail[];
}

/**
 * A decision map whose elements are listed on first read, from a compact form
 * (a getter of the class: a copy, `{ ...m, elements }`, is a plain map).
 */
abstract class LazyDecisionMap implements DecisionMap {
  readonly name: string;
  readonly family: Family;
  readonly key: DecisionKey;
  readonly interval: boolean;
  readonly comment: string | undefined;
  #elements: readonly DecisionElement[] | undefined;

  constructor(fields: Omit<DecisionMap, 'elements'>) {
    this.name = fields.name;
    this.family = fields.family;
    this.key = fields.key;
    this.interval = fields.interval;
    this.comment = fields.comment;
  }

  get elements(): readonly DecisionElement[] {
    return (this.#elements ??= this.list());
  }

  protected abstract list(): readonly DecisionElement[];
}

/** A decision map built from blocks. */
class BlockDecisionMap extends LazyDecisionMap {
  readonly blocks: readonly DecisionBlock[];

  constructor(fields: Omit<DecisionMap, 'elements'>, blocks: readonly DecisionBlock[]) {
    super(fields);
    this.blocks = blocks;
  }

  protected list(): readonly DecisionElement[] {
    return this.blocks.flatMap((b) => b.addrs.flatMap((addr) => b.tails.map((t) => blockElement(addr, t))));
  }
}

/**
 * Remote address -> verdict as two columns (the per-class tier layout's peer
 * maps, compile/tiers.ts: tens of thousands of elements at 100k pods, whose
 * verdicts are a few objects shared by many addresses). Key 'peer'; in
 * address order.
 */
export interface DecisionColumns {
  readonly addrs: readonly string[];
  readonly verdicts: readonly DecisionVerdict[];
}

/** A decision map built from columns. */
class ColumnDecisionMap extends LazyDecisionMap {
  readonly columns: DecisionColumns;

  constructor(fields: Omit<DecisionMap, 'elements'>, columns: DecisionColumns) {
    super(fields);
    this.columns = columns;
  }

  protected list(): readonly DecisionElement[] {
    const { addrs, verdicts } = this.columns;
    return addrs.map((addr, i) => ({ key: { kind: 'addr', addr }, verdict: verdicts[i]! }));
  }
}

/** A map's columns, when it was built from them. */
export function decisionColumns(m: DecisionMap): DecisionColumns | undefined {
  return m instanceof ColumnDecisionMap ? m.columns : undefined;
}

/** A decision map whose elements are these columns (address i -> verdict i), listed as elements only when read. */
export function columnDecisionMap(fields: Omit<DecisionMap, 'elements'>, columns: DecisionColumns): DecisionMap {
  return new ColumnDecisionMap(fields, columns);
}

/** A map's blocks, when it was built from them. */
export function decisionBlocks(m: DecisionMap): readonly DecisionBlock[] | undefined {
  return m instanceof BlockDecisionMap ? m.blocks : undefined;
}

/** A decision map whose elements are these blocks, listed as elements only when read. */
export function blockDecisionMap(fields: Omit<DecisionMap, 'elements'>, blocks: readonly DecisionBlock[]): DecisionMap {
  return new BlockDecisionMap(fields, blocks);
}

function blockElement(addr: string, t: DecisionTail): DecisionElement {
  if (t.proto === undefined) return { key: { kind: 'addr', addr }, verdict: t.verdict };
  if (t.port === undefined) return { key: { kind: 'addr-proto', addr, proto: t.proto }, verdict: t.verdict };
  return { key: { kind: 'addr-proto-port', addr, proto: t.proto, port: t.port }, verdict: t.verdict };
}

/** How many elements a decision map holds (without listing a block map's). */
export function decisionSize(m: DecisionMap): number {
  const columns = decisionColumns(m);
  if (columns !== undefined) return columns.addrs.length;
  const blocks = decisionBlocks(m);
  if (blocks === undefined) return m.elements.length;
  let n = 0;
  for (const b of blocks) n += b.addrs.length * b.tails.length;
  return n;
}

/** The key type of a decision map. */
export function decisionKeyType(f: Family, key: DecisionKey): SetType {
  const a = addressType(f);
  switch (key) {
    case 'port':
      return `${a} . inet_proto . inet_service`;
    case 'proto':
      return `${a} . inet_proto`;
    case 'addr':
    case 'peer':
      return a;
    case 'l4port':
      return 'inet_proto . inet_service';
    case 'l4proto':
      return 'inet_proto';
  }
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
  /** The tiers' decision maps (compile/tiers.ts); empty without ClusterNetworkPolicies. */
  readonly decisions: readonly DecisionMap[];
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
  decisions: readonly DecisionMap[] = [],
  /** A set's element count without listing its elements (the compiler knows it for its lazy peer sets). */
  sizeOf: (s: NamedSet) => number = (s) => s.elements.length,
): Pick<RulesetStats, 'chains' | 'rules' | 'sets' | 'maps' | 'elements'> {
  // Indexed: thousands of chains with tiered policies, in code run once per compile.
  let rules = 0;
  for (let i = 0; i < chains.length; i++) rules += chains[i]!.rules.length;
  let elements = 0;
  for (let i = 0; i < sets.length; i++) elements += sizeOf(sets[i]!);
  for (let i = 0; i < maps.length; i++) elements += maps[i]!.elements.length;
  for (let i = 0; i < decisions.length; i++) elements += decisionSize(decisions[i]!);
  return { chains: chains.length, rules, sets: sets.length, maps: maps.length + decisions.length, elements };
}
