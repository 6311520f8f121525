// Staged policies end to end, with real packets: real agent processes with
// --log-denied in the node namespaces of a simulated two-node cluster, a fake
// API server speaking list/watch, real TCP connections; then what an operator
// sees: /debug/denied?staged=1, `denied --staged`, the log lines and
// nftnp_staged_verdict_changes_total. Finally the annotation is removed and
// the agent enforces the policy in one incremental transaction.
// Needs root, nft, ip, python3 and tcpdump: skipped without them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execa } from 'execa';
import { FakeApiServer, namespace, networkPolicy, pod, type KubeObject } from '../support/fake-apiserver.ts';
import { Cluster } from '../harness/cluster.ts';
import { runProbes, type Probe } from '../harness/probe.ts';
import { requireDatapath, IN_CI } from '../harness/requirements.ts';
import { AgentProcess, eventually, scratch } from './agent-process.ts';

interface StagedEntry {
  readonly direction: string;
  readonly pod: string;
  readonly src: string;
  readonly srcIP: string;
  readonly dst: string;
  readonly port: number | null;
  readonly change: string;
  readonly stagedPolicies: string[];
  readonly stagedRule: string | null;
  readonly reason: string;
}

async function hasTcpdump(): Promise<boolean> {
  const r = await execa('tcpdump', ['--version'], { reject: false });
  return r.exitCode === 0;
}

const STAGED = { 'nft-netpol.io/staged': 'true' };
const staged = (o: KubeObject): KubeObject => ({ ...o, metadata: { ...o.metadata, annotations: STAGED } });

test('staged policies: would deny and would allow listed by the agent, traffic unchanged; unstaging enforces incrementally', async (t) => {
  if (!requireDatapath(t)) return;
  if (!(await hasTcpdump())) {
    if (IN_CI) assert.fail('tcpdump is required (Debian package tcpdump, in .ci/apt-packages)');
    t.skip('tcpdump is not installed');
    return;
  }
  const c = await Cluster.create({
    style: 'routed',
    nodes: [{ name: 'node-1' }, { name: 'node-2' }],
    pods: [
      { key: 'shop/db', node: 'node-1' },
      { key: 'shop/web', node: 'node-2' },
      { key: 'shop/client', node: 'node-2' },
    ],
  });
  const api = await FakeApiServer.start();
  const s = await scratch(api);
  const agents: AgentProcess[] = [];
  t.after(async () => {
    for (const a of agents) await a.terminate();
    await c.destroy();
    await api.close();
    await s.cleanup();
  });
  const podObj = (key: string, labels: Record<string, string>): KubeObject => {
    const p = c.pod(key);
    return pod(p.namespace, p.name, labels, p.node, p.ips.v4, { ips: [p.ips.v4, p.ips.v6] });
  };
  api.create('namespaces', namespace('shop'));
  for (const n of c.nodeObjects()) api.create('nodes', structuredClone(n) as KubeObject);
  api.create('pods', podObj('shop/db', { app: 'db' }));
  api.create('pods', podObj('shop/web', { app: 'web' }));
  api.create('pods', podObj('shop/client', { app: 'client' }));
  // Staged: db admits web only (client would be denied). Enforced: client may send
  // nothing; staged: client may reach db on 80 (would be allowed).
  const dbFromWeb = networkPolicy('shop', 'db-from-web', {
    podSelector: { matchLabels: { app: 'db' } },
    ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }] }],
  });
  api.create('networkpolicies', staged(dbFromWeb));
  api.create(
    'networkpolicies',
    networkPolicy('shop', 'client-no-egress', { podSelector: { matchLabels: { app: 'client' } }, policyTypes: ['Egress'] }),
  );
  const clientToDb = networkPolicy('shop', 'client-to-db', {
    podSelector: { matchLabels: { app: 'client' } },
    policyTypes: ['Egress'],
    egress: [{ to: [{ podSelector: { matchLabels: { app: 'db' } } }], ports: [{ protocol: 'TCP', port: 80 }] }],
  });
  api.create('networkpolicies', staged(clientToDb));

  for (const n of c.nodes)
    agents.push(AgentProcess.start({ node: n.name, netns: n.netns, kubeconfig: s.kubeconfig, args: ['--log-denied'] }));
  for (const a of agents) await a.waitReady(30_000);
  const [node1, node2] = agents as [AgentProcess, AgentProcess];
  const stagedEntries = async (a: AgentProcess): Promise<StagedEntry[]> => {
    const r = await a.get('/debug/denied?staged=1');
    assert.equal(r.status, 200, r.body);
    return (JSON.parse(r.body) as { entries: StagedEntry[] }).entries;
  };
  for (const a of agents)
    await eventually('NFLOG reader running', async () => {
      const r = JSON.parse((await a.get('/debug/denied')).body) as { reader: { running: boolean } | null };
      return r.reader?.running === true;
    });

  const probe = (from: string, port: number): Probe => ({ from, to: 'shop/db', protocol: 'TCP', port, family: 4, via: 'pod' });
  const probes = [probe('shop/web', 80), probe('shop/client', 80), probe('shop/client', 81)];
  // As enforced: web connects; client is denied (egress) on both ports.
  const connects = (p: Probe): boolean => p.from === 'shop/web';
  const outcomes = await runProbes(c, probes, { expect: (r) => connects(r.probe) });
  for (const o of outcomes) assert.equal(o.connected, connects(o.probe), `${o.probe.from} -> db:${o.probe.port}: ${o.detail}`);
  // And web again, then client's denied attempts once more: only new connections are judged.
  await runProbes(c, [probe('shop/web', 81)], { expect: () => true });

  // node-1 (db's ingress): web is allowed by the staged policy too: nothing listed. client never reaches db.
  // node-2 (client's egress): 80 would be allowed by client-to-db; 81 stays denied: not listed.
  let e2: StagedEntry[] = [];
  await eventually('would allow in /debug/denied?staged=1', async () => {
    e2 = await stagedEntries(node2);
    return e2.length > 0;
  }).catch((e: unknown) => assert.fail(`${String(e)}\n${node2.tail(30)}`));
  assert.deepEqual(
    e2.map((e) => [e.change, e.direction, e.pod, e.port, e.stagedPolicies]),
    [['would-allow', 'egress', 'shop/client', 80, ['shop/client-to-db']]],
  );
  assert.match(e2[0]!.stagedRule ?? '', /client-to-db/);
  assert.match(e2[0]!.reason, /^egress at shop\/client: would allow by /);
  assert.deepEqual(await stagedEntries(node1), [], 'web -> db: the staged policy allows it as well');
  assert.ok(
    (await node2.metric('nftnp_staged_verdict_changes_total', {
      namespace: 'shop',
      policy: 'client-to-db',
      change: 'would-allow',
    })) >= 1,
  );
  assert.equal(
    node2.lines.filter((l) => l['event'] === 'staged' && l['change'] === 'would-allow').length,
    1,
    'one log line per new change',
  );

  // Would deny: web relabelled out of db-from-web's peers (client-no-egress keeps client from reaching db).
  api.update('pods', podObj('shop/web', { app: 'other' }));
  await eventually('web still connects and is listed as would deny', async () => {
    const [o] = await runProbes(c, [probe('shop/web', 80)], { expect: () => true });
    assert.equal(o!.connected, true, 'a staged policy never blocks');
    const e1 = await stagedEntries(node1);
    // node-1 watches only the pods its policies name: web, relabelled, is an address there now.
    return e1.some((e) => e.change === 'would-deny' && e.srcIP === c.pod('shop/web').ips.v4 && e.port === 80);
  }).catch((e: unknown) => assert.fail(`${String(e)}\n${node1.tail(30)}`));
  const wd = (await stagedEntries(node1)).find((e) => e.change === 'would-deny')!;
  assert.deepEqual(wd.stagedPolicies, ['shop/db-from-web']);
  assert.match(wd.reason, /^ingress at shop\/db: would deny by shop\/db-from-web: .*isolated for ingress/);
  assert.ok(
    (await node1.metric('nftnp_staged_verdict_changes_total', {
      namespace: 'shop',
      policy: 'db-from-web',
      change: 'would-deny',
    })) >= 1,
  );

  // The `denied --staged` command reads the same endpoint.
  const debugPort = (await node1.ports()).debug;
  const cli = await execa(process.execPath, ['src/cli/main.ts', 'denied', '--staged', '--addr', `127.0.0.1:${debugPort}`], {
    reject: false,
  });
  assert.equal(cli.exitCode, 0, cli.stderr);
  assert.ok(
    cli.stdout.includes(`would deny ingress ${c.pod('shop/web').ips.v4} -> shop/db (${c.pod('shop/db').ips.v4}) 80/TCP`),
    cli.stdout,
  );

  // Unstaged: enforced in one incremental transaction; web is now denied at db.
  const applied = node1.lines.filter((l) => l['event'] === 'apply').length;
  api.update('networkpolicies', dbFromWeb);
  await eventually(
    'node-1 applied the unstaged policy',
    () => node1.lines.filter((l) => l['event'] === 'apply').length > applied,
  );
  const last = node1.lines.filter((l) => l['event'] === 'apply').at(-1)!;
  assert.equal(last['mode'], 'incremental', JSON.stringify(last));
  const [after] = await runProbes(c, [probe('shop/web', 80)], { expect: () => false });
  assert.equal(after!.connected, false, 'enforced now');
});
