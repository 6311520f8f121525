// ClusterState -> the nftables ruleset of one node, as data (see ruleset/ir.ts
// and docs/datapath.md). Only what the node needs is compiled: its active
// pods (local-endpoints.ts), the policies of every kind targeting at least one
// of them and the peer addresses those policies name (policy-chains.ts), and
// the base chains and maps that dispatch to them (dispatch.ts). Output order
// never depends on input order.
import { denyPathLimits } from './deny-path.ts';
import type { PolicyKind, TieredPolicy } from '../kinds/kind.ts';
import { POLICY_KINDS, tieredPolicies } from '../kinds/registry.ts';
import type { ClusterState } from '../model/types.ts';
import { countObjects } from '../ruleset/ir.ts';
import type { Chain, CompiledRuleset, DecisionMap, NamedSet, RulesetStats, VerdictMap } from '../ruleset/ir.ts';
import { resolveOptions, type RenderOptions } from '../ruleset/options.ts';
import { sanitizeComment } from '../ruleset/ids.ts';
import type { PolicyChainMemo } from './chain-memo.ts';
import { ClusterIndex } from './cluster-index.ts';
import { baseChains, dispatch } from './dispatch.ts';
import { flattenRuleset, flattenRulesetParts } from './identities.ts';
import { localEndpoints, localPods } from './local-endpoints.ts';
import { hasStaged, withStagedEnforced } from '../model/staged.ts';
import { affectedPods, withShadowPath } from './staged.ts';
import { foldPass } from './pass-fold.ts';
import { PeerResolver } from './peers.ts';
import { policyChains, relevantPolicies } from './policy-chains.ts';
import { setSize } from './policy-rules.ts';
import { SharedSets } from './shared-sets.ts';
import type { Term } from './terms.ts';
import { compileTiers } from './tiers.ts';

function computeStats(
  sets: readonly NamedSet[],
  maps: readonly VerdictMap[],
  chains: readonly Chain[],
  decisions: readonly DecisionMap[],
  localCount: number,
  policyCount: number,
): RulesetStats {
  return { ...countObjects(sets, maps, chains, decisions, setSize), localPods: localCount, policies: policyCount };
}

/**
 * The node's ruleset as the kernel gets it: the policy rules flattened into
 * peer identities (identities.ts), so a packet's cost does not grow with the
 * number of policies. `kinds`: the policy kinds to read (default: every
 * registered kind, src/kinds/registry.ts).
 */
export function compileNode(
  state: ClusterState,
  nodeName: string,
  opts?: Partial<RenderOptions>,
  kinds: readonly PolicyKind[] = POLICY_KINDS,
): CompiledRuleset {
  const idx = new ClusterIndex(state, undefined, nodeName);
  return compileWith(state, nodeName, resolveOptions(opts), idx, new PeerResolver(idx), kinds);
}

/**
 * The node's ruleset in its per-policy form: one KUBE-NWPLCY chain per policy
 * direction, jumped to from the pod chains. What each policy rule allows, as
 * nft matches (what compile tests read); compileNode flattens it.
 */
export function compileRules(
  state: ClusterState,
  nodeName: string,
  opts?: Partial<RenderOptions>,
  kinds: readonly PolicyKind[] = POLICY_KINDS,
): CompiledRuleset {
  const idx = new ClusterIndex(state);
  return compileRulesWith(state, nodeName, resolveOptions(opts), idx, new PeerResolver(idx), kinds).ruleset;
}

/** compileNode with the lookups given: an index of `state` and a resolver over it (see node-compiler.ts). */
export function compileWith(
  state: ClusterState,
  nodeName: string,
  o: RenderOptions,
  idx: ClusterIndex,
  peers: PeerResolver,
  kinds: readonly PolicyKind[] = POLICY_KINDS,
): CompiledRuleset {
  return compileWithParts(state, nodeName, o, idx, peers, undefined, kinds).ruleset;
}

/**
 * compileWith, with what the flat ruleset was assembled from (identities.ts)
 * and whether a remote pod's churn may be applied to those parts alone
 * (peer-churn.ts): not when the state has tiered policies (whose output
 * follows pods too) or a staged policy's shadow path.
 * `reuse`: the parts of the previous compile over the same index and resolver.
 */
export function compileWithParts(
  state: ClusterState,
  nodeName: string,
  o: RenderOptions,
  idx: ClusterIndex,
  peers: PeerResolver,
  reuse?: ReturnType<typeof flattenRulesetParts>['parts'],
  kinds: readonly PolicyKind[] = POLICY_KINDS,
  patchLimit?: number,
  /** Policy chains kept from the previous compile over the same resolver. */
  chains?: PolicyChainMemo,
): {
  readonly flat: ReturnType<typeof flattenRulesetParts>;
  readonly ruleset: CompiledRuleset;
  readonly churnable: boolean;
} {
  const tiered = tieredPolicies(state, kinds);
  const c = compileRulesWith(state, nodeName, o, idx, peers, kinds, tiered, chains);
  const flat = flattenRulesetParts(c.ruleset, c.terms, reuse, patchLimit, o.peerSplitMin);
  const churnable = tiered.length === 0;
  // With tiered policies (never churnable): the Admin tier's Pass continues in the NetworkPolicy tier's chain.
  const enforced = churnable ? flat.ruleset : foldPass(flat.ruleset);
  if (!hasStaged(state)) return { flat, ruleset: enforced, churnable };
  // Staged policies (compile/staged.ts): the same compiler on the state with them enforced, as a shadow path.
  const shadowState = withStagedEnforced(state);
  const affected = affectedPods(state, shadowState, localPods(state, nodeName), kinds);
  if (affected.length === 0) return { flat, ruleset: enforced, churnable };
  const sc = compileRulesWith(shadowState, nodeName, o, idx, peers, kinds);
  const ruleset = withShadowPath(
    enforced,
    flattenRuleset(sc.ruleset, sc.terms, o.peerSplitMin),
    affected,
    o,
    (ip) => idx.ip(ip)?.family,
  );
  return { flat, ruleset, churnable: false };
}

function compileRulesWith(
  state: ClusterState,
  nodeName: string,
  o: RenderOptions,
  idx: ClusterIndex,
  peers: PeerResolver,
  kinds: readonly PolicyKind[],
  /** tieredPolicies(state, kinds), when the caller has them. */
  tiered: readonly TieredPolicy[] = tieredPolicies(state, kinds),
  memo?: PolicyChainMemo,
): { ruleset: CompiledRuleset; terms: readonly Term[] } {
  const local = localEndpoints(state, nodeName, o, idx);
  const relevant = relevantPolicies(state, local.pods, kinds);
  const shared = new SharedSets();
  const policies = policyChains({ idx, peers, sets: shared, families: local.families, memo }, relevant);
  const tiers = compileTiers({ state, idx, peers, local: local.pods, o }, tiered);
  const dispatched = dispatch(local.pods, policies.jumps, local.podCidrs.length > 0, o, idx, tiers);
  const podChains = dispatched.podChains;
  const maps = [...tiers.maps, ...dispatched.maps];
  const decisions = tiers.decisions;

  const sets = [...local.podCidrs.map((c) => c.set), ...shared.all()];
  const chains = [...policies.chains, ...tiers.chains, ...podChains, ...baseChains(local.podCidrs, o)];
  const names = new Set<string>();
  const unique = (n: string): void => {
    // 48-bit hashes: a collision is practically impossible, but would be a confusing nft error.
    if (names.has(n)) throw new Error(`identifier collision on ${n}`);
    names.add(n);
  };
  for (let i = 0; i < chains.length; i++) unique(chains[i]!.name);
  for (let i = 0; i < sets.length; i++) unique(sets[i]!.name);
  for (let i = 0; i < decisions.length; i++) unique(decisions[i]!.name);

  const ruleset: CompiledRuleset = {
    table: o.table,
    comment: sanitizeComment(`managed by nft-netpol-agent, do not edit (edits are reverted): NetworkPolicy of node ${nodeName}`),
    node: nodeName,
    sets,
    maps,
    decisions,
    limits: denyPathLimits(o),
    chains,
    stats: computeStats(sets, maps, chains, decisions, local.pods.length, relevant.length + tiers.policies),
  };
  return { ruleset, terms: policies.terms };
}
