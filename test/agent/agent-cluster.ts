// The simulated cluster (test/harness) with the test API server and one real
// agent process per node: what the process and tenancy datapath tests share.
// Torn down after the test; probes are checked until they hold (30 s).
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { FakeApiServer, pod, type FakeApiServerOptions, type KubeObject } from '../support/fake-apiserver.ts';
import { Cluster, type ClusterSpec } from '../harness/cluster.ts';
import { checkProbes, type Expectation } from '../harness/check.ts';
import { AgentProcess, eventually, scratch } from './agent-process.ts';

export interface AgentCluster {
  readonly c: Cluster;
  readonly api: FakeApiServer;
  /** One per node, in node order, once started. */
  readonly agents: AgentProcess[];
  /** The kubeconfig the agents use (to start one again). */
  readonly kubeconfig: string;
  /** The pod object of harness pod `key` (its node and both IPs), named and labelled. */
  podObject(key: string, name: string, labels: Record<string, string>): KubeObject;
  /** Starts one agent per node with these arguments and waits until all are ready. */
  startAgents(args: readonly string[]): Promise<void>;
  /** Waits until every expectation holds; fails with the wrong probes and each agent's last lines. */
  expectProbes(step: string, exps: readonly Expectation[]): Promise<void>;
}

export async function agentCluster(t: TestContext, spec: ClusterSpec, apiOptions?: FakeApiServerOptions): Promise<AgentCluster> {
  const c = await Cluster.create(spec);
  const api = await FakeApiServer.start(apiOptions);
  const s = await scratch(api);
  const agents: AgentProcess[] = [];
  t.after(async () => {
    for (const a of agents) await a.stop();
    await c.destroy();
    await api.close();
    await s.cleanup();
  });
  return {
    c,
    api,
    agents,
    kubeconfig: s.kubeconfig,
    podObject: (key, name, labels) => {
      const p = c.pod(key);
      return pod(p.namespace, name, labels, p.node, p.ips.v4, { ips: [p.ips.v4, p.ips.v6] });
    },
    startAgents: async (args) => {
      for (const n of c.nodes)
        agents.push(AgentProcess.start({ node: n.name, netns: n.netns, kubeconfig: s.kubeconfig, args: [...args] }));
      for (const a of agents) await a.waitReady(30_000);
    },
    expectProbes: async (step, exps) => {
      let last: string[] = [];
      try {
        await eventually(
          step,
          async () => {
            last = await checkProbes(c, [...exps]);
            return last.length === 0;
          },
          30_000,
        );
      } catch {
        const tails = agents.map((a, i) => `--- ${c.nodes[i]?.name ?? '?'} agent ---\n${a.tail(15)}`);
        assert.fail(`${step}:\n${last.join('\n')}\n${tails.join('\n')}`);
      }
    },
  };
}
