// Peer identities: the per-policy ruleset (compileRules: a KUBE-NWPLCY chain
// per policy, walked rule after rule) flattened into one whose per-packet
// cost does not depend on how many policies select a pod.
//
// A remote address's identity is the set of rule sources that contain it:
// the peer sets (and, for egress, named-port sets with the ports the address
// serves) of every rule on this node. Addresses with the same identity are
// allowed exactly the same things, so each identity gets one chain,
// KUBE-PEERS-<cid>-IN|EG, holding the lookups of `local address . protocol .
// port` in the union of what every rule naming that identity allows (one
// for single ports, one for port ranges, one for rules without ports, each
// only when it has elements). A pod chain then looks the remote address up
// (through its direction's lookup chain) once in a map of pod addresses
// (hash) and once in a map of address ranges (interval: ipBlocks, and
// "anywhere" for rules without peers), jumping to the identity's chain,
// before its deny tail:
//
//   KUBE-POD-FW-<pod>-IN:  jump ingress-peers
//                          counter drop comment "deny ingress to ns/pod"
//   ingress-peers:         ip saddr vmap @ingress-peers-v4     10.244.2.7 : jump KUBE-PEERS-<cid>-IN
//                          ip saddr @ingress-peers-v4-big jump KUBE-PEERS-<cid3>-IN   (the biggest identity, peer-split.ts)
//                          ip saddr @ingress-peers-v4-recent jump ingress-recent-v4   (held-out addresses, nft/recent-peers.ts)
//                          ip saddr vmap @ingress-ranges-v4    192.168.0.0/24 : jump KUBE-PEERS-<cid2>-IN
//   KUBE-PEERS-<cid>-IN:   ip daddr . meta l4proto . th dport vmap @allow4-<cid>    10.244.1.5 . tcp . 80 : goto KUBE-NWPLCY-<p>-IN-0
//                          ip daddr . meta l4proto . th dport vmap @allowrange4-<cid>
//                          ip daddr vmap @allowall4-<cid>
//   KUBE-NWPLCY-<p>-IN-0:  counter accept comment "<the rule>"
//
// Each allow element goes to the chain of the first rule (policy order, then
// rule order: the evaluator's first allowing rule) that allows it, whose
// counter is that rule's per-rule counter; its comment names every policy
// rule it comes from (`shop/web ingress[0]`). Pod churn elsewhere moves one address between
// identities (a hash map element); identities and their sets change when
// policies or local pods do. Pure: the same per-policy ruleset always gives
// the same text.
import { familyBits, parseIP } from '../model/ip.ts';
import type { Interval } from '../model/ip.ts';
import { DIRECTIONS, FAMILIES } from '../model/types.ts';
import { chunksOf } from '../model/list.ts';
import type { ReadonlyList } from '../model/list.ts';
import type { Direction, Family } from '../model/types.ts';
import { addressType, countObjects } from '../ruleset/ir.ts';
import type {
  Chain,
  CompiledRuleset,
  DecisionElement,
  DecisionMap,
  MapElement,
  NamedSet,
  Proto,
  Rule,
  VerdictMap,
} from '../ruleset/ir.ts';
import {
  allowAllSetName,
  allowRangeSetName,
  allowSetName,
  peerLookupChainName,
  parsePodChainName,
  peerMapName,
  splitSetName,
  peersChainName,
  recentChainName,
  recentGateName,
  recentSetName,
  sanitizeComment,
  shortHash,
} from '../ruleset/ids.ts';
import { rangeSegments } from './range-sweep.ts';
import type { PortRange } from './ports.ts';
import type { Term, TermPorts, TermRule, TermSource } from './terms.ts';
import { parseV4 } from './v4.ts';
import { namedToken, PATCH_LIMIT, patchPodKeys, sameContent, type PatchedIdentities } from './identity-patch.ts';
import { chooseSplit, partition, placeAddresses, sameChoice, SPLIT_MIN } from './peer-split.ts';
import type { Placement, SplitChoice, SplitPart } from './peer-split.ts';

const ANYWHERE = '*';

/** A rule's place in evaluation order (policy order, then rule order: the order of the terms). */
interface RankedRule {
  readonly rule: TermRule;
  readonly rank: number;
}

interface LabelledRange {
  readonly lo: number;
  readonly hi: number;
  readonly label: string;
  readonly by: RankedRule;
}

/** A piece of port space with the rules allowing it, attributed to the first of them. */
interface Piece {
  lo: number;
  hi: number;
  readonly labels: string;
  readonly first: RankedRule;
}

/**
 * Ranges of up to this many ports become single-port elements of the hash set
 * (the per-policy port sets join adjacent ports, e.g. 8080 and 8081, into one
 * range), so that only real ranges need the interval set.
 */
const SPLIT_RANGE_UP_TO = 16;

const earlier = (a: RankedRule, b: RankedRule | undefined): RankedRule => (b === undefined || a.rank < b.rank ? a : b);

/**
 * What one identity allows: per local address, per protocol, port ranges; and
 * local addresses open on every port. Every element goes to the counting
 * chain of the first rule (in evaluation order) that allows it, and its
 * comment names all of them.
 */
class Allowed {
  readonly ports = new Map<string, Map<Proto, LabelledRange[]>>();
  readonly all = new Map<string, { labels: Set<string>; first: RankedRule }>();

  addPort(local: string, proto: Proto, lo: number, hi: number, label: string, by: RankedRule): void {
    let byProto = this.ports.get(local);
    if (byProto === undefined) this.ports.set(local, (byProto = new Map()));
    let list = byProto.get(proto);
    if (list === undefined) byProto.set(proto, (list = []));
    list.push({ lo, hi, label, by });
  }

  addAll(local: string, label: string, by: RankedRule): void {
    const s = this.all.get(local);
    if (s === undefined) this.all.set(local, { labels: new Set([label]), first: by });
    else {
      s.labels.add(label);
      s.first = earlier(by, s.first);
    }
  }

  get empty(): boolean {
    return this.ports.size === 0 && this.all.size === 0;
  }

  /**
   * Sorted, non-overlapping elements (interval maps reject overlaps): the
   * port space cut where the first allowing rule or the set of allowing rules
   * changes; single ports (and short ranges, port by port) apart from ranges.
   * Ports of a local address open on every port to an earlier rule are left
   * to the all-ports map, which then names the first rule.
   */
  portElements(): { single: DecisionElement[]; ranges: DecisionElement[] } {
    const out = { single: [] as DecisionElement[], ranges: [] as DecisionElement[] };
    for (const local of sortAddresses(this.ports.keys())) {
      const byProto = this.ports.get(local)!;
      const open = this.all.get(local)?.first;
      for (const proto of [...byProto.keys()].sort()) {
        for (const p of pieces(byProto.get(proto)!)) {
          if (open !== undefined && open.rank < p.first.rank) continue;
          const comment = p.labels;
          const verdict = { kind: 'goto', chain: p.first.rule.chain } as const;
          if (p.hi - p.lo < SPLIT_RANGE_UP_TO)
            for (let port = p.lo; port <= p.hi; port++)
              out.single.push({ key: { kind: 'addr-proto-port', addr: local, proto, port }, verdict, comment });
          else
            out.ranges.push({
              key: { kind: 'addr-proto-port', addr: local, proto, port: { lo: p.lo, hi: p.hi } },
              verdict,
              comment,
            });
        }
      }
    }
    return out;
  }

  allElements(): DecisionElement[] {
    return sortAddresses(this.all.keys()).map((addr) => {
      const a = this.all.get(addr)!;
      return {
        key: { kind: 'addr', addr },
        verdict: { kind: 'goto', chain: a.first.rule.chain },
        comment: labelComment(a.labels),
      };
    });
  }
}

/** The port ranges of one local address and protocol as pieces of constant allowing rules, sorted, adjacent equal pieces joined. */
function pieces(ranges: readonly LabelledRange[]): Piece[] {
  const cuts = [...new Set(ranges.flatMap((r) => [r.lo, r.hi + 1]))].sort((a, b) => a - b);
  const sorted = [...ranges].sort((a, b) => a.lo - b.lo || a.hi - b.hi);
  const out: Piece[] = [];
  let from = 0;
  const active: LabelledRange[] = [];
  for (let i = 0; i + 1 < cuts.length; i++) {
    const lo = cuts[i]!;
    const hi = cuts[i + 1]! - 1;
    while (from < sorted.length && sorted[from]!.lo <= lo) active.push(sorted[from++]!);
    for (let j = active.length - 1; j >= 0; j--) if (active[j]!.hi < lo) active.splice(j, 1);
    if (active.length === 0) continue;
    let first: RankedRule | undefined;
    for (const r of active) first = earlier(r.by, first);
    const labels = labelComment(new Set(active.map((r) => r.label)));
    const last = out[out.length - 1];
    if (last !== undefined && last.hi + 1 === lo && last.first === first && last.labels === labels) last.hi = hi;
    else out.push({ lo, hi, labels, first: first! });
  }
  return out;
}

const INDEX_SPAN = 2 ** 20;

/** Canonical addresses of one family in numeric order (the order the dispatch maps list pods in). */
function sortAddresses(list: Iterable<string>): string[] {
  const all = [...list];
  const order = addressOrder(all);
  const out: string[] = new Array<string>(all.length);
  for (let i = 0; i < order.length; i++) out[i] = all[order[i]!]!;
  return out;
}

/** The positions of `all` in numeric address order (ties: by position), as sortAddresses orders them. */
function addressOrder(all: readonly string[]): ArrayLike<number> {
  const v4 = all.map(parseV4);
  if (all.length <= INDEX_SPAN && v4.every((n) => n !== undefined)) {
    // Address and index packed in one double (32 + 20 bits, exact): a native
    // numeric sort instead of a comparator call per comparison.
    const packed = new Float64Array(all.length);
    for (let i = 0; i < all.length; i++) packed[i] = (v4[i] as number) * INDEX_SPAN + i;
    packed.sort();
    const order = new Int32Array(all.length);
    for (let i = 0; i < packed.length; i++) order[i] = (packed[i] as number) % INDEX_SPAN;
    return order;
  }
  const v6 = all.map((a) => parseIP(a)?.value ?? 0n);
  return all.map((_, i) => i).sort((x, y) => (v6[x]! < v6[y]! ? -1 : v6[x]! > v6[y]! ? 1 : 0));
}

/** An allow element's comment: the policy rules it comes from. */
function labelComment(labels: ReadonlySet<string>): string {
  return sanitizeComment([...labels].sort().join(' '));
}

function sourceKey(s: TermSource): string {
  return s.kind === 'anywhere' ? ANYWHERE : s.key;
}

function describe(s: TermSource): string {
  return s.kind === 'anywhere' ? 'anywhere' : s.about;
}

/** What `terms` (all naming one source) allow, added to `into`; `remotePorts` for named egress sources. */
function allowTerms(
  into: Allowed,
  terms: readonly Term[],
  f: Family,
  remotePorts: readonly PortRange[],
  ranked: ReadonlyMap<string, RankedRule>,
): void {
  for (const t of terms) {
    const by = ranked.get(t.rule.chain)!;
    if (t.family !== undefined && t.family !== f) continue;
    const locals = t.targets.get(f) ?? [];
    if (locals.length === 0) continue;
    const p = t.ports;
    switch (p.kind) {
      case 'all':
        for (const l of locals) into.addAll(l, t.label, by);
        break;
      case 'numeric':
        for (const r of p.ranges) for (const l of locals) into.addPort(l, r.proto, r.lo, r.hi, t.label, by);
        break;
      case 'local': {
        const mine = new Set(locals);
        for (const e of p.triples) if (mine.has(e.addr)) into.addPort(e.addr, e.proto, e.port, e.port, t.label, by);
        break;
      }
      case 'remote':
        for (const r of remotePorts) for (const l of locals) into.addPort(l, r.proto, r.lo, r.hi, t.label, by);
        break;
    }
  }
}

interface Identity {
  readonly key: string;
  /** Source keys; a named egress source with the remote address's ports is `key=ports` (see podIdentities). */
  readonly tokens: readonly string[];
}

/** Per named token (`key=ports`): its source key and the remote ports it stands for. */
export type NamedTokens = Map<string, { readonly source: string; readonly ports: readonly PortRange[] }>;

interface Built {
  readonly chains: Chain[];
  readonly decisions: DecisionMap[];
  /** Identity key -> chain name; undefined when it allows nothing (its addresses get no element). */
  readonly chainOf: Map<string, string | undefined>;
  /** Identity key -> its chain and allow maps, for those that allow something. */
  readonly byKey: Map<string, { readonly chain: Chain; readonly decisions: readonly DecisionMap[] }>;
}

/**
 * What one identity's chain and allow maps were built from, and them: the
 * next compile takes them over when its sources hold terms that allow the
 * same (sameAllowance; a kept policy chain's terms are the same objects,
 * chain-memo.ts). Their rules' order (which rule an element goes to first)
 * is then the same too: terms come in the order of their policies, by kind
 * and name. A policy change then builds the identities its terms are in,
 * not all of the node's; a remote pod's change in an incremental compile
 * none.
 */
interface BuiltFrom {
  /** Per token, its source's terms. */
  readonly lists: readonly (readonly Term[])[];
  readonly built: { readonly chain: Chain; readonly decisions: readonly DecisionMap[] } | null;
}

/** Per identity key, what the last compile built it from (one direction, family and kind of identity). */
export type IdentityMemo = ReadonlyMap<string, BuiltFrom>;

const NO_TERMS: readonly Term[] = [];

function sameLists(a: BuiltFrom, lists: readonly (readonly Term[])[]): boolean {
  return (
    a.lists.length === lists.length &&
    a.lists.every((l, i) => {
      const m = lists[i]!;
      return l.length === m.length && l.every((t, j) => sameAllowance(t, m[j]!));
    })
  );
}

/**
 * Two terms of one source's list (one direction, one source key: its
 * description too) the same in all an identity is built from (allowTerms):
 * rule and label, family, ports, local targets. Not the source's addresses:
 * a chain compiled again because a remote pod changed its peer set has new
 * terms that allow the same.
 */
function sameAllowance(a: Term, b: Term): boolean {
  return (
    a === b ||
    (a.rule.chain === b.rule.chain &&
      a.label === b.label &&
      a.family === b.family &&
      samePorts(a.ports, b.ports) &&
      sameTargets(a.targets, b.targets))
  );
}

function samePorts(a: TermPorts, b: TermPorts): boolean {
  if (a === b) return true;
  if (a.kind === 'numeric' && b.kind === 'numeric')
    return (
      a.ranges.length === b.ranges.length &&
      a.ranges.every((r, i) => {
        const q = b.ranges[i]!;
        return r.proto === q.proto && r.lo === q.lo && r.hi === q.hi;
      })
    );
  if (a.kind === 'local' && b.kind === 'local') return sameContent(a.triples, b.triples);
  return a.kind === b.kind && (a.kind === 'all' || a.kind === 'remote');
}

function sameTargets(a: Term['targets'], b: Term['targets']): boolean {
  if (a === b) return true;
  if (a.size !== b.size) return false;
  for (const [f, l] of a) {
    const m = b.get(f);
    if (m === undefined || m.length !== l.length || !l.every((x, i) => x === m[i])) return false;
  }
  return true;
}

function buildIdentities(
  d: Direction,
  f: Family,
  ranges: boolean,
  identities: Iterable<Identity>,
  bySource: ReadonlyMap<string, readonly Term[]>,
  describeToken: (token: string) => string,
  named: NamedTokens,
  ranked: ReadonlyMap<string, RankedRule>,
  /** The last compile's (taken over where the inputs are the same); `memo` of the result has the ones used now. */
  last?: IdentityMemo,
): Built & { readonly memo: IdentityMemo } {
  const out: Built = { chains: [], decisions: [], chainOf: new Map(), byKey: new Map() };
  const memo = new Map<string, BuiltFrom>();
  const local = d === 'ingress' ? 'daddr' : 'saddr';
  for (const id of identities) {
    if (out.chainOf.has(id.key)) continue;
    const lists = id.tokens.map((token) => bySource.get(named.get(token)?.source ?? token) ?? NO_TERMS);
    const hit = last?.get(id.key);
    if (hit !== undefined && sameLists(hit, lists)) {
      // With this compile's terms: the next compile compares with these (mostly the same objects).
      memo.set(id.key, { lists, built: hit.built });
      out.chainOf.set(id.key, hit.built?.chain.name);
      if (hit.built !== null) {
        out.chains.push(hit.built.chain);
        out.decisions.push(...hit.built.decisions);
        out.byKey.set(id.key, hit.built);
      }
      continue;
    }
    const allowed = new Allowed();
    for (const token of id.tokens) {
      const n = named.get(token);
      allowTerms(allowed, bySource.get(n?.source ?? token) ?? [], f, n?.ports ?? [], ranked);
    }
    if (allowed.empty) {
      out.chainOf.set(id.key, undefined);
      memo.set(id.key, { lists, built: null });
      continue;
    }
    const cid = shortHash(`peers\0${d}\0${f}\0${ranges ? 'ranges' : 'pods'}\0${id.key}`);
    const name = peersChainName(cid, d);
    out.chainOf.set(id.key, name);
    const rules: Rule[] = [];
    const firstDecision = out.decisions.length;
    // Single ports in a hash map, ranges in an interval map: a concatenation
    // with intervals is a pipapo set, whose lookup uses the FPU (AVX2) and
    // cost ~0.4 us per packet more than a hash lookup (docs/datapath.md).
    // Maps, not sets: an element goes to its first rule's chain, which counts
    // and accepts (the per-rule counters, docs/datapath.md).
    const { single, ranges: rangeEls } = allowed.portElements();
    const allEls = allowed.allElements();
    for (const [els, map, key, interval, what] of [
      [single, allowSetName(cid, f), 'port', false, 'local pod . protocol . port'],
      [rangeEls, allowRangeSetName(cid, f), 'port', true, 'local pod . protocol . port range'],
      [allEls, allowAllSetName(cid, f), 'addr', false, 'local pods open on every port'],
    ] as const) {
      if (els.length === 0) continue;
      out.decisions.push({
        name: map,
        family: f,
        key,
        interval,
        elements: els,
        comment: sanitizeComment(`IPv${f} ${what} allowed by ${name}, to the first allowing rule`),
      });
      rules.push({
        matches: [],
        counter: false,
        verdict: { kind: 'decisionVmap', family: f, field: local, key, map },
        comment: undefined,
      });
    }
    const chain: Chain = {
      name,
      role: 'peers',
      base: undefined,
      comment: sanitizeComment(`${d} ${d === 'ingress' ? 'from' : 'to'} IPv${f} ${id.tokens.map(describeToken).join(' + ')}`),
      rules,
    };
    out.chains.push(chain);
    const built = { chain, decisions: out.decisions.slice(firstDecision) };
    out.byKey.set(id.key, built);
    memo.set(id.key, { lists, built });
  }
  return { ...out, memo };
}

/**
 * Pod identities of one direction and family: address -> identity key (its
 * source tokens, sorted, joined by `|`), and each key's identity. Sources are
 * visited in key order, once each, so every address's tokens come sorted.
 */
function podIdentities(
  terms: readonly Term[],
  f: Family,
  named: NamedTokens,
): { keys: Map<string, string>; identities: Map<string, Identity>; counts: Map<string, number> } {
  const sources = new Map<string, TermSource>();
  for (const t of terms) {
    const s = t.source;
    if ((s.kind === 'pods' || s.kind === 'named') && t.family === f) sources.set(s.key, s);
  }
  // An address's key grows one token at a time (tokens come sorted): each
  // distinct key is built once as a state, and addresses hold states, so at
  // 50k addresses there is no string per address to build and hash.
  // Address -> its state while the sources are read; then -> its key (below).
  const stateOf = new Map<string, number | string>();
  const stateKeys: string[] = [''];
  const transitions = new Map<string, Map<number, number>>();
  const add = (addr: string, token: string): void => {
    let byState = transitions.get(token);
    if (byState === undefined) transitions.set(token, (byState = new Map()));
    const cur = (stateOf.get(addr) as number | undefined) ?? 0;
    let next = byState.get(cur);
    if (next === undefined) {
      next = stateKeys.length;
      stateKeys.push(cur === 0 ? token : `${stateKeys[cur]}|${token}`);
      byState.set(cur, next);
    }
    stateOf.set(addr, next);
  };
  for (const name of [...sources.keys()].sort()) {
    const s = sources.get(name)!;
    if (s.kind === 'pods') {
      // Indexed: tens of thousands of addresses, in a function run a few times per compile (no iterator optimized away).
      for (const addrs of chunksOf(s.addrs)) for (let i = 0; i < addrs.length; i++) add(addrs[i]!, name);
    } else if (s.kind === 'named') {
      const ports = new Map<string, PortRange[]>();
      for (const e of s.triples) {
        let l = ports.get(e.addr);
        if (l === undefined) ports.set(e.addr, (l = []));
        l.push({ proto: e.proto, lo: e.port, hi: e.port });
      }
      for (const [addr, l] of ports) {
        const token = namedToken(name, l);
        if (!named.has(token)) named.set(token, { source: name, ports: l });
        add(addr, token);
      }
    }
  }
  // The states become their keys in place (same entries, same order): no second map of every address.
  const identities = new Map<string, Identity>();
  // Addresses per state, then per key (states and keys are one to one).
  const perState = new Array<number>(stateKeys.length).fill(0);
  // forEach: no entry pair per address.
  stateOf.forEach((state, addr) => {
    const k = stateKeys[state as number] as string;
    perState[state as number] = perState[state as number]! + 1;
    stateOf.set(addr, k);
    if (!identities.has(k)) identities.set(k, { key: k, tokens: k.split('|') });
  });
  const counts = new Map<string, number>();
  for (let i = 1; i < perState.length; i++) {
    const n = perState[i]!;
    if (n > 0) counts.set(stateKeys[i]!, (counts.get(stateKeys[i]!) ?? 0) + n);
  }
  return { keys: stateOf as Map<string, string>, identities, counts };
}

/** Range identities of one direction and family: non-overlapping intervals with the sources covering them. */
function rangeIdentities(terms: readonly Term[], f: Family): { iv: Interval; id: Identity }[] {
  const sources = new Map<string, readonly Interval[]>();
  const max = (1n << BigInt(familyBits(f))) - 1n;
  for (const t of terms) {
    const s = t.source;
    if (s.kind !== 'ranges' && s.kind !== 'anywhere') continue;
    if (t.family !== undefined && t.family !== f) continue;
    const key = sourceKey(s);
    if (sources.has(key)) continue;
    if (s.kind === 'anywhere') sources.set(key, [{ family: f, lo: 0n, hi: max }]);
    else sources.set(key, s.ivs);
  }
  return rangeSegments(sources, f).map((sg) => ({ iv: sg.iv, id: { key: sg.key, tokens: sg.tokens } }));
}

/**
 * The peer lookups of one direction: an identity chain accepts what some
 * policy allows to the isolated local pod the packet belongs to; anything
 * else returns to the pod chain's deny tail. They sit in one chain per
 * direction, reached only from pod chains (after the dispatch), so traffic of
 * pods nothing isolates never pays them; each map is referenced by one rule,
 * so the kernel validates its jumps once per transaction however many pod
 * chains jump here. Only families an isolated local pod has an address in get
 * their rules (no packet of another family reaches a pod chain): the rules
 * change with the local pods; with remote pods only when the identity split
 * out of a pod map (peer-split.ts: a set and a rule right after the map's)
 * changes.
 */
function lookupChain(d: Direction, maps: readonly VerdictMap[], sets: readonly NamedSet[]): Chain {
  const field = d === 'ingress' ? 'saddr' : 'daddr';
  const isolated = new Set(
    maps
      .filter((m) => m.kind === 'dispatch' && m.direction === d && m.elements.some((e) => e.chain !== undefined))
      .map((m) => m.family),
  );
  const rules: Rule[] = [];
  for (const m of maps) {
    if (m.kind !== 'peers' || m.direction !== d || !isolated.has(m.family)) continue;
    rules.push({
      matches: [],
      counter: false,
      verdict: { kind: 'vmap', family: m.family, field, map: m.name },
      comment: undefined,
    });
    if (m.interval) continue;
    // The identities split out of the pod map (peer-split.ts): their sets, right after it.
    for (const s of sets)
      if (s.split !== undefined && s.split.direction === d && s.split.family === m.family)
        rules.push({
          matches: [{ kind: 'addrSet', family: m.family, field, set: s.name }],
          counter: false,
          verdict: { kind: 'jump', chain: s.split.chain },
          comment: undefined,
        });
    // The addresses the agent holds out of the map (nft/recent-peers.ts): empty in every compile.
    const gate = sets.find(
      (s) => s.recent !== undefined && s.recent.chain === undefined && s.recent.direction === d && s.recent.family === m.family,
    );
    if (gate !== undefined)
      rules.push({
        matches: [{ kind: 'addrSet', family: m.family, field, set: gate.name }],
        counter: false,
        verdict: { kind: 'jump', chain: recentChainName(d, m.family) },
        comment: undefined,
      });
  }
  return {
    name: peerLookupChainName(d),
    role: 'lookup',
    base: undefined,
    comment: `${d} of isolated local pods: ${d === 'ingress' ? 'source' : 'destination'} address to its peer identity`,
    rules,
  };
}

/**
 * The gate set, one empty set per identity chain and the chain that sends an
 * address in one of them to its identity (nft/recent-peers.ts fills them
 * between compiles). Made from the identities' chain names alone, so that a
 * remote pod's churn, which adds no identity, changes none of them.
 */
function recentParts(d: Direction, f: Family, identityChains: readonly string[]): RecentParts {
  // The same identities as the last compile's (every remote pod's churn): the same objects.
  const memoKey = `${d} ${f}`;
  const names = identityChains.join(' ');
  const last = recentMemo.get(memoKey);
  if (last !== undefined && last.names === names) return last.parts;
  const parts = makeRecentParts(d, f, identityChains);
  recentMemo.set(memoKey, { names, parts });
  return parts;
}

interface RecentParts {
  readonly sets: readonly NamedSet[];
  readonly chain: Chain;
}

const recentMemo = new Map<string, { readonly names: string; readonly parts: RecentParts }>();

function makeRecentParts(d: Direction, f: Family, identityChains: readonly string[]): RecentParts {
  const field = d === 'ingress' ? 'saddr' : 'daddr';
  const map = peerMapName(d, f, false);
  const sets: NamedSet[] = [
    {
      name: recentGateName(d, f),
      type: addressType(f),
      interval: false,
      elements: [],
      comment: `IPv${f} ${d} peers held out of ${map} for a moment (all identities)`,
      recent: { direction: d, family: f, chain: undefined },
    },
  ];
  const rules: Rule[] = [];
  for (const chain of identityChains) {
    const name = recentSetName(d, f, chain);
    sets.push({
      name,
      type: addressType(f),
      interval: false,
      elements: [],
      comment: `IPv${f} ${d} peers of ${chain} held out of ${map} for a moment`,
      recent: { direction: d, family: f, chain },
    });
    rules.push({
      matches: [{ kind: 'addrSet', family: f, field, set: name }],
      counter: false,
      verdict: { kind: 'goto', chain },
      comment: undefined,
    });
  }
  return {
    sets,
    chain: {
      name: recentChainName(d, f),
      role: 'lookup',
      base: undefined,
      comment: `${d} peers held out of ${map} for a moment: each to its identity`,
      rules,
    },
  };
}

/**
 * What flattenRuleset built for the pod identities of one direction and
 * family, kept so that a remote pod's churn can be applied to it (see
 * peer-churn.ts) instead of flattening again.
 */
export interface PodIdentityPart {
  readonly direction: Direction;
  readonly family: Family;
  /** This direction's terms by source key. */
  readonly bySource: ReadonlyMap<string, readonly Term[]>;
  readonly named: NamedTokens;
  readonly describeToken: (token: string) => string;
  /** The terms of this direction whose source is in this family (or both). */
  readonly terms: readonly Term[];
  /** Address -> identity key. */
  readonly keys: Map<string, string>;
  /** Identity key -> its chain and allow maps, null when it allows nothing. */
  readonly built: Map<string, { readonly chain: Chain; readonly decisions: readonly DecisionMap[] } | null>;
  /** Addresses per identity key (every key of `keys`): kept along `keys`, read by the split's choice. */
  readonly counts: Map<string, number>;
  /** The pod map's elements (sorted by address), without the split identities' addresses. */
  readonly elements: ReadonlyList<MapElement>;
  /** The identities out of the map, in plain sets (peer-split.ts), in rank order. */
  readonly split: readonly SplitPart[];
  /** The fewest addresses an identity needs to be split out. */
  readonly splitMin: number;
  /** The range identities' chains and allow maps, and their map: remote pods in range sources are not followed. */
  readonly rangeChains: readonly Chain[];
  readonly rangeDecisions: readonly DecisionMap[];
  readonly rangeMap: VerdictMap;
  /** The pod and named sources it was built from: key and address list (by object), in key order. */
  readonly signature: readonly unknown[];
  /** Every rule's counting chain in evaluation order (the first allowing rule gets an element). */
  readonly ranked: ReadonlyMap<string, RankedRule>;
  /** What the pod and range identities were built from, for the next compile (buildIdentities). */
  readonly memo: { readonly pods: IdentityMemo; readonly ranges: IdentityMemo };
  /** Addresses whose key PeerChurn changed since `terms` were compiled (their lists do not show it). */
  readonly dirty?: ReadonlySet<string>;
}

/** What the pod identities of one direction and family are built from (see flattenRulesetParts' `reuse`). */
function podSignature(terms: readonly Term[], f: Family): unknown[] {
  const refs = new Map<string, unknown>();
  for (const t of terms) {
    const s = t.source;
    if (s.kind === 'pods' && t.family === f) refs.set(s.key, s.addrs);
    else if (s.kind === 'named' && t.family === f) refs.set(s.key, s.triples);
  }
  return [...refs.keys()].sort().flatMap((k) => [k, refs.get(k)]);
}

function sameSignature(a: readonly unknown[], b: readonly unknown[]): boolean {
  // Source keys are strings; their lists are compared by content only when not the same object (named sources are listed anew each compile).
  return (
    a.length === b.length &&
    a.every((x, i) => {
      const y = b[i];
      return x === y || (Array.isArray(x) && Array.isArray(y) && sameContent(x, y));
    })
  );
}

/** A pod identity's chain and allow maps, built alone (what a new identity of a remote pod needs). */
export function buildPodIdentity(
  part: PodIdentityPart,
  key: string,
): { readonly chain: Chain; readonly decisions: readonly DecisionMap[] } | null {
  const b = buildIdentities(
    part.direction,
    part.family,
    false,
    [{ key, tokens: key.split('|') }],
    part.bySource,
    part.describeToken,
    part.named,
    part.ranked,
  );
  const chain = b.chains[0];
  return chain === undefined ? null : { chain, decisions: b.decisions };
}

/**
 * The ruleset from the parts: per direction and family the pod identities'
 * chains and allow maps (in key order), then the range identities'; the
 * allow maps before prev's decision maps (the tiers'), the peer maps before
 * prev's maps; the lookup chains and prev's other chains (the rules'
 * counting chains first) after the identity chains.
 */
export function assembleFlat(
  prev: CompiledRuleset,
  otherSets: readonly NamedSet[],
  parts: readonly PodIdentityPart[],
  rest: readonly Chain[],
): CompiledRuleset {
  const sets: NamedSet[] = [...otherSets];
  const decisions: DecisionMap[] = [];
  const peerChains: Chain[] = [];
  const peerMaps: VerdictMap[] = [];
  const recentChains: Chain[] = [];
  const recentSets: NamedSet[] = [];
  for (const part of parts) {
    const { direction: d, family: f } = part;
    const identityChains: string[] = [];
    for (const key of [...part.built.keys()].sort()) {
      const b = part.built.get(key);
      if (b === undefined || b === null) continue;
      peerChains.push(b.chain);
      decisions.push(...b.decisions);
      identityChains.push(b.chain.name);
    }
    // Also without identities: the lookup chain's rules then do not change when the first comes.
    const r = recentParts(d, f, identityChains);
    recentSets.push(...r.sets);
    recentChains.push(r.chain);
    peerChains.push(...part.rangeChains);
    decisions.push(...part.rangeDecisions);
    peerMaps.push(
      { name: peerMapName(d, f, false), kind: 'peers', family: f, direction: d, interval: false, elements: part.elements },
      part.rangeMap,
    );
    part.split.forEach((sp, i) => {
      const name = splitSetName(d, f, i);
      sets.push({
        name,
        type: addressType(f),
        interval: false,
        elements: sp.elements,
        // The same text whichever identity it holds: a declaration does not change in place (nft/update.ts).
        comment: `IPv${f} ${d} peers of the biggest identity, out of ${peerMapName(d, f, false)}`,
        split: { direction: d, family: f, chain: sp.chain },
      });
    });
  }
  sets.push(...recentSets);
  const chains = [
    ...peerChains,
    ...recentChains,
    ...DIRECTIONS.map((d) => lookupChain(d, [...peerMaps, ...prev.maps], sets)),
    ...rest,
  ];
  const maps = [...peerMaps, ...prev.maps];
  const allDecisions = [...decisions, ...prev.decisions];
  return {
    ...prev,
    sets,
    maps,
    decisions: allDecisions,
    chains,
    stats: { ...prev.stats, ...countObjects(sets, maps, chains, allDecisions) },
  };
}

/**
 * The chain of one allow-list rule: counts the new connections the allow maps
 * send to it (those it is the first to allow) and accepts them.
 */
function ruleChain(t: Term): Chain {
  return {
    name: t.rule.chain,
    role: 'rule',
    base: undefined,
    comment: sanitizeComment(t.label),
    counts: t.rule.counts,
    rules: [{ matches: [], counter: true, verdict: { kind: 'accept' }, comment: t.rule.description }],
  };
}

/**
 * The addresses to place anew in the pod map: the patched ones, and those of
 * an identity that had no chain (allowed nothing) and has one now (a local
 * pod came back for its rules), found by one walk of the keys (no sort).
 */
function movedAddresses(
  before: PodIdentityPart['built'],
  chainOf: ReadonlyMap<string, string | undefined>,
  patched: PatchedIdentities,
): ReadonlySet<string> {
  // A key new to this compile has only patched addresses (the others keep their keys): those are placed anyway.
  const gained = new Set<string>();
  for (const [key, chain] of chainOf) if (chain !== undefined && before.get(key) === null) gained.add(key);
  if (gained.size === 0) return patched.affected;
  const out = new Set(patched.affected);
  patched.keys.forEach((key, addr) => {
    if (gained.has(key)) out.add(addr);
  });
  return out;
}

/** Up to this many moved addresses, each is found by a binary search; more, one walk of the lists. Either way one copy. */
const SPLICE_MAX = 8;

/**
 * The pod map's elements and split sets from the last ones: each address's
 * chain looked up again (an identity's chain name follows what it allows),
 * the moved addresses placed where their identity is now; no sort of every
 * address (peer-split.ts placeAddresses).
 */
function patchPlacement(
  old: PodIdentityPart,
  patched: PatchedIdentities,
  chainOf: ReadonlyMap<string, string | undefined>,
  f: Family,
  moved: ReadonlySet<string>,
  spliceMax: number,
  next: readonly SplitChoice[],
): Placement {
  let renamed = false;
  for (const [key, chain] of chainOf) {
    const was = old.built.get(key);
    if (was !== undefined && (was?.chain.name ?? undefined) !== chain) renamed = true;
  }
  const chainFor = (addr: string): string | undefined => {
    const key = patched.keys.get(addr);
    return key === undefined ? undefined : chainOf.get(key);
  };
  return placeAddresses({ map: old.elements, split: old.split }, next, moved, chainFor, f, renamed || moved.size > spliceMax);
}

/**
 * The per-policy ruleset of compileRules, flattened into peer identities (see
 * the top of this file): `terms` are what its policy chains' rules allow.
 */
export function flattenRuleset(prev: CompiledRuleset, all: readonly Term[], splitMin = SPLIT_MIN): CompiledRuleset {
  return flattenRulesetParts(prev, all, undefined, PATCH_LIMIT, splitMin).ruleset;
}

/** flattenRuleset, with what it was assembled from (see PodIdentityPart). */
export function flattenRulesetParts(
  prev: CompiledRuleset,
  all: readonly Term[],
  reuse?: readonly PodIdentityPart[],
  /** How many addresses a patch moves at most (identity-patch.ts; tests lower it). */
  patchLimit = PATCH_LIMIT,
  /** How many addresses an identity needs to leave its pod map (peer-split.ts; tests lower it). */
  splitMin = SPLIT_MIN,
): {
  readonly ruleset: CompiledRuleset;
  /** `prev` without its sets and chains: what assembleFlat reads of it. */
  readonly base: CompiledRuleset;
  readonly otherSets: readonly NamedSet[];
  readonly parts: readonly PodIdentityPart[];
  readonly rest: readonly Chain[];
} {
  const terms = new Map<Direction, Term[]>(DIRECTIONS.map((d) => [d, all.filter((t) => t.direction === d)]));
  // The policy chains' sets are folded into the identities; any other set (the local pod CIDRs) stays.
  const policySets = new Set<string>();
  for (const c of prev.chains)
    if (c.role === 'policy') for (const r of c.rules) for (const m of r.matches) if ('set' in m) policySets.add(m.set);
  const otherSets: NamedSet[] = prev.sets.filter((s) => !policySets.has(s.name));
  const parts: PodIdentityPart[] = [];
  // Every rule's counting chain, ranked in evaluation order (terms come in
  // policy, then rule order). By chain name: one rule of a policy can
  // contribute several rules (a NamespaceNetworkPolicy rule with Service
  // peers), all counted as that rule.
  const ranked = new Map<string, RankedRule>();
  const ruleChains: Chain[] = [];
  for (const t of all) {
    if (ranked.has(t.rule.chain)) continue;
    ranked.set(t.rule.chain, { rule: t.rule, rank: ranked.size });
    ruleChains.push(ruleChain(t));
  }
  for (const d of DIRECTIONS) {
    const ts = terms.get(d)!;
    const bySource = new Map<string, Term[]>();
    const sourceText = new Map<string, string>();
    for (const t of ts) {
      const k = sourceKey(t.source);
      let l = bySource.get(k);
      if (l === undefined) bySource.set(k, (l = []));
      l.push(t);
      sourceText.set(k, describe(t.source));
    }
    const named: NamedTokens = new Map();
    const describeToken = (token: string): string => {
      const n = named.get(token);
      return n === undefined
        ? (sourceText.get(token) ?? token)
        : `${sourceText.get(n.source) ?? token} (${token.slice(n.source.length + 1)})`;
    };
    for (const f of FAMILIES) {
      // The same sources holding the same address lists (the compile reuses
      // them while no pod in them changed: a policy edit, a local pod outside
      // every peer set) give the same identity per address: only the
      // identities' chains and sets (what they allow) are built again.
      const signature = podSignature(ts, f);
      const old = reuse?.find((p) => p.direction === d && p.family === f);
      // (Not after PeerChurn moved addresses: lists equal to the old ones would not show it.)
      const same = old !== undefined && (old.dirty?.size ?? 0) === 0 && sameSignature(old.signature, signature);
      let pods: { keys: Map<string, string>; identities: Map<string, Identity>; counts: Map<string, number> | undefined };
      // A few addresses moved between the same sources (a local pod's change): their keys alone are looked at again.
      const patched = same || old === undefined ? undefined : patchPodKeys(old, ts, f, patchLimit, old.counts);
      if (same) {
        for (const [token, n] of old.named) if (!named.has(token)) named.set(token, n);
        const identities = new Map<string, Identity>();
        for (const key of old.built.keys()) identities.set(key, { key, tokens: key.split('|') });
        pods = { keys: old.keys, identities, counts: undefined };
      } else if (patched !== undefined && old !== undefined) {
        for (const [token, n] of old.named) if (!named.has(token)) named.set(token, n);
        for (const [token, n] of patched.named) if (!named.has(token)) named.set(token, n);
        const identities = new Map<string, Identity>();
        // Every key with an address is a key of the counts patchPodKeys moved
        // along: no walk of every address of the node (45k at 100k pods,
        // ~1.6 ms of each apply under load) to find the ~40 distinct keys.
        for (const key of old.counts.keys()) identities.set(key, { key, tokens: key.split('|') });
        pods = { keys: patched.keys, identities, counts: undefined };
      } else pods = podIdentities(ts, f, named);
      // In key order: a remote pod's new identity then has its place without a flattening of everything.
      const ordered = [...pods.identities.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      const builtPods = buildIdentities(d, f, false, ordered, bySource, describeToken, named, ranked, old?.memo.pods);
      const built: PodIdentityPart['built'] = new Map();
      for (const key of builtPods.chainOf.keys()) built.set(key, builtPods.byKey.get(key) ?? null);
      const sameChains =
        same && [...builtPods.chainOf].every(([key, chain]) => (old.built.get(key)?.chain.name ?? undefined) === chain);
      // The same keys (a policy edit): only identities that gain or lose a chain move addresses.
      const patch: PatchedIdentities | undefined =
        patched ?? (same ? { keys: old.keys, affected: new Set(), named: new Map() } : undefined);
      const moved = patch !== undefined && old !== undefined ? movedAddresses(old.built, builtPods.chainOf, patch) : undefined;
      // Addresses per identity: kept along the keys (patchPodKeys, PeerChurn), counted afresh with them.
      const counts = pods.counts ?? old!.counts;
      const split = chooseSplit(counts, (key) => builtPods.chainOf.get(key), splitMin);
      let placement: Placement;
      if (sameChains && sameChoice(old.split, split)) placement = { map: old.elements, split: old.split };
      else if (patch !== undefined && old !== undefined && moved !== undefined)
        placement = patchPlacement(old, patch, builtPods.chainOf, f, moved, Math.min(SPLICE_MAX, patchLimit), split);
      else {
        // Addresses and their keys read together (no lookup of each address again), in address order;
        // sized for every address and trimmed (grown by push, the list of tens
        // of thousands was allocated about three times over: issue 24, memory).
        const addrs: string[] = [];
        const keys: string[] = [];
        pods.keys.forEach((key, addr) => {
          addrs.push(addr);
          keys.push(key);
        });
        const order = addressOrder(addrs);
        const els = new Array<MapElement>(order.length);
        let w = 0;
        let lastKey: string | undefined;
        let lastChain: string | undefined;
        for (let i = 0; i < order.length; i++) {
          const at = order[i]!;
          const key = keys[at]!;
          // Neighbouring addresses mostly share their identity: its chain looked up once for them.
          if (key !== lastKey) {
            lastKey = key;
            lastChain = builtPods.chainOf.get(key);
          }
          if (lastChain !== undefined) els[w++] = { key: addrs[at]!, chain: lastChain };
        }
        els.length = w;
        placement = partition(els, split);
      }
      const ranges = rangeIdentities(ts, f);
      const builtRanges = buildIdentities(
        d,
        f,
        true,
        ranges.map((r) => r.id),
        bySource,
        describeToken,
        named,
        ranked,
        old?.memo.ranges,
      );
      const rangeElements: MapElement[] = [];
      for (const r of ranges) {
        const chain = builtRanges.chainOf.get(r.id.key);
        if (chain !== undefined) rangeElements.push({ key: r.iv, chain });
      }
      parts.push({
        direction: d,
        family: f,
        bySource,
        named,
        describeToken,
        terms: ts.filter((t) => t.family === undefined || t.family === f),
        keys: pods.keys,
        built,
        counts,
        elements: placement.map,
        split: placement.split,
        splitMin,
        rangeChains: builtRanges.chains,
        rangeDecisions: builtRanges.decisions,
        rangeMap: {
          name: peerMapName(d, f, true),
          kind: 'peers',
          family: f,
          direction: d,
          interval: true,
          elements: rangeElements,
        },
        signature,
        ranked,
        memo: { pods: builtPods.memo, ranges: builtRanges.memo },
      });
    }
  }

  const policyChainNames = new Set(prev.chains.filter((c) => c.role === 'policy').map((c) => c.name));
  // Pod chains: the policy jumps become the direction's peer lookups, before
  // their deny tail (dispatch.ts), after any Admin tier lookup. Every other chain stays as compiled.
  const rest = prev.chains
    .filter((c) => c.role !== 'policy')
    .map((c): Chain => {
      if (c.role !== 'pod') return c;
      const d = parsePodChainName(c.name)?.direction ?? 'ingress';
      const lookup: Rule = {
        matches: [],
        counter: false,
        verdict: { kind: 'jump', chain: peerLookupChainName(d) },
        comment: undefined,
      };
      const isPolicyJump = (r: Rule): boolean => r.verdict.kind === 'jump' && policyChainNames.has(r.verdict.chain);
      const first = c.rules.findIndex(isPolicyJump);
      if (first < 0) return c;
      return { ...c, rules: [...c.rules.slice(0, first), lookup, ...c.rules.slice(first).filter((r) => !isPolicyJump(r))] };
    });
  const base: CompiledRuleset = { ...prev, sets: [], chains: [] };
  const rest2 = [...ruleChains, ...rest];
  const ruleset = assembleFlat(base, otherSets, parts, rest2);
  const names = new Set<string>();
  for (const n of [
    ...ruleset.chains.map((c) => c.name),
    ...ruleset.sets.map((s) => s.name),
    ...ruleset.decisions.map((m) => m.name),
  ]) {
    if (names.has(n)) throw new Error(`identifier collision on ${n}`);
    names.add(n);
  }
  return { ruleset, base, otherSets, parts, rest: rest2 };
}
