// The ordered tiers (ClusterNetworkPolicy Admin and Baseline; src/kinds/kind.ts)
// in nftables, with a per-packet cost that does not grow with the number of
// policies or rules: the peer-identity idea of identities.ts, generalized from
// "the union of what is allowed" to "the first rule that matches".
//
// A remote address's tier identity is the set of sources (the peer
// definitions of the tier's rules: pods, nodes, networks, everything) that
// contain it, plus, for egress named ports, the ports it serves by name.
// Addresses with the same identity meet the same rules, so what the tier
// decides for them depends only on the local address, protocol and port.
// For each identity that decides anything, the compiler walks the rules in
// evaluation order once per local address and protocol and cuts the port
// space into pieces, each decided by its first matching rule (or by none).
// The result is a few verdict maps per identity:
//
//   admin-ingress:           ip saddr vmap @admin-ingress-peers-v4    10.244.2.7 : goto KUBE-PEERS-<cid>-IN
//                            ip saddr vmap @admin-ingress-ranges-v4   0.0.0.0-9.255.255.255 : goto KUBE-PEERS-<cid2>-IN
//   KUBE-PEERS-<cid>-IN:     ip daddr . meta l4proto . th dport vmap @tdec4-<cid>    10.244.1.5 . tcp . 22 : goto KUBE-NWPLCY-<p>-IN-0
//                            ip daddr . meta l4proto . th dport vmap @tdecr4-<cid>   (ranges of more than 16 ports)
//                            ip daddr . meta l4proto vmap @tdecp4-<cid>              10.244.1.5 . tcp : goto KUBE-NWPLCY-<p>-IN-2
//                            ip daddr vmap @tdeca4-<cid>                             (protocols without ports: ICMP, ...)
//   KUBE-NWPLCY-<p>-IN-0:    counter drop comment "... ingress[0] ...: Deny"
//
// That is the shared layout: one peer map per tier, direction and family,
// decisions keyed by the local address, so a decision map holds an element
// per local pod the identity's rules apply to. Local pods that the same
// policies select (a class) decide alike, so a class with many local pods and
// rules naming few remote addresses gets its own layout instead: its own
// lookup chain `admin-ingress-<class>` (the pod chain jumps to it), its own
// peer maps (`tpeer4-<class>`, `tpeerr4-<class>`: remote address or range ->
// goto its identity's chain for this class), and decisions keyed by protocol
// and port only (`meta l4proto . th dport vmap`, `meta l4proto vmap`, then a
// jump for protocols without ports). Same lookups per packet; the elements
// grow with classes x identities instead of local pods x identities.
// With tierLayout 'auto', perClass() picks per class by the element counts
// (rules naming most of the cluster stay shared, where each address is listed
// once). An identity of a class with few decisions (most: a port and a range)
// has them as rules of its chain instead of maps (foldedDecisions). The
// default is 'per-class' (DEFAULT_TIER_LAYOUT): at 100k pods its compile +
// render costs no more than the shared layout's, for half the text, which nft
// -f loads in about a third of the time (docs/benchmarks.md). Its classes
// share one identity table per tier, direction and family (sharedTable: each
// remote address's sources found once; a class's identities are its
// projection, project()), and its peer maps are columns of addresses and
// shared verdicts (ruleset/ir.ts columnDecisionMap).
//
// The most specific map is looked up first; each (local address, protocol)
// has its most common decision in the `proto` map and only the pieces that
// differ from it in the port maps, so the maps stay small. `return` in a map
// (a piece no rule matches, beside a protocol default) and the `counter
// return` of a Pass rule go back to the pod chain, which goes on with the
// next tier. A pod address's identity includes the ranges that hold it and
// its lookup is a `goto`, so the range map is only consulted for addresses no
// pod or node source holds. Each rule of a tiered policy is one chain,
// KUBE-NWPLCY-<policy>-<dir>-<index>, with its counter and action: `nft list
// chain` of it says what the rule does and how often it decided. With
// --log-denied a Deny rule's chain logs first, like a pod chain's deny path
// (deny-path.ts: same limit and group), with prefix `cnp:<policy>:<IN|EG>:<index>`.
import { cidrInterval, familyBits, mergeIntervals, parseCIDR } from '../model/ip.ts';
import type { Interval } from '../model/ip.ts';
import { formatSelector, selectorMatcher, selectorMatches } from '../model/selector.ts';
import { DIRECTIONS, FAMILIES, PROTOCOLS } from '../model/types.ts';
import type { ClusterState, Direction, Family, Pod, Protocol } from '../model/types.ts';
import { rangeSegments } from './range-sweep.ts';
import type { RangeSegment } from './range-sweep.ts';
import type { OrderedTier, TieredPeer, TieredPolicy, TieredRule } from '../kinds/kind.ts';
import {
  decisionMapName,
  peersChainName,
  policyKeyId,
  sanitizeComment,
  shortHash,
  tierDenyLogPrefix,
  tierClassLookupChainName,
  tierLookupChainName,
  tierPeerMapName,
  tierRuleChainName,
} from '../ruleset/ids.ts';
import { blockDecisionMap, columnDecisionMap } from '../ruleset/ir.ts';
import type {
  Chain,
  DecisionBlock,
  DecisionColumns,
  DecisionElement,
  DecisionKey,
  DecisionMap,
  DecisionTail,
  DecisionVerdict,
  MapElement,
  Match,
  Proto,
  Rule,
  VerdictMap,
} from '../ruleset/ir.ts';
import { DEFAULT_TIER_LAYOUT } from '../ruleset/options.ts';
import type { RenderOptions } from '../ruleset/options.ts';
import type { ClusterIndex } from './cluster-index.ts';
import { denyLogRule } from './deny-path.ts';
import type { PeerResolver } from './peers.ts';
import { nftProto } from './ports.ts';
import { chunksOf } from '../model/list.ts';
import type { ReadonlyList } from '../model/list.ts';
import { CHUNK, warmIPs } from './pod-walk.ts';
import { parseV4 } from './v4.ts';

export const ORDERED_TIERS: readonly OrderedTier[] = ['admin', 'baseline'];
const MAX_PORT = 65535;
/** Pieces of up to this many ports go port by port into the hash map (see identities.ts: pipapo costs more per packet). */
const SPLIT_RANGE_UP_TO = 16;

export interface TierContext {
  readonly state: ClusterState;
  readonly idx: ClusterIndex;
  readonly peers: PeerResolver;
  /** The node's active pods, sorted. */
  readonly local: readonly Pod[];
  readonly o: RenderOptions;
}

export interface Tiers {
  /** Rule chains, identity chains and lookup chains. */
  readonly chains: readonly Chain[];
  /** The tier-peers maps: all of them whenever the cluster has tiered policies (they are fixed objects), else none. */
  readonly maps: readonly VerdictMap[];
  readonly decisions: readonly DecisionMap[];
  /** The lookup chain a local pod's chain jumps to for `tier` in `d`: undefined when no rule of the tier applies to it. */
  lookup(pod: Pod, tier: OrderedTier, d: Direction): string | undefined;
  /** Tiered policies selecting at least one local pod. */
  readonly policies: number;
}

interface Entry {
  readonly tier: OrderedTier;
  readonly policy: TieredPolicy;
  readonly rule: TieredRule;
  readonly index: number;
  readonly direction: Direction;
  readonly chain: string;
  /** Keys of the sources its peers name, each once. */
  readonly sources: readonly string[];
  /** Its position in evaluation order (policy order, then rule order). */
  readonly order: number;
  /** Its policy's position among the policies selecting a local pod (LocalClass.holds). */
  readonly policyIndex: number;
  /** `goto` its chain (one object for all its decision elements). */
  readonly verdict: DecisionVerdict;
  /** Names a port by name on the local side (ingress): the decision depends on the local pod's ports. */
  readonly localNamed: boolean;
  /** Names a port by name (either direction): its ports depend on the pods. */
  readonly named: boolean;
  /** Without named ports: per protocol, the port intervals it matches (portsOf), computed on first use. */
  readonly fixedPorts: { -readonly [P in Protocol]?: readonly Interval2[] };
}

/** A port interval, both ends included. */
type Interval2 = readonly [number, number];

type Source =
  /** Explicit addresses (pods, nodes): the hash map. */
  | { readonly kind: 'hash'; readonly key: string; readonly about: string; readonly addrs: (f: Family) => readonly Addr[] }
  /** Address ranges (networks, everything): the interval map. */
  | { readonly kind: 'range'; readonly key: string; readonly about: string; readonly ivs: (f: Family) => readonly Interval[] };

interface Addr {
  readonly text: string;
  readonly value: bigint;
  /** The pod it belongs to (named ports), if it is a pod address. */
  readonly pod: Pod | undefined;
}

/** A port piece of one protocol and who decides it (undefined: no rule matches). */
interface Piece {
  readonly lo: number;
  readonly hi: number;
  readonly entry: Entry | undefined;
}

const byValue = (a: { value: bigint }, b: { value: bigint }): number => (a.value < b.value ? -1 : a.value > b.value ? 1 : 0);

function selectorText(sel: Parameters<typeof formatSelector>[0]): string {
  return aboutSelector(formatSelector(sel));
}

const aboutSelector = (formatted: string): string => (formatted === '{}' ? 'all' : formatted);

function sourceOf(peer: TieredPeer, ctx: TierContext): Source {
  switch (peer.kind) {
    case 'pods': {
      const ns = formatSelector(peer.namespaceSelector);
      const ps = formatSelector(peer.podSelector);
      const key = `pods ${ns} ${ps}`;
      let list: ReadonlyList<Pod> | undefined;
      const addrs = (f: Family): Addr[] => {
        // Memoized and invalidated by pod churn in the resolver (node-compiler.ts); the selectors' text as formatted here.
        list ??= ctx.peers.podsOf(
          { kind: 'pods', namespaceSelector: peer.namespaceSelector, podSelector: peer.podSelector },
          '',
          {
            ns,
            pod: ps,
          },
        );
        const out: Addr[] = [];
        // By chunks, their addresses warmed first (pod-walk.ts).
        const lists: (readonly string[])[] = new Array<readonly string[]>(Math.min(CHUNK, list.length));
        for (const pods of chunksOf(list))
          for (let from = 0; from < pods.length; from += CHUNK) {
            const to = Math.min(pods.length, from + CHUNK);
            warmIPs(pods, from, to, lists);
            for (let k = 0; k < to - from; k++) {
              const pod = pods[from + k]!;
              const ips = lists[k]!;
              for (let i = 0; i < ips.length; i++) {
                const text = ips[i]!;
                // IPv4 without the parsed IP object (and skipped without a bigint when IPv6 is asked for).
                const v4 = parseV4(text);
                if (v4 !== undefined) {
                  if (f === 4) out.push({ text, value: BigInt(v4), pod });
                  continue;
                }
                const ip = ctx.idx.ip(text);
                if (ip !== undefined && ip.family === f) out.push({ text, value: ip.value, pod });
              }
            }
          }
        return out;
      };
      return {
        kind: 'hash',
        key,
        about: `pods(${aboutSelector(ps)}) in ns(${aboutSelector(ns)})`,
        addrs,
      };
    }
    case 'nodes': {
      const key = `nodes ${formatSelector(peer.nodeSelector)}`;
      const addrs = (f: Family): Addr[] => {
        const out: Addr[] = [];
        for (const n of ctx.state.nodes) {
          if (!selectorMatches(peer.nodeSelector, n.labels ?? {})) continue;
          for (const text of n.addresses) {
            const ip = ctx.idx.ip(text);
            if (ip !== undefined && ip.family === f) out.push({ text, value: ip.value, pod: undefined });
          }
        }
        return out;
      };
      return { kind: 'hash', key, about: `nodes(${selectorText(peer.nodeSelector)})`, addrs };
    }
    case 'networks': {
      const cidrs = [...new Set(peer.cidrs)].sort();
      const ivs = (f: Family): Interval[] => {
        const out: Interval[] = [];
        for (const c of cidrs) {
          const p = parseCIDR(c);
          if (p.ok && p.cidr.family === f) out.push(cidrInterval(p.cidr));
        }
        return mergeIntervals(out);
      };
      return { kind: 'range', key: `nets ${cidrs.join(',')}`, about: cidrs.join(' '), ivs };
    }
    case 'all':
      return {
        kind: 'range',
        key: 'all',
        about: 'anywhere',
        ivs: (f) => [{ family: f, lo: 0n, hi: (1n << BigInt(familyBits(f))) - 1n }],
      };
  }
}

function familyOf(text: string, idx: ClusterIndex): Family | undefined {
  return parseV4(text) !== undefined ? 4 : idx.ip(text)?.family;
}

/** A source whose addresses are resolved once per family (each tier and direction asks). */
function memoized(s: Source): Source {
  if (s.kind === 'hash') {
    let v4: readonly Addr[] | undefined;
    let v6: readonly Addr[] | undefined;
    return { ...s, addrs: (f) => (f === 4 ? (v4 ??= s.addrs(4)) : (v6 ??= s.addrs(6))) };
  }
  let v4: readonly Interval[] | undefined;
  let v6: readonly Interval[] | undefined;
  return { ...s, ivs: (f) => (f === 4 ? (v4 ??= s.ivs(4)) : (v6 ??= s.ivs(6))) };
}

/** The chain of one tiered rule: counts what it decides, then does it. */
function ruleChain(e: Entry, o: RenderOptions): Chain {
  // The chain's declaration names only the policy, direction and index (what
  // names the chain): priority, action and rule name live in the rule's
  // comment, which an incremental update can replace (a chain's cannot).
  const chainComment = sanitizeComment(`${e.policy.origin.label} ${e.direction} rule ${e.index}`);
  const what = e.rule.action === e.rule.origin.action ? '' : ` (read as ${e.rule.action}: not enforceable as written)`;
  const comment = sanitizeComment(`${e.rule.origin.description}${what}`);
  const rule = (verdict: Rule['verdict'], matches: Rule['matches'] = []): Rule => ({ matches, counter: true, verdict, comment });
  let rules: Rule[];
  switch (e.rule.action) {
    case 'Accept':
      rules = [rule({ kind: 'accept' })];
      break;
    case 'Pass':
      rules = [rule({ kind: 'return' })];
      break;
    case 'Deny':
      rules = [
        ...(o.logDenied === undefined ? [] : denyLogRule(tierDenyLogPrefix(policyKeyId(e.policy.key), e.direction, e.index), o)),
        ...(o.denyAction === 'drop'
          ? [rule({ kind: 'drop' })]
          : [
              rule({ kind: 'reject', with: 'tcp reset' }, [{ kind: 'l4proto', proto: 'tcp' }]),
              rule({ kind: 'reject', with: 'icmpx port-unreachable' }),
            ]),
      ];
      break;
  }
  const o2 = e.policy.origin;
  const counts = {
    kind: o2.kind,
    namespace: o2.namespace,
    policy: o2.name,
    rule: e.rule.origin.name || String(e.index),
    direction: e.direction,
    action: e.rule.action,
  };
  return { name: e.chain, role: 'rule', base: undefined, comment: chainComment, counts, rules };
}

/** Sorted, merged port intervals of one protocol that a rule matches for this local pod and identity. */
function portsOf(e: Entry, proto: Protocol, local: Pod, named: ReadonlyMap<string, readonly NamedPort[]>): readonly Interval2[] {
  if (e.named) return resolvePorts(e.rule.ports, e.direction, proto, local, named);
  return fixedPortsOf(e, proto);
}

/** portsOf of a rule without named ports: the same for every pod, so once per rule and protocol. */
function fixedPortsOf(e: Entry, proto: Protocol): readonly Interval2[] {
  return (e.fixedPorts[proto] ??=
    e.rule.ports === undefined ? ALL_PORTS : resolvePorts(e.rule.ports, e.direction, proto, undefined, NO_NAMED));
}

const ALL_PORTS: readonly Interval2[] = [[0, MAX_PORT]];
const NO_NAMED: ReadonlyMap<string, readonly NamedPort[]> = new Map();

/** portsOf from the rule's ports (named ports resolved on `local` or in `named`). */
function resolvePorts(
  ports: TieredRule['ports'],
  direction: Direction,
  proto: Protocol,
  local: Pod | undefined,
  named: ReadonlyMap<string, readonly NamedPort[]>,
): Interval2[] {
  if (ports === undefined) return [[0, MAX_PORT]];
  const out: [number, number][] = [];
  for (const p of ports) {
    if (p.kind === 'port') {
      if (p.protocol !== proto) continue;
      if (p.port === undefined) out.push([0, MAX_PORT]);
      else out.push([p.port, p.endPort ?? p.port]);
    } else if (direction === 'ingress') {
      // Named ports resolve on the destination: the local pod.
      for (const cp of local?.ports ?? []) if (cp.name === p.name && cp.protocol === proto) out.push([cp.port, cp.port]);
    } else {
      // Egress: on the remote pod, whose named ports are part of its identity.
      for (const np of named.get(p.name) ?? []) if (np.protocol === proto) out.push([np.port, np.port]);
    }
  }
  if (out.length < 2) return out;
  // Mostly in order already (a sort allocates its work space, thousands of times per compile).
  let sorted = true;
  for (let i = 1; i < out.length && sorted; i++)
    sorted = out[i - 1]![0] < out[i]![0] || (out[i - 1]![0] === out[i]![0] && out[i - 1]![1] <= out[i]![1]);
  if (!sorted) out.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  // Apart already (the common case): as they are.
  let apart = true;
  for (let i = 1; i < out.length && apart; i++) apart = out[i]![0] > out[i - 1]![1] + 1;
  if (apart) return out;
  const merged: [number, number][] = [];
  for (const [lo, hi] of out) {
    const last = merged[merged.length - 1];
    if (last !== undefined && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else merged.push([lo, hi]);
  }
  return merged;
}

/** First match over one protocol's port space: pieces covering 0..65535 in order. */
function partition(
  entries: readonly Entry[],
  proto: Protocol,
  local: Pod,
  named: ReadonlyMap<string, readonly NamedPort[]>,
): Piece[] {
  let uncovered: readonly Interval2[] = ALL_PORTS;
  const pieces: Piece[] = [];
  for (const e of entries) {
    if (uncovered.length === 0) break;
    const ivs = portsOf(e, proto, local, named);
    if (ivs.length === 0) continue;
    const rest: Interval2[] = [];
    for (const [a, b] of uncovered) {
      let at = a;
      for (const [lo, hi] of ivs) {
        if (hi < at || lo > b) continue;
        if (lo > at) rest.push([at, lo - 1]);
        const from = Math.max(lo, at);
        const to = Math.min(hi, b);
        pieces.push({ lo: from, hi: to, entry: e });
        at = to + 1;
        if (at > b) break;
      }
      if (at <= b) rest.push([at, b]);
    }
    uncovered = rest;
  }
  for (const [lo, hi] of uncovered) pieces.push({ lo, hi, entry: undefined });
  return pieces.sort((x, y) => x.lo - y.lo);
}

interface NamedPort {
  readonly protocol: Protocol;
  readonly port: number;
}

const RETURN: DecisionVerdict = { kind: 'return' };
const NO_PIECES: readonly Piece[] = [];

function verdictOf(e: Entry | undefined): DecisionVerdict {
  return e === undefined ? RETURN : e.verdict;
}

/** The decision elements of one identity, per map: keyed by protocol and port (a class's own maps), or blocks of local addresses with their tails (the shared maps). */
interface Decided<T> {
  readonly port: T[];
  readonly range: T[];
  readonly proto: T[];
  readonly addr: T[];
}

/** What one list of matching rules decides for one local pod: per protocol its default and the differing pieces. */
interface Decision {
  readonly protos: readonly { readonly p4: Proto; readonly best: Entry | undefined; readonly pieces: readonly Piece[] }[];
  /** Protocols without ports. */
  readonly other: Entry | undefined;
}

function decide(entries: readonly Entry[], local: Pod, named: ReadonlyMap<string, readonly NamedPort[]>): Decision {
  const only = entries.length === 1 ? entries[0]! : undefined;
  const one = only !== undefined && !only.named ? decideOne(only) : undefined;
  if (one !== undefined) return one;
  const protos = PROTOCOLS.map((proto) => {
    // No rule names a port of this protocol: no rule decides any of it (what partition would find).
    if (entries.every((e) => !e.named && fixedPortsOf(e, proto).length === 0))
      return { p4: nftProto(proto), best: undefined, pieces: NO_PIECES };
    const pieces = partition(entries, proto, local, named);
    // The protocol's default: the decision covering most ports (ties: no match, then evaluation order).
    const cover = new Map<Entry | undefined, number>();
    for (const p of pieces) cover.set(p.entry, (cover.get(p.entry) ?? 0) + p.hi - p.lo + 1);
    let best: Entry | undefined;
    let bestCount = -1;
    for (const [e, n] of [...cover].sort((a, b) => (a[0]?.order ?? -1) - (b[0]?.order ?? -1))) {
      if (n > bestCount) [best, bestCount] = [e, n];
    }
    return { p4: nftProto(proto), best, pieces: pieces.filter((p) => p.entry !== best) };
  });
  // Protocols without ports (ICMP, ...): the first rule matching every protocol.
  return { protos, other: entries.find((e) => e.rule.ports === undefined) };
}

/**
 * decide() for one rule without named ports (most identities of a class:
 * one source, one rule): its ports or the rest, whichever covers more
 * ports, is the protocol's default (a tie: no match), the other the pieces.
 */
function decideOne(e: Entry): Decision | undefined {
  const protos: Decision['protos'][number][] = [];
  for (const proto of PROTOCOLS) {
    const p4 = nftProto(proto);
    const ivs = fixedPortsOf(e, proto);
    if (ivs.length === 0) {
      protos.push({ p4, best: undefined, pieces: NO_PIECES });
      continue;
    }
    let covered = 0;
    for (const [lo, hi] of ivs) {
      // Out of the port space (normalize rejects these): partition's general walk.
      if (lo < 0 || hi < lo || hi > MAX_PORT) return undefined;
      covered += hi - lo + 1;
    }
    if (covered <= MAX_PORT + 1 - covered) {
      protos.push({ p4, best: undefined, pieces: ivs.map(([lo, hi]) => ({ lo, hi, entry: e })) });
      continue;
    }
    // The rule's default: the gaps between its intervals (sorted, merged) are the pieces.
    const pieces: Piece[] = [];
    let at = 0;
    for (const [lo, hi] of ivs) {
      if (lo > at) pieces.push({ lo: at, hi: lo - 1, entry: undefined });
      at = hi + 1;
    }
    if (at <= MAX_PORT) pieces.push({ lo: at, hi: MAX_PORT, entry: undefined });
    protos.push({ p4, best: e, pieces });
  }
  return { protos, other: e.rule.ports === undefined ? e : undefined };
}

/**
 * A decision's tails (ruleset/ir.ts DecisionTail: what follows the local
 * address in the shared maps' keys), per map; `other` is the rule for
 * protocols without ports.
 */
function tailsOf(d: Decision): { readonly tails: Decided<DecisionTail>; readonly other: Entry | undefined } {
  const tails: Decided<DecisionTail> = { port: [], range: [], proto: [], addr: [] };
  for (const { p4: proto, best, pieces } of d.protos) {
    if (best !== undefined) tails.proto.push({ proto, port: undefined, verdict: best.verdict });
    for (const p of pieces) {
      const verdict = verdictOf(p.entry);
      if (p.hi - p.lo < SPLIT_RANGE_UP_TO) {
        for (let port = p.lo; port <= p.hi; port++) tails.port.push({ proto, port, verdict });
      } else tails.range.push({ proto, port: { lo: p.lo, hi: p.hi }, verdict });
    }
  }
  if (d.other !== undefined) tails.addr.push({ proto: undefined, port: undefined, verdict: d.other.verdict });
  return { tails, other: d.other };
}

/** A class's own decision elements: keyed by protocol and port only (protocols without ports are the caller's jump). */
function classElements(tails: Decided<DecisionTail>): Decided<DecisionElement> {
  const keyed = (t: DecisionTail): DecisionElement => ({
    key: t.port === undefined ? { kind: 'proto', proto: t.proto! } : { kind: 'proto-port', proto: t.proto!, port: t.port },
    verdict: t.verdict,
  });
  return { port: tails.port.map(keyed), range: tails.range.map(keyed), proto: tails.proto.map(keyed), addr: [] };
}

/**
 * Up to this many decisions of a class's identity are rules of its chain
 * instead of maps (most identities decide one port and one range: two
 * one-element maps otherwise, each a kernel object with its declaration).
 */
const FOLD_UP_TO = 4;

/**
 * A class's decisions as rules, in the order the maps are looked up (single
 * ports, ranges, then each protocol's default; the pieces of one protocol
 * are disjoint): `meta l4proto tcp th dport 80 goto KUBE-NWPLCY-...`. `goto`
 * as in the maps: a Pass rule's `return` goes back past the identity chain.
 * Undefined when there are more (then maps).
 */
function foldedDecisions(decided: Decided<DecisionElement>): Rule[] | undefined {
  const all = [...decided.port, ...decided.range, ...decided.proto];
  if (all.length > FOLD_UP_TO) return undefined;
  const rules: Rule[] = [];
  for (const e of all) {
    const k = e.key;
    const match: Match | undefined =
      k.kind === 'proto-port'
        ? { kind: 'l4port', proto: k.proto, port: k.port }
        : k.kind === 'proto'
          ? { kind: 'l4proto', proto: k.proto }
          : undefined;
    if (match === undefined) return undefined;
    const verdict: Rule['verdict'] = e.verdict.kind === 'goto' ? { kind: 'goto', chain: e.verdict.chain } : { kind: 'return' };
    rules.push({ matches: [match], counter: false, verdict, comment: undefined });
  }
  return rules;
}

interface Identity {
  readonly key: string;
  readonly tokens: readonly string[];
}

/** The index of the segment holding `value`, or -1. */
function segmentIndex(segs: readonly RangeSegment[], value: bigint): number {
  let lo = 0;
  let hi = segs.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const s = segs[mid]!;
    if (value < s.iv.lo) hi = mid - 1;
    else if (value > s.iv.hi) lo = mid + 1;
    else return mid;
  }
  return -1;
}

const NAMED = 'named:';

/**
 * A pod's part of an identity key: a token per named port the rules name
 * (in `namedOrder`) that the pod has, with its protocols and numbers; each
 * token's ports recorded in `namedPorts`.
 */
function namedKey(
  pod: Pod,
  namedOrder: readonly string[],
  namedPorts: Map<string, { name: string; ports: NamedPort[] }>,
): string {
  let named = '';
  for (const name of namedOrder) {
    const ports = pod.ports
      .filter((cp) => cp.name === name)
      .map((cp) => ({ protocol: cp.protocol, port: cp.port }))
      .sort((a, b) => (a.protocol < b.protocol ? -1 : a.protocol > b.protocol ? 1 : a.port - b.port));
    if (ports.length === 0) continue;
    const token = `${NAMED}${name}=${ports.map((p) => `${nftProto(p.protocol)}/${p.port}`).join(',')}`;
    namedPorts.set(token, { name, ports });
    named = `${named}|${token}`;
  }
  return named;
}

/** Local pods that the same rules of one tier and direction apply to: they meet every remote identity alike. */
interface LocalClass {
  /** Stable across unrelated edits: the ids of the policies selecting its pods, sorted (and the pods' ports when a rule names a local port). */
  readonly key: string;
  /** In evaluation order. */
  readonly entries: readonly Entry[];
  /** By policyIndex: whether the policy applies to the class's pods (an entry of the tier and direction is the class's when its policy's is 1). */
  readonly holds: Uint8Array;
  /** policyIndex of the policies applying to it. */
  readonly policies: readonly number[];
  readonly pods: Pod[];
}

/** The remote side of one family: each address's identity and the identities' tokens. */
interface IdentityTable {
  /** Sorted by key. */
  readonly identities: readonly Identity[];
  /** Hash-source addresses and their identity's key, in address order. */
  readonly hashIds: readonly { readonly addr: Addr; readonly key: string }[];
  /** Range segments and their identity's key, in address order. */
  readonly segments: readonly { readonly iv: Interval; readonly key: string }[];
  /** Egress named-port tokens: the ports a remote pod serves by that name. */
  readonly namedPorts: ReadonlyMap<string, { readonly name: string; readonly ports: readonly NamedPort[] }>;
}

/**
 * The tier identities of the remote addresses the given sources hold: the
 * sources holding each address (hash, then the range segment holding it),
 * plus the ports it serves by the names egress rules use.
 */
function identityTable(
  used: Iterable<string>,
  sources: ReadonlyMap<string, Source>,
  f: Family,
  namedNames: ReadonlySet<string>,
): IdentityTable {
  const ranges: [string, readonly Interval[]][] = [];
  // Address -> its hash sources' keys, `|`-joined: sources are visited in key order, so the list comes sorted.
  const hashTokens = new Map<string, { addr: Addr; key: string }>();
  for (const key of [...used].sort()) {
    const s = sources.get(key)!;
    if (s.kind === 'range') ranges.push([key, s.ivs(f)]);
    else
      for (const a of s.addrs(f)) {
        const h = hashTokens.get(a.text);
        if (h === undefined) hashTokens.set(a.text, { addr: a, key });
        else {
          h.key = `${h.key}|${key}`;
          if (a.pod !== undefined && h.addr.pod === undefined) h.addr = a;
        }
      }
  }
  const segments = rangeSegments(ranges, f);
  const namedPorts = new Map<string, { name: string; ports: NamedPort[] }>();
  const namedOrder = [...namedNames].sort();
  const identities = new Map<string, Identity>();
  const hashIds: { addr: Addr; key: string }[] = [];
  for (const h of hashTokens.values()) {
    // The canonical key: hash tokens, range tokens, named tokens (each part sorted).
    const seg = segmentIndex(segments, h.addr.value);
    const pod = h.addr.pod;
    const named = pod !== undefined && namedOrder.length > 0 ? namedKey(pod, namedOrder, namedPorts) : '';
    const key = `${h.key}#${seg < 0 ? '' : segments[seg]!.key}#${named}`;
    if (!identities.has(key)) {
      const tokens = [
        ...h.key.split('|'),
        ...(seg < 0 ? [] : segments[seg]!.tokens),
        ...(named === '' ? [] : named.slice(1).split('|')),
      ];
      identities.set(key, { key, tokens });
    }
    hashIds.push({ addr: h.addr, key });
  }
  const segs = segments.map((sg) => {
    const key = `#${sg.key}#`;
    if (!identities.has(key)) identities.set(key, { key, tokens: sg.tokens });
    return { iv: sg.iv, key };
  });
  return {
    identities: [...identities.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)),
    hashIds: hashIds.sort((a, b) => byValue(a.addr, b.addr)),
    segments: segs,
    namedPorts,
  };
}

/**
 * The per-class layout's identities of one tier, direction and family, for
 * all its classes at once: each remote address's sources computed once (over
 * the union of the sources the classes' rules name), grouped by what decides
 * its identity in any class (its sources, each with the named ports of the
 * pod it came with, and its range segment). A class's table (project) is the
 * projection of the groups onto its own sources: the same identities,
 * segments and addresses identityTable would build from them alone.
 */
interface SharedTable {
  /** Source keys, sorted: a source's index is its position. */
  readonly keys: readonly string[];
  readonly index: ReadonlyMap<string, number>;
  readonly ranges: readonly boolean[];
  /** The range segments over all range sources, tokens as source indices. */
  readonly segments: readonly { readonly iv: Interval; readonly srcs: readonly number[] }[];
  readonly groups: readonly Group[];
  /** Per source index: the groups holding it. */
  readonly groupsOf: readonly (readonly number[])[];
  /** Hash addresses in address order, and their group. */
  readonly addrs: readonly Addr[];
  readonly groupOf: Int32Array;
  readonly namedPorts: ReadonlyMap<string, { readonly name: string; readonly ports: readonly NamedPort[] }>;
  /** Per group: its identity in a class holding all its sources and no range (the common case), made by the first such class. */
  readonly whole: (Identity | undefined)[];
}

/** Addresses meeting the same sources (each with the same pod-ness and named ports) in the same global segment. */
interface Group {
  /** Source indices, ascending. */
  readonly srcs: readonly number[];
  /** Per source: the named-port tokens (`|`-prefixed, '' without) of the pod it lists the address for; null when not a pod. */
  readonly named: readonly (string | null)[];
  /** The global segment holding the addresses, or -1. */
  readonly seg: number;
}

function sharedTable(
  used: ReadonlySet<string>,
  sources: ReadonlyMap<string, Source>,
  f: Family,
  namedNames: ReadonlySet<string>,
): SharedTable {
  const keys = [...used].sort();
  const ranges = keys.map((k) => sources.get(k)!.kind === 'range');
  const rangeInput: [string, readonly Interval[]][] = [];
  const index = new Map<string, number>();
  keys.forEach((k, i) => index.set(k, i));
  const namedOrder = [...namedNames].sort();
  const namedPorts = new Map<string, { name: string; ports: NamedPort[] }>();
  const namedMemo = new Map<Pod, string>();
  const namedOf = (pod: Pod): string => {
    let named = namedMemo.get(pod);
    if (named !== undefined) return named;
    named = namedKey(pod, namedOrder, namedPorts);
    namedMemo.set(pod, named);
    return named;
  };
  // Address text -> its sources (in key order) and the pods' named ports they list it with.
  const held = new Map<string, { addr: Addr; srcs: number[]; named: (string | null)[] }>();
  keys.forEach((key, i) => {
    const s = sources.get(key)!;
    if (s.kind === 'range') {
      rangeInput.push([String(i), s.ivs(f)]);
      return;
    }
    for (const a of s.addrs(f)) {
      const named = a.pod === undefined ? null : namedOrder.length === 0 ? '' : namedOf(a.pod);
      const h = held.get(a.text);
      if (h === undefined) held.set(a.text, { addr: a, srcs: [i], named: [named] });
      else {
        // A source listing an address twice names it twice, as in identityTable.
        h.srcs.push(i);
        h.named.push(named);
      }
    }
  });
  // Tokens are indices here (their order is not the keys' order: mapped back and sorted below).
  const segments = rangeSegments(rangeInput, f).map((sg) => ({
    iv: sg.iv,
    srcs: sg.tokens.map(Number).sort((a, b) => a - b),
  }));
  const all = [...held.values()].sort((a, b) => byValue(a.addr, b.addr));
  const groups: Group[] = [];
  const groupIndex = new Map<string, number>();
  const groupOf = new Int32Array(all.length);
  const rangeSegs = segments.map((sg) => ({ iv: sg.iv, tokens: [], key: '' }));
  all.forEach((h, n) => {
    const seg = segmentIndex(rangeSegs, h.addr.value);
    const gk = `${h.srcs.join(',')}/${h.named.map((x) => (x === null ? '-' : x)).join(',')}/${seg}`;
    let g = groupIndex.get(gk);
    if (g === undefined) {
      groupIndex.set(gk, (g = groups.length));
      groups.push({ srcs: h.srcs, named: h.named, seg });
    }
    groupOf[n] = g;
  });
  const groupsOf: number[][] = keys.map(() => []);
  groups.forEach((g, gi) => {
    for (const i of g.srcs) groupsOf[i]!.push(gi);
  });
  const addrs = all.map((h) => h.addr);
  return { keys, index, ranges, segments, groups, groupsOf, addrs, groupOf, namedPorts, whole: new Array(groups.length) };
}

/** A class's identities: the shared table projected onto the sources its rules name. */
interface ClassTable {
  /** Sorted by key. */
  readonly identities: readonly Identity[];
  readonly segments: readonly { readonly iv: Interval; readonly key: string }[];
  readonly namedPorts: IdentityTable['namedPorts'];
  /** The peer map's elements: the hash addresses its sources hold, in address order, to their identity's chain (where it has one). */
  hashElements(chainOf: ReadonlyMap<string, string>): DecisionColumns;
}

function project(t: SharedTable, lists: readonly (readonly number[])[]): ClassTable {
  // The class's sources as indices (it names few of the table's), ascending: key order, as identityTable visits them.
  const mine = new Uint8Array(t.keys.length);
  const own: number[] = [];
  for (const l of lists)
    for (const i of l) {
      if (mine[i] === 1) continue;
      mine[i] = 1;
      own.push(i);
    }
  own.sort((a, b) => a - b);
  const identities = new Map<string, Identity>();
  // The class's segments: the global ones' tokens cut to its sources, adjacent equal ones merged, empty ones left out.
  const segOf = new Int32Array(t.segments.length).fill(-1);
  const segs: { iv: { family: Family; lo: bigint; hi: bigint }; tokens: string[]; key: string }[] = [];
  t.segments.forEach((sg, gi) => {
    const tokens: string[] = [];
    for (const i of sg.srcs) if (mine[i]) tokens.push(t.keys[i]!);
    if (tokens.length === 0) return;
    tokens.sort();
    const key = tokens.join('|');
    const last = segs[segs.length - 1];
    if (last !== undefined && last.key === key && last.iv.hi + 1n === sg.iv.lo) last.iv.hi = sg.iv.hi;
    else segs.push({ iv: { ...sg.iv }, tokens, key });
    segOf[gi] = segs.length - 1;
  });
  // Each group's identity in this class (undefined: none of its sources is the class's).
  const keyOf: (string | undefined)[] = new Array<string | undefined>(t.groups.length);
  const seen = new Uint8Array(t.groups.length);
  for (const i of own) {
    if (t.ranges[i]) continue;
    for (const gi of t.groupsOf[i]!) {
      if (seen[gi] === 1) continue;
      seen[gi] = 1;
      const g = t.groups[gi]!;
      // Classes meeting all of a group's sources, outside every range, share its identity (its key made once).
      const whole = g.seg < 0 && g.srcs.every((si) => mine[si] === 1);
      const known = whole ? t.whole[gi] : undefined;
      if (known !== undefined) {
        if (!identities.has(known.key)) identities.set(known.key, known);
        keyOf[gi] = known.key;
        continue;
      }
      const hashKeys: string[] = [];
      // Named ports of the first source listing it with a pod (identityTable keeps the first pod address).
      let named: string | null | undefined;
      g.srcs.forEach((si, j) => {
        if (!mine[si]) return;
        hashKeys.push(t.keys[si]!);
        const n = g.named[j]!;
        if (named === undefined || (named === null && n !== null)) named = n;
      });
      const seg = g.seg < 0 ? -1 : segOf[g.seg]!;
      const nm = named ?? '';
      const hk = hashKeys.join('|');
      const key = `${hk}#${seg < 0 ? '' : segs[seg]!.key}#${nm}`;
      let id = identities.get(key);
      if (id === undefined)
        identities.set(
          key,
          (id = {
            key,
            tokens: [...hashKeys, ...(seg < 0 ? [] : segs[seg]!.tokens), ...(nm === '' ? [] : nm.slice(1).split('|'))],
          }),
        );
      if (whole) t.whole[gi] = id;
      keyOf[gi] = key;
    }
  }
  const segments = segs.map((sg) => {
    const key = `#${sg.key}#`;
    if (!identities.has(key)) identities.set(key, { key, tokens: sg.tokens });
    return { iv: sg.iv, key };
  });
  return {
    identities: [...identities.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)),
    segments,
    namedPorts: t.namedPorts,
    hashElements(chainOf) {
      // One verdict object per group, columns instead of an element per address: elements are many, groups few.
      const byGroup = keyOf.map((key): DecisionVerdict | undefined => {
        const chain = key === undefined ? undefined : chainOf.get(key);
        return chain === undefined ? undefined : { kind: 'goto', chain };
      });
      const addrs: string[] = [];
      const verdicts: DecisionVerdict[] = [];
      for (let n = 0; n < t.addrs.length; n++) {
        const verdict = byGroup[t.groupOf[n]!];
        if (verdict === undefined) continue;
        addrs.push(t.addrs[n]!.text);
        verdicts.push(verdict);
      }
      return { addrs, verdicts };
    },
  };
}

/** The rules naming a source of this identity, in evaluation order; and the egress named ports it serves. */
function identityEntries(
  id: Identity,
  entriesBySource: ReadonlyMap<string, readonly Entry[]>,
  table: Pick<IdentityTable, 'namedPorts'>,
): { entries: readonly Entry[]; named: ReadonlyMap<string, readonly NamedPort[]> } {
  let named: Map<string, NamedPort[]> | undefined;
  let only: readonly Entry[] | undefined;
  let lists = 0;
  for (const t of id.tokens) {
    const np = table.namedPorts.get(t);
    if (np !== undefined) (named ??= new Map()).set(np.name, [...(named.get(np.name) ?? []), ...np.ports]);
    const l = entriesBySource.get(t);
    if (l !== undefined && l.length > 0) {
      only = l;
      lists++;
    }
  }
  // One source's rules: its list is already in evaluation order, without repeats.
  if (lists <= 1) return { entries: only ?? [], named: named ?? NO_NAMED };
  const seen = new Set<Entry>();
  for (const t of id.tokens) for (const e of entriesBySource.get(t) ?? []) seen.add(e);
  return { entries: [...seen].sort((a, b) => a.order - b.order), named: named ?? NO_NAMED };
}

/**
 * Which layout a class gets (per family, summed): its own maps when the
 * remote addresses its rules name (what its peer maps would hold) are fewer
 * than its local addresses times its rules (what keying the shared maps'
 * decisions by each local address costs it, at least); else the shared maps.
 * A few remote pods and many local ones: per class. Rules naming most of the
 * cluster: shared, where every address is listed once per tier and direction.
 */
function perClass(cls: LocalClass, sources: ReadonlyMap<string, Source>, ctx: TierContext): boolean {
  const layout = ctx.o.tierLayout ?? DEFAULT_TIER_LAYOUT;
  if (layout !== 'auto') return layout === 'per-class';
  const used = new Set<string>();
  for (const e of cls.entries) for (const k of e.sources) used.add(k);
  let remote = 0;
  let localAddrs = 0;
  for (const f of FAMILIES) {
    let here = 0;
    for (const pod of cls.pods) for (const text of pod.ips) if (ctx.idx.ip(text)?.family === f) here++;
    if (here === 0) continue;
    localAddrs += here;
    for (const k of used) {
      const s = sources.get(k)!;
      remote += s.kind === 'hash' ? s.addrs(f).length : 2 * s.ivs(f).length;
    }
  }
  return remote <= (localAddrs - 1) * cls.entries.length;
}

/** The tiers of one node: see the top of this file. */
export function compileTiers(ctx: TierContext, policies: readonly TieredPolicy[]): Tiers {
  const none: Tiers = { chains: [], maps: [], decisions: [], lookup: () => undefined, policies: 0 };
  if (policies.length === 0) return none;

  const sources = new Map<string, Source>();
  const entries: Entry[] = [];
  /** Per local pod: per tier and direction, the policies that apply to it (their rules of that direction), in evaluation order. */
  const applicable = new Map<
    Pod,
    Map<string, { readonly index: number; readonly id: string; readonly entries: readonly Entry[] }[]>
  >();
  let relevant = 0;
  let order = 0;
  const nsSets = new Map<string, ReadonlySet<string>>();
  for (const p of policies) {
    const nsKey = formatSelector(p.subject.namespaceSelector);
    let namespaces = nsSets.get(nsKey);
    if (namespaces === undefined)
      nsSets.set(nsKey, (namespaces = new Set(ctx.idx.namespacesMatching(p.subject.namespaceSelector, nsKey))));
    const selects = selectorMatcher(p.subject.podSelector);
    const targets = ctx.local.filter((pod) => namespaces.has(pod.namespace) && selects(pod.labels));
    if (targets.length === 0) continue;
    relevant++;
    const pid = policyKeyId(p.key);
    for (const d of DIRECTIONS) {
      const list = d === 'ingress' ? p.ingress : p.egress;
      if (list.length === 0) continue;
      const mine: Entry[] = [];
      list.forEach((rule, index) => {
        const keys: string[] = [];
        for (const peer of rule.peers) {
          const s = sourceOf(peer, ctx);
          if (!sources.has(s.key)) sources.set(s.key, memoized(s));
          if (!keys.includes(s.key)) keys.push(s.key);
        }
        const chain = tierRuleChainName(pid, d, index);
        const e: Entry = {
          tier: p.tier,
          policy: p,
          rule,
          index,
          direction: d,
          chain,
          sources: keys,
          order: order++,
          policyIndex: relevant,
          verdict: { kind: 'goto', chain },
          localNamed: d === 'ingress' && (rule.ports ?? []).some((p) => p.kind === 'named'),
          named: (rule.ports ?? []).some((p) => p.kind === 'named'),
          fixedPorts: {},
        };
        entries.push(e);
        mine.push(e);
      });
      const k = `${p.tier} ${d}`;
      const applied = { index: relevant, id: pid, entries: mine };
      for (const pod of targets) {
        let m = applicable.get(pod);
        if (m === undefined) applicable.set(pod, (m = new Map()));
        const l = m.get(k);
        if (l === undefined) m.set(k, [applied]);
        else l.push(applied);
      }
    }
  }

  const chains: Chain[] = entries.map((e) => ruleChain(e, ctx.o));
  const identityChains: Chain[] = [];
  const lookupChains: Chain[] = [];
  const decisions: DecisionMap[] = [];
  const maps: VerdictMap[] = [];
  /** Per local pod, per tier and direction: the lookup chain its pod chain jumps to. */
  const lookups = new Map<Pod, Map<string, string>>();
  const setLookup = (pod: Pod, tier: OrderedTier, d: Direction, chain: string): void => {
    let m = lookups.get(pod);
    if (m === undefined) lookups.set(pod, (m = new Map()));
    m.set(`${tier} ${d}`, chain);
  };
  /** One identity's chain: a vmap per non-empty decision map (and a jump for protocols without ports, per class). */
  // Classes meeting the same rules decide alike (decidedTails): their elements and folded rules once per tails.
  const classElementsMemo = new Map<Decided<DecisionTail>, Decided<DecisionElement>>();
  const classElementsOf = (tails: Decided<DecisionTail>): Decided<DecisionElement> => {
    let decided = classElementsMemo.get(tails);
    if (decided === undefined) classElementsMemo.set(tails, (decided = classElements(tails)));
    return decided;
  };
  const foldedMemo = new Map<Decided<DecisionElement>, readonly Rule[] | undefined>();
  const foldedOf = (decided: Decided<DecisionElement>): readonly Rule[] | undefined => {
    if (foldedMemo.has(decided)) return foldedMemo.get(decided);
    const folded = foldedDecisions(decided);
    foldedMemo.set(decided, folded);
    return folded;
  };
  const identityChain = (
    cid: string,
    name: string,
    f: Family,
    d: Direction,
    tier: OrderedTier,
    decided: { readonly byClass: Decided<DecisionElement> } | { readonly shared: Decided<DecisionBlock> },
    /** The chain of the rule for protocols without ports. */
    other: string | undefined,
    /** Sanitized. */
    comment: string,
  ): void => {
    const field = d === 'ingress' ? 'daddr' : 'saddr';
    const folded = 'byClass' in decided ? foldedOf(decided.byClass) : undefined;
    if (folded !== undefined) {
      // Folded: the chain's rules depend on its decisions and `other` only, shared by the classes meeting them.
      identityChains.push({ name, role: 'peers', base: undefined, comment, rules: foldedRules(folded, other) });
      return;
    }
    const rules: Rule[] = [];
    const which = ['port', 'range', 'proto', 'addr'] as const;
    // Tier and chain names only: nothing to sanitize.
    const mapComment = `${tier} tier decisions of ${name}`;
    for (const w of 'byClass' in decided ? which.slice(0, 3) : which) {
      const key: DecisionKey = 'byClass' in decided ? (w === 'proto' ? 'l4proto' : 'l4port') : w === 'range' ? 'port' : w;
      const interval = w === 'range';
      const map = decisionMapName(cid, f, w);
      const fields = { name: map, family: f, key, interval, comment: mapComment };
      if ('byClass' in decided) {
        if (decided.byClass[w].length === 0) continue;
        decisions.push({ ...fields, elements: decided.byClass[w] });
      } else {
        if (decided.shared[w].length === 0) continue;
        decisions.push(blockDecisionMap(fields, decided.shared[w]));
      }
      rules.push({
        matches: [],
        counter: false,
        verdict: { kind: 'decisionVmap', family: f, field, key, map },
        comment: undefined,
      });
    }
    if (other !== undefined) rules.push(otherJump(other));
    identityChains.push({ name, role: 'peers', base: undefined, comment, rules });
  };
  /** The jump for protocols without ports, one object per rule chain. */
  const otherJumps = new Map<string, Rule>();
  const otherJump = (chain: string): Rule => {
    let r = otherJumps.get(chain);
    if (r === undefined)
      otherJumps.set(chain, (r = { matches: [], counter: false, verdict: { kind: 'jump', chain }, comment: undefined }));
    return r;
  };
  const foldedRulesMemo = new Map<readonly Rule[], Map<string | undefined, readonly Rule[]>>();
  const foldedRules = (folded: readonly Rule[], other: string | undefined): readonly Rule[] => {
    let byOther = foldedRulesMemo.get(folded);
    if (byOther === undefined) foldedRulesMemo.set(folded, (byOther = new Map()));
    let rules = byOther.get(other);
    if (rules === undefined) byOther.set(other, (rules = other === undefined ? folded : [...folded, otherJump(other)]));
    return rules;
  };
  /**
   * What a list of matching rules decides, as tails; shared by the classes
   * and identities meeting the same rules (the same list decides alike unless
   * a rule names a port, which the local pod or the identity then resolves).
   */
  const tailMemo = new Map<string, Decided<DecisionTail>>();
  /** decidedTails by the list object itself (a source's rules, met whole by many classes): no key to build. */
  const listMemo = new Map<readonly Entry[], Decided<DecisionTail>>();
  const decidedTails = (
    matching: readonly Entry[],
    local: Pod,
    named: ReadonlyMap<string, readonly NamedPort[]>,
  ): Decided<DecisionTail> => {
    const memoable = named.size === 0 && !matching.some((e) => e.localNamed);
    const hit = memoable ? listMemo.get(matching) : undefined;
    if (hit !== undefined) return hit;
    const key = memoable ? matching.map((e) => e.order).join(',') : undefined;
    let tails = key === undefined ? undefined : tailMemo.get(key);
    if (tails === undefined) {
      tails = tailsOf(decide(matching, local, named)).tails;
      if (key !== undefined) tailMemo.set(key, tails);
    }
    if (memoable) listMemo.set(matching, tails);
    return tails;
  };
  // Per identity key (the per-class layout meets one identity in many classes).
  const aboutMemo = new Map<string, string>();
  const about = (id: Identity): string => {
    let text = aboutMemo.get(id.key);
    if (text === undefined) {
      text = id.tokens.map((t) => (t.startsWith(NAMED) ? t.slice(NAMED.length) : (sources.get(t)?.about ?? t))).join(' + ');
      aboutMemo.set(id.key, text);
    }
    return text;
  };

  for (const tier of ORDERED_TIERS) {
    for (const d of DIRECTIONS) {
      const entriesBySource = new Map<string, Entry[]>();
      const namedNames = new Set<string>();
      /** By policyIndex: the sources its rules of this tier and direction name. */
      const policySources = new Map<number, string[]>();
      // Indexed loops where they run thousands of times per compile (this function runs once: no iterator is optimized away).
      for (let n = 0; n < entries.length; n++) {
        const e = entries[n]!;
        if (e.tier !== tier || e.direction !== d) continue;
        let ps = policySources.get(e.policyIndex);
        if (ps === undefined) policySources.set(e.policyIndex, (ps = []));
        for (let j = 0; j < e.sources.length; j++) {
          const k = e.sources[j]!;
          let l = entriesBySource.get(k);
          if (l === undefined) entriesBySource.set(k, (l = []));
          l.push(e);
          ps.push(k);
        }
        if (d === 'egress') for (const p of e.rule.ports ?? []) if (p.kind === 'named') namedNames.add(p.name);
      }
      // Local pods grouped by the rules that apply to them (the policies whose subject selects them).
      const classMap = new Map<string, LocalClass>();
      for (const pod of ctx.local) {
        const applied = applicable.get(pod)?.get(`${tier} ${d}`);
        if (applied === undefined) continue;
        // Grouped by the policies selecting the pod (cheap); named by their ids (stable across unrelated edits).
        const named = applied.some((a) => a.entries.some((e) => e.localNamed));
        const ports = named ? `|${JSON.stringify(pod.ports)}` : '';
        const group = `${applied.map((a) => a.index).join(',')}${ports}`;
        let cls = classMap.get(group);
        if (cls === undefined) {
          const key = `${applied
            .map((a) => a.id)
            .sort()
            .join(',')}${ports}`;
          const all = applied.flatMap((a) => a.entries);
          const holds = new Uint8Array(relevant + 1);
          for (const a of applied) holds[a.index] = 1;
          classMap.set(group, (cls = { key, entries: all, holds, policies: applied.map((a) => a.index), pods: [] }));
        }
        cls.pods.push(pod);
      }
      const shared: LocalClass[] = [];
      const own: LocalClass[] = [];
      for (const cls of classMap.values()) (perClass(cls, sources, ctx) ? own : shared).push(cls);
      // The classes of the per-class layout share one table per family: each address's sources found once.
      const ownUsed = new Set<string>();
      const ownPolicies = new Set<number>();
      for (const cls of own) for (const pi of cls.policies) ownPolicies.add(pi);
      for (const pi of ownPolicies) for (const k of policySources.get(pi) ?? []) ownUsed.add(k);
      const ownTables = new Map<Family, { readonly table: SharedTable; readonly sourcesOf: Map<number, number[]> }>();
      const ownTable = (f: Family): { readonly table: SharedTable; readonly sourcesOf: Map<number, number[]> } => {
        let t = ownTables.get(f);
        if (t === undefined)
          ownTables.set(f, (t = { table: sharedTable(ownUsed, sources, f, namedNames), sourcesOf: new Map() }));
        return t;
      };
      /** A class's sources as indices of the family's table: its policies' (each policy's once per family). */
      const classSources = (f: Family, cls: LocalClass): { readonly table: SharedTable; readonly lists: number[][] } => {
        const { table, sourcesOf } = ownTable(f);
        const lists: number[][] = [];
        for (const pi of cls.policies) {
          let l = sourcesOf.get(pi);
          if (l === undefined) sourcesOf.set(pi, (l = (policySources.get(pi) ?? []).map((k) => table.index.get(k)!)));
          lists.push(l);
        }
        return { table, lists };
      };
      // An identity's rules (and named ports) do not depend on the class: once per identity key.
      const idEntriesMemo = new Map<string, ReturnType<typeof identityEntries>>();
      /** Per identity object (one per family, shared by the classes holding all its sources): what a class meeting all its rules makes of it. */
      const wholeOf = new Map<
        Identity,
        {
          readonly skip: boolean;
          readonly decided: Decided<DecisionElement>;
          readonly other: string | undefined;
          /** Folded decisions (and the jump for protocols without ports): the chain's rules. */
          readonly rules: readonly Rule[] | undefined;
          readonly comment: string;
        }
      >();
      // An identity chain's comment names the identity, not the class: once per identity.
      const classComments = new Map<Family, Map<string, string>>();
      const classComment = (f: Family, id: Identity): string => {
        let memo = classComments.get(f);
        if (memo === undefined) classComments.set(f, (memo = new Map()));
        let text = memo.get(id.key);
        if (text === undefined) {
          text = sanitizeComment(
            `${tier} tier ${d} ${d === 'ingress' ? 'from' : 'to'} IPv${f} ${about(id)}, for one class of local pods`,
          );
          memo.set(id.key, text);
        }
        return text;
      };
      for (const cls of own) {
        // Per class: its own lookup chain and peer maps; decisions keyed by protocol and port.
        const ccid = shortHash(`tierclass\0${tier}\0${d}\0${cls.key}`);
        const lookupName = tierClassLookupChainName(tier, d, ccid);
        const lookupRules: Rule[] = [];
        for (const f of FAMILIES) {
          if (!cls.pods.some((pod) => pod.ips.some((text) => ctx.idx.ip(text)?.family === f))) continue;
          const { table: st, lists } = classSources(f, cls);
          const table = project(st, lists);
          const chainOf = new Map<string, string>();
          const holds = cls.holds;
          for (let n = 0; n < table.identities.length; n++) {
            const id = table.identities[n]!;
            let found = idEntriesMemo.get(id.key);
            if (found === undefined) idEntriesMemo.set(id.key, (found = identityEntries(id, entriesBySource, table)));
            const { entries: idEntries, named } = found;
            // All of them (the common case): the list itself, which decidedTails knows by identity.
            let all = true;
            for (let k = 0; k < idEntries.length && all; k++) all = holds[idEntries[k]!.policyIndex] === 1;
            let w = all ? wholeOf.get(id) : undefined;
            if (w === undefined) {
              const matching = all ? idEntries : idEntries.filter((e) => holds[e.policyIndex] === 1);
              if (matching.length === 0) continue;
              const tails = decidedTails(matching, cls.pods[0]!, named);
              // The rule for protocols without ports: tailsOf put its verdict (goto its chain) in `addr`.
              const addr = tails.addr[0]?.verdict;
              const other = addr?.kind === 'goto' ? addr.chain : undefined;
              const decided = classElementsOf(tails);
              const skip = decided.port.length + decided.range.length + decided.proto.length === 0 && other === undefined;
              const folded = skip ? undefined : foldedOf(decided);
              w = {
                skip,
                decided,
                other,
                rules: folded === undefined ? undefined : foldedRules(folded, other),
                comment: skip ? '' : classComment(f, id),
              };
              // Its decisions do not depend on the class's pods (no named port): the next class meeting all of it takes them.
              if (all && named.size === 0 && !idEntries.some((e) => e.localNamed)) wholeOf.set(id, w);
            }
            if (w.skip) continue;
            const cid = shortHash(`tierclass\0${tier}\0${d}\0${f}\0${cls.key}\0${id.key}`);
            const name = peersChainName(cid, d);
            chainOf.set(id.key, name);
            if (w.rules !== undefined)
              identityChains.push({ name, role: 'peers', base: undefined, comment: w.comment, rules: w.rules });
            else identityChain(cid, name, f, d, tier, { byClass: w.decided }, w.other, w.comment);
          }
          const hash = table.hashElements(chainOf);
          const ranges: DecisionElement[] = [];
          for (const sg of table.segments) {
            const chain = chainOf.get(sg.key);
            if (chain !== undefined) ranges.push({ key: { kind: 'addr', addr: sg.iv }, verdict: { kind: 'goto', chain } });
          }
          const field = d === 'ingress' ? 'saddr' : 'daddr';
          for (const [which, size, interval] of [
            ['peers', hash.addrs.length, false],
            ['ranges', ranges.length, true],
          ] as const) {
            if (size === 0) continue;
            const map = decisionMapName(ccid, f, which);
            const fields = {
              name: map,
              family: f,
              key: 'peer',
              interval,
              comment: sanitizeComment(
                `${tier} tier ${d}: remote ${interval ? 'ranges' : 'addresses'} to identities, for ${lookupName}`,
              ),
            } as const;
            decisions.push(interval ? { ...fields, elements: ranges } : columnDecisionMap(fields, hash));
            lookupRules.push({
              matches: [],
              counter: false,
              verdict: { kind: 'decisionVmap', family: f, field, key: 'peer', map },
              comment: undefined,
            });
          }
        }
        if (lookupRules.length === 0) continue;
        lookupChains.push({
          name: lookupName,
          role: 'lookup',
          base: undefined,
          comment: sanitizeComment(
            `${tier} tier, ${d} of one class of local pods: ${d === 'ingress' ? 'source' : 'destination'} address to its tier identity`,
          ),
          rules: lookupRules,
        });
        for (const pod of cls.pods) setLookup(pod, tier, d, lookupName);
      }

      // The shared layout: one peer map per tier, direction and family; decisions keyed by the local address.
      // Classes share most of their rules: each rule's sources once.
      const sharedEntries = new Set<Entry>();
      for (const cls of shared) for (const e of cls.entries) sharedEntries.add(e);
      const sharedUsed = new Set<string>();
      for (const e of sharedEntries) for (const k of e.sources) sharedUsed.add(k);
      const lookupRules: Rule[] = [];
      for (const f of FAMILIES) {
        const locals = new Map<LocalClass, string[]>();
        for (const cls of shared) {
          const addrs: string[] = [];
          for (const pod of cls.pods) for (const text of pod.ips) if (familyOf(text, ctx.idx) === f) addrs.push(text);
          if (addrs.length > 0) locals.set(cls, addrs);
        }
        const hashElements: MapElement[] = [];
        const rangeElements: MapElement[] = [];
        if (locals.size > 0) {
          const table = identityTable(sharedUsed, sources, f, namedNames);
          const chainOf = new Map<string, string>();
          // Per rule, the classes (positions in `locals`) it applies to: an identity visits only the classes its rules reach.
          const localList = [...locals];
          const classesOf = new Map<Entry, number[]>();
          localList.forEach(([cls], i) => {
            for (const e of cls.entries) {
              const l = classesOf.get(e);
              if (l === undefined) classesOf.set(e, [i]);
              else l.push(i);
            }
          });
          for (const id of table.identities) {
            const { entries: idEntries, named } = identityEntries(id, entriesBySource, table);
            const decided: Decided<DecisionBlock> = { port: [], range: [], proto: [], addr: [] };
            const reached =
              idEntries.length === 1
                ? (classesOf.get(idEntries[0]!) ?? [])
                : [...new Set(idEntries.flatMap((e) => classesOf.get(e) ?? []))].sort((a, b) => a - b);
            for (const i of reached) {
              const [cls, addrs] = localList[i]!;
              // Local pods of one class decide alike (a class includes the local ports when a rule names one).
              const matching = idEntries.length === 1 ? idEntries : idEntries.filter((e) => cls.holds[e.policyIndex] === 1);
              const tails = decidedTails(matching, cls.pods[0]!, named);
              for (const w of ['port', 'range', 'proto', 'addr'] as const)
                if (tails[w].length > 0) decided[w].push({ addrs, tails: tails[w] });
            }
            if (decided.port.length + decided.range.length + decided.proto.length + decided.addr.length === 0) continue;
            const cid = shortHash(`tier\0${tier}\0${d}\0${f}\0${id.key}`);
            const name = peersChainName(cid, d);
            chainOf.set(id.key, name);
            identityChain(
              cid,
              name,
              f,
              d,
              tier,
              { shared: decided },
              undefined,
              sanitizeComment(`${tier} tier ${d} ${d === 'ingress' ? 'from' : 'to'} IPv${f} ${about(id)}`),
            );
          }
          for (const { addr, key } of table.hashIds) {
            const chain = chainOf.get(key);
            if (chain !== undefined) hashElements.push({ key: addr.text, chain });
          }
          for (const sg of table.segments) {
            const chain = chainOf.get(sg.key);
            if (chain !== undefined) rangeElements.push({ key: sg.iv, chain });
          }
          const field = d === 'ingress' ? 'saddr' : 'daddr';
          for (const ranges2 of [false, true]) {
            lookupRules.push({
              matches: [],
              counter: false,
              verdict: { kind: 'vmap', family: f, field, map: tierPeerMapName(tier, d, f, ranges2) },
              comment: undefined,
            });
          }
        }
        for (const interval of [false, true]) {
          maps.push({
            name: tierPeerMapName(tier, d, f, interval),
            kind: 'tier-peers',
            tier,
            family: f,
            direction: d,
            interval,
            elements: interval ? rangeElements : hashElements,
          });
        }
      }
      if (lookupRules.length > 0) {
        lookupChains.push({
          name: tierLookupChainName(tier, d),
          role: 'lookup',
          base: undefined,
          comment: `${tier} tier, ${d} of selected local pods: ${d === 'ingress' ? 'source' : 'destination'} address to its tier identity`,
          rules: lookupRules,
        });
        for (const cls of shared) for (const pod of cls.pods) setLookup(pod, tier, d, tierLookupChainName(tier, d));
      }
    }
  }
  return {
    chains: [...chains, ...identityChains, ...lookupChains],
    maps,
    decisions,
    lookup: (pod, tier, d) => lookups.get(pod)?.get(`${tier} ${d}`),
    policies: relevant,
  };
}
