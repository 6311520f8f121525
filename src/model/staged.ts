// Staged policies (annotation `nft-netpol.io/staged: "true"`): read and
// listed like every policy, but not enforced. The kinds skip them
// (src/kinds), so the compiler's enforced path and the evaluator's verdict
// are as if they did not exist; withStagedEnforced gives the state "as if
// they were enforced", the input of the shadow path (compile/staged.ts) and
// of `explain --staged` (policy/staged.ts).
import type { ClusterNetworkPolicy, ClusterState, NetworkPolicy } from './types.ts';

export const STAGED_ANNOTATION = 'nft-netpol.io/staged';

/** Only the exact value "true" stages a policy; anything else (or nothing) enforces it: fail closed. */
export function readStaged(annotations: unknown): boolean {
  if (annotations === null || typeof annotations !== 'object' || Array.isArray(annotations)) return false;
  return (annotations as Record<string, unknown>)[STAGED_ANNOTATION] === 'true';
}

export function isStaged(p: { readonly staged?: true }): boolean {
  return p.staged === true;
}

// Per list: the agent's source hands on the same list while no policy changed (every compile asks).
const anyStaged = new WeakMap<readonly { readonly staged?: true }[], boolean>();
function someStaged(list: readonly { readonly staged?: true }[]): boolean {
  let v = anyStaged.get(list);
  if (v === undefined) anyStaged.set(list, (v = list.some(isStaged)));
  return v;
}

export function hasStaged(state: ClusterState): boolean {
  return someStaged(state.policies) || (state.clusterPolicies !== undefined && someStaged(state.clusterPolicies));
}

// One enforced twin per staged object, kept while the object lives: the
// kinds memoize per object, so a stable twin keeps their caches warm.
const twins = new WeakMap<object, object>();

function twin<T extends NetworkPolicy | ClusterNetworkPolicy>(p: T): T {
  if (!isStaged(p)) return p;
  let t = twins.get(p) as T | undefined;
  if (t === undefined) {
    const { staged: _staged, ...rest } = p;
    t = rest as T;
    twins.set(p, t);
  }
  return t;
}

const enforcedStates = new WeakMap<ClusterState, ClusterState>();

/** The state with every staged policy enforced (the same object when none is staged). */
export function withStagedEnforced(state: ClusterState): ClusterState {
  if (!hasStaged(state)) return state;
  let s = enforcedStates.get(state);
  if (s === undefined) {
    s = {
      ...state,
      policies: state.policies.map(twin),
      ...(state.clusterPolicies === undefined ? {} : { clusterPolicies: state.clusterPolicies.map(twin) }),
    };
    enforcedStates.set(state, s);
  }
  return s;
}

/** `ns/name` of the staged NetworkPolicies; `KIND name` of the staged cluster policies (ClusterNetworkPolicy, or a legacy kind). */
export function stagedNames(state: ClusterState): {
  readonly policies: readonly string[];
  readonly clusterPolicies: readonly string[];
} {
  return {
    policies: state.policies.filter(isStaged).map((p) => `${p.namespace}/${p.name}`),
    clusterPolicies: (state.clusterPolicies ?? []).filter(isStaged).map((p) => `${p.sourceKind} ${p.name}`),
  };
}
