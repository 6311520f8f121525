// Follows the kernel's change notifications (`nft monitor`, a child process)
// so that a table someone else flushed, deleted or edited is repaired at once
// instead of at the next periodic drift check (which stays as the backstop).
// nft prints each transaction's changes, then `# new generation N by process
// PID (COMM)`. Our own transactions are recognized by the pid of the nft we
// ran; where pids cannot be matched (a container in its own PID namespace:
// the kernel reports host pids), a transaction that ends while one of ours is
// in flight or just finished is taken as ours unless it leaves our table
// deleted (the agent never deletes its table). What is taken as foreign asks
// for a kernel check; the check decides whether it is drift.
import { createInterface } from 'node:readline';
import { execa } from 'execa';
import type { Logger } from 'pino';

/** One transaction as `nft monitor` printed it, as far as our table is concerned. */
export interface MonitoredTransaction {
  readonly generation: number | undefined;
  readonly pid: number | undefined;
  readonly comm: string | undefined;
  /** It changed something in our table. */
  readonly touched: boolean;
  /** Our table does not exist after it. */
  readonly removed: boolean;
}

const TRAILER = /^# new generation (\d+)(?: by process (\d+) \((.*)\))?/;

/** Pure: groups `nft monitor` lines into transactions about `table` (family inet). */
export class MonitorParser {
  readonly #table: string;
  #touched = false;
  #removed = false;

  constructor(table: string) {
    this.#table = table;
  }

  /** Feeds one line; returns the transaction it ends, if any. */
  line(l: string): MonitoredTransaction | undefined {
    if (l.startsWith('#')) {
      const m = TRAILER.exec(l);
      if (m === null) return undefined;
      const tx: MonitoredTransaction = {
        generation: Number(m[1]),
        pid: m[2] === undefined ? undefined : Number(m[2]),
        comm: m[3],
        touched: this.#touched,
        removed: this.#removed,
      };
      this.#touched = this.#removed = false;
      return tx;
    }
    // "VERB OBJECT inet TABLE ...": add table / delete chain / add element ...
    const [verb, object, family, name] = l.split(' ', 4);
    if (family !== 'inet' || name !== this.#table) return undefined;
    this.#touched = true;
    if (object === 'table') this.#removed = verb === 'delete';
    return undefined;
  }
}

/** The agent's own nft transactions, as the dataplane runs them. */
export interface OwnTransactions {
  /** Was this pid one of our nft processes (recently)? */
  isOwn(pid: number): boolean;
  /** One of ours is in flight or ended within the last moment. */
  busy(): boolean;
}

export interface MonitorTarget {
  readonly table: string;
  readonly nftPath: string;
  readonly netns: string | undefined;
}

export interface TableMonitorDeps {
  readonly target: MonitorTarget;
  readonly own: OwnTransactions;
  readonly log: Logger;
  /** Someone else changed our table (`removed`: it is deleted now), or notifications may have been missed. */
  readonly onForeignChange: (detail: string, removed: boolean) => void;
  /** The monitor process ended unexpectedly and is restarted. */
  readonly onRestart: () => void;
}

/** Is this transaction someone else's change of our table? */
export function isForeign(tx: MonitoredTransaction, own: OwnTransactions): boolean {
  if (!tx.touched) return false;
  if (tx.pid !== undefined && own.isOwn(tx.pid)) return false;
  // The agent never leaves its table deleted: whoever did, it was not us.
  if (tx.removed) return true;
  return !own.busy();
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

  async #run(): Promise<void> {
    const t = this.#d.target;
    const args = ['monitor'];
    const [file, argv] = t.netns === undefined ? [t.nftPath, args] : ['ip', ['netns', 'exec', t.netns, t.nftPath, ...args]];
    const ac = new AbortController();
    this.#abort = ac;
    const started = performance.now();
    const parser = new MonitorParser(t.table);
    const sub = execa(file, argv, {
      reject: false,
      buffer: { stdout: false, stderr: true },
      stdin: 'ignore',
      cancelSignal: ac.signal,
    });
    const lines = createInterface({ input: sub.stdout, crlfDelay: Infinity });
    lines.on('line', (l) => {
      const tx = parser.line(l);
      if (tx === undefined || !isForeign(tx, this.#d.own)) return;
      const by = tx.pid === undefined ? 'an unknown process' : `process ${tx.pid} (${tx.comm ?? '?'})`;
      this.#d.onForeignChange(
        `${tx.removed ? 'table deleted' : 'table changed'} by ${by}, generation ${tx.generation ?? '?'}`,
        tx.removed,
      );
    });
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
