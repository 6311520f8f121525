// NetworkPolicy as a policy kind: the first user of the seam (kind.ts). One
// contributed policy per object, its rules one to one.
import { commonEnds } from '../model/list-diff.ts';
import { isStaged } from '../model/staged.ts';
import type { Direction, NetworkPolicy, Rule } from '../model/types.ts';
import type { AllowListKind, ContributedPolicy, ContributedRule, PolicyOrigin } from './kind.ts';

export const NETWORK_POLICY = 'NetworkPolicy';

// Normalized objects are immutable and kept while unchanged: translate each once.
const memo = new WeakMap<NetworkPolicy, ContributedPolicy>();

function rules(origin: PolicyOrigin, direction: Direction, list: readonly Rule[]): ContributedRule[] {
  return list.map((r, index) => ({
    // Joined, not concatenated: one flat string instead of a chain of five
    // cons strings kept for good (~1 MiB at 10k policies: issue 24, memory).
    origin: { policy: origin, direction, index, description: [origin.label, ' ', direction, '[', index, ']'].join('') },
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

/** A policy's translation, undefined for a staged one. */
function translate(p: NetworkPolicy): ContributedPolicy | undefined {
  return isStaged(p) ? undefined : contributeNetworkPolicy(p);
}

/** Past this many changed policies between two lists, translating every policy costs about what patching does. */
const PATCH_BELOW = 64;

/** The last list translated, entry by entry (staged: undefined), and how many are staged. */
let last:
  | {
      readonly input: readonly NetworkPolicy[];
      readonly each: readonly (ContributedPolicy | undefined)[];
      readonly staged: number;
    }
  | undefined;

/**
 * Every policy's translation: a list that differs from the last one in a few
 * places (one policy's change: a head and tail the same objects) takes the
 * last one's translations for those, so a policy change costs a scan by
 * identity and two slices, not a memo lookup and an annotation check per
 * policy (~2-3 ms at 10k policies).
 */
function translations(input: readonly NetworkPolicy[]): { each: readonly (ContributedPolicy | undefined)[]; staged: number } {
  const prev = last;
  if (prev !== undefined) {
    const a = prev.input;
    const { head, tail } = commonEnds(a, input);
    if (input.length - head - tail + (a.length - head - tail) <= PATCH_BELOW) {
      const mid: (ContributedPolicy | undefined)[] = [];
      let staged = prev.staged;
      for (let i = head; i < a.length - tail; i++) if (prev.each[i] === undefined) staged--;
      for (let i = head; i < input.length - tail; i++) {
        const c = translate(input[i]!);
        if (c === undefined) staged++;
        mid.push(c);
      }
      return { each: prev.each.slice(0, head).concat(mid, prev.each.slice(a.length - tail)), staged };
    }
  }
  const each = input.map(translate);
  let staged = 0;
  for (const c of each) if (c === undefined) staged++;
  return { each, staged };
}

export const networkPolicyKind: AllowListKind = {
  kind: NETWORK_POLICY,
  tier: 'allow-list',
  // A staged policy (model/staged.ts) is not enforced: only the shadow path reads it, through withStagedEnforced.
  policies: (state) => {
    let l = listMemo.get(state.policies);
    if (l === undefined) {
      const { each, staged } = translations(state.policies);
      last = { input: state.policies, each, staged };
      // Without staged policies the list is its translations as they are (no filter of 10k entries per change).
      l = staged === 0 ? (each as readonly ContributedPolicy[]) : each.filter((c) => c !== undefined);
      listMemo.set(state.policies, l);
    }
    return l;
  },
};
