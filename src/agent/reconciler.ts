// The reconcile loop: turns "something changed" notifications into at most
// one nft transaction in flight, each bringing the kernel to the full ruleset
// of the latest snapshot (the whole table, or only the set elements that
// changed: nft/update.ts). Everything impure is injected (ports.ts); the decisions
// (what to apply, when to retry, what counts as drift) live here and in the
// pure helpers next to it.
//
// Invariants:
// - nothing is written before the source has synced (a previous run's table
//   stays in force until then);
// - one job runs at a time (p-queue, concurrency 1) and at most one apply job
//   waits behind it: a waiting job snapshots when it starts, so the latest
//   state wins and bursts coalesce; applies start at least `debounceMs`
//   apart, but a change reaching an idle loop is applied at once;
// - a failed transaction changes nothing in the kernel (nft is atomic); it is
//   retried with capped exponential backoff, and new changes wait for it too;
// - every callback is wrapped: errors are logged and counted, never thrown.
import PQueue from 'p-queue';
import type { Logger } from 'pino';
import type { ClusterState } from '../model/types.ts';
import { errorMessage } from '../observability/errors.ts';
import { backoffDelay, DEFAULT_BACKOFF, type BackoffPolicy } from './backoff.ts';
import { checkDrift, compiledObjects, normalizeListing, sameObjects, tableObjects } from './drift.ts';
import { isEmptyUpdate, renderUpdate } from '../nft/update.ts';
import type { UpdateCounts } from '../nft/update.ts';
import type { RulesetUpdate } from '../nft/update.ts';
import {
  diffInvalid,
  invalidKey,
  eventMessage,
  fingerprint,
  reportsEventFor,
  type InvalidIndex,
  type InvalidPolicy,
} from './invalid-policies.ts';
import { releasedPodIPs } from './local-view.ts';
import {
  SYSTEM_CLOCK,
  type AgentMetrics,
  type Clock,
  type Dataplane,
  type EventSink,
  type NftResult,
  type Rendered,
  type RenderFn,
  type RenderStats,
  type StateSource,
} from './ports.ts';

export interface ReconcilerOptions {
  readonly nodeName: string;
  readonly debounceMs: number;
  /** 0 disables the periodic drift check. */
  readonly driftIntervalMs: number;
  readonly backoff?: BackoffPolicy;
  /** How often to look at source.synced() while waiting for it. */
  readonly syncPollMs?: number;
  /** How often watch restart counters are read into metrics. */
  readonly watchPollMs?: number;
  /** An apply in flight for longer than this makes /healthz fail. */
  readonly wedgeMs?: number;
  /**
   * An unchanged render is skipped without listing the table when the kernel
   * was seen to match within this time (listing costs ~0.5 s at 100k pods;
   * the drift timer still checks on its own).
   */
  readonly kernelCheckFreshMs?: number;
  /**
   * Apply changes as incremental transactions (elements, chains, sets:
   * nft/update.ts) instead of the full script, when the renderer gives the
   * compiled ruleset. Off by default here; the agent turns it on.
   */
  readonly incremental?: boolean;
}

export interface ReconcilerDeps {
  readonly source: StateSource;
  readonly render: RenderFn;
  readonly dataplane: Dataplane;
  readonly metrics: AgentMetrics;
  readonly log: Logger;
  readonly events: EventSink;
  readonly clock?: Clock;
  /** Called after a successful apply with pod IPs that lost their owner (conntrack cleanup). */
  readonly onReleasedIPs?: (ips: readonly string[]) => Promise<void>;
}

export type ApplyResult = 'applied' | 'unchanged' | 'failed';

export interface ApplyRecord {
  readonly result: ApplyResult;
  /** How the kernel was updated: the whole table, or only set/map elements. */
  readonly mode: 'full' | 'incremental' | undefined;
  /** What triggered it: change reasons, "drift", "retry". */
  readonly reasons: readonly string[];
  readonly atUnixMs: number;
  readonly durationMs: number;
  readonly stats: RenderStats | undefined;
  readonly error: string | undefined;
  readonly exitCode: number | undefined;
}

export interface DriftRecord {
  readonly atUnixMs: number;
  readonly result: 'match' | 'drifted' | 'unknown';
  readonly detail: string | undefined;
}

export type Phase = 'waiting-for-sync' | 'out-of-sync' | 'in-sync';

export interface ReconcilerStatus {
  readonly phase: Phase;
  /** A ruleset has been applied (or confirmed in place) since start. */
  readonly ready: boolean;
  readonly synced: boolean;
  readonly applying: boolean;
  readonly applyingForMs: number | undefined;
  readonly pending: boolean;
  readonly consecutiveFailures: number;
  readonly nextRetryInMs: number | undefined;
  readonly lastApply: ApplyRecord | undefined;
  readonly lastSuccess: ApplyRecord | undefined;
  readonly lastDriftCheck: DriftRecord | undefined;
  readonly driftRepairs: number;
  readonly invalidPolicies: readonly InvalidPolicy[];
}

export type KernelCheck =
  | { readonly kind: 'match' }
  | { readonly kind: 'drifted'; readonly detail: string }
  | { readonly kind: 'unknown'; readonly detail: string };

interface Applied {
  /** What was applied; its text is rendered lazily (only a full apply or the debug endpoint needs it). */
  readonly rendered: Rendered;
  /** Normalized kernel listing right after the apply; undefined if it could not be read. */
  readonly canonical: string | undefined;
}

const MAX_REASONS = 16;
const NO_READBACK = 'no listing was captured after the last apply';

export class Reconciler {
  readonly #d: ReconcilerDeps;
  readonly #o: Required<ReconcilerOptions>;
  readonly #clock: Clock;
  readonly #queue = new PQueue({ concurrency: 1 });

  #started = false;
  #stopped = false;
  #synced = false;

  #dirty = false;
  /** Monotonic time of the first change not yet applied (latency metric). */
  #pendingSince: number | undefined;
  #pendingReasons = new Set<string>();
  #applyQueued = false;
  #driftQueued = false;

  #debounceTimer: NodeJS.Timeout | undefined;
  #syncTimer: NodeJS.Timeout | undefined;
  #driftTimer: NodeJS.Timeout | undefined;
  #watchTimer: NodeJS.Timeout | undefined;

  #failures = 0;
  #retryAt: number | undefined;
  #inFlightSince: number | undefined;
  /** Incremental applies since the last full one. */
  #incrementsSinceFull = 0;
  /** Aborts the read-back after an apply when a newer change is queued. */
  #captureAbort: AbortController | undefined;
  /** Monotonic time the kernel was last seen to match the last apply. */
  #kernelVerifiedAt: number | undefined;
  /** Monotonic start of the last reconcile that did work (throttle). */
  #lastStart: number | undefined;
  #applied: Applied | undefined;
  /** The script of the last failed transaction, until one succeeds (debug endpoint). */
  #failedText: string | undefined;
  /** The snapshot of the last successful apply, for released pod IPs. */
  #releasedFrom: ClusterState | undefined;

  #invalid: InvalidIndex = new Map();
  /** key -> errors fingerprint an Event was created for. */
  #evented = new Map<string, string>();
  #invalidAll: readonly InvalidPolicy[] = [];
  #watchRestarts = new Map<string, number>();

  #lastApply: ApplyRecord | undefined;
  #lastSuccess: ApplyRecord | undefined;
  #lastDrift: DriftRecord | undefined;
  #driftRepairs = 0;
  #lastState: ClusterState | undefined;

  constructor(deps: ReconcilerDeps, opts: ReconcilerOptions) {
    this.#d = deps;
    this.#clock = deps.clock ?? SYSTEM_CLOCK;
    this.#o = {
      backoff: DEFAULT_BACKOFF,
      syncPollMs: 100,
      watchPollMs: 5000,
      wedgeMs: 150_000,
      kernelCheckFreshMs: 5000,
      incremental: false,
      ...opts,
    };
  }

  /** Begins waiting for the source to sync; applies follow on their own. */
  start(): void {
    if (this.#started || this.#stopped) return;
    this.#started = true;
    this.#d.metrics.resyncState(1);
    this.#dirty = true;
    this.#pendingReasons.add('start');
    if (this.#o.driftIntervalMs > 0) {
      this.#driftTimer = setInterval(() => this.#guard('drift timer', () => this.#enqueueDrift()), this.#o.driftIntervalMs);
      this.#driftTimer.unref();
    }
    this.#watchTimer = setInterval(() => this.#guard('watch status', () => this.#pollWatchStatus()), this.#o.watchPollMs);
    this.#watchTimer.unref();
    this.#schedule();
  }

  /** Something in the cluster changed: apply the latest state soon. */
  notify(reason: string): void {
    this.#guard('notify', () => {
      if (this.#stopped) return;
      this.#dirty = true;
      this.#pendingSince ??= this.#clock.mono();
      if (this.#pendingReasons.size < MAX_REASONS) this.#pendingReasons.add(reason);
      this.#schedule();
    });
  }

  /** Reads the table back now and repairs it if it drifted (also run on a timer). */
  checkDriftNow(): Promise<void> {
    return this.#enqueueDrift();
  }

  /**
   * Stops timers and drops waiting jobs; waits up to graceMs for the job in
   * flight. Returns false when it was abandoned (the kernel then holds the old
   * or the new ruleset: nft transactions are atomic).
   */
  async stop(graceMs: number): Promise<boolean> {
    this.#stopped = true;
    for (const t of [this.#debounceTimer, this.#syncTimer]) if (t !== undefined) clearTimeout(t);
    for (const t of [this.#driftTimer, this.#watchTimer]) if (t !== undefined) clearInterval(t);
    this.#debounceTimer = this.#syncTimer = this.#driftTimer = this.#watchTimer = undefined;
    this.#queue.clear();
    // A read-back in flight is bookkeeping only: no need to wait for it.
    this.#captureAbort?.abort();
    if (this.#queue.pending === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const finished = await Promise.race([
      this.#queue.onIdle().then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), graceMs);
      }),
    ]);
    clearTimeout(timer);
    return finished;
  }

  /** Live: the loop is not stuck in one apply. */
  health(): { readonly ok: boolean; readonly detail: string } {
    const since = this.#inFlightSince;
    if (since !== undefined && this.#clock.mono() - since > this.#o.wedgeMs) {
      return { ok: false, detail: `an apply has been in flight for ${Math.round(this.#clock.mono() - since)} ms` };
    }
    return { ok: true, detail: 'ok' };
  }

  /** Ready: a ruleset for a synced state is in force. */
  ready(): boolean {
    return this.#lastSuccess !== undefined;
  }

  lastAppliedText(): string | undefined {
    return this.#applied?.rendered.text;
  }

  /** The script nft rejected last, while no later apply has succeeded. */
  lastFailedText(): string | undefined {
    return this.#failedText;
  }

  /** The snapshot the last reconcile used (undefined before the first). */
  lastState(): ClusterState | undefined {
    return this.#lastState;
  }

  /** Lists the table and compares it with the last apply (debug endpoint). */
  async kernelMatches(): Promise<KernelCheck> {
    const applied = this.#applied;
    if (applied === undefined) return { kind: 'unknown', detail: 'nothing applied yet' };
    return this.#checkKernel(applied);
  }

  status(): ReconcilerStatus {
    const now = this.#clock.mono();
    const phase: Phase =
      !this.#synced && this.#lastSuccess === undefined ? 'waiting-for-sync' : this.#inSync() ? 'in-sync' : 'out-of-sync';
    return {
      phase,
      ready: this.ready(),
      synced: this.#synced,
      applying: this.#inFlightSince !== undefined,
      applyingForMs: this.#inFlightSince === undefined ? undefined : Math.round(now - this.#inFlightSince),
      pending: this.#dirty,
      consecutiveFailures: this.#failures,
      nextRetryInMs: this.#retryAt === undefined ? undefined : Math.max(0, Math.round(this.#retryAt - now)),
      lastApply: this.#lastApply,
      lastSuccess: this.#lastSuccess,
      lastDriftCheck: this.#lastDrift,
      driftRepairs: this.#driftRepairs,
      invalidPolicies: this.#invalidAll,
    };
  }

  // ---- scheduling ----

  #inSync(): boolean {
    return this.#lastApply?.result !== 'failed' && this.#lastSuccess !== undefined && !this.#dirty;
  }

  #schedule(): void {
    if (!this.#started || this.#stopped || !this.#dirty) return;
    if (!this.#d.source.synced()) {
      this.#waitForSync();
      return;
    }
    // A timer already set, or a job not yet started, will read the latest state.
    if (this.#debounceTimer !== undefined || this.#applyQueued) return;
    // Leading-edge throttle: an idle loop applies a change at once (after the
    // current I/O callbacks, so one watch chunk is one apply); otherwise
    // applies start at least debounceMs apart and what arrives meanwhile
    // coalesces. A pending retry's backoff holds everything back.
    const now = this.#clock.mono();
    const wait = Math.max(0, (this.#lastStart ?? -Infinity) + this.#o.debounceMs - now, (this.#retryAt ?? 0) - now);
    this.#debounceTimer = setTimeout(() => {
      this.#debounceTimer = undefined;
      this.#guard('debounce timer', () => this.#enqueueApply());
    }, wait);
    this.#debounceTimer.unref();
  }

  #waitForSync(): void {
    if (this.#syncTimer !== undefined) return;
    if (!this.#synced) this.#d.metrics.resyncState(1);
    const poll = (): void => {
      this.#syncTimer = undefined;
      if (this.#stopped) return;
      if (!this.#d.source.synced()) {
        this.#syncTimer = setTimeout(() => this.#guard('sync poll', poll), this.#o.syncPollMs);
        this.#syncTimer.unref();
        return;
      }
      this.#markSynced();
      this.#schedule();
    };
    poll();
  }

  #markSynced(): void {
    if (this.#synced) return;
    this.#synced = true;
    // The initial sync is not an "event": keep it out of the latency histogram.
    this.#pendingSince = undefined;
    this.#d.log.info({ event: 'synced' }, 'cluster state synced; applying');
  }

  #enqueueApply(): void {
    if (this.#stopped || this.#applyQueued) return;
    this.#applyQueued = true;
    // A newer state waits: the read-back of the previous apply is moot.
    this.#captureAbort?.abort();
    this.#queue
      .add(async () => {
        this.#applyQueued = false;
        await this.#reconcile(false);
      })
      .catch((e: unknown) => this.#d.log.error({ err: e }, 'reconcile job failed unexpectedly'));
  }

  #enqueueDrift(): Promise<void> {
    if (this.#stopped || this.#driftQueued) return Promise.resolve();
    this.#driftQueued = true;
    return this.#queue
      .add(async () => {
        this.#driftQueued = false;
        await this.#driftCheck();
      })
      .catch((e: unknown) => this.#d.log.error({ err: e }, 'drift check failed unexpectedly'));
  }

  #guard(what: string, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.#d.log.error({ err: e, where: what }, 'agent callback failed; continuing');
    }
  }

  // ---- the job ----

  async #reconcile(force: boolean, trigger?: string): Promise<void> {
    if (this.#stopped) return;
    if (!this.#d.source.synced()) {
      this.#waitForSync();
      return;
    }
    this.#markSynced();
    if (!this.#dirty && !force) return;
    this.#lastStart = this.#clock.mono();
    const since = this.#pendingSince;
    const reasons = trigger === undefined ? [...this.#pendingReasons] : [trigger, ...this.#pendingReasons];
    this.#dirty = false;
    this.#pendingSince = undefined;
    this.#pendingReasons.clear();
    this.#d.metrics.resyncState(2);
    this.#pollWatchStatus();

    const t0 = this.#clock.mono();
    this.#inFlightSince = t0;
    try {
      let state: ClusterState;
      let rendered;
      // Where an apply's time goes, for the log line: snapshot, compile, update
      // diff, rendering the full script (when one is sent), nft.
      const phases = { snapshot: 0, compile: 0, update: 0, render: 0, nft: 0 };
      try {
        state = this.#d.source.snapshot();
        phases.snapshot = this.#clock.mono() - t0;
        rendered = this.#d.render(state);
        phases.compile = this.#clock.mono() - t0 - phases.snapshot;
      } catch (e) {
        this.#failed(since, reasons, t0, undefined, `render failed: ${errorMessage(e)}`, undefined);
        return;
      }
      this.#lastState = state;
      this.#reportInvalid(state);
      this.#d.metrics.rulesetStats(rendered.stats);
      this.#d.metrics.clusterPolicies(state.policies.length);

      let repair = trigger === 'drift';
      const prev = this.#applied;
      // The update from what the kernel holds, when both sides are compiled:
      // it also says whether anything changed, without rendering the full text.
      const tu = this.#clock.mono();
      const update: RulesetUpdate | undefined =
        prev?.rendered.compiled !== undefined && rendered.compiled !== undefined
          ? renderUpdate(prev.rendered.compiled, rendered.compiled)
          : undefined;
      phases.update = this.#clock.mono() - tu;
      const unchanged =
        prev !== undefined &&
        (update === undefined ? prev.rendered.text === rendered.text : update.kind === 'incremental' && isEmptyUpdate(update));
      if (!force && prev !== undefined && unchanged) {
        const fresh =
          prev.canonical !== undefined &&
          this.#kernelVerifiedAt !== undefined &&
          this.#clock.mono() - this.#kernelVerifiedAt < this.#o.kernelCheckFreshMs;
        const check: KernelCheck = fresh ? { kind: 'match' } : await this.#checkKernel(prev);
        if (check.kind === 'match') {
          this.#succeeded(since, reasons, t0, rendered.stats, 'unchanged', false);
          this.#releaseIPs(state);
          return;
        }
        // Same ruleset but the kernel differs (or cannot be read): re-apply.
        if (check.kind === 'drifted') {
          repair = true;
          this.#d.log.warn({ event: 'drift', detail: check.detail }, 'table differs from the last apply; re-applying');
        }
      }

      // Incremental changes (elements, pod and policy chains, sets): a small
      // transaction; any rejection falls back to the full script below (nft
      // is atomic: a rejected increment changed nothing).
      let mode: 'full' | 'incremental' = 'full';
      let counts: UpdateCounts | undefined;
      if (this.#o.incremental && !force && !unchanged && update?.kind === 'incremental') {
        this.#d.metrics.restoreCall();
        const r = await this.#applyScript(update.text, phases);
        if (r.ok) {
          mode = 'incremental';
          counts = update;
        } else
          this.#d.log.warn(
            { event: 'apply', mode: 'incremental', error: r.error.trim() },
            'incremental update rejected; applying the full ruleset',
          );
      }
      let res: NftResult = { ok: true };
      if (mode === 'full') {
        this.#d.metrics.restoreCall();
        const tr = this.#clock.mono();
        const text = update?.kind === 'full' ? update.text : rendered.text;
        phases.render = this.#clock.mono() - tr;
        res = await this.#applyScript(text, phases);
      }
      // Render and transaction; the read-back below is bookkeeping, not applying.
      this.#d.metrics.applySeconds((this.#clock.mono() - t0) / 1000);
      if (!res.ok) {
        this.#failedText = rendered.text;
        this.#d.metrics.restoreError();
        this.#failed(since, reasons, t0, rendered.stats, `nft failed: ${res.error.trim()}`, res.exitCode);
        return;
      }
      // Enforced now: record it (latency, log line) before the read-back below.
      this.#applied = { rendered, canonical: undefined };
      this.#incrementsSinceFull = mode === 'incremental' ? this.#incrementsSinceFull + 1 : 0;
      this.#succeeded(since, reasons, t0, rendered.stats, 'applied', repair, mode, counts, phases);
      this.#releaseIPs(state);
      // The canonical listing for drift checks, captured right after the apply
      // (given up if a newer change is queued: its apply captures instead).
      const ac = new AbortController();
      this.#captureAbort = ac;
      const listing = await this.#listQuietly(ac.signal);
      this.#captureAbort = undefined;
      if (
        listing !== undefined &&
        !sameObjects(rendered.compiled !== undefined ? compiledObjects(rendered.compiled) : tableObjects(rendered.text), listing)
      ) {
        // Changed between our commit and the read-back: not canonical; the
        // next drift check (no read-back) applies again.
        this.#d.log.warn({ event: 'list' }, 'the table was changed right after the apply; it will be re-applied');
      } else if (listing !== undefined) {
        this.#applied = { rendered, canonical: normalizeListing(listing) };
        this.#kernelVerifiedAt = this.#clock.mono();
      } else if (ac.signal.aborted) {
        this.#d.log.debug({ event: 'list' }, 'read-back skipped: a newer change is waiting');
      } else {
        this.#d.log.warn({ event: 'list' }, 'could not read the table back after applying; the next drift check re-applies');
      }
    } finally {
      this.#inFlightSince = undefined;
    }
  }

  #succeeded(
    since: number | undefined,
    reasons: readonly string[],
    t0: number,
    stats: RenderStats,
    result: 'applied' | 'unchanged',
    repair: boolean,
    mode?: 'full' | 'incremental',
    counts?: UpdateCounts,
    phases?: Readonly<Record<string, number>>,
  ): void {
    const now = this.#clock.mono();
    const durationMs = now - t0;
    const rec: ApplyRecord = {
      result,
      mode,
      reasons,
      atUnixMs: this.#clock.wall(),
      durationMs,
      stats,
      error: undefined,
      exitCode: undefined,
    };
    const recovered = this.#failures > 0;
    this.#failures = 0;
    this.#failedText = undefined;
    this.#retryAt = undefined;
    this.#lastApply = rec;
    this.#lastSuccess = rec;
    if (since !== undefined) this.#d.metrics.eventToAppliedSeconds((now - since) / 1000);
    this.#d.metrics.lastSuccess(rec.atUnixMs / 1000);
    this.#d.metrics.resyncState(this.#dirty ? 2 : 3);
    if (repair) {
      this.#driftRepairs++;
      this.#d.metrics.driftRepair();
      this.#d.log.warn({ event: 'drift-repaired' }, 'drifted table restored');
    }
    const update =
      counts === undefined
        ? {}
        : {
            update: {
              elementsAdded: counts.added,
              elementsRemoved: counts.removed,
              chainsAdded: counts.chainsAdded,
              chainsChanged: counts.chainsChanged,
              chainsDeleted: counts.chainsDeleted,
              setsAdded: counts.setsAdded,
              setsDeleted: counts.setsDeleted,
            },
          };
    const phasesMs =
      phases === undefined
        ? {}
        : { phasesMs: Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, Math.round(v * 10) / 10])) };
    const line = {
      event: 'apply',
      result,
      ...(mode === undefined ? {} : { mode }),
      ...update,
      reasons,
      durationMs: Math.round(durationMs * 10) / 10,
      ...phasesMs,
      ...stats,
      recovered,
    };
    if (result === 'applied') this.#d.log.info(line, 'ruleset applied');
    else this.#d.log.debug(line, 'ruleset unchanged and in place');
  }

  #failed(
    since: number | undefined,
    reasons: readonly string[],
    t0: number,
    stats: RenderStats | undefined,
    error: string,
    exitCode: number | undefined,
  ): void {
    this.#failures++;
    const delay = backoffDelay(this.#o.backoff, this.#failures);
    this.#retryAt = this.#clock.mono() + delay;
    const durationMs = this.#clock.mono() - t0;
    this.#lastApply = {
      result: 'failed',
      mode: 'full',
      reasons,
      atUnixMs: this.#clock.wall(),
      durationMs,
      stats,
      error,
      exitCode,
    };
    this.#d.metrics.dataplaneFailure();
    this.#d.metrics.resyncState(2);
    this.#d.log.error(
      {
        event: 'apply',
        result: 'failed',
        reasons,
        error,
        exitCode,
        attempt: this.#failures,
        retryInMs: delay,
        durationMs: Math.round(durationMs),
      },
      'apply failed; the previous ruleset stays in force',
    );
    // Put the work back: the retry (after the backoff) applies the latest state.
    this.#dirty = true;
    if (since !== undefined) this.#pendingSince = this.#pendingSince === undefined ? since : Math.min(since, this.#pendingSince);
    for (const r of reasons) if (this.#pendingReasons.size < MAX_REASONS) this.#pendingReasons.add(r);
    this.#pendingReasons.add('retry');
    this.#schedule();
  }

  async #applyScript(script: string, phases?: { nft: number }): Promise<NftResult> {
    const t = this.#clock.mono();
    try {
      return await this.#d.dataplane.apply(script);
    } catch (e) {
      return { ok: false, error: errorMessage(e), exitCode: undefined };
    } finally {
      if (phases !== undefined) phases.nft += this.#clock.mono() - t;
    }
  }

  async #driftCheck(): Promise<void> {
    const applied = this.#applied;
    // Before the first apply there is nothing to compare; while a change is
    // pending, its apply checks (or replaces) the table anyway.
    if (this.#stopped || applied === undefined || this.#dirty) return;
    const check = await this.#checkKernel(applied);
    this.#lastDrift = {
      atUnixMs: this.#clock.wall(),
      result: check.kind,
      detail: check.kind === 'match' ? undefined : check.detail,
    };
    if (check.kind === 'unknown' && check.detail === NO_READBACK) {
      // The read-back after the last apply was given up or failed: nothing
      // to compare with, so apply again (not counted as a repair).
      this.#d.log.info({ event: 'drift-check' }, 'no read-back of the last apply to compare with; re-applying');
      await this.#reconcile(true, 'read-back');
      return;
    }
    if (check.kind === 'unknown') {
      this.#d.log.error({ event: 'drift-check', detail: check.detail }, 'could not read the table back');
      return;
    }
    if (check.kind === 'match') {
      this.#d.log.debug({ event: 'drift-check' }, 'table matches the last apply');
      // A read-back after an increment only shows what the kernel held then:
      // an edit made before that increment would pass as ours. One full
      // apply per interval after increments bounds how long it can last.
      if (this.#incrementsSinceFull > 0) await this.#reconcile(true, 'refresh');
      return;
    }
    this.#d.log.warn({ event: 'drift', detail: check.detail }, 'table was changed from outside; re-applying');
    await this.#reconcile(true, 'drift');
  }

  async #checkKernel(applied: Applied): Promise<KernelCheck> {
    if (applied.canonical === undefined) return { kind: 'unknown', detail: NO_READBACK };
    let listing;
    try {
      listing = await this.#d.dataplane.list();
    } catch (e) {
      return { kind: 'unknown', detail: `listing the table failed: ${errorMessage(e)}` };
    }
    const c = checkDrift(applied.canonical, listing);
    if (!c.drifted) {
      this.#kernelVerifiedAt = this.#clock.mono();
      return { kind: 'match' };
    }
    return { kind: 'drifted', detail: c.firstDifference === undefined ? c.why : `${c.why}: ${c.firstDifference}` };
  }

  async #listQuietly(signal: AbortSignal): Promise<string | undefined> {
    try {
      return await this.#d.dataplane.list(signal);
    } catch (e) {
      if (!signal.aborted) this.#d.log.warn({ err: e }, 'listing the table failed');
      return undefined;
    }
  }

  // ---- side reports ----

  #reportInvalid(state: ClusterState): void {
    const diff = diffInvalid(this.#invalid, state);
    this.#invalid = diff.next;
    this.#invalidAll = diff.all;
    this.#d.metrics.invalidPolicies(diff.all.length);
    for (const p of diff.changed) {
      this.#d.log.warn(
        { event: 'invalid-policy', policy: `${p.namespace}/${p.name}`, errors: p.errors },
        'invalid NetworkPolicy: its invalid parts allow nothing (fail closed)',
      );
    }
    for (const key of diff.resolved) {
      this.#evented.delete(key);
      this.#d.log.info({ event: 'invalid-policy-resolved', policy: key }, 'NetworkPolicy is no longer invalid (or was deleted)');
    }
    // An Event once per change of the errors, from the nodes enforcing the policy.
    for (const p of diff.all) {
      const key = invalidKey(p);
      const fp = fingerprint(p);
      if (this.#evented.get(key) === fp || !reportsEventFor(state, this.#o.nodeName, key)) continue;
      this.#evented.set(key, fp);
      this.#d.events
        .warnPolicy(
          p.object === undefined
            ? { namespace: p.namespace, name: p.name }
            : { namespace: p.namespace, name: p.name, kind: { apiVersion: p.object.apiVersion, kind: p.object.kind } },
          p.object === undefined ? 'InvalidNetworkPolicy' : `Invalid${p.object.kind}`,
          eventMessage(p),
        )
        .catch((e: unknown) => {
          this.#d.log.warn({ event: 'k8s-event', policy: key, err: e }, 'could not create the InvalidNetworkPolicy Event');
        });
    }
  }

  #pollWatchStatus(): void {
    let list;
    try {
      list = this.#d.source.status();
    } catch (e) {
      this.#d.log.warn({ err: e }, 'reading watch status failed');
      return;
    }
    for (const w of list) {
      for (const [reason, n] of Object.entries(w.restartsByReason ?? { error: w.restarts })) {
        const key = `${w.resource}\0${reason}`;
        // A watch that was replaced starts counting from 0 again.
        const prev = Math.min(this.#watchRestarts.get(key) ?? 0, n);
        // Watch names carry selectors ("pods spec.nodeName=n1"); the metric label
        // is the resource alone, to keep its cardinality fixed.
        // The first sight of a series exports it at 0: alerts on increase() need it.
        if (n > prev || !this.#watchRestarts.has(key))
          this.#d.metrics.watchRestarts(w.resource.split(' ')[0] ?? w.resource, n - prev, reason);
        this.#watchRestarts.set(key, n);
      }
    }
  }

  #releaseIPs(state: ClusterState): void {
    const hook = this.#d.onReleasedIPs;
    if (hook === undefined) return;
    const prev = this.#releasedFrom;
    this.#releasedFrom = state;
    if (prev === undefined || prev === state) return;
    const ips = releasedPodIPs(prev, state);
    if (ips.length === 0) return;
    hook(ips).catch((e: unknown) => this.#d.log.warn({ err: e, ips: ips.length }, 'conntrack cleanup failed'));
  }
}
