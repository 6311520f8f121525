// Sets shared by every rule that needs the same content. A set is named by a
// hash of its definition (ruleset/ids.ts setId), so the first rule to ask for a
// definition creates the set and every later one references it: a peer
// expression used by ten policies is rendered (and resolved) once.
import type { NamedSet } from '../ruleset/ir.ts';

interface Entry {
  readonly definition: string;
  readonly set: NamedSet;
}

export class SharedSets {
  readonly #byName = new Map<string, Entry>();
  readonly #ordered: NamedSet[] = [];

  /**
   * The set `name` for `definition`, created with `make` on first use;
   * `created` receives a set only when it is new. (Only the set is shared:
   * each rule matches on it its own way, e.g. saddr for ingress, daddr for
   * egress.)
   */
  use(name: string, definition: string, make: () => NamedSet, created: NamedSet[]): NamedSet {
    const hit = this.#byName.get(name);
    if (hit !== undefined) {
      // 48-bit hashes: a collision is practically impossible, but must never merge two definitions.
      if (hit.definition !== definition) throw new Error(`identifier collision on ${name}`);
      return hit.set;
    }
    const set = make();
    this.#byName.set(name, { definition, set });
    created.push(set);
    return set;
  }

  /** Appends sets created by one rule, in the order the rule wants them listed. */
  append(sets: readonly NamedSet[]): void {
    this.#ordered.push(...sets);
  }

  /** Every set, in order of first use. */
  all(): readonly NamedSet[] {
    return this.#ordered;
  }
}
