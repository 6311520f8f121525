// NetworkPolicy as a policy kind: the first user of the seam (kind.ts). One
// contributed policy per object, its rules one to one.
import { changedEnds, recordListChange } from '../model/list-diff.ts';
import type { ListChange } from '../model/list-diff.ts';
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

/** The last list translated, entry by entry (staged: undefined), how many are staged, and the kind's list made of it. */
let last:
  | {
      readonly input: readonly NetworkPolicy[];
      readonly each: readonly (ContributedPolicy | undefined)[];
      readonly staged: number;
      readonly list: readonly ContributedPolicy[];
    }
  | undefined;

interface Translated {
  readonly each: readonly (ContributedPolicy | undefined)[];
  readonly staged: number;
  /** How the kind's list differs from the last one's, when patched from it. */
  readonly change?: ListChange<ContributedPolicy>;
}

/**
 * Every policy's translation: a list that differs from the last one in a few
 * places (one policy's change: a head and tail the same objects) takes the
 * last one's translations for those, so a policy change costs finding the
 * changed place and two slices, not a memo lookup and an annotation check
 * per policy (~2-3 ms at 10k policies).
 */
function translations(input: readonly NetworkPolicy[]): Translated {
  const prev = last;
  if (prev !== undefined) {
    const a = prev.input;
    const { head, tail } = changedEnds(a, input);
    if (input.length - head - tail + (a.length - head - tail) <= PATCH_BELOW) {
      const mid: (ContributedPolicy | undefined)[] = [];
      let staged = prev.staged;
      const gone = new Set<ContributedPolicy>();
      for (let i = head; i < a.length - tail; i++) {
        const c = prev.each[i];
        if (c === undefined) staged--;
        else gone.add(c);
      }
      const added: ContributedPolicy[] = [];
      for (let i = head; i < input.length - tail; i++) {
        const c = translate(input[i]!);
        if (c === undefined) staged++;
        else if (!gone.delete(c)) added.push(c);
        mid.push(c);
      }
      // One array of the exact length: two slices and their concatenation
      // were two copies of a 10k-entry list per policy change (issue 24, GC).
      const each = new Array<ContributedPolicy | undefined>(head + mid.length + tail);
      for (let i = 0; i < head; i++) each[i] = prev.each[i];
      for (let i = 0; i < mid.length; i++) each[head + i] = mid[i];
      for (let i = 0; i < tail; i++) each[head + mid.length + i] = prev.each[a.length - tail + i];
      return {
        each,
        staged,
        change: { removed: [...gone], added },
      };
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
      const { each, staged, change } = translations(state.policies);
      // Without staged policies the list is its translations as they are (no filter of 10k entries per change).
      l = staged === 0 ? (each as readonly ContributedPolicy[]) : each.filter((c) => c !== undefined);
      // What changed, for the grouping's patch (policy-chains.ts): read, not found by a walk.
      if (change !== undefined && last !== undefined) recordListChange(last.list, l, change);
      last = { input: state.policies, each, staged, list: l };
      listMemo.set(state.policies, l);
    }
    return l;
  },
};
