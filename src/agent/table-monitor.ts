// Follows the kernel's change notifications (`nft monitor destroy`, a child
// process) so that a table someone else flushed, deleted or emptied is
// repaired at once instead of at the next periodic drift check (which stays
// as the backstop, and alone sees foreign additions).
//
// Why only deletions: nft 1.0.6 (Debian 12, our image) prints elements of
// concatenated interval sets with a garbage range end and then segfaults
// (measured: 100 `addr . proto . port-range` elements with comments crash
// it every time). Our allow sets are exactly that, so a full `nft monitor`
// died on our own applies and its restart delay grew to 30 s. `monitor
// destroy` prints table, chain, set and rule deletions and no elements.
//
// It prints no `# new generation ... by process` trailers either, so our own
// transactions mark themselves: each begins and ends by creating and deleting
// a chain in a scratch table (`markTransaction`). The kernel emits one
// transaction's notifications together and in order, so every deletion
// between our two markers is ours and every other one is someone else's: no
// pids (which a container's PID namespace hides anyway) and no timing.
import { createInterface } from 'node:readline';
import { execa } from 'execa';
import type { Logger } from 'pino';

/** One line of `nft monitor destroy`, as far as our table is concerned. */
export type MonitorEvent =
  | { readonly kind: 'own-begin' }
  | { readonly kind: 'own-end' }
  | { readonly kind: 'table-deleted' }
  /** A chain, set, map or rule of our table was deleted; `object` is the line. */
  | { readonly kind: 'deleted'; readonly object: string };

/** A deletion in our table. */
export type Deletion = Extract<MonitorEvent, { readonly kind: 'table-deleted' | 'deleted' }>;

/** The scratch table whose chains mark our transactions (never left in the kernel). */
export function markerTable(table: string): string {
  return `${table}-tx`;
}

function marker(table: string, which: 'begin' | 'end'): string {
  const m = markerTable(table);
  return `add table inet ${m}; add chain inet ${m} ${which}; delete table inet ${m};`;
}

/**
 * The script as our dataplane runs it: bracketed by the markers. The begin
 * marker shares the first line, so nft's error line numbers stay those of
 * the rendered script.
 */
export function markTransaction(script: string, table: string): string {
  return `${marker(table, 'begin')} ${script}${script.endsWith('\n') ? '' : '\n'}${marker(table, 'end')}\n`;
}

/** Pure: one `nft monitor destroy` line, or undefined when it is not about our table. */
export function parseMonitorLine(l: string, table: string): MonitorEvent | undefined {
  // "delete OBJECT inet TABLE [NAME ...]": delete table / delete chain / delete rule ...
  const [verb, object, family, name, rest] = l.split(' ', 5);
  if (verb !== 'delete' || family !== 'inet') return undefined;
  if (name === markerTable(table) && object === 'chain') {
    if (rest === 'begin') return { kind: 'own-begin' };
    if (rest === 'end') return { kind: 'own-end' };
    return undefined;
  }
  if (name !== table) return undefined;
  return object === 'table' ? { kind: 'table-deleted' } : { kind: 'deleted', object: l.slice(0, 200) };
}

/** Pure: follows the markers; returns the deletions that are someone else's. */
export class ForeignFilter {
  #inOwn = false;
  foreign(e: MonitorEvent | undefined): Deletion | undefined {
    if (e === undefined) return undefined;
    switch (e.kind) {
      case 'own-begin':
        this.#inOwn = true;
        return undefined;
      case 'own-end':
        this.#inOwn = false;
        return undefined;
      case 'table-deleted':
      case 'deleted':
        return this.#inOwn ? undefined : e;
    }
  }
}

export interface MonitorTarget {
  readonly table: string;
  readonly nftPath: string;
  readonly netns: string | undefined;
}

export interface TableMonitorDeps {
  readonly target: MonitorTarget;
  readonly log: Logger;
  /** Someone else changed our table (`removed`: it is deleted now), or notifications may have been missed. */
  readonly onForeignChange: (detail: string, removed: boolean) => void;
  /** The monitor process ended unexpectedly and is restarted. */
  readonly onRestart: () => void;
}

const RESTART_MIN_MS = 500;
const RESTART_MAX_MS = 30_000;
/** A monitor that ran this long resets the restart delay. */
const HEALTHY_RUN_MS = 60_000;

export class TableMonitor {
  readonly #d: TableMonitorDeps;
  #stopped = false;
  #abort: AbortController | undefined;
  #restartTimer: NodeJS.Timeout | undefined;
  #delay = RESTART_MIN_MS;
  #running: Promise<void> | undefined;
  /** Foreign deletions seen in the current burst (one transaction prints many lines). */
  #burst: { first: string; count: number; removed: boolean } | undefined;

  constructor(deps: TableMonitorDeps) {
    this.#d = deps;
  }

  start(): void {
    if (this.#stopped || this.#running !== undefined) return;
    this.#running = this.#run().finally(() => {
      this.#running = undefined;
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#restartTimer !== undefined) clearTimeout(this.#restartTimer);
    this.#abort?.abort();
    await this.#running;
  }

  #seen(e: Deletion | undefined): void {
    if (e === undefined) return;
    const line = e.kind === 'table-deleted' ? 'table deleted' : e.object;
    if (this.#burst === undefined) {
      this.#burst = { first: line, count: 0, removed: false };
      // The lines of one transaction arrive together: report them once.
      setImmediate(() => this.#report());
    }
    this.#burst.count++;
    // Rules and chains go before their table: the last word is the table's.
    if (e.kind === 'table-deleted') this.#burst.removed = true;
  }

  #report(): void {
    const b = this.#burst;
    this.#burst = undefined;
    if (b === undefined || this.#stopped) return;
    const what = b.removed ? 'table deleted' : `${b.count} deletion(s) in the table, first: ${b.first}`;
    this.#d.onForeignChange(`${what}, by another process`, b.removed);
  }

  async #run(): Promise<void> {
    const t = this.#d.target;
    const args = ['monitor', 'destroy'];
    const [file, argv] = t.netns === undefined ? [t.nftPath, args] : ['ip', ['netns', 'exec', t.netns, t.nftPath, ...args]];
    const ac = new AbortController();
    this.#abort = ac;
    const started = performance.now();
    const sub = execa(file, argv, {
      reject: false,
      buffer: { stdout: false, stderr: true },
      stdin: 'ignore',
      cancelSignal: ac.signal,
    });
    const lines = createInterface({ input: sub.stdout, crlfDelay: Infinity });
    const filter = new ForeignFilter();
    lines.on('line', (l) => this.#seen(filter.foreign(parseMonitorLine(l, t.table))));
    const r = await sub;
    lines.close();
    if (this.#stopped) return;
    const ranMs = performance.now() - started;
    if (ranMs > HEALTHY_RUN_MS) this.#delay = RESTART_MIN_MS;
    const stderr = typeof r.stderr === 'string' ? r.stderr.trim().slice(0, 300) : '';
    this.#d.log.warn(
      { event: 'table-monitor', exitCode: r.exitCode, error: stderr || r.shortMessage, restartInMs: this.#delay },
      'nft monitor ended; restarting it (the periodic drift check covers the gap)',
    );
    this.#d.onRestart();
    const delay = this.#delay;
    this.#delay = Math.min(RESTART_MAX_MS, this.#delay * 2);
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = undefined;
      if (this.#stopped) return;
      // Changes made while no monitor ran were not seen: check once.
      this.#d.onForeignChange('nft monitor restarted: changes may have been missed', false);
      this.start();
    }, delay);
    this.#restartTimer.unref();
  }
}
