// A relevant policy's KUBE-NWPLCY chain kept from one compile to the next
// while nothing it was made from changed: the policy object (the kinds hand
// on an unchanged policy's translation), the local pods it targets (by
// object: their addresses and named ports), the node's families, and every
// peer result it read (the resolver hands on the same object while no pod
// in it changed). A policy change then compiles that policy's chains, not
// every relevant policy's (~100 on the agent benchmark's node, 3-7 ms of
// each apply). Lives as long as the resolver it reads (node-compiler.ts).
import type { Family, Pod } from '../model/types.ts';
import { policyChainName } from '../ruleset/ids.ts';
import { compilePolicyChain, replayChain } from './policy-rules.ts';
import type { ChainReads, PolicyChainInput, PolicyChainOutput } from './policy-rules.ts';

interface Kept {
  readonly policy: PolicyChainInput['policy'];
  readonly targets: readonly Pod[];
  readonly families: readonly Family[];
  readonly reads: ChainReads;
  readonly output: PolicyChainOutput;
}

const sameItems = <T>(a: readonly T[], b: readonly T[]): boolean =>
  a === b || (a.length === b.length && a.every((x, i) => x === b[i]));

export class PolicyChainMemo {
  readonly #kept = new Map<string, Kept>();
  readonly #used = new Set<string>();
  /** Chains taken over and compiled since this memo was made (for tests and the benchmarks). */
  readonly counts = { kept: 0, compiled: 0 };

  /** compilePolicyChain(input), or the kept chain when everything it read is the same. */
  compile(input: PolicyChainInput): PolicyChainOutput {
    const name = policyChainName(input.policyId, input.direction);
    this.#used.add(name);
    const k = this.#kept.get(name);
    if (
      k !== undefined &&
      !k.reads.volatile &&
      k.policy === input.policy &&
      sameItems(k.targets, input.targets) &&
      k.families.length === input.families.size &&
      k.families.every((f) => input.families.has(f)) &&
      // Read in the order the compile read them, each as the compile would (the resolver counts them as used).
      k.reads.deps.every((d) => d.read() === d.value)
    ) {
      this.counts.kept++;
      return { ...k.output, sets: replayChain(input, k.reads) };
    }
    this.counts.compiled++;
    const reads: ChainReads = { deps: [], volatile: false, rules: [] };
    const output = compilePolicyChain({ ...input, reads });
    this.#kept.set(name, {
      policy: input.policy,
      targets: input.targets,
      families: [...input.families],
      reads,
      output,
    });
    return output;
  }

  /** Forgets the chains the last compile did not ask for (deleted policies, pods gone). Returns how many stay. */
  sweep(): number {
    for (const name of this.#kept.keys()) if (!this.#used.has(name)) this.#kept.delete(name);
    this.#used.clear();
    return this.#kept.size;
  }
}
