// ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2; legacy
// AdminNetworkPolicy and BaselineAdminNetworkPolicy read into the same form)
// as an ordered kind: one tiered policy per object, its rules one to one.
// What this agent cannot enforce as written is resolved here, so engines never
// see the raw forms: domainNames are dropped, unknown peers and invalid rules
// fail closed (an Accept matches nothing; a Deny or Pass matches every
// address), each with a `notEnforced` note that explain prints.
import type {
  ClusterNetworkPolicy,
  ClusterPolicyAction,
  ClusterPolicyProtocol,
  ClusterPolicyRule,
  Direction,
} from '../model/types.ts';
import { isStaged } from '../model/staged.ts';
import { compareTiered } from './kind.ts';
import type { OrderedKind, OrderedTier, PolicyOrigin, TieredPeer, TieredPolicy, TieredPort, TieredRule } from './kind.ts';

export const CLUSTER_NETWORK_POLICY = 'ClusterNetworkPolicy';

export const DOMAIN_NAMES_NOT_ENFORCED = 'domainNames are not enforced by this agent';
const DOMAIN_NAMES_OUTSIDE_ACCEPT = 'domainNames outside an Accept rule';

// Normalized objects are immutable and kept while unchanged: translate each once.
const memo = new WeakMap<ClusterNetworkPolicy, TieredPolicy>();

/** `Admin tier, priority 10`: how explain and the rule descriptions place a policy. */
export function tierPlace(tier: OrderedTier, priority: number): string {
  return `${tier === 'admin' ? 'Admin' : 'Baseline'} tier, priority ${priority}`;
}

/** `ClusterNetworkPolicy deny-metadata (Admin tier, priority 10) egress rule 0 "block-imds"`: a rule by name, without its action. */
export function tieredRuleName(
  label: string,
  tier: OrderedTier,
  priority: number,
  direction: Direction,
  index: number,
  name: string,
): string {
  const named = name === '' ? '' : ` ${JSON.stringify(name)}`;
  return `${label} (${tierPlace(tier, priority)}) ${direction} rule ${index}${named}`;
}

/** `ClusterNetworkPolicy deny-metadata (Admin tier, priority 10) egress rule 0 "block-imds": Deny` */
export function tieredRuleDescription(
  label: string,
  tier: OrderedTier,
  priority: number,
  direction: Direction,
  index: number,
  name: string,
  action: ClusterPolicyAction,
): string {
  return `${tieredRuleName(label, tier, priority, direction, index, name)}: ${action}`;
}

function ports(list: readonly ClusterPolicyProtocol[] | undefined): TieredPort[] | undefined {
  return list?.map((p): TieredPort => (p.kind === 'named' ? { kind: 'named', name: p.name } : { ...p }));
}

/** What a rule that cannot be enforced as written becomes: the API's "fail closed". */
type Resolved = Pick<TieredRule, 'action' | 'peers' | 'ports' | 'notEnforced'>;

// An Accept that cannot be read as written matches nothing; a Deny or a Pass
// becomes "Deny all" (every address, protocol and port), as the API says: an
// error never opens traffic, and a Pass could skip an admin's later Deny.
function failClosed(r: ClusterPolicyRule, why: string): Resolved {
  if (r.action === 'Accept')
    return { action: 'Accept', peers: [], ports: undefined, notEnforced: `${why}: the rule matches nothing (fail closed)` };
  return {
    action: 'Deny',
    peers: [{ kind: 'all' }],
    ports: undefined,
    notEnforced: `${why}: the rule is read as Deny all (fail closed)`,
  };
}

function resolve(r: ClusterPolicyRule): Resolved {
  if (r.invalid) return failClosed(r, 'the rule is invalid');
  if (r.peers.some((p) => p.kind === 'unknown')) return failClosed(r, 'a peer of an unknown type');
  // The API allows domainNames in Accept rules only: elsewhere read as an unknown peer.
  if (r.action !== 'Accept' && r.peers.some((p) => p.kind === 'domainNames')) return failClosed(r, DOMAIN_NAMES_OUTSIDE_ACCEPT);
  const notes: string[] = [];
  const peers: TieredPeer[] = [];
  for (const p of r.peers) {
    switch (p.kind) {
      case 'pods':
        peers.push({ kind: 'pods', namespaceSelector: p.namespaceSelector, podSelector: p.podSelector });
        break;
      case 'networks':
        peers.push({ kind: 'networks', cidrs: p.cidrs });
        break;
      case 'nodes':
        peers.push({ kind: 'nodes', nodeSelector: p.nodeSelector });
        break;
      case 'domainNames':
        if (!notes.includes(DOMAIN_NAMES_NOT_ENFORCED)) notes.push(DOMAIN_NAMES_NOT_ENFORCED);
        break;
      case 'unknown':
        break;
    }
  }
  return { action: r.action, peers, ports: ports(r.protocols), notEnforced: notes.length === 0 ? undefined : notes.join('; ') };
}

function rules(
  origin: PolicyOrigin,
  tier: OrderedTier,
  priority: number,
  direction: Direction,
  list: readonly ClusterPolicyRule[],
): TieredRule[] {
  return list.map((r, index) => ({
    ...resolve(r),
    origin: {
      policy: origin,
      direction,
      index,
      name: r.name,
      action: r.action,
      description: tieredRuleDescription(origin.label, tier, priority, direction, index, r.name, r.action),
    },
  }));
}

export function tierClusterNetworkPolicy(p: ClusterNetworkPolicy): TieredPolicy {
  let t = memo.get(p);
  if (t === undefined) {
    const kind = p.sourceKind === '' ? CLUSTER_NETWORK_POLICY : p.sourceKind;
    const origin: PolicyOrigin = { kind, namespace: '', name: p.name, label: `${kind} ${p.name}` };
    const tier: OrderedTier = p.tier === 'Admin' ? 'admin' : 'baseline';
    t = {
      tier,
      priority: p.priority,
      subject: p.subject,
      ingress: rules(origin, tier, p.priority, 'ingress', p.ingress),
      egress: rules(origin, tier, p.priority, 'egress', p.egress),
      origin,
      // Prefixed with the kind read: a legacy ANP may share a name with a CNP.
      key: `${kind}/${p.name}`,
    };
    memo.set(p, t);
  }
  return t;
}

export const clusterNetworkPolicyKind: OrderedKind = {
  kind: CLUSTER_NETWORK_POLICY,
  tier: 'ordered',
  // Staged ones are not enforced (model/staged.ts).
  tieredPolicies: (state) =>
    (state.clusterPolicies ?? [])
      .filter((p) => !isStaged(p))
      .map(tierClusterNetworkPolicy)
      .sort(compareTiered),
};
