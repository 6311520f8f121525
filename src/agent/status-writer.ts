// Writes the node's NodePolicyStatus: only when its content changed, at most
// once per interval (leading edge plus random jitter, so a change reaching
// every node does not arrive at the API server as one burst), as a JSON merge
// patch of /status holding only the changed fields. The status only ever
// describes an apply that succeeded (the caller hands in the snapshot whose
// ruleset the kernel holds), so it never claims a version the kernel lacks.
//
// The object is created on first need, owned by the Node (garbage-collected
// with it). When the Node is gone the writer does not recreate it: it retries
// with backoff and logs. Failures (API server away) keep the content pending;
// the next attempt sends the latest state.
import type { Logger } from 'pino';
import { errorMessage } from '../observability/errors.ts';
import type { StatusApi } from '../kube/status-client.ts';
import { buildStatus, statusPatch, type StatusInput } from '../status/build.ts';
import { STATUS_API_VERSION, STATUS_KIND, type NodePolicyStatusObject, type NodeStatusContent } from '../status/types.ts';
import { SYSTEM_CLOCK, type Clock } from './ports.ts';

export interface StatusWriterOptions {
  readonly node: string;
  /** Minimum time between two writes (default 5 s). */
  readonly intervalMs: number;
  /**
   * Up to this much random delay is added to every write (default intervalMs):
   * a change that reaches every node reaches the API server spread over it.
   */
  readonly jitterMs?: number;
  /** Retry backoff after a failed write: first delay, cap. */
  readonly retryInitialMs?: number;
  readonly retryMaxMs?: number;
  readonly clock?: Clock;
  readonly random?: () => number;
  /** Each write's result (metrics). */
  readonly onResult?: (ok: boolean) => void;
  /** Awaited before each write reads its input (slow parts of it made ready without holding the event loop). */
  readonly prepare?: () => Promise<void>;
}

export interface StatusWriterStats {
  /** Successful PATCHes of /status. */
  readonly writes: number;
  /** Requests that failed (API errors, no answer). */
  readonly failures: number;
  /** Objects created. */
  readonly creates: number;
  /** Bytes of the patch bodies written. */
  readonly bytes: number;
  /** Unix ms of the last successful write. */
  readonly lastWriteAt: number | undefined;
  /** Something changed that is not written yet. */
  readonly pending: boolean;
}

function isStatusContent(v: unknown): v is NodeStatusContent {
  return typeof v === 'object' && v !== null && Array.isArray((v as { policies?: unknown }).policies);
}

export class StatusWriter {
  readonly #api: StatusApi;
  readonly #log: Logger;
  readonly #o: Required<Omit<StatusWriterOptions, 'clock' | 'random' | 'onResult' | 'prepare'>>;
  readonly #prepare: (() => Promise<void>) | undefined;
  readonly #onResult: (ok: boolean) => void;
  readonly #clock: Clock;
  readonly #random: () => number;

  #input: (() => StatusInput) | undefined;
  #dirty = false;
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  #stopped = false;
  /** What the server holds, as far as we know (undefined: unknown, the next patch sends every field). */
  #written: NodeStatusContent | undefined;
  /** The server's status read at start: keeps appliedTime of versions already reported. */
  #seed: NodeStatusContent | undefined;
  /** The object is known to exist. */
  #exists = false;
  #lastWriteMono: number | undefined;
  #failuresInRow = 0;
  #retryAtMono: number | undefined;
  #stats = { writes: 0, failures: 0, creates: 0, bytes: 0, lastWriteAt: undefined as number | undefined };

  constructor(api: StatusApi, log: Logger, opts: StatusWriterOptions) {
    this.#api = api;
    this.#log = log;
    this.#clock = opts.clock ?? SYSTEM_CLOCK;
    this.#random = opts.random ?? Math.random;
    this.#onResult = opts.onResult ?? (() => {});
    this.#prepare = opts.prepare;
    this.#o = {
      node: opts.node,
      intervalMs: opts.intervalMs,
      jitterMs: opts.jitterMs ?? opts.intervalMs,
      retryInitialMs: opts.retryInitialMs ?? 1000,
      retryMaxMs: opts.retryMaxMs ?? 60_000,
    };
  }

  /** The applied state changed: write its status soon (coalesced). `input` is read at write time. */
  update(input: () => StatusInput): void {
    if (this.#stopped) return;
    this.#input = input;
    this.#dirty = true;
    this.#schedule();
  }

  stats(): StatusWriterStats {
    return { ...this.#stats, pending: this.#dirty };
  }

  /** The content last written (tests, debug). */
  written(): NodeStatusContent | undefined {
    return this.#written;
  }

  /** Stops timers; waits for a write in flight (bounded by the client's own timeouts). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#flushing;
  }

  #schedule(): void {
    if (this.#stopped || !this.#dirty || this.#timer !== undefined || this.#flushing !== undefined) return;
    const now = this.#clock.mono();
    const wait = Math.max(
      0,
      this.#lastWriteMono === undefined ? 0 : this.#lastWriteMono + this.#o.intervalMs - now,
      this.#retryAtMono === undefined ? 0 : this.#retryAtMono - now,
    );
    const delay = wait + Math.round(this.#random() * this.#o.jitterMs);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#flushing = this.#flush().finally(() => {
        this.#flushing = undefined;
        this.#schedule();
      });
    }, delay);
    this.#timer.unref();
  }

  async #flush(): Promise<void> {
    const provider = this.#input;
    if (this.#stopped || provider === undefined) return;
    this.#dirty = false;
    try {
      if (!(await this.#ensureObject())) {
        this.#dirty = true;
        return;
      }
      await this.#prepare?.();
      const content = buildStatus(provider(), this.#written ?? this.#seed);
      let patch = statusPatch(this.#written, content);
      if (patch === undefined) {
        this.#log.debug({ event: 'status', unchanged: true }, 'status content unchanged; nothing written');
        return;
      }
      let body = JSON.stringify(patch);
      let res = await this.#api.patchStatus(this.#o.node, patch);
      if (res === undefined) {
        // Deleted under us (by hand, or collected with a replaced Node): recreate once, send everything.
        this.#exists = false;
        this.#written = undefined;
        if (!(await this.#ensureObject())) {
          this.#dirty = true;
          return;
        }
        patch = statusPatch(undefined, content);
        if (patch === undefined) return;
        body = JSON.stringify(patch);
        res = await this.#api.patchStatus(this.#o.node, patch);
        if (res === undefined) throw new Error(`${STATUS_KIND} ${this.#o.node} disappeared right after it was created`);
      }
      this.#written = content;
      this.#lastWriteMono = this.#clock.mono();
      this.#stats.writes++;
      this.#onResult(true);
      this.#stats.bytes += Buffer.byteLength(body);
      this.#stats.lastWriteAt = this.#clock.wall();
      if (this.#failuresInRow > 0)
        this.#log.info({ event: 'status', after: this.#failuresInRow }, 'node policy status written again');
      this.#failuresInRow = 0;
      this.#retryAtMono = undefined;
      this.#log.debug({ event: 'status', fields: Object.keys(patch.status), bytes: Buffer.byteLength(body) }, 'status written');
    } catch (e) {
      this.#failed(errorMessage(e));
    }
  }

  /** True when the object exists (reading its status the first time, creating it if needed). */
  async #ensureObject(): Promise<boolean> {
    if (this.#exists) return true;
    // An empty merge patch changes nothing and answers with the object: existence and its
    // previous status (appliedTime of versions already reported) without a read permission.
    const cur = await this.#api.patchStatus(this.#o.node, {});
    if (cur !== undefined) {
      this.#exists = true;
      if (isStatusContent(cur.status)) this.#seed = cur.status;
      return true;
    }
    const uid = await this.#api.nodeUid(this.#o.node);
    if (uid === undefined) {
      this.#failed(`Node ${this.#o.node} does not exist; the status object is not created (it would be garbage-collected)`);
      return false;
    }
    const obj: NodePolicyStatusObject = {
      apiVersion: STATUS_API_VERSION,
      kind: STATUS_KIND,
      metadata: { name: this.#o.node, ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: this.#o.node, uid }] },
      spec: { nodeName: this.#o.node },
    };
    if (await this.#api.createStatusObject(obj)) {
      this.#stats.creates++;
      this.#log.info({ event: 'status', object: this.#o.node }, `${STATUS_KIND} created`);
    }
    this.#exists = true;
    this.#written = undefined;
    return true;
  }

  #failed(message: string): void {
    this.#stats.failures++;
    this.#onResult(false);
    this.#failuresInRow++;
    this.#dirty = true;
    const delay = Math.min(this.#o.retryMaxMs, this.#o.retryInitialMs * 2 ** Math.min(this.#failuresInRow - 1, 16));
    this.#retryAtMono = this.#clock.mono() + delay;
    // One line for the first failures, then every 10th: an outage must not flood the log.
    if (this.#failuresInRow <= 3 || this.#failuresInRow % 10 === 0)
      this.#log.warn(
        { event: 'status', error: message, failures: this.#failuresInRow, retryInMs: delay },
        'could not write the node policy status; enforcement is unaffected, retrying',
      );
  }
}
