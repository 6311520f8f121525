// The policy kinds in force, in evaluation order: tiers in their order
// (kind.ts Tier), and within a tier the order of this list, which is also the
// order in which pod chains jump to policy chains and explain lists policies.
// A new kind is one entry here (see docs/architecture.md "Policy kinds").
import type { ClusterState } from '../model/types.ts';
import type { ContributedPolicy, PolicyKind } from './kind.ts';
import { networkPolicyKind } from './network-policy.ts';
import { namespaceNetworkPolicyKind, projectIsolationKind, workspaceIsolationKind } from './tenancy.ts';

export const POLICY_KINDS: readonly PolicyKind[] = [
  networkPolicyKind,
  // Tenancy (docs/tenancy.md): only in force when state.tenancy is set.
  namespaceNetworkPolicyKind,
  projectIsolationKind,
  workspaceIsolationKind,
];

/** Every contributed policy of `kinds` in the state, kind by kind in their order. */
export function contributedPolicies(state: ClusterState, kinds: readonly PolicyKind[] = POLICY_KINDS): ContributedPolicy[] {
  return kinds.flatMap((k) => k.policies(state));
}
