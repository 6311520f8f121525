// The policies that matter on this node and their KUBE-NWPLCY-* chains. The
// policies come from every registered kind (src/kinds) in their order; which
// of them target a local pod is decided here, what each rule compiles to in
// policy-rules.ts.
import { listEnds } from '../model/list-diff.ts';
import type { ReadonlyList } from '../model/list.ts';
import type { ContributedPolicy, PolicyKind } from '../kinds/kind.ts';
import { POLICY_KINDS } from '../kinds/registry.ts';
import { selectorMatches } from '../model/selector.ts';
import { byObjectKey, uniqueByKey } from '../model/state.ts';
import { DIRECTIONS } from '../model/types.ts';
import type { ClusterState, Direction, Family, Pod } from '../model/types.ts';
import { policyChainName, policyKeyId, sanitizeComment } from '../ruleset/ids.ts';
import type { Chain, Rule } from '../ruleset/ir.ts';
import type { ClusterIndex } from './cluster-index.ts';
import type { PolicyChainMemo } from './chain-memo.ts';
import type { PeerResolver } from './peers.ts';
import { compilePolicyChain } from './policy-rules.ts';
import type { SharedSets } from './shared-sets.ts';
import type { PortTriple } from './ports.ts';
import type { Term } from './terms.ts';

export interface RelevantPolicy {
  readonly policy: ContributedPolicy;
  /** Hash of its key: names its chains. */
  readonly id: string;
  /** Local pods it targets, sorted. */
  readonly targets: readonly Pod[];
}

const byOrigin = (a: ContributedPolicy, b: ContributedPolicy): number => byObjectKey(a.origin, b.origin);

// Per list the kind returned (the same list while no policy changed).
const sortedLists = new WeakMap<ReadonlyList<ContributedPolicy>, ReadonlyList<ContributedPolicy>>();

/** Sorted by namespace/name, each once; kinds usually list them so already (ClusterState is sorted). */
function sortedUnique(list: ReadonlyList<ContributedPolicy>): ReadonlyList<ContributedPolicy> {
  let sorted = sortedLists.get(list);
  if (sorted === undefined) {
    sorted = list;
    let before: ContributedPolicy | undefined;
    for (const p of list) {
      if (before !== undefined && byOrigin(before, p) >= 0) {
        sorted = uniqueByKey([...list].sort(byOrigin), (x) => x.origin);
        break;
      }
      before = p;
    }
    sortedLists.set(list, sorted);
  }
  return sorted;
}

type Groups = Map<string, readonly ContributedPolicy[]>;

// A kind's policies grouped by the namespace they apply in (each group in the
// kind's order), per list the kind returned (the same list while no policy
// changed); a new list is grouped from the kind's last one when they differ
// by a few policies (a policy change: ~0.3 ms at 10k policies, against ~4
// for grouping every policy again). Only the newest grouping of a kind is
// valid: `grouped`'s result is read before the next call, never kept.
const groupsOf = new WeakMap<ReadonlyList<ContributedPolicy>, Groups>();
interface Grouping {
  /** The list as the kind gave it, and whether it was sorted and unique as given. */
  readonly list: ReadonlyList<ContributedPolicy>;
  readonly inOrder: boolean;
  readonly groups: Groups;
}
const lastOf = new WeakMap<PolicyKind, Grouping>();
const PATCH_GROUPS_BELOW = 64;

function grouped(kind: PolicyKind, list: ReadonlyList<ContributedPolicy>): Groups {
  const hit = groupsOf.get(list);
  if (hit !== undefined) return hit;
  const g = patchedGrouping(lastOf.get(kind), list) ?? groupAll(list);
  groupsOf.set(list, g.groups);
  lastOf.set(kind, g);
  return g.groups;
}

function groupAll(list: ReadonlyList<ContributedPolicy>): Grouping {
  const sorted = sortedUnique(list);
  const m = new Map<string, ContributedPolicy[]>();
  for (const policy of sorted) {
    let l = m.get(policy.namespace);
    if (l === undefined) m.set(policy.namespace, (l = []));
    l.push(policy);
  }
  return { list, inOrder: sorted === list, groups: m };
}

/** The entries of `list` from `start` up to `end` (a change's middle: a few). */
function between<T>(list: ReadonlyList<T>, start: number, end: number): T[] {
  const out: T[] = [];
  for (let i = start; i < end; i++) out.push(list.at(i)!);
  return out;
}

/** From the last grouping, when the kind's lists are in order and differ in a few places (a head and tail by identity). */
function patchedGrouping(last: Grouping | undefined, list: ReadonlyList<ContributedPolicy>): Grouping | undefined {
  if (last === undefined || !last.inOrder) return undefined;
  const a = last.list;
  const { head, tail } = listEnds(a, list);
  if (a.length - tail - head + (list.length - tail - head) > PATCH_GROUPS_BELOW) return undefined;
  const removed = between(a, head, a.length - tail);
  const added = between(list, head, list.length - tail);
  // The kept parts were in order: only the new middle and its two borders need a look.
  for (let i = Math.max(1, head); i <= Math.min(list.length - 1, list.length - tail); i++)
    if (byOrigin(list.at(i - 1)!, list.at(i)!) >= 0) return undefined;
  const gone = new Set(removed);
  // Taken over, not copied (a copy is O(namespaces): ~1 ms at 5k): the last
  // list's grouping is no longer valid, so it is forgotten; a return to that
  // list (a staged policy's shadow state and back) patches again.
  const groups = last.groups;
  groupsOf.delete(last.list);
  for (const ns of new Set([...removed, ...added].map((p) => p.namespace))) {
    const l = [...(groups.get(ns) ?? []).filter((p) => !gone.has(p)), ...added.filter((p) => p.namespace === ns)].sort(byOrigin);
    if (l.length === 0) groups.delete(ns);
    else groups.set(ns, l);
  }
  return { list, inOrder: true, groups };
}

// A policy's chain id by its translation (kept across compiles while the policy is unchanged): a hash per relevant policy per compile was ~0.2 ms at 100 of them.
const keyIds = new WeakMap<ContributedPolicy, string>();
function keyIdOf(policy: ContributedPolicy): string {
  let id = keyIds.get(policy);
  if (id === undefined) keyIds.set(policy, (id = policyKeyId(policy.key)));
  return id;
}

/**
 * Policies that isolate at least one local pod in some direction: kind by
 * kind in registry order, within a kind sorted by namespace/name.
 */
export function relevantPolicies(
  state: ClusterState,
  local: readonly Pod[],
  kinds: readonly PolicyKind[] = POLICY_KINDS,
): RelevantPolicy[] {
  const byNs = new Map<string, Pod[]>();
  for (const p of local) {
    let l = byNs.get(p.namespace);
    if (l === undefined) byNs.set(p.namespace, (l = []));
    l.push(p);
  }
  const out: RelevantPolicy[] = [];
  for (const kind of kinds) {
    switch (kind.tier) {
      case 'ordered':
        break;
      case 'allow-list':
        {
          // A chain per policy; the pod chain jumps to each and denies after the last.
          // Only the policies of local pods' namespaces, in the kind's order.
          const groups = grouped(kind, kind.policies(state));
          const found: { readonly policy: ContributedPolicy; readonly targets: readonly Pod[] }[] = [];
          for (const [ns, pods] of byNs) {
            for (const policy of groups.get(ns) ?? []) {
              if (!policy.types.ingress && !policy.types.egress) continue;
              const targets = pods.filter((p) => selectorMatches(policy.podSelector, p.labels));
              if (targets.length > 0) found.push({ policy, targets });
            }
          }
          found.sort((x, y) => byOrigin(x.policy, y.policy));
          for (const { policy, targets } of found) out.push({ policy, id: keyIdOf(policy), targets });
        }
        break;
    }
  }
  return out;
}

/** Jumps of one local pod to the chains of the policies isolating it, per direction, in policy order. */
export type PodJumps = Record<Direction, Rule[]>;

export interface PolicyChains {
  readonly chains: readonly Chain[];
  /** What every rule of the chains allows, as values. */
  readonly terms: readonly Term[];
  /** Only pods some policy isolates. */
  readonly jumps: ReadonlyMap<Pod, PodJumps>;
}

export interface PolicyChainContext {
  readonly idx: ClusterIndex;
  readonly peers: PeerResolver;
  readonly sets: SharedSets;
  readonly families: ReadonlySet<Family>;
  /** Chains kept from the last compile over the same resolver (node-compiler.ts). */
  readonly memo?: PolicyChainMemo;
}

export function policyChains(ctx: PolicyChainContext, relevant: readonly RelevantPolicy[]): PolicyChains {
  const chains: Chain[] = [];
  const terms: Term[] = [];
  const jumps = new Map<Pod, PodJumps>();
  const namedTriples = new Map<string, readonly PortTriple[]>();
  for (const r of relevant) {
    for (const d of DIRECTIONS) {
      if (!r.policy.types[d]) continue;
      const input = { ...ctx, policy: r.policy, policyId: r.id, direction: d, targets: r.targets, namedTriples };
      const out = ctx.memo === undefined ? compilePolicyChain(input) : ctx.memo.compile(input);
      chains.push(out.chain);
      terms.push(...out.terms);
      const jump: Rule = {
        matches: [],
        counter: false,
        verdict: { kind: 'jump', chain: policyChainName(r.id, d) },
        comment: sanitizeComment(r.policy.origin.label),
      };
      for (const pod of r.targets) {
        let j = jumps.get(pod);
        if (j === undefined) jumps.set(pod, (j = { ingress: [], egress: [] }));
        j[d].push(jump);
      }
    }
  }
  return { chains, terms, jumps };
}
