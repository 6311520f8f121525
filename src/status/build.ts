// The status a node's agent reports, as pure functions of what its kernel
// holds: the snapshot of the last successful apply and the last attempt's
// outcome. Times only move when what they describe changes, so the same
// kernel state always builds the same content (and costs no write).
import { isDeepStrictEqual } from 'node:util';
import type { RulesetStats } from '../ruleset/ir.ts';
import { selectorMatches } from '../model/selector.ts';
import { formatValidationError, isActivePod } from '../model/types.ts';
import type { ClusterState, NetworkPolicy, Pod } from '../model/types.ts';
import type { AppliedPolicy, ApplyResultText, NodeStatusContent } from './types.ts';

/** The ruleset in the kernel: the snapshot it was compiled from, when it was applied, its hash. */
export interface AppliedRuleset {
  readonly state: ClusterState;
  /** The node's active pods in `state`, when the caller has them already (else found here). */
  readonly localPods?: readonly Pod[];
  readonly stats: RulesetStats;
  /** "sha256:<hex>" of the full script. */
  readonly hash: string;
  /** Unix ms of the apply that put this snapshot in force. */
  readonly atUnixMs: number;
}

export interface StatusInput {
  readonly node: string;
  /** undefined until the first successful apply. */
  readonly applied: AppliedRuleset | undefined;
  /** The last attempt: a success (also "unchanged") or a failure. */
  readonly last: { readonly result: ApplyResultText; readonly atUnixMs: number; readonly error: string | undefined } | undefined;
  /** The kernel holds exactly what was last applied. */
  readonly inSync: boolean;
  readonly agentVersion: string;
  readonly nftVersion: string | undefined;
}

const iso = (ms: number): string => new Date(ms).toISOString();

const MAX_ERROR = 1024;
const MAX_FIELDS = 20;

function policyKey(p: { readonly kind: string; readonly namespace: string; readonly name: string }): string {
  return `${p.kind}\u0000${p.namespace}\u0000${p.name}`;
}

/** The policies of one namespace: a range of `policies` (sorted by namespace, then name). */
function policiesOf(policies: readonly NetworkPolicy[], ns: string): readonly NetworkPolicy[] {
  let lo = 0;
  let hi = policies.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((policies[mid]?.namespace ?? '') < ns) lo = mid + 1;
    else hi = mid;
  }
  let end = lo;
  while (end < policies.length && policies[end]?.namespace === ns) end++;
  return policies.slice(lo, end);
}

/**
 * Policies that select at least one active pod of the node, with how many.
 * Cost: per namespace with local pods, a binary search for its policies and
 * a selector match against the node's pods there (a node has ~100 pods);
 * policies of other namespaces are never looked at.
 */
export function relevantPolicies(
  state: ClusterState,
  node: string,
  atUnixMs: number,
  prev: readonly AppliedPolicy[] | undefined,
  localPods?: readonly Pod[],
): AppliedPolicy[] {
  const local = new Map<string, Pod[]>();
  for (const p of localPods ?? state.pods) {
    if (p.nodeName !== node || !isActivePod(p)) continue;
    const l = local.get(p.namespace);
    if (l === undefined) local.set(p.namespace, [p]);
    else l.push(p);
  }
  const before = new Map((prev ?? []).map((e) => [policyKey(e), e]));
  const out: AppliedPolicy[] = [];
  // Namespaces in order, each namespace's policies in order: sorted like state.policies.
  const candidates = [...local.keys()].sort().flatMap((ns) => policiesOf(state.policies, ns));
  for (const pol of candidates) {
    const pods = local.get(pol.namespace);
    if (pods === undefined) continue;
    let n = 0;
    for (const pod of pods) if (selectorMatches(pol.podSelector, pod.labels)) n++;
    if (n === 0) continue;
    const v = pol.version;
    const old = before.get(policyKey({ kind: 'NetworkPolicy', namespace: pol.namespace, name: pol.name }));
    const same =
      old !== undefined && old.uid === v?.uid && old.generation === v?.generation && old.resourceVersion === v?.resourceVersion;
    const invalid = pol.errors
      .slice(0, MAX_FIELDS)
      .map((e) => formatValidationError(e).slice(`${pol.namespace}/${pol.name} `.length));
    out.push({
      kind: 'NetworkPolicy',
      namespace: pol.namespace,
      name: pol.name,
      ...(v?.uid === undefined ? {} : { uid: v.uid }),
      ...(v?.generation === undefined ? {} : { generation: v.generation }),
      ...(v?.resourceVersion === undefined ? {} : { resourceVersion: v.resourceVersion }),
      appliedTime: same ? old.appliedTime : iso(atUnixMs),
      localPods: n,
      ...(invalid.length === 0 ? {} : { invalidFields: invalid }),
    });
  }
  return out;
}

/** The status content for the node; `prev` (what was last written) keeps times that still describe the same thing. */
export function buildStatus(input: StatusInput, prev: NodeStatusContent | undefined): NodeStatusContent {
  const a = input.applied;
  const last = input.last;
  const error = last?.result === 'Failed' ? (last.error ?? 'apply failed').slice(0, MAX_ERROR) : undefined;
  // The last apply time moves when the ruleset in force, the result or the error changes,
  // not on re-applies of the same ruleset (drift checks, refreshes, unchanged renders).
  const sameApply =
    prev !== undefined && prev.rulesetHash === a?.hash && prev.lastApplyResult === last?.result && prev.lastError === error;
  const lastApplyTime = sameApply ? prev.lastApplyTime : last === undefined ? undefined : iso(last.atUnixMs);
  const policies = a === undefined ? [] : relevantPolicies(a.state, input.node, a.atUnixMs, prev?.policies, a.localPods);
  return {
    inSync: input.inSync,
    ...(a === undefined ? {} : { rulesetHash: a.hash }),
    ...(lastApplyTime === undefined ? {} : { lastApplyTime }),
    ...(last === undefined ? {} : { lastApplyResult: last.result }),
    ...(error === undefined ? {} : { lastError: error }),
    agentVersion: input.agentVersion,
    ...(input.nftVersion === undefined ? {} : { nftVersion: input.nftVersion }),
    counts: {
      localPods: a?.stats.localPods ?? 0,
      policies: policies.length,
      chains: a?.stats.chains ?? 0,
      rules: a?.stats.rules ?? 0,
      sets: (a?.stats.sets ?? 0) + (a?.stats.maps ?? 0),
      elements: a?.stats.elements ?? 0,
    },
    policies,
  };
}

const STATUS_KEYS: readonly (keyof NodeStatusContent)[] = [
  'inSync',
  'rulesetHash',
  'lastApplyTime',
  'lastApplyResult',
  'lastError',
  'agentVersion',
  'nftVersion',
  'counts',
  'policies',
];

/**
 * The JSON merge patch ({status: ...}) from `prev` to `next`: only the fields
 * that changed (lists such as `policies` are replaced whole, as merge patch
 * does), null for removed ones. Without `prev` (first write after start, the
 * object's status unknown) every field is sent and absent ones are nulled.
 * undefined when nothing changed.
 */
export function statusPatch(
  prev: NodeStatusContent | undefined,
  next: NodeStatusContent,
): { status: Record<string, unknown> } | undefined {
  const out: Record<string, unknown> = {};
  for (const k of STATUS_KEYS) {
    const a = prev?.[k];
    const b = next[k];
    if (prev !== undefined && isDeepStrictEqual(a, b)) continue;
    out[k] = b ?? null;
  }
  return Object.keys(out).length === 0 ? undefined : { status: out };
}
