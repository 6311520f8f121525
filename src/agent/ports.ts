// What the reconciler needs from the outside world, as narrow interfaces:
// the real implementations (informers, nft, prom-client, the Events API)
// live in the shell; unit tests inject fakes.
import type { CompiledRuleset, RulesetStats } from '../ruleset/ir.ts';
import type { ClusterState, Pod } from '../model/types.ts';

export type RenderStats = RulesetStats;

export interface Rendered {
  /** The full script (may be rendered lazily, on first read). */
  readonly text: string;
  readonly stats: RenderStats;
  /** The compiled form, when the renderer gives it: enables incremental updates. */
  readonly compiled?: CompiledRuleset;
  /** The node's active pods in the state, when the renderer knows them (else they are filtered from the state). */
  readonly localPods?: readonly Pod[];
}

/** Pure: the node's full ruleset for a state (one atomic nft script). */
export type RenderFn = (state: ClusterState) => Rendered;

export type NftResult =
  { readonly ok: true } | { readonly ok: false; readonly error: string; readonly exitCode?: number | undefined };

export interface Dataplane {
  /** Runs one `nft -f -` transaction. Never throws for nft errors. */
  apply(script: string): Promise<NftResult>;
  /**
   * The kernel's listing of our table; undefined when it does not exist.
   * Rejects when nft fails, or when `signal` aborts it.
   */
  list(signal?: AbortSignal): Promise<string | undefined>;
  /**
   * `nft -t -j list table`: chains and rules with their counters, no set
   * elements (the deny counters, agent/denied/counters.ts); undefined when the
   * table does not exist. Optional: fakes may leave it out.
   */
  listCounters?(): Promise<string | undefined>;
  /** The real dataplane marks its transactions, so the table monitor can run (table-monitor.ts). */
  readonly marked?: boolean;
  /** Ends what the dataplane keeps running (the long-lived nft); a later apply starts it again. */
  close?(): void;
}

export interface WatchInfo {
  readonly resource: string;
  readonly restarts: number;
  /** By reason (error, stalled, gone, closed); absent: every restart was an error. */
  readonly restartsByReason?: Readonly<Record<string, number>>;
}

/** The part of a ClusterSource the reconciler reads. */
export interface StateSource {
  synced(): boolean;
  snapshot(): ClusterState;
  status(): readonly WatchInfo[];
}

export interface ObjectRef {
  /** '' for a cluster-scoped object: its Event goes to the agent's namespace. */
  readonly namespace: string;
  readonly name: string;
  /** Absent: a NetworkPolicy (networking.k8s.io/v1). */
  readonly kind?: { readonly apiVersion: string; readonly kind: string };
}

export interface EventSink {
  /** Creates a Warning Event about a NetworkPolicy. May reject; the caller logs. */
  warnPolicy(ref: ObjectRef, reason: string, message: string): Promise<void>;
}

export interface AgentMetrics {
  restoreCall(): void;
  restoreError(): void;
  applySeconds(s: number): void;
  dataplaneFailure(): void;
  /** 1 waiting for initial sync, 2 applying / out of sync, 3 in sync. */
  resyncState(s: 1 | 2 | 3): void;
  rulesetStats(s: RenderStats): void;
  clusterPolicies(n: number): void;
  /** ClusterNetworkPolicies (with the legacy kinds) by tier, and how many of them are invalid. */
  clusterNetworkPolicies(admin: number, baseline: number, invalid: number): void;
  driftRepair(): void;
  /** A periodic drift check gave up its listing for a change (reconciler.ts). */
  driftCheckGaveWay(): void;
  /** A full apply after increments: by a quiet drift check, or taken by a change when none came (reconciler.ts). */
  refresh(takenBy: 'check' | 'change'): void;
  /** `reason`: error, stalled, gone or closed (kube/source.ts RestartReason). */
  watchRestarts(resource: string, delta: number, reason: string): void;
  invalidPolicies(n: number): void;
  eventToAppliedSeconds(s: number): void;
  lastSuccess(unixSeconds: number): void;
  /** Remote addresses held out of the pod peer maps after the last apply (nft/recent-peers.ts). */
  heldPeers(n: number): void;
}

export const NOOP_METRICS: AgentMetrics = {
  restoreCall() {},
  restoreError() {},
  applySeconds() {},
  dataplaneFailure() {},
  resyncState() {},
  rulesetStats() {},
  clusterPolicies() {},
  clusterNetworkPolicies() {},
  driftRepair() {},
  driftCheckGaveWay() {},
  refresh() {},
  watchRestarts() {},
  invalidPolicies() {},
  eventToAppliedSeconds() {},
  lastSuccess() {},
  heldPeers() {},
};

/** Wall and monotonic time, injectable for tests. */
export interface Clock {
  /** Monotonic milliseconds (durations). */
  mono(): number;
  /** Unix milliseconds (timestamps). */
  wall(): number;
}

export const SYSTEM_CLOCK: Clock = { mono: () => performance.now(), wall: () => Date.now() };

/** One-shot timers, injectable with the clock (the scheduler's tests drive both by hand). */
export interface Timers {
  set(fn: () => void, ms: number): TimerHandle;
  clear(handle: TimerHandle): void;
}

export interface TimerHandle {
  readonly id: unknown;
  /** Set with 0 ms: a setImmediate. */
  readonly immediate?: boolean;
}

export const SYSTEM_TIMERS: Timers = {
  set: (fn, ms) => {
    // 0 ms: right after this turn's I/O callbacks (a change's apply starts
    // once its watch chunk is read); setTimeout(0) waits for the next
    // millisecond tick of the timer list, ~1 ms more.
    if (ms <= 0) {
      const i = setImmediate(fn);
      i.unref();
      return { id: i, immediate: true };
    }
    const t = setTimeout(fn, ms);
    // Timers never keep the process alive: the watches and listeners do.
    t.unref();
    return { id: t };
  },
  clear: (h) => (h.immediate === true ? clearImmediate(h.id as NodeJS.Immediate) : clearTimeout(h.id as NodeJS.Timeout)),
};
