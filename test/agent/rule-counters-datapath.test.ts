// Per-rule counters with real packets: a real agent (reading a manifest
// directory) in the node namespace of a simulated two-node cluster, real TCP
// connections allowed by a NetworkPolicy rule, by another rule of it, and
// denied by a ClusterNetworkPolicy rule; after each, exactly the rule that
// decided it counted more (in /debug/rules and in
// nftnp_policy_rule_connections_total). Then the counters survive an
// incremental update (a new policy) and a full reload (the table deleted
// from outside and restored): the exported counter never goes down and goes
// on counting. Needs root, nft and ip: skipped locally without them, failing in CI.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { namespace, pod, type KubeObject } from '../support/fake-apiserver.ts';
import { Cluster } from '../harness/cluster.ts';
import { runProbes, type Probe } from '../harness/probe.ts';
import { requireDatapath } from '../harness/requirements.ts';
import { runIn } from '../harness/netns.ts';
import { AgentProcess, eventually, listTableIn, scratch } from './agent-process.ts';

interface RuleJson {
  readonly kind: string;
  readonly namespace: string;
  readonly policy: string;
  readonly rule: string;
  readonly direction: string;
  readonly action: string;
  readonly hits: number;
  readonly lastHit: string | null;
}

const key = (r: Pick<RuleJson, 'kind' | 'namespace' | 'policy' | 'rule' | 'direction' | 'action'>): string =>
  `${r.kind} ${r.namespace}/${r.policy} ${r.direction} ${r.rule} ${r.action}`;

const NP0 = { kind: 'NetworkPolicy', namespace: 'shop', policy: 'db-in', rule: '0', direction: 'ingress', action: 'Allow' };
const NP1 = { ...NP0, rule: '1' };
const CNP = {
  kind: 'ClusterNetworkPolicy',
  namespace: '',
  policy: 'guard-db',
  rule: 'no-client-82',
  direction: 'ingress',
  action: 'Deny',
};
const EXTRA = { ...NP0, policy: 'db-extra' };

test(
  'per-rule counters: the deciding rule counts, no other; monotonic over incremental updates and a full reload',
  { timeout: 300_000 },
  async (t) => {
    if (!requireDatapath(t)) return;
    const c = await Cluster.create({
      style: 'routed',
      nodes: [{ name: 'node-1' }, { name: 'node-2' }],
      pods: [
        { key: 'shop/db', node: 'node-1', tcp: [82, 83] },
        { key: 'shop/web', node: 'node-2' },
        { key: 'shop/client', node: 'node-2' },
      ],
    });
    const s = await scratch(undefined);
    const agents: AgentProcess[] = [];
    t.after(async () => {
      for (const x of agents) await x.terminate();
      await c.destroy();
      await s.cleanup();
    });
    const dir = join(s.dir, 'manifests');
    await mkdir(dir);
    const objects: KubeObject[] = [namespace('shop', { 'kubernetes.io/metadata.name': 'shop' })];
    for (const n of c.nodeObjects()) objects.push(structuredClone(n) as KubeObject);
    for (const [k, labels] of [
      ['shop/db', { app: 'db' }],
      ['shop/web', { app: 'web' }],
      ['shop/client', { app: 'client' }],
    ] as const) {
      const p = c.pod(k);
      objects.push(pod(p.namespace, p.name, labels, p.node, p.ips.v4, { ips: [p.ips.v4, p.ips.v6] }));
    }
    const from = (app: string) => [{ podSelector: { matchLabels: { app } } }];
    const np = (name: string, ingress: unknown[]): KubeObject => ({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { namespace: 'shop', name },
      spec: { podSelector: { matchLabels: { app: 'db' } }, ingress },
    });
    objects.push(
      // Rule 0: web on 80; rule 1: client on 81 (and 80 too: client to 80 is rule 1's, the first allowing it).
      np('db-in', [
        { from: from('web'), ports: [{ protocol: 'TCP', port: 80 }] },
        {
          from: [...from('client'), ...from('web')],
          ports: [
            { protocol: 'TCP', port: 81 },
            { protocol: 'TCP', port: 80 },
          ],
        },
      ]),
      {
        apiVersion: 'policy.networking.k8s.io/v1alpha2',
        kind: 'ClusterNetworkPolicy',
        metadata: { name: 'guard-db' },
        spec: {
          tier: 'Admin',
          priority: 5,
          subject: { pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: 'db' } } } },
          ingress: [
            {
              name: 'no-client-82',
              action: 'Deny',
              from: [{ pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: 'client' } } } }],
              protocols: [{ tcp: { destinationPort: { number: 82 } } }],
            },
          ],
        },
      },
    );
    for (const [i, o] of objects.entries()) await writeFile(join(dir, `${String(i).padStart(2, '0')}.json`), JSON.stringify(o));

    const node1 = c.nodes.find((n) => n.name === 'node-1')!;
    // Only node-1 enforces (db's node); the counters are read every second here.
    const a = AgentProcess.start({ node: 'node-1', netns: node1.netns, fromDir: dir, args: ['--rule-counters-interval', '1s'] });
    agents.push(a);
    await a.waitReady(30_000);

    const rules = async (query = ''): Promise<Map<string, RuleJson>> => {
      const r = await a.get(`/debug/rules${query}`);
      assert.equal(r.status, 200, r.body);
      const body = JSON.parse(r.body) as { rules: RuleJson[] };
      return new Map(body.rules.map((x) => [key(x), x]));
    };
    const hits = (m: Map<string, RuleJson>, r: typeof NP0): number => m.get(key(r))?.hits ?? -1;
    const metric = (r: typeof NP0): Promise<number> => a.metric('nftnp_policy_rule_connections_total', r);

    const start = await rules();
    for (const r of [NP0, NP1, CNP])
      assert.equal(hits(start, r), 0, `${key(r)} listed, never hit: ${[...start.keys()].join('; ')}`);
    assert.deepEqual([...(await rules('?unused=1')).keys()].sort(), [key(CNP), key(NP0), key(NP1)].sort());

    /** Runs the probes (asserting their outcome) and returns which rules counted more, and by how much. */
    const probe = async (probes: Probe[], ok: boolean): Promise<Map<string, number>> => {
      const before = await rules();
      for (const o of await runProbes(c, probes, { expect: () => ok }))
        assert.equal(o.connected, ok, `${o.probe.from} -> ${o.probe.to} ${o.probe.protocol}/${o.probe.port}: ${o.detail}`);
      const changed = new Map<string, number>();
      // The agent reads every second: wait for the increase to show, then for no more of it.
      await eventually('a rule counted the probes', async () => {
        const now = await rules();
        changed.clear();
        for (const [k, r] of now) if (r.hits !== (before.get(k)?.hits ?? 0)) changed.set(k, r.hits - (before.get(k)?.hits ?? 0));
        return changed.size > 0;
      });
      return changed;
    };
    const tcp = (fromKey: string, port: number): Probe => ({
      from: fromKey,
      to: 'shop/db',
      protocol: 'TCP',
      port,
      family: 4,
      via: 'pod',
    });

    // web -> db:80: NetworkPolicy rule 0 (rule 1 allows it too, but later), nothing else.
    let d = await probe([tcp('shop/web', 80)], true);
    assert.deepEqual([...d.keys()], [key(NP0)]);
    assert.ok((d.get(key(NP0)) ?? 0) >= 1);
    // client -> db:81 and :80: rule 1 only.
    d = await probe([tcp('shop/client', 81), tcp('shop/client', 80)], true);
    assert.deepEqual([...d.keys()], [key(NP1)]);
    assert.ok((d.get(key(NP1)) ?? 0) >= 2);
    // client -> db:82: the ClusterNetworkPolicy's Deny rule only.
    d = await probe([tcp('shop/client', 82)], false);
    assert.deepEqual([...d.keys()], [key(CNP)]);
    const after = await rules();
    assert.ok(after.get(key(NP0))?.lastHit !== null && after.get(key(CNP))?.lastHit !== null);
    assert.deepEqual([...(await rules('?unused=1')).keys()], []);
    await eventually('the metric follows /debug/rules', async () => (await metric(NP0)) === hits(await rules(), NP0));

    // An incremental update: a new policy for db. The counters stay, and go on.
    const np0Before = await metric(NP0);
    await writeFile(
      join(dir, '99-extra.json'),
      JSON.stringify(np('db-extra', [{ from: from('web'), ports: [{ protocol: 'TCP', port: 83 }] }])),
    );
    await eventually('the new policy is applied', async () => (await rules()).has(key(EXTRA)));
    assert.ok(
      a.lines.some((l) => l['event'] === 'apply' && l['mode'] === 'incremental' && l['result'] === 'applied'),
      'applied incrementally',
    );
    assert.ok((await metric(NP0)) >= np0Before, 'not reset by the incremental update');
    d = await probe([tcp('shop/web', 83)], true);
    assert.deepEqual([...d.keys()], [key(EXTRA)]);
    d = await probe([tcp('shop/web', 80)], true);
    assert.deepEqual([...d.keys()], [key(NP0)]);
    await eventually('the metric counts on', async () => (await metric(NP0)) > np0Before);

    // A full reload: the table is deleted from outside; the agent restores it
    // whole (every kernel counter back at 0). The exported counter does not go down.
    const beforeReload = await metric(NP0);
    const cnpBefore = await metric(CNP);
    await runIn(node1.netns, 'nft', ['delete', 'table', 'inet', 'nft-netpol']);
    await eventually('the table is restored', async () => (await listTableIn(node1.netns)) !== undefined, 30_000);
    const restored = (await listTableIn(node1.netns)) ?? '';
    assert.match(
      restored,
      /chain KUBE-NWPLCY-[0-9a-f]{12}-IN-0 \{[^}]*counter packets 0 bytes 0 accept/,
      'kernel counters restarted',
    );
    assert.ok((await metric(NP0)) >= beforeReload);
    d = await probe([tcp('shop/web', 80)], true);
    assert.deepEqual([...d.keys()], [key(NP0)]);
    await eventually('the metric goes on from where it was', async () => (await metric(NP0)) > beforeReload);
    assert.equal(await metric(CNP), cnpBefore, 'a rule not hit stays where it was');

    // The rules command reads the same endpoint.
    const cli = await execa(process.execPath, ['src/cli/main.ts', 'rules', '--addr', `127.0.0.1:${(await a.ports()).debug}`], {
      reject: false,
    });
    assert.equal(cli.exitCode, 0, cli.stderr);
    const lines = cli.stdout.split('\n');
    assert.match(lines[0] ?? '', /^HITS +LAST HIT +KIND +POLICY +DIRECTION +RULE +ACTION$/);
    assert.match(lines[1] ?? '', /^\d+ +\d{4}-.* +NetworkPolicy +shop\/db-in +ingress +0 +Allow$/, cli.stdout);
    const unused = await execa(
      process.execPath,
      ['src/cli/main.ts', 'rules', '--unused', '-o', 'json', '--addr', `127.0.0.1:${(await a.ports()).debug}`],
      { reject: false },
    );
    assert.equal(unused.exitCode, 0, unused.stderr);
    assert.deepEqual(JSON.parse(unused.stdout), []);
  },
);
