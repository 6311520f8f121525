// The policies that matter on this node and their KUBE-NWPLCY-* chains. The
// policies come from every registered kind (src/kinds) in their order; which
// of them target a local pod is decided here, what each rule compiles to in
// policy-rules.ts.
import type { ContributedPolicy, PolicyKind } from '../kinds/kind.ts';
import { POLICY_KINDS } from '../kinds/registry.ts';
import { selectorMatches } from '../model/selector.ts';
import { byObjectKey, uniqueByKey } from '../model/state.ts';
import { DIRECTIONS } from '../model/types.ts';
import type { ClusterState, Direction, Family, Pod } from '../model/types.ts';
import { policyChainName, policyKeyId, sanitizeComment } from '../ruleset/ids.ts';
import type { Chain, Rule } from '../ruleset/ir.ts';
import type { ClusterIndex } from './cluster-index.ts';
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
const sortedLists = new WeakMap<readonly ContributedPolicy[], readonly ContributedPolicy[]>();

/** Sorted by namespace/name, each once; kinds usually list them so already (ClusterState is sorted). */
function sortedUnique(list: readonly ContributedPolicy[]): readonly ContributedPolicy[] {
  let sorted = sortedLists.get(list);
  if (sorted === undefined) {
    sorted = list;
    for (let i = 1; i < list.length; i++) {
      const a = list[i - 1];
      const b = list[i];
      if (a !== undefined && b !== undefined && byOrigin(a, b) >= 0) {
        sorted = uniqueByKey([...list].sort(byOrigin), (p) => p.origin);
        break;
      }
    }
    sortedLists.set(list, sorted);
  }
  return sorted;
}

/**
 * The policies of `namespaces`, in the kind's order: one walk with a lookup
 * per policy and nothing built for the others (a policy change gives a new
 * list each time; grouping all 10k policies by namespace per list cost ~4 ms
 * at 100k pods).
 */
function inNamespaces(list: readonly ContributedPolicy[], namespaces: ReadonlyMap<string, unknown>): ContributedPolicy[] {
  return sortedUnique(list).filter((policy) => namespaces.has(policy.namespace));
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
          for (const policy of inNamespaces(kind.policies(state), byNs)) {
            if (!policy.types.ingress && !policy.types.egress) continue;
            const pods = byNs.get(policy.namespace) ?? [];
            const targets = pods.filter((p) => selectorMatches(policy.podSelector, p.labels));
            if (targets.length > 0) out.push({ policy, id: policyKeyId(policy.key), targets });
          }
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
}

export function policyChains(ctx: PolicyChainContext, relevant: readonly RelevantPolicy[]): PolicyChains {
  const chains: Chain[] = [];
  const terms: Term[] = [];
  const jumps = new Map<Pod, PodJumps>();
  const namedTriples = new Map<string, readonly PortTriple[]>();
  for (const r of relevant) {
    for (const d of DIRECTIONS) {
      if (!r.policy.types[d]) continue;
      const out = compilePolicyChain({
        ...ctx,
        policy: r.policy,
        policyId: r.id,
        direction: d,
        targets: r.targets,
        namedTriples,
      });
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
