// A list+watch cache with @kubernetes/client-node ListWatch's behaviour (the
// contract resource-watch.ts was built on, shared/references/client-node.md),
// without the library: its ListWatch imports the generated ObjectSerializer
// and with it every model class (see kube-http.ts).
//
// start(): list (unless a resourceVersion is held), diff the list against the
// cache (delete what is gone, add what is new, update what changed its
// resourceVersion), then watch from the list's resourceVersion. An event's
// resourceVersion (bookmarks too) is remembered. The end of a stream decides:
// 410 (HTTP or an ERROR event before the end) forgets the resourceVersion and
// relists; a TimeoutError (silence) reopens at once; a clean end reopens from
// the resourceVersion after a delay (1 s doubling to 30 s, reset by any
// event); any other failure emits 'error' once and stops until start().
// stop() aborts the stream (its done reports an AbortError as an 'error').

/** What the cache reads of an object: its metadata. */
export interface Cached {
  readonly metadata?: {
    readonly name?: string;
    readonly namespace?: string | undefined;
    readonly resourceVersion?: string | undefined;
  };
}

export interface WatchOpener {
  watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController>;
}

export interface ListResult<T> {
  readonly metadata?: { readonly resourceVersion?: string | undefined };
  readonly items: readonly T[];
}

type Verb = 'add' | 'update' | 'delete' | 'error';

const BASE_RECONNECT_DELAY_MS = 1_000;
const MAX_RECONNECT_DELAY_MS = 30_000;

const nsOf = (o: Cached): string => o.metadata?.namespace ?? '';
const nameOf = (o: Cached): string => o.metadata?.name ?? '';

export class ListWatch<T extends Cached> {
  readonly #path: string;
  readonly #watch: WatchOpener;
  readonly #listFn: () => Promise<ListResult<T>>;
  readonly #labelSelector: string | undefined;
  readonly #fieldSelector: string | undefined;
  readonly #delayFn: (ms: number) => Promise<void>;
  /** namespace ('' = cluster-scoped) -> name -> object. */
  #objects = new Map<string, Map<string, T>>();
  readonly #callbacks: Record<Verb, ((arg: never) => void)[]> = { add: [], update: [], delete: [], error: [] };
  #resourceVersion = '';
  #stopped = false;
  #reconnectDelayMs = 0;
  #hasConnected = false;
  #request: AbortController | undefined;

  constructor(
    path: string,
    watch: WatchOpener,
    listFn: () => Promise<ListResult<T>>,
    labelSelector?: string,
    fieldSelector?: string,
    options?: { readonly delayFn?: (ms: number) => Promise<void> },
  ) {
    this.#path = path;
    this.#watch = watch;
    this.#listFn = listFn;
    this.#labelSelector = labelSelector;
    this.#fieldSelector = fieldSelector;
    this.#delayFn = options?.delayFn ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
  }

  on(verb: 'add' | 'update' | 'delete', cb: (obj: T) => void): void;
  on(verb: 'error', cb: (err: unknown) => void): void;
  on(verb: Verb, cb: (arg: never) => void): void {
    this.#callbacks[verb].push(cb);
  }

  async start(): Promise<void> {
    this.#stopped = false;
    this.#reconnectDelayMs = 0;
    this.#hasConnected = false;
    await this.#done(null);
  }

  stop(): Promise<void> {
    this.#stopped = true;
    this.#abort();
    return Promise.resolve();
  }

  get(name: string, namespace?: string): T | undefined {
    return this.#objects.get(namespace ?? '')?.get(name);
  }

  /** One namespace's objects, or (no namespace) all of them. */
  list(namespace?: string): T[] {
    if (namespace === undefined || namespace === '') {
      const all: T[] = [];
      for (const m of this.#objects.values()) for (const o of m.values()) all.push(o);
      return all;
    }
    return [...(this.#objects.get(namespace)?.values() ?? [])];
  }

  latestResourceVersion(): string {
    return this.#resourceVersion;
  }

  #emit(verb: 'add' | 'update' | 'delete', obj: T): void;
  #emit(verb: 'error', err: unknown): void;
  #emit(verb: Verb, arg: unknown): void {
    for (const cb of this.#callbacks[verb].slice()) (cb as (a: unknown) => void)(arg);
  }

  #abort(): void {
    this.#request?.abort();
    this.#request = undefined;
  }

  async #done(err: unknown): Promise<void> {
    this.#abort();
    const e = err as { statusCode?: unknown; code?: unknown; name?: unknown } | null;
    if (e !== null && e !== undefined && (e.statusCode === 410 || e.code === 410)) this.#resourceVersion = '';
    else if (e?.name === 'TimeoutError') this.#reconnectDelayMs = 0;
    else if (e !== null && e !== undefined) {
      this.#emit('error', err);
      return;
    }
    if (this.#stopped) return;
    if (this.#resourceVersion === '') {
      let list: ListResult<T>;
      try {
        list = await this.#listFn();
      } catch (listErr) {
        this.#emit('error', listErr);
        return;
      }
      this.#relist(list.items);
      this.#resourceVersion = list.metadata?.resourceVersion ?? '';
    }
    const query: Record<string, string | undefined> = {
      resourceVersion: this.#resourceVersion,
      labelSelector: this.#labelSelector,
      fieldSelector: this.#fieldSelector,
    };
    if (this.#reconnectDelayMs > 0 && this.#hasConnected) await this.#delayFn(this.#reconnectDelayMs);
    if (this.#hasConnected)
      this.#reconnectDelayMs = Math.min(
        this.#reconnectDelayMs > 0 ? this.#reconnectDelayMs * 2 : BASE_RECONNECT_DELAY_MS,
        MAX_RECONNECT_DELAY_MS,
      );
    this.#hasConnected = true;
    this.#request = await this.#watch.watch(
      this.#path,
      query,
      (phase, obj) => this.#event(phase, obj),
      (doneErr) => void this.#done(doneErr),
    );
  }

  /** A fresh list replaces the cache: what it no longer holds is deleted, the rest added or updated. */
  #relist(items: readonly T[]): void {
    const fresh = new Map<string, Set<string>>();
    for (const o of items) {
      const ns = nsOf(o);
      let names = fresh.get(ns);
      if (names === undefined) fresh.set(ns, (names = new Set()));
      names.add(nameOf(o));
    }
    for (const [ns, objs] of this.#objects) {
      const keep = fresh.get(ns);
      for (const [name, o] of objs) {
        if (keep?.has(name) === true) continue;
        objs.delete(name);
        this.#emit('delete', o);
      }
      if (objs.size === 0) this.#objects.delete(ns);
    }
    for (const o of items) this.#addOrUpdate(o);
  }

  #addOrUpdate(o: T): void {
    const ns = nsOf(o);
    let objs = this.#objects.get(ns);
    if (objs === undefined) this.#objects.set(ns, (objs = new Map()));
    const found = objs.get(nameOf(o));
    if (found === undefined) {
      objs.set(nameOf(o), o);
      this.#emit('add', o);
      return;
    }
    const rv = found.metadata?.resourceVersion;
    if (rv !== undefined && rv === o.metadata?.resourceVersion) return;
    objs.set(nameOf(o), o);
    this.#emit('update', o);
  }

  #event(phase: string, obj: unknown): void {
    const o = obj as T & { code?: unknown };
    switch (phase) {
      case 'ERROR':
        // The stream ends next; a 410 then relists.
        if (o.code === 410) this.#resourceVersion = '';
        return;
      case 'ADDED':
      case 'MODIFIED':
        this.#addOrUpdate(o);
        break;
      case 'DELETED': {
        const objs = this.#objects.get(nsOf(o));
        if (objs?.delete(nameOf(o)) === true) {
          this.#emit('delete', o);
          if (objs.size === 0) this.#objects.delete(nsOf(o));
        }
        break;
      }
      default:
        break;
    }
    this.#reconnectDelayMs = 0;
    this.#resourceVersion = o.metadata?.resourceVersion ?? '';
  }
}
