// Invalid policies are enforced fail-closed by the renderer; the agent only
// reports them: one log line and one Kubernetes Event per change of a
// policy's errors (not per apply). Pure bookkeeping; the reconciler does the I/O.
import { selectorMatches } from '../model/selector.ts';
import { formatValidationError, isActivePod, objectKey } from '../model/types.ts';
import type { ClusterState, NetworkPolicy } from '../model/types.ts';
import { NSNP_API_VERSION } from '../model/normalize-tenancy.ts';

export interface InvalidPolicy {
  readonly namespace: string;
  readonly name: string;
  /** Formatted validation errors, in the model's order. */
  readonly errors: readonly string[];
  /** The object to report on, when it is not a NetworkPolicy of this name (a NamespaceNetworkPolicy). */
  readonly object?: { readonly apiVersion: string; readonly kind: string; readonly name: string };
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
  const inv = { namespace: p.namespace, name: p.name, errors: p.errors.map(formatValidationError) };
  return p.source?.kind === 'NamespaceNetworkPolicy'
    ? { ...inv, object: { apiVersion: NSNP_API_VERSION, kind: 'NamespaceNetworkPolicy', name: p.source.name } }
    : inv;
}

export function diffInvalid(prev: InvalidIndex, state: ClusterState): InvalidDiff {
  const next = new Map<string, string>();
  const changed: InvalidPolicy[] = [];
  const all: InvalidPolicy[] = [];
  for (const p of state.policies) {
    if (p.errors.length === 0) continue;
    const inv = describe(p);
    const key = objectKey(p);
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
  const text = `${p.object?.kind ?? 'NetworkPolicy'} is invalid and enforced fail-closed (its invalid parts allow nothing): ${p.errors.join('; ')}`;
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

/** Fingerprint of a policy's errors, as kept in an InvalidIndex. */
export function fingerprint(p: InvalidPolicy): string {
  return p.errors.join('\n');
}
