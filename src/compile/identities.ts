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
//                          ip saddr vmap @ingress-ranges-v4    192.168.0.0/24 : jump KUBE-PEERS-<cid2>-IN
//   KUBE-PEERS-<cid>-IN:   ip daddr . meta l4proto . th dport @allow4-<cid> accept
//                          ip daddr . meta l4proto . th dport @allowrange4-<cid> accept
//
// Each allow element carries a comment naming the policy rules it comes from
// (`shop/web ingress[0]`). Pod churn elsewhere moves one address between
// identities (a hash map element); identities and their sets change when
// policies or local pods do. Pure: the same per-policy ruleset always gives
// the same text.
import { familyBits, parseIP } from '../model/ip.ts';
import type { Interval } from '../model/ip.ts';
import { DIRECTIONS, FAMILIES } from '../model/types.ts';
import type { Direction, Family } from '../model/types.ts';
import { addressType, countObjects, namedPortType } from '../ruleset/ir.ts';
import type { Chain, CompiledRuleset, MapElement, Match, NamedSet, Proto, Rule, SetElement, VerdictMap } from '../ruleset/ir.ts';
import {
  allowAllSetName,
  allowRangeSetName,
  allowSetName,
  peerLookupChainName,
  parsePodChainName,
  peerMapName,
  peersChainName,
  sanitizeComment,
  shortHash,
} from '../ruleset/ids.ts';
import type { PortRange } from './ports.ts';
import type { Term, TermSource } from './terms.ts';
import { parseV4 } from './v4.ts';

const ANYWHERE = '*';

interface LabelledRange {
  readonly lo: number;
  readonly hi: number;
  readonly labels: Set<string>;
}

/**
 * Ranges of up to this many ports become single-port elements of the hash set
 * (the per-policy port sets join adjacent ports, e.g. 8080 and 8081, into one
 * range), so that only real ranges need the interval set.
 */
const SPLIT_RANGE_UP_TO = 16;

/** What one identity allows: per local address, per protocol, port ranges; and local addresses open on every port. */
class Allowed {
  readonly ports = new Map<string, Map<Proto, LabelledRange[]>>();
  readonly all = new Map<string, Set<string>>();

  addPort(local: string, proto: Proto, lo: number, hi: number, label: string): void {
    let byProto = this.ports.get(local);
    if (byProto === undefined) this.ports.set(local, (byProto = new Map()));
    let list = byProto.get(proto);
    if (list === undefined) byProto.set(proto, (list = []));
    list.push({ lo, hi, labels: new Set([label]) });
  }

  addAll(local: string, label: string): void {
    let s = this.all.get(local);
    if (s === undefined) this.all.set(local, (s = new Set()));
    s.add(label);
  }

  get empty(): boolean {
    return this.ports.size === 0 && this.all.size === 0;
  }

  /**
   * Sorted elements, overlapping ranges merged (interval sets reject
   * overlaps) with their labels joined; single ports (and short ranges, port
   * by port) apart from ranges.
   */
  portElements(): { single: SetElement[]; ranges: SetElement[] } {
    const out = { single: [] as SetElement[], ranges: [] as SetElement[] };
    for (const local of sortAddresses(this.ports.keys())) {
      const byProto = this.ports.get(local)!;
      for (const proto of [...byProto.keys()].sort()) {
        const sorted = [...byProto.get(proto)!].sort((a, b) => a.lo - b.lo || a.hi - b.hi);
        const merged: LabelledRange[] = [];
        for (const r of sorted) {
          const last = merged[merged.length - 1];
          if (last !== undefined && r.lo <= last.hi) {
            merged[merged.length - 1] = {
              lo: last.lo,
              hi: Math.max(last.hi, r.hi),
              labels: new Set([...last.labels, ...r.labels]),
            };
          } else merged.push({ lo: r.lo, hi: r.hi, labels: new Set(r.labels) });
        }
        for (const r of merged) {
          const comment = labelComment(r.labels);
          if (r.hi - r.lo < SPLIT_RANGE_UP_TO)
            for (let port = r.lo; port <= r.hi; port++)
              out.single.push({ kind: 'addr-proto-port', addr: local, proto, port, comment });
          else out.ranges.push({ kind: 'addr-proto-port', addr: local, proto, port: { lo: r.lo, hi: r.hi }, comment });
        }
      }
    }
    return out;
  }

  allElements(): SetElement[] {
    return sortAddresses(this.all.keys()).map((addr) => ({ kind: 'addr', addr, comment: labelComment(this.all.get(addr)!) }));
  }
}

/** Canonical addresses of one family in numeric order (the order the dispatch maps list pods in). */
function sortAddresses(list: Iterable<string>): string[] {
  const all = [...list];
  const v4 = all.map(parseV4);
  if (v4.every((n) => n !== undefined)) {
    const order = all.map((_, i) => i).sort((x, y) => v4[x]! - v4[y]!);
    return order.map((i) => all[i]!);
  }
  const v6 = all.map((a) => parseIP(a)?.value ?? 0n);
  const order = all.map((_, i) => i).sort((x, y) => (v6[x]! < v6[y]! ? -1 : v6[x]! > v6[y]! ? 1 : 0));
  return order.map((i) => all[i]!);
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
function allowTerms(into: Allowed, terms: readonly Term[], f: Family, remotePorts: readonly PortRange[]): void {
  for (const t of terms) {
    if (t.family !== undefined && t.family !== f) continue;
    const locals = t.targets.get(f) ?? [];
    if (locals.length === 0) continue;
    const p = t.ports;
    switch (p.kind) {
      case 'all':
        for (const l of locals) into.addAll(l, t.label);
        break;
      case 'numeric':
        for (const r of p.ranges) for (const l of locals) into.addPort(l, r.proto, r.lo, r.hi, t.label);
        break;
      case 'local': {
        const mine = new Set(locals);
        for (const e of p.triples) if (mine.has(e.addr)) into.addPort(e.addr, e.proto, e.port, e.port, t.label);
        break;
      }
      case 'remote':
        for (const r of remotePorts) for (const l of locals) into.addPort(l, r.proto, r.lo, r.hi, t.label);
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
  readonly sets: NamedSet[];
  /** Identity key -> chain name; undefined when it allows nothing (its addresses get no element). */
  readonly chainOf: Map<string, string | undefined>;
  /** Identity key -> its chain and sets, for those that allow something. */
  readonly byKey: Map<string, { readonly chain: Chain; readonly sets: readonly NamedSet[] }>;
}

function buildIdentities(
  d: Direction,
  f: Family,
  ranges: boolean,
  identities: Iterable<Identity>,
  bySource: ReadonlyMap<string, readonly Term[]>,
  describeToken: (token: string) => string,
  named: NamedTokens,
): Built {
  const out: Built = { chains: [], sets: [], chainOf: new Map(), byKey: new Map() };
  const local = d === 'ingress' ? 'daddr' : 'saddr';
  for (const id of identities) {
    if (out.chainOf.has(id.key)) continue;
    const allowed = new Allowed();
    for (const token of id.tokens) {
      const n = named.get(token);
      allowTerms(allowed, bySource.get(n?.source ?? token) ?? [], f, n?.ports ?? []);
    }
    if (allowed.empty) {
      out.chainOf.set(id.key, undefined);
      continue;
    }
    const cid = shortHash(`peers\0${d}\0${f}\0${ranges ? 'ranges' : 'pods'}\0${id.key}`);
    const name = peersChainName(cid, d);
    out.chainOf.set(id.key, name);
    const rules: Rule[] = [];
    const firstSet = out.sets.length;
    // Single ports in a hash set, ranges in an interval set: a concatenation
    // with intervals is a pipapo set, whose lookup uses the FPU (AVX2) and
    // cost ~0.4 us per packet more than a hash lookup (docs/datapath.md).
    const { single, ranges: rangeEls } = allowed.portElements();
    for (const [els, set, interval] of [
      [single, allowSetName(cid, f), false],
      [rangeEls, allowRangeSetName(cid, f), true],
    ] as const) {
      if (els.length === 0) continue;
      out.sets.push({
        name: set,
        type: namedPortType(f),
        interval,
        elements: els,
        comment: sanitizeComment(`IPv${f} local pod . protocol . ${interval ? 'port range' : 'port'} allowed by ${name}`),
      });
      rules.push(accept([{ kind: 'localPortSet', family: f, field: local, set }]));
    }
    const allEls = allowed.allElements();
    if (allEls.length > 0) {
      const set = allowAllSetName(cid, f);
      out.sets.push({
        name: set,
        type: addressType(f),
        interval: false,
        elements: allEls,
        comment: sanitizeComment(`IPv${f} local pods open on every port to ${name}`),
      });
      rules.push(accept([{ kind: 'addrSet', family: f, field: local, set }]));
    }
    const chain: Chain = {
      name,
      role: 'peers',
      base: undefined,
      comment: sanitizeComment(`${d} ${d === 'ingress' ? 'from' : 'to'} IPv${f} ${id.tokens.map(describeToken).join(' + ')}`),
      rules,
    };
    out.chains.push(chain);
    out.byKey.set(id.key, { chain, sets: out.sets.slice(firstSet) });
  }
  return out;
}

function accept(matches: Match[]): Rule {
  return { matches, counter: false, verdict: { kind: 'accept' }, comment: undefined };
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
): { keys: Map<string, string>; identities: Map<string, Identity> } {
  const sources = new Map<string, TermSource>();
  for (const t of terms) {
    const s = t.source;
    if ((s.kind === 'pods' || s.kind === 'named') && t.family === f) sources.set(s.key, s);
  }
  const keys = new Map<string, string>();
  const add = (addr: string, token: string): void => {
    const k = keys.get(addr);
    keys.set(addr, k === undefined ? token : `${k}|${token}`);
  };
  for (const name of [...sources.keys()].sort()) {
    const s = sources.get(name)!;
    if (s.kind === 'pods') {
      for (const a of s.addrs) add(a, name);
    } else if (s.kind === 'named') {
      const ports = new Map<string, PortRange[]>();
      for (const e of s.triples) {
        let l = ports.get(e.addr);
        if (l === undefined) ports.set(e.addr, (l = []));
        l.push({ proto: e.proto, lo: e.port, hi: e.port });
      }
      for (const [addr, l] of ports) {
        const text = l.map((r) => `${r.proto} . ${r.lo}`).sort();
        const token = `${name}=${text.join(',')}`;
        if (!named.has(token)) named.set(token, { source: name, ports: l });
        add(addr, token);
      }
    }
  }
  const identities = new Map<string, Identity>();
  for (const k of keys.values()) if (!identities.has(k)) identities.set(k, { key: k, tokens: k.split('|') });
  return { keys, identities };
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
  // Sweep over interval boundaries: between two boundaries the covering sources are constant.
  const events: { at: bigint; key: string; delta: number }[] = [];
  for (const [key, ivs] of sources) {
    for (const iv of ivs) {
      events.push({ at: iv.lo, key, delta: 1 });
      if (iv.hi < max) events.push({ at: iv.hi + 1n, key, delta: -1 });
    }
  }
  events.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
  const active = new Map<string, number>();
  const out: { iv: { family: Family; lo: bigint; hi: bigint }; id: Identity }[] = [];
  for (let i = 0; i < events.length;) {
    const at = events[i]!.at;
    while (i < events.length && events[i]!.at === at) {
      const e = events[i++]!;
      const n = (active.get(e.key) ?? 0) + e.delta;
      if (n === 0) active.delete(e.key);
      else active.set(e.key, n);
    }
    const end = i < events.length ? events[i]!.at - 1n : max;
    if (active.size === 0) continue;
    const tokens = [...active.keys()].sort();
    const key = tokens.join('|');
    const last = out[out.length - 1];
    if (last !== undefined && last.id.key === key && last.iv.hi + 1n === at) last.iv.hi = end;
    else out.push({ iv: { family: f, lo: at, hi: end }, id: { key, tokens } });
  }
  return out;
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
 * change with the local pods, never with remote pods.
 */
function lookupChain(d: Direction, maps: readonly VerdictMap[]): Chain {
  const field = d === 'ingress' ? 'saddr' : 'daddr';
  const isolated = new Set(
    maps
      .filter((m) => m.kind === 'dispatch' && m.direction === d && m.elements.some((e) => e.chain !== undefined))
      .map((m) => m.family),
  );
  const rules = maps
    .filter((m) => m.kind === 'peers' && m.direction === d && isolated.has(m.family))
    .map((m): Rule => ({
      matches: [],
      counter: false,
      verdict: { kind: 'vmap', family: m.family, field, map: m.name },
      comment: undefined,
    }));
  return {
    name: peerLookupChainName(d),
    role: 'lookup',
    base: undefined,
    comment: `${d} of isolated local pods: ${d === 'ingress' ? 'source' : 'destination'} address to its peer identity`,
    rules,
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
  /** Identity key -> its chain and sets, null when it allows nothing. */
  readonly built: Map<string, { readonly chain: Chain; readonly sets: readonly NamedSet[] } | null>;
  /** The pod map's elements (sorted by address). */
  readonly elements: readonly MapElement[];
  /** The range identities' chains and sets, and their map: remote pods in range sources are not followed. */
  readonly rangeChains: readonly Chain[];
  readonly rangeSets: readonly NamedSet[];
  readonly rangeMap: VerdictMap;
  /** The pod and named sources it was built from: key and address list (by object), in key order. */
  readonly signature: readonly unknown[];
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
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** A pod identity's chain and sets, built alone (what a new identity of a remote pod needs). */
export function buildPodIdentity(
  part: PodIdentityPart,
  key: string,
): { readonly chain: Chain; readonly sets: readonly NamedSet[] } | null {
  const b = buildIdentities(
    part.direction,
    part.family,
    false,
    [{ key, tokens: key.split('|') }],
    part.bySource,
    part.describeToken,
    part.named,
  );
  const chain = b.chains[0];
  return chain === undefined ? null : { chain, sets: b.sets };
}

/**
 * The ruleset from the parts: prev's other sets first, then per direction
 * and family the pod identities' chains and sets (in key order), then the
 * range identities'; the peer maps before prev's maps; the lookup chains and
 * prev's other chains after the identity chains.
 */
export function assembleFlat(
  prev: CompiledRuleset,
  otherSets: readonly NamedSet[],
  parts: readonly PodIdentityPart[],
  rest: readonly Chain[],
): CompiledRuleset {
  const sets: NamedSet[] = [...otherSets];
  const peerChains: Chain[] = [];
  const peerMaps: VerdictMap[] = [];
  for (const part of parts) {
    const { direction: d, family: f } = part;
    for (const key of [...part.built.keys()].sort()) {
      const b = part.built.get(key);
      if (b === undefined || b === null) continue;
      peerChains.push(b.chain);
      sets.push(...b.sets);
    }
    peerChains.push(...part.rangeChains);
    sets.push(...part.rangeSets);
    peerMaps.push(
      { name: peerMapName(d, f, false), kind: 'peers', family: f, direction: d, interval: false, elements: part.elements },
      part.rangeMap,
    );
  }
  const chains = [...peerChains, ...DIRECTIONS.map((d) => lookupChain(d, [...peerMaps, ...prev.maps])), ...rest];
  const maps = [...peerMaps, ...prev.maps];
  return { ...prev, sets, maps, chains, stats: { ...prev.stats, ...countObjects(sets, maps, chains, prev.decisions) } };
}

/**
 * The per-policy ruleset of compileRules, flattened into peer identities (see
 * the top of this file): `terms` are what its policy chains' rules allow.
 */
export function flattenRuleset(prev: CompiledRuleset, all: readonly Term[]): CompiledRuleset {
  return flattenRulesetParts(prev, all).ruleset;
}

/** flattenRuleset, with what it was assembled from (see PodIdentityPart). */
export function flattenRulesetParts(
  prev: CompiledRuleset,
  all: readonly Term[],
  reuse?: readonly PodIdentityPart[],
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
      const same = old !== undefined && sameSignature(old.signature, signature);
      let pods: ReturnType<typeof podIdentities>;
      if (same) {
        for (const [token, n] of old.named) if (!named.has(token)) named.set(token, n);
        const identities = new Map<string, Identity>();
        for (const key of old.built.keys()) identities.set(key, { key, tokens: key.split('|') });
        pods = { keys: old.keys, identities };
      } else pods = podIdentities(ts, f, named);
      // In key order: a remote pod's new identity then has its place without a flattening of everything.
      const ordered = [...pods.identities.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      const builtPods = buildIdentities(d, f, false, ordered, bySource, describeToken, named);
      const built: PodIdentityPart['built'] = new Map();
      for (const key of builtPods.chainOf.keys()) built.set(key, builtPods.byKey.get(key) ?? null);
      const sameChains =
        same && [...builtPods.chainOf].every(([key, chain]) => (old.built.get(key)?.chain.name ?? undefined) === chain);
      let podElements: readonly MapElement[];
      if (sameChains) podElements = old.elements;
      else {
        const els: MapElement[] = [];
        for (const addr of sortAddresses(pods.keys.keys())) {
          const chain = builtPods.chainOf.get(pods.keys.get(addr)!);
          if (chain !== undefined) els.push({ key: addr, chain });
        }
        podElements = els;
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
        elements: podElements,
        rangeChains: builtRanges.chains,
        rangeSets: builtRanges.sets,
        rangeMap: {
          name: peerMapName(d, f, true),
          kind: 'peers',
          family: f,
          direction: d,
          interval: true,
          elements: rangeElements,
        },
        signature,
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
  const ruleset = assembleFlat(base, otherSets, parts, rest);
  const names = new Set<string>();
  for (const n of [...ruleset.chains.map((c) => c.name), ...ruleset.sets.map((s) => s.name)]) {
    if (names.has(n)) throw new Error(`identifier collision on ${n}`);
    names.add(n);
  }
  return { ruleset, base, otherSets, parts, rest };
}
