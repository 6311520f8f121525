// Traffic a ClusterNetworkPolicy Deny rule denies, made visible with real
// packets: real agent processes with --log-denied (reading a manifest
// directory) in the node namespaces of a simulated two-node cluster, real
// connection attempts denied by an Admin rule at ingress (over a
// NetworkPolicy that allows them) and by a Baseline rule at egress, IPv4 and
// IPv6, TCP and UDP; then /debug/denied, the log lines, the node's deny
// counters and the `denied` command name the deciding rule. Needs root, nft,
// ip and tcpdump: skipped locally without them, failing in CI.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { namespace, pod, type KubeObject } from '../support/fake-apiserver.ts';
import { Cluster } from '../harness/cluster.ts';
import { runProbes, type Probe } from '../harness/probe.ts';
import { requireDatapath, IN_CI } from '../harness/requirements.ts';
import { AgentProcess, eventually, listTableIn, scratch, type LogLine } from './agent-process.ts';
import type { Family, Protocol } from '../../src/model/types.ts';

interface EntryJson {
  readonly direction: string;
  readonly pod: string;
  readonly src: string;
  readonly srcIP: string;
  readonly dst: string;
  readonly dstIP: string;
  readonly protocol: string;
  readonly port: number | null;
  readonly count: number;
  readonly reason: string;
  readonly rule: Record<string, unknown> | null;
}

const ADMIN_REASON = 'denied by ClusterNetworkPolicy guard-db (Admin tier, priority 5) ingress rule 1 "no-web-81"';
const BASELINE_REASON = 'denied by ClusterNetworkPolicy web-default (Baseline tier, priority 20) egress rule 0 "no-db-82"';

test(
  'ClusterNetworkPolicy denials: the deciding rule in /debug/denied, logs, counters and the denied command',
  { timeout: 300_000 },
  async (t) => {
    if (!requireDatapath(t)) return;
    if ((await execa('tcpdump', ['--version'], { reject: false })).exitCode !== 0) {
      if (IN_CI) assert.fail('tcpdump is required (Debian package tcpdump, in .ci/apt-packages)');
      t.skip('tcpdump is not installed');
      return;
    }
    const c = await Cluster.create({
      style: 'routed',
      nodes: [{ name: 'node-1' }, { name: 'node-2' }],
      pods: [
        { key: 'shop/db', node: 'node-1', tcp: [81, 82], udp: [81, 82] },
        { key: 'shop/web', node: 'node-2' },
        { key: 'shop/other', node: 'node-2' },
      ],
    });
    const s = await scratch(undefined);
    const agents: AgentProcess[] = [];
    t.after(async () => {
      for (const a of agents) await a.terminate();
      await c.destroy();
      await s.cleanup();
    });
    const dir = join(s.dir, 'manifests');
    await mkdir(dir);
    const objects: KubeObject[] = [namespace('shop', { 'kubernetes.io/metadata.name': 'shop' })];
    for (const n of c.nodeObjects()) objects.push(structuredClone(n) as KubeObject);
    for (const [key, labels] of [
      ['shop/db', { app: 'db' }],
      ['shop/web', { app: 'web' }],
      ['shop/other', { app: 'other' }],
    ] as const) {
      const p = c.pod(key);
      objects.push(pod(p.namespace, p.name, labels, p.node, p.ips.v4, { ips: [p.ips.v4, p.ips.v6] }));
    }
    const web = { pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: 'web' } } } };
    const db = { pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: 'db' } } } };
    const both = (port: number) => [
      { tcp: { destinationPort: { number: port } } },
      { udp: { destinationPort: { number: port } } },
    ];
    objects.push(
      // The namespace's own policy allows web to db on every port...
      {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { namespace: 'shop', name: 'db-from-web' },
        spec: {
          podSelector: { matchLabels: { app: 'db' } },
          ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }] }],
        },
      },
      // ... the Admin tier denies port 81 (an Accept of port 80 first: rule 1 decides).
      {
        apiVersion: 'policy.networking.k8s.io/v1alpha2',
        kind: 'ClusterNetworkPolicy',
        metadata: { name: 'guard-db' },
        spec: {
          tier: 'Admin',
          priority: 5,
          subject: db,
          ingress: [
            { name: 'web-80', action: 'Accept', from: [web], protocols: both(80) },
            { name: 'no-web-81', action: 'Deny', from: [web], protocols: both(81) },
          ],
        },
      },
      // The Baseline tier denies web's egress to db port 82 (web is not isolated by any NetworkPolicy).
      {
        apiVersion: 'policy.networking.k8s.io/v1alpha2',
        kind: 'ClusterNetworkPolicy',
        metadata: { name: 'web-default' },
        spec: {
          tier: 'Baseline',
          priority: 20,
          subject: web,
          egress: [{ name: 'no-db-82', action: 'Deny', to: [db], protocols: both(82) }],
        },
      },
    );
    for (const [i, o] of objects.entries()) await writeFile(join(dir, `${String(i).padStart(2, '0')}.json`), JSON.stringify(o));

    for (const n of c.nodes) {
      const a = AgentProcess.start({ node: n.name, netns: n.netns, fromDir: dir, args: ['--log-denied'] });
      agents.push(a);
    }
    for (const a of agents) await a.waitReady(30_000);
    const [node1, node2] = agents as [AgentProcess, AgentProcess];
    const denied = async (a: AgentProcess): Promise<{ reader: { running: boolean } | null; entries: EntryJson[] }> => {
      const r = await a.get('/debug/denied');
      assert.equal(r.status, 200, r.body);
      return JSON.parse(r.body) as { reader: { running: boolean } | null; entries: EntryJson[] };
    };
    for (const a of agents) await eventually('NFLOG reader running', async () => (await denied(a)).reader?.running === true);
    const table = (await listTableIn(c.nodes[0]!.netns)) ?? '';
    assert.match(table, /limit name "denied-log" log prefix "cnp:[0-9a-f]{12}:IN:1" group \d+ snaplen 128/);
    assert.ok(!/log prefix "[^"]*(guard|web|db)/.test(table), 'no Kubernetes name in a log prefix');

    const probes: Probe[] = [];
    const expected = new Map<Probe, boolean>();
    for (const family of [4, 6] as Family[]) {
      for (const protocol of ['TCP', 'UDP'] as Protocol[]) {
        for (const [port, ok] of [
          [80, true],
          [81, false],
          [82, false],
        ] as const) {
          const p: Probe = { from: 'shop/web', to: 'shop/db', protocol, port, family, via: 'pod' };
          probes.push(p);
          expected.set(p, ok);
        }
        // Another pod: allowed nowhere by the NetworkPolicy, so denied by db's pod chain (not a CNP rule).
        const o: Probe = { from: 'shop/other', to: 'shop/db', protocol, port: 81, family, via: 'pod' };
        probes.push(o);
        expected.set(o, false);
      }
    }
    if (process.env['KEEP'] !== undefined) {
      console.log(dir, (await listTableIn(c.nodes[0]!.netns)) ?? '');
      console.log(node1.tail(40));
    }
    for (const o of await runProbes(c, probes, { expect: (r) => expected.get(r.probe) === true }))
      assert.equal(
        o.connected,
        expected.get(o.probe),
        `${o.probe.from} -> ${o.probe.to} ${o.probe.protocol}/${o.probe.port} IPv${o.probe.family}: ${o.detail}`,
      );

    const ip = (key: string, f: Family): string => (f === 4 ? c.pod(key).ips.v4 : c.pod(key).ips.v6);
    for (const family of [4, 6] as Family[]) {
      for (const protocol of ['TCP', 'UDP']) {
        for (const [a, direction, port, reason, tier, name, ruleName, index] of [
          [node1, 'ingress', 81, ADMIN_REASON, 'Admin', 'guard-db', 'no-web-81', 1],
          [node2, 'egress', 82, BASELINE_REASON, 'Baseline', 'web-default', 'no-db-82', 0],
        ] as const) {
          const what = `${direction} ${protocol}/${port} IPv${family}`;
          const match = (e: Readonly<Record<string, unknown>>): boolean =>
            e['srcIP'] === ip('shop/web', family) &&
            e['dstIP'] === ip('shop/db', family) &&
            e['protocol'] === protocol &&
            e['port'] === port;
          let found: EntryJson[] = [];
          await eventually(`${what} in /debug/denied`, async () => {
            found = (await denied(a)).entries.filter((x) => match(x as unknown as Readonly<Record<string, unknown>>));
            return found.length > 0;
          }).catch((e: unknown) => assert.fail(`${String(e)}\n${a.tail(20)}`));
          assert.equal(found.length, 1, `${what}: one entry`);
          const e = found[0]!;
          assert.equal(e.direction, direction);
          assert.equal(e.pod, direction === 'ingress' ? 'shop/db' : 'shop/web', what);
          assert.equal(e.reason, `${direction} at ${e.pod}: ${reason}`, what);
          assert.deepEqual(
            [e.rule?.['kind'], e.rule?.['name'], e.rule?.['tier'], e.rule?.['ruleName'], e.rule?.['index']],
            ['ClusterNetworkPolicy', name, tier, ruleName, index],
          );
          const lines = a.lines.filter((l: LogLine) => l['event'] === 'denied' && match(l));
          assert.equal(lines.length, 1, `${what}: one log line`);
          assert.equal(lines[0]?.['reason'], e.reason);
        }
        // The pod chain's deny path still names the NetworkPolicy side.
        const other = (await denied(node1)).entries.find(
          (e) => e.srcIP === ip('shop/other', family) && e.protocol === protocol && e.port === 81,
        );
        assert.ok(other !== undefined && other.rule === null, JSON.stringify(other));
        assert.match(other.reason, /isolated for ingress by shop\/db-from-web/);
      }
    }
    // The node's deny counters include the rule chains' drops.
    assert.ok((await node2.metric('nftnp_denied_packets_total', { direction: 'egress' })) >= 4);
    assert.ok((await node1.metric('nftnp_denied_packets_total', { direction: 'ingress' })) >= 8);

    // The `denied` command prints the same reason.
    const cli = await execa(
      process.execPath,
      ['src/cli/main.ts', 'denied', '--addr', `127.0.0.1:${(await node1.ports()).debug}`, '--pod', 'shop/db'],
      { reject: false },
    );
    assert.equal(cli.exitCode, 0, cli.stderr);
    assert.match(cli.stdout, /ingress shop\/web \(10\.[0-9.]+\) -> shop\/db \([0-9.]+\) 81\/TCP/);
    assert.ok(cli.stdout.includes(`ingress at shop/db: ${ADMIN_REASON}`), cli.stdout);
  },
);
