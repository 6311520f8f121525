// The status a node's agent reports, as pure functions of what its kernel
// holds: the snapshot of the last successful apply and the last attempt's
// outcome. Times only move when what they describe changes, so the same
// kernel state always builds the same content (and costs no write).
import { isDeepStrictEqual } from 'node:util';
import type { RulesetStats } from '../ruleset/ir.ts';
import { NETWORK_POLICY } from '../kinds/network-policy.ts';
import {
  isolationOf,
  NAMESPACE_NETWORK_POLICY,
  PROJECT_ISOLATION,
  tenancyPolicies,
  WORKSPACE_ISOLATION,
} from '../kinds/tenancy.ts';
import { selectorMatches } from '../model/selector.ts';
import type { ReadonlyList } from '../model/list.ts';
import { isActivePod } from '../model/types.ts';
import type { ClusterState, Namespace, ObjectVersion, Pod, ValidationError } from '../model/types.ts';
import { clusterPolicyKind, entryKind } from './types.ts';
import type { AppliedPolicy, ApplyResultText, NodeStatusContent, PolicyKind } from './types.ts';

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

/** The objects of one namespace: a range of `list` (sorted by namespace, then name). */
function ofNamespace<T extends { readonly namespace: string }>(list: ReadonlyList<T>, ns: string): readonly T[] {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((list.at(mid)?.namespace ?? '') < ns) lo = mid + 1;
    else hi = mid;
  }
  const out: T[] = [];
  for (let i = lo; i < list.length && list.at(i)?.namespace === ns; i++) out.push(list.at(i)!);
  return out;
}

/** A Namespace of `state` by name (state.namespaces is sorted by name). */
function namespaceNamed(state: ClusterState, name: string): Namespace | undefined {
  const list = state.namespaces;
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((list[mid]?.name ?? '') < name) lo = mid + 1;
    else hi = mid;
  }
  return list[lo]?.name === name ? list[lo] : undefined;
}

/** `spec.ingress[0].ports[1].endPort: must be >= port (8080)`: an error without the object's identity. */
export function invalidField(e: ValidationError): string {
  return `${e.path}: ${e.message}`;
}

/** What an entry is made of, before its appliedTime is decided. */
interface Found {
  readonly kind: PolicyKind;
  readonly namespace: string;
  readonly name: string;
  readonly version: ObjectVersion | undefined;
  readonly localPods: number;
  readonly errors: readonly ValidationError[];
  readonly staged?: true;
}

/**
 * The tenancy kinds in force for the node's namespaces (docs/tenancy.md): a
 * NamespaceNetworkPolicy selects every pod of its namespace; a namespace's
 * isolation is one entry, ProjectIsolation (named after the namespace, at the
 * Namespace's version) or WorkspaceIsolation (named after the workspace, at
 * the Workspace's version), so "is the isolation of ns X in force here?" is
 * one lookup. Nothing when tenancy is off.
 */
function tenancyFound(state: ClusterState, local: ReadonlyMap<string, readonly Pod[]>, namespaces: readonly string[]): Found[] {
  if (state.tenancy === undefined) return [];
  const out: Found[] = [];
  const resolved = tenancyPolicies(state).errors;
  const workspaces = new Map((state.workspaces ?? []).map((w) => [w.name, w]));
  const isolated = new Set([...workspaces.values()].filter((w) => w.networkIsolation).map((w) => w.name));
  for (const ns of namespaces) {
    const n = local.get(ns)?.length ?? 0;
    for (const p of ofNamespace(state.namespacePolicies ?? [], ns))
      out.push({
        kind: NAMESPACE_NETWORK_POLICY,
        namespace: ns,
        name: p.name,
        version: p.version,
        localPods: n,
        errors: [...p.errors, ...(resolved.get(`${ns}/${p.name}`) ?? [])],
      });
    const nsObj = namespaceNamed(state, ns);
    const iso = nsObj === undefined ? undefined : isolationOf(state, nsObj, isolated);
    if (iso?.kind === 'project')
      out.push({ kind: PROJECT_ISOLATION, namespace: ns, name: ns, version: nsObj?.version, localPods: n, errors: [] });
    else if (iso?.kind === 'workspace' && iso.workspace !== undefined) {
      const w = workspaces.get(iso.workspace);
      out.push({
        kind: WORKSPACE_ISOLATION,
        namespace: ns,
        name: iso.workspace,
        version: w?.version,
        localPods: n,
        errors: w?.errors ?? [],
      });
    }
  }
  return out;
}

/**
 * ClusterNetworkPolicies whose subject selects an active pod of the node (a
 * node "concerns" a policy it must enforce), namespace ''. Cost: per policy, a
 * match of its namespace selector against the namespaces with local pods, then
 * of its pod selector against their pods.
 */
function clusterFound(state: ClusterState, local: ReadonlyMap<string, readonly Pod[]>, namespaces: readonly string[]): Found[] {
  const out: Found[] = [];
  const cnps = state.clusterPolicies ?? [];
  if (cnps.length === 0) return out;
  const nsLabels = namespaces.map((ns) => ({ ns, labels: namespaceNamed(state, ns)?.labels }));
  for (const p of cnps) {
    let n = 0;
    for (const { ns, labels } of nsLabels) {
      if (labels === undefined || !selectorMatches(p.subject.namespaceSelector, labels)) continue;
      for (const pod of local.get(ns) ?? []) if (selectorMatches(p.subject.podSelector, pod.labels)) n++;
    }
    if (n > 0)
      out.push({
        kind: clusterPolicyKind(p),
        namespace: '',
        name: p.name,
        version: p.version,
        localPods: n,
        errors: p.errors,
        ...(p.staged === true ? { staged: true as const } : {}),
      });
  }
  return out;
}

/**
 * Policies of every kind that select at least one active pod of the node,
 * with how many, sorted by kind, namespace, name. Cost: per namespace with
 * local pods, a binary search for its objects and a selector match against
 * the node's pods there (a node has ~100 pods); objects of other namespaces
 * are never looked at.
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
  const namespaces = [...local.keys()].sort();
  const found: Found[] = [];
  for (const pol of namespaces.flatMap((ns) => ofNamespace(state.policies, ns))) {
    let n = 0;
    for (const pod of local.get(pol.namespace) ?? []) if (selectorMatches(pol.podSelector, pod.labels)) n++;
    if (n > 0)
      found.push({
        kind: NETWORK_POLICY,
        namespace: pol.namespace,
        name: pol.name,
        version: pol.version,
        localPods: n,
        errors: pol.errors,
        ...(pol.staged === true ? { staged: true as const } : {}),
      });
  }
  found.push(...tenancyFound(state, local, namespaces), ...clusterFound(state, local, namespaces));
  const before = new Map((prev ?? []).map((e) => [policyKey({ ...e, kind: entryKind(e) }), e]));
  const out = found.map((f): AppliedPolicy => {
    const v = f.version;
    const old = before.get(policyKey(f));
    const same =
      old !== undefined && old.uid === v?.uid && old.generation === v?.generation && old.resourceVersion === v?.resourceVersion;
    const invalid = f.errors.slice(0, MAX_FIELDS).map(invalidField);
    return {
      kind: f.kind,
      namespace: f.namespace,
      name: f.name,
      ...(v?.uid === undefined ? {} : { uid: v.uid }),
      ...(v?.generation === undefined ? {} : { generation: v.generation }),
      ...(v?.resourceVersion === undefined ? {} : { resourceVersion: v.resourceVersion }),
      appliedTime: same ? old.appliedTime : iso(atUnixMs),
      localPods: f.localPods,
      ...(invalid.length === 0 ? {} : { invalidFields: invalid }),
      ...(f.staged === true ? { staged: true } : {}),
    };
  });
  return out.sort((a, b) => {
    const x = policyKey(a);
    const y = policyKey(b);
    return x < y ? -1 : x > y ? 1 : 0;
  });
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
