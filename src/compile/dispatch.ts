// The fixed part of the table and the way into the per-pod chains: the base
// chains on the forward and input hooks, the verdict maps that dispatch a
// local pod's address to its KUBE-POD-FW-* chain, and those pod chains
// (jumps to the policy chains isolating the pod, then the deny rule).
import { denyPathRules } from './deny-path.ts';
import { DIRECTIONS, FAMILIES, objectKey } from '../model/types.ts';
import type { Direction, Pod } from '../model/types.ts';
import { dispatchMapName, podChainName, podId, sanitizeComment } from '../ruleset/ids.ts';
import type { Chain, MapElement, Match, Rule, VerdictMap } from '../ruleset/ir.ts';
import type { RenderOptions } from '../ruleset/options.ts';
import type { ClusterIndex } from './cluster-index.ts';
import type { PodCidrSet } from './local-endpoints.ts';
import type { PodJumps } from './policy-chains.ts';
import type { Tiers } from './tiers.ts';

// Base chain names: lower case, so they stand apart from the generated KUBE-* chains.
export const BASE_CHAINS = {
  forwardEgress: 'forward-egress',
  forwardIngress: 'forward-ingress',
  inputEgress: 'input-egress',
} as const;

// IPv6 neighbour discovery must work even for fully isolated pods.
export const ND_TYPES = ['nd-neighbor-solicit', 'nd-neighbor-advert', 'nd-router-solicit', 'nd-router-advert'];

/**
 * `unknown`: the local pod CIDR sets, per family. After the dispatch, an
 * address in them that no map element claimed is a local endpoint the agent
 * does not know yet (a pod created a moment ago): dropped, fail closed.
 * `before`: rules between the fixed accepts and the dispatch.
 * `unknownMatches`: what the unknown-endpoint drop also requires.
 */
function baseChain(
  name: string,
  hook: 'forward' | 'input',
  priority: number,
  d: Direction,
  comment: string,
  unknown: readonly PodCidrSet[],
  before: readonly Rule[] = [],
  unknownMatches: readonly Match[] = [],
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
    ...before,
    ...FAMILIES.map((f): Rule => ({
      matches: [],
      counter: false,
      verdict: { kind: 'vmap', family: f, field, map: dispatchMapName(d, f) },
      comment: undefined,
    })),
    ...unknown.map((c): Rule => ({
      matches: [{ kind: 'addrSet', family: c.family, field, set: c.set.name }, ...unknownMatches],
      counter: true,
      verdict: { kind: 'drop' },
      comment: 'unknown local endpoint',
    })),
  ];
  return { name, role: 'base', base: { hook, priority }, comment, rules };
}

// --allow-pod-to-node: what reaches the input hook addressed to one of the
// node's own addresses is traffic to the node itself; accepted before any
// pod's egress is looked at (broadcast and multicast still are).
const POD_TO_NODE: Rule = {
  matches: [{ kind: 'fibLocal', field: 'daddr', local: true }],
  counter: false,
  verdict: { kind: 'accept' },
  comment: 'pod to its own node (--allow-pod-to-node)',
};

export function baseChains(podCidrs: readonly PodCidrSet[], o: Pick<RenderOptions, 'allowPodToNode'>): Chain[] {
  return [
    baseChain(
      BASE_CHAINS.forwardEgress,
      'forward',
      0,
      'egress',
      'egress of local pods: routed, bridged and DNATed traffic',
      podCidrs,
    ),
    // After egress (priority filter + 1): a packet between two local pods passes both checks.
    baseChain(
      BASE_CHAINS.forwardIngress,
      'forward',
      1,
      'ingress',
      'ingress of local pods: routed, bridged and DNATed traffic',
      podCidrs,
    ),
    // On input, the node's own addresses as sources are the node talking to
    // itself (its gateway address may lie in its pod CIDR), never a pod.
    baseChain(
      BASE_CHAINS.inputEgress,
      'input',
      0,
      'egress',
      'egress of local pods to this node itself',
      podCidrs,
      o.allowPodToNode ? [POD_TO_NODE] : [],
      [{ kind: 'fibLocal', field: 'saddr', local: false }],
    ),
  ];
}

export interface Dispatch {
  readonly podChains: readonly Chain[];
  readonly maps: readonly VerdictMap[];
}

function tierJump(pod: Pod, tier: 'admin' | 'baseline', d: Direction, tiers: Tiers | undefined): Rule[] {
  const chain = tiers?.lookup(pod, tier, d);
  return chain === undefined ? [] : [{ matches: [], counter: false, verdict: { kind: 'jump', chain }, comment: `${tier} tier` }];
}

/**
 * A local pod's chain of one direction, in tier order: the Admin tier's
 * lookups (when an Admin policy selects it), then, if NetworkPolicies isolate
 * it, their jumps and the deny tail (final), else the Baseline tier's lookups;
 * falling off the end accepts. Empty: the pod needs no chain.
 */
function podChainRules(pod: Pod, d: Direction, isolating: readonly Rule[], tiers: Tiers | undefined, o: RenderOptions): Rule[] {
  const admin = tierJump(pod, 'admin', d, tiers);
  if (isolating.length > 0) return [...admin, ...isolating, ...denyPathRules(pod, d, o)];
  return [...admin, ...tierJump(pod, 'baseline', d, tiers)];
}

/**
 * Pod chains of the local pods some policy isolates or a tier selects, and
 * the verdict maps leading to them. With pod CIDRs known (`listAll`), every
 * local pod gets map elements, `accept` in a direction without a pod chain.
 */
export function dispatch(
  local: readonly Pod[],
  jumps: ReadonlyMap<Pod, PodJumps>,
  listAll: boolean,
  o: RenderOptions,
  idx: ClusterIndex,
  tiers?: Tiers,
): Dispatch {
  const podChains: Chain[] = [];
  const mapElems = new Map<string, { ip: bigint; el: MapElement }[]>();
  const seenKeys = new Set<string>();
  for (const pod of local) {
    const j = jumps.get(pod);
    if (j === undefined && !listAll && (tiers === undefined || tiers.policies === 0)) continue;
    const id = podId(pod.namespace, pod.name);
    for (const d of DIRECTIONS) {
      const rules = podChainRules(pod, d, j?.[d] ?? [], tiers, o);
      let chain: string | undefined;
      if (rules.length > 0) {
        chain = podChainName(id, d);
        podChains.push({
          name: chain,
          role: 'pod',
          base: undefined,
          comment: sanitizeComment(`${d} of pod ${objectKey(pod)}`),
          rules,
        });
      } else if (!listAll) {
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
      maps.push({ name, kind: 'dispatch', family: f, direction: d, interval: false, elements: elems });
    }
  }
  return { podChains, maps };
}
