// Someone else flushes the ruleset or deletes the agent's table (a firewall
// reload, a configuration-management run): the agent follows the kernel's
// change notifications and restores the table at once, long before its drift
// timer (set to an hour here, so only the monitor can have repaired it).
// Real agent processes in the simulated cluster, real packets. Needs root,
// nft, ip, python3: skipped locally without them, failing in CI.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, readdir } from 'node:fs/promises';
import { execa } from 'execa';
import { namespace, networkPolicy, type KubeObject } from '../support/fake-apiserver.ts';
import type { Expectation } from '../harness/check.ts';
import { requireDatapath } from '../harness/requirements.ts';
import { normalizeListing } from '../../src/agent/drift.ts';
import { agentCluster } from './agent-cluster.ts';
import { eventually, listTableIn, nftIn } from './agent-process.ts';

function tcp80(from: string, to: string, allowed: boolean, why: string): Expectation {
  return { probe: { from, to, protocol: 'TCP', port: 80, family: 4, via: 'pod' }, allowed, why };
}

/** Has process `pid` subscribed to nf_tables notifications in `netns` (a NETLINK_NETFILTER socket with groups)? */
async function subscribed(netns: string, pid: number): Promise<boolean> {
  const r = await execa('ip', ['netns', 'exec', netns, 'cat', '/proc/net/netlink'], { reject: false });
  return r.stdout.split('\n').some((l) => {
    const [, eth, owner, groups] = l.trim().split(/\s+/);
    return eth === '12' && owner === String(pid) && groups !== undefined && groups !== '00000000';
  });
}

/** The pid of the `nft monitor` child of `parent` (ip netns exec execs nft in place). */
async function monitorChild(parent: number): Promise<number | undefined> {
  for (const d of await readdir('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const stat = await readFile(`/proc/${d}/stat`, 'utf8').catch(() => '');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid !== parent) continue;
    const cmd = (await readFile(`/proc/${d}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (cmd.includes('monitor')) return Number(d);
  }
  return undefined;
}

test(
  'a flushed ruleset or deleted table is restored from the kernel notification; denied stays denied',
  { timeout: 240_000 },
  async (t) => {
    if (!requireDatapath(t)) return;
    const { c, api, agents, podObject, startAgents, expectProbes } = await agentCluster(t, {
      style: 'routed',
      nodes: [{ name: 'node-1' }, { name: 'node-2' }],
      pods: [
        { key: 'shop/web', node: 'node-1' },
        { key: 'shop/other', node: 'node-1' },
        { key: 'shop/db', node: 'node-2' },
      ],
    });
    api.create('namespaces', namespace('shop'));
    for (const n of c.nodeObjects()) api.create('nodes', structuredClone(n) as KubeObject);
    api.create('pods', podObject('shop/web', 'web', { app: 'web' }));
    api.create('pods', podObject('shop/other', 'other', { app: 'other' }));
    api.create('pods', podObject('shop/db', 'db', { app: 'db' }));
    api.create(
      'networkpolicies',
      networkPolicy('shop', 'db-from-web', {
        podSelector: { matchLabels: { app: 'db' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 80 }] }],
      }),
    );
    // 100 port ranges: elements of a concatenated interval set with comments,
    // which a full `nft monitor` (nft 1.0.6) misprints and dies on.
    api.create(
      'networkpolicies',
      networkPolicy('shop', 'db-ranges', {
        podSelector: { matchLabels: { app: 'db' } },
        ingress: [
          {
            from: [{ podSelector: { matchLabels: { app: 'web' } } }],
            ports: Array.from({ length: 100 }, (_, i) => ({ port: 1000 + 20 * i, endPort: 1010 + 20 * i })),
          },
        ],
      }),
    );
    await startAgents(['--deny-action', 'reject', '--drift-interval', '1h']);
    const db = agents[1];
    const dbNode = c.nodes[1];
    assert.ok(db !== undefined && dbNode !== undefined);
    const exps = [
      tcp80('shop/web', 'shop/db', true, 'app=web allowed'),
      tcp80('shop/other', 'shop/db', false, 'app=other denied'),
    ];
    const enforced = (step: string): Promise<void> => expectProbes(step, exps);
    await enforced('policy enforced');
    // Listings compared without counter values (the probes move them).
    const listing = async (): Promise<string | undefined> => {
      const l = await listTableIn(dbNode.netns);
      return l === undefined ? undefined : normalizeListing(l);
    };
    const good = await listing();
    assert.ok(good !== undefined);
    // Repairs are counted; the bounded waits below are far shorter than the drift timer.
    const restored = async (what: string, repairs: number): Promise<void> => {
      await eventually(what, async () => (await listing()) === good, 15_000).catch((e: unknown) => {
        throw new Error(`${String(e)}\n--- agent ---\n${db.tail(30)}`);
      });
      await eventually(`${what}: counted`, async () => (await db.metric('nftnp_drift_repairs_total')) >= repairs, 15_000).catch(
        async (e: unknown) => {
          const n = await db.metric('nftnp_drift_repairs_total');
          throw new Error(`${String(e)} (repairs ${n}, want ${repairs})\n--- agent ---\n${db.tail(40)}`);
        },
      );
      await enforced(`${what}: denied is denied again`);
    };

    // The agent's monitor listens before anything is changed behind its back.
    const agentPid = db.child.pid;
    assert.ok(agentPid !== undefined);
    await eventually('monitor subscribed', async () => {
      const m = await monitorChild(agentPid);
      return m !== undefined && (await subscribed(dbNode.netns, m));
    });
    await nftIn(dbNode.netns, ['flush', 'ruleset']);
    await restored('restored after nft flush ruleset', 1);
    await nftIn(dbNode.netns, ['delete', 'table', 'inet', 'nft-netpol']);
    await restored('restored after nft delete table', 2);
    // Someone empties the table (rules only; chains, sets and the table stay).
    await nftIn(dbNode.netns, ['flush', 'table', 'inet', 'nft-netpol']);
    await restored('restored after nft flush table', 3);
    assert.ok(db.lines.some((l) => l['event'] === 'table-monitor'));
    assert.ok(db.lines.some((l) => l['event'] === 'drift-repaired'));
    // Three full loads of range elements later, the monitor never died.
    assert.equal(await db.metric('nftnp_table_monitor_restarts_total'), 0);

    // The monitor dies: it is restarted and counted, and still repairs.
    const pid = db.child.pid;
    assert.ok(pid !== undefined);
    let child: number | undefined;
    await eventually('monitor running', async () => (child = await monitorChild(pid)) !== undefined);
    assert.ok(child !== undefined);
    process.kill(child, 'SIGKILL');
    await eventually('monitor restarted', async () => (await db.metric('nftnp_table_monitor_restarts_total')) >= 1);
    await eventually('new monitor subscribed', async () => {
      const now = await monitorChild(pid);
      return now !== undefined && now !== child && (await subscribed(dbNode.netns, now));
    });
    await nftIn(dbNode.netns, ['flush', 'ruleset']);
    await restored('restored after a flush with a restarted monitor', 4);
    // The agent's own applies are not taken as foreign changes.
    api.patchLabels('pods', 'shop', 'other', { app: 'web' });
    await expectProbes('other allowed', [tcp80('shop/other', 'shop/db', true, 'now app=web')]);
    assert.equal(await db.metric('nftnp_drift_repairs_total'), 4);
  },
);
