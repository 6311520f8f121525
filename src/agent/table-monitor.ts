// Follows the kernel's change notifications (`nft monitor destroy rules`, a
// child process) so that a table someone else flushed, deleted or emptied is
// repaired at once instead of at the next periodic drift check (which stays
// as the backstop, and alone sees foreign additions and element deletions).
//
// Why rule deletions only: nft 1.0.6 (Debian 12, our image) prints elements
// of concatenated interval sets with a garbage range end and then crashes
// (measured: 100 `addr . proto . port-range` elements with comments crash a
// full `nft monitor` every time, and deleting a few crashes `nft monitor
// destroy`). Our allow sets are exactly that, so the monitor died on our own
// applies and its restart delay grew to 30 s. Every way someone opens our
// table (flush ruleset, delete table, flush table or chain, delete a rule)
// deletes rules, because every chain of ours holds rules and a referenced set
// or map cannot be deleted before the rules that use it.
//
// The filtered monitor prints no `# new generation ... by process` trailers,
// so our own transactions mark themselves: each begins and ends by creating
// and deleting a rule in a scratch table (`markTransaction`). The kernel
// emits one transaction's notifications together and in order, so every
// deletion between our two markers is ours and every other one is someone
// else's: no pids (which a container's PID namespace hides anyway), no timing.
import { execa } from 'execa';
import type { Logger } from 'pino';

/** One line of `nft monitor destroy rules`, as far as our table is concerned. */
export type MonitorEvent =
  | { readonly kind: 'own-begin' }
  | { readonly kind: 'own-end' }
  /** A rule of our table was deleted; `object` is the line. */
  | { readonly kind: 'deleted'; readonly object: string }
  /** The socket buffer overflowed (ENOBUFS): notifications, maybe a marker, were lost. */
  | { readonly kind: 'lost' };

/** What the monitor reports: someone else's deletion in our table, or lost notifications. */
export type Foreign = Extract<MonitorEvent, { readonly kind: 'deleted' | 'lost' }>;

/** The scratch table whose rules mark our transactions (never left in the kernel). */
export function markerTable(table: string): string {
  return `${table}-tx`;
}

function marker(table: string, which: 'begin' | 'end'): string {
  const m = markerTable(table);
  return `add table inet ${m}; add chain inet ${m} ${which}; add rule inet ${m} ${which} return; delete table inet ${m};`;
}

/**
 * The script as our dataplane runs it: bracketed by the markers. The begin
 * marker shares the first line, so nft's error line numbers stay those of
 * the rendered script.
 */
export function markTransaction(script: string, table: string): string {
  return `${marker(table, 'begin')} ${script}${script.endsWith('\n') ? '' : '\n'}${marker(table, 'end')}\n`;
}

/** Pure: one `nft monitor destroy rules` line, or undefined when it is not about our table. */
export function parseMonitorLine(l: string, table: string): MonitorEvent | undefined {
  if (l.startsWith('# ERROR: We lost some netlink events')) return { kind: 'lost' };
  // "delete rule inet TABLE CHAIN handle N"
  const [verb, object, family, name, chain] = l.split(' ', 5);
  if (verb !== 'delete' || object !== 'rule' || family !== 'inet') return undefined;
  if (name === markerTable(table)) {
    if (chain === 'begin') return { kind: 'own-begin' };
    if (chain === 'end') return { kind: 'own-end' };
    return undefined;
  }
  return name === table ? { kind: 'deleted', object: l.slice(0, 200) } : undefined;
}

/** The lines we read are short; a longer one (a misprinting nft) is dropped, not buffered. */
const MAX_LINE = 4096;

/** Splits a stream into lines without ever holding more than MAX_LINE characters of one. */
export class LineSplitter {
  readonly #onLine: (line: string) => void;
  #partial = '';
  #skipping = false;

  constructor(onLine: (line: string) => void) {
    this.#onLine = onLine;
  }

  push(chunk: string): void {
    let start = 0;
    for (let nl = chunk.indexOf('\n'); nl !== -1; nl = chunk.indexOf('\n', start)) {
      const piece = chunk.slice(start, nl);
      start = nl + 1;
      const line = this.#partial + piece;
      this.#partial = '';
      if (this.#skipping) this.#skipping = false;
      else if (line.length <= MAX_LINE) this.#onLine(line);
    }
    if (this.#skipping) return;
    this.#partial += chunk.slice(start);
    if (this.#partial.length > MAX_LINE) {
      this.#partial = '';
      this.#skipping = true;
    }
  }
}

/** Pure: follows the markers; returns the deletions that are someone else's. */
export class ForeignFilter {
  #inOwn = false;
  foreign(e: MonitorEvent | undefined): Foreign | undefined {
    if (e === undefined) return undefined;
    switch (e.kind) {
      case 'own-begin':
        this.#inOwn = true;
        return undefined;
      case 'own-end':
        this.#inOwn = false;
        return undefined;
      case 'deleted':
        return this.#inOwn ? undefined : e;
      case 'lost':
        // The end marker may be among what was lost: count what follows as foreign.
        this.#inOwn = false;
        return e;
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
  /** Someone else deleted rules of our table (maybe the table), or notifications may have been missed. */
  readonly onForeignChange: (detail: string) => void;
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
  #burst: { first: string; count: number } | undefined;

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

  #seen(e: Foreign | undefined): void {
    if (e === undefined) return;
    if (e.kind === 'lost') {
      this.#d.onForeignChange('nft monitor lost notifications (socket buffer full): checking the table');
      return;
    }
    if (this.#burst === undefined) {
      this.#burst = { first: e.object, count: 0 };
      // The lines of one transaction arrive together: report them once.
      setImmediate(() => this.#report());
    }
    this.#burst.count++;
  }

  #report(): void {
    const b = this.#burst;
    this.#burst = undefined;
    if (b === undefined || this.#stopped) return;
    // Whether the table is gone too, the check finds out (listing a missing table is cheap).
    this.#d.onForeignChange(`${b.count} rule(s) deleted by another process, first: ${b.first}`);
  }

  async #run(): Promise<void> {
    const t = this.#d.target;
    const args = ['monitor', 'destroy', 'rules'];
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
    const filter = new ForeignFilter();
    const lines = new LineSplitter((l) => this.#seen(filter.foreign(parseMonitorLine(l, t.table))));
    sub.stdout.setEncoding('utf8').on('data', (d: string) => lines.push(d));
    const r = await sub;
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
      this.#d.onForeignChange('nft monitor restarted: changes may have been missed');
      this.start();
    }, delay);
    this.#restartTimer.unref();
  }
}
