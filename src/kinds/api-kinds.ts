// The object kinds the agent reads from the API, one descriptor each: what is
// specific to a kind at the API edge (its group/version/plural and scope,
// whether it is an optional CRD, its normalizer, the RBAC verbs it needs, the
// Event reason for its invalid objects, its names in `status` and its entries
// in NodePolicyStatus, and the engine kinds of registry.ts it feeds). The kube
// edge, the Events, `status` and the RBAC test look kinds up here instead of
// spelling them out; a new kind is one entry (docs/architecture.md "Adding a
// kind"). Data plus the model's normalizer, nothing else.
import type { Normalized } from '../model/normalize.ts';
import {
  normalizeAdminNetworkPolicy,
  normalizeBaselineAdminNetworkPolicy,
  normalizeClusterNetworkPolicy,
  normalizeNamespace,
  normalizeNamespacePolicy,
  normalizeNode,
  normalizePod,
  normalizePolicy,
  normalizeService,
  normalizeWorkspace,
} from '../model/normalize.ts';
import type {
  ClusterNetworkPolicy,
  Namespace,
  NamespaceNetworkPolicy,
  NetworkPolicy,
  Node,
  Pod,
  Service,
  Workspace,
} from '../model/types.ts';
import { CLUSTER_NETWORK_POLICY } from './cluster-network-policy.ts';
import { NETWORK_POLICY } from './network-policy.ts';
import { NAMESPACE_NETWORK_POLICY, PROJECT_ISOLATION, WORKSPACE_ISOLATION } from './tenancy.ts';

/**
 * When the kube source watches a kind:
 * - 'always': a fixed watch (the API server always serves it);
 * - 'tenancy': with tenancy on (docs/tenancy.md), while its CRD is installed;
 * - 'cluster-policies': unless --no-cluster-policies, while its CRD is installed;
 * - 'never': read from files only (WorkspaceTemplate: its Workspaces are watched).
 */
export type WatchedWhen = 'always' | 'tenancy' | 'cluster-policies' | 'never';

/** What `status` answers about when asked for a kind by name. */
export type StatusTargetKind =
  | 'NetworkPolicy'
  | 'NamespaceNetworkPolicy'
  | 'namespace'
  | 'workspace'
  | 'ClusterNetworkPolicy'
  | 'AdminNetworkPolicy'
  | 'BaselineAdminNetworkPolicy';

/**
 * The kinds of the entries of NodePolicyStatus (status/types.ts PolicyKind):
 * the policy objects, and a namespace's project or workspace isolation.
 */
export type StatusEntryKind =
  | 'NetworkPolicy'
  | 'NamespaceNetworkPolicy'
  | 'ProjectIsolation'
  | 'WorkspaceIsolation'
  | 'ClusterNetworkPolicy'
  | 'AdminNetworkPolicy'
  | 'BaselineAdminNetworkPolicy';

export interface ApiKind<T> {
  /** The object's kind, as in its manifests. */
  readonly kind: string;
  /** '' for the core group. */
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly namespaced: boolean;
  /** A custom resource that may be absent: watched only while installed (kube/optional-watch.ts). */
  readonly optional: boolean;
  readonly watched: WatchedWhen;
  /** Raw object -> model (src/model), the same function the file loader uses. */
  readonly normalize: (raw: unknown) => Normalized<T>;
  /** What daemonset/clusterrole.yaml grants on `plural` (informers only: list and watch). */
  readonly verbs: readonly string[];
  /** The reason of the Warning Event about an invalid object of this kind; undefined: never reported. */
  readonly invalidReason: string | undefined;
  /**
   * `status` names (kubectl's: singular, plural, short; also accepted with
   * `.group`) and what they ask about; undefined: not a `status` target.
   */
  readonly status:
    { readonly names: readonly string[]; readonly aliases: readonly string[]; readonly target: StatusTargetKind } | undefined;
  /** The NodePolicyStatus entry kinds its policies are reported as (status/types.ts PolicyKind). */
  readonly statusEntries: readonly StatusEntryKind[];
  /**
   * The engine kinds (registry.ts POLICY_KINDS, by `kind`) whose policies its
   * objects are or turn on; none for the inputs every kind reads (pods, nodes, services).
   */
  readonly engineKinds: readonly string[];
}

const LIST_WATCH = ['list', 'watch'] as const;

export const POD_API: ApiKind<Pod> = {
  kind: 'Pod',
  group: '',
  version: 'v1',
  plural: 'pods',
  namespaced: true,
  optional: false,
  watched: 'always',
  normalize: normalizePod,
  verbs: LIST_WATCH,
  invalidReason: undefined,
  status: undefined,
  statusEntries: [],
  engineKinds: [],
};

export const NAMESPACE_API: ApiKind<Namespace> = {
  kind: 'Namespace',
  group: '',
  version: 'v1',
  plural: 'namespaces',
  namespaced: false,
  optional: false,
  watched: 'always',
  normalize: normalizeNamespace,
  verbs: LIST_WATCH,
  invalidReason: undefined,
  // A namespace's isolation (project or workspace isolation).
  status: { names: ['namespace', 'namespaces', 'ns'], aliases: ['projectisolation'], target: 'namespace' },
  statusEntries: [PROJECT_ISOLATION],
  engineKinds: [PROJECT_ISOLATION, WORKSPACE_ISOLATION],
};

export const NODE_API: ApiKind<Node> = {
  kind: 'Node',
  group: '',
  version: 'v1',
  plural: 'nodes',
  namespaced: false,
  optional: false,
  watched: 'always',
  normalize: normalizeNode,
  verbs: LIST_WATCH,
  invalidReason: undefined,
  status: undefined,
  statusEntries: [],
  engineKinds: [],
};

export const SERVICE_API: ApiKind<Service> = {
  kind: 'Service',
  group: '',
  version: 'v1',
  plural: 'services',
  namespaced: true,
  optional: false,
  // Only those NamespaceNetworkPolicy service peers and the DNS allowance name.
  watched: 'tenancy',
  normalize: normalizeService,
  verbs: LIST_WATCH,
  invalidReason: undefined,
  status: undefined,
  statusEntries: [],
  engineKinds: [],
};

export const NETWORK_POLICY_API: ApiKind<NetworkPolicy> = {
  kind: 'NetworkPolicy',
  group: 'networking.k8s.io',
  version: 'v1',
  plural: 'networkpolicies',
  namespaced: true,
  optional: false,
  watched: 'always',
  normalize: normalizePolicy,
  verbs: LIST_WATCH,
  invalidReason: 'InvalidNetworkPolicy',
  status: { names: ['networkpolicy', 'networkpolicies', 'netpol', 'netpols'], aliases: [], target: 'NetworkPolicy' },
  statusEntries: [NETWORK_POLICY],
  engineKinds: [NETWORK_POLICY],
};

export const NAMESPACE_NETWORK_POLICY_API: ApiKind<NamespaceNetworkPolicy> = {
  kind: 'NamespaceNetworkPolicy',
  group: 'network.kubesphere.io',
  version: 'v1alpha1',
  plural: 'namespacenetworkpolicies',
  namespaced: true,
  optional: true,
  watched: 'tenancy',
  normalize: normalizeNamespacePolicy,
  verbs: LIST_WATCH,
  invalidReason: 'InvalidNamespaceNetworkPolicy',
  status: {
    names: ['namespacenetworkpolicy', 'namespacenetworkpolicies', 'nsnp', 'nsnps'],
    aliases: [],
    target: 'NamespaceNetworkPolicy',
  },
  statusEntries: [NAMESPACE_NETWORK_POLICY],
  engineKinds: [NAMESPACE_NETWORK_POLICY],
};

export const WORKSPACE_API: ApiKind<Workspace> = {
  kind: 'Workspace',
  group: 'tenant.kubesphere.io',
  version: 'v1alpha1',
  plural: 'workspaces',
  namespaced: false,
  optional: true,
  watched: 'tenancy',
  normalize: normalizeWorkspace,
  verbs: LIST_WATCH,
  invalidReason: undefined,
  // A workspace's isolation of each of its namespaces.
  status: { names: ['workspace', 'workspaces'], aliases: ['workspaceisolation'], target: 'workspace' },
  statusEntries: [WORKSPACE_ISOLATION],
  engineKinds: [WORKSPACE_ISOLATION],
};

/** KubeSphere's v1alpha2 template of a Workspace: read from files as a Workspace, not watched. */
export const WORKSPACE_TEMPLATE_API: ApiKind<Workspace> = {
  kind: 'WorkspaceTemplate',
  group: 'tenant.kubesphere.io',
  version: 'v1alpha2',
  plural: 'workspacetemplates',
  namespaced: false,
  optional: true,
  watched: 'never',
  normalize: normalizeWorkspace,
  verbs: [],
  invalidReason: undefined,
  status: undefined,
  statusEntries: [],
  engineKinds: [WORKSPACE_ISOLATION],
};

export const CLUSTER_NETWORK_POLICY_API: ApiKind<ClusterNetworkPolicy> = {
  kind: 'ClusterNetworkPolicy',
  group: 'policy.networking.k8s.io',
  version: 'v1alpha2',
  plural: 'clusternetworkpolicies',
  namespaced: false,
  optional: true,
  watched: 'cluster-policies',
  normalize: normalizeClusterNetworkPolicy,
  verbs: LIST_WATCH,
  invalidReason: 'InvalidClusterNetworkPolicy',
  status: {
    names: ['clusternetworkpolicy', 'clusternetworkpolicies', 'cnp', 'cnps'],
    aliases: [],
    target: 'ClusterNetworkPolicy',
  },
  statusEntries: ['ClusterNetworkPolicy'],
  engineKinds: [CLUSTER_NETWORK_POLICY],
};

export const ADMIN_NETWORK_POLICY_API: ApiKind<ClusterNetworkPolicy> = {
  kind: 'AdminNetworkPolicy',
  group: 'policy.networking.k8s.io',
  version: 'v1alpha1',
  plural: 'adminnetworkpolicies',
  namespaced: false,
  optional: true,
  watched: 'cluster-policies',
  normalize: normalizeAdminNetworkPolicy,
  verbs: LIST_WATCH,
  invalidReason: 'InvalidAdminNetworkPolicy',
  status: { names: ['adminnetworkpolicy', 'adminnetworkpolicies', 'anp', 'anps'], aliases: [], target: 'AdminNetworkPolicy' },
  statusEntries: ['AdminNetworkPolicy'],
  engineKinds: [CLUSTER_NETWORK_POLICY],
};

export const BASELINE_ADMIN_NETWORK_POLICY_API: ApiKind<ClusterNetworkPolicy> = {
  kind: 'BaselineAdminNetworkPolicy',
  group: 'policy.networking.k8s.io',
  version: 'v1alpha1',
  plural: 'baselineadminnetworkpolicies',
  namespaced: false,
  optional: true,
  watched: 'cluster-policies',
  normalize: normalizeBaselineAdminNetworkPolicy,
  verbs: LIST_WATCH,
  invalidReason: 'InvalidBaselineAdminNetworkPolicy',
  status: {
    names: ['baselineadminnetworkpolicy', 'baselineadminnetworkpolicies', 'banp', 'banps'],
    aliases: [],
    target: 'BaselineAdminNetworkPolicy',
  },
  statusEntries: ['BaselineAdminNetworkPolicy'],
  engineKinds: [CLUSTER_NETWORK_POLICY],
};

/** The policy.networking.k8s.io kinds, all read into ClusterNetworkPolicy's form. */
export const CLUSTER_POLICY_APIS: readonly ApiKind<ClusterNetworkPolicy>[] = [
  CLUSTER_NETWORK_POLICY_API,
  ADMIN_NETWORK_POLICY_API,
  BASELINE_ADMIN_NETWORK_POLICY_API,
];

/** Every object kind the agent reads, policy kinds first in the order of their status entries. */
export const API_KINDS: readonly ApiKind<unknown>[] = [
  NETWORK_POLICY_API,
  NAMESPACE_NETWORK_POLICY_API,
  NAMESPACE_API,
  WORKSPACE_API,
  WORKSPACE_TEMPLATE_API,
  ...CLUSTER_POLICY_APIS,
  POD_API,
  NODE_API,
  SERVICE_API,
];

/** The descriptor of a kind name, if the agent reads that kind. */
export function apiKind(kind: string): ApiKind<unknown> | undefined {
  return API_KINDS.find((d) => d.kind === kind);
}

/** `group/version` (`version` for the core group). */
export function apiVersionOf(d: Pick<ApiKind<unknown>, 'group' | 'version'>): string {
  return d.group === '' ? d.version : `${d.group}/${d.version}`;
}

/** The cluster-wide collection path of a kind, e.g. `/apis/networking.k8s.io/v1/networkpolicies`. */
export function collectionPath(d: Pick<ApiKind<unknown>, 'group' | 'version' | 'plural'>): string {
  return d.group === '' ? `/api/${d.version}/${d.plural}` : `/apis/${d.group}/${d.version}/${d.plural}`;
}

/** The reason of the Event about an invalid object of `kind` (`Invalid<Kind>` for a kind not listed). */
export function invalidReason(kind: string): string {
  return apiKind(kind)?.invalidReason ?? `Invalid${kind}`;
}

/**
 * Every name `status` accepts for a type, lower case, with what it asks
 * about: kubectl's names (also with `.group`) and the aliases.
 */
export function statusTypeNames(): ReadonlyMap<string, StatusTargetKind> {
  const out = new Map<string, StatusTargetKind>();
  for (const d of API_KINDS) {
    if (d.status === undefined) continue;
    for (const n of d.status.names) {
      out.set(n, d.status.target);
      if (d.group !== '') out.set(`${n}.${d.group}`, d.status.target);
    }
    for (const n of d.status.aliases) out.set(n, d.status.target);
  }
  return out;
}

/** Every NodePolicyStatus entry kind, in the order of API_KINDS. */
export const STATUS_ENTRY_KINDS: readonly StatusEntryKind[] = API_KINDS.flatMap((d) => d.statusEntries);
