// What the node itself holds: its active pods, the address families they use,
// and (when unknown local endpoints are dropped) its pod CIDRs as sets.
import { cidrInterval, mergeIntervals, parseCIDR } from '../model/ip.ts';
import { byObjectKey, uniqueByKey } from '../model/state.ts';
import { FAMILIES, isActivePod } from '../model/types.ts';
import type { ClusterState, Family, Pod } from '../model/types.ts';
import { localPodCidrSetName, sanitizeComment } from '../ruleset/ids.ts';
import { addressType } from '../ruleset/ir.ts';
import type { NamedSet } from '../ruleset/ir.ts';
import type { RenderOptions } from '../ruleset/options.ts';
import type { ClusterIndex } from './cluster-index.ts';
import { addressElements } from './v4.ts';

/** Active pods scheduled on the node, sorted by namespace/name. */
export function localPods(state: ClusterState, nodeName: string): Pod[] {
  return uniqueByKey(state.pods.filter((p) => p.nodeName === nodeName && isActivePod(p)).sort(byObjectKey), (p) => p);
}

/** One family's local pod CIDRs (see dispatch.ts: what no map element claims in them is dropped). */
export interface PodCidrSet {
  readonly family: Family;
  readonly set: NamedSet;
}

export interface LocalEndpoints {
  /** Active pods of the node, sorted. */
  readonly pods: readonly Pod[];
  /** The node's pod CIDR sets; empty unless unknown local endpoints are dropped. */
  readonly podCidrs: readonly PodCidrSet[];
  /** Families the node's pods use (their IPs and pod CIDRs). */
  readonly families: ReadonlySet<Family>;
}

export function localEndpoints(state: ClusterState, nodeName: string, o: RenderOptions, idx: ClusterIndex): LocalEndpoints {
  // The index keeps them across compiles (node-compiler.ts): the list of
  // localPods(state, nodeName), unless keys repeat (an invalid state: then which
  // one stays follows the state's order, as there).
  const kept = idx.podsOnNode(nodeName);
  const unique = uniqueByKey(kept, (p) => p);
  const pods = unique.length === kept.length ? unique : localPods(state, nodeName);
  // With the node's pod CIDRs known, every active local pod is listed in the
  // maps and any other address in them is dropped (see dispatch.ts).
  const podCidrs = o.unknownLocalEndpoints === 'drop' ? localCidrSets(state, nodeName) : [];
  const families = new Set<Family>(podCidrs.map((c) => c.family));
  for (const p of pods) {
    for (const text of p.ips) {
      const ip = idx.ip(text);
      if (ip !== undefined) families.add(ip.family);
    }
  }
  return { pods, podCidrs, families };
}

/** The node's pod CIDRs as interval sets, one per family that has any (canonical, merged). */
function localCidrSets(state: ClusterState, nodeName: string): PodCidrSet[] {
  const node = state.nodes.find((n) => n.name === nodeName);
  const out: PodCidrSet[] = [];
  for (const family of FAMILIES) {
    const ivs = [];
    for (const text of node?.podCIDRs ?? []) {
      const c = parseCIDR(text);
      if (c.ok && c.cidr.family === family) ivs.push(cidrInterval(c.cidr));
    }
    if (ivs.length === 0) continue;
    const set: NamedSet = {
      name: localPodCidrSetName(family),
      type: addressType(family),
      interval: true,
      elements: addressElements(mergeIntervals(ivs)),
      comment: sanitizeComment(`pod CIDRs of node ${nodeName}`),
    };
    out.push({ family, set });
  }
  return out;
}
