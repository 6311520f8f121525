// Assembling a ClusterState from normalized objects: sorted, with implicit namespaces.
import type { ReadonlyList } from './list.ts';
import { namespaceWithLabels } from './normalize-namespace.ts';
import type {
  ClusterNetworkPolicy,
  ClusterState,
  Namespace,
  NamespaceNetworkPolicy,
  NetworkPolicy,
  Node,
  Pod,
  Service,
  TenancySettings,
  Workspace,
} from './types.ts';

function byString(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The order of ClusterState.clusterPolicies: name, then the kind it was read from (names may repeat across kinds). */
export function byClusterPolicy(a: ClusterNetworkPolicy, b: ClusterNetworkPolicy): number {
  return byString(a.name, b.name) || byString(a.sourceKind, b.sourceKind);
}

type ObjectKeyed = { readonly namespace: string; readonly name: string };

/** The order of a ClusterState's namespaced objects: namespace, then name. */
export function byObjectKey(a: ObjectKeyed, b: ObjectKeyed): number {
  return byString(a.namespace, b.namespace) || byString(a.name, b.name);
}

/** Puts `x` into `list` (sorted by byObjectKey), after any equal key. */
export function insertByObjectKey<T extends ObjectKeyed>(list: T[], x: T): void {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const m = list[mid];
    if (m !== undefined && byObjectKey(m, x) <= 0) lo = mid + 1;
    else hi = mid;
  }
  list.splice(lo, 0, x);
}

/**
 * A list sorted by byObjectKey of `key` without repeated namespace/names (the
 * first stays): a valid state has none, but output must never repeat a chain.
 */
export function uniqueByKey<T>(sorted: readonly T[], key: (x: T) => ObjectKeyed): T[] {
  return sorted.filter((x, i) => {
    const prev = sorted[i - 1];
    return prev === undefined || byObjectKey(key(prev), key(x)) !== 0;
  });
}

/**
 * Sorts everything and adds a namespace (with only the kubernetes.io/metadata.name
 * label) for each namespace that pods or policies live in but that was not given:
 * it exists in any real cluster, and namespaceSelectors must be able to match it.
 */
export interface StateParts {
  readonly namespaces: readonly Namespace[];
  readonly pods: ReadonlyList<Pod>;
  readonly policies: ReadonlyList<NetworkPolicy>;
  readonly nodes: readonly Node[];
  readonly workspaces?: readonly Workspace[];
  readonly namespacePolicies?: readonly NamespaceNetworkPolicy[];
  readonly services?: readonly Service[];
  readonly tenancy?: TenancySettings;
  readonly clusterPolicies?: readonly ClusterNetworkPolicy[];
}

export function makeState(parts: StateParts): ClusterState {
  const namespaces = new Map<string, Namespace>();
  for (const ns of parts.namespaces) namespaces.set(ns.name, ns);
  for (const o of [...parts.pods, ...parts.policies, ...(parts.namespacePolicies ?? [])]) {
    if (!namespaces.has(o.namespace)) namespaces.set(o.namespace, namespaceWithLabels(o.namespace, {}));
  }
  const { workspaces, namespacePolicies, services, clusterPolicies } = parts;
  return assembleState({
    ...parts,
    namespaces: [...namespaces.values()].sort((a, b) => byString(a.name, b.name)),
    pods: [...parts.pods].sort(byObjectKey),
    policies: [...parts.policies].sort(byObjectKey),
    nodes: [...parts.nodes].sort((a, b) => byString(a.name, b.name)),
    ...(workspaces === undefined ? {} : { workspaces: [...workspaces].sort((a, b) => byString(a.name, b.name)) }),
    ...(namespacePolicies === undefined ? {} : { namespacePolicies: [...namespacePolicies].sort(byObjectKey) }),
    ...(services === undefined ? {} : { services: [...services].sort(byObjectKey) }),
    ...(clusterPolicies === undefined ? {} : { clusterPolicies: [...clusterPolicies].sort(byClusterPolicy) }),
  });
}

/**
 * makeState of parts that are already sorted as makeState sorts them, with
 * every namespace an object names (implicit ones included): the arrays are
 * taken as they are. For a source that keeps its lists sorted across changes
 * (kube/sorted-view.ts): an unchanged list stays the same array.
 */
export function assembleState(parts: StateParts): ClusterState {
  // Tenancy inputs only when given: states without them stay exactly as before.
  const { workspaces, namespacePolicies, services, tenancy, clusterPolicies } = parts;
  return {
    namespaces: parts.namespaces,
    pods: parts.pods,
    policies: parts.policies,
    nodes: parts.nodes,
    ...(tenancy === undefined ? {} : { tenancy }),
    ...(workspaces === undefined || workspaces.length === 0 ? {} : { workspaces }),
    ...(namespacePolicies === undefined || namespacePolicies.length === 0 ? {} : { namespacePolicies }),
    ...(services === undefined || services.length === 0 ? {} : { services }),
    ...(clusterPolicies === undefined || clusterPolicies.length === 0 ? {} : { clusterPolicies }),
  };
}
