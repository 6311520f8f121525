// NetworkPolicy as a policy kind: the first user of the seam (kind.ts). One
// contributed policy per object, its rules one to one.
import { listEnds, recordListChange } from '../model/list-diff.ts';
import { ChunkedList, type ListEdit, type ReadonlyList } from '../model/list.ts';
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

// The agent's source hands out the same policies list while no policy changed: translated once per list.
const listMemo = new WeakMap<ReadonlyList<NetworkPolicy>, ReadonlyList<ContributedPolicy>>();

/** Stands for a staged policy in the list of translations (a list edit cannot hold undefined). */
const STAGED: unique symbol = Symbol('staged');
type Translation = ContributedPolicy | typeof STAGED;

/** A policy's translation, STAGED for a staged one. */
function translate(p: NetworkPolicy): Translation {
  return isStaged(p) ? STAGED : contributeNetworkPolicy(p);
}

/** Past this many changed policies between two lists, translating every policy costs about what patching does. */
const PATCH_BELOW = 64;

/** The last list translated, entry by entry, how many are staged, and the kind's list made of it. */
let last:
  | {
      readonly input: ReadonlyList<NetworkPolicy>;
      readonly each: ChunkedList<Translation>;
      readonly staged: number;
      readonly list: ReadonlyList<ContributedPolicy>;
    }
  | undefined;

interface Translated {
  readonly each: ChunkedList<Translation>;
  readonly staged: number;
  /** How the kind's list differs from the last one's, when patched from it. */
  readonly change?: ListChange<ContributedPolicy>;
}

/**
 * Every policy's translation: a list that differs from the last one in a few
 * places (one policy's change: a head and tail the same objects) takes the
 * last one's translations for those, so a policy change costs finding the
 * changed place and an edit of the chunks it falls in, not a memo lookup and
 * an annotation check per policy (~2-3 ms at 10k policies), nor a new list
 * of 10k entries (each one garbage for V8's old generation under a stream of
 * policy changes: issue 24).
 */
function translations(input: ReadonlyList<NetworkPolicy>): Translated {
  const prev = last;
  if (prev !== undefined) {
    const a = prev.input;
    const { head, tail } = listEnds(a, input);
    const prevEnd = a.length - tail;
    const nextEnd = input.length - tail;
    if (nextEnd - head + (prevEnd - head) <= PATCH_BELOW) {
      let staged = prev.staged;
      const gone = new Set<ContributedPolicy>();
      const edits: ListEdit<Translation>[] = [];
      const added: ContributedPolicy[] = [];
      for (let i = head; i < nextEnd; i++) {
        const c = translate(input.at(i)!);
        if (c === STAGED) staged++;
        else added.push(c);
        edits.push({ at: head, insert: true, now: c });
      }
      for (let i = head; i < prevEnd; i++) {
        const c = prev.each.at(i)!;
        if (c === STAGED) staged--;
        else gone.add(c);
        edits.push({ at: i, insert: false, now: undefined });
      }
      // A policy translated the same on both sides (its object kept) is no change.
      const kept = added.filter((c) => !gone.delete(c));
      return { each: prev.each.edit(edits), staged, change: { removed: [...gone], added: kept } };
    }
  }
  const each = ChunkedList.from(input.map(translate));
  let staged = 0;
  for (const c of each) if (c === STAGED) staged++;
  return { each, staged };
}

function enforced(each: ChunkedList<Translation>): ContributedPolicy[] {
  const out: ContributedPolicy[] = [];
  for (const c of each) if (c !== STAGED) out.push(c);
  return out;
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
      l = staged === 0 ? (each as ChunkedList<ContributedPolicy>) : enforced(each);
      // What changed, for the grouping's patch (policy-chains.ts): read, not found by a walk.
      if (change !== undefined && last !== undefined) recordListChange(last.list, l, change);
      last = { input: state.policies, each, staged, list: l };
      listMemo.set(state.policies, l);
    }
    return l;
  },
};
