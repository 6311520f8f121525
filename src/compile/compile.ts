// ClusterState -> the nftables ruleset of one node, as data (see ruleset/ir.ts and
// docs/datapath.md). Only what the node needs is compiled: its active pods,
// the policies selecting at least one of them, and the peer addresses those
// policies name. Output order never depends on input order.
import { cidrInterval, mergeIntervals, parseCIDR } from '../model/ip.ts';
import { selectorMatches } from '../model/selector.ts';
import { byObjectKey } from '../model/state.ts';
import { isActivePod, objectKey } from '../model/types.ts';
import type { ClusterState, Direction, Family, NetworkPolicy, Pod } from '../model/types.ts';
import {
  dispatchMapName,
  localPodCidrSetName,
  podChainName,
  podId,
  policyChainName,
  policyId,
  sanitizeComment,
} from '../ruleset/ids.ts';
import { denyPathLimits, denyPathRules } from './deny-path.ts';
import { ClusterIndex } from './cluster-index.ts';
import type { Chain, CompiledRuleset, MapElement, NamedSet, Rule, RulesetStats, VerdictMap } from '../ruleset/ir.ts';
import { resolveOptions, type RenderOptions } from '../ruleset/options.ts';
import { PeerResolver } from './peers.ts';
import { compilePolicyChain } from './policy-rules.ts';
import { SharedSets } from './shared-sets.ts';
import { formatElement } from './v4.ts';

const DIRECTIONS: readonly Direction[] = ['ingress', 'egress'];
const FAMILIES: readonly Family[] = [4, 6];

// Base chain names: lower case, so they stand apart from the generated KUBE-* chains.
export const BASE_CHAINS = {
  forwardEgress: 'forward-egress',
  forwardIngress: 'forward-ingress',
  inputEgress: 'input-egress',
} as const;

// IPv6 neighbour discovery must work even for fully isolated pods.
const ND_TYPES = ['nd-neighbor-solicit', 'nd-neighbor-advert', 'nd-router-solicit', 'nd-router-advert'];

/** Active pods scheduled on the node, sorted by namespace/name. */
export function localPods(state: ClusterState, nodeName: string): Pod[] {
  return dedupe(state.pods.filter((p) => p.nodeName === nodeName && isActivePod(p)).sort(byObjectKey));
}

// A namespace/name appears once in a valid state; never emit a chain twice if not.
function dedupe<T extends { namespace: string; name: string }>(sorted: T[]): T[] {
  return sorted.filter((x, i) => {
    const prev = sorted[i - 1];
    return prev === undefined || byObjectKey(prev, x) !== 0;
  });
}

export interface RelevantPolicy {
  readonly policy: NetworkPolicy;
  readonly id: string;
  /** Local pods it selects, sorted. */
  readonly targets: readonly Pod[];
}

/** Policies that isolate at least one local pod in some direction, sorted by namespace/name. */
export function relevantPolicies(state: ClusterState, local: readonly Pod[]): RelevantPolicy[] {
  const byNs = new Map<string, Pod[]>();
  for (const p of local) {
    let l = byNs.get(p.namespace);
    if (l === undefined) byNs.set(p.namespace, (l = []));
    l.push(p);
  }
  const out: RelevantPolicy[] = [];
  for (const policy of dedupe([...state.policies].sort(byObjectKey))) {
    if (!policy.types.ingress && !policy.types.egress) continue;
    const pods = byNs.get(policy.namespace);
    if (pods === undefined) continue;
    const targets = pods.filter((p) => selectorMatches(policy.podSelector, p.labels));
    if (targets.length > 0) out.push({ policy, id: policyId(policy.namespace, policy.name), targets });
  }
  return out;
}

/**
 * `unknown`: the local pod CIDR sets, per family. After the dispatch, an
 * address in them that no map element claimed is a local endpoint the agent
 * does not know yet (a pod created a moment ago): dropped, fail closed.
 */
function baseChain(
  name: string,
  hook: 'forward' | 'input',
  priority: number,
  d: Direction,
  comment: string,
  unknown: readonly NamedSet[],
): Chain {
  const field = d === 'ingress' ? 'daddr' : 'saddr';
  const rules: Rule[] = [
    // Replies of connections that were allowed when they started.
    {
      matches: [{ kind: 'ctState', states: ['established', 'related'] }],
      counter: false,
      verdict: { kind: 'accept' },
      comment: undefined,
    },
    { matches: [{ kind: 'icmpv6Types', types: ND_TYPES }], counter: false, verdict: { kind: 'accept' }, comment: undefined },
    ...FAMILIES.map((f): Rule => ({
      matches: [],
      counter: false,
      verdict: { kind: 'vmap', family: f, field, map: dispatchMapName(d, f) },
      comment: undefined,
    })),
    ...unknown.map((s): Rule => ({
      matches: [{ kind: 'addrSet', family: s.type === 'ipv4_addr' ? 4 : 6, field, set: s.name }],
      counter: true,
      verdict: { kind: 'drop' },
      comment: 'unknown local endpoint',
    })),
  ];
  return { name, role: 'base', base: { hook, priority }, comment, rules };
}

/** The node's pod CIDRs as interval sets, one per family that has any (canonical, merged). */
function localCidrSets(state: ClusterState, nodeName: string): NamedSet[] {
  const node = state.nodes.find((n) => n.name === nodeName);
  const out: NamedSet[] = [];
  for (const f of FAMILIES) {
    const ivs = [];
    for (const text of node?.podCIDRs ?? []) {
      const c = parseCIDR(text);
      if (c.ok && c.cidr.family === f) ivs.push(cidrInterval(c.cidr));
    }
    if (ivs.length === 0) continue;
    const name = localPodCidrSetName(f);
    out.push({
      name,
      type: f === 4 ? 'ipv4_addr' : 'ipv6_addr',
      interval: true,
      elements: mergeIntervals(ivs).map(formatElement),
      comment: sanitizeComment(`pod CIDRs of node ${nodeName}`),
    });
  }
  return out;
}

function computeStats(
  sets: readonly NamedSet[],
  maps: readonly VerdictMap[],
  chains: readonly Chain[],
  localCount: number,
  policyCount: number,
): RulesetStats {
  let rules = 0;
  for (const c of chains) rules += c.rules.length;
  let elements = 0;
  for (const s of sets) elements += s.elements.length;
  for (const m of maps) elements += m.elements.length;
  return {
    chains: chains.length,
    rules,
    sets: sets.length,
    maps: maps.length,
    elements,
    localPods: localCount,
    policies: policyCount,
  };
}

export function compileNode(state: ClusterState, nodeName: string, opts?: Partial<RenderOptions>): CompiledRuleset {
  const idx = new ClusterIndex(state);
  return compileWith(state, nodeName, resolveOptions(opts), idx, new PeerResolver(idx));
}

/** compileNode with the lookups given: an index of `state` and a resolver over it (see node-compiler.ts). */
export function compileWith(
  state: ClusterState,
  nodeName: string,
  o: RenderOptions,
  idx: ClusterIndex,
  peers: PeerResolver,
): CompiledRuleset {
  const local = localPods(state, nodeName);
  const relevant = relevantPolicies(state, local);
  // With the node's pod CIDRs known, every active local pod is listed in the
  // maps and any other address in them is dropped (see baseChain).
  const unknown = o.unknownLocalEndpoints === 'drop' ? localCidrSets(state, nodeName) : [];
  const families = new Set<Family>(unknown.map((s) => (s.type === 'ipv4_addr' ? 4 : 6)));
  for (const p of local) {
    for (const text of p.ips) {
      const ip = idx.ip(text);
      if (ip !== undefined) families.add(ip.family);
    }
  }

  const shared = new SharedSets();
  const policyChains: Chain[] = [];
  // Per pod and direction: the chains of the policies isolating it, in policy order.
  const jumps = new Map<Pod, { ingress: Rule[]; egress: Rule[] }>();
  for (const r of relevant) {
    for (const d of DIRECTIONS) {
      if (!r.policy.types[d]) continue;
      const out = compilePolicyChain({
        idx,
        peers,
        sets: shared,
        families,
        policy: r.policy,
        policyId: r.id,
        direction: d,
        targets: r.targets,
      });
      policyChains.push(out.chain);
      const jump: Rule = {
        matches: [],
        counter: false,
        verdict: { kind: 'jump', chain: policyChainName(r.id, d) },
        comment: sanitizeComment(objectKey(r.policy)),
      };
      for (const pod of r.targets) {
        let j = jumps.get(pod);
        if (j === undefined) jumps.set(pod, (j = { ingress: [], egress: [] }));
        j[d].push(jump);
      }
    }
  }

  const podChains: Chain[] = [];
  const mapElems = new Map<string, { ip: bigint; el: MapElement }[]>();
  const seenKeys = new Set<string>();
  for (const pod of local) {
    const j = jumps.get(pod);
    if (j === undefined && unknown.length === 0) continue;
    const id = podId(pod.namespace, pod.name);
    for (const d of DIRECTIONS) {
      const isolating = j?.[d] ?? [];
      let chain: string | undefined;
      if (isolating.length > 0) {
        chain = podChainName(id, d);
        podChains.push({
          name: chain,
          role: 'pod',
          base: undefined,
          comment: sanitizeComment(`${d} of pod ${objectKey(pod)}`),
          rules: [...isolating, ...denyPathRules(pod, d, o)],
        });
      } else if (unknown.length === 0) {
        continue; // not isolated, and unknown addresses pass anyway: no element needed
      }
      // chain undefined: `accept` (known, not isolated), which ends only this base chain.
      for (const text of pod.ips) {
        const ip = idx.ip(text);
        if (ip === undefined) continue;
        const map = dispatchMapName(d, ip.family);
        // Two local pods can never share an address; if the input says so, first (sorted) wins.
        if (seenKeys.has(`${map} ${text}`)) continue;
        seenKeys.add(`${map} ${text}`);
        let l = mapElems.get(map);
        if (l === undefined) mapElems.set(map, (l = []));
        l.push({ ip: ip.value, el: { key: text, chain } });
      }
    }
  }

  const maps: VerdictMap[] = [];
  for (const d of ['egress', 'ingress'] as const) {
    for (const f of FAMILIES) {
      const name = dispatchMapName(d, f);
      const elems = (mapElems.get(name) ?? []).sort((a, b) => (a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : 0)).map((e) => e.el);
      maps.push({ name, family: f, direction: d, elements: elems });
    }
  }

  const baseChains = [
    baseChain(
      BASE_CHAINS.forwardEgress,
      'forward',
      0,
      'egress',
      'egress of local pods: routed, bridged and DNATed traffic',
      unknown,
    ),
    // After egress (priority filter + 1): a packet between two local pods passes both checks.
    baseChain(
      BASE_CHAINS.forwardIngress,
      'forward',
      1,
      'ingress',
      'ingress of local pods: routed, bridged and DNATed traffic',
      unknown,
    ),
    // Not on input: the node's own gateway address may lie in its pod CIDR.
    baseChain(BASE_CHAINS.inputEgress, 'input', 0, 'egress', 'egress of local pods to this node itself', []),
  ];
  const sets = [...unknown, ...shared.all()];

  const chains = [...policyChains, ...podChains, ...baseChains];
  const names = new Set<string>();
  for (const n of [...chains.map((c) => c.name), ...sets.map((s) => s.name)]) {
    // 48-bit hashes: a collision is practically impossible, but would be a confusing nft error.
    if (names.has(n)) throw new Error(`identifier collision on ${n}`);
    names.add(n);
  }

  return {
    table: o.table,
    comment: sanitizeComment(`managed by nft-netpol-agent, do not edit (edits are reverted): NetworkPolicy of node ${nodeName}`),
    node: nodeName,
    sets,
    maps,
    limits: denyPathLimits(o),
    chains,
    stats: computeStats(sets, maps, chains, local.length, relevant.length),
  };
}
