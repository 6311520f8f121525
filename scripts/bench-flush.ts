// How long a node is open after someone else flushes the ruleset or deletes
// the agent's table: the agent (a real process, drift timer at one hour, so
// only its `nft monitor` can notice) restores the table from the kernel's
// notification. The window is measured with an `nft monitor` of this script:
// from the notification that removed the table to the one that added it back
// (as this process receives them).
//
//   node scripts/bench-flush.ts [--pods 1000] [--samples 20]
//
// Per sample, alternately `nft flush ruleset` and `nft delete table inet
// nft-netpol` in the agent's scratch network namespace, then wait until the
// table is back and the agent has read it back. Needs root. The script's own
// monitor follows table additions and deletions only (`nft monitor tables`):
// nft 1.0.6 crashes printing the elements of our interval concatenations.
import { createInterface } from 'node:readline';
import { loadavg } from 'node:os';
import { execa } from 'execa';
import { FakeApiServer, type KubeObject } from '../test/support/fake-apiserver.ts';
import { createNetns, deleteNetns, uniquePrefix } from '../test/harness/netns.ts';
import { AgentProcess, eventually, nftIn, scratch } from '../test/agent/agent-process.ts';
import { clusterObjects, generateCluster } from './gen-cluster.ts';
import { scriptArgs } from './script-args.ts';

const { values: args } = scriptArgs(import.meta.url, {
  options: { pods: { type: 'string', default: '1000' }, samples: { type: 'string', default: '20' } },
});
const PODS = Number(args.pods);
const SAMPLES = Number(args.samples);

const gen = generateCluster({
  pods: PODS,
  policies: Math.max(1, Math.round(PODS / 10)),
  namespaces: Math.max(1, Math.round(PODS / 20)),
});
const node = gen.nodes[0] ?? 'node-00000';
const api = await FakeApiServer.start();
api.load(clusterObjects(gen) as unknown as KubeObject[]);
const s = await scratch(api);
const netns = `${uniquePrefix()}f`;
await createNetns([netns]);
const agent = AgentProcess.start({
  node,
  netns,
  kubeconfig: s.kubeconfig,
  args: ['--drift-interval', '1h', '--log-level', 'info'],
});
const monitor = execa('ip', ['netns', 'exec', netns, 'nft', 'monitor', 'tables'], { reject: false, buffer: false });
// Each addition or deletion of the table: when it arrived, and whether it added it.
const gens: { at: number; present: boolean }[] = [];
createInterface({ input: monitor.stdout }).on('line', (l) => {
  const [verb, object, family, name] = l.split(' ', 4);
  if (object === 'table' && family === 'inet' && name === 'nft-netpol')
    gens.push({ at: performance.now(), present: verb === 'add' });
});
const windows: number[] = [];
try {
  await agent.waitReady(120_000);
  const repairs = (): Promise<number> => agent.metric('nftnp_drift_repairs_total');
  for (let i = 0; i < SAMPLES; i++) {
    const settled = async (): Promise<boolean> => {
      const rs = JSON.parse((await agent.get('/debug/ruleset')).body) as { kernelMatches: boolean | null };
      return rs.kernelMatches === true;
    };
    await eventually('agent settled', settled, 60_000);
    const before = await repairs();
    const from = gens.length;
    await nftIn(netns, i % 2 === 0 ? ['flush', 'ruleset'] : ['delete', 'table', 'inet', 'nft-netpol']);
    await eventually('restored', async () => (await repairs()) > before && (await settled()), 60_000);
    // This script's own monitor may deliver the lines a moment after the agent's.
    let window: number | undefined;
    await eventually('both notifications seen', () => {
      const after = gens.slice(from);
      const removed = after.find((g) => g.present === false);
      const back = after.find((g) => removed !== undefined && g.at >= removed.at && g.present === true);
      if (removed !== undefined && back !== undefined) window = back.at - removed.at;
      return window !== undefined;
    });
    windows.push(window ?? NaN);
  }
} finally {
  await agent.stop();
  monitor.kill();
  await deleteNetns([netns]);
  await api.close();
  await s.cleanup();
}
windows.sort((a, b) => a - b);
const q = (p: number): string => (windows[Math.min(windows.length - 1, Math.floor(p * windows.length))] ?? NaN).toFixed(0);
process.stdout.write(
  `flush/delete -> table restored (ms), ${PODS} pods, ${SAMPLES} samples: p50 ${q(0.5)}  p90 ${q(0.9)}  max ${q(1)}; load average ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')} (2 cores, shared)\n`,
);
