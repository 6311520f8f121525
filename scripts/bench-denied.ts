// Benchmark: what denied-traffic visibility costs. Prints figures; asserts nothing.
//
//   node scripts/bench-denied.ts                 (as root)
//   node scripts/bench-denied.ts --seconds 5 [--counters-only]
//
// 1. Allowed connections with --log-denied on and off: a real agent in the
//    node namespace of a simulated one-node cluster (test/harness), a client
//    pod opening and closing TCP connections to an allowed server pod as fast
//    as one Python process can, for N seconds; connections per second, and
//    the ratio on/off (the log rule sits behind every policy chain's accept,
//    so allowed packets never reach it).
// 2. The agent's CPU while a flood of denied UDP packets (distinct ports:
//    each a new denial) hits the in-kernel rate limit, against the same agent
//    idle; packets the kernel logged vs denied; RSS before and after.
// 3. Reading the deny counters: `nft -t -j list table` (what the agent runs
//    per scrape) vs the full `nft list table`, on the busiest node (110 local
//    pods) of a generated cluster of 1k and of 100k pods, applied in a
//    scratch namespace. (--counters-only: just this part.)
import { execa } from 'execa';
import { readFileSync } from 'node:fs';
import { compileNode } from '../src/compile/compile.ts';
import { renderRuleset } from '../src/nft/render.ts';
import { runNft } from '../src/nft/exec.ts';
import { denyCountersFromJson } from '../src/agent/denied/counters.ts';
import { Cluster } from '../test/harness/cluster.ts';
import { runIn } from '../test/harness/netns.ts';
import { FakeApiServer, namespace, networkPolicy, pod, type KubeObject } from '../test/support/fake-apiserver.ts';
import { AgentProcess, eventually, scratch } from '../test/agent/agent-process.ts';
import { busiestNode } from './bench-render.ts';
import { generateCluster } from './gen-cluster.ts';
import { scriptArgs } from './script-args.ts';

const { values } = scriptArgs(import.meta.url, {
  options: {
    seconds: { type: 'string', default: '5' },
    'counters-only': { type: 'boolean', default: false },
  },
});
const SECONDS = Number(values.seconds);
const ROUNDS = 3;
const ms = (t0: bigint): number => Number(process.hrtime.bigint() - t0) / 1e6;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/** utime + stime of a process in seconds (clock ticks of 100 Hz). */
function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(rest[11]) + Number(rest[12])) / 100;
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0) / 1024;
}

const CONNECT = (host: string, seconds: number) => `
import socket, time
end = time.time() + ${seconds}
n = 0
while time.time() < end:
    s = socket.create_connection(('${host}', 80), timeout=2)
    s.close()
    n += 1
print(n)
`;

const FLOOD = (host: string, seconds: number) => `
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end = time.time() + ${seconds}
n = 0
while time.time() < end:
    for i in range(1000):
        s.sendto(b'x', ('${host}', 1000 + (n + i) % 50000))
    n += 1000
print(n)
`;

async function agentBench(): Promise<void> {
  const spec = {
    style: 'routed' as const,
    // Two nodes as in the datapath tests (the pods both on node-1).
    nodes: [{ name: 'node-1' }, { name: 'node-2' }],
    pods: [
      { key: 'shop/db', node: 'node-1' },
      { key: 'shop/web', node: 'node-1' },
    ],
  };
  // Under heavy load the harness's IPv6 setup of a node sometimes races (the
  // address not yet usable as a route source): one more try.
  const c = await Cluster.create(spec).catch(async (e: unknown) => {
    console.log(`cluster setup failed once (${String(e).split('\n')[0]}); retrying`);
    return Cluster.create(spec);
  });
  const api = await FakeApiServer.start();
  const s = await scratch(api);
  const agents: AgentProcess[] = [];
  try {
    const obj = (key: string, labels: Record<string, string>): KubeObject => {
      const p = c.pod(key);
      return pod(p.namespace, p.name, labels, p.node, p.ips.v4, { ips: [p.ips.v4, p.ips.v6] });
    };
    api.create('namespaces', namespace('shop'));
    for (const n of c.nodeObjects()) api.create('nodes', structuredClone(n) as KubeObject);
    api.create('pods', obj('shop/db', { app: 'db' }));
    api.create('pods', obj('shop/web', { app: 'web' }));
    api.create(
      'networkpolicies',
      networkPolicy('shop', 'db-from-web', {
        podSelector: { matchLabels: { app: 'db' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 80 }] }],
      }),
    );
    const db = c.pod('shop/db');
    const web = c.pod('shop/web');
    const node = c.nodes.find((n) => n.name === 'node-1');
    if (node === undefined) throw new Error('no node');
    const rates: Record<string, number[]> = { off: [], on: [] };
    let loggedDuringAllowed = 0;
    for (let round = 1; round <= ROUNDS; round++) {
      for (const mode of ['off', 'on'] as const) {
        const a = AgentProcess.start({
          node: 'node-1',
          netns: node.netns,
          kubeconfig: s.kubeconfig,
          args: mode === 'on' ? ['--log-denied', '--log-level', 'info'] : ['--log-level', 'info'],
        });
        agents.push(a);
        await a.waitReady(30_000);
        await eventually('ruleset', async () => (await a.get('/debug/ruleset')).body.includes('KUBE-POD-FW') === true);
        const r = await runIn(web.netns, 'python3', ['-c', CONNECT(db.ips.v4, SECONDS)]);
        rates[mode]?.push(Number(r.stdout.trim()) / SECONDS);
        if (mode === 'on') loggedDuringAllowed += await a.metric('nftnp_denied_log_packets_total');
        if (mode === 'on' && round === ROUNDS) {
          // Flood against the rate limit: CPU of this agent, idle vs flooded.
          const pid = a.pid;
          const idle0 = cpuSeconds(pid);
          await new Promise((res) => setTimeout(res, SECONDS * 1000));
          const idle = cpuSeconds(pid) - idle0;
          const rss0 = rssMiB(pid);
          const logged0 = await a.metric('nftnp_denied_log_packets_total');
          const denied0 = await a.metric('nftnp_pod_denied_packets_total', {
            namespace: 'shop',
            pod: 'db',
            direction: 'ingress',
          });
          const cpu0 = cpuSeconds(pid);
          const f = await runIn(web.netns, 'python3', ['-c', FLOOD(db.ips.v4, SECONDS)]);
          await new Promise((res) => setTimeout(res, 1500)); // the last batch of log messages
          const cpu = cpuSeconds(pid) - cpu0;
          await new Promise((res) => setTimeout(res, 10_000)); // the agent reads the counters at most every 10 s
          const logged = (await a.metric('nftnp_denied_log_packets_total')) - logged0;
          const denied =
            (await a.metric('nftnp_pod_denied_packets_total', { namespace: 'shop', pod: 'db', direction: 'ingress' })) - denied0;
          const body = JSON.parse((await a.get('/debug/denied')).body) as { entries: unknown[]; capacity: number };
          const lines = a.lines.filter((l) => String(l['event']).startsWith('denied')).length;
          console.log(`\ndenied flood, ${SECONDS}s, rate limit 100/s burst 200 (defaults):`);
          console.log(`  packets sent ${f.stdout.trim()}, denied (kernel counter) ${denied}, logged to the agent ${logged}`);
          console.log(
            `  agent CPU: idle ${((idle / SECONDS) * 100).toFixed(1)}%, during the flood ${((cpu / (SECONDS + 1.5)) * 100).toFixed(1)}% of one core`,
          );
          console.log(
            `  agent RSS ${rss0.toFixed(0)} MiB before, ${rssMiB(pid).toFixed(0)} MiB after; ring ${body.entries.length}/${body.capacity} entries; ${lines} denial log lines in total`,
          );
        }
        await a.terminate(); // SIGTERM: the agent stops its tcpdump (SIGKILL would leave it bound to the group)
      }
    }
    const off = median(rates.off ?? []);
    const on = median(rates.on ?? []);
    console.log(`\nallowed TCP connections per second (one client, ${SECONDS}s, ${ROUNDS} runs each, alternating, median):`);
    console.log(`  --log-denied off ${off.toFixed(0)}/s, on ${on.toFixed(0)}/s, ratio on/off ${(on / off).toFixed(3)}`);
    console.log(`  runs: off ${JSON.stringify(rates.off?.map(Math.round))}, on ${JSON.stringify(rates.on?.map(Math.round))}`);
    console.log(`  packets of allowed connections that reached the denial log (all 'on' runs): ${loggedDuringAllowed}`);
  } finally {
    for (const a of agents) await a.stop();
    await c.destroy();
    await api.close();
    await s.cleanup();
  }
}

async function counterBench(pods: number, policies: number, namespaces: number): Promise<void> {
  const gen = generateCluster({ pods, policies, namespaces });
  const node = busiestNode(gen.state).node;
  const compiled = compileNode(gen.state, node, { logDenied: { group: 1742, ratePerSecond: 100, burst: 200 } });
  const netns = `nnpb-denied-${process.pid}`;
  await execa('ip', ['netns', 'add', netns]);
  try {
    const r = await runNft(renderRuleset(compiled), { netns });
    if (!r.ok) throw new Error(r.error);
    const time = async (args: string[]): Promise<{ ms: number; bytes: number }> => {
      const runs: number[] = [];
      let bytes = 0;
      for (let i = 0; i < 5; i++) {
        const t0 = process.hrtime.bigint();
        const out = await execa('ip', ['netns', 'exec', netns, 'nft', ...args], { stripFinalNewline: true });
        if (args.includes('-j')) denyCountersFromJson(out.stdout);
        runs.push(ms(t0));
        bytes = out.stdout.length;
      }
      return { ms: median(runs), bytes };
    };
    const terse = await time(['-t', '-j', 'list', 'table', 'inet', compiled.table]);
    const full = await time(['list', 'table', 'inet', compiled.table]);
    const podChains = compiled.chains.filter((c) => c.role === 'pod').length;
    console.log(
      `\ndeny counters, busiest node of ${gen.state.pods.length} pods / ${gen.state.policies.length} policies: ${compiled.stats.localPods} local pods, ${podChains} pod chains, ${compiled.stats.elements} set elements`,
    );
    console.log(`  nft -t -j list table + parse (per scrape): ${terse.ms.toFixed(1)} ms, ${(terse.bytes / 1024).toFixed(0)} KiB`);
    console.log(`  full nft list table (for comparison):      ${full.ms.toFixed(1)} ms, ${(full.bytes / 1024).toFixed(0)} KiB`);
  } finally {
    await execa('ip', ['netns', 'del', netns], { reject: false });
  }
}

console.log(`node ${process.version}; figures are slower on a shared machine`);
if (!values['counters-only']) await agentBench();
// 110 local pods (the busiest node) in a small and in a 100k-pod cluster.
await counterBench(1000, 100, 50);
await counterBench(100_000, 10_000, 5000);
