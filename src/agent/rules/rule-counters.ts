// Per-rule connection counters, assembled: read from the kernel (a terse
// `nft -j` listing, the one the deny counters use) once applies pause, every
// --rule-counters-interval, before a scrape and for /debug/rules; exported as
// nftnp_policy_rule_connections_total, at most --rule-metrics-max series.
import type { Logger } from 'pino';
import type { Metrics } from '../../observability/metrics.ts';
import type { CompiledRuleset } from '../../ruleset/ir.ts';
import { countedRules, ruleCountersFromJson, RuleCounterState } from './counters.ts';
import type { RuleTotal } from './counters.ts';

export interface RuleCountersParts {
  /** The counters listing (`nft -t -j list table`); undefined: no table. */
  readonly list: (() => Promise<string | undefined>) | undefined;
  /** The compiled ruleset the kernel holds. */
  readonly ruleset: () => CompiledRuleset | undefined;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly maxSeries: number;
  readonly intervalMs: number;
  /** The least quiet time after an apply before the read it asks for (default 1 s). */
  readonly quietMs?: number;
  readonly now?: () => number;
}

/** What /debug/rules shows. */
export interface RulesSnapshot {
  /** When the counters were last read (ms since the epoch); undefined: not yet. */
  readonly readAtMs: number | undefined;
  readonly startedAtMs: number;
  readonly maxSeries: number;
  readonly dropped: number;
  readonly rules: readonly RuleTotal[];
}

// Reads closer together than this (scrapes, /debug/rules) reuse the last one.
const MIN_READ_INTERVAL_MS = 2_000;
const QUIET_MS = 1_000;

export class RuleCounters {
  readonly #p: RuleCountersParts;
  readonly #state: RuleCounterState;
  readonly #now: () => number;
  readonly #startedAt: number;
  #reading: Promise<void> | undefined;
  #again = false;
  #readAt: number | undefined;
  #dropped = 0;
  #timer: NodeJS.Timeout | undefined;
  #quiet: NodeJS.Timeout | undefined;
  /** How long the last listing took. */
  #listMs = 0;

  constructor(p: RuleCountersParts) {
    this.#p = p;
    this.#state = new RuleCounterState(p.maxSeries);
    this.#now = p.now ?? Date.now;
    this.#startedAt = this.#now();
    p.metrics.policyRuleSeriesDropped.set(0);
  }

  start(): void {
    if (this.#p.intervalMs <= 0) return;
    this.#timer = setInterval(() => void this.refresh(true), this.#p.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    if (this.#quiet !== undefined) clearTimeout(this.#quiet);
  }

  /**
   * After an apply: a forced read (the new rule chains' handles learnt) once
   * no apply has followed for twice the last listing's time, 1 s at least.
   * nft 1.0.6 fetches every set element even for a terse listing: 0.3-0.5 s
   * of CPU at 100k pods, which must not run beside the next change's
   * transaction (docs/agent.md "Cost per change"). A steady stream of
   * changes defers it; the interval's reads and scrapes still happen.
   */
  refreshWhenQuiet(): void {
    if (this.#quiet !== undefined) clearTimeout(this.#quiet);
    const wait = Math.max(this.#p.quietMs ?? QUIET_MS, 2 * this.#listMs);
    this.#quiet = setTimeout(() => {
      this.#quiet = undefined;
      void this.refresh(true);
    }, wait);
    this.#quiet.unref();
  }

  /**
   * Brings the counters up to date; `force` skips the reuse window (after an
   * apply: the new rule handles are learnt at once). Failures are logged,
   * never thrown. A forced read asked for while one runs follows it.
   */
  refresh(force = false): Promise<void> {
    if (this.#reading !== undefined) {
      if (force) this.#again = true;
      return this.#reading;
    }
    if (!force && this.#readAt !== undefined && this.#now() - this.#readAt < MIN_READ_INTERVAL_MS) return Promise.resolve();
    this.#reading = this.#read()
      .catch((e: unknown) => this.#p.log.debug({ err: e, event: 'rule-counters' }, 'reading the rule counters failed'))
      .finally(() => {
        this.#reading = undefined;
        if (this.#again) {
          this.#again = false;
          void this.refresh(true);
        }
      });
    return this.#reading;
  }

  snapshot(): RulesSnapshot {
    return {
      readAtMs: this.#readAt,
      startedAtMs: this.#startedAt,
      maxSeries: this.#p.maxSeries,
      dropped: this.#dropped,
      rules: this.#state.totals(),
    };
  }

  async #read(): Promise<void> {
    const ruleset = this.#p.ruleset();
    const list = this.#p.list;
    if (ruleset === undefined || list === undefined) return;
    const rules = countedRules(ruleset);
    const t0 = performance.now();
    const json = await list();
    this.#listMs = performance.now() - t0;
    if (json === undefined) return;
    // The ruleset may have changed during the listing: its rule chains are
    // read again, and a chain the listing lacks simply has no counter yet.
    const now = this.#p.ruleset() ?? ruleset;
    const current = now === ruleset ? rules : countedRules(now);
    const at = this.#now();
    const a = this.#state.advance(current, ruleCountersFromJson(json, current), at);
    this.#readAt = at;
    const m = this.#p.metrics;
    for (const r of a.removed) m.policyRuleConnections.remove({ ...r });
    for (const { counts, delta } of a.increased) m.policyRuleConnections.inc({ ...counts }, delta);
    m.policyRuleSeriesDropped.set(a.dropped);
    this.#dropped = a.dropped;
    if (a.capReached)
      this.#p.log.warn(
        { event: 'rule-metrics-max', max: this.#p.maxSeries, dropped: a.dropped },
        `per-rule counters: ${a.dropped} policy rules of this node have no nftnp_policy_rule_connections_total series: over --rule-metrics-max ${this.#p.maxSeries} (they are still counted in /debug/rules)`,
      );
  }
}
