// The applied-status API: one cluster-scoped NodePolicyStatus per node (named
// after it, owned by its Node), whose status only that node's agent writes,
// and one coordination.k8s.io Lease per node in the agent namespace as the
// heartbeat. Shapes and names shared by the agent's writer, the `status`
// command and the CRD in daemonset/.
import { STATUS_ENTRY_KINDS, type StatusEntryKind } from '../kinds/api-kinds.ts';
import { CLUSTER_POLICY_KINDS, type ClusterPolicyKind } from '../model/normalize-cluster-policy.ts';

export const STATUS_GROUP = 'nft-netpol.io';
export const STATUS_VERSION = 'v1alpha1';
export const STATUS_API_VERSION = `${STATUS_GROUP}/${STATUS_VERSION}`;
export const STATUS_KIND = 'NodePolicyStatus';
export const STATUS_PLURAL = 'nodepolicystatuses';

/** The agent namespace of the DaemonSet (Leases live there). */
export const DEFAULT_AGENT_NAMESPACE = 'nft-netpol-system';
/** Lease holder prefix; the Lease itself is named after the node. */
export const LEASE_HOLDER = 'nft-netpol-agent';

/**
 * The kinds a policy entry can name (docs/tenancy.md for the tenancy kinds):
 * a NamespaceNetworkPolicy by its namespace and name; a namespace's isolation
 * as ProjectIsolation (namespace and name: the namespace) or
 * WorkspaceIsolation (namespace: the isolated namespace, name: its workspace);
 * a ClusterNetworkPolicy (or a legacy AdminNetworkPolicy /
 * BaselineAdminNetworkPolicy) by its name, namespace ''.
 */
export type PolicyKind = StatusEntryKind;
/** The entry kinds, from the API kind descriptors (kinds/api-kinds.ts): policy objects first, then isolation, then cluster kinds. */
export const POLICY_KINDS: readonly PolicyKind[] = STATUS_ENTRY_KINDS;

/** The status entry kind of a ClusterNetworkPolicy model object (sourceKind: the kind it was read from). */
export function clusterPolicyKind(p: { readonly sourceKind: string }): ClusterPolicyKind {
  return CLUSTER_POLICY_KINDS.find((k) => k === p.sourceKind) ?? 'ClusterNetworkPolicy';
}

/** An entry's kind: entries written without one (agents that only reported NetworkPolicy) are NetworkPolicy's. */
export function entryKind(e: { readonly kind?: string }): string {
  return e.kind ?? 'NetworkPolicy';
}

/** One policy that selects at least one active pod of the node, as the kernel enforces it. */
export interface AppliedPolicy {
  /** Always written; read with entryKind (absent: NetworkPolicy). */
  readonly kind: PolicyKind;
  readonly namespace: string;
  readonly name: string;
  readonly uid?: string;
  /** metadata.generation of the version in force. */
  readonly generation?: number;
  readonly resourceVersion?: string;
  /** When this version (uid, generation, resourceVersion) was first in force on the node. RFC 3339. */
  readonly appliedTime: string;
  /** Active local pods it selects. */
  readonly localPods: number;
  /** Its validation errors ("spec.ingress[0].ports[1].endPort: must be >= port (8080)"); enforced fail-closed. */
  readonly invalidFields?: readonly string[];
  /** Annotated nft-netpol.io/staged: "true": not enforced; the node runs it in the shadow path only (compile/staged.ts). */
  readonly staged?: boolean;
}

export type ApplyResultText = 'Applied' | 'Failed';

export interface StatusCounts {
  readonly localPods: number;
  readonly policies: number;
  readonly chains: number;
  readonly rules: number;
  readonly sets: number;
  readonly elements: number;
}

/** `.status` of a NodePolicyStatus. */
export interface NodeStatusContent {
  /** The kernel holds exactly what was last applied (false after a failed apply or detected drift). */
  readonly inSync: boolean;
  /** "sha256:<hex>" of the full ruleset script in force (the text `render` prints). */
  readonly rulesetHash?: string;
  /** When the ruleset in force (or the last failure) happened. RFC 3339. */
  readonly lastApplyTime?: string;
  readonly lastApplyResult?: ApplyResultText;
  /** The last failure's message; absent once an apply succeeds. */
  readonly lastError?: string;
  readonly agentVersion: string;
  readonly nftVersion?: string;
  readonly counts: StatusCounts;
  /** Sorted by kind, namespace, name. */
  readonly policies: readonly AppliedPolicy[];
}

export interface OwnerReference {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
}

/** The object as read from the API (fields we use). */
export interface NodePolicyStatusObject {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata: {
    readonly name: string;
    readonly uid?: string;
    readonly resourceVersion?: string;
    readonly creationTimestamp?: string | Date;
    readonly ownerReferences?: readonly OwnerReference[];
  };
  readonly spec?: { readonly nodeName?: string };
  readonly status?: Partial<NodeStatusContent>;
}

/** The Lease fields we read and write. */
export interface LeaseObject {
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly resourceVersion?: string };
  readonly spec?: {
    readonly holderIdentity?: string;
    readonly leaseDurationSeconds?: number;
    readonly renewTime?: string | Date;
    readonly acquireTime?: string | Date;
  };
}
