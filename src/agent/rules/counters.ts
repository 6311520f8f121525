// Per-rule connection counters, pure. The kernel counts in each rule's chain
// (KUBE-NWPLCY-<policy>-<dir>-<index>: allow-list rules in identities.ts,
// ClusterNetworkPolicy rules in tiers.ts); the compiled ruleset says which
// chains count for which rule (Chain.counts). This module turns successive
// reads of those counters into monotonic totals: nft counters restart at 0
// when their rule is replaced (a full apply, a flushed and refilled chain),
// so a rule handle not seen before, or a value that went down, counts from 0
// (an offset per rule handle), and a total never goes down while its rule
// exists. Packets a replaced rule counted after the last read are lost, never
// counted twice.
import type { CompiledRuleset, CountedRule } from '../../ruleset/ir.ts';

/** One counter in the kernel: the chain it is in, its rule handle, its packets. */
export interface KernelRuleCounter {
  readonly chain: string;
  readonly handle: number;
  readonly packets: number;
}

interface NftJsonRule {
  readonly chain?: string;
  readonly handle?: number;
  readonly expr?: readonly Record<string, unknown>[];
}

/** The rule chains of a compiled ruleset and what each counts for. */
export function countedRules(c: CompiledRuleset): Map<string, CountedRule> {
  const out = new Map<string, CountedRule>();
  for (const ch of c.chains) if (ch.role === 'rule' && ch.counts !== undefined) out.set(ch.name, ch.counts);
  return out;
}

/** The counters of the rules in `chains`, from an `nft -j` listing of our table. */
export function ruleCountersFromJson(json: string, chains: ReadonlyMap<string, unknown>): KernelRuleCounter[] {
  const out: KernelRuleCounter[] = [];
  const doc = JSON.parse(json) as { nftables?: readonly { rule?: NftJsonRule }[] };
  for (const item of doc.nftables ?? []) {
    const r = item.rule;
    if (r?.chain === undefined || r.handle === undefined || !chains.has(r.chain)) continue;
    for (const e of r.expr ?? []) {
      const c = e['counter'] as { packets?: number } | undefined;
      if (c !== undefined && typeof c.packets === 'number') out.push({ chain: r.chain, handle: r.handle, packets: c.packets });
    }
  }
  return out;
}

/** One rule's totals since the agent started. */
export interface RuleTotal {
  readonly chain: string;
  readonly counts: CountedRule;
  /** New connections it decided (packets its chain counted: a retransmitted SYN counts again). */
  readonly hits: number;
  /** When a read last found the count higher (ms since the epoch); undefined: never. */
  readonly lastHitMs: number | undefined;
  /** Exported as a metric series (false: over the cap). */
  readonly exported: boolean;
}

/** What one read changed, for the metrics. */
export interface RuleAdvance {
  /** Rules whose series is exported, with their increase (0 included: a new series exists from the start). */
  readonly increased: readonly { readonly counts: CountedRule; readonly delta: number }[];
  /** Series to remove: their rules are no longer in the ruleset. */
  readonly removed: readonly CountedRule[];
  /** Rules not exported because of the cap. */
  readonly dropped: number;
  /** True on the read where the cap first turned rules away (since it last had room). */
  readonly capReached: boolean;
}

interface Mutable {
  counts: CountedRule;
  hits: number;
  lastHitMs: number | undefined;
  exported: boolean;
}

export class RuleCounterState {
  readonly #max: number;
  /** `chain#handle` -> packets at the last read. */
  #last = new Map<string, number>();
  readonly #rules = new Map<string, Mutable>();
  #exported = 0;
  #full = false;

  /** `maxSeries`: how many rules may have a metric series at once. */
  constructor(maxSeries: number) {
    this.#max = maxSeries;
  }

  /**
   * One read: `rules` are the rule chains of the ruleset the kernel holds,
   * `now` their counters. A rule first seen gets a series while there is room
   * under the cap (first come, in chain name order within a read); a rule gone
   * from the ruleset loses its totals and its series.
   */
  advance(rules: ReadonlyMap<string, CountedRule>, now: readonly KernelRuleCounter[], atMs: number): RuleAdvance {
    const delta = new Map<string, number>();
    const next = new Map<string, number>();
    for (const c of now) {
      const key = `${c.chain}#${c.handle}`;
      const before = this.#last.get(key);
      const d = before === undefined || c.packets < before ? c.packets : c.packets - before;
      next.set(key, c.packets);
      delta.set(c.chain, (delta.get(c.chain) ?? 0) + d);
    }
    this.#last = next;
    const removed: CountedRule[] = [];
    for (const [chain, r] of this.#rules) {
      if (rules.has(chain)) continue;
      this.#rules.delete(chain);
      if (r.exported) {
        this.#exported--;
        removed.push(r.counts);
      }
    }
    const increased: { counts: CountedRule; delta: number }[] = [];
    let dropped = 0;
    for (const chain of [...rules.keys()].sort()) {
      const counts = rules.get(chain)!;
      let r = this.#rules.get(chain);
      if (r === undefined) {
        const exported = this.#exported < this.#max;
        if (exported) this.#exported++;
        this.#rules.set(chain, (r = { counts, hits: 0, lastHitMs: undefined, exported }));
      } else if (!sameLabels(r.counts, counts)) {
        // Same chain, other labels (a ClusterNetworkPolicy rule renamed): the old series goes.
        if (r.exported) removed.push(r.counts);
        r.counts = counts;
      }
      const d = delta.get(chain) ?? 0;
      if (d > 0) {
        r.hits += d;
        r.lastHitMs = atMs;
      }
      if (r.exported) increased.push({ counts, delta: d });
      else dropped++;
    }
    const capReached = dropped > 0 && !this.#full;
    this.#full = dropped > 0;
    return { increased, removed, dropped, capReached };
  }

  /** Every rule of the ruleset with its totals, most hits first (then by policy and rule). */
  totals(): RuleTotal[] {
    return [...this.#rules]
      .map(([chain, r]): RuleTotal => ({ chain, counts: r.counts, hits: r.hits, lastHitMs: r.lastHitMs, exported: r.exported }))
      .sort((a, b) => b.hits - a.hits || ruleOrder(a.counts, b.counts) || byCodeUnits(a.chain, b.chain));
  }
}

function sameLabels(a: CountedRule, b: CountedRule): boolean {
  return (
    a.kind === b.kind &&
    a.namespace === b.namespace &&
    a.policy === b.policy &&
    a.rule === b.rule &&
    a.direction === b.direction &&
    a.action === b.action
  );
}

// Plain code-unit order, not localeCompare: the same on every node whatever
// its locale (the deterministic-output rule, for /debug/rules and `rules`).
function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Digit runs compared as numbers ("2" before "10"), the rest by code units. */
export function byNatural(a: string, b: string): number {
  const ra = a.match(/\d+|\D+/g) ?? [];
  const rb = b.match(/\d+|\D+/g) ?? [];
  for (let i = 0; i < Math.min(ra.length, rb.length); i++) {
    const x = ra[i]!;
    const y = rb[i]!;
    if (x === y) continue;
    const dx = /^\d/.test(x);
    const dy = /^\d/.test(y);
    if (dx && dy) return Number(x) - Number(y) || x.length - y.length;
    return byCodeUnits(x, y);
  }
  return ra.length - rb.length;
}

function ruleOrder(a: CountedRule, b: CountedRule): number {
  return (
    byCodeUnits(a.kind, b.kind) ||
    byCodeUnits(a.namespace, b.namespace) ||
    byCodeUnits(a.policy, b.policy) ||
    byCodeUnits(a.direction, b.direction) ||
    byNatural(a.rule, b.rule)
  );
}
