// Invalid policies are enforced fail-closed by the renderer; the agent only
// reports them: one log line and one Kubernetes Event per change of a
// policy's errors (not per apply). Pure bookkeeping; the reconciler does the I/O.
import { recordedChange } from '../model/list-diff.ts';
import type { ReadonlyList } from '../model/list.ts';
import { selectorMatches } from '../model/selector.ts';
import { byObjectKey } from '../model/state.ts';
import { formatValidationError, isActivePod, objectKey } from '../model/types.ts';
import type { ClusterNetworkPolicy, ClusterState, NetworkPolicy } from '../model/types.ts';
import {
  CLUSTER_NETWORK_POLICY_API,
  CLUSTER_POLICY_APIS,
  NAMESPACE_NETWORK_POLICY_API,
  NETWORK_POLICY_API,
  apiVersionOf,
  invalidReason,
} from '../kinds/api-kinds.ts';
import { namespacePolicyErrors } from '../kinds/tenancy.ts';

export interface InvalidPolicy {
  /** '' for cluster-scoped objects (ClusterNetworkPolicy and the legacy ANP / BANP). */
  readonly namespace: string;
  readonly name: string;
  /** Formatted validation errors, in the model's order. */
  readonly errors: readonly string[];
  /** The object's kind when it is not a NetworkPolicy (a NamespaceNetworkPolicy, a ClusterNetworkPolicy, ...). */
  readonly object?: { readonly apiVersion: string; readonly kind: string };
}

/** Identity of an invalid object across kinds: ns/name for a NetworkPolicy, Kind:ns/name otherwise. */
export function invalidKey(p: InvalidPolicy): string {
  return p.object === undefined ? `${p.namespace}/${p.name}` : `${p.object.kind}:${p.namespace}/${p.name}`;
}

/** The reason of the Warning Event about an invalid object: its kind's (kinds/api-kinds.ts), e.g. InvalidNetworkPolicy. */
export function invalidEventReason(p: InvalidPolicy): string {
  return invalidReason(p.object?.kind ?? NETWORK_POLICY_API.kind);
}

/** key (ns/name) -> fingerprint of its errors. */
export type InvalidIndex = ReadonlyMap<string, string>;

export interface InvalidDiff {
  /** Newly invalid, or invalid with different errors than last time. */
  readonly changed: readonly InvalidPolicy[];
  /** Keys that were invalid and are now valid or gone. */
  readonly resolved: readonly string[];
  readonly all: readonly InvalidPolicy[];
  readonly next: InvalidIndex;
}

function describe(p: NetworkPolicy): InvalidPolicy {
  return { namespace: p.namespace, name: p.name, errors: p.errors.map(formatValidationError) };
}

/** NamespaceNetworkPolicies with validation errors (their own, or a Service peer that cannot be resolved). */
function invalidNamespacePolicies(state: ClusterState): InvalidPolicy[] {
  const byKey = new Map<string, InvalidPolicy>();
  for (const e of namespacePolicyErrors(state)) {
    const key = `${e.namespace ?? ''}/${e.name}`;
    const prev = byKey.get(key);
    byKey.set(key, {
      namespace: e.namespace ?? '',
      name: e.name,
      errors: [...(prev?.errors ?? []), formatValidationError(e)],
      object: { apiVersion: apiVersionOf(NAMESPACE_NETWORK_POLICY_API), kind: NAMESPACE_NETWORK_POLICY_API.kind },
    });
  }
  return [...byKey.values()];
}

/** ClusterNetworkPolicies (and the legacy kinds) with validation errors: cluster-scoped, namespace ''. */
function invalidClusterPolicies(state: ClusterState): InvalidPolicy[] {
  return (state.clusterPolicies ?? [])
    .filter((p) => p.errors.length > 0)
    .map((p) => ({
      namespace: '',
      name: p.name,
      errors: p.errors.map(formatValidationError),
      object: {
        apiVersion: apiVersionOf(CLUSTER_POLICY_APIS.find((d) => d.kind === p.sourceKind) ?? CLUSTER_NETWORK_POLICY_API),
        kind: p.sourceKind,
      },
    }));
}

// Per policy list: the source hands on the same list while no policy changed, and
// this runs after every apply (a read of 10k policies' errors: ~2-3 ms at 100k pods).
// A list the source made from the last one by a few policies (list-diff.ts)
// takes the last one's invalid policies and corrects them by that change.
const invalidOf = new WeakMap<
  ReadonlyList<NetworkPolicy>,
  { readonly objs: readonly NetworkPolicy[]; readonly described: readonly InvalidPolicy[] }
>();
const described = new WeakMap<NetworkPolicy, InvalidPolicy>();
function describeOnce(p: NetworkPolicy): InvalidPolicy {
  let d = described.get(p);
  if (d === undefined) described.set(p, (d = describe(p)));
  return d;
}
function invalidNetworkPolicies(list: ReadonlyList<NetworkPolicy>): readonly InvalidPolicy[] {
  let l = invalidOf.get(list);
  if (l === undefined) {
    const invalid = (p: NetworkPolicy): boolean => p.errors.length > 0;
    const rec = recordedChange(list);
    const before = rec === undefined ? undefined : invalidOf.get(rec.prev);
    let objs: NetworkPolicy[];
    if (rec !== undefined && before !== undefined) {
      const gone = new Set(rec.change.removed);
      objs = [...before.objs.filter((p) => !gone.has(p)), ...rec.change.added.filter(invalid)].sort(byObjectKey);
    } else objs = list.filter(invalid);
    invalidOf.set(list, (l = { objs, described: objs.map(describeOnce) }));
  }
  return l.described;
}

export function diffInvalid(prev: InvalidIndex, state: ClusterState): InvalidDiff {
  const next = new Map<string, string>();
  const changed: InvalidPolicy[] = [];
  const all: InvalidPolicy[] = [];
  const invalid = [
    ...invalidNetworkPolicies(state.policies),
    ...invalidNamespacePolicies(state),
    ...invalidClusterPolicies(state),
  ];
  for (const inv of invalid) {
    const key = invalidKey(inv);
    const fp = fingerprint(inv);
    next.set(key, fp);
    all.push(inv);
    if (prev.get(key) !== fp) changed.push(inv);
  }
  const resolved = [...prev.keys()].filter((k) => !next.has(k));
  return { changed, resolved, all, next };
}

// Kubernetes rejects longer Event messages on the events.k8s.io API; keep
// core/v1 Events within the same bound.
const MAX_MESSAGE = 1024;

export function eventMessage(p: InvalidPolicy): string {
  const how =
    p.object !== undefined && p.namespace === ''
      ? 'its invalid Accept rules match nothing, its invalid Deny and Pass rules everything'
      : 'its invalid parts allow nothing';
  const text = `${p.object?.kind ?? NETWORK_POLICY_API.kind} is invalid and enforced fail-closed (${how}): ${p.errors.join('; ')}`;
  return text.length <= MAX_MESSAGE ? text : `${text.slice(0, MAX_MESSAGE - 3)}...`;
}

/**
 * Should this node's agent create the Event? Every agent sees every policy;
 * to avoid one Event per node in the cluster, only agents that enforce the
 * policy (it selects one of their active pods) report it, once per change of
 * its errors (see Reconciler). An invalid policy that selects no pod has no
 * effect yet; it is logged and counted on every node, and reported by the
 * first node that gets a pod it selects.
 */
export function reportsEventFor(state: ClusterState, nodeName: string, key: string): boolean {
  // A cluster-scoped policy (key Kind:/name): its subject selects pods across namespaces.
  const cluster = /^([A-Za-z]+):\/(.+)$/.exec(key);
  if (cluster !== null) {
    const pol = state.clusterPolicies?.find((p) => p.sourceKind === cluster[1] && p.name === cluster[2]);
    return pol !== undefined && selectsLocalPod(state, nodeName, pol);
  }
  // A NamespaceNetworkPolicy (key Kind:ns/name) applies to every pod of its namespace.
  const nsnp = /^NamespaceNetworkPolicy:([^/]+)\//.exec(key);
  if (nsnp !== null) return state.pods.some((pod) => pod.nodeName === nodeName && pod.namespace === nsnp[1] && isActivePod(pod));
  const pol = state.policies.find((p) => objectKey(p) === key);
  if (pol === undefined) return false;
  return state.pods.some(
    (pod) =>
      pod.nodeName === nodeName &&
      pod.namespace === pol.namespace &&
      isActivePod(pod) &&
      selectorMatches(pol.podSelector, pod.labels),
  );
}

function selectsLocalPod(state: ClusterState, nodeName: string, pol: ClusterNetworkPolicy): boolean {
  const nsLabels = new Map(state.namespaces.map((n) => [n.name, n.labels]));
  return state.pods.some((pod) => {
    const labels = nsLabels.get(pod.namespace);
    return (
      pod.nodeName === nodeName &&
      isActivePod(pod) &&
      labels !== undefined &&
      selectorMatches(pol.subject.namespaceSelector, labels) &&
      selectorMatches(pol.subject.podSelector, pod.labels)
    );
  });
}

/** Fingerprint of a policy's errors, as kept in an InvalidIndex. */
export function fingerprint(p: InvalidPolicy): string {
  return p.errors.join('\n');
}
