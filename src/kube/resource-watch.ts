// One list+watch of one resource (and selector) on an unmodified
// @kubernetes/client-node ListWatch, made safe for a long-running agent. The
// informer's traps (see shared/references/client-node.md) and what we do:
//
// - It stops for good on any error but 410 (reset, refused, 401/403/500,
//   failed list): we restart it with capped exponential backoff (+-20% jitter,
//   so a DaemonSet does not stampede a recovering API server) and count it.
// - stop() emits an AbortError: ignored; our own state decides what runs, we
//   never restart after stop() and never start() a running informer (a restart
//   waits until the aborted stream has reported done).
// - It may reconnect after stop() (its reconnect delay does not re-check):
//   our Watch wrapper refuses to connect once the watch is not running.
// - A silent stream: bookmarks are requested in the path (the informer never
//   asks), and a watchdog restarts an open stream that has seen no event,
//   bookmark or list for idleTimeoutMs. The library's own inactivity timeout
//   (30 s in 2.0.1) is raised above the API server's ~60 s bookmark period,
//   or quiet healthy watches would reconnect before any bookmark arrives.
// - Handler exceptions become unhandled rejections: every callback is wrapped,
//   and watch objects are reduced to envelopes the library cannot trip on.
// - start() resolves even when the list failed: synced means our listFn
//   succeeded and its items were applied.
// - List objects (deserialized: Date, `_from`) and watch objects (raw JSON)
//   differ: both go through the same normalizer.
//
// Memory: the informer caches whatever listFn and the watch hand it, so both
// paths hand it small envelopes (name, namespace, resourceVersion, normalized
// value, in one object that is its own metadata); raw objects are dropped
// right away.
import { isDeepStrictEqual } from 'node:util';
import { ListWatch, Watch } from '@kubernetes/client-node';
import type { KubeConfig, KubernetesListObject } from '@kubernetes/client-node';
import type { Normalized } from '../model/normalize.ts';
import { EMPTY } from '../model/normalize-intern.ts';
import type { ValidationError } from '../model/types.ts';
import { errorMessage } from '../observability/errors.ts';
import { SILENT_LOGGER } from './source.ts';
import type { SourceLogger, WatchStatus } from './source.ts';

export interface WatchTiming {
  /** First restart delay after a failure. */
  readonly restartInitialMs: number;
  /** Restart delay cap. */
  readonly restartMaxMs: number;
  /** An open stream with no event/bookmark/list for this long is restarted. 0 disables. */
  readonly idleTimeoutMs: number;
  /** A list taking longer fails (and is retried). */
  readonly listTimeoutMs: number;
  /** Cap of the library's own reconnect delay after a clean close (1 s doubling to 30 s). */
  readonly reconnectMaxMs: number;
  /** The library's connect/inactivity timeout per watch request (its default: 30 s). */
  readonly streamTimeoutMs: number;
}

export const DEFAULT_TIMING: WatchTiming = {
  restartInitialMs: 500,
  restartMaxMs: 30_000,
  idleTimeoutMs: 150_000,
  listTimeoutMs: 180_000,
  reconnectMaxMs: 30_000,
  streamTimeoutMs: 90_000,
};

/**
 * What the informer caches in place of the raw object: one small object per
 * cached object (a node may cache 100k+ pods).
 */
class Envelope {
  readonly name: string;
  readonly namespace: string | undefined;
  readonly resourceVersion: string | undefined;
  /** undefined: the object failed to normalize (it is not part of the model). */
  readonly value: unknown;
  /** Shared EMPTY when there are none. */
  readonly errors: readonly ValidationError[];

  constructor(
    name: string,
    namespace: string | undefined,
    resourceVersion: string | undefined,
    value: unknown,
    errors: readonly ValidationError[],
  ) {
    this.name = name;
    this.namespace = namespace;
    this.resourceVersion = resourceVersion;
    this.value = value;
    this.errors = errors;
  }

  /** The informer reads metadata.name, .namespace and .resourceVersion: the envelope's own fields. */
  get metadata(): this {
    return this;
  }
}

export type ChangeType = 'add' | 'update' | 'delete';

export interface ListPage {
  readonly limit: number | undefined;
  readonly continue: string | undefined;
}

export interface ResourceWatchOptions<T> {
  /** Shown in status() and logs. */
  readonly name: string;
  readonly kubeConfig: KubeConfig;
  /** API path, e.g. /api/v1/pods or /api/v1/namespaces/shop/pods. */
  readonly path: string;
  readonly labelSelector?: string | undefined;
  readonly fieldSelector?: string | undefined;
  /**
   * The list call with the same selectors (the informer sends them only on the
   * watch), for one page: pass limit and continue through.
   */
  readonly list: (page: ListPage) => Promise<KubernetesListObject<object>>;
  /** Objects per list page (default 500; 0 = one request). */
  readonly pageSize?: number;
  readonly normalize: (raw: unknown) => Normalized<T>;
  /** After each change to the cache. Exceptions are caught and logged. */
  readonly onChange: (type: ChangeType, key: string, value: T | undefined) => void;
  /** Once, after the first successful list has been applied. */
  readonly onSynced?: () => void;
  /** An object that arrived with validation errors (kept if it normalized). */
  readonly onErrors?: (value: T | undefined, errors: readonly ValidationError[]) => void;
  readonly timing?: Partial<WatchTiming>;
  readonly log?: SourceLogger;
}

type State = 'new' | 'running' | 'backoff' | 'restarting' | 'stopped';

function isAbort(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { name?: unknown }).name === 'AbortError';
}

function abortError(message: string): Error {
  const e = new Error(message);
  e.name = 'AbortError';
  return e;
}

function record(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/**
 * `p`, or a rejection once `deadline` (Date.now() ms) has passed. A fresh timer
 * per call: racing many promises against one long-lived timeout promise would
 * keep every settled result (here: whole list pages) reachable until it fires.
 */
function beforeDeadline<T>(p: Promise<T>, deadline: number, totalMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`list timed out after ${totalMs} ms`)), Math.max(0, deadline - Date.now()));
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

/** Delay before restart number `failures` (1-based), with +-20% jitter. */
export function restartDelay(
  timing: Pick<WatchTiming, 'restartInitialMs' | 'restartMaxMs'>,
  failures: number,
  random: () => number = Math.random,
): number {
  const base = Math.min(timing.restartMaxMs, timing.restartInitialMs * 2 ** Math.min(Math.max(failures - 1, 0), 30));
  return Math.max(1, Math.round(base * (0.8 + 0.4 * random())));
}

interface WatchHooks {
  canConnect(): boolean;
  transform(type: string, obj: unknown): unknown;
  opened(): void;
  closed(err: unknown): void;
}

/** The library's Watch, with our hooks around each request. */
class HookedWatch extends Watch {
  readonly #hooks: WatchHooks;

  constructor(kc: KubeConfig, hooks: WatchHooks, streamTimeoutMs: number) {
    super(kc);
    this.#hooks = hooks;
    // TypeScript-private but a plain writable field (the library's tests set it too).
    Reflect.set(this, 'requestTimeoutMs', streamTimeoutMs);
  }

  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    const hooks = this.#hooks;
    if (!hooks.canConnect()) {
      // The informer reconnects after its delay without checking stop(): never open it.
      const c = new AbortController();
      c.abort();
      return c;
    }
    let finished = false;
    const wrappedDone = (err: unknown): void => {
      finished = true;
      hooks.closed(err);
      done(err);
    };
    const wrappedCallback = (phase: string, obj: unknown, watchObj?: unknown): void => {
      const out = hooks.transform(phase, obj);
      if (out !== undefined) callback(phase, out, watchObj);
    };
    try {
      const ctl = await super.watch(path, queryParams, wrappedCallback, wrappedDone);
      // stop() while connecting finds no request to abort: close the stream here.
      if (!finished && !hooks.canConnect()) ctl.abort();
      else if (!finished) hooks.opened();
      return ctl;
    } catch (err) {
      // e.g. credentials that fail before the request: report it as the request's failure.
      if (!finished) wrappedDone(err);
      const c = new AbortController();
      c.abort();
      return c;
    }
  }
}

export class ResourceWatch<T> {
  readonly name: string;
  readonly #opts: ResourceWatchOptions<T>;
  readonly #timing: WatchTiming;
  readonly #log: SourceLogger;
  readonly #informer: ListWatch<Envelope>;
  // (ListWatch's listFn takes no arguments: #list pages internally.)
  // The informer's cache is the only copy: values() and get() read it.
  /** Envelopes the informer caches, per namespace ('' = cluster-scoped): which namespaces to list. */
  readonly #cachedPerNs = new Map<string, number>();
  /** Of those, the ones with a value (the model's objects). */
  #size = 0;
  /**
   * For each envelope made and not applied yet: the envelope the informer
   * cached under its name at that moment (undefined: none). The informer
   * replaces its entry before it tells us, and a change is only a change if
   * the value differs from that one.
   */
  readonly #before = new WeakMap<Envelope, Envelope | undefined>();
  #state: State = 'new';
  /** Bumped by every restart and stop: late results of older runs are dropped. */
  #gen = 0;
  #synced = false;
  #failures = 0;
  #restarts = 0;
  #events = 0;
  #received = 0;
  #lastEventAt: number | undefined;
  #lastActivity = 0;
  #lastError: string | undefined;
  #streaming = false;
  #streamWaiters: (() => void)[] = [];
  #restartTimer: NodeJS.Timeout | undefined;
  #watchdog: NodeJS.Timeout | undefined;
  readonly #delays = new Set<NodeJS.Timeout>();

  constructor(opts: ResourceWatchOptions<T>) {
    this.name = opts.name;
    this.#opts = opts;
    this.#timing = { ...DEFAULT_TIMING, ...opts.timing };
    this.#log = opts.log ?? SILENT_LOGGER;
    const watch = new HookedWatch(
      opts.kubeConfig,
      {
        canConnect: () => this.#state === 'running',
        transform: (type, obj) => this.#transform(type, obj),
        opened: () => {
          this.#streaming = true;
        },
        closed: () => {
          this.#streaming = false;
          const waiters = this.#streamWaiters;
          this.#streamWaiters = [];
          for (const w of waiters) w();
        },
      },
      this.#timing.streamTimeoutMs,
    );
    // The informer never asks for bookmarks; parameters in the path are kept.
    const path = `${opts.path}${opts.path.includes('?') ? '&' : '?'}allowWatchBookmarks=true`;
    this.#informer = new ListWatch<Envelope>(path, watch, () => this.#list(), false, opts.labelSelector, opts.fieldSelector, {
      delayFn: (ms) => this.#delay(ms),
    });
    this.#informer.on('add', (env) => this.#guard(() => this.#apply('add', env)));
    this.#informer.on('update', (env) => this.#guard(() => this.#apply('update', env)));
    this.#informer.on('delete', (env) => this.#guard(() => this.#apply('delete', env)));
    this.#informer.on('error', (err) => this.#guard(() => this.#onError(err)));
  }

  /** Begins listing and watching; returns at once. */
  start(): void {
    if (this.#state !== 'new') return;
    this.#state = 'running';
    this.#lastActivity = Date.now();
    this.#run();
    if (this.#timing.idleTimeoutMs > 0) {
      const every = Math.max(10, Math.min(1_000, Math.floor(this.#timing.idleTimeoutMs / 4)));
      this.#watchdog = setInterval(() => this.#guard(() => this.#checkIdle()), every);
      this.#watchdog.unref();
    }
  }

  /** Stops for good: no events, errors or restarts once this resolves. */
  async stop(): Promise<void> {
    if (this.#state === 'stopped') return;
    const wasStarted = this.#state !== 'new';
    this.#state = 'stopped';
    this.#gen++;
    clearTimeout(this.#restartTimer);
    clearInterval(this.#watchdog);
    // Pending reconnect delays never resolve: their informer chain is dropped.
    for (const t of this.#delays) clearTimeout(t);
    this.#delays.clear();
    if (!wasStarted) return;
    const closed = this.#waitStreamClosed();
    await this.#informer.stop();
    await closed;
  }

  synced(): boolean {
    return this.#synced;
  }

  get size(): number {
    return this.#size;
  }

  /** The cached objects that normalized (namespace by namespace). */
  *values(): Generator<T, void, undefined> {
    // list(namespace) copies one namespace; list() copies everything, and is
    // the only way to reach cluster-scoped ('') objects.
    const lists = this.#cachedPerNs.has('')
      ? [this.#informer.list()]
      : [...this.#cachedPerNs.keys()].map((ns) => this.#informer.list(ns));
    for (const list of lists) {
      for (const env of list) if (env.value !== undefined) yield env.value as T;
    }
  }

  get(name: string, namespace?: string): T | undefined {
    return this.#informer.get(name, namespace)?.value as T | undefined;
  }

  /** Changes applied to the cache since start (list items included). */
  get events(): number {
    return this.#events;
  }

  /** Objects received from the API server: list items plus watch events (bookmarks excluded). */
  get received(): number {
    return this.#received;
  }

  status(): WatchStatus {
    return {
      resource: this.name,
      synced: this.#synced,
      restarts: this.#restarts,
      lastEventAt: this.#lastEventAt,
      lastError: this.#lastError,
      objects: this.#size,
    };
  }

  // ------------------------------------------------------------ internals

  #guard(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.#lastError = `handler: ${errorMessage(err)}`;
      this.#log.error({ watch: this.name, err: errorMessage(err) }, 'watch handler failed');
    }
  }

  #run(): void {
    const gen = this.#gen;
    this.#informer.start().catch((err: unknown) => {
      if (gen === this.#gen) this.#guard(() => this.#onError(err));
    });
  }

  #delay(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(
        () => {
          this.#delays.delete(t);
          resolve();
        },
        Math.min(ms, this.#timing.reconnectMaxMs),
      );
      this.#delays.add(t);
    });
  }

  #waitStreamClosed(): Promise<void> {
    if (!this.#streaming) return Promise.resolve();
    return new Promise((resolve) => {
      // Bounded: an abort always ends the stream, but never hang stop() on it.
      const t = setTimeout(resolve, 2_000);
      this.#streamWaiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  async #list(): Promise<KubernetesListObject<Envelope>> {
    const gen = this.#gen;
    const deadline = Date.now() + this.#timing.listTimeoutMs;
    const pageSize = this.#opts.pageSize ?? 500;
    const items: Envelope[] = [];
    let rv: string | undefined;
    let cont: string | undefined;
    do {
      const raw = await beforeDeadline(
        this.#opts.list({ limit: pageSize > 0 ? pageSize : undefined, continue: cont }),
        deadline,
        this.#timing.listTimeoutMs,
      );
      // A list of an older run (restarted or stopped meanwhile) must not feed the cache.
      if (gen !== this.#gen || this.#state !== 'running') throw abortError('stale list');
      this.#received += raw.items.length;
      for (const item of raw.items) {
        const env = this.#envelope(item);
        if (env !== undefined) items.push(env);
      }
      rv = raw.metadata?.resourceVersion ?? rv;
      const next = raw.metadata?._continue;
      cont = typeof next === 'string' && next !== '' ? next : undefined;
    } while (cont !== undefined);
    // The informer applies the items right after this resolves; mark synced after that.
    setImmediate(() => {
      if (gen !== this.#gen || this.#state !== 'running') return;
      this.#failures = 0;
      this.#lastError = undefined;
      this.#touch();
      if (!this.#synced) {
        this.#synced = true;
        this.#log.debug({ watch: this.name, objects: this.#size }, 'watch synced');
        if (this.#opts.onSynced !== undefined) this.#guard(this.#opts.onSynced);
      }
    });
    return { metadata: rv === undefined ? {} : { resourceVersion: rv }, items };
  }

  #touch(): void {
    const now = Date.now();
    this.#lastActivity = now;
    this.#lastEventAt = now;
  }

  /** Raw (list or watch) object -> envelope; undefined when it has no usable identity. */
  #envelope(raw: unknown): Envelope | undefined {
    const meta = record(record(raw)?.metadata);
    const name = meta?.name;
    if (typeof name !== 'string' || name === '') return undefined;
    const ns = meta?.namespace;
    const rv = meta?.resourceVersion;
    const n = this.#opts.normalize(raw);
    const before = this.#informer.get(name, typeof ns === 'string' ? ns : undefined);
    // An update that changes nothing the model holds keeps the cached object:
    // one copy in memory, and the compiler's pod diff (by identity) stays empty.
    const value = n.ok ? (before !== undefined && isDeepStrictEqual(before.value, n.value) ? before.value : n.value) : undefined;
    const env = new Envelope(
      name,
      typeof ns === 'string' ? ns : undefined,
      typeof rv === 'string' ? rv : undefined,
      value,
      n.errors.length === 0 ? EMPTY : n.errors,
    );
    this.#before.set(env, before);
    return env;
  }

  /** Watch event object -> what the informer gets; undefined drops the event. */
  #transform(type: string, obj: unknown): unknown {
    try {
      if (this.#state !== 'running') return undefined;
      this.#touch();
      if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') {
        this.#received++;
        const env = this.#envelope(obj);
        if (env === undefined) this.#log.warn({ watch: this.name, type }, 'watch event without a name ignored');
        return env;
      }
      if (type === 'ERROR') {
        const o = record(obj) ?? {};
        if (o.code !== 410) this.#lastError = `watch ERROR event: ${String(o.message ?? o.reason ?? 'unknown')}`;
        return o;
      }
      // BOOKMARK and anything else: only the resourceVersion matters to the informer.
      const meta = record(record(obj)?.metadata);
      const rv = meta?.resourceVersion;
      return { metadata: typeof rv === 'string' ? { resourceVersion: rv } : {} };
    } catch (err) {
      this.#lastError = `event: ${errorMessage(err)}`;
      return undefined;
    }
  }

  #apply(type: ChangeType, env: Envelope): void {
    // An envelope we did not make just now is the informer's cached one
    // (a relist deleting what it no longer lists).
    const before = this.#before.has(env) ? this.#before.get(env) : env;
    this.#before.delete(env);
    const ns = env.namespace ?? '';
    // The informer adds to its cache with 'add' and removes with 'delete' only.
    if (type === 'add') this.#cachedPerNs.set(ns, (this.#cachedPerNs.get(ns) ?? 0) + 1);
    else if (type === 'delete') {
      const left = (this.#cachedPerNs.get(ns) ?? 1) - 1;
      if (left > 0) this.#cachedPerNs.set(ns, left);
      else this.#cachedPerNs.delete(ns);
    }
    const prev = before?.value as T | undefined;
    const value = type === 'delete' ? undefined : (env.value as T | undefined);
    if (prev !== undefined) this.#size--;
    if (value !== undefined) this.#size++;
    if (this.#state === 'stopped') return;
    this.#failures = 0;
    const key = env.namespace === undefined ? env.name : `${env.namespace}/${env.name}`;
    let change: ChangeType | undefined;
    if (value === undefined) {
      if (prev !== undefined) change = 'delete';
    } else {
      // Most updates (pod status heartbeats, annotations, managedFields)
      // change nothing the engine reads: no change, no snapshot, no render.
      change = prev === undefined ? 'add' : isDeepStrictEqual(prev, value) ? undefined : 'update';
    }
    if (type !== 'delete' && env.errors.length > 0 && this.#opts.onErrors !== undefined) {
      const onErrors = this.#opts.onErrors;
      this.#guard(() => onErrors(value, env.errors));
    }
    if (change === undefined) return;
    this.#events++;
    const c = change;
    this.#guard(() => this.#opts.onChange(c, key, c === 'delete' ? undefined : value));
  }

  #onError(err: unknown): void {
    // Our own stop()/restart aborting the request; also stale lists of older runs.
    if (isAbort(err)) return;
    if (this.#state !== 'running') return;
    this.#lastError = errorMessage(err);
    this.#failures++;
    const delay = restartDelay(this.#timing, this.#failures);
    this.#log.warn(
      { watch: this.name, err: this.#lastError, failures: this.#failures, retryInMs: delay },
      'watch failed; restarting',
    );
    this.#state = 'backoff';
    this.#restartTimer = setTimeout(() => {
      if (this.#state !== 'backoff') return;
      this.#state = 'running';
      this.#restarts++;
      this.#run();
    }, delay);
  }

  #checkIdle(): void {
    if (this.#state !== 'running' || !this.#streaming) return;
    const idle = Date.now() - this.#lastActivity;
    if (idle < this.#timing.idleTimeoutMs) return;
    this.#log.warn({ watch: this.name, idleMs: idle }, 'watch silent for too long; restarting');
    this.#lastError = `no event or bookmark for ${idle} ms`;
    void this.#restart();
  }

  /** Stop the open stream, wait until it has reported done, then start again from the last RV. */
  async #restart(): Promise<void> {
    this.#state = 'restarting';
    this.#gen++;
    this.#restarts++;
    const closed = this.#waitStreamClosed();
    await this.#informer.stop();
    await closed;
    if (this.#state !== 'restarting') return;
    this.#state = 'running';
    this.#lastActivity = Date.now();
    this.#run();
  }
}
