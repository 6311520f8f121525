// The seam between the kinds of policy objects (NetworkPolicy today; tenancy
// isolation, NamespaceNetworkPolicy and the admin tiers next) and the two
// engines that read them: the compiler (src/compile) and the reference
// evaluator (src/policy). A kind turns its objects into contributed policies:
// which pods they target and which rules they add, each with an origin that
// explain and /debug print. The engines read only this form, so a new kind
// is registered (registry.ts) instead of branched into each engine. How a
// rule becomes nftables is the compiler's business, not the kind's.
import type { ClusterState, Direction, PolicySpec, Rule } from '../model/types.ts';

/**
 * How the engines combine a kind's policies (Felix's tiers, the ordered
 * evaluators of kube-network-policies). One tier today:
 * - 'allow-list': NetworkPolicy semantics. A pod a policy targets is isolated
 *   in that policy's directions; a connection is allowed when any rule of any
 *   allow-list policy targeting the pod allows it (a union: order does not
 *   change the verdict, only the order of listing).
 * AdminNetworkPolicy brings 'admin' (before 'allow-list': ordered by priority,
 * the first matching rule decides allow, deny or pass) and
 * BaselineAdminNetworkPolicy 'baseline' (after: only for what 'allow-list'
 * leaves undecided); each engine then gains one case per tier.
 */
export type Tier = 'allow-list';

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

export interface PolicyKind {
  /** The kind's name, as in PolicyOrigin.kind. */
  readonly kind: string;
  readonly tier: Tier;
  /**
   * Every policy of this kind in the state. Pure; called on every compile and
   * every evaluation, so a kind memoizes per object when the translation is
   * not trivial (the sources keep an unchanged object's identity).
   */
  policies(state: ClusterState): readonly ContributedPolicy[];
}
