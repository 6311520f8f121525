// Benchmark: what the per-rule/deny counters listing (`nft -t -j list table`,
// 0.3 s of nft CPU at 100k pods: nft 1.0.6 fetches every set element even
// for a terse listing) costs a small transaction that runs beside it, at the
// agent's priority and at COUNTERS_LISTING_NICE (src/agent/dataplane.ts).
// The first node of scripts/gen-cluster.ts's cluster (bench-agent.ts's) is
// loaded into a scratch network namespace; the transaction is one address
// into a pod peer map (a `jump` element: the kernel validates the table, as
// a local pod's or a policy's commit does), through a long-lived `nft -i` as
// the agent sends it. With --busy N, N busy loops stand for the rest of the
// node's work (the agent's compile, the API server here): the listing's
// priority only matters when the CPUs are contended. Conditions alternate
// in blocks (alone, nice 0, nice 19, rotated per round). Prints medians;
// asserts nothing. Root.
//
//   node scripts/bench-listing-beside.ts [--pods 100000] [--commits 20] [--rounds 4] [--busy 1]
import { execa } from 'execa';
import { fork, type ChildProcess } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { COUNTERS_LISTING_NICE, nftDataplane } from '../src/agent/dataplane.ts';
import { runNft } from '../src/nft/exec.ts';
import { NftSession } from '../src/nft/session.ts';
import { renderNode } from '../test/support/render-node.ts';
import { generateCluster } from './gen-cluster.ts';
import { scriptArgs } from './script-args.ts';

if (process.argv[2] === '--busy-child') {
  for (;;) Math.sqrt(Math.random());
}

const { values: args } = scriptArgs(import.meta.url, {
  options: {
    pods: { type: 'string', default: '100000' },
    commits: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '4' },
    busy: { type: 'string', default: '1' },
  },
});
const pods = Number(args.pods);
const commits = Number(args.commits);
const rounds = Number(args.rounds);
const busy = Number(args.busy);

const pct = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? 0;
};

const gen = generateCluster({ pods, policies: Math.round(pods / 10), namespaces: Math.round(pods / 20) });
const node = gen.nodes[0] ?? 'node-00000';
const text = renderNode(gen.state, node).text;
const chain = /\tmap ingress-peers-v4 \{[^}]*? : jump (KUBE-PEERS-[0-9a-f]{12}-IN)/.exec(text)?.[1];
if (chain === undefined) throw new Error(`node ${node}: no ingress-peers-v4 element`);

const ns = `nnp-lb-${process.pid}`;
await execa('ip', ['netns', 'add', ns]);
const children: ChildProcess[] = [];
try {
  const loaded = await runNft(text, { netns: ns });
  if (!loaded.ok) throw new Error(`loading the ruleset: ${loaded.error}`);
  const session = new NftSession({ nftPath: 'nft', netns: ns });
  let seq = 0;
  const commit = async (): Promise<number> => {
    const n = seq++;
    const addr = `10.254.${(n >> 8) & 255}.${n & 255}`;
    const t0 = performance.now();
    const r = await session.run(`add element inet nft-netpol ingress-peers-v4 { ${addr} : jump ${chain} }`);
    const ms = performance.now() - t0;
    if (!r.ok) throw new Error(r.error);
    const d = await session.run(`delete element inet nft-netpol ingress-peers-v4 { ${addr} }`);
    if (!d.ok) throw new Error(d.error);
    return ms;
  };
  for (let i = 0; i < 5; i++) await commit(); // the session started, caches warm
  for (let i = 0; i < busy; i++) children.push(fork(new URL(import.meta.url), ['--busy-child'], { stdio: 'ignore' }));

  type Cond = 'alone' | 'nice 0' | `nice ${number}`;
  const conds: Cond[] = ['alone', 'nice 0', `nice ${COUNTERS_LISTING_NICE}`];
  const times = new Map<Cond, number[]>(conds.map((c) => [c, []]));
  const listings = new Map<Cond, number[]>(conds.map((c) => [c, []]));
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < conds.length; k++) {
      const cond = conds[(k + r) % conds.length]!;
      let stop = false;
      let loop: Promise<void> = Promise.resolve();
      if (cond !== 'alone') {
        const dp = nftDataplane(
          { table: 'nft-netpol', nftPath: 'nft', netns: ns },
          { session: false, countersNice: Number(cond.slice(5)) },
        );
        loop = (async () => {
          while (!stop) {
            const t0 = performance.now();
            await dp.listCounters!();
            listings.get(cond)!.push(performance.now() - t0);
          }
        })();
        await sleep(100);
      }
      for (let i = 0; i < commits; i++) {
        times.get(cond)!.push(await commit());
        // Transactions land anywhere within a listing.
        await sleep(20 + Math.floor(Math.random() * 60));
      }
      stop = true;
      await loop;
    }
  }
  session.close();
  console.log(
    `${pods} pods, node ${node}, ${chain}: ${commits} transactions x ${rounds} rounds per condition, ${busy} busy loop(s) beside; ${cpus().length} CPUs, load ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}`,
  );
  console.log('| listing beside | transaction p50 ms | p90 ms | max ms | listings | listing p50 ms |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const c of conds) {
    const t = times.get(c)!;
    const l = listings.get(c)!;
    console.log(
      `| ${c === 'alone' ? 'none' : `at ${c}`} | ${pct(t, 50).toFixed(1)} | ${pct(t, 90).toFixed(1)} | ${Math.max(...t).toFixed(1)} | ${l.length} | ${l.length === 0 ? '-' : pct(l, 50).toFixed(0)} |`,
    );
  }
} finally {
  for (const c of children) c.kill('SIGKILL');
  await execa('ip', ['netns', 'del', ns], { reject: false });
}
