// How long is a new pod open before this node enforces the policies that
// select it? Measured with real packets on the simulated cluster
// (test/harness) and a real agent process (source tree) per node.
//
//   node scripts/bench-new-pod.ts [--trials 8] [--kubelet-delay 300] [--settings allow,drop]
//
// Needs root. Every new pod's address is live on node-1 from the start (the
// CNI has set the pod up) and the agent does not know the pod (the kubelet
// has not reported its IP yet). A default-deny policy (ingress and egress,
// --deny-action reject) selects app=new. Each trial: a pod of the same node
// connects to the new pod's TCP port 80 without pause (one probe at a time,
// 300 ms timeout); after --kubelet-delay ms the Pod object (app=new, with its
// IPs) is created in the in-repo API server. The pod is open for the kubelet
// delay (a real kubelet's: its status update after the sandbox is up) plus
// what this prints: the time from the Pod's creation in the API to the end of
// the last probe that connected (watch delivery, debounce, compile, nft). One
// more trial per setting stops node-1's agent first (SIGTERM: the table
// stays), creates the Pod while no agent runs and starts the agent: that
// window includes the agent's start and first sync. Per setting of
// --unknown-local-endpoints it prints every trial (with how the probes
// ended), then the median and maximum window and the probes that connected.
import { loadavg, cpus } from 'node:os';
import { runProbes, type Probe } from '../test/harness/probe.ts';
import { namespace, networkPolicy } from '../test/support/fake-apiserver.ts';
import { scriptArgs } from './script-args.ts';
import { median, requireRoot, sleep, withTwoNodes } from './two-node-cluster.ts';

const { values } = scriptArgs(import.meta.url, {
  options: {
    trials: { type: 'string', default: '8' },
    'kubelet-delay': { type: 'string', default: '300' },
    settings: { type: 'string', default: 'allow,drop' },
  },
});
const TRIALS = Number(values.trials);
const KUBELET_DELAY = Number(values['kubelet-delay']);
const SETTINGS = values.settings.split(',') as ('allow' | 'drop')[];
requireRoot();

interface Trial {
  readonly kind: 'running' | 'restart';
  readonly windowMs: number;
  readonly connected: number;
  readonly probes: number;
  /** Probe results by kind, e.g. "connected 12, ECONNREFUSED 40". */
  readonly outcomes: string;
}

async function run(setting: 'allow' | 'drop'): Promise<Trial[]> {
  const news = Array.from({ length: TRIALS + 1 }, (_, i) => `shop/new-${i}`);
  const pods = [...news.map((key) => ({ key, node: 'node-1' })), { key: 'shop/peer', node: 'node-1' }];
  return withTwoNodes(pods, async ({ c, api, podObject, startAgent }) => {
    const args = ['--unknown-local-endpoints', setting, '--deny-action', 'reject'];
    api.create('namespaces', namespace('shop'));
    api.create('pods', podObject('shop/peer', { app: 'peer' }));
    api.create(
      'networkpolicies',
      networkPolicy('shop', 'new-default-deny', {
        podSelector: { matchLabels: { app: 'new' } },
        policyTypes: ['Ingress', 'Egress'],
      }),
    );
    let agent = await startAgent(args);

    const trials: Trial[] = [];
    for (let i = 0; i <= TRIALS; i++) {
      const key = news[i]!;
      const restart = i === TRIALS;
      if (restart) await agent.terminate();
      const probe: Probe = { from: 'shop/peer', to: key, protocol: 'TCP', port: 80, family: 4, via: 'pod' };
      let lastOpen = 0;
      let connected = 0;
      let probes = 0;
      let enforcedAt: number | undefined;
      let stop = false;
      const details = new Map<string, number>();
      const loop = (async () => {
        while (!stop) {
          const [o] = await runProbes(c, [probe], { timeoutMs: 300 });
          probes += 1;
          const d = o?.detail ?? 'none';
          details.set(d, (details.get(d) ?? 0) + 1);
          if (o?.connected === true) {
            connected += 1;
            lastOpen = performance.now();
          } else if (o?.detail.includes('ECONNREFUSED') === true) {
            // Rejected by the pod's chain: the policy is in force (an unknown pod's packets are dropped, never rejected).
            enforcedAt ??= performance.now();
          }
        }
      })();
      // The address is live and the kubelet has not reported it yet: the probes run for this long first.
      await sleep(KUBELET_DELAY);
      const posted = performance.now();
      api.create('pods', podObject(key, { app: 'new' }));
      if (restart) agent = await startAgent(args);
      // Enforced: probes rejected for a while (1 s after the first rejection).
      const deadline = performance.now() + 60_000;
      while ((enforcedAt === undefined || performance.now() - enforcedAt < 1000) && performance.now() < deadline) await sleep(20);
      stop = true;
      await loop;
      trials.push({
        kind: restart ? 'restart' : 'running',
        // A last success before the report (a slow probe spanning it) counts as 0.
        windowMs: Math.max(0, lastOpen - posted),
        connected,
        probes,
        outcomes: [...details].map(([d, n]) => `${d} ${n}`).join(', '),
      });
    }
    return trials;
  });
}

console.log(
  `# new pod window: ${TRIALS} trials + 1 restart per setting, kubelet delay ${KUBELET_DELAY} ms; ${cpus().length} CPUs, load ${loadavg()[0]?.toFixed(1)}`,
);
for (const setting of SETTINGS) {
  const trials = await run(setting);
  console.log(`\n--unknown-local-endpoints ${setting}`);
  for (const t of trials)
    console.log(
      `  ${t.kind.padEnd(8)} open for ${t.connected === 0 ? '0 ms (no probe connected)' : `${t.windowMs.toFixed(0)} ms`}, ${t.connected}/${t.probes} probes connected (${t.outcomes})`,
    );
  const running = trials.filter((t) => t.kind === 'running');
  const open = running.map((t) => (t.connected === 0 ? 0 : t.windowMs));
  console.log(
    `  agent running: window median ${median(open).toFixed(0)} ms, max ${Math.max(...open).toFixed(0)} ms; probes connected ${running.reduce((a, t) => a + t.connected, 0)}`,
  );
  const r = trials.find((t) => t.kind === 'restart');
  if (r !== undefined)
    console.log(
      `  agent restarting: window ${r.connected === 0 ? 0 : r.windowMs.toFixed(0)} ms; probes connected ${r.connected}`,
    );
}
