// What the agent consumes from wherever the cluster state comes from (the API
// server's watches, or a directory of manifests). Implementations cache only
// normalized objects and never throw from their callbacks.
import type { ClusterState, NetworkPolicy } from '../model/types.ts';

/**
 * Why a watch was restarted (the reason label of nftnp_watch_restarts_total):
 * error: a request or stream failed; stalled: a liveness probe proved the
 * open stream had missed events; gone: the resourceVersion expired (410) and
 * the watch relisted; closed: the server ended the stream and it resumed from
 * its resourceVersion. Only error and stalled are trouble.
 */
export type RestartReason = 'error' | 'stalled' | 'gone' | 'closed';
export const RESTART_REASONS: readonly RestartReason[] = ['error', 'stalled', 'gone', 'closed'];

export interface WatchStatus {
  /** Human name of the watch, e.g. "pods spec.nodeName=node-1" or "pods -n shop app=db". */
  readonly resource: string;
  /** Has listed successfully at least once. */
  readonly synced: boolean;
  /** Restarts since start(), every reason. */
  readonly restarts: number;
  /** The same by reason (absent: every restart counts as an error). */
  readonly restartsByReason?: Readonly<Record<RestartReason, number>>;
  /** Date.now() of the last event, bookmark or successful list. */
  readonly lastEventAt: number | undefined;
  /** The last failure; cleared by the next successful list or event. */
  readonly lastError: string | undefined;
  /** Objects cached by this watch. */
  readonly objects: number;
}

export interface ClusterSource {
  /** Begins watching; returns quickly (does not wait for the first list). */
  start(): Promise<void>;
  /** Stops everything; no events, errors or restarts after it resolves. */
  stop(): Promise<void>;
  /** True once every watch has listed successfully at least once (latched). */
  synced(): boolean;
  /** The normalized current view. */
  snapshot(): ClusterState;
  /** Called after any cache change; coalescing is the caller's job. */
  onChange(listener: (reason: string) => void): void;
  /** A policy arrived or changed with validation errors (for Events). */
  onInvalid?(listener: (policy: NetworkPolicy) => void): void;
  status(): readonly WatchStatus[];
  /**
   * The source's own background work (the kube source's peer-watch plan, a
   * walk of every policy and namespace) waits while `busy` is true: the
   * agent is applying or a change waits for its apply.
   */
  deferWhile?(busy: () => boolean): void;
}

/** The logger subset sources use (pino-compatible). */
export interface SourceLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export const SILENT_LOGGER: SourceLogger = { debug() {}, info() {}, warn() {}, error() {} };
