// NetworkPolicy as a policy kind: the first user of the seam (kind.ts). One
// contributed policy per object, its rules one to one.
import { isStaged } from '../model/staged.ts';
import type { Direction, NetworkPolicy, Rule } from '../model/types.ts';
import type { AllowListKind, ContributedPolicy, ContributedRule, PolicyOrigin } from './kind.ts';

export const NETWORK_POLICY = 'NetworkPolicy';

// Normalized objects are immutable and kept while unchanged: translate each once.
const memo = new WeakMap<NetworkPolicy, ContributedPolicy>();

function rules(origin: PolicyOrigin, direction: Direction, list: readonly Rule[]): ContributedRule[] {
  return list.map((r, index) => ({
    origin: { policy: origin, direction, index, description: `${origin.label} ${direction}[${index}]` },
    peers: r.peers,
    ports: r.ports,
    invalid: r.invalid,
  }));
}

export function contributeNetworkPolicy(p: NetworkPolicy): ContributedPolicy {
  let c = memo.get(p);
  if (c === undefined) {
    const label = `${p.namespace}/${p.name}`;
    const origin: PolicyOrigin = { kind: NETWORK_POLICY, namespace: p.namespace, name: p.name, label };
    c = {
      origin,
      key: label,
      namespace: p.namespace,
      podSelector: p.podSelector,
      types: p.types,
      ingress: rules(origin, 'ingress', p.ingress),
      egress: rules(origin, 'egress', p.egress),
    };
    memo.set(p, c);
  }
  return c;
}

// The agent's source hands out the same policies array while no policy changed: translated once per array.
const listMemo = new WeakMap<readonly NetworkPolicy[], readonly ContributedPolicy[]>();

export const networkPolicyKind: AllowListKind = {
  kind: NETWORK_POLICY,
  tier: 'allow-list',
  // A staged policy (model/staged.ts) is not enforced: only the shadow path reads it, through withStagedEnforced.
  policies: (state) => {
    let l = listMemo.get(state.policies);
    if (l === undefined) {
      l = state.policies.filter((p) => !isStaged(p)).map(contributeNetworkPolicy);
      listMemo.set(state.policies, l);
    }
    return l;
  },
};
