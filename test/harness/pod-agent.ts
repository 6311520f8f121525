// One long-lived process per simulated pod (or node, or outside host), started
// inside its network namespace. It serves TCP and UDP ports and probes other
// endpoints, speaking JSON lines on stdin/stdout, so a whole probe matrix costs
// one message per source instead of one process per probe. It exits when its
// stdin closes, i.e. when the harness goes away for any reason.
//
// Requests:  {"id":1,"op":"serve","tcp":[80],"udp":[80]}
//            {"id":2,"op":"probe","probes":[{"proto":"TCP","host":"10.96.0.10","port":80,"timeoutMs":400}]}
//            {"id":3,"op":"sctpTable"} / {"id":4,"op":"sctpSeen"}
// Responses: {"id":1,"ok":true,...} or {"id":1,"ok":false,"error":"..."}
import { spawn, execFile } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { AgentProbe } from './agent-client.ts';

type ProbeReq = AgentProbe;

interface ProbeRes {
  readonly ok: boolean;
  /** connected | sent | timeout | an errno code */
  readonly detail: string;
}

const servers: (net.Server | dgram.Socket)[] = [];
const serving = { tcp: new Set<number>(), udp: new Set<number>() };

function reply(msg: object): void {
  process.stdout.write(`${JSON.stringify(msg)}\n`);
}

function listenTCP(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer((sock) => {
      sock.on('error', () => {});
      sock.end();
    });
    srv.once('error', reject);
    srv.listen({ port, host: '::', ipv6Only: false }, () => {
      servers.push(srv);
      resolve();
    });
  });
}

function listenUDP(port: number, address = '::'): Promise<void> {
  return new Promise((resolve, reject) => {
    const sock = dgram.createSocket(address.includes(':') ? { type: 'udp6', ipv6Only: address !== '::' } : { type: 'udp4' });
    sock.once('error', reject);
    // Echo: the prober recognises its own payload.
    sock.on('message', (msg, rinfo) => sock.send(msg, rinfo.port, rinfo.address));
    sock.bind(port, address, () => {
      sock.removeListener('error', reject);
      sock.on('error', () => {});
      servers.push(sock);
      resolve();
    });
  });
}

/**
 * UDP servers bound to the wildcard answer from the address routing picks for
 * the client, which on a namespace with several addresses (a node: InternalIP
 * and bridge gateway) is not the one the client sent to, and the client's
 * connected socket ignores the answer. `udpAddresses` binds one socket per
 * address instead.
 */
async function serve(tcp: readonly number[], udp: readonly number[], udpAddresses: readonly string[] | undefined): Promise<void> {
  for (const p of tcp) {
    if (serving.tcp.has(p)) continue;
    await listenTCP(p);
    serving.tcp.add(p);
  }
  for (const p of udp) {
    if (serving.udp.has(p)) continue;
    for (const a of udpAddresses ?? ['::']) await listenUDP(p, a);
    serving.udp.add(p);
  }
}

function probeTCP(r: ProbeReq): Promise<ProbeRes> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (res: ProbeRes) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(res);
    };
    const sock = net.connect({
      host: r.host,
      port: r.port,
      ...(r.localAddress === undefined ? {} : { localAddress: r.localAddress }),
    });
    const timer = setTimeout(() => finish({ ok: false, detail: 'timeout' }), r.timeoutMs);
    sock.once('connect', () => finish({ ok: true, detail: 'connected' }));
    sock.once('error', (e: NodeJS.ErrnoException) => finish({ ok: false, detail: e.code ?? e.message }));
  });
}

// Each UDP probe uses its own source port so that it is a new conntrack flow:
// a flow allowed in an earlier step must never make a later probe pass.
let nextUdpPort = 42000;
function udpSourcePort(): number {
  nextUdpPort = nextUdpPort >= 49999 ? 42000 : nextUdpPort + 1;
  return nextUdpPort;
}

let probeSeq = 0;
function probeUDP(r: ProbeReq, attempt = 0): Promise<ProbeRes> {
  return new Promise((resolve) => {
    const v6 = r.host.includes(':');
    const sock = dgram.createSocket(v6 ? 'udp6' : 'udp4');
    const payload = Buffer.from(`probe ${process.pid} ${++probeSeq}`);
    let done = false;
    const finish = (res: ProbeRes | 'retry') => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      try {
        sock.close();
      } catch {
        // not bound yet
      }
      resolve(res === 'retry' ? probeUDP(r, attempt + 1) : res);
    };
    const timer = setTimeout(() => finish({ ok: false, detail: 'timeout' }), r.timeoutMs);
    sock.on('error', (e: NodeJS.ErrnoException) =>
      finish(e.code === 'EADDRINUSE' && attempt < 20 ? 'retry' : { ok: false, detail: e.code ?? e.message }),
    );
    sock.on('message', (msg) => {
      if (msg.equals(payload)) finish({ ok: true, detail: 'connected' });
    });
    sock.bind({ port: r.sport ?? udpSourcePort(), ...(r.localAddress === undefined ? {} : { address: r.localAddress }) }, () => {
      sock.connect(r.port, r.host, () => sock.send(payload));
    });
  });
}

// ---- SCTP: crafted INITs from a python raw-socket helper, counted at the receiver's input hook ----

const here = fileURLToPath(new URL('.', import.meta.url));
let sctpHelper: ChildProcessWithoutNullStreams | undefined;
const sctpPending = new Map<number, (res: ProbeRes) => void>();
let sctpSeq = 0;

function sctpSender(): ChildProcessWithoutNullStreams {
  if (sctpHelper !== undefined) return sctpHelper;
  const child = spawn(process.env.HARNESS_PYTHON ?? 'python3', [`${here}sctp-send.py`], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-2000)));
  createInterface({ input: child.stdout }).on('line', (line) => {
    const m = JSON.parse(line) as { id: number; ok: boolean; error?: string };
    const done = sctpPending.get(m.id);
    sctpPending.delete(m.id);
    done?.(m.ok ? { ok: true, detail: 'sent' } : { ok: false, detail: m.error ?? 'send failed' });
  });
  child.on('exit', (code) => {
    sctpHelper = undefined;
    for (const done of sctpPending.values()) done({ ok: false, detail: `sctp helper exited ${code}: ${err.trim()}` });
    sctpPending.clear();
  });
  sctpHelper = child;
  return child;
}

function probeSCTP(r: ProbeReq): Promise<ProbeRes> {
  if (r.sport === undefined) return Promise.resolve({ ok: false, detail: 'SCTP probes need a source port' });
  const id = ++sctpSeq;
  return new Promise((resolve) => {
    sctpPending.set(id, resolve);
    sctpSender().stdin.write(`${JSON.stringify({ id, dst: r.host, dport: r.port, sport: r.sport })}\n`);
  });
}

/** Records every SCTP packet that reaches this namespace's input hook: source address, source port, destination port. */
const SCTP_TABLE = `table inet harness-sctp {
  set seen4 { type ipv4_addr . inet_service . inet_service; flags dynamic,timeout; timeout 10m; size 262144; }
  set seen6 { type ipv6_addr . inet_service . inet_service; flags dynamic,timeout; timeout 10m; size 262144; }
  chain input {
    type filter hook input priority 0; policy accept;
    meta nfproto ipv4 meta l4proto sctp counter add @seen4 { ip saddr . sctp sport . sctp dport }
    meta nfproto ipv6 meta l4proto sctp counter add @seen6 { ip6 saddr . sctp sport . sctp dport }
  }
}
`;

function nft(args: readonly string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile('nft', [...args], { maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err !== null) reject(new Error(`nft ${args.join(' ')}: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
    child.stdin?.on('error', () => {}); // nft may exit before reading: the exit status tells
    if (input === undefined) child.stdin?.end();
    else child.stdin?.end(input);
  });
}

interface NftSetJSON {
  nftables: { set?: { name: string; elem?: unknown[] } }[];
}

/** Elements are `{concat: [addr, sport, dport]}`, wrapped in `{elem: {val: ...}}` when they carry a timeout. */
function parseSeen(json: string): { src: string; sport: number; dport: number }[] {
  const out: { src: string; sport: number; dport: number }[] = [];
  for (const item of (JSON.parse(json) as NftSetJSON).nftables) {
    for (const e of item.set?.elem ?? []) {
      const val = (e as { elem?: { val: unknown } }).elem?.val ?? e;
      const c = (val as { concat?: unknown[] }).concat;
      if (c === undefined || c.length !== 3) continue;
      out.push({ src: String(c[0]), sport: Number(c[1]), dport: Number(c[2]) });
    }
  }
  return out;
}

async function sctpSeen(): Promise<{ src: string; sport: number; dport: number }[]> {
  const seen = [
    ...parseSeen(await nft(['-j', 'list', 'set', 'inet', 'harness-sctp', 'seen4'])),
    ...parseSeen(await nft(['-j', 'list', 'set', 'inet', 'harness-sctp', 'seen6'])),
  ];
  // The harness reads only after a batch settled, and every probe has its own source port: flushing cannot lose a pending probe.
  await nft(['flush', 'set', 'inet', 'harness-sctp', 'seen4']);
  await nft(['flush', 'set', 'inet', 'harness-sctp', 'seen6']);
  return seen;
}

function probe(r: ProbeReq): Promise<ProbeRes> {
  if (r.proto === 'TCP') return probeTCP(r);
  if (r.proto === 'UDP') return probeUDP(r);
  return probeSCTP(r);
}

interface Request {
  readonly id: number;
  readonly op: string;
  readonly tcp?: number[];
  readonly udp?: number[];
  readonly udpAddresses?: string[];
  readonly probes?: ProbeReq[];
}

async function handle(req: Request): Promise<object> {
  switch (req.op) {
    case 'hello':
      return { pid: process.pid };
    case 'serve':
      await serve(req.tcp ?? [], req.udp ?? [], req.udpAddresses);
      return { tcp: [...serving.tcp], udp: [...serving.udp] };
    case 'probe':
      return { results: await Promise.all((req.probes ?? []).map(probe)) };
    case 'sctpTable':
      await nft(['-f', '-'], SCTP_TABLE);
      return {};
    case 'sctpSeen':
      return { seen: await sctpSeen() };
    default:
      throw new Error(`unknown op ${req.op}`);
  }
}

createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() === '') return;
  let req: Request;
  try {
    req = JSON.parse(line) as Request;
  } catch {
    reply({ id: null, ok: false, error: `bad JSON: ${line.slice(0, 200)}` });
    return;
  }
  handle(req).then(
    (res) => reply({ id: req.id, ok: true, ...res }),
    (e: unknown) => reply({ id: req.id, ok: false, error: e instanceof Error ? e.message : String(e) }),
  );
});
process.stdin.on('end', () => process.exit(0));
