// Staged policies (annotation `nft-netpol.io/staged: "true"`): read and
// listed like every policy, but not enforced. The kinds skip them
// (src/kinds), so the compiler's enforced path and the evaluator's verdict
// are as if they did not exist; withStagedEnforced gives the state "as if
// they were enforced", the input of the shadow path (compile/staged.ts) and
// of `explain --staged` (policy/staged.ts).
import { recordedChange } from './list-diff.ts';
import type { ReadonlyList } from './list.ts';
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

// How many are staged, per list: the agent's source hands on the same list
// while no policy changed (every compile asks), and says what it changed
// when it made a new one from the last (list-diff.ts): then the count is the
// last one's, corrected by the change, not a walk of 10k policies.
const stagedCounts = new WeakMap<ReadonlyList<{ readonly staged?: true }>, number>();
function stagedCount(list: ReadonlyList<{ readonly staged?: true }>): number {
  let n = stagedCounts.get(list);
  if (n === undefined) {
    const rec = recordedChange(list);
    const before = rec === undefined ? undefined : stagedCounts.get(rec.prev);
    n =
      rec !== undefined && before !== undefined
        ? before - rec.change.removed.filter(isStaged).length + rec.change.added.filter(isStaged).length
        : list.filter(isStaged).length;
    stagedCounts.set(list, n);
  }
  return n;
}
function someStaged(list: ReadonlyList<{ readonly staged?: true }>): boolean {
  return stagedCount(list) > 0;
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
