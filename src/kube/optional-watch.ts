// A watch of a custom resource that may not be installed (the tenancy CRDs):
// the agent must work without it and pick it up when it appears, with no
// crash loop and no lost isolation. A probe (a one-item list) answers 404
// ("not installed") or 403 ("not allowed"): the watch counts as synced and
// empty, and the probe repeats every probeMs. Once the probe succeeds the real
// watch starts (a ResourceWatch, with its own restarts). If the CRD is
// removed later, that watch keeps its cache while it retries: isolation that
// was in force stays in force (fail closed).
import { errorMessage } from '../observability/errors.ts';
import type { WatchStatus, SourceLogger } from './source.ts';

/** What the source needs of a watch (ResourceWatch has all of it). */
export interface WatchLike<T> {
  readonly name: string;
  start(): void;
  stop(): Promise<void>;
  synced(): boolean;
  status(): WatchStatus;
  readonly received: number;
  readonly size: number;
  values(): Iterable<T>;
}

export interface OptionalWatchOptions<T> {
  readonly name: string;
  /** A cheap list (limit 1); rejects with the API's error. */
  readonly probe: () => Promise<unknown>;
  /** The real watch, made once the resource is served. */
  readonly make: () => WatchLike<T>;
  /** Delay between probes while the resource is absent (default 30 s). */
  readonly probeMs?: number;
  /** Called when the first probe decided "absent" (the watch is synced, empty). */
  readonly onSynced: () => void;
  /** Called when the resource appeared (the real watch starts). */
  readonly onAppeared: () => void;
  readonly log: SourceLogger;
}

/** HTTP status of a client-node error, if it has one. */
export function httpStatus(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { code?: unknown; statusCode?: unknown };
  const c = typeof e.code === 'number' ? e.code : typeof e.statusCode === 'number' ? e.statusCode : undefined;
  return c;
}

export class OptionalWatch<T> implements WatchLike<T> {
  readonly name: string;
  readonly #o: OptionalWatchOptions<T>;
  #inner: WatchLike<T> | undefined;
  #state: 'new' | 'probing' | 'absent' | 'present' | 'stopped' = 'new';
  #absentSynced = false;
  #timer: NodeJS.Timeout | undefined;
  #probes = 0;
  #lastError: string | undefined;
  #lastEventAt: number | undefined;

  constructor(o: OptionalWatchOptions<T>) {
    this.#o = o;
    this.name = o.name;
  }

  start(): void {
    if (this.#state !== 'new') return;
    this.#probe();
  }

  async stop(): Promise<void> {
    this.#state = 'stopped';
    clearTimeout(this.#timer);
    await this.#inner?.stop();
  }

  /** Installed or not, as far as the last probe knows. */
  get present(): boolean {
    return this.#inner !== undefined;
  }

  synced(): boolean {
    // Absent-and-synced stays synced while the real watch lists for the first time:
    // the empty view it had was true until then.
    return this.#inner?.synced() === true || this.#absentSynced;
  }

  status(): WatchStatus {
    if (this.#inner !== undefined) return this.#inner.status();
    return {
      resource: `${this.name}${this.#absentSynced ? ' (not installed)' : ''}`,
      synced: this.synced(),
      restarts: 0,
      lastEventAt: this.#lastEventAt,
      lastError: this.#lastError,
      objects: 0,
    };
  }

  get received(): number {
    return this.#inner?.received ?? 0;
  }

  get size(): number {
    return this.#inner?.size ?? 0;
  }

  values(): Iterable<T> {
    return this.#inner?.values() ?? [];
  }

  #probe(): void {
    if (this.#state === 'stopped') return;
    this.#state = 'probing';
    this.#probes++;
    this.#o.probe().then(
      () => {
        if (this.#state === 'stopped') return;
        this.#state = 'present';
        this.#lastError = undefined;
        this.#inner = this.#o.make();
        this.#o.log.info({ watch: this.name }, 'custom resource is served: watching it');
        this.#inner.start();
        this.#o.onAppeared();
      },
      (err: unknown) => {
        if (this.#state === 'stopped') return;
        const code = httpStatus(err);
        const every = this.#o.probeMs ?? 30_000;
        if (code === 404 || code === 403) {
          this.#state = 'absent';
          this.#lastEventAt = Date.now();
          this.#lastError = code === 403 ? 'forbidden (RBAC): treated as not installed' : undefined;
          if (!this.#absentSynced) {
            this.#absentSynced = true;
            const msg =
              code === 404
                ? 'custom resource not installed: working without it'
                : 'custom resource forbidden by RBAC: working without it';
            this.#o.log.info({ watch: this.name, recheckMs: every }, msg);
            this.#o.onSynced();
          }
          this.#timer = setTimeout(() => this.#probe(), every);
        } else {
          // The API server is failing: retry sooner (capped), not synced yet unless it was before.
          this.#lastError = errorMessage(err);
          this.#o.log.warn({ watch: this.name, err: this.#lastError }, 'probing a custom resource failed');
          this.#timer = setTimeout(() => this.#probe(), Math.min(every, 500 * 2 ** Math.min(this.#probes, 6)));
        }
      },
    );
  }
}
