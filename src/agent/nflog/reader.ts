// Reads the deny path's NFLOG group through a child process:
// `tcpdump -i nflog:N -U -w -` (Debian package tcpdump; libpcap reads
// nfnetlink_log, which plain Node cannot open without a native addon) and
// parses its pcap stream (agent/nflog/pcap.ts). The child runs with
// an argument array, no shell. If it dies it is restarted with backoff and
// counted. A flood cannot grow memory: packets wait in a bounded queue and
// the ones that do not fit are dropped and counted; if the agent falls
// behind, tcpdump blocks on the pipe and the kernel drops log copies (never
// the datapath: NFLOG is asynchronous, the packet's verdict does not wait).
import { spawn, type ChildProcess } from 'node:child_process';
import { PcapNflogParser, type LoggedPacket } from './pcap.ts';

export interface NflogReaderOptions {
  readonly group: number;
  readonly netns: string | undefined;
  /** tcpdump binary (default tcpdump on PATH). */
  readonly tcpdumpPath?: string;
  /** Packets waiting for the consumer; beyond this they are dropped and counted. */
  readonly queueLimit?: number;
  /** Packets handed to the consumer per event-loop turn. */
  readonly batch?: number;
  readonly onPacket: (p: LoggedPacket) => void;
  readonly onDropped: (reason: 'queue' | 'malformed', n: number) => void;
  /** The reader exited (unless stopped) and will be restarted in `restartInMs`. */
  readonly onExit: (detail: string, restartInMs: number) => void;
  readonly onStart: (pid: number | undefined) => void;
}

const MIN_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 30_000;
// A reader that ran this long was healthy: its next restart starts from the minimum again.
const HEALTHY_MS = 60_000;
export function tcpdumpCommand(group: number, netns: string | undefined, tcpdumpPath = 'tcpdump'): [string, string[]] {
  // -U: write each packet at once. tcpdump opens the NFLOG socket as root,
  // then drops to its own unprivileged user (Debian's `tcpdump`) before it
  // reads a packet: that needs CAP_SETUID and CAP_SETGID (see
  // daemonset/log-denied/). No -s: libpcap sizes its netlink receive buffer
  // from the snapshot length, and a small one cuts a batch of several log
  // messages short (garbled records, lost packets); the rule's `snaplen`
  // already keeps each message small.
  const args = ['-i', `nflog:${group}`, '-U', '-w', '-', '--immediate-mode', '-q'];
  return netns === undefined ? [tcpdumpPath, args] : ['ip', ['netns', 'exec', netns, tcpdumpPath, ...args]];
}

export class NflogReader {
  readonly #o: NflogReaderOptions;
  readonly #queue: LoggedPacket[] = [];
  #child: ChildProcess | undefined;
  #stopped = false;
  #backoff = MIN_BACKOFF_MS;
  #timer: NodeJS.Timeout | undefined;
  #draining = false;
  restarts = 0;
  received = 0;

  constructor(o: NflogReaderOptions) {
    this.#o = o;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  get running(): boolean {
    return this.#child !== undefined;
  }

  get queued(): number {
    return this.#queue.length;
  }

  start(): void {
    if (this.#stopped || this.#child !== undefined) return;
    const [file, args] = tcpdumpCommand(this.#o.group, this.#o.netns, this.#o.tcpdumpPath);
    const startedAt = Date.now();
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    const parser = new PcapNflogParser();
    let stderr = '';
    let malformed = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      for (const p of parser.push(chunk)) this.#enqueue(p);
      if (parser.malformed > malformed) {
        this.#o.onDropped('malformed', parser.malformed - malformed);
        malformed = parser.malformed;
      }
      // A stream we cannot read: restart the reader rather than guess.
      if (parser.error !== undefined && child.exitCode === null) {
        stderr += `\n${parser.error}`;
        child.kill('SIGKILL');
      }
    });
    // Keep only the tail: tcpdump's chatter must not grow memory either.
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-2000)));
    child.on('error', (e) => (stderr = `${stderr}\n${e.message}`.slice(-2000)));
    child.once('close', (code, signal) => {
      if (this.#child === child) this.#child = undefined;
      if (this.#stopped) return;
      this.restarts++;
      if (Date.now() - startedAt >= HEALTHY_MS) this.#backoff = MIN_BACKOFF_MS;
      const wait = this.#backoff;
      this.#backoff = Math.min(MAX_BACKOFF_MS, this.#backoff * 2);
      const how = signal !== null ? `killed by ${signal}` : `exited with code ${code ?? '?'}`;
      const lines = stderr
        .trim()
        .split('\n')
        .filter((l) => l !== '' && !/^(tcpdump: listening on|\d+ packets)/.test(l));
      const hint = /Couldn't change to/.test(stderr)
        ? ' (tcpdump drops to its own user after opening the group: the container needs the SETUID and SETGID capabilities, see the kustomize component daemonset/log-denied/)'
        : '';
      this.#o.onExit(`${how}${lines.length === 0 ? '' : `: ${lines.slice(-3).join(' | ')}`}${hint}`, wait);
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.start();
      }, wait);
    });
    this.#o.onStart(child.pid);
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#child?.kill('SIGTERM');
    this.#child = undefined;
    this.#queue.length = 0;
  }

  #enqueue(p: LoggedPacket): void {
    this.received++;
    if (this.#queue.length >= (this.#o.queueLimit ?? 4096)) {
      this.#o.onDropped('queue', 1);
      return;
    }
    this.#queue.push(p);
    if (!this.#draining) {
      this.#draining = true;
      setImmediate(() => this.#drain());
    }
  }

  // Hands packets over in batches, yielding between them so that a burst
  // never holds the event loop (and with it the reconciler) for long.
  #drain(): void {
    const n = Math.min(this.#queue.length, this.#o.batch ?? 256);
    const batch = this.#queue.splice(0, n);
    for (const p of batch) this.#o.onPacket(p);
    if (this.#queue.length > 0) setImmediate(() => this.#drain());
    else this.#draining = false;
  }
}
