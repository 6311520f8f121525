// The harness itself: connectivity of both pod-network styles with no policy,
// a hand-written nft ruleset in the node's forward hook (same-node bridged
// traffic, traffic after ClusterIP DNAT), that mismatches are reported, and
// that nothing is left behind (destroy, interruption, stale runs).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Reachability, diffTables } from '../support/truth-table.ts';
import { Cluster, NETWORK_STYLES } from '../harness/cluster.ts';
import { harnessNetns, processGone, sweepStale } from '../harness/netns.ts';
import { nodeKey, OUTSIDE_KEY, probeMatrix, runProbes } from '../harness/probe.ts';
import type { Probe } from '../harness/probe.ts';
import { datapathSkip } from '../harness/requirements.ts';
import { checkTable } from '../harness/check.ts';

const skip = datapathSkip();
const PODS = ['x/a', 'x/b', 'x/c', 'y/a'];
// x/a and x/c share node-1; x/b and y/a are on node-2.
const PLACEMENT: Record<string, string> = { 'x/a': 'node-1', 'x/b': 'node-2', 'x/c': 'node-1', 'y/a': 'node-2' };

for (const style of NETWORK_STYLES) {
  describe(`harness, ${style} pod network`, { skip }, () => {
    let c: Cluster;
    before(async () => {
      c = await Cluster.create({
        style,
        nodes: [{ name: 'node-1' }, { name: 'node-2' }],
        pods: PODS.map((key) => ({ key, node: PLACEMENT[key]! })),
      });
    });
    after(async () => {
      await c?.destroy();
    });

    test('without any ruleset every pair connects: TCP, UDP, SCTP x IPv4, IPv6 x ClusterIP, pod IP', async () => {
      for (const protocol of ['TCP', 'UDP', 'SCTP'] as const) {
        for (const family of [4, 6] as const) {
          for (const via of ['service', 'pod'] as const) {
            const { observed, outcomes } = await probeMatrix(c, { protocol, port: 81, family, via });
            const all = new Reachability(PODS, true).table();
            assert.deepEqual(
              diffTables(all, observed),
              [],
              `${protocol} IPv${family} via ${via}: ${outcomes
                .filter((o) => !o.connected)
                .map((o) => o.detail)
                .join(', ')}`,
            );
          }
        }
      }
    });

    test('nodes reach their pods from their own address; pods reach the outside host and their node', async () => {
      const probes: Probe[] = [];
      for (const family of [4, 6] as const) {
        probes.push({ from: nodeKey('node-1'), to: 'x/a', protocol: 'TCP', port: 80, family, via: 'pod' });
        probes.push({ from: nodeKey('node-2'), to: 'x/b', protocol: 'UDP', port: 80, family, via: 'service' });
        probes.push({ from: 'y/a', to: OUTSIDE_KEY, protocol: 'TCP', port: 80, family });
        probes.push({ from: OUTSIDE_KEY, to: 'x/c', protocol: 'UDP', port: 81, family, via: 'pod' });
        probes.push({ from: 'x/a', to: nodeKey('node-1'), protocol: 'TCP', port: 81, family });
        // UDP answers from a node with several addresses (bridged: the gateway too) must come from the address asked.
        probes.push({ from: 'x/c', to: nodeKey('node-1'), protocol: 'UDP', port: 80, family });
        probes.push({ from: 'x/b', to: nodeKey('node-1'), protocol: 'UDP', port: 81, family });
      }
      const out = await runProbes(c, probes);
      for (const o of out) assert.ok(o.connected, `${o.probe.from} -> ${o.probe.to} IPv${o.probe.family}: ${o.detail}`);
      // The node's probe really comes from its InternalIP (what the evaluator calls "the pod's own node").
      assert.equal(out[0]!.sourceIP, c.node('node-1').addresses.v4);
    });

    test('a forward-hook drop in the node namespace blocks a same-node pair and a cross-node pair, also after ClusterIP DNAT', async () => {
      const xa = c.pod('x/a');
      const xc = c.pod('x/c');
      const xb = c.pod('x/b');
      // Judged on pod addresses: a ClusterIP probe only matches after DNAT.
      const rules = `table inet harness-selftest {
  chain forward {
    type filter hook forward priority filter; policy accept;
    ip saddr ${xa.ips.v4} ip daddr ${xc.ips.v4} tcp dport 80 counter drop
    ip6 saddr ${xa.ips.v6} ip6 daddr ${xc.ips.v6} tcp dport 80 counter drop
    ip saddr ${xa.ips.v4} ip daddr ${xb.ips.v4} udp dport 81 counter drop
  }
}
`;
      await c.exec('node-1', 'nft', ['-f', '-'], { input: rules });
      try {
        const out = await runProbes(c, [
          { from: 'x/a', to: 'x/c', protocol: 'TCP', port: 80, family: 4, via: 'pod' },
          { from: 'x/a', to: 'x/c', protocol: 'TCP', port: 80, family: 4, via: 'service' },
          { from: 'x/a', to: 'x/c', protocol: 'TCP', port: 80, family: 6, via: 'service' },
          { from: 'x/a', to: 'x/c', protocol: 'TCP', port: 81, family: 4, via: 'service' },
          { from: 'x/c', to: 'x/a', protocol: 'TCP', port: 80, family: 4, via: 'pod' },
          { from: 'x/a', to: 'x/b', protocol: 'UDP', port: 81, family: 4, via: 'service' },
          { from: 'x/a', to: 'x/b', protocol: 'UDP', port: 80, family: 4, via: 'service' },
        ]);
        assert.deepEqual(
          out.map((o) => o.connected),
          [false, false, false, true, true, false, true],
          out
            .map(
              (o) =>
                `${o.probe.from}->${o.probe.to} ${o.probe.protocol}/${o.probe.port} v${o.probe.family} ${o.probe.via}: ${o.detail}`,
            )
            .join('\n'),
        );
        const listed = (await c.exec('node-1', 'nft', ['list', 'table', 'inet', 'harness-selftest'])).stdout;
        // Same-node traffic crossed the node's forward hook in both styles (bridged: through br_netfilter).
        assert.match(listed, new RegExp(`ip daddr ${xc.ips.v4.replaceAll('.', '\\.')} tcp dport 80 counter packets [1-9]`));
      } finally {
        await c.exec('node-1', 'nft', ['delete', 'table', 'inet', 'harness-selftest']);
      }
    });

    test('a wrong expectation is reported as a mismatch with the upstream-style tables', async () => {
      const wrong = new Reachability(PODS, true).expectAllIngress('x/a', false).table();
      const r = await checkTable(c, 'self-test', 'TCP', 80, wrong, { timeoutMs: 300 });
      // Nothing blocks x/a, so the three other pods' cells are wrong, and retried before being reported.
      assert.equal(r.mismatches.length, 3);
      assert.ok(r.outcomes.filter((o) => o.probe.to === 'x/a').every((o) => o.attempts === 3));
      assert.match(r.report, /reachability: correct:9, incorrect:3, ignored:4, result=false/);
      assert.match(r.report, /expected:\n\n-\tx\/a\tx\/b\tx\/c\ty\/a\nx\/a\tX\t/);
      assert.match(r.report, /comparison:/);
    });
  });
}

describe('harness cleanup', { skip }, () => {
  test('destroy removes every namespace and agent of the cluster', async () => {
    const c = await Cluster.create({
      style: 'bridged',
      nodes: [{ name: 'n1' }, { name: 'n2' }, { name: 'n3' }],
      pods: [{ key: 'a/p', node: 'n3' }],
    });
    // Three nodes: an underlay switch namespace joins them.
    assert.equal(c.namespaces.length, 3 + 1 + 1 + 1);
    const [o] = await runProbes(c, [{ from: 'node:n1', to: 'a/p', protocol: 'TCP', port: 80, family: 6, via: 'service' }]);
    assert.equal(o?.connected, true, o?.detail);
    const pids = c.pods.map((p) => p.agent.pid!);
    await c.destroy();
    assert.deepEqual(harnessNetns(c.prefix), []);
    for (const pid of pids) assert.ok(processGone(pid), `agent ${pid} survived`);
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    test(`a run interrupted by ${signal} removes its namespaces and processes`, async () => {
      const script = fileURLToPath(new URL('../harness/hold-cluster.ts', import.meta.url));
      const child = spawn(process.execPath, ['--no-warnings', script], { stdio: ['ignore', 'pipe', 'inherit'] });
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout }).once('line', resolve);
        child.once('exit', (code) => reject(new Error(`hold-cluster exited ${code} before reporting`)));
      });
      const held = JSON.parse(line) as { prefix: string; namespaces: string[]; pids: number[] };
      assert.deepEqual(harnessNetns(held.prefix).sort(), [...held.namespaces].sort());
      const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, sig) => resolve(sig)));
      child.kill(signal);
      assert.equal(await exited, signal);
      assert.deepEqual(harnessNetns(held.prefix), []);
      for (const pid of held.pids) assert.ok(processGone(pid), `agent ${pid} survived`);
    });
  }

  test('namespaces of a dead earlier run are swept, those of live runs are kept', () => {
    // A pid that certainly belonged to a process that has exited.
    const dead = spawnSync('sh', ['-c', 'echo $$'], { encoding: 'utf8' }).stdout.trim();
    const stale = `nnpt-${dead}-1-n0`;
    const live = `nnpt-${process.ppid}-1-n0`;
    spawnSync('ip', ['netns', 'add', stale]);
    spawnSync('ip', ['netns', 'add', live]);
    try {
      const removed = sweepStale();
      assert.ok(removed.includes(stale), `swept: ${removed.join(', ')}`);
      assert.ok(!removed.includes(live));
      assert.deepEqual(harnessNetns(stale), []);
      assert.deepEqual(harnessNetns(live), [live]);
    } finally {
      spawnSync('ip', ['netns', 'del', stale]);
      spawnSync('ip', ['netns', 'del', live]);
    }
  });
});
