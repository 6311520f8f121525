// A new pod's allowed remote peers, the first moments: how long does this
// node refuse a remote pod that a policy allows to reach a new pod, when the
// node watched no pod that policy's peers select until the new pod arrived?
// Real packets on the simulated cluster (test/harness), a real agent process
// (source tree) on node-1.
//
//   npm run bench:new-peer -- [--trials 8] [--settings allow,drop]
//
// Needs root. The agent watches only the remote pods that the policies
// selecting its own pods name (src/kube/peer-demand.ts). Each trial has its
// own policy, `new-<i>-from-client`, selecting app=new-<i> and allowing TCP 80
// from pods app=client-<i> of any namespace; the client pod runs on node-2
// from the start, so node-1's agent has no watch that holds it. The new pod's
// address is live on node-1 before its Pod object exists; the client connects
// to it without pause (one probe at a time, 300 ms timeout, reject as the
// deny action). When the Pod object is created, node-1's agent enforces the
// policy at once (the client not yet among its peers: refused, fail closed),
// plans a watch for app=client-<i>, lists it, and applies again. Printed per
// trial: from the Pod's creation, the ends of the first and last refused
// probes and of the first probe that connected after them; from the first
// refusal to that connection is how long the allowed client was refused.
// Under --unknown-local-endpoints drop the unknown pod's packets are dropped:
// the probe sent as the Pod is created waits out its 300 ms, which hides a
// shorter refusal (as a real client's SYN retransmission, 1 s later, would).
import { loadavg, cpus } from 'node:os';
import { runProbes, type Probe } from '../test/harness/probe.ts';
import { namespace, networkPolicy } from '../test/support/fake-apiserver.ts';
import { scriptArgs } from './script-args.ts';
import { median, requireRoot, sleep, withTwoNodes } from './two-node-cluster.ts';

const { values } = scriptArgs(import.meta.url, {
  options: {
    trials: { type: 'string', default: '8' },
    settings: { type: 'string', default: 'allow,drop' },
  },
});
const TRIALS = Number(values.trials);
const SETTINGS = values.settings.split(',') as ('allow' | 'drop')[];
requireRoot();

interface Trial {
  /** From the Pod's creation: end of the first and of the last refused probe; undefined: none refused. */
  readonly firstRefused: number | undefined;
  readonly lastRefused: number | undefined;
  /** From the Pod's creation: end of the first probe that connected after every refusal (or after the creation). */
  readonly connected: number | undefined;
  readonly outcomes: string;
}

async function run(setting: 'allow' | 'drop'): Promise<Trial[]> {
  const news = Array.from({ length: TRIALS }, (_, i) => `shop/new-${i}`);
  const clients = Array.from({ length: TRIALS }, (_, i) => `ext/client-${i}`);
  const pods = [...news.map((key) => ({ key, node: 'node-1' })), ...clients.map((key) => ({ key, node: 'node-2' }))];
  return withTwoNodes(pods, async ({ c, api, podObject, startAgent }) => {
    api.create('namespaces', namespace('shop'));
    api.create('namespaces', namespace('ext'));
    for (let i = 0; i < TRIALS; i++) {
      api.create('pods', podObject(clients[i]!, { app: `client-${i}` }));
      api.create(
        'networkpolicies',
        networkPolicy('shop', `new-${i}-from-client`, {
          podSelector: { matchLabels: { app: `new-${i}` } },
          ingress: [
            { from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: `client-${i}` } } }], ports: [{ port: 80 }] },
          ],
        }),
      );
    }
    await startAgent(['--unknown-local-endpoints', setting, '--deny-action', 'reject']);

    const trials: Trial[] = [];
    for (let i = 0; i < TRIALS; i++) {
      const probe: Probe = { from: clients[i]!, to: news[i]!, protocol: 'TCP', port: 80, family: 4, via: 'pod' };
      let posted = 0;
      const seen: { at: number; refused: boolean; connected: boolean }[] = [];
      const details = new Map<string, number>();
      const loop = (async () => {
        for (;;) {
          const [o] = await runProbes(c, [probe], { timeoutMs: 300 });
          const now = performance.now();
          const d = o?.detail ?? 'none';
          details.set(d, (details.get(d) ?? 0) + 1);
          if (posted === 0) continue;
          seen.push({ at: now - posted, refused: d.includes('ECONNREFUSED'), connected: o?.connected === true });
          if (now - posted > 2_000) return;
        }
      })();
      await sleep(300);
      posted = performance.now();
      api.create('pods', podObject(news[i]!, { app: `new-${i}` }));
      await loop;
      const refused = seen.filter((x) => x.refused);
      const lastRefused = refused.at(-1)?.at;
      // A probe that connected before any refusal went to the still unknown pod (open under allow).
      const connected = seen.find((x) => x.connected && (lastRefused === undefined ? true : x.at > lastRefused))?.at;
      trials.push({
        firstRefused: refused[0]?.at,
        lastRefused,
        connected,
        outcomes: [...details].map(([d, n]) => `${d} ${n}`).join(', '),
      });
    }
    return trials;
  });
}

console.log(
  `# a new pod's allowed remote peer: ${TRIALS} trials per setting; ${cpus().length} CPUs, load ${loadavg()[0]?.toFixed(1)}`,
);
for (const setting of SETTINGS) {
  const trials = await run(setting);
  console.log(`\n--unknown-local-endpoints ${setting}`);
  const ms = (x: number | undefined) => (x === undefined ? '-' : `${x.toFixed(0)} ms`);
  for (const t of trials)
    console.log(
      `  refused from ${ms(t.firstRefused)} to ${ms(t.lastRefused)}, connected again ${ms(t.connected)} (${t.outcomes})`,
    );
  const windows = trials.map((t) =>
    t.firstRefused === undefined || t.connected === undefined ? 0 : t.connected - t.firstRefused,
  );
  console.log(
    `  allowed client refused for: median ${median(windows).toFixed(0)} ms, max ${Math.max(...windows).toFixed(0)} ms (first refusal to the first connection after the last)`,
  );
}
