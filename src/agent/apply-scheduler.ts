// When to apply: the sync gate, the debounce (a leading-edge throttle), one
// job in flight plus at most one apply waiting, capped exponential backoff
// after a failure, and the periodic kernel check. It knows nothing about
// rulesets: it hands a Batch (why, since when) to the reconciler's job and is
// told whether it succeeded. Clock and timers are injected, so its tests
// drive time by hand (like kube-network-policies' bounded-frequency runner).
//
// Invariants:
// - nothing runs before the source has synced, and while it reports not synced;
// - one job at a time (p-queue, concurrency 1); a waiting apply job reads the
//   pending work when it starts, so the latest state wins and bursts coalesce;
// - applies start at least debounceMs apart; a change reaching an idle loop
//   runs at once (after the current I/O callbacks);
// - after a failure nothing but a forced run starts before the announced retry
//   time: changes arriving meanwhile are coalesced into the retry;
// - every callback is wrapped: errors are reported, never thrown.
import PQueue from 'p-queue';
import { retryDelay, type BackoffPolicy } from './backoff.ts';
import type { Clock, TimerHandle, Timers } from './ports.ts';

/** The work one run takes: the change reasons and when the first change came. */
export interface Batch {
  readonly force: boolean;
  /** What triggered it: change reasons, "drift", "retry", ... (at most MAX_REASONS). */
  readonly reasons: readonly string[];
  /** Monotonic time of the first change included; undefined for the initial sync and forced runs alone. */
  readonly since: number | undefined;
  /** Monotonic start of the run. */
  readonly startedAt: number;
}

export interface RetryPlan {
  /** Consecutive failures so far (1 after the first). */
  readonly attempt: number;
  readonly delayMs: number;
}

export interface SchedulerHooks {
  synced(): boolean;
  /** The sync gate opened for the first time. */
  onFirstSync(): void;
  /** Runs wait for the source to (re)sync. */
  onWaitingForSync(): void;
  /** An apply job was queued behind the one in flight (its read-back is moot). */
  onApplyQueued(): void;
  /** One run; calls succeeded() or failed() on the scheduler unless it did nothing. */
  apply(batch: Batch): Promise<void>;
  /** A kernel check (timer or request); `run` starts a forced apply within it. */
  check(run: (trigger: string) => Promise<void>): Promise<void>;
  onError(what: string, err: unknown): void;
}

export interface SchedulerOptions {
  readonly debounceMs: number;
  /** 0: no periodic check. */
  readonly checkIntervalMs: number;
  readonly syncPollMs: number;
  readonly backoff: BackoffPolicy;
}

export const MAX_REASONS = 16;

export class ApplyScheduler {
  readonly #h: SchedulerHooks;
  readonly #o: SchedulerOptions;
  readonly #clock: Clock;
  readonly #timers: Timers;
  readonly #queue = new PQueue({ concurrency: 1 });

  #started = false;
  #stopped = false;
  #synced = false;

  #dirty = false;
  #pendingSince: number | undefined;
  #pendingReasons = new Set<string>();
  #applyQueued = false;
  #checkQueued = false;

  #debounceTimer: TimerHandle | undefined;
  #syncTimer: TimerHandle | undefined;
  #checkTimer: TimerHandle | undefined;

  #failures = 0;
  #retryAt: number | undefined;
  #inFlightSince: number | undefined;
  /** Monotonic start of the last run that did work (throttle). */
  #lastStart: number | undefined;

  constructor(hooks: SchedulerHooks, opts: SchedulerOptions, clock: Clock, timers: Timers) {
    this.#h = hooks;
    this.#o = opts;
    this.#clock = clock;
    this.#timers = timers;
  }

  start(): void {
    if (this.#started || this.#stopped) return;
    this.#started = true;
    this.#dirty = true;
    this.#pendingReasons.add('start');
    if (this.#o.checkIntervalMs > 0) this.#armCheck();
    this.#schedule();
  }

  /** Something changed: run soon (coalesced, throttled, after any backoff). */
  notify(reason: string): void {
    this.#guard('notify', () => {
      if (this.#stopped) return;
      this.#dirty = true;
      this.#pendingSince ??= this.#clock.mono();
      if (this.#pendingReasons.size < MAX_REASONS) this.#pendingReasons.add(reason);
      this.#schedule();
    });
  }

  /** Queues a kernel check (coalesced with one already waiting). */
  requestCheck(): Promise<void> {
    if (this.#stopped || this.#checkQueued) return Promise.resolve();
    this.#checkQueued = true;
    return this.#queue
      .add(async () => {
        this.#checkQueued = false;
        if (this.#stopped) return;
        await this.#h.check((trigger) => this.#run(true, trigger));
      })
      .catch((e: unknown) => this.#h.onError('kernel check', e));
  }

  /** The run in flight succeeded: back to no backoff. Returns whether it ended a failure streak. */
  succeeded(): boolean {
    const recovered = this.#failures > 0;
    this.#failures = 0;
    this.#retryAt = undefined;
    return recovered;
  }

  /** The run in flight failed: its work goes back, to be retried after the backoff. */
  failed(batch: Batch): RetryPlan {
    this.#failures++;
    const delayMs = retryDelay(this.#o.backoff, this.#failures, this.#clock.mono() - batch.startedAt);
    this.#retryAt = this.#clock.mono() + delayMs;
    this.#dirty = true;
    if (batch.since !== undefined)
      this.#pendingSince = this.#pendingSince === undefined ? batch.since : Math.min(batch.since, this.#pendingSince);
    for (const r of batch.reasons) if (this.#pendingReasons.size < MAX_REASONS) this.#pendingReasons.add(r);
    this.#pendingReasons.add('retry');
    this.#schedule();
    return { attempt: this.#failures, delayMs };
  }

  /**
   * Stops timers and drops waiting jobs; waits up to graceMs for the job in
   * flight. False when it was abandoned.
   */
  async stop(graceMs: number): Promise<boolean> {
    this.#stopped = true;
    for (const t of [this.#debounceTimer, this.#syncTimer, this.#checkTimer]) if (t !== undefined) this.#timers.clear(t);
    this.#debounceTimer = this.#syncTimer = this.#checkTimer = undefined;
    this.#queue.clear();
    if (this.#queue.pending === 0) return true;
    let timer: TimerHandle | undefined;
    const finished = await Promise.race([
      this.#queue.onIdle().then(() => true),
      new Promise<boolean>((resolve) => {
        timer = this.#timers.set(() => resolve(false), graceMs);
      }),
    ]);
    if (timer !== undefined) this.#timers.clear(timer);
    return finished;
  }

  get stopped(): boolean {
    return this.#stopped;
  }
  get synced(): boolean {
    return this.#synced;
  }
  /** Changes not yet taken by a run. */
  get pending(): boolean {
    return this.#dirty;
  }
  get consecutiveFailures(): number {
    return this.#failures;
  }
  /** Monotonic start of the run in flight. */
  get inFlightSince(): number | undefined {
    return this.#inFlightSince;
  }
  /** Time left until the announced retry. */
  retryInMs(): number | undefined {
    return this.#retryAt === undefined ? undefined : Math.max(0, this.#retryAt - this.#clock.mono());
  }

  #armCheck(): void {
    this.#checkTimer = this.#timers.set(() => {
      if (this.#stopped) return;
      this.#armCheck();
      this.#guard('check timer', () => void this.requestCheck());
    }, this.#o.checkIntervalMs);
  }

  #schedule(): void {
    if (!this.#started || this.#stopped || !this.#dirty) return;
    if (!this.#h.synced()) {
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
    this.#debounceTimer = this.#timers.set(() => {
      this.#debounceTimer = undefined;
      this.#guard('debounce timer', () => this.#enqueueApply());
    }, wait);
  }

  #waitForSync(): void {
    if (this.#syncTimer !== undefined) return;
    if (!this.#synced) this.#h.onWaitingForSync();
    const poll = (): void => {
      this.#syncTimer = undefined;
      if (this.#stopped) return;
      if (!this.#h.synced()) {
        this.#syncTimer = this.#timers.set(() => this.#guard('sync poll', poll), this.#o.syncPollMs);
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
    this.#h.onFirstSync();
  }

  #enqueueApply(): void {
    if (this.#stopped || this.#applyQueued) return;
    this.#applyQueued = true;
    this.#h.onApplyQueued();
    this.#queue
      .add(async () => {
        this.#applyQueued = false;
        await this.#run(false);
      })
      .catch((e: unknown) => this.#h.onError('apply job', e));
  }

  async #run(force: boolean, trigger?: string): Promise<void> {
    if (this.#stopped) return;
    if (!this.#h.synced()) {
      this.#waitForSync();
      return;
    }
    this.#markSynced();
    if (!this.#dirty && !force) return;
    const now = this.#clock.mono();
    // A job queued before a failure must not cut its backoff short: the
    // retry, at the announced time, takes the changes that came meanwhile.
    if (!force && this.#retryAt !== undefined && now < this.#retryAt) {
      this.#schedule();
      return;
    }
    this.#lastStart = now;
    const batch: Batch = {
      force,
      reasons: trigger === undefined ? [...this.#pendingReasons] : [trigger, ...this.#pendingReasons],
      since: this.#pendingSince,
      startedAt: now,
    };
    this.#dirty = false;
    this.#pendingSince = undefined;
    this.#pendingReasons.clear();
    this.#inFlightSince = now;
    try {
      await this.#h.apply(batch);
    } finally {
      this.#inFlightSince = undefined;
    }
  }

  #guard(what: string, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.#h.onError(what, e);
    }
  }
}
