// Runs `nft-netpol-agent run` as a real child process for the process tests:
// JSON log lines collected, listener ports read from the log, /metrics
// scraped, and the process always killed by the test's cleanup.
import { nftWrapperScript } from '../support/nft-wrapper.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import type { FakeApiServer } from '../support/fake-apiserver.ts';
import { trackPid, untrackPid } from '../harness/netns.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MAIN = join(ROOT, 'src/cli/main.ts');

export interface AgentStart {
  readonly node: string;
  readonly netns: string;
  readonly kubeconfig?: string;
  readonly fromDir?: string;
  readonly nft?: string;
  readonly args?: readonly string[];
  /** The CLI entry point (default src/cli/main.ts; benchmarks pass a compiled main.js). */
  readonly entry?: string;
  readonly env?: Readonly<Record<string, string>>;
  /** Node/V8 flags before the entry point (those NODE_OPTIONS refuses, e.g. --trace-gc). */
  readonly nodeArgs?: readonly string[];
}

export type LogLine = Record<string, unknown>;

export class AgentProcess {
  readonly child: ChildProcess;
  readonly lines: LogLine[] = [];
  stderr = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  #buf = '';

  private constructor(child: ChildProcess) {
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    child.stdout?.setEncoding('utf8').on('data', (d: string) => {
      this.#buf += d;
      let i;
      while ((i = this.#buf.indexOf('\n')) >= 0) {
        const line = this.#buf.slice(0, i);
        this.#buf = this.#buf.slice(i + 1);
        try {
          this.lines.push(JSON.parse(line) as LogLine);
        } catch {
          this.lines.push({ raw: line, receivedAt: new Date().toISOString() });
        }
      }
    });
    child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      this.stderr += d;
    });
  }

  static start(o: AgentStart): AgentProcess {
    const args = [
      ...(o.nodeArgs ?? []),
      o.entry ?? MAIN,
      'run',
      '--node',
      o.node,
      '--netns',
      o.netns,
      '--metrics-addr',
      '127.0.0.1:0',
      '--debug-addr',
      '127.0.0.1:0',
      '--debounce',
      '10ms',
      '--log-level',
      'debug',
      ...(o.fromDir === undefined ? [] : ['--from-dir', o.fromDir]),
      ...(o.nft === undefined ? [] : ['--nft', o.nft]),
      ...(o.args ?? []),
    ];
    const env: NodeJS.ProcessEnv = { ...process.env, KUBECONFIG: o.kubeconfig ?? '/nonexistent', NODE_NAME: '', ...o.env };
    const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    if (child.pid !== undefined) trackPid(child.pid);
    return new AgentProcess(child);
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Log text for failure messages. */
  tail(n = 40): string {
    return [...this.lines.slice(-n).map((l) => JSON.stringify(l)), this.stderr].join('\n');
  }

  async waitForLog(what: string, pred: (l: LogLine) => boolean, timeoutMs = 20_000): Promise<LogLine> {
    let found: LogLine | undefined;
    await eventually(
      what,
      () => {
        found = this.lines.find(pred);
        if (found === undefined && !this.alive()) throw new Error(`agent exited while waiting for ${what}:\n${this.tail()}`);
        return found !== undefined;
      },
      timeoutMs,
    );
    return found as LogLine;
  }

  #ports: { metrics: number; debug: number } | undefined;

  async ports(): Promise<{ metrics: number; debug: number }> {
    if (this.#ports !== undefined) return this.#ports;
    await this.waitForLog('both listeners', () => this.lines.filter((l) => l['event'] === 'listen').length >= 2);
    const addrs = this.lines.filter((l) => l['event'] === 'listen').map((l) => Number(String(l['addr']).split(':').pop()));
    this.#ports = { metrics: addrs[0] ?? 0, debug: addrs[1] ?? 0 };
    return this.#ports;
  }

  async get(path: string, listener: 'metrics' | 'debug' = 'debug'): Promise<{ status: number; body: string }> {
    const p = await this.ports();
    const res = await fetch(`http://127.0.0.1:${p[listener]}${path}`, { signal: AbortSignal.timeout(10_000) });
    return { status: res.status, body: await res.text() };
  }

  /** One sample of /metrics (counters' _total name as given); 0 when absent. */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
    const { body } = await this.get('/metrics', 'metrics');
    return metricFrom(body, name, labels);
  }

  async waitReady(timeoutMs = 20_000): Promise<void> {
    await eventually(
      'agent /readyz',
      async () => {
        if (!this.alive()) throw new Error(`agent exited:\n${this.tail()}`);
        return (await this.get('/readyz').catch(() => ({ status: 0 }))).status === 200;
      },
      timeoutMs,
    );
  }

  kill(signal: NodeJS.Signals): void {
    if (this.alive()) this.child.kill(signal);
  }

  /**
   * SIGTERM and wait for the exit (the agent stops its children, e.g. the
   * --log-denied reader, which SIGKILL would orphan); SIGKILL after timeoutMs.
   */
  async terminate(timeoutMs = 15_000): Promise<void> {
    this.kill('SIGTERM');
    const t = setTimeout(() => this.kill('SIGKILL'), timeoutMs);
    await this.exited;
    clearTimeout(t);
    untrackPid(this.pid);
  }

  /** SIGKILL if still running; waits for the exit. */
  async stop(): Promise<void> {
    this.kill('SIGKILL');
    await this.exited;
    untrackPid(this.pid);
  }
}

export function metricFrom(body: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of body.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$/.exec(line);
    if (m === null || m[1] !== name) continue;
    const got: Record<string, string> = {};
    for (const kv of (m[3] ?? '').matchAll(/(\w+)="([^"]*)"/g)) got[kv[1] ?? ''] = kv[2] ?? '';
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[4]);
  }
  return 0;
}

/** Polls until `cond` holds (every 50 ms); throws after timeoutMs naming `what`. */
export async function eventually(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      if (await cond()) return;
      last = undefined;
    } catch (e) {
      if (e instanceof Error && e.message.startsWith('agent exited')) throw e;
      last = e;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last === undefined ? '' : `: ${String(last)}`}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** `nft list table inet TABLE` inside a namespace; undefined when absent. */
export async function listTableIn(netns: string, table = 'nft-netpol'): Promise<string | undefined> {
  const r = await execa('ip', ['netns', 'exec', netns, 'nft', 'list', 'table', 'inet', table], { reject: false });
  return r.exitCode === 0 ? r.stdout : undefined;
}

export async function nftIn(netns: string, args: readonly string[], input?: string): Promise<void> {
  await execa('ip', ['netns', 'exec', netns, 'nft', ...args], input === undefined ? {} : { input });
}

export interface Scratch {
  readonly dir: string;
  readonly kubeconfig: string;
  /**
   * An nft wrapper: fails transactions while `fail` exists, sleeps before them
   * while `slow` exists (writing its pid to `sleeping`), both for `nft -f` and
   * for each line of the agent's long-lived `nft -i`; while `nocli` exists an
   * `nft -i` fails at once, as an nft built without its interactive CLI.
   */
  readonly nft: string;
  flag(name: 'fail' | 'slow' | 'nocli', on: boolean): Promise<void>;
  cleanup(): Promise<void>;
}

export async function scratch(api: FakeApiServer | undefined): Promise<Scratch> {
  const dir = await mkdtemp(join(tmpdir(), 'nftnp-agent-'));
  const kubeconfig = join(dir, 'kubeconfig');
  if (api !== undefined) await writeFile(kubeconfig, api.kubeConfig().exportConfig());
  const nft = join(dir, 'nft-wrapper');
  await writeFile(
    nft,
    nftWrapperScript({
      fail: join(dir, 'fail'),
      slow: { flag: join(dir, 'slow'), sleeping: join(dir, 'sleeping') },
      nocli: join(dir, 'nocli'),
      message: 'Error: injected failure (test wrapper)',
    }),
  );
  await chmod(nft, 0o755);
  return {
    dir,
    kubeconfig,
    nft,
    async flag(name, on) {
      if (on) await writeFile(join(dir, name), '');
      else await rm(join(dir, name), { force: true });
    },
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}
