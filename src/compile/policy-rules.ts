// One KUBE-NWPLCY-<id>-IN|-EG chain: every valid rule of one policy direction
// as nft rules ending in `accept`, with the sets they match on. A rule
// allows (peer AND port); alternatives (several peers, several ports) live in
// set elements, so the rule count per policy rule stays small and fixed.
import type { Direction, Family, NetworkPolicy, Pod, Rule as PolicyRule } from '../model/types.ts';
import { namedPortSetName, peerSetName, policyChainName, portSetName, ruleId, sanitizeComment } from '../nft/ids.ts';
import type { ClusterIndex } from './cluster-index.ts';
import type { Chain, Match, NamedSet, Rule } from './ir.ts';
import type { PeerResolver } from './peers.ts';
import { formatElement } from './v4.ts';
import { egressNamedPortElements, hasNumericPorts, ingressNamedPortElements, namedPorts, numericPortElements } from './ports.ts';

const FAMILIES: readonly Family[] = [4, 6];

export interface PolicyChainInput {
  readonly idx: ClusterIndex;
  readonly peers: PeerResolver;
  readonly policy: NetworkPolicy;
  readonly policyId: string;
  readonly direction: Direction;
  /** Local pods the policy selects: the destinations of ingress named ports. */
  readonly targets: readonly Pod[];
}

export interface PolicyChainOutput {
  readonly chain: Chain;
  readonly sets: readonly NamedSet[];
}

function accept(matches: Match[], comment: string): Rule {
  return { matches, counter: false, verdict: { kind: 'accept' }, comment };
}

// Listing order of one rule's sets: peers, then ports, then named ports.
const SET_ORDER = ['peer4-', 'peer6-', 'port-', 'named4-', 'named6-'];
function setRank(s: NamedSet): number {
  return SET_ORDER.findIndex((prefix) => s.name.startsWith(prefix));
}

function compileRule(input: PolicyChainInput, rule: PolicyRule, index: number, into: NamedSet[]): Rule[] {
  const sets: NamedSet[] = [];
  const rules = compileRuleInto(input, rule, index, sets);
  into.push(...sets.sort((a, b) => setRank(a) - setRank(b)));
  return rules;
}

function compileRuleInto(input: PolicyChainInput, rule: PolicyRule, index: number, sets: NamedSet[]): Rule[] {
  const { policy, direction } = input;
  const rid = ruleId(policy.namespace, policy.name, direction, index);
  const label = `${direction}[${index}]`;
  const owner = `${policy.namespace}/${policy.name}`;
  const field = direction === 'ingress' ? 'saddr' : 'daddr';
  const addrs = rule.peers === undefined ? undefined : input.peers.ruleIntervals(rule.peers, policy.namespace);

  // Sets are created on first use, so a set nothing refers to is never rendered.
  const made = new Map<string, Match>();
  const use = (name: string, make: () => { set: NamedSet; match: Match }): Match => {
    let m = made.get(name);
    if (m === undefined) {
      const { set, match } = make();
      sets.push(set);
      made.set(name, (m = match));
    }
    return m;
  };
  const peerMatch = (f: Family): Match | undefined => {
    const ivs = addrs?.[f] ?? [];
    if (ivs.length === 0) return undefined;
    const name = peerSetName(rid, f);
    return use(name, () => ({
      set: { name, type: f === 4 ? 'ipv4_addr' : 'ipv6_addr', interval: true, elements: ivs.map(formatElement), comment: sanitizeComment(`${label} peers IPv${f} of ${owner}`) },
      match: { kind: 'addrSet', family: f, field, set: name },
    }));
  };

  // Port alternatives: none (no port match), numeric (family-agnostic), named (per family).
  const ports = rule.ports;
  const numeric = (): Match[] | undefined => {
    if (ports === undefined) return [];
    if (!hasNumericPorts(ports)) return undefined;
    const name = portSetName(rid);
    return [
      use(name, () => ({
        set: { name, type: 'inet_proto . inet_service', interval: true, elements: numericPortElements(ports), comment: sanitizeComment(`${label} ports of ${owner}`) },
        match: { kind: 'portSet', set: name },
      })),
    ];
  };
  const refs = ports === undefined ? [] : namedPorts(ports);
  const namedMatch = (f: Family): Match | undefined => {
    if (refs.length === 0) return undefined;
    const elements =
      direction === 'ingress'
        ? ingressNamedPortElements(input.idx, input.targets, f, refs)
        : egressNamedPortElements(input.idx, rule.peers === undefined ? undefined : input.peers.destinations(rule.peers, policy.namespace), f, refs);
    // A named port nobody serves (in this family) allows nothing.
    if (elements.length === 0) return undefined;
    const name = namedPortSetName(rid, f);
    return use(name, () => ({
      set: { name, type: f === 4 ? 'ipv4_addr . inet_proto . inet_service' : 'ipv6_addr . inet_proto . inet_service', interval: false, elements, comment: sanitizeComment(`${label} named ports IPv${f} of ${owner}`) },
      match: { kind: 'namedPortSet', family: f, set: name },
    }));
  };

  const out: Rule[] = [];
  if (addrs === undefined) {
    const num = numeric();
    if (num !== undefined) out.push(accept(num, label));
    for (const f of FAMILIES) {
      const n = namedMatch(f);
      if (n !== undefined) out.push(accept([n], label));
    }
    return out;
  }
  // A family the peers have no address in gets no rule: it could match nothing.
  for (const f of FAMILIES) {
    if (addrs[f].length === 0) continue;
    const num = numeric();
    const n = namedMatch(f);
    const p = num === undefined && n === undefined ? undefined : peerMatch(f);
    if (p === undefined) continue;
    if (num !== undefined) out.push(accept([p, ...num], label));
    if (n !== undefined) out.push(accept([p, n], label));
  }
  return out;
}

export function compilePolicyChain(input: PolicyChainInput): PolicyChainOutput {
  const { policy, direction } = input;
  const list = direction === 'ingress' ? policy.ingress : policy.egress;
  const sets: NamedSet[] = [];
  const rules: Rule[] = [];
  const invalid: number[] = [];
  list.forEach((rule, i) => {
    // Fail closed: an invalid rule allows nothing, so it renders nothing.
    if (rule.invalid) invalid.push(i);
    else rules.push(...compileRule(input, rule, i, sets));
  });
  // The note goes first: comments are capped and names can be long.
  let note = '';
  if (list.length === 0) note = ' (no rules: allows nothing)';
  else if (invalid.length > 0) note = ` (invalid ${invalid.map((i) => `${direction}[${i}]`).join(',')} allow nothing)`;
  return {
    chain: {
      name: policyChainName(input.policyId, direction),
      role: 'policy',
      base: undefined,
      comment: sanitizeComment(`${direction} policy${note} ${policy.namespace}/${policy.name}`),
      rules,
    },
    sets,
  };
}
