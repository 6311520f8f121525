// The policy kinds in force, in evaluation order: tiers in their order
// (kind.ts Tier), and within a tier the order of this list, which is also the
// order in which pod chains jump to policy chains and explain lists policies.
// A new kind is one entry here (see docs/architecture.md "Policy kinds").
import { listArray } from '../model/list.ts';
import type { ClusterState } from '../model/types.ts';
import { compareTiered } from './kind.ts';
import type { ContributedPolicy, PolicyKind, TieredPolicy } from './kind.ts';
import { clusterNetworkPolicyKind } from './cluster-network-policy.ts';
import { networkPolicyKind } from './network-policy.ts';
import { namespaceNetworkPolicyKind, projectIsolationKind, workspaceIsolationKind } from './tenancy.ts';

export const POLICY_KINDS: readonly PolicyKind[] = [
  networkPolicyKind,
  // Tenancy (docs/tenancy.md): only in force when state.tenancy is set.
  namespaceNetworkPolicyKind,
  projectIsolationKind,
  workspaceIsolationKind,
  // Ordered tiers (Admin before, Baseline after the allow-list kinds): policies by priority.
  clusterNetworkPolicyKind,
];

/** Every contributed policy of `kinds` in the state, kind by kind in their order. */
export function contributedPolicies(state: ClusterState, kinds: readonly PolicyKind[] = POLICY_KINDS): ContributedPolicy[] {
  return kinds.flatMap((k) => (k.tier === 'allow-list' ? listArray(k.policies(state)) : []));
}

/** Every policy of the ordered tiers (admin, then baseline) of `kinds`, in evaluation order (kind.ts compareTiered). */
export function tieredPolicies(state: ClusterState, kinds: readonly PolicyKind[] = POLICY_KINDS): TieredPolicy[] {
  const out = kinds.flatMap((k) => (k.tier === 'ordered' ? k.tieredPolicies(state) : []));
  return out.length > 1 ? out.sort(compareTiered) : out;
}
