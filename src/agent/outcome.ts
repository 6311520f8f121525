// The record of what one run of the loop did, and what the kernel holds
// after it. Side reports (metrics, log lines, invalid-policy Events) are
// driven by these records; other modules subscribe to them (OutcomeListeners)
// instead of reaching into the reconciler: per-policy applied status and node
// heartbeats read `enforced` (which snapshot, hence which policies at which
// generation and which local pods, the kernel now holds) and `atUnixMs`.
import { isActivePod, type ClusterState, type Pod } from '../model/types.ts';
import type { UpdateCounts } from '../nft/update.ts';
import type { RetryPlan } from './apply-scheduler.ts';
import type { RenderStats } from './ports.ts';

/** Where an apply's time went (ms): snapshot, compile, update diff, full-script render, nft. */
export interface ApplyPhases {
  snapshot: number;
  compile: number;
  update: number;
  render: number;
  nft: number;
}

/** The snapshot whose ruleset the kernel holds after a successful run. */
export class Enforced {
  readonly node: string;
  /** The cluster state compiled; its policies are the ones enforced, as of their versions in it. */
  readonly state: ClusterState;
  #localPods: readonly Pod[] | undefined;

  /** localPods: the node's active pods in `state` when known (the compiler keeps them), else filtered on first use. */
  constructor(node: string, state: ClusterState, localPods?: readonly Pod[]) {
    this.node = node;
    this.state = state;
    this.#localPods = localPods;
  }

  /** The active pods of this node the ruleset covers (computed on first use). */
  get localPods(): readonly Pod[] {
    return (this.#localPods ??= this.state.pods.filter((p) => p.nodeName === this.node && isActivePod(p)));
  }
}

/** Someone else changed the table and this run restored it. */
export interface Repair {
  /**
   * Which path found it: the periodic drift check, the kernel check of an
   * unchanged render, a rejected increment, or a check after the table
   * monitor reported someone else's change.
   */
  readonly foundBy: 'drift-check' | 'unchanged-check' | 'rejected-increment' | 'table-monitor';
  readonly detail: string;
}

export interface ApplyOutcome {
  readonly kind: 'apply';
  readonly result: 'applied' | 'unchanged' | 'failed';
  /** How the kernel was updated (failed: the mode that was tried last). */
  readonly mode: 'full' | 'incremental' | undefined;
  readonly reasons: readonly string[];
  readonly atUnixMs: number;
  /**
   * The end, on the agent's monotonic clock (ms since the process started):
   * sub-millisecond, where atUnixMs has whole ones (benchmarks time a change
   * against the agent's start time, logged at start as `timeOrigin`).
   */
  readonly atMonoMs: number;
  readonly durationMs: number;
  /** From the first change included to now (applied or unchanged; undefined for the initial sync). */
  readonly latencyMs: number | undefined;
  readonly stats: RenderStats | undefined;
  readonly update: UpdateCounts | undefined;
  readonly phases: Readonly<ApplyPhases> | undefined;
  readonly repair: Repair | undefined;
  /** This success ended a streak of failures. */
  readonly recovered: boolean;
  readonly error: string | undefined;
  readonly exitCode: number | undefined;
  /** Failed: when the retry comes. */
  readonly retry: RetryPlan | undefined;
  /** The snapshot this run compiled (undefined when taking or compiling it threw). */
  readonly state: ClusterState | undefined;
  /** Applied or unchanged: what the kernel now holds. */
  readonly enforced: Enforced | undefined;
}

export interface CheckOutcome {
  readonly kind: 'check';
  readonly result: 'match' | 'drifted' | 'unknown';
  readonly detail: string | undefined;
  readonly atUnixMs: number;
}

export type Outcome = ApplyOutcome | CheckOutcome;

export type OutcomeListener = (o: Outcome) => void;
