// Benchmark: the per-packet cost of the node's ruleset, with real packets.
// A node namespace routes between a client pod and a server pod (the
// harness's routed style: every packet crosses the node's forward hook). For
// 1, 10, 100 and 1000 policies selecting the server (the one allowing the
// client sorts last), and the same with the client isolated for egress by as
// many policies (again the allowing one last), it measures
//   allowed  new TCP connections per second, client -> server:8080
//            (connect, then RST: SYN, SYN-ACK, ACK, RST; only the SYN is `new`)
//   denied   SYNs per second to server:9090, which nothing allows, that the
//            node drops (raw SYNs, each a new conntrack entry)
// each against the same traffic through a forward hook holding only
// `ct state established,related accept` (for denied: plus one rule dropping
// port 9090, the cheapest possible drop), and prints ratios, which compare
// across machines. Runs alternate ruleset and baseline so that load from
// elsewhere hits both alike; figures are medians. Prints figures, asserts
// nothing. Root, ip, nft, conntrack and python3 are needed.
//
//   node scripts/bench-datapath.ts                       everything (a few minutes)
//   node scripts/bench-datapath.ts --policies 1,1000 --runs 5 --conns 20000
//   node scripts/bench-datapath.ts --updates             also bench-update.ts at 100k pods
//   node scripts/bench-datapath.ts --candidate FILE.ts   a module exporting render(state, node): string
//                                                        measured instead of the project's renderer
import { execa } from 'execa';
import type { ResultPromise } from 'execa';
import { cpus } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { ClusterState, Pod } from '../src/model/types.ts';
import { runNft } from '../src/nft/exec.ts';
import { renderNode } from '../test/support/render-node.ts';
import { Cluster } from '../test/harness/cluster.ts';
import { runIn } from '../test/harness/netns.ts';
import { node, pod, podPeer, policy, port, rule, sel, state } from '../test/support/state-builder.ts';

const TABLE = 'nft-netpol';
const ALLOWED_PORT = 8080;
const DENIED_PORT = 9090;
/** Allowed like ALLOWED_PORT, served by nobody. */
const SYN_ALLOWED_PORT = 8081;
const NS = 'bench';
const here = new URL('.', import.meta.url).pathname;

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/** Filler peers: each selector matches two pods elsewhere, so every peer set has elements. */
function fillerPods(n: number): Pod[] {
  const pods: Pod[] = [];
  for (let i = 0; i < n; i++)
    for (const k of [0, 1])
      pods.push(
        pod(NS, `peer-${i}-${k}`, {
          labels: { app: `peer-${i}` },
          node: 'node-2',
          ips: [`10.250.${i >> 7}.${((i & 127) << 1) + k}`],
        }),
      );
  return pods;
}

/**
 * `n` policies select the server for ingress (p-0000 ... allow filler peers on
 * TCP 8080, zz-client allows the client); with `egress`, `n` more select the
 * client for egress the same way (zz-server allows the server).
 */
export function benchState(n: number, egress: boolean, client: string, server: string): ClusterState {
  const tcp = [port('TCP', ALLOWED_PORT), port('TCP', SYN_ALLOWED_PORT)];
  const ingress = Array.from({ length: n }, (_, i) =>
    i === n - 1
      ? policy(NS, 'zz-client', { podSelector: sel({ app: 'server' }), ingress: [rule([podPeer(sel({ app: 'client' }))], tcp)] })
      : policy(NS, `p-${String(i).padStart(4, '0')}`, {
          podSelector: sel({ app: 'server' }),
          ingress: [rule([podPeer(sel({ app: `peer-${i}` }))], tcp)],
        }),
  );
  const egressPolicies = egress
    ? Array.from({ length: n }, (_, i) =>
        i === n - 1
          ? policy(NS, 'zz-server', {
              podSelector: sel({ app: 'client' }),
              types: { ingress: false, egress: true },
              egress: [rule([podPeer(sel({ app: 'server' }))], tcp)],
            })
          : policy(NS, `q-${String(i).padStart(4, '0')}`, {
              podSelector: sel({ app: 'client' }),
              types: { ingress: false, egress: true },
              egress: [rule([podPeer(sel({ app: `peer-${i}` }))], tcp)],
            }),
      )
    : [];
  return state({
    pods: [
      pod(NS, 'client', { labels: { app: 'client' }, ips: [client] }),
      pod(NS, 'server', { labels: { app: 'server' }, ips: [server] }),
      ...fillerPods(n),
    ],
    policies: [...ingress, ...egressPolicies],
    nodes: [node('node-1'), node('node-2')],
  });
}

function baseline(drop: boolean): string {
  return [
    `table inet ${TABLE} {}`,
    `delete table inet ${TABLE}`,
    `table inet ${TABLE} {`,
    '\tchain forward {',
    '\t\ttype filter hook forward priority filter; policy accept;',
    '\t\tct state established,related accept',
    ...(drop ? [`\t\tmeta l4proto tcp th dport ${DENIED_PORT} counter drop`] : []),
    '\t}',
    '}',
    '',
  ].join('\n');
}

type Renderer = (s: ClusterState, nodeName: string) => string;

interface Bench {
  readonly cluster: Cluster;
  readonly router: string;
  readonly client: { netns: string; ip: string };
  readonly server: { netns: string; ip: string };
}

async function load(netns: string, text: string): Promise<void> {
  const r = await runNft(text, { netns });
  if (!r.ok) throw new Error(`nft -f: ${r.error.slice(0, 500)}`);
}

async function flushConntrack(b: Bench): Promise<void> {
  await runIn(b.router, 'conntrack', ['-F'], { reject: false });
}

/** New connections per second (one run). */
async function connRate(b: Bench, conns: number, concurrency: number): Promise<number> {
  await flushConntrack(b);
  const r = await runIn(b.client.netns, process.execPath, [
    `${here}datapath/load.ts`,
    'connect',
    b.server.ip,
    String(ALLOWED_PORT),
    String(conns),
    String(concurrency),
  ]);
  const out = JSON.parse(r.stdout) as { count: number; errors: number; ms: number };
  if (out.errors > 0) throw new Error(`${out.errors} of ${out.count} connections failed: the path is not allowed`);
  return (out.count / out.ms) * 1000;
}

/** Sum of the drop counters of our table. */
async function dropped(b: Bench): Promise<number> {
  const r = await runIn(b.router, 'nft', ['list', 'table', 'inet', TABLE]);
  let sum = 0;
  for (const m of r.stdout.matchAll(/counter packets (\d+) bytes \d+ (?:drop|reject)/g)) sum += Number(m[1]);
  return sum;
}

/**
 * SYNs per second (one run): to the denied port, those the node drops; to the
 * allowed port (where nothing listens: the server answers RST, a reply), those
 * it forwards, i.e. all sent when none was dropped.
 */
async function synRate(b: Bench, seconds: number, allowed: boolean): Promise<number> {
  await flushConntrack(b);
  const before = await dropped(b);
  const r = await runIn(b.client.netns, 'python3', [
    `${here}datapath/syn.py`,
    b.client.ip,
    b.server.ip,
    String(allowed ? SYN_ALLOWED_PORT : DENIED_PORT),
    String(seconds),
  ]);
  const [sent = 0, secs = 1] = r.stdout.trim().split(' ').map(Number);
  const n = (await dropped(b)) - before;
  if (allowed && n > 0) throw new Error(`${n} SYNs to the allowed port were dropped`);
  if (!allowed && n < sent * 0.99) throw new Error(`${sent - n} of ${sent} SYNs to the denied port were not dropped`);
  return sent / secs;
}

interface Opts {
  readonly runs: number;
  readonly conns: number;
  readonly concurrency: number;
  readonly seconds: number;
}

/** Alternating runs of `text` and the baseline; medians and their ratio. */
async function compare(b: Bench, text: string, o: Opts): Promise<{ conns: number[]; syns: number[]; denied: number[] }> {
  const a = { rules: [] as number[], base: [] as number[] };
  const s = { rules: [] as number[], base: [] as number[] };
  const d = { rules: [] as number[], base: [] as number[] };
  for (let i = 0; i < o.runs; i++) {
    await load(b.router, baseline(true));
    a.base.push(await connRate(b, o.conns, o.concurrency));
    s.base.push(await synRate(b, o.seconds, true));
    d.base.push(await synRate(b, o.seconds, false));
    await load(b.router, text);
    a.rules.push(await connRate(b, o.conns, o.concurrency));
    s.rules.push(await synRate(b, o.seconds, true));
    d.rules.push(await synRate(b, o.seconds, false));
  }
  const row = (x: { rules: number[]; base: number[] }): number[] => [
    median(x.rules),
    median(x.base),
    median(x.rules) / median(x.base),
  ];
  return { conns: row(a), syns: row(s), denied: row(d) };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      policies: { type: 'string' },
      runs: { type: 'string' },
      conns: { type: 'string' },
      concurrency: { type: 'string' },
      seconds: { type: 'string' },
      candidate: { type: 'string' },
      'no-egress': { type: 'boolean' },
      updates: { type: 'boolean' },
    },
  });
  const counts = (values.policies ?? '1,10,100,1000').split(',').map(Number);
  const o: Opts = {
    runs: Number(values.runs ?? 3),
    conns: Number(values.conns ?? 10_000),
    concurrency: Number(values.concurrency ?? 32),
    seconds: Number(values.seconds ?? 1.5),
  };
  let render: Renderer = (s, n) => renderNode(s, n, { denyAction: 'drop' }).text;
  if (values.candidate !== undefined) {
    const mod = (await import(pathToFileURL(resolve(values.candidate)).href)) as { render: Renderer };
    render = mod.render;
  }

  const cluster = await Cluster.create({
    style: 'routed',
    nodes: [{ name: 'node-1' }, { name: 'node-2' }],
    pods: [
      { key: `${NS}/client`, node: 'node-1' },
      { key: `${NS}/server`, node: 'node-1' },
    ],
    nodeAgents: false,
  });
  let server: ResultPromise | undefined;
  try {
    const c = cluster.pod(`${NS}/client`);
    const s = cluster.pod(`${NS}/server`);
    const b: Bench = {
      cluster,
      router: cluster.node('node-1').netns,
      client: { netns: c.netns, ip: c.ips.v4 },
      server: { netns: s.netns, ip: s.ips.v4 },
    };
    server = execa('ip', ['netns', 'exec', s.netns, process.execPath, `${here}datapath/load.ts`, 'serve', String(ALLOWED_PORT)]);
    server.catch(() => undefined); // killed at the end
    await new Promise<void>((ok) => server?.stdout?.once('data', () => ok()));

    console.log(
      `node ${process.version}, ${cpus().length} x ${cpus()[0]?.model ?? '?'}, ${new Date().toISOString().slice(0, 16)}Z` +
        `; ${values.candidate ?? 'project renderer'}`,
    );
    console.log(
      `conns: new TCP connections/s (${o.conns} per run, ${o.concurrency} at a time); allowed SYN: SYNs/s forwarded to an allowed port; ` +
        `denied SYN: SYNs/s dropped (${o.seconds} s per run); medians of ${o.runs} runs alternating with the baseline`,
    );
    const rows: string[][] = [
      ['policies', 'egress too', 'conns /s', 'base', 'ratio', 'allowed SYN/s', 'base', 'ratio', 'denied SYN/s', 'base', 'ratio'],
    ];
    for (const egress of values['no-egress'] === true ? [false] : [false, true]) {
      for (const n of counts) {
        const text = render(benchState(n, egress, b.client.ip, b.server.ip), 'node-1');
        const r = await compare(b, text, o);
        const row = [String(n), egress ? 'yes' : 'no'];
        for (const x of [r.conns, r.syns, r.denied]) row.push(x[0]!.toFixed(0), x[1]!.toFixed(0), x[2]!.toFixed(2));
        rows.push(row);
        console.log(row.join('  '));
      }
    }
    const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
    console.log('');
    for (const r of rows) console.log(`| ${r.map((x, i) => x.padStart(widths[i] ?? 0)).join(' | ')} |`);
  } finally {
    server?.kill();
    await cluster.destroy();
  }
  if (values.updates === true) {
    console.log('\nOne element update and one policy change at 100k pods (scripts/bench-update.ts):');
    await execa(process.execPath, [`${here}bench-update.ts`], { stdio: 'inherit' });
  }
}

await main();
