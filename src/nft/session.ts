// A long-lived `nft -i` for small transactions. Starting nft for each one
// costs a fork of the agent (its page tables: ~5 ms at 100 MiB, ~9 at 280)
// and, when the transaction deletes anything (every marked transaction
// does), ~12 ms more at nft's exit: closing its netlink socket waits for the
// kernel's deferred release of the deleted objects (an RCU grace period).
// One nft kept running pays neither: a small transaction costs it ~1.4 ms
// into an empty table and ~3 ms into the agent's (1k and 100k pods alike:
// after every commit nft fetches the table's sets, chains and interval
// maps' elements again, ~1.6 ms; the markers ~0.5 ms; docs/benchmarks.md
// "Fewer full collections"). Each line nft -i reads is one transaction, all
// or nothing, like `nft -f`; runScript sends `include "<private file>"`
// (the whole script, read with nft's buffered reader) rather than the script
// as one line, which nft -i reads a byte at a time and, if the agent died
// mid-write, would commit cut short at its end of input. Big scripts go
// through `nft -f -` (exec.ts) all the same.
//
// Protocol: the transaction's line, then a line that is not nft syntax (the
// sync token). nft answers the token with a syntax error that quotes it, so
// whatever nft wrote to stderr before that is the transaction's own output.
import { execa } from 'execa';
import { randomBytes } from 'node:crypto';
import { runNft, type NftResult, type NftTarget } from './exec.ts';
import { oneLine } from './one-line.ts';
import { removePrivateFile, writePrivateFile } from './private-file.ts';

type Subprocess = ReturnType<typeof execa>;

interface Pending {
  readonly token: string;
  readonly lines: string[];
  chars: number;
  readonly done: (r: NftResult) => void;
  readonly timer: NodeJS.Timeout;
}

export interface SessionOptions {
  /** A transaction that takes longer fails, and the session is restarted. */
  readonly timeoutMs?: number;
  /** nft -i keeps every line in its history: a new nft after this many transactions… */
  readonly maxTransactions?: number;
  /** …or this many characters sent. */
  readonly maxChars?: number;
  /** Told when an nft -i starts or ends (for the log). */
  readonly onEvent?: (e: {
    readonly kind: 'started' | 'exited' | 'unusable';
    readonly pid?: number;
    readonly detail?: string;
  }) => void;
}

const KEEP_CHARS = 4096; // of a failed transaction's stderr
const KEEP_LINE = 400;

function errorText(lines: readonly string[]): string {
  return lines
    .map((l) => (l.length > KEEP_LINE ? `${l.slice(0, KEEP_LINE)}…` : l))
    .join('\n')
    .trim();
}

export class NftSession {
  readonly #target: NftTarget;
  readonly #o: Required<Omit<SessionOptions, 'onEvent'>> & Pick<SessionOptions, 'onEvent'>;
  readonly #prefix = `nft-netpol-sync-${randomBytes(4).toString('hex')}-`;
  #sub: Subprocess | undefined;
  #pending: Pending | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  #seq = 0;
  #transactions = 0;
  #chars = 0;
  #partial = '';
  #skipCaret = false;
  #answered = false; // by the current nft
  #everAnswered = false;
  #unusable: string | undefined;

  constructor(target: NftTarget, opts?: SessionOptions) {
    this.#target = target;
    this.#o = {
      timeoutMs: opts?.timeoutMs ?? 120_000,
      maxTransactions: opts?.maxTransactions ?? 2000,
      maxChars: opts?.maxChars ?? 8 << 20,
      onEvent: opts?.onEvent,
    };
  }

  /** Runs one transaction: `line` must be one line (oneLine() makes one). Never throws. */
  run(line: string): Promise<NftResult> {
    const r = this.#queue.then(() => this.#run(line));
    this.#queue = r.catch(() => undefined);
    return r;
  }

  /**
   * Why the session is not used: its first nft ended or hung before it ever
   * answered (an nft built without its interactive CLI, say). runScript()
   * then sends everything to `nft -f`.
   */
  get unusable(): string | undefined {
    return this.#unusable;
  }

  /** Ends nft (its stdin closes); a later run() starts another. */
  close(): void {
    this.#stop();
  }

  #run(line: string): Promise<NftResult> {
    if (this.#unusable !== undefined)
      return Promise.resolve({ ok: false, error: `nft session unusable: ${this.#unusable}`, exitCode: undefined });
    if (line.includes('\n') || line.includes('\r'))
      return Promise.resolve({ ok: false, error: 'nft session: a transaction must be one line', exitCode: undefined });
    if (this.#transactions >= this.#o.maxTransactions || this.#chars >= this.#o.maxChars) this.#stop();
    const sub = this.#sub ?? this.#start();
    if (sub === undefined)
      return Promise.resolve({ ok: false, error: 'nft session: could not start nft -i', exitCode: undefined });
    this.#transactions++;
    this.#chars += line.length;
    const token = `${this.#prefix}${++this.#seq}`;
    return new Promise<NftResult>((resolve) => {
      const timer = setTimeout(() => {
        // A hung nft is killed; the next transaction starts another.
        this.#sub = undefined;
        sub.kill('SIGKILL');
        this.#neverAnswered(`no answer within ${this.#o.timeoutMs} ms`, sub.pid);
        this.#finish({ ok: false, error: `timed out after ${this.#o.timeoutMs} ms`, exitCode: undefined });
      }, this.#o.timeoutMs);
      this.#pending = { token, lines: [], chars: 0, done: resolve, timer };
      this.#ref(true);
      sub.stdin?.write(`${line}\n${token}\n`);
    });
  }

  #start(): Subprocess | undefined {
    const nft = this.#target.nftPath ?? 'nft';
    const [file, args] =
      this.#target.netns === undefined ? [nft, ['-i']] : ['ip', ['netns', 'exec', this.#target.netns, nft, '-i']];
    let sub: Subprocess;
    try {
      // HOME elsewhere: nft -i would read and write its history file there.
      sub = execa(file, args, {
        stdin: 'pipe',
        stdout: 'ignore',
        stderr: 'pipe',
        buffer: false,
        reject: false,
        env: { HOME: '/dev/null' },
      });
    } catch {
      return undefined;
    }
    this.#sub = sub;
    this.#answered = false;
    this.#transactions = 0;
    this.#chars = 0;
    this.#partial = '';
    this.#skipCaret = false;
    sub.stderr?.setEncoding('utf8');
    // A replaced nft's late output (the caret line under its last token) is not the new one's.
    sub.stderr?.on('data', (chunk: string) => {
      if (this.#sub === sub) this.#onStderr(chunk);
    });
    // A write to an nft that is gone: the exit below fails the transaction.
    sub.stdin?.on('error', () => {});
    void sub.then(
      (r) => this.#onExit(sub, `exit code ${String(r.exitCode ?? r.signal ?? 'unknown')}`),
      (e: unknown) => this.#onExit(sub, e instanceof Error ? e.message : String(e)),
    );
    this.#o.onEvent?.({ kind: 'started', ...(sub.pid === undefined ? {} : { pid: sub.pid }) });
    return sub;
  }

  #onStderr(chunk: string): void {
    let text = this.#partial + chunk;
    let nl = text.indexOf('\n');
    while (nl >= 0) {
      this.#onLine(text.slice(0, nl));
      text = text.slice(nl + 1);
      nl = text.indexOf('\n');
    }
    // A line is never longer than what we sent; keep a bounded tail only.
    this.#partial = text.length > 1 << 20 ? text.slice(-KEEP_LINE) : text;
  }

  #onLine(line: string): void {
    if (this.#skipCaret) {
      this.#skipCaret = false;
      if (/^\s*\^+\s*$/.test(line)) return;
    }
    const p = this.#pending;
    if (p === undefined) return; // the tail of an earlier answer
    if (line === p.token) {
      // The line before is the token's own "Error: syntax error…".
      const own = p.lines.at(-1);
      if (own?.startsWith('Error:') === true) p.lines.pop();
      this.#skipCaret = true;
      this.#answered = this.#everAnswered = true;
      const lines = p.lines.filter((l) => l.trim() !== '');
      this.#finish(lines.length === 0 ? { ok: true } : { ok: false, error: errorText(lines), exitCode: 1 });
      return;
    }
    // Where the script came from (our private file, gone by now) is no part of the error.
    if (line.startsWith('In file included from ')) return;
    if (p.chars < KEEP_CHARS) {
      p.lines.push(line);
      p.chars += Math.min(line.length, KEEP_LINE);
    }
  }

  #finish(r: NftResult): void {
    const p = this.#pending;
    if (p === undefined) return;
    this.#pending = undefined;
    clearTimeout(p.timer);
    this.#ref(false);
    p.done(r);
  }

  #onExit(sub: Subprocess, detail: string): void {
    if (this.#sub !== sub) return;
    this.#sub = undefined;
    this.#o.onEvent?.({ kind: 'exited', ...(sub.pid === undefined ? {} : { pid: sub.pid }), detail });
    const p = this.#pending;
    this.#neverAnswered(p === undefined || p.lines.length === 0 ? detail : `${detail}: ${errorText(p.lines)}`, sub.pid);
    if (p !== undefined)
      this.#finish({
        ok: false,
        error: `nft -i ended (${detail})${p.lines.length === 0 ? '' : `: ${errorText(p.lines)}`}`,
        exitCode: undefined,
      });
  }

  #neverAnswered(detail: string, pid: number | undefined): void {
    if (this.#answered || this.#everAnswered || this.#unusable !== undefined) return;
    this.#unusable = detail;
    this.#o.onEvent?.({ kind: 'unusable', ...(pid === undefined ? {} : { pid }), detail });
  }

  #stop(): void {
    const sub = this.#sub;
    if (sub === undefined) return;
    this.#sub = undefined;
    if (this.#pending !== undefined) sub.kill('SIGKILL');
    else sub.stdin?.end();
    this.#o.onEvent?.({ kind: 'exited', ...(sub.pid === undefined ? {} : { pid: sub.pid }), detail: 'stopped' });
    const p = this.#pending;
    if (p !== undefined) this.#finish({ ok: false, error: 'nft -i stopped', exitCode: undefined });
  }

  // An idle nft must not keep the agent's process (or a test) alive.
  #ref(on: boolean): void {
    const sub = this.#sub;
    if (sub === undefined) return;
    for (const h of [sub, sub.stdin, sub.stderr] as const) {
      const handle = h as unknown as { ref?: () => void; unref?: () => void } | null;
      if (on) handle?.ref?.();
      else handle?.unref?.();
    }
  }
}

/**
 * Up to this size a transaction goes to the session: nft -i reads a byte at
 * a time (~1-2 us each here), so beyond a few KiB starting `nft -f -` costs less.
 */
export const SESSION_MAX_CHARS = 16 * 1024;

/**
 * A script through the session when it is small and has a one-line form, else
 * `nft -f -`. The session reads it from a private file (`include`): a short
 * line on nft's stdin, so a transaction is never cut by the agent's death
 * (nft/private-file.ts), and ~2x faster than nft -i's byte-at-a-time read of
 * the line (4.6 KiB: 2.2-2.6 against 5 ms). Without a private file, the line.
 */
export async function runScript(session: NftSession | undefined, script: string, target: NftTarget): Promise<NftResult> {
  const usable = session !== undefined && session.unusable === undefined;
  const line = usable && script.length <= SESSION_MAX_CHARS ? oneLine(script) : undefined;
  if (line === undefined) return runNft(script, target);
  const path = writePrivateFile('tx', script, true);
  const include = path === undefined ? undefined : `include "${path}"`;
  let r: NftResult;
  try {
    r = await session!.run(include ?? line);
  } finally {
    if (path !== undefined) removePrivateFile(path);
  }
  // Its nft never answered (so never ran it): this once, and from now on, nft -f.
  return !r.ok && session!.unusable !== undefined ? runNft(script, target) : r;
}
