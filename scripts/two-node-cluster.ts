// The two-node simulated cluster (test/harness) with the in-repo API server
// that the new-pod benchmarks run a real agent against: created, handed to
// the body, and torn down whatever the body does.
import { Cluster } from '../test/harness/cluster.ts';
import { FakeApiServer, pod, type KubeObject } from '../test/support/fake-apiserver.ts';
import { AgentProcess, scratch } from '../test/agent/agent-process.ts';

export interface TwoNodes {
  readonly c: Cluster;
  readonly api: FakeApiServer;
  /** The Pod object of a harness pod, with these labels. */
  podObject(key: string, labels: Record<string, string>): KubeObject;
  /** Starts node-1's agent with these arguments and waits until it is ready; stopped at the end. */
  startAgent(args: readonly string[]): Promise<AgentProcess>;
}

/** Runs `body` on a routed cluster of node-1 and node-2 holding `pods` (key -> node), Node objects in the API. */
export async function withTwoNodes<T>(
  pods: readonly { key: string; node: string }[],
  body: (t: TwoNodes) => Promise<T>,
): Promise<T> {
  const c = await Cluster.create({ style: 'routed', nodes: [{ name: 'node-1' }, { name: 'node-2' }], pods: [...pods] });
  const api = await FakeApiServer.start();
  const s = await scratch(api);
  const agents: AgentProcess[] = [];
  try {
    for (const n of c.nodeObjects()) api.create('nodes', structuredClone(n) as KubeObject);
    return await body({
      c,
      api,
      podObject: (key, labels) => {
        const p = c.pod(key);
        return pod(p.namespace, p.name, labels, p.node, p.ips.v4, { ips: [p.ips.v4, p.ips.v6] });
      },
      startAgent: async (args) => {
        const a = AgentProcess.start({
          node: 'node-1',
          netns: c.node('node-1').netns,
          kubeconfig: s.kubeconfig,
          args: [...args],
        });
        agents.push(a);
        await a.waitReady(60_000);
        return a;
      },
    });
  } finally {
    for (const a of agents) await a.stop();
    await c.destroy();
    await api.close();
    await s.cleanup();
  }
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : (s[Math.floor((s.length - 1) / 2)] ?? 0);
}

/** Network namespaces and nft need root: says so and exits 2 otherwise. */
export function requireRoot(): void {
  if (process.getuid?.() === 0) return;
  console.error('needs root (network namespaces, nft)');
  process.exit(2);
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
