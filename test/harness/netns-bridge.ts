// Byte pipes between the test process and a network namespace, through Unix
// sockets (a Unix socket path is reachable from every network namespace, a
// TCP address only from its own). Run inside the namespace with
// `ip netns exec NS node netns-bridge.ts LISTEN=TARGET...`, each side
// `tcp:HOST:PORT` or `unix:PATH`:
//   tcp:172.18.0.11:8080=unix:/tmp/x/api.sock   a server of the test process, reached in the namespace
//   unix:/tmp/x/metrics.sock=tcp:127.0.0.1:9742 a server in the namespace, reached by the test process
// Prints `ready` once every listener is up; exits when its stdin closes.
// The harness side is NetnsBridge.start().
import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { rmSync } from 'node:fs';
import net from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { trackPid, untrackPid } from './netns.ts';

type Endpoint =
  { readonly kind: 'tcp'; readonly host: string; readonly port: number } | { readonly kind: 'unix'; readonly path: string };

export function parseEndpoint(text: string): Endpoint {
  if (text.startsWith('unix:')) return { kind: 'unix', path: text.slice(5) };
  const m = /^tcp:(.+):(\d+)$/.exec(text);
  if (m === null) throw new Error(`not tcp:HOST:PORT or unix:PATH: ${text}`);
  return { kind: 'tcp', host: m[1]!, port: Number(m[2]) };
}

const connectOpts = (e: Endpoint): net.NetConnectOpts => (e.kind === 'unix' ? { path: e.path } : { host: e.host, port: e.port });

function listen(from: Endpoint, to: Endpoint): Promise<net.Server> {
  const server = net.createServer((client) => {
    const upstream = net.connect(connectOpts(to));
    client.pipe(upstream).pipe(client);
    const close = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    if (from.kind === 'unix') {
      rmSync(from.path, { force: true });
      server.listen(from.path, () => resolve(server));
    } else server.listen(from.port, from.host, () => resolve(server));
  });
}

export const BRIDGE_SCRIPT = fileURLToPath(import.meta.url);

/** The harness side: one bridge process inside `netns`. */
export class NetnsBridge {
  readonly #child: ChildProcessWithoutNullStreams;

  private constructor(child: ChildProcessWithoutNullStreams) {
    this.#child = child;
  }

  static async start(netns: string, pipes: Readonly<Record<string, string>>): Promise<NetnsBridge> {
    const args = Object.entries(pipes).map(([from, to]) => `${from}=${to}`);
    const child = spawn('ip', ['netns', 'exec', netns, process.execPath, BRIDGE_SCRIPT, ...args], { stdio: 'pipe' });
    if (child.pid !== undefined) trackPid(child.pid);
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    await new Promise<void>((resolve, reject) => {
      const lines = createInterface({ input: child.stdout });
      lines.once('line', (l) => (l === 'ready' ? resolve() : reject(new Error(`netns bridge: ${l}`))));
      child.once('exit', (code) => reject(new Error(`netns bridge in ${netns} exited ${code}: ${stderr.trim()}`)));
    });
    return new NetnsBridge(child);
  }

  stop(): void {
    this.#child.stdin.end();
    this.#child.kill('SIGKILL');
    if (this.#child.pid !== undefined) untrackPid(this.#child.pid);
  }
}

if (import.meta.main) {
  const servers = await Promise.all(
    process.argv.slice(2).map((arg) => {
      const i = arg.indexOf('=');
      return listen(parseEndpoint(arg.slice(0, i)), parseEndpoint(arg.slice(i + 1)));
    }),
  );
  process.stdout.write('ready\n');
  process.stdin.resume();
  process.stdin.on('end', () => {
    for (const s of servers) s.close();
    process.exit(0);
  });
}
