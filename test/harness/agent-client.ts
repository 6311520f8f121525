// The harness side of pod-agent.ts: starts one agent inside a namespace and
// sends it JSON-line requests.
import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { trackPid, untrackPid } from './netns.ts';

export const AGENT_SCRIPT = fileURLToPath(new URL('./pod-agent.ts', import.meta.url));

export interface AgentProbe {
  readonly proto: 'TCP' | 'UDP' | 'SCTP';
  readonly host: string;
  readonly port: number;
  readonly timeoutMs: number;
  /** Source address to bind (node probes use the node's own address). */
  readonly localAddress?: string;
  /** Source port: SCTP probes are recognised by it at the destination. */
  readonly sport?: number;
}

export interface AgentProbeResult {
  readonly ok: boolean;
  readonly detail: string;
}

export interface SctpSeen {
  readonly src: string;
  readonly sport: number;
  readonly dport: number;
}

type Pending = { resolve: (v: Record<string, unknown>) => void; reject: (e: Error) => void };

export class Agent {
  readonly netns: string;
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #pending = new Map<number, Pending>();
  #seq = 0;
  #stderr = '';
  #exited: string | undefined;

  private constructor(netns: string, child: ChildProcessWithoutNullStreams) {
    this.netns = netns;
    this.#child = child;
    child.stderr.on('data', (d: Buffer) => (this.#stderr = (this.#stderr + d.toString()).slice(-4000)));
    createInterface({ input: child.stdout }).on('line', (line) => this.#onLine(line));
    child.on('exit', (code, signal) => {
      this.#exited = `agent in ${netns} exited (${signal ?? code}): ${this.#stderr.trim()}`;
      if (child.pid !== undefined) untrackPid(child.pid);
      for (const p of this.#pending.values()) p.reject(new Error(this.#exited));
      this.#pending.clear();
    });
    this.#setRef(false);
  }

  /** An idle agent must never keep the test process alive; a pending request must. */
  #setRef(on: boolean): void {
    const handles = [this.#child, this.#child.stdin, this.#child.stdout, this.#child.stderr] as unknown as {
      ref?: () => void;
      unref?: () => void;
    }[];
    for (const h of handles) (on ? h.ref : h.unref)?.call(h);
  }

  /** Starts the agent inside `netns` and waits until it answers. */
  static async start(netns: string): Promise<Agent> {
    const child = spawn('ip', ['netns', 'exec', netns, process.execPath, '--no-warnings', AGENT_SCRIPT], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    if (child.pid !== undefined) trackPid(child.pid);
    const agent = new Agent(netns, child);
    await agent.request('hello');
    return agent;
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  #onLine(line: string): void {
    let msg: { id: number; ok: boolean; error?: string };
    try {
      msg = JSON.parse(line) as typeof msg;
    } catch {
      return;
    }
    const p = this.#pending.get(msg.id);
    if (p === undefined) return;
    this.#pending.delete(msg.id);
    if (this.#pending.size === 0) this.#setRef(false);
    if (msg.ok) p.resolve(msg as unknown as Record<string, unknown>);
    else p.reject(new Error(`agent in ${this.netns}: ${msg.error ?? 'failed'}`));
  }

  request(op: string, body: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    if (this.#exited !== undefined) return Promise.reject(new Error(this.#exited));
    const id = ++this.#seq;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#setRef(true);
      this.#child.stdin.write(`${JSON.stringify({ id, op, ...body })}\n`);
    });
  }

  /** `udpAddresses`: bind UDP to these addresses instead of the wildcard (namespaces with several addresses per family). */
  async serve(tcp: readonly number[], udp: readonly number[], udpAddresses?: readonly string[]): Promise<void> {
    await this.request('serve', { tcp, udp, ...(udpAddresses === undefined ? {} : { udpAddresses }) });
  }

  async probe(probes: readonly AgentProbe[]): Promise<AgentProbeResult[]> {
    if (probes.length === 0) return [];
    const r = await this.request('probe', { probes });
    return r.results as AgentProbeResult[];
  }

  async installSctpCounter(): Promise<void> {
    await this.request('sctpTable');
  }

  /** SCTP packets that reached this namespace since the last call (the record is then cleared). */
  async sctpSeen(): Promise<SctpSeen[]> {
    const r = await this.request('sctpSeen');
    return r.seen as SctpSeen[];
  }

  stop(): void {
    if (this.#exited !== undefined) return;
    this.#child.stdin.end();
    this.#child.kill('SIGKILL');
  }
}
