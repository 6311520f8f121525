// A new pod's first moments, with real agent processes and real packets: the
// pod's address is live (its namespace, veth and routes exist) before the
// agent knows the pod, as on a node where the CNI has set the pod up and the
// kubelet has not yet reported its IP, or the agent is restarting. Under
// --unknown-local-endpoints drop no probe reaches or leaves the pod until the
// agent has programmed the policies that select it (default-deny here), then
// exactly what they allow passes; under allow (the default) the pod is open
// in that window. The same for a pod that starts while the agent is down: the
// table stays in force across the restart. The window's length is measured by
// scripts/bench-new-pod.ts, not here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { namespace, networkPolicy, type KubeObject } from '../support/fake-apiserver.ts';
import type { Expectation } from '../harness/check.ts';
import { nodeKey, runProbes, type Probe } from '../harness/probe.ts';
import { requireDatapath } from '../harness/requirements.ts';
import { agentCluster } from './agent-cluster.ts';
import { AgentProcess } from './agent-process.ts';

const tcp80 = (from: string, to: string): Probe => ({ from, to, protocol: 'TCP', port: 80, family: 4, via: 'pod' });

/** The probes that say whether a pod is open: from a pod of its node, from another node, to its node, to another node. */
function around(pod: string): Probe[] {
  return [tcp80('shop/peer', pod), tcp80('ext/client', pod), tcp80(pod, nodeKey('node-1')), tcp80(pod, 'ext/client')];
}

/** Each probe once, no retries: what passed at that moment. */
async function connected(c: Parameters<typeof runProbes>[0], probes: readonly Probe[]): Promise<string[]> {
  const out = await runProbes(c, probes, { timeoutMs: 300 });
  return out.filter((o) => o.connected).map((o) => `${o.probe.from} -> ${o.probe.to}`);
}

/**
 * The probes again until what passes is `want` (at most five rounds), then
 * what passed last: for a state that holds still (no agent running, or the
 * pod's object not yet delivered). One probe can miss its 300 ms on a loaded
 * machine; a wrong table answers wrongly every round.
 */
async function settled(c: Parameters<typeof runProbes>[0], probes: readonly Probe[], want: readonly string[]): Promise<string[]> {
  let got: string[] = [];
  for (let round = 0; round < 5; round++) {
    got = await connected(c, probes);
    if (got.length === want.length && got.every((x, i) => x === want[i])) break;
  }
  return got;
}

for (const setting of ['drop', 'allow'] as const) {
  test(
    `--unknown-local-endpoints ${setting}: a pod whose address is up before the agent knows it`,
    { timeout: 300_000 },
    async (t) => {
      if (!requireDatapath(t)) return;
      const ac = await agentCluster(t, {
        style: 'routed',
        nodes: [{ name: 'node-1' }, { name: 'node-2' }],
        pods: [
          { key: 'shop/new', node: 'node-1' },
          { key: 'shop/late', node: 'node-1' },
          { key: 'shop/peer', node: 'node-1' },
          { key: 'ext/client', node: 'node-2' },
        ],
      });
      const { c, api, agents } = ac;
      api.create('namespaces', namespace('shop'));
      api.create('namespaces', namespace('ext'));
      for (const n of c.nodeObjects()) api.create('nodes', structuredClone(n) as KubeObject);
      api.create('pods', ac.podObject('shop/peer', 'peer', { app: 'peer' }));
      api.create('pods', ac.podObject('ext/client', 'client', { app: 'client' }));
      // Default deny for app=new, both ways; ingress from ext/client on 80 only.
      api.create(
        'networkpolicies',
        networkPolicy('shop', 'new-default-deny', {
          podSelector: { matchLabels: { app: 'new' } },
          policyTypes: ['Ingress', 'Egress'],
        }),
      );
      api.create(
        'networkpolicies',
        networkPolicy('shop', 'new-from-client', {
          podSelector: { matchLabels: { app: 'new' } },
          ingress: [
            { from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'client' } } }], ports: [{ port: 80 }] },
          ],
        }),
      );
      const args = ['--unknown-local-endpoints', setting, '--deny-action', 'reject'];
      await ac.startAgents(args);
      const drop = setting === 'drop';

      // The window: shop/new's address is live, its Pod object not yet delivered.
      const before = await settled(c, around('shop/new'), drop ? [] : around('shop/new').map((q) => `${q.from} -> ${q.to}`));
      if (drop) assert.deepEqual(before, [], 'drop: nothing reaches or leaves a pod the agent does not know');
      else assert.equal(before.length, 4, `allow: the unknown pod is open both ways (${before.join(', ')})`);

      // The pod is reported; while the agent programs it, probe without pause.
      let probing = true;
      const during: string[] = [];
      const loop = (async () => {
        while (probing) during.push(...(await connected(c, around('shop/new'))));
      })();
      api.create('pods', ac.podObject('shop/new', 'new', { app: 'new' }));
      // The pod's policies name a remote peer (ext/client) that no watch of
      // node-1's agent held: its peer watch starts after the pod's first
      // apply, which denies ext/client until the watch has listed (fail
      // closed). Probes are retried one by one, so without this wait a check
      // could pass on ext/client's probe from before that first apply (the
      // unknown pod open, under allow) and the others' from after it.
      const a1 = agents[0]!;
      await a1.waitForLog('the apply that knows ext/client', (l) => {
        const reasons = l['reasons'];
        return l['event'] === 'apply' && Array.isArray(reasons) && reasons.includes('pods add ext/client');
      });
      const programmed: Expectation[] = [
        { probe: tcp80('ext/client', 'shop/new'), allowed: true, why: 'new-from-client' },
        { probe: tcp80('shop/peer', 'shop/new'), allowed: false, why: 'default deny' },
        { probe: tcp80('shop/new', nodeKey('node-1')), allowed: false, why: 'egress default deny, own node included' },
        { probe: tcp80('shop/new', 'ext/client'), allowed: false, why: 'egress default deny' },
      ];
      await ac.expectProbes('shop/new programmed', programmed);
      probing = false;
      await loop;
      if (drop) {
        // Before the apply nothing passed (unknown), after it only what the policies allow: never more.
        assert.deepEqual(
          during.filter((x) => x !== 'ext/client -> shop/new'),
          [],
          'drop: no probe passed that the policies do not allow',
        );
      }

      // The agent of node-1 stops (SIGTERM, as in a rollout): its table stays in force.
      await a1.terminate();
      assert.deepEqual(
        await settled(c, [tcp80('ext/client', 'shop/new'), tcp80('shop/peer', 'shop/new')], ['ext/client -> shop/new']),
        ['ext/client -> shop/new'],
      );
      // shop/late starts while no agent runs on its node (its Pod object is in the API already).
      api.create('pods', ac.podObject('shop/late', 'late', { app: 'new' }));
      const down = await settled(c, around('shop/late'), drop ? [] : around('shop/late').map((q) => `${q.from} -> ${q.to}`));
      if (drop) assert.deepEqual(down, [], 'drop: a pod that starts while the agent is down gets no traffic');
      else assert.equal(down.length, 4, `allow: a pod that starts while the agent is down is open (${down.join(', ')})`);

      // The agent comes back: its first apply programs the pod.
      const again = AgentProcess.start({ node: 'node-1', netns: c.node('node-1').netns, kubeconfig: ac.kubeconfig, args });
      agents[0] = again;
      await again.waitReady(30_000);
      await ac.expectProbes('shop/late programmed after the restart', [
        { probe: tcp80('ext/client', 'shop/late'), allowed: true, why: 'new-from-client' },
        { probe: tcp80('shop/peer', 'shop/late'), allowed: false, why: 'default deny' },
        { probe: tcp80('shop/late', nodeKey('node-1')), allowed: false, why: 'egress default deny' },
        { probe: tcp80('shop/late', 'ext/client'), allowed: false, why: 'egress default deny' },
      ]);
      for (const a of agents) assert.equal(await a.metric('nftnp_nft_restore_errors_total'), 0);
    },
  );
}
