// ClusterSource over a directory of manifests (`--from-dir DIR`): for tests,
// demos and clusters without an API server in reach. Re-reads the directory
// when files change: fs.watch (recursive) for promptness, plus a periodic
// stat of every manifest file, because fs.watch misses changes on some file
// systems (network mounts, ConfigMap symlink swaps) and may fail outright.
//
// A read with any load error (unparseable file, unreadable path) changes
// nothing: the last good state stays and the error is in status().lastError.
// A half-written file must not make policies disappear (that would open
// traffic); the first good read is what makes the source synced.
import { watch } from 'node:fs';
import type { FSWatcher } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { loadManifests } from '../model/load.ts';
import { buildState, makeState } from '../model/normalize.ts';
import type { ReadonlyList } from '../model/list.ts';
import type { ClusterState, NetworkPolicy, TenancyConfig } from '../model/types.ts';
import { errorMessage } from '../observability/errors.ts';
import { SILENT_LOGGER } from './source.ts';
import { tenancyPolicies } from '../kinds/tenancy.ts';
import type { ClusterSource, SourceLogger, WatchStatus } from './source.ts';

export interface FileSourceOptions {
  readonly dir: string;
  /** Quiet time after a change before re-reading (default 100 ms). */
  readonly debounceMs?: number;
  /** Period of the stat fallback (default 2 s; 0 disables). */
  readonly pollMs?: number;
  /** Use fs.watch besides polling (default true). */
  readonly fsWatch?: boolean;
  readonly log?: SourceLogger;
  /** Tenancy on, with this configuration (docs/tenancy.md); absent: off. */
  readonly tenancy?: TenancyConfig;
}

const EXTENSIONS = new Set(['.yaml', '.yml', '.json']);

/** Sorted "path size mtime" lines of every manifest file under dir: cheap change detection. */
async function signature(dir: string): Promise<string> {
  const out: string[] = [];
  const walk = async (d: string, depth: number): Promise<void> => {
    if (depth > 32) return;
    let names: string[];
    try {
      names = await readdir(d);
    } catch (err) {
      out.push(`${d} ! ${errorMessage(err)}`);
      return;
    }
    for (const n of names) {
      const p = join(d, n);
      try {
        const st = await stat(p);
        if (st.isDirectory()) await walk(p, depth + 1);
        else if (EXTENSIONS.has(extname(n).toLowerCase())) out.push(`${p} ${st.size} ${st.mtimeMs}`);
      } catch {
        out.push(`${p} gone`);
      }
    }
  };
  await walk(dir, 0);
  return out.sort().join('\n');
}

const EMPTY: ClusterState = makeState({ namespaces: [], pods: [], policies: [], nodes: [] });

export class FileClusterSource implements ClusterSource {
  readonly #dir: string;
  readonly #debounceMs: number;
  readonly #pollMs: number;
  readonly #fsWatch: boolean;
  readonly #log: SourceLogger;
  readonly #tenancy: TenancyConfig | undefined;
  #state: 'new' | 'running' | 'stopped' = 'new';
  #current: ClusterState = EMPTY;
  #currentText = '';
  #synced = false;
  #lastEventAt: number | undefined;
  #lastError: string | undefined;
  #reloads = 0;
  #signature: string | undefined;
  #watcher: FSWatcher | undefined;
  #debounce: NodeJS.Timeout | undefined;
  #poll: NodeJS.Timeout | undefined;
  #loading: Promise<void> | undefined;
  #again = false;
  readonly #invalidSeen = new Map<string, string>();
  readonly #changeListeners: ((reason: string) => void)[] = [];
  readonly #invalidListeners: ((policy: NetworkPolicy) => void)[] = [];

  constructor(opts: FileSourceOptions) {
    this.#dir = opts.dir;
    this.#debounceMs = opts.debounceMs ?? 100;
    this.#pollMs = opts.pollMs ?? 2_000;
    this.#fsWatch = opts.fsWatch ?? true;
    this.#log = opts.log ?? SILENT_LOGGER;
    this.#tenancy = opts.tenancy;
  }

  /** Reads the directory once (so synced() is known when this resolves), then watches it. */
  async start(): Promise<void> {
    if (this.#state !== 'new') return;
    this.#state = 'running';
    if (this.#fsWatch) this.#startFsWatch();
    if (this.#pollMs > 0) {
      this.#poll = setInterval(() => void this.#checkSignature(), this.#pollMs);
      this.#poll.unref();
    }
    await this.#reload();
  }

  #startFsWatch(): void {
    try {
      this.#watcher = watch(this.#dir, { recursive: true, persistent: false }, () => this.#schedule());
      this.#watcher.on('error', (err) => {
        this.#log.warn({ dir: this.#dir, err: errorMessage(err) }, 'fs.watch failed; relying on polling');
        this.#watcher?.close();
        this.#watcher = undefined;
      });
    } catch (err) {
      this.#log.warn({ dir: this.#dir, err: errorMessage(err) }, 'fs.watch unavailable; relying on polling');
    }
  }

  async stop(): Promise<void> {
    if (this.#state === 'stopped') return;
    this.#state = 'stopped';
    clearTimeout(this.#debounce);
    clearInterval(this.#poll);
    this.#watcher?.close();
    this.#watcher = undefined;
    await this.#loading;
  }

  synced(): boolean {
    return this.#synced;
  }

  snapshot(): ClusterState {
    return this.#current;
  }

  onChange(listener: (reason: string) => void): void {
    this.#changeListeners.push(listener);
  }

  onInvalid(listener: (policy: NetworkPolicy) => void): void {
    this.#invalidListeners.push(listener);
  }

  status(): readonly WatchStatus[] {
    const s = this.#current;
    return [
      {
        resource: `files ${this.#dir}`,
        synced: this.#synced,
        restarts: 0,
        lastEventAt: this.#lastEventAt,
        lastError: this.#lastError,
        objects: s.namespaces.length + s.pods.length + s.policies.length + s.nodes.length + (s.clusterPolicies?.length ?? 0),
      },
    ];
  }

  /** Successful reads that changed the state. */
  get reloads(): number {
    return this.#reloads;
  }

  #schedule(): void {
    if (this.#state !== 'running') return;
    clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => void this.#reload(), this.#debounceMs);
  }

  async #checkSignature(): Promise<void> {
    if (this.#state !== 'running' || this.#loading !== undefined) return;
    try {
      const sig = await signature(this.#dir);
      if (sig !== this.#signature) this.#schedule();
    } catch (err) {
      this.#log.warn({ err: errorMessage(err) }, 'stat of manifest directory failed');
    }
  }

  #reload(): Promise<void> {
    if (this.#loading !== undefined) {
      this.#again = true;
      return this.#loading;
    }
    this.#loading = (async () => {
      try {
        do {
          this.#again = false;
          await this.#read();
        } while (this.#again && this.#state === 'running');
      } finally {
        this.#loading = undefined;
      }
    })();
    return this.#loading;
  }

  async #read(): Promise<void> {
    if (this.#state !== 'running') return;
    try {
      // Taken before reading: a change during the read shows up as a new signature.
      const sig = await signature(this.#dir);
      const { objects, errors } = await loadManifests([this.#dir]);
      if (this.#state !== 'running') return;
      this.#signature = sig;
      if (errors.length > 0) {
        this.#lastError = errors
          .slice(0, 3)
          .map((e) => `${e.source}: ${e.message}`)
          .join('; ')
          .concat(errors.length > 3 ? ` (+${errors.length - 3} more)` : '');
        this.#log.warn(
          { dir: this.#dir, errors: errors.length, first: this.#lastError },
          'manifests not loaded; keeping the previous state',
        );
        return;
      }
      const raw = buildState(objects);
      const state = this.#tenancy === undefined ? raw.state : { ...raw.state, tenancy: this.#tenancy };
      const built = { state, errors: [...raw.errors, ...[...tenancyPolicies(state).errors.values()].flat()] };
      for (const e of built.errors)
        this.#log.debug({ error: `${e.kind} ${e.namespace ?? ''}/${e.name} ${e.path}: ${e.message}` }, 'validation error');
      this.#lastError = undefined;
      this.#lastEventAt = Date.now();
      const text = JSON.stringify(built.state);
      const first = !this.#synced;
      this.#synced = true;
      if (text === this.#currentText && !first) return;
      this.#current = built.state;
      this.#currentText = text;
      this.#reloads++;
      this.#notifyInvalid(built.state.policies);
      this.#emit(first ? 'synced' : `files changed in ${this.#dir}`);
    } catch (err) {
      // Never let a read failure escape: the previous state stays in force.
      this.#lastError = errorMessage(err);
      this.#log.error({ dir: this.#dir, err: this.#lastError }, 'reading manifests failed');
    }
  }

  /** onInvalid for policies with errors that are new or changed since the last read. */
  #notifyInvalid(policies: ReadonlyList<NetworkPolicy>): void {
    const seen = new Set<string>();
    for (const p of policies) {
      if (p.errors.length === 0) continue;
      const key = `${p.namespace}/${p.name}`;
      const text = JSON.stringify(p);
      seen.add(key);
      if (this.#invalidSeen.get(key) === text) continue;
      this.#invalidSeen.set(key, text);
      for (const l of this.#invalidListeners) this.#safe(() => l(p));
    }
    for (const k of [...this.#invalidSeen.keys()]) if (!seen.has(k)) this.#invalidSeen.delete(k);
  }

  #safe(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.#log.error({ err: errorMessage(err) }, 'source listener failed');
    }
  }

  #emit(reason: string): void {
    for (const l of this.#changeListeners) this.#safe(() => l(reason));
  }
}
