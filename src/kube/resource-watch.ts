// One list+watch of one resource (and selector) on list-watch.ts's ListWatch
// (client-node's ListWatch behaviour without the library, see kube-http.ts),
// made safe for a long-running agent. The informer's traps (see
// shared/references/client-node.md) and what we do:
//
// - It stops for good on any error but 410 (reset, refused, 401/403/500,
//   failed list): we restart it with capped exponential backoff (+-20% jitter,
//   so a DaemonSet does not stampede a recovering API server) and count it.
//   The cap is low (3 s): after an outage the agent follows the server within
//   a few seconds of its return (numbers in docs/agent.md).
// - stop() emits an AbortError: ignored; our own state decides what runs, we
//   never restart after stop() and never start() a running informer (a restart
//   waits until the aborted stream has reported done).
// - It may reconnect after stop() (its reconnect delay does not re-check):
//   our Watch wrapper refuses to connect once the watch is not running.
// - A silent stream is not a broken one. A real API server (its watch cache)
//   sends a BOOKMARK about once a minute, but only when its resourceVersion
//   for that resource has moved past what the watcher has seen: a quiet
//   resource gets none. So silence is never restarted on its own: a stream
//   silent for idleTimeoutMs gets a liveness probe (#probe): one `limit=1`
//   list for the server's current resourceVersion (etcd's, global: it moves
//   with every write to any resource), then, if that moved past what the
//   stream has seen, a short second watch from the stream's resourceVersion.
//   An object event at or below the listed resourceVersion on the probe is
//   one the stream should have delivered and did not: the stream is dead and
//   is restarted (reason "stalled"). Nothing there: quiet, left alone.
// - The library's own inactivity timeout (30 s in 2.0.1) is raised above the
//   probe's schedule and kept below undici's 300 s body timeout (which would
//   surface as an error): a quiet stream is reopened from its resourceVersion
//   every streamTimeoutMs, without a relist, like client-go's watch timeout.
// - Restarts are counted by reason: "error" (a failure), "stalled" (the probe
//   proved the stream dead), "gone" (410: the informer relists; logged at
//   info) and "closed" (the server ended the stream; resumed from its
//   resourceVersion). Only the first two are trouble.
// - Handler exceptions become unhandled rejections: every callback is wrapped,
//   and watch objects are reduced to envelopes the library cannot trip on.
// - start() resolves even when the list failed: synced means our listFn
//   succeeded and its items were applied.
// - Lists and watch events are both raw JSON here (client-node's lists were
//   deserialized: Date, `_from`); the normalizer reads either shape.
//
// Memory: the informer caches whatever listFn and the watch hand it, so both
// paths hand it small envelopes (name, namespace, resourceVersion, normalized
// value, in one object that is its own metadata); raw objects are dropped
// right away.
import { isDeepStrictEqual } from 'node:util';
import { HttpWatch } from './kube-http.ts';
import type { KubeAccess } from './kube-http.ts';
import { ListWatch } from './list-watch.ts';
import type { ListResult } from './list-watch.ts';
import type { Normalized } from '../model/normalize.ts';
import { EMPTY } from '../model/normalize-intern.ts';
import type { ValidationError } from '../model/types.ts';
import { errorMessage } from '../observability/errors.ts';
import { RESTART_REASONS, SILENT_LOGGER } from './source.ts';
import type { RestartReason, SourceLogger, WatchStatus } from './source.ts';

export interface WatchTiming {
  /** First restart delay after a failure. */
  readonly restartInitialMs: number;
  /** Restart delay cap. */
  readonly restartMaxMs: number;
  /** An open stream with no event or bookmark for this long gets a liveness probe. 0 disables. */
  readonly idleTimeoutMs: number;
  /** Bound on one liveness probe (its list and its watch); past it the probe failed. */
  readonly probeTimeoutMs: number;
  /** A list taking longer fails (and is retried). */
  readonly listTimeoutMs: number;
  /** Cap of the library's own reconnect delay after a clean close (1 s doubling to 30 s). */
  readonly reconnectMaxMs: number;
  /**
   * The library's connect/inactivity timeout per watch request (its default:
   * 30 s). Keep it above idleTimeoutMs (the probe judges silence first) and
   * below undici's 300 s body timeout (which ends a silent stream as an error).
   */
  readonly streamTimeoutMs: number;
}

export const DEFAULT_TIMING: WatchTiming = {
  restartInitialMs: 250,
  restartMaxMs: 3_000,
  idleTimeoutMs: 150_000,
  probeTimeoutMs: 15_000,
  listTimeoutMs: 180_000,
  reconnectMaxMs: 3_000,
  streamTimeoutMs: 270_000,
};

/** What a liveness probe found. */
type ProbeVerdict =
  | { readonly kind: 'quiet'; readonly why: string }
  | { readonly kind: 'missed'; readonly rv: string; readonly serverRv: string }
  | { readonly kind: 'gone' }
  | { readonly kind: 'failed'; readonly error: string };

/** A resourceVersion as a number, when it is one (etcd's always are); undefined otherwise. */
export function rvNumber(rv: unknown): bigint | undefined {
  return typeof rv === 'string' && /^\d{1,20}$/.test(rv) ? BigInt(rv) : undefined;
}

/** A resourceVersion as a number when String() gives it back exactly; as given otherwise. */
export function compactRv(rv: string | undefined): string | number | undefined {
  return rv !== undefined && /^(0|[1-9]\d{0,14})$/.test(rv) ? Number(rv) : rv;
}

/**
 * What the informer caches in place of the raw object: one small object per
 * cached object (a node may cache 100k+ pods). Most cached objects are
 * normalized values that carry their own name and namespace and have no
 * errors: this class, two fields; the others are an OwnEnvelope, which holds
 * name, namespace and errors too (a third field on every envelope was ~1 MiB
 * at 116k cached objects: issue 24, memory).
 */
class Envelope {
  /**
   * The resourceVersion, held as a number when it is a plain decimal that
   * converts back to the same text (etcd's are): a string per cached object
   * costs ~30 bytes, a number below 2^31 nothing (issue 24).
   */
  readonly #rv: string | number | undefined;
  /** undefined: the object failed to normalize (it is not part of the model). */
  readonly value: unknown;

  constructor(resourceVersion: string | undefined, value: unknown) {
    this.#rv = compactRv(resourceVersion);
    this.value = value;
  }

  static of(
    name: string,
    namespace: string | undefined,
    resourceVersion: string | undefined,
    value: unknown,
    errors: readonly ValidationError[],
  ): Envelope {
    const v = record(value);
    return errors.length === 0 && v?.name === name && v.namespace === namespace
      ? new Envelope(resourceVersion, value)
      : new OwnEnvelope(resourceVersion, value, { name, namespace, errors });
  }

  get name(): string {
    return (this.value as { readonly name: string }).name;
  }

  get namespace(): string | undefined {
    return (this.value as { readonly namespace?: string }).namespace;
  }

  /** Shared EMPTY when there are none. */
  get errors(): readonly ValidationError[] {
    return EMPTY;
  }

  get resourceVersion(): string | undefined {
    return typeof this.#rv === 'number' ? String(this.#rv) : this.#rv;
  }

  /** The informer reads metadata.name, .namespace and .resourceVersion: the envelope's own fields. */
  get metadata(): this {
    return this;
  }
}

/** An envelope whose value does not carry the same name and namespace, or with errors. */
class OwnEnvelope extends Envelope {
  readonly #own: { readonly name: string; readonly namespace: string | undefined; readonly errors: readonly ValidationError[] };

  constructor(
    resourceVersion: string | undefined,
    value: unknown,
    own: { readonly name: string; readonly namespace: string | undefined; readonly errors: readonly ValidationError[] },
  ) {
    super(resourceVersion, value);
    this.#own = own;
  }

  override get name(): string {
    return this.#own.name;
  }

  override get namespace(): string | undefined {
    return this.#own.namespace;
  }

  override get errors(): readonly ValidationError[] {
    return this.#own.errors;
  }
}

export type ChangeType = 'add' | 'update' | 'delete';

/**
 * One list page: raw JSON (kube-http.ts) or a client-node list (tests), whose
 * deserializer renames `continue` to `_continue`.
 */
export interface ListAnswer {
  readonly metadata?:
    | {
        readonly resourceVersion?: string | undefined;
        readonly continue?: string | undefined;
        readonly _continue?: string | undefined;
      }
    | undefined;
  readonly items: readonly unknown[];
}

export interface ListPage {
  readonly limit: number | undefined;
  readonly continue: string | undefined;
}

export interface ResourceWatchOptions<T> {
  /** Shown in status() and logs. */
  readonly name: string;
  /** Credentials and server: the lean loader's (kube-access.ts) or a client-node KubeConfig. */
  readonly kubeConfig: KubeAccess;
  /** API path, e.g. /api/v1/pods or /api/v1/namespaces/shop/pods. */
  readonly path: string;
  readonly labelSelector?: string | undefined;
  readonly fieldSelector?: string | undefined;
  /**
   * The list call with the same selectors (the informer sends them only on the
   * watch), for one page: pass limit and continue through.
   */
  readonly list: (page: ListPage) => Promise<ListAnswer>;
  /**
   * The liveness probe's list: `limit=1`, ideally without selectors (only its
   * metadata.resourceVersion is read; a selector could make the server scan).
   * Default: one page of `list` with limit 1.
   */
  readonly probeList?: () => Promise<ListAnswer>;
  /** Objects per list page (default 500; 0 = one request). */
  readonly pageSize?: number;
  readonly normalize: (raw: unknown) => Normalized<T>;
  /** After each change to the cache (`prev`: the object it held before). Exceptions are caught and logged. */
  readonly onChange: (type: ChangeType, key: string, value: T | undefined, prev: T | undefined) => void;
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

/** The stream, with our hooks around each request. */
class HookedWatch extends HttpWatch {
  readonly #hooks: WatchHooks;

  constructor(kc: KubeAccess, hooks: WatchHooks, streamTimeoutMs: number) {
    super(kc);
    this.#hooks = hooks;
    this.requestTimeoutMs = streamTimeoutMs;
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
  readonly #restarts: Record<RestartReason, number> = { error: 0, stalled: 0, gone: 0, closed: 0 };
  /** A 410 ERROR event arrived on the open stream: its clean end is that expiry, not a close. */
  #goneOnStream = false;
  #probing = false;
  #probes = 0;
  /** Ends the probe watch in flight (stop()). */
  #probeCancel: (() => void) | undefined;
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
          this.#goneOnStream = false;
        },
        closed: (err) => {
          this.#streaming = false;
          const waiters = this.#streamWaiters;
          this.#streamWaiters = [];
          for (const w of waiters) w();
          this.#guard(() => this.#streamEnded(err));
        },
      },
      this.#timing.streamTimeoutMs,
    );
    // The informer never asks for bookmarks; parameters in the path are kept.
    const path = `${opts.path}${opts.path.includes('?') ? '&' : '?'}allowWatchBookmarks=true`;
    this.#informer = new ListWatch<Envelope>(path, watch, () => this.#list(), opts.labelSelector, opts.fieldSelector, {
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
    this.#probeCancel?.();
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

  /** Liveness probes run since start (a silent stream is probed, not restarted). */
  get probes(): number {
    return this.#probes;
  }

  /** Objects received from the API server: list items plus watch events (bookmarks excluded). */
  get received(): number {
    return this.#received;
  }

  status(): WatchStatus {
    return {
      resource: this.name,
      synced: this.#synced,
      restarts: RESTART_REASONS.reduce((n, r) => n + this.#restarts[r], 0),
      restartsByReason: { ...this.#restarts },
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

  async #list(): Promise<ListResult<Envelope>> {
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
      const next = raw.metadata?.continue ?? raw.metadata?._continue;
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
    const env = Envelope.of(
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
        if (o.code === 410) {
          // The server ends the stream next; the informer then relists.
          this.#goneOnStream = true;
          this.#gone(String(o.message ?? 'Expired'));
        } else this.#lastError = `watch ERROR event: ${String(o.message ?? o.reason ?? 'unknown')}`;
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
    this.#guard(() => this.#opts.onChange(c, key, c === 'delete' ? undefined : value, prev));
  }

  #count(reason: RestartReason): void {
    this.#restarts[reason]++;
  }

  /** The resourceVersion expired: the informer relists by itself (no backoff, no error). */
  #gone(message: string): void {
    this.#count('gone');
    this.#log.info({ watch: this.name, reason: message }, 'watch resourceVersion expired (410 Gone); relisting');
  }

  /** A watch request or stream ended (the informer decides what follows). */
  #streamEnded(err: unknown): void {
    if (this.#state !== 'running') return;
    if (err === null || err === undefined) {
      // A clean end: after a 410 ERROR event that expiry (counted), else the server's own close.
      if (this.#goneOnStream) {
        this.#goneOnStream = false;
        return;
      }
      this.#count('closed');
      this.#log.debug({ watch: this.name }, 'watch stream closed by the server; resuming from its resourceVersion');
      return;
    }
    const e = err as { statusCode?: unknown; code?: unknown; name?: unknown };
    if (e.statusCode === 410 || e.code === 410) this.#gone('HTTP 410');
    else if (e.name === 'TimeoutError')
      this.#log.debug(
        { watch: this.name, silentMs: this.#timing.streamTimeoutMs },
        'silent watch stream reopened from its resourceVersion',
      );
    // Anything else is a failure: the informer reports it as an error (#onError).
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
      this.#count('error');
      this.#run();
    }, delay);
  }

  #checkIdle(): void {
    if (this.#state !== 'running' || !this.#streaming || this.#probing) return;
    if (Date.now() - this.#lastActivity < this.#timing.idleTimeoutMs) return;
    this.#probing = true;
    this.#probes++;
    this.#probe().then(
      () => {
        this.#probing = false;
      },
      (err: unknown) => {
        this.#probing = false;
        this.#log.error({ watch: this.name, err: errorMessage(err) }, 'watch liveness probe crashed');
      },
    );
  }

  /** Is the silent stream quiet or dead? Restarts it only when it missed events. */
  async #probe(): Promise<void> {
    const gen = this.#gen;
    const activity = this.#lastActivity;
    const idleMs = Date.now() - activity;
    const alive = (): boolean => gen === this.#gen && this.#state === 'running';
    const seen = this.#informer.latestResourceVersion();
    let verdict = await this.#liveness(seen);
    if (verdict.kind === 'missed' && alive() && this.#lastActivity === activity) {
      // An event committed just before the probe's list may still be on its way
      // over a healthy stream: give the stream a moment before judging it.
      await new Promise((r) => setTimeout(r, Math.min(1_000, Math.max(10, this.#timing.idleTimeoutMs / 10))).unref());
    }
    if (!alive()) return;
    // The stream delivered something meanwhile: it is alive, whatever the probe saw.
    if (this.#lastActivity !== activity) verdict = { kind: 'quiet', why: 'the stream delivered meanwhile' };
    switch (verdict.kind) {
      case 'quiet':
        this.#lastActivity = Date.now();
        this.#log.debug({ watch: this.name, idleMs, resourceVersion: seen, why: verdict.why }, 'silent watch stream is quiet');
        return;
      case 'missed':
        this.#lastError = `stream stalled: missed the event at resourceVersion ${verdict.rv} (server at ${verdict.serverRv})`;
        this.#log.warn(
          { watch: this.name, idleMs, resourceVersion: seen, missed: verdict.rv, serverResourceVersion: verdict.serverRv },
          'watch stream missed events; restarting',
        );
        void this.#restart('stalled');
        return;
      case 'gone':
        // The stream's resourceVersion expired: restart it; its own 410 then relists (counted "gone").
        void this.#restart(undefined);
        return;
      case 'failed':
        // Not a verdict on the stream: try again after another idle period
        // (if the server is down, the stream itself fails and restarts).
        this.#lastActivity = Date.now();
        this.#lastError = `liveness probe: ${verdict.error}`;
        this.#log.warn({ watch: this.name, idleMs, err: verdict.error }, 'watch liveness probe failed');
        return;
    }
  }

  async #liveness(seen: string): Promise<ProbeVerdict> {
    const ms = this.#timing.probeTimeoutMs;
    let serverRv: string | undefined;
    try {
      const list = this.#opts.probeList ?? (() => this.#opts.list({ limit: 1, continue: undefined }));
      serverRv = (await beforeDeadline(list(), Date.now() + ms, ms)).metadata?.resourceVersion;
    } catch (err) {
      return { kind: 'failed', error: errorMessage(err) };
    }
    const have = rvNumber(seen);
    const now = rvNumber(serverRv);
    // Not comparable (not etcd-like): nothing to judge by; the library's stream timeout still reopens it.
    if (have === undefined || now === undefined || serverRv === undefined)
      return { kind: 'quiet', why: 'resourceVersions not comparable' };
    if (now <= have) return { kind: 'quiet', why: 'the server has not moved' };
    return this.#probeStream(seen, now, serverRv);
  }

  /**
   * A short watch from the stream's resourceVersion: the server replays what
   * came after it, then ends the watch (timeoutSeconds=1). An object event at
   * or below `upTo` was committed before the probe: the stream should have
   * delivered it. Anything past `upTo` (or the end) with none before: quiet.
   */
  #probeStream(from: string, upTo: bigint, serverRv: string): Promise<ProbeVerdict> {
    return new Promise((resolve) => {
      let settled = false;
      let ctl: AbortController | undefined;
      const finish = (v: ProbeVerdict): void => {
        if (settled) return;
        settled = true;
        this.#probeCancel = undefined;
        clearTimeout(timer);
        ctl?.abort();
        resolve(v);
      };
      const ms = this.#timing.probeTimeoutMs;
      const timer = setTimeout(() => finish({ kind: 'failed', error: `probe watch gave no answer within ${ms} ms` }), ms);
      timer.unref();
      this.#probeCancel = () => finish({ kind: 'failed', error: 'cancelled' });
      const watch = new HttpWatch(this.#opts.kubeConfig);
      watch.requestTimeoutMs = ms;
      const query: Record<string, string | number | undefined> = {
        resourceVersion: from,
        timeoutSeconds: 1,
        labelSelector: this.#opts.labelSelector,
        fieldSelector: this.#opts.fieldSelector,
      };
      const onEvent = (phase: string, obj: unknown): void => {
        if (settled) return;
        const o = record(obj);
        if (phase === 'ERROR') {
          finish(o?.code === 410 ? { kind: 'gone' } : { kind: 'failed', error: `ERROR event: ${String(o?.message ?? '')}` });
          return;
        }
        const rv = rvNumber(record(o?.metadata)?.resourceVersion);
        if (rv === undefined) return;
        if (phase !== 'BOOKMARK' && rv <= upTo) finish({ kind: 'missed', rv: rv.toString(), serverRv });
        else if (rv >= upTo) finish({ kind: 'quiet', why: 'the probe passed the listed resourceVersion' });
      };
      const onDone = (err: unknown): void => {
        if (err === null || err === undefined) finish({ kind: 'quiet', why: 'nothing missed' });
        else {
          const e = err as { statusCode?: unknown };
          finish(e.statusCode === 410 ? { kind: 'gone' } : { kind: 'failed', error: errorMessage(err) });
        }
      };
      watch.watch(this.#opts.path, query, onEvent, onDone).then(
        (c) => {
          ctl = c;
          if (settled) c.abort();
        },
        (err: unknown) => finish({ kind: 'failed', error: errorMessage(err) }),
      );
    });
  }

  /** Stop the open stream, wait until it has reported done, then start again from the last RV. */
  async #restart(reason: RestartReason | undefined): Promise<void> {
    this.#state = 'restarting';
    this.#gen++;
    if (reason !== undefined) this.#count(reason);
    const closed = this.#waitStreamClosed();
    await this.#informer.stop();
    await closed;
    if (this.#state !== 'restarting') return;
    this.#state = 'running';
    this.#lastActivity = Date.now();
    this.#run();
  }
}
