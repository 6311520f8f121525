// `nft-netpol-agent denied`: the denied connections the agent on this node
// saw (its /debug/denied endpoint on loopback), once or followed (-f). Meant
// for `kubectl exec -n nft-netpol-system ds/nft-netpol-agent -- nft-netpol-agent denied -f`.
// Exit codes: 0 ok, 1 the agent cannot be reached or answered an error, 2 usage.
import { parseArgs } from 'node:util';
import { parseDuration } from '../agent/config.ts';
import { debugEndpointBase } from './debug-endpoint.ts';
import { formatDocument, parseFormat } from './output.ts';

export const DENIED_HELP = `Usage: nft-netpol-agent denied [--staged] [--pod NS/NAME] [--namespace NS] [--direction D] [--since 5m] [-f]

Show the connection attempts the agent on this node denied, most recent first,
with the pods on both sides and the policy reason. Identical attempts are one
entry with a count. Needs the agent to run with --log-denied.

  --staged               instead: the new connections whose verdict staged policies
                         (annotated nft-netpol.io/staged: "true") would change,
                         "would deny" (connected) or "would allow" (denied), with
                         the staged policy, its rule and the reason
  --pod NS/NAME          only denials to or from this pod
  --namespace NS         only denials to or from pods of this namespace
  --direction D          ingress or egress
  --since D              only denials seen in the last D (30s, 5m, 1h; default all kept)
  -f, --follow           keep printing new denials (and new repeats) until interrupted
  -o, --output FORMAT    text (default), json or yaml (with -f: one JSON object per
                         line, or one YAML document per entry)
  --addr H:P             the agent's debug endpoint (env DEBUG_ADDR; default 127.0.0.1:9743)
  --interval D           how often -f asks the agent (default 2s)
  -h, --help             show this help`;

interface EntryJson {
  readonly key: string;
  readonly direction: string;
  readonly src: string;
  readonly srcIP: string;
  readonly dst: string;
  readonly dstIP: string;
  readonly protocol: string;
  readonly port: number | null;
  readonly count: number;
  readonly firstSeen: string;
  readonly lastSeen: string;
  readonly reason: string;
  /** Staged entries only. */
  readonly change?: string;
}

interface DeniedJson {
  readonly logDenied: boolean;
  readonly entries: readonly EntryJson[];
  readonly error?: string;
}

export interface DeniedIo {
  out(s: string): void;
  err(s: string): void;
  /** Resolves when -f should stop (SIGINT/SIGTERM); tests pass their own. */
  readonly stopped?: Promise<void>;
}

function side(name: string, ip: string): string {
  return name === ip ? ip : `${name} (${ip})`;
}

export function formatEntry(e: EntryJson): string {
  const port = e.port === null ? e.protocol : `${e.port}/${e.protocol}`;
  const times = e.count > 1 ? ` x${e.count} (first ${e.firstSeen})` : '';
  const change = e.change === undefined ? '' : `${e.change.replace('-', ' ')} `;
  return `${e.lastSeen} ${change}${e.direction.padEnd(7)} ${side(e.src, e.srcIP)} -> ${side(e.dst, e.dstIP)} ${port}${times}\n    ${e.reason}`;
}

export async function deniedCommand(argv: string[], io: DeniedIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let v;
  try {
    v = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        pod: { type: 'string' },
        namespace: { type: 'string' },
        direction: { type: 'string' },
        since: { type: 'string' },
        staged: { type: 'boolean', default: false },
        follow: { type: 'boolean', short: 'f', default: false },
        output: { type: 'string', short: 'o', default: 'text' },
        addr: { type: 'string' },
        interval: { type: 'string', default: '2s' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values;
  } catch (e) {
    return usage(io, e instanceof Error ? e.message : String(e));
  }
  if (v.help) {
    io.out(DENIED_HELP);
    return 0;
  }
  const endpoint = debugEndpointBase(v.addr, env);
  if ('error' in endpoint) return usage(io, endpoint.error);
  const format = parseFormat(v.output);
  if (format === undefined) return usage(io, `--output must be text, json or yaml, not "${v.output}"`);
  if (v.since !== undefined && parseDuration(v.since) === undefined)
    return usage(io, `--since must be a duration like 30s, 5m or 1h, not "${v.since}"`);
  const interval = parseDuration(v.interval);
  if (interval === undefined || interval < 100) return usage(io, `--interval must be a duration of at least 100ms`);
  if (v.direction !== undefined && v.direction !== 'ingress' && v.direction !== 'egress')
    return usage(io, `--direction must be ingress or egress, not "${v.direction}"`);

  const base = `${endpoint.base}/debug/denied`;
  const query = (since: string | undefined): string => {
    const q = new URLSearchParams();
    if (v.pod !== undefined) q.set('pod', v.pod);
    if (v.namespace !== undefined) q.set('namespace', v.namespace);
    if (v.direction !== undefined) q.set('direction', v.direction);
    if (since !== undefined) q.set('since', since);
    if (v.staged) q.set('staged', '1');
    q.set('format', 'json');
    return `${base}?${q.toString()}`;
  };
  const fetchOnce = async (since: string | undefined): Promise<DeniedJson | string> => {
    try {
      const res = await fetch(query(since), { signal: AbortSignal.timeout(10_000) });
      const body = (await res.json()) as DeniedJson;
      if (!res.ok) return body.error ?? `HTTP ${res.status}`;
      return body;
    } catch (e) {
      return `cannot reach the agent's debug endpoint at ${base}: ${e instanceof Error ? e.message : String(e)}`;
    }
  };
  const print = (e: EntryJson): void =>
    io.out(format === 'json' ? JSON.stringify(e) : format === 'yaml' ? `---\n${formatDocument('yaml', e)}` : formatEntry(e));

  const first = await fetchOnce(v.since);
  if (typeof first === 'string') {
    io.err(`error: ${first}`);
    // Scripts get a document with the error in the shape of every command's.
    if (format !== 'text') io.out(formatDocument(format, { errors: [{ object: base, path: '', message: first }] }));
    return 1;
  }
  if (!first.logDenied) io.err('note: the agent runs without --log-denied (LOG_DENIED=true): no denied connections are recorded');
  if (!v.follow) {
    if (format !== 'text') io.out(formatDocument(format, first.entries));
    else if (first.entries.length === 0)
      io.out(v.staged ? 'no connection whose verdict a staged policy would change matches' : 'no denied connections match');
    else for (const e of first.entries) print(e);
    return 0;
  }
  // Follow: oldest first, then whatever is new or counted again since.
  const printed = new Map<string, number>();
  for (const e of [...first.entries].reverse()) {
    print(e);
    printed.set(e.key, e.count);
  }
  let stop = false;
  const stopped = io.stopped ?? new Promise<void>(() => {});
  void stopped.then(() => (stop = true));
  while (!stop) {
    await Promise.race([new Promise((r) => setTimeout(r, interval)), stopped]);
    if (stop) break;
    const next = await fetchOnce(`${Math.ceil(interval / 1000) + 60}s`);
    if (typeof next === 'string') {
      io.err(`error: ${next}`);
      continue; // the agent may be restarting: keep following
    }
    for (const e of [...next.entries].reverse()) {
      if (printed.get(e.key) === e.count) continue;
      print(e);
      printed.set(e.key, e.count);
    }
    // Bounded like the agent's ring: forget what the agent forgot.
    if (printed.size > 10_000) for (const k of [...printed.keys()].slice(0, printed.size - 10_000)) printed.delete(k);
  }
  return 0;
}

function usage(io: DeniedIo, message: string): number {
  io.err(`usage error: ${message}\n(see 'nft-netpol-agent denied --help')`);
  return 2;
}
