// The reconcile loop: turns "something changed" notifications into at most
// one nft transaction in flight, each bringing the kernel to the full ruleset
// of the latest snapshot (the whole table, or only what changed:
// nft/update.ts). Split by responsibility:
// - apply-scheduler.ts: when to run (sync gate, debounce, one in flight plus
//   one waiting, backoff, periodic check);
// - kernel-state.ts: what the kernel holds (applied ruleset, canonical
//   listing, increments since the last full apply, read-back);
// - outcome.ts + reports.ts: one outcome record per run, which drives the
//   metrics, log lines and Events, and which other modules subscribe to.
// This file is the job itself: snapshot, compile, decide (skip, increment,
// full, repair), apply, read back, and turn that into an outcome.
// Everything impure is injected (ports.ts).
import type { Logger } from 'pino';
import type { ClusterState } from '../model/types.ts';
import type { CompiledRuleset } from '../ruleset/ir.ts';
import { errorMessage } from '../observability/errors.ts';
import { isEmptyUpdate, renderUpdate, type RulesetUpdate, type UpdateCounts } from '../nft/update.ts';
import { heldCount, NO_HELD_PEERS, NO_LINGERING, type HeldPeers, type Lingering } from '../nft/recent-peers.ts';
import { ApplyScheduler, type Batch } from './apply-scheduler.ts';
import { DEFAULT_BACKOFF, type BackoffPolicy } from './backoff.ts';
import type { InvalidPolicy } from './invalid-policies.ts';
import { GAVE_WAY, KernelState, NO_READBACK, type KernelCheck } from './kernel-state.ts';
import { releasedPodIPs } from './local-view.ts';
import {
  Enforced,
  type ApplyOutcome,
  type ApplyPhases,
  type CheckOutcome,
  type Outcome,
  type OutcomeListener,
  type Repair,
} from './outcome.ts';
import {
  SYSTEM_CLOCK,
  SYSTEM_TIMERS,
  type AgentMetrics,
  type Clock,
  type Dataplane,
  type EventSink,
  type NftResult,
  type Rendered,
  type RenderFn,
  type RenderStats,
  type StateSource,
  type TimerHandle,
  type Timers,
} from './ports.ts';
import { InvalidPolicyReports, reportApply, reportCheck, WatchRestartCounter } from './reports.ts';

export type { KernelCheck } from './kernel-state.ts';

/** The reason of the apply that folds held peer addresses back into the maps. */
export const FOLD_REASON = 'fold held peers';

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
  /**
   * Hold remote addresses that join a pod identity out of the pod peer map
   * (nft/recent-peers.ts) when nothing else in the transaction makes the
   * kernel validate its jump graph; fold them back after this long without
   * an apply. 0 (the default here; the agent sets 1 s): never held.
   */
  readonly peerHoldMs?: number;
  /**
   * After increments, a drift check that finds a match re-applies the full
   * script (an edit made before an increment would pass as ours in its
   * read-back), at most this often: a change that comes during that apply
   * waits for it (100k pods: ~0.6 s). Default 10 x driftIntervalMs. When no
   * check found a quiet moment for it in twice this time, the next change
   * goes as the full script instead. 0: no refresh.
   */
  readonly refreshIntervalMs?: number;
}

export interface ReconcilerDeps {
  readonly source: StateSource;
  readonly render: RenderFn;
  readonly dataplane: Dataplane;
  readonly metrics: AgentMetrics;
  readonly log: Logger;
  readonly events: EventSink;
  readonly clock?: Clock;
  readonly timers?: Timers;
  /** Called after a successful apply with pod IPs that lost their owner (conntrack cleanup). */
  readonly onReleasedIPs?: (ips: readonly string[]) => Promise<void>;
  /**
   * Called once a full apply and its read-back are done and no change waits:
   * their garbage (script, listing) is dead then (the agent collects it).
   */
  readonly afterFullApply?: () => void;
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

export class Reconciler {
  readonly #d: ReconcilerDeps;
  readonly #o: Required<ReconcilerOptions>;
  readonly #clock: Clock;
  readonly #timers: Timers;
  readonly #sched: ApplyScheduler;
  readonly #kernel: KernelState;
  readonly #invalid: InvalidPolicyReports;
  readonly #watches: WatchRestartCounter;
  readonly #listeners = new Set<OutcomeListener>();

  #watchTimer: TimerHandle | undefined;
  /** A drift the check found, for the forced run it starts (counted as a repair there). */
  #repairFound: Repair | undefined;
  /**
   * A change of the table the monitor reported that no kernel check has
   * looked at yet: the next check or apply lists the table (an apply before
   * it trusts an increment: one onto emptied chains would succeed and leave
   * them empty, and its read-back would take that for the applied state),
   * and a repair it makes is the monitor's find.
   */
  #foreignChange: string | undefined;
  /** The periodic check's listing in flight, given up when a change is queued. */
  #checkInFlight: AbortController | undefined;
  /** The snapshot of the last successful apply, for released pod IPs. */
  #releasedFrom: ClusterState | undefined;

  #lastApply: ApplyRecord | undefined;
  #lastSuccess: ApplyRecord | undefined;
  #lastDrift: DriftRecord | undefined;
  #driftRepairs = 0;
  #lastState: ClusterState | undefined;
  /** The next apply folds every held peer address back into the maps (a quiet moment came). */
  #foldHeld = false;
  #foldTimer: TimerHandle | undefined;

  constructor(deps: ReconcilerDeps, opts: ReconcilerOptions) {
    this.#d = deps;
    this.#clock = deps.clock ?? SYSTEM_CLOCK;
    this.#timers = deps.timers ?? SYSTEM_TIMERS;
    this.#o = {
      backoff: DEFAULT_BACKOFF,
      syncPollMs: 100,
      watchPollMs: 5000,
      wedgeMs: 150_000,
      kernelCheckFreshMs: 5000,
      incremental: false,
      peerHoldMs: 0,
      refreshIntervalMs: 10 * opts.driftIntervalMs,
      ...opts,
    };
    const log = deps.log;
    this.#kernel = new KernelState(deps.dataplane, this.#clock, log);
    this.#invalid = new InvalidPolicyReports(opts.nodeName, deps.metrics, log, deps.events);
    this.#watches = new WatchRestartCounter(deps.source, deps.metrics, log);
    this.#sched = new ApplyScheduler(
      {
        synced: () => deps.source.synced(),
        onFirstSync: () => log.info({ event: 'synced' }, 'cluster state synced; applying'),
        onWaitingForSync: () => deps.metrics.resyncState(1),
        // A newer state waits: the previous apply's read-back and a periodic check's listing are moot.
        onApplyQueued: () => {
          this.#kernel.cancelReadBack();
          this.#checkInFlight?.abort();
        },
        apply: (batch) => this.#apply(batch),
        check: (run) => this.#check(run),
        onError: (what, err) => log.error({ err, where: what }, 'agent callback failed; continuing'),
      },
      {
        debounceMs: this.#o.debounceMs,
        checkIntervalMs: this.#o.driftIntervalMs,
        syncPollMs: this.#o.syncPollMs,
        backoff: this.#o.backoff,
      },
      this.#clock,
      this.#timers,
    );
  }

  /** Begins waiting for the source to sync; applies follow on their own. */
  start(): void {
    if (this.#sched.stopped || this.#watchTimer !== undefined) return;
    this.#d.metrics.resyncState(1);
    this.#armWatchPoll();
    this.#sched.start();
  }

  /** Something in the cluster changed: apply the latest state soon. */
  notify(reason: string): void {
    this.#sched.notify(reason);
  }

  /** Reads the table back now and repairs it if it drifted (also run on a timer). */
  checkDriftNow(): Promise<void> {
    return this.#sched.requestCheck();
  }

  /**
   * The kernel reported a change of the table that was not ours (nft
   * monitor): check it now and repair it if it drifted. A kernel match seen
   * before is no longer trusted.
   */
  kernelChanged(detail: string): void {
    if (this.#sched.stopped) return;
    this.#kernel.distrust();
    this.#foreignChange = detail;
    // A read-back in flight would only capture what someone else left: give it up.
    this.#kernel.cancelReadBack();
    this.#d.log.info({ event: 'table-monitor', detail }, 'the table was changed from outside; checking it');
    void this.#sched.requestCheck();
  }

  /** Subscribes to the outcome of every run and kernel check; returns the unsubscribe. */
  onOutcome(listener: OutcomeListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Stops timers and drops waiting jobs; waits up to graceMs for the job in
   * flight. Returns false when it was abandoned (the kernel then holds the old
   * or the new ruleset: nft transactions are atomic).
   */
  async stop(graceMs: number): Promise<boolean> {
    if (this.#watchTimer !== undefined) this.#timers.clear(this.#watchTimer);
    this.#watchTimer = undefined;
    if (this.#foldTimer !== undefined) this.#timers.clear(this.#foldTimer);
    this.#foldTimer = undefined;
    const stopping = this.#sched.stop(graceMs);
    // A read-back in flight is bookkeeping only: no need to wait for it.
    this.#kernel.cancelReadBack();
    return stopping;
  }

  /** Live: the loop is not stuck in one apply. */
  health(): { readonly ok: boolean; readonly detail: string } {
    const since = this.#sched.inFlightSince;
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
    return this.#kernel.applied?.text;
  }

  /** The ruleset applied last (its `text` renders the full script on each read). */
  lastApplied(): Rendered | undefined {
    return this.#kernel.applied;
  }

  /** The compiled form of the ruleset applied last, when the renderer gives it (the per-rule counters read its rule chains). */
  lastAppliedRuleset(): CompiledRuleset | undefined {
    return this.#kernel.applied?.compiled;
  }

  /** The script nft rejected last, while no later apply has succeeded. */
  lastFailedText(): string | undefined {
    return this.#kernel.lastFailedText();
  }

  /** The snapshot the last reconcile used (undefined before the first). */
  lastState(): ClusterState | undefined {
    return this.#lastState;
  }

  /** Lists the table and compares it with the last apply (debug endpoint). */
  kernelMatches(): Promise<KernelCheck> {
    return this.#kernel.check();
  }

  /** Remote addresses the kernel holds out of the pod peer maps until the next fold (nft/recent-peers.ts). */
  heldPeers(): HeldPeers {
    return this.#kernel.held;
  }

  /** Applying, or a change waits for its apply. */
  busy(): boolean {
    return this.#sched.inFlightSince !== undefined || this.#sched.pending;
  }

  status(): ReconcilerStatus {
    const s = this.#sched;
    const inFlight = s.inFlightSince;
    const inSync = this.#lastApply?.result !== 'failed' && this.#lastSuccess !== undefined && !s.pending;
    const phase: Phase = !s.synced && this.#lastSuccess === undefined ? 'waiting-for-sync' : inSync ? 'in-sync' : 'out-of-sync';
    const retry = s.retryInMs();
    return {
      phase,
      ready: this.ready(),
      synced: s.synced,
      applying: inFlight !== undefined,
      applyingForMs: inFlight === undefined ? undefined : Math.round(this.#clock.mono() - inFlight),
      pending: s.pending,
      consecutiveFailures: s.consecutiveFailures,
      nextRetryInMs: retry === undefined ? undefined : Math.round(retry),
      lastApply: this.#lastApply,
      lastSuccess: this.#lastSuccess,
      lastDriftCheck: this.#lastDrift,
      driftRepairs: this.#driftRepairs,
      invalidPolicies: this.#invalid.all,
    };
  }

  #armWatchPoll(): void {
    this.#watchTimer = this.#timers.set(() => {
      if (this.#sched.stopped) return;
      this.#armWatchPoll();
      this.#watches.poll();
    }, this.#o.watchPollMs);
  }

  // ---- the job ----

  async #apply(batch: Batch): Promise<void> {
    this.#d.metrics.resyncState(2);
    this.#watches.poll();
    let repair = this.#repairFound;
    this.#repairFound = undefined;
    const foreign = this.#foreignChange;
    this.#foreignChange = undefined;
    const t0 = batch.startedAt;
    // Where an apply's time goes, for the log line: snapshot, compile, update
    // diff, rendering the full script (when one is sent), nft.
    const phases: ApplyPhases = { snapshot: 0, compile: 0, update: 0, render: 0, nft: 0 };
    let state: ClusterState;
    let rendered: Rendered;
    try {
      state = this.#d.source.snapshot();
      phases.snapshot = this.#clock.mono() - t0;
      rendered = this.#d.render(state);
      phases.compile = this.#clock.mono() - t0 - phases.snapshot;
    } catch (e) {
      this.#failed(batch, {
        error: `render failed: ${errorMessage(e)}`,
        exitCode: undefined,
        state: undefined,
        stats: undefined,
      });
      return;
    }
    this.#lastState = state;

    let prev = this.#kernel.applied;
    // The update from what the kernel holds, when both sides are compiled:
    // it also says whether anything changed, without rendering the full text.
    const tu = this.#clock.mono();
    // Nothing held or lingering (a full apply or a fold came first): nothing to fold.
    if (!this.#kernel.unfolded) this.#foldHeld = false;
    const folding = this.#foldHeld || this.#o.peerHoldMs === 0;
    let update: RulesetUpdate | undefined =
      prev?.compiled !== undefined && rendered.compiled !== undefined
        ? renderUpdate(prev.compiled, rendered.compiled, {
            held: this.#kernel.held,
            lingering: this.#kernel.lingering,
            fold: folding,
          })
        : undefined;
    phases.update = this.#clock.mono() - tu;
    const unchanged =
      prev !== undefined &&
      (update === undefined ? prev.text === rendered.text : update.kind === 'incremental' && isEmptyUpdate(update));
    // The previous ruleset is not held by this frame through the awaits below
    // (a read-back takes seconds at 100k pods): two compiled rulesets live at
    // once cost a few MB there (issue 24).
    // eslint-disable-next-line no-useless-assignment -- drops the frame's reference
    prev = undefined;
    if (!batch.force && unchanged) {
      // The last transaction went in and only its read-back was put off by
      // newer changes (nothing foreign reported): trust it, and read it back
      // now that this change needs no transaction. Listing first would cost
      // ~1 s at 100k pods, and then without a listing to compare with, a
      // full apply (issue 24: every pod deletion begins with an update that
      // changes nothing: its deletionTimestamp).
      const skip = (): void => {
        this.#kernel.recordUnchanged();
        this.#succeeded(batch, {
          result: 'unchanged',
          mode: undefined,
          state,
          rendered,
          repair,
          update: undefined,
          phases: undefined,
        });
      };
      if (foreign === undefined && this.#kernel.readBackDeferred) {
        skip();
        await this.#readBack();
        return;
      }
      const check: KernelCheck = this.#kernel.verifiedWithin(this.#o.kernelCheckFreshMs)
        ? { kind: 'match' }
        : await this.#kernel.check();
      if (check.kind === 'match') {
        skip();
        return;
      }
      // Same ruleset but the kernel differs (or cannot be read): re-apply.
      if (check.kind === 'drifted') {
        repair = { foundBy: 'unchanged-check', detail: check.detail };
        this.#d.log.warn({ event: 'drift', detail: check.detail }, 'table differs from the last apply; re-applying');
      }
    }

    // Incremental changes (elements, pod and policy chains, sets): a small
    // transaction; any rejection falls back to the full script below (nft
    // is atomic: a rejected increment changed nothing).
    let mode: 'full' | 'incremental' = 'full';
    let counts: UpdateCounts | undefined;
    let held: HeldPeers = NO_HELD_PEERS;
    let lingering: Lingering = NO_LINGERING;
    let tryIncrement = this.#o.incremental && !batch.force && !unchanged && update?.kind === 'incremental';
    if (tryIncrement && foreign !== undefined) {
      const check = await this.#kernel.check();
      if (check.kind !== 'match') tryIncrement = false;
      if (check.kind === 'drifted') {
        repair ??= { foundBy: 'table-monitor', detail: check.detail };
        this.#d.log.warn(
          { event: 'drift', detail: check.detail, monitor: foreign },
          'table was changed from outside; re-applying',
        );
      }
    }
    // Under a steady stream of changes no drift check finds the quiet moment
    // its refresh waits for: after twice the interval this change takes it,
    // as the full script (100k pods: ~0.6 s once, instead of ~20 ms). After
    // the table monitor's check above, so that a repair still counts as one.
    const overdue = tryIncrement && this.#refreshOverdue();
    if (overdue) {
      tryIncrement = false;
      this.#d.log.info(
        { event: 'refresh', takenBy: 'change', sinceFullMs: Math.round(this.#clock.mono() - (this.#kernel.fullAppliedAt ?? 0)) },
        'no quiet moment for the refresh in twice its interval: this change goes as the full ruleset',
      );
    }
    if (tryIncrement && update?.kind === 'incremental') {
      this.#d.metrics.restoreCall();
      const r = await this.#applyScript(update.text, phases);
      if (r.ok) {
        mode = 'incremental';
        counts = update;
        held = update.held;
        lingering = update.lingering;
      } else {
        this.#d.log.warn(
          { event: 'apply', mode: 'incremental', error: r.error.trim() },
          'incremental update rejected; applying the full ruleset',
        );
        // Rejected because someone else changed the table (deleted it,
        // flushed a chain)? Then the full apply below is a repair.
        const check = await this.#kernel.check();
        if (check.kind === 'drifted') {
          repair ??= { foundBy: 'rejected-increment', detail: check.detail };
          this.#d.log.warn({ event: 'drift', detail: check.detail }, 'table was changed from outside; re-applying');
        }
      }
    }
    let res: NftResult = { ok: true };
    if (mode === 'full') {
      this.#d.metrics.restoreCall();
      const sent = this.#applyScript(this.#fullScript(update, rendered, phases), phases);
      // The script is not held through the read-back below (this frame lives
      // on across it): the script and the listing are ~2 MB each at 100k pods.
      // eslint-disable-next-line no-useless-assignment -- drops the frame's reference
      update = undefined;
      res = await sent;
    }
    // Render and transaction; the read-back below is bookkeeping, not applying.
    this.#d.metrics.applySeconds((this.#clock.mono() - t0) / 1000);
    if (!res.ok) {
      this.#kernel.recordRejected(rendered);
      this.#d.metrics.restoreError();
      this.#failed(batch, { error: `nft failed: ${res.error.trim()}`, exitCode: res.exitCode, state, stats: rendered.stats });
      return;
    }
    // Enforced now: report it (latency, log line) before the read-back below.
    this.#kernel.recordApplied(rendered, mode, held, lingering);
    if (overdue && mode === 'full') this.#d.metrics.refresh('change');
    this.#d.metrics.heldPeers(heldCount(this.#kernel.held));
    if (folding) this.#foldHeld = false;
    this.#armFold();
    this.#succeeded(batch, { result: 'applied', mode, state, rendered, repair, update: counts, phases });
    // The canonical listing for drift checks, captured right after the apply
    // (given up if a newer change is queued: its apply captures instead).
    // Changes that came during this apply already wait: at 100k pods a
    // listing takes seconds, and would hold their apply back (issue 24).
    await this.#readBack();
    if (mode === 'full' && !this.#sched.pending) this.#d.afterFullApply?.();
  }

  /**
   * Held peer addresses go back into the maps, and dropped identities'
   * lingering chains and dispatch rules out of the kernel, after peerHoldMs
   * without an apply: each apply starts the wait again, the fold itself is
   * an apply (reason `fold held peers`), and a commit that validates anyway
   * folds held addresses on its own (nft/recent-peers.ts).
   */
  #armFold(): void {
    if (this.#foldTimer !== undefined) this.#timers.clear(this.#foldTimer);
    this.#foldTimer = undefined;
    if (!this.#kernel.unfolded || this.#sched.stopped) return;
    this.#foldTimer = this.#timers.set(() => {
      this.#foldTimer = undefined;
      if (this.#sched.stopped || !this.#kernel.unfolded) return;
      this.#foldHeld = true;
      this.#sched.notify(FOLD_REASON);
    }, this.#o.peerHoldMs);
  }

  async #readBack(): Promise<void> {
    const rb = await this.#kernel.readBack(() => this.#sched.pending);
    switch (rb.kind) {
      case 'captured':
        break;
      case 'changed':
        // Changed between our commit and the read-back: not canonical; the
        // next drift check (no read-back) applies again.
        this.#d.log.warn({ event: 'list' }, 'the table was changed right after the apply; it will be re-applied');
        break;
      case 'missing':
        // Deleted between our commit and the read-back: check (and repair) now.
        this.#d.log.warn({ event: 'list' }, 'the table was deleted right after the apply; checking it again');
        void this.#sched.requestCheck();
        break;
      case 'cancelled':
        this.#d.log.debug({ event: 'list' }, 'read-back skipped: a newer change is waiting');
        break;
      case 'failed':
        this.#d.log.warn({ event: 'list' }, 'could not read the table back after applying; the next drift check re-applies');
        break;
    }
  }

  #succeeded(
    batch: Batch,
    r: {
      readonly result: 'applied' | 'unchanged';
      readonly mode: 'full' | 'incremental' | undefined;
      readonly state: ClusterState;
      readonly rendered: Rendered;
      readonly repair: Repair | undefined;
      readonly update: UpdateCounts | undefined;
      readonly phases: ApplyPhases | undefined;
    },
  ): void {
    const recovered = this.#sched.succeeded();
    const now = this.#clock.mono();
    this.#emit({
      kind: 'apply',
      result: r.result,
      mode: r.mode,
      reasons: batch.reasons,
      atUnixMs: this.#clock.wall(),
      atMonoMs: now,
      durationMs: now - batch.startedAt,
      latencyMs: batch.since === undefined ? undefined : now - batch.since,
      stats: r.rendered.stats,
      update: r.update,
      phases: r.phases,
      repair: r.repair,
      recovered,
      error: undefined,
      exitCode: undefined,
      retry: undefined,
      state: r.state,
      enforced: new Enforced(this.#o.nodeName, r.state, r.rendered.localPods),
    });
    this.#releaseIPs(r.state);
  }

  #failed(
    batch: Batch,
    r: {
      readonly error: string;
      readonly exitCode: number | undefined;
      readonly state: ClusterState | undefined;
      readonly stats: RenderStats | undefined;
    },
  ): void {
    // Put the work back: the retry (after the backoff) applies the latest state.
    const retry = this.#sched.failed(batch);
    const now = this.#clock.mono();
    this.#emit({
      kind: 'apply',
      result: 'failed',
      mode: 'full',
      reasons: batch.reasons,
      atUnixMs: this.#clock.wall(),
      atMonoMs: now,
      durationMs: now - batch.startedAt,
      latencyMs: undefined,
      stats: r.stats,
      update: undefined,
      phases: undefined,
      repair: undefined,
      recovered: false,
      error: r.error,
      exitCode: r.exitCode,
      retry,
      state: r.state,
      enforced: undefined,
    });
  }

  #fullScript(update: RulesetUpdate | undefined, rendered: Rendered, phases: ApplyPhases): string {
    const tr = this.#clock.mono();
    const text = update?.kind === 'full' ? update.text : rendered.text;
    phases.render = this.#clock.mono() - tr;
    return text;
  }

  async #applyScript(script: string, phases: ApplyPhases): Promise<NftResult> {
    const t = this.#clock.mono();
    try {
      return await this.#d.dataplane.apply(script);
    } catch (e) {
      return { ok: false, error: errorMessage(e), exitCode: undefined };
    } finally {
      phases.nft += this.#clock.mono() - t;
    }
  }

  /** The last full apply is older than the refresh interval. */
  #refreshDue(): boolean {
    const at = this.#kernel.fullAppliedAt;
    return at === undefined || this.#clock.mono() - at >= this.#o.refreshIntervalMs;
  }

  /** Increments and no full apply for twice the refresh interval (0: no refresh at all). */
  #refreshOverdue(): boolean {
    const at = this.#kernel.fullAppliedAt;
    return (
      this.#o.refreshIntervalMs > 0 &&
      at !== undefined &&
      this.#kernel.incrementsSinceFull > 0 &&
      this.#clock.mono() - at >= 2 * this.#o.refreshIntervalMs
    );
  }

  async #check(run: (trigger: string) => Promise<void>): Promise<void> {
    // Before the first apply there is nothing to compare; while a change is
    // pending, its apply checks (or replaces) the table anyway.
    if (this.#sched.stopped || this.#kernel.applied === undefined || this.#sched.pending) return;
    const foreign = this.#foreignChange;
    this.#foreignChange = undefined;
    // The periodic check gives way to a change that comes while it lists and
    // compares (100k pods: ~1 s, which the change would wait for). Nothing
    // is lost by it: a check compares with the read-back of the last apply,
    // so the change's apply needs its own read-back (a quiet moment) before
    // any check can tell more than a missing table, which the table monitor
    // reports at once. A check the monitor asked for does not give way.
    const ac = foreign === undefined ? new AbortController() : undefined;
    this.#checkInFlight = ac;
    let check: KernelCheck;
    try {
      check = await this.#kernel.check(ac?.signal);
    } finally {
      this.#checkInFlight = undefined;
    }
    if (check.kind === 'unknown' && check.detail === GAVE_WAY) {
      this.#d.metrics.driftCheckGaveWay();
      this.#d.log.debug({ event: 'drift-check' }, 'drift check gave way to a change');
      return;
    }
    this.#emit({
      kind: 'check',
      result: check.kind,
      detail: check.kind === 'match' ? undefined : check.detail,
      atUnixMs: this.#clock.wall(),
    });
    switch (check.kind) {
      case 'unknown':
        // The read-back after the last apply was given up or failed: nothing
        // to compare with, so apply again: not counted as a repair, unless
        // the table monitor saw another process change the table (then it
        // is one, whatever the listing would have shown).
        if (check.detail !== NO_READBACK) return;
        // A change came meanwhile: its apply reads back (or is a full one).
        if (foreign === undefined && this.#sched.pending) return;
        if (foreign === undefined) {
          await run('read-back');
          return;
        }
        this.#repairFound = { foundBy: 'table-monitor', detail: foreign };
        try {
          await run('drift');
        } finally {
          this.#repairFound = undefined;
        }
        return;
      case 'match':
        // A read-back after an increment only shows what the kernel held then:
        // an edit made before that increment would pass as ours. One full
        // apply per interval after increments bounds how long it can last.
        // Not while a change waits: it would become a full apply, ~30 times
        // dearer at 100k pods; a later check refreshes instead.
        if (this.#kernel.incrementsSinceFull > 0 && !this.#sched.pending && this.#refreshDue()) {
          await run('refresh');
          if (this.#kernel.incrementsSinceFull === 0) this.#d.metrics.refresh('check');
        }
        return;
      case 'drifted':
        this.#repairFound = { foundBy: foreign === undefined ? 'drift-check' : 'table-monitor', detail: check.detail };
        try {
          await run('drift');
        } finally {
          this.#repairFound = undefined;
        }
        return;
    }
  }

  // ---- records, side reports, listeners ----

  #emit(o: Outcome): void {
    if (o.kind === 'apply') this.#recordApply(o);
    else this.#recordCheck(o);
    for (const l of this.#listeners) {
      try {
        l(o);
      } catch (e) {
        this.#d.log.error({ err: e }, 'outcome listener failed; continuing');
      }
    }
  }

  #recordApply(o: ApplyOutcome): void {
    const rec: ApplyRecord = {
      result: o.result,
      mode: o.mode,
      reasons: o.reasons,
      atUnixMs: o.atUnixMs,
      durationMs: o.durationMs,
      stats: o.stats,
      error: o.error,
      exitCode: o.exitCode,
    };
    this.#lastApply = rec;
    if (o.result !== 'failed') this.#lastSuccess = rec;
    if (o.repair !== undefined) this.#driftRepairs++;
    if (o.state !== undefined) this.#invalid.report(o.state);
    reportApply(o, this.#sched.pending, this.#d.metrics, this.#d.log);
  }

  #recordCheck(o: CheckOutcome): void {
    this.#lastDrift = { atUnixMs: o.atUnixMs, result: o.result, detail: o.detail };
    if (o.result === 'unknown' && o.detail === NO_READBACK)
      this.#d.log.info({ event: 'drift-check' }, 'no read-back of the last apply to compare with; re-applying');
    else reportCheck(o, this.#d.log);
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
