// One KUBE-NWPLCY-<id>-IN|-EG chain: every valid rule of one contributed
// policy direction (of any kind, see src/kinds) as nft rules ending in
// `accept`, with the sets they match on. A rule
// allows (peer AND port); alternatives (several peers, several ports) live in
// set elements, so the rule count per policy rule stays small and fixed.
import type { ContributedPolicy, ContributedRule } from '../kinds/kind.ts';
import { FAMILIES } from '../model/types.ts';
import type { Direction, Family, LabelSelector, Peer, Pod } from '../model/types.ts';
import { formatSelector } from '../model/selector.ts';
import {
  namedPortSetName,
  peerSetName,
  policyChainName,
  policyRuleChainName,
  portSetName,
  sanitizeComment,
  setId,
} from '../ruleset/ids.ts';
import type { ClusterIndex } from './cluster-index.ts';
import { addressType, namedPortType } from '../ruleset/ir.ts';
import type { Chain, Match, NamedSet, Rule, SetElement } from '../ruleset/ir.ts';
import type { Interval } from '../model/ip.ts';
import { describePeers, hasPodPeers, peersDefinition, takePredecessor } from './peers.ts';
import type { FamilyIntervals, PeerResolver } from './peers.ts';
import type { SharedSets } from './shared-sets.ts';
import { addressElements, addresses, addressesFrom } from './v4.ts';
import { listArray } from '../model/list.ts';
import type { ReadonlyList } from '../model/list.ts';
import {
  egressNamedPorts,
  hasNumericPorts,
  ingressNamedPorts,
  namedPorts,
  numericPortElements,
  numericPortRanges,
  portRangeText,
  tripleElement,
} from './ports.ts';
import type { NamedPortRef, PortTriple } from './ports.ts';
import type { Term, TermPorts, TermRule, TermSource } from './terms.ts';

export interface PolicyChainInput {
  readonly idx: ClusterIndex;
  readonly peers: PeerResolver;
  readonly sets: SharedSets;
  /**
   * Families the node's pods use (their IPs and podCIDRs). Sets whose content
   * follows pods elsewhere in the cluster exist in these families even while
   * empty, so pods coming and going only change set elements.
   */
  readonly families: ReadonlySet<Family>;
  readonly policy: ContributedPolicy;
  readonly policyId: string;
  readonly direction: Direction;
  /** Local pods the policy selects: the destinations of ingress named ports. */
  readonly targets: readonly Pod[];
  /** Egress named-port triples by set name, for sets another rule created first (one compile). */
  readonly namedTriples: Map<string, readonly PortTriple[]>;
  /** Filled with what the compile read (chain-memo.ts keeps the chain while those reads stay the same). */
  readonly reads?: ChainReads;
}

/**
 * What one chain's compile read besides its policy, targets and families,
 * and what it did to the compile's shared state: chain-memo.ts reads each
 * dependency again to tell whether the chain still holds, and replays the
 * rest into the next compile's SharedSets.
 */
export interface ChainReads {
  /** Each read again must give the same object. */
  readonly deps: { readonly read: () => unknown; readonly value: unknown }[];
  /** A read that is new each time (named ports over every pod or an ipBlock): compiled every time. */
  volatile: boolean;
  /** Per rule: the shared sets it asked for, in order, and its named-port lists by set name. */
  readonly rules: ReadsOfRule[];
}

export interface ReadsOfRule {
  readonly uses: { readonly name: string; readonly definition: string; readonly set: NamedSet }[];
  readonly named: { readonly name: string; readonly list: readonly PortTriple[] }[];
}

export interface PolicyChainOutput {
  readonly chain: Chain;
  /** Sets this chain is the first to use (shared ones are listed once, by their first user). */
  readonly sets: readonly NamedSet[];
  /** What each of its rules allows, as values (identities.ts flattens these). */
  readonly terms: readonly Term[];
}

/**
 * The addresses of a hash peer set, as canonical text (the values a term
 * needs), kept when the set is made: the set is shared by every rule with
 * the same peers.
 */
const hashAddressesOf = new WeakMap<NamedSet, ReadonlyList<string>>();
function hashAddresses(set: NamedSet): ReadonlyList<string> {
  const kept = hashAddressesOf.get(set);
  if (kept !== undefined) return kept;
  const out: string[] = [];
  for (const e of set.elements) if (e.kind === 'addr' && typeof e.addr === 'string') out.push(e.addr);
  return out;
}

/** A set's element count; a hash peer set's without making its elements. */
export function setSize(set: NamedSet): number {
  return hashAddressesOf.get(set)?.length ?? set.elements.length;
}

/**
 * A hash peer set's addresses and elements, per resolved interval list: the
 * resolver keeps a rule's result until a pod in it changes, so a compile
 * after another change reuses them (the same lists, which the flattening
 * then recognizes as unchanged) instead of listing every address again.
 */
const hashElementsOf = new WeakMap<
  ReadonlyList<Interval>,
  { readonly list: ReadonlyList<string>; readonly elements: SetElement[] }
>();
function hashElements(ivs: ReadonlyList<Interval>): { readonly list: ReadonlyList<string>; readonly elements: SetElement[] } {
  let hit = hashElementsOf.get(ivs);
  if (hit === undefined) {
    // A result patched from the last one (peers.ts): the text of the intervals it kept is reused.
    const patch = takePredecessor(ivs);
    const prevHit = patch === undefined ? undefined : hashElementsOf.get(patch.from);
    const list = patch !== undefined && prevHit !== undefined ? addressesFrom(prevHit.list, patch) : addresses(ivs);
    // The elements only on first read: the flat ruleset folds peer sets into identities (identities.ts).
    let elements: SetElement[] | undefined;
    hashElementsOf.set(
      ivs,
      (hit = {
        list,
        get elements(): SetElement[] {
          return (elements ??= addressElements(list));
        },
      }),
    );
  }
  return hit;
}

/** A hash peer set whose elements are made on first read (made here: a kept chain keeps it, not a compile's scope). */
function hashPeerSet(
  name: string,
  f: Family,
  comment: string,
  hit: { readonly list: ReadonlyList<string>; readonly elements: SetElement[] },
): NamedSet {
  const made: NamedSet = {
    name,
    type: addressType(f),
    interval: false,
    get elements(): readonly SetElement[] {
      return hit.elements;
    },
    comment,
  };
  hashAddressesOf.set(made, hit.list);
  return made;
}

function accept(matches: Match[], comment: string): Rule {
  return { matches, counter: false, verdict: { kind: 'accept' }, comment };
}

// Listing order of one rule's new sets: peers, then ports, then named ports.
const SET_ORDER = ['peer4-', 'peer6-', 'port-', 'named4-', 'named6-'];
function setRank(s: NamedSet): number {
  return SET_ORDER.findIndex((prefix) => s.name.startsWith(prefix));
}

interface Compiled {
  readonly rules: Rule[];
  readonly terms: Term[];
}

function compileRule(input: PolicyChainInput, rule: ContributedRule, into: NamedSet[], targets: Term['targets']): Compiled {
  const created: NamedSet[] = [];
  let record: ReadsOfRule | undefined;
  if (input.reads !== undefined) input.reads.rules.push((record = { uses: [], named: [] }));
  const out = compileRuleInto(input, rule, created, targets, record);
  appendCreated(input.sets, created, into);
  return out;
}

function appendCreated(sets: SharedSets, created: NamedSet[], into: NamedSet[]): void {
  created.sort((a, b) => setRank(a) - setRank(b));
  sets.append(created);
  into.push(...created);
}

/**
 * A kept chain's effect on this compile's shared state, as compiling it
 * again would have it: its sets asked for in the same order (created here
 * when no earlier chain of this compile did), its named-port lists entered.
 * Returns the sets it is the first to use.
 */
export function replayChain(input: Pick<PolicyChainInput, 'sets' | 'namedTriples'>, reads: ChainReads): readonly NamedSet[] {
  const into: NamedSet[] = [];
  for (const r of reads.rules) {
    const created: NamedSet[] = [];
    for (const u of r.uses) input.sets.use(u.name, u.definition, () => u.set, created);
    for (const n of r.named) if (!input.namedTriples.has(n.name)) input.namedTriples.set(n.name, n.list);
    appendCreated(input.sets, created, into);
  }
  return into;
}

/** Local addresses of the policy's targets, per family. */
function targetAddresses(input: PolicyChainInput): Term['targets'] {
  const out = new Map<Family, string[]>();
  for (const pod of input.targets) {
    for (const text of pod.ips) {
      const ip = input.idx.ip(text);
      if (ip === undefined) continue;
      let l = out.get(ip.family);
      if (l === undefined) out.set(ip.family, (l = []));
      l.push(text);
    }
  }
  return out;
}

function selectorText(sel: LabelSelector): string {
  const t = formatSelector(sel);
  return t === '{}' ? 'all' : t;
}

function refsText(refs: readonly NamedPortRef[]): string {
  return [...new Set(refs.map((r) => `${r.name}/${r.protocol}`))].sort().join(',');
}

// The reads a kept chain makes again (chain-memo.ts), made outside
// compileRuleInto: a closure made there would hold its whole scope, the
// compile's input and shared sets included, for as long as the chain is kept.
function readRuleIntervals(
  resolver: PeerResolver,
  peers: readonly Peer[],
  ns: string,
  definition: string,
): () => FamilyIntervals {
  return () => resolver.ruleIntervals(peers, ns, definition);
}

function readEgressNamed(
  idx: ClusterIndex,
  resolver: PeerResolver,
  peers: readonly Peer[] | undefined,
  ns: string,
  f: Family,
  refs: readonly NamedPortRef[],
): () => readonly PortTriple[] {
  return () => egressNamedPorts(idx, peers === undefined ? undefined : resolver.destinations(peers, ns), f, refs);
}

function readDerived(
  resolver: PeerResolver,
  key: string,
  podPeers: readonly Extract<Peer, { kind: 'pods' }>[],
  ns: string,
  make: () => readonly PortTriple[],
): () => readonly PortTriple[] {
  return () => resolver.derived(key, podPeers, ns, make);
}

function compileRuleInto(
  input: PolicyChainInput,
  rule: ContributedRule,
  created: NamedSet[],
  targets: Term['targets'],
  record: ReadsOfRule | undefined,
): Compiled {
  const { policy, direction, families } = input;
  const deps = input.reads?.deps;
  const label = `${direction}[${rule.origin.index}]`;
  const termLabel = `${policy.origin.label} ${label}`;
  const ruleRef: TermRule = {
    chain: policyRuleChainName(input.policyId, direction, rule.origin.index),
    counts: {
      kind: policy.origin.kind,
      namespace: policy.origin.namespace,
      policy: policy.origin.name,
      rule: String(rule.origin.index),
      direction,
      action: 'Allow',
    },
    description: sanitizeComment(rule.origin.description),
  };
  const field = direction === 'ingress' ? 'saddr' : 'daddr';
  const peersDef = rule.peers === undefined ? undefined : peersDefinition(rule.peers, policy.namespace);
  let addrs: FamilyIntervals | undefined;
  if (rule.peers !== undefined && peersDef !== undefined) {
    const read = readRuleIntervals(input.peers, rule.peers, policy.namespace, peersDef);
    addrs = read();
    deps?.push({ read, value: addrs });
  }
  const use = (name: string, definition: string, make: () => NamedSet): NamedSet => {
    const set = input.sets.use(name, definition, make, created);
    record?.uses.push({ name, definition, set });
    return set;
  };

  /** The peer set's match and what it holds, as a term source. */
  const peerMatch = (f: Family): { match: Match; source: TermSource } | undefined => {
    if (rule.peers === undefined || peersDef === undefined || addrs === undefined) return undefined;
    const peers = rule.peers;
    const def = `peers\0${peersDef}`;
    const name = peerSetName(setId(def), f);
    // Pod addresses only: a plain hash set of addresses. With an ipBlock: an
    // interval set. nft (1.0.x) reads every interval set back from the kernel
    // before each command, so big pod sets must not be interval sets, or every
    // element update would cost as much as the whole set.
    const interval = !hasPodPeers(peers) || peers.some((p) => p.kind === 'ipBlock');
    const set = use(name, def, () => {
      const comment = sanitizeComment(`IPv${f} peers: ${describePeers(peers, policy.namespace, f)}`);
      if (interval) return { name, type: addressType(f), interval, elements: addressElements(addrs[f]), comment };
      return hashPeerSet(name, f, comment, hashElements(addrs[f]));
    });
    const about = (set.comment ?? name).replace(/^IPv[46] peers: /, '');
    const source: TermSource = interval
      ? { kind: 'ranges', key: name, about, ivs: listArray(addrs[f]) }
      : { kind: 'pods', key: name, about, addrs: hashAddresses(set) };
    return { match: { kind: 'addrSet', family: f, field, set: name }, source };
  };

  // Port alternatives: none (no port match), numeric (family-agnostic), named (per family).
  const ports = rule.ports;
  const numeric = (): { matches: Match[]; ports: TermPorts } | undefined => {
    if (ports === undefined) return { matches: [], ports: { kind: 'all' } };
    if (!hasNumericPorts(ports)) return undefined;
    const ranges = numericPortRanges(ports);
    const texts = ranges.map(portRangeText);
    // The ranges are the whole definition: a policy edit renames the set.
    const def = `ports\0${texts.join(',')}`;
    const name = portSetName(setId(def));
    use(name, def, () => ({
      name,
      type: 'inet_proto . inet_service',
      interval: true,
      elements: numericPortElements(ranges),
      comment: sanitizeComment(`ports: ${texts.join(', ')}`),
    }));
    return { matches: [{ kind: 'portSet', set: name }], ports: { kind: 'numeric', ranges } };
  };
  const refs = ports === undefined ? [] : namedPorts(ports);
  /** The named-port set's match, and its triples (local or remote side). */
  const namedMatch = (f: Family): { match: Match; name: string; about: string; triples: readonly PortTriple[] } | undefined => {
    if (refs.length === 0) return undefined;
    const wanted = refsText(refs);
    let def: string;
    let about: string;
    let triples: () => readonly PortTriple[];
    if (direction === 'ingress') {
      // On the policy's selected local pods: these only change together with
      // the pod chains, so an empty set is simply left out (allows nothing).
      const found = ingressNamedPorts(input.idx, input.targets, f, refs);
      if (found.length === 0) return undefined;
      def = `named-in\0${policy.namespace}\0${formatSelector(policy.podSelector)}\0${wanted}`;
      about = `local pods(${selectorText(policy.podSelector)}) in ns ${policy.namespace}`;
      triples = () => found;
    } else {
      // On destination pods anywhere: content follows churn, so the set
      // exists in every family the node uses, even while nobody serves it.
      if (!families.has(f)) return undefined;
      def = `named-eg\0${peersDef ?? '*'}\0${wanted}`;
      about = rule.peers === undefined ? 'every pod' : describePeers(rule.peers, policy.namespace, f);
      const peers = rule.peers;
      const resolve = readEgressNamed(input.idx, input.peers, peers, policy.namespace, f, refs);
      // Pod peers alone: kept until one of them changes. ipBlock peers and "every pod" read the whole index.
      const podPeers = peers?.filter((p) => p.kind === 'pods');
      if (peers !== undefined && podPeers !== undefined && podPeers.length === peers.length) {
        triples = readDerived(input.peers, `named-eg\0${f}\0${def}`, podPeers, policy.namespace, resolve);
        // Read even when an earlier chain of this compile made the set: a kept
        // chain reads it again as its compile did, which keeps the resolver's value in use.
        deps?.push({ read: triples, value: triples() });
      } else {
        triples = resolve;
        if (input.reads !== undefined) input.reads.volatile = true;
      }
    }
    const name = namedPortSetName(setId(def), f);
    let list = input.namedTriples.get(name);
    use(name, def, () => {
      list = triples();
      return {
        name,
        type: namedPortType(f),
        interval: false,
        elements: list.map(tripleElement),
        comment: sanitizeComment(`IPv${f} named ports ${wanted} of ${about}`),
      };
    });
    list ??= triples();
    input.namedTriples.set(name, list);
    record?.named.push({ name, list });
    const described = `named ports ${wanted} of ${about}`;
    return { match: { kind: 'namedPortSet', family: f, set: name }, name, about: described, triples: list };
  };

  const out: Compiled = { rules: [], terms: [] };
  const follows =
    rule.peers === undefined || hasPodPeers(rule.peers) ? { peers: rule.peers, namespace: policy.namespace } : undefined;
  const add = (matches: Match[], family: Family | undefined, source: TermSource, termPorts: TermPorts): void => {
    out.rules.push(accept(matches, label));
    // Egress named ports of an ipBlock are those of any pod inside it: every pod is followed.
    const followed =
      source.kind === 'named' && rule.peers?.some((p) => p.kind === 'ipBlock') !== false
        ? { follows: { peers: undefined, namespace: policy.namespace } }
        : source.kind === 'anywhere' || follows === undefined
          ? {}
          : { follows };
    out.terms.push({ label: termLabel, rule: ruleRef, direction, family, source, ports: termPorts, targets, ...followed });
  };
  /** A named-port rule: egress names come with the destination (the named set is the remote side). */
  const addNamed = (n: NonNullable<ReturnType<typeof namedMatch>>, f: Family, source: TermSource, peer: Match[]): void => {
    if (direction === 'egress')
      add([...peer, n.match], f, { kind: 'named', key: n.name, about: n.about, triples: n.triples }, { kind: 'remote' });
    else add([...peer, n.match], f, source, { kind: 'local', triples: n.triples });
  };
  if (rule.peers === undefined || addrs === undefined) {
    const num = numeric();
    if (num !== undefined) add(num.matches, undefined, { kind: 'anywhere' }, num.ports);
    for (const f of FAMILIES) {
      const n = namedMatch(f);
      if (n !== undefined) addNamed(n, f, { kind: 'anywhere' }, []);
    }
    return out;
  }
  // A family gets rules when its peer set can hold addresses: ipBlocks are
  // fixed (no address in a family: no rule, no set), pod peers follow churn
  // (the rule and its possibly empty set stay in every family the node uses).
  const dynamic = hasPodPeers(rule.peers);
  const blocks = dynamic ? input.peers.blockIntervals(rule.peers) : addrs;
  for (const f of FAMILIES) {
    if (dynamic ? !families.has(f) && blocks[f].length === 0 : addrs[f].length === 0) continue;
    const num = numeric();
    const n = namedMatch(f);
    const p = num === undefined && n === undefined ? undefined : peerMatch(f);
    if (p === undefined) continue;
    if (num !== undefined) add([p.match, ...num.matches], f, p.source, num.ports);
    if (n !== undefined) addNamed(n, f, p.source, [p.match]);
  }
  return out;
}

export function compilePolicyChain(input: PolicyChainInput): PolicyChainOutput {
  const { policy, direction } = input;
  const list = direction === 'ingress' ? policy.ingress : policy.egress;
  const sets: NamedSet[] = [];
  const rules: Rule[] = [];
  const terms: Term[] = [];
  const invalid = new Set<number>();
  const targets = targetAddresses(input);
  for (const rule of list) {
    // Fail closed: an invalid rule allows nothing, so it renders nothing.
    if (rule.invalid) invalid.add(rule.origin.index);
    else {
      const c = compileRule(input, rule, sets, targets);
      rules.push(...c.rules);
      terms.push(...c.terms);
    }
  }
  // The note goes first: comments are capped and names can be long.
  let note = '';
  if (list.length === 0) note = ' (no rules: allows nothing)';
  else if (invalid.size > 0) note = ` (invalid ${[...invalid].map((i) => `${direction}[${i}]`).join(',')} allow nothing)`;
  return {
    chain: {
      name: policyChainName(input.policyId, direction),
      role: 'policy',
      base: undefined,
      comment: sanitizeComment(`${direction} policy${note} ${policy.origin.label}`),
      rules,
    },
    sets,
    terms,
  };
}
