// The seam between the kinds of policy objects (NetworkPolicy today; tenancy
// isolation, NamespaceNetworkPolicy and the admin tiers next) and the two
// engines that read them: the compiler (src/compile) and the reference
// evaluator (src/policy). A kind turns its objects into contributed policies:
// which pods they target and which rules they add, each with an origin that
// explain and /debug print. The engines read only this form, so a new kind
// is registered (registry.ts) instead of branched into each engine. How a
// rule becomes nftables is the compiler's business, not the kind's.
import type {
  ClusterPolicyAction,
  ClusterState,
  Direction,
  LabelSelector,
  NamespacedPods,
  PolicySpec,
  Protocol,
  Rule,
} from '../model/types.ts';
import type { ReadonlyList } from '../model/list.ts';

/**
 * How the engines combine a kind's policies (Felix's tiers, the ordered
 * evaluators of kube-network-policies), in evaluation order:
 * - 'admin': ClusterNetworkPolicy tier Admin. Policies by priority (lower
 *   first; equal priorities by name), rules in order; the first rule whose
 *   peer and protocol match decides Accept or Deny; Pass skips the rest of
 *   the tier; no match goes on. Selecting a pod does not isolate it.
 * - 'allow-list': NetworkPolicy semantics. A pod a policy targets is isolated
 *   in that policy's directions; a connection is allowed when any rule of any
 *   allow-list policy targeting the pod allows it (a union: order does not
 *   change the verdict, only the order of listing); an isolated pod's
 *   connection nothing allows is denied here (final).
 * - 'baseline': ClusterNetworkPolicy tier Baseline, like 'admin', reached
 *   only by connections of pods no allow-list policy isolates in that
 *   direction; Pass and no match end in the default: allowed.
 */
export type Tier = 'admin' | 'allow-list' | 'baseline';
/** The tiers in evaluation order. */
export const TIERS: readonly Tier[] = ['admin', 'allow-list', 'baseline'];
/** Tiers of ordered, first-match policies (TieredPolicy). */
export type OrderedTier = 'admin' | 'baseline';

/** The object a contributed policy comes from. */
export interface PolicyOrigin {
  /** The object's kind, e.g. `NetworkPolicy`. */
  readonly kind: string;
  /** Its namespace ('' for cluster-scoped objects). */
  readonly namespace: string;
  readonly name: string;
  /** How a person names it, e.g. `shop/web` (a NetworkPolicy), `project isolation of ns shop`. */
  readonly label: string;
}

/** Where a contributed rule comes from: explain and /debug name it as `description`. */
export interface RuleOrigin {
  readonly policy: PolicyOrigin;
  readonly direction: Direction;
  /** The rule's index in its object (`spec.ingress[i]`); several contributed rules may share one. */
  readonly index: number;
  /** e.g. `shop/web ingress[0]`, `project isolation of ns shop: same namespace`. */
  readonly description: string;
}

/**
 * One allowance in the model's terms (a NetworkPolicy rule: traffic matching
 * one of `peers` AND one of `ports`; an invalid rule allows nothing), with its origin.
 */
export interface ContributedRule extends Rule {
  readonly origin: RuleOrigin;
}

/** A policy in NetworkPolicy's form (targets, isolated directions, allow rules) with its origin. */
export interface ContributedPolicy extends PolicySpec<ContributedRule> {
  readonly origin: PolicyOrigin;
  /**
   * Unique among the policies of every kind: the identity its chains are
   * named by (hashed). A NetworkPolicy's is `ns/name`; other kinds prefix
   * theirs with the kind.
   */
  readonly key: string;
}

/** A peer of a tiered rule, in the model's terms (what the kind resolved; see ClusterPolicyPeer). */
export type TieredPeer =
  | ({ readonly kind: 'pods' } & NamespacedPods)
  /** Canonical CIDRs; they match pod addresses too. */
  | { readonly kind: 'networks'; readonly cidrs: readonly string[] }
  /** The addresses (Node.addresses) of the nodes the selector selects. */
  | { readonly kind: 'nodes'; readonly nodeSelector: LabelSelector }
  /** Every address (an unknown peer or an invalid rule failing closed in Deny / Pass). */
  | { readonly kind: 'all' };

/** What a tiered rule matches besides its peers: undefined = every protocol and port (ICMP too). */
export type TieredPort =
  /** port undefined: every port of the protocol; else port..endPort (endPort = port for one port). */
  | {
      readonly kind: 'port';
      readonly protocol: Protocol;
      readonly port: number | undefined;
      readonly endPort: number | undefined;
    }
  /** A named container port of the destination pod (the local pod for ingress, the peer for egress). */
  | { readonly kind: 'named'; readonly name: string };

/** Where a tiered rule comes from: RuleOrigin plus the rule's name and action (explain, /debug, Events). */
export interface TieredRuleOrigin extends RuleOrigin {
  /** The rule's `name` ('' when not given). */
  readonly name: string;
  readonly action: ClusterPolicyAction;
}

/**
 * One first-match rule: traffic to or from one of `peers` (none: matches
 * nothing) AND one of `ports` decides `action`. What the kind could not
 * enforce is already resolved (domainNames dropped, unknown peers and invalid
 * rules failing closed) and said in `notEnforced`.
 */
export interface TieredRule {
  readonly action: ClusterPolicyAction;
  readonly peers: readonly TieredPeer[];
  readonly ports: readonly TieredPort[] | undefined;
  readonly origin: TieredRuleOrigin;
  /** Why part of the object's rule is not enforced as written (e.g. domainNames), for explain and status. */
  readonly notEnforced: string | undefined;
}

/** A policy of an ordered tier (a ClusterNetworkPolicy), with its origin. */
export interface TieredPolicy {
  readonly tier: OrderedTier;
  /** Lower first; equal priorities in order of `origin.name` (then key): deterministic, documented. */
  readonly priority: number;
  /** The pods it applies to (hostNetwork pods never). */
  readonly subject: NamespacedPods;
  readonly ingress: readonly TieredRule[];
  readonly egress: readonly TieredRule[];
  readonly origin: PolicyOrigin;
  /** Unique among the policies of every kind, prefixed with the kind: names its chains (hashed). */
  readonly key: string;
}

/** A kind of allow-list policies (NetworkPolicy semantics). */
export interface AllowListKind {
  /** The kind's name, as in PolicyOrigin.kind. */
  readonly kind: string;
  readonly tier: 'allow-list';
  /**
   * Every policy of this kind in the state. Pure; called on every compile and
   * every evaluation, so a kind memoizes per object when the translation is
   * not trivial (the sources keep an unchanged object's identity).
   */
  policies(state: ClusterState): ReadonlyList<ContributedPolicy>;
}

/** A kind of ordered, first-match policies; one kind may fill both ordered tiers (ClusterNetworkPolicy does). */
export interface OrderedKind {
  readonly kind: string;
  readonly tier: 'ordered';
  /** Every policy of this kind, of both ordered tiers, in evaluation order (see compareTiered). Pure, memoized per object. */
  tieredPolicies(state: ClusterState): readonly TieredPolicy[];
}

export type PolicyKind = AllowListKind | OrderedKind;

/** Evaluation order within an ordered tier: priority, then name, then key. */
export function compareTiered(a: TieredPolicy, b: TieredPolicy): number {
  if (a.tier !== b.tier) return a.tier === 'admin' ? -1 : 1;
  if (a.priority !== b.priority) return a.priority - b.priority;
  if (a.origin.name !== b.origin.name) return a.origin.name < b.origin.name ? -1 : 1;
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}
