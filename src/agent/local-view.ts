// What /debug/state shows about this node, derived from a snapshot: the local
// pods and, per direction, the policies of every kind selecting each (the
// policies whose rules are the pod's allow list; an isolated pod with no rule
// matching is denied), and the ClusterNetworkPolicies whose subject selects
// each (with tier and priority).
import type { ContributedPolicy, TieredPolicy } from '../kinds/kind.ts';
import { contributedPolicies, tieredPolicies } from '../kinds/registry.ts';
import { tierPlace } from '../kinds/cluster-network-policy.ts';
import { selectorMatches } from '../model/selector.ts';
import { diffPods } from '../compile/node-compiler.ts';
import { isActivePod, objectKey } from '../model/types.ts';
import type { ClusterState, Labels, Pod } from '../model/types.ts';

export interface LocalPodView {
  /** ns/name */
  readonly pod: string;
  readonly ips: readonly string[];
  readonly phase: string | undefined;
  readonly labels: Labels;
  /** The policies selecting the pod for ingress (isolated when non-empty), as explain names them (ns/name for NetworkPolicies). */
  readonly ingress: readonly string[];
  readonly egress: readonly string[];
  /** The ClusterNetworkPolicies whose subject selects the pod, in evaluation order (Admin, then Baseline; by priority). */
  readonly clusterPolicies: readonly ClusterPolicyView[];
}

export interface ClusterPolicyView {
  /** `ClusterNetworkPolicy NAME` (the legacy kind's name for legacy objects). */
  readonly policy: string;
  readonly tier: 'Admin' | 'Baseline';
  readonly priority: number;
  /** `Admin tier, priority 10`. */
  readonly place: string;
  /** Its rules per direction (a selected pod is not isolated by them: the first matching rule decides). */
  readonly ingressRules: number;
  readonly egressRules: number;
}

export function localPodViews(state: ClusterState, nodeName: string): LocalPodView[] {
  const policies = contributedPolicies(state);
  const tiered = tieredPolicies(state);
  const nsLabels = new Map(state.namespaces.map((n) => [n.name, n.labels]));
  return state.pods
    .filter((p) => p.nodeName === nodeName && isActivePod(p))
    .map((p) => viewOf(policies, tiered, nsLabels.get(p.namespace), p));
}

function viewOf(
  policies: readonly ContributedPolicy[],
  tiered: readonly TieredPolicy[],
  nsLabels: Labels | undefined,
  pod: Pod,
): LocalPodView {
  const ingress: string[] = [];
  const egress: string[] = [];
  for (const pol of policies) {
    if (pol.namespace !== pod.namespace || !selectorMatches(pol.podSelector, pod.labels)) continue;
    if (pol.types.ingress) ingress.push(pol.origin.label);
    if (pol.types.egress) egress.push(pol.origin.label);
  }
  const clusterPolicies: ClusterPolicyView[] = [];
  if (nsLabels !== undefined)
    for (const t of tiered) {
      if (!selectorMatches(t.subject.namespaceSelector, nsLabels) || !selectorMatches(t.subject.podSelector, pod.labels))
        continue;
      clusterPolicies.push({
        policy: t.origin.label,
        tier: t.tier === 'admin' ? 'Admin' : 'Baseline',
        priority: t.priority,
        place: tierPlace(t.tier, t.priority),
        ingressRules: t.ingress.length,
        egressRules: t.egress.length,
      });
    }
  return { pod: objectKey(pod), ips: pod.ips, phase: pod.phase, labels: pod.labels, ingress, egress, clusterPolicies };
}

/** IP -> owning active pod (ns/name). */
export function podIPOwners(state: ClusterState): Map<string, string> {
  const owners = new Map<string, string>();
  for (const p of state.pods) {
    if (!isActivePod(p)) continue;
    for (const ip of p.ips) owners.set(ip, objectKey(p));
  }
  return owners;
}

/**
 * Pod IPs that lost their owner between two applied states: the pod is gone
 * or finished, or the IP now belongs to another pod. Their conntrack entries
 * must go so that established flows lose their allowance too.
 */
export function releasedIPs(prev: ReadonlyMap<string, string>, next: ReadonlyMap<string, string>): string[] {
  const out: string[] = [];
  for (const [ip, owner] of prev) if (next.get(ip) !== owner) out.push(ip);
  return out.sort();
}

/**
 * releasedIPs(podIPOwners(prev), podIPOwners(next)) for two snapshots, from
 * their pod diff (diffPods: the source keeps an unchanged pod's object, so
 * the common head and tail cost one identity comparison per pod): the old
 * and new object of a changed pod are paired by key. Past the diff's limit
 * (a resync), the map version.
 */
export function releasedPodIPs(prev: ClusterState, next: ClusterState): string[] {
  const d = diffPods(prev.pods, next.pods, Math.max(256, prev.pods.length >> 3));
  if (d === undefined) return releasedIPs(podIPOwners(prev), podIPOwners(next));
  const now = new Map<string, Pod>();
  for (const q of d.added) now.set(objectKey(q), q);
  const out = new Set<string>();
  for (const p of d.removed) {
    if (!isActivePod(p)) continue;
    const q = now.get(objectKey(p));
    const kept = q !== undefined && isActivePod(q) ? q.ips : [];
    for (const ip of p.ips) if (!kept.includes(ip)) out.add(ip);
  }
  return [...out].sort();
}
