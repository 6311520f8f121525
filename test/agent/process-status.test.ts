// Applied status with the real agent process against the test API server,
// through the seed's unusual cases (shared/seeds/002: crashes and changes in
// any order): the NodePolicyStatus must only ever claim versions the kernel
// holds, catch up after every outage, and go away with its Node. The kernel
// is checked with `nft list`; `status` is the real command, run in-process.
// Needs root, nft and ip: skipped locally without them, failing in CI.
import { createHash } from 'node:crypto';
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { statusCommand } from '../../src/cli/status.ts';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FakeApiServer, namespace, networkPolicy, type KubeObject } from '../support/fake-apiserver.ts';
import { AgentProcess, eventually, listTableIn, type Scratch } from './agent-process.ts';
import { NODE, OTHER_IP, scratchNode, WEB_IP } from './scratch-node.ts';

const AGENT_NS = 'nft-netpol-system';

const fromApp = (name: string, app: string): KubeObject =>
  networkPolicy('shop', name, {
    podSelector: { matchLabels: { app: 'db' } },
    ingress: [{ from: [{ podSelector: { matchLabels: { app } } }], ports: [{ port: 5432 }] }],
  });

interface Entry {
  readonly kind?: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly generation: number;
  readonly resourceVersion: string;
  readonly appliedTime: string;
  readonly localPods: number;
  readonly invalidFields?: string[];
}

interface Env {
  readonly api: FakeApiServer;
  readonly netns: string;
  readonly s: Scratch;
  start(extra?: { nft?: string }): AgentProcess;
  status(): { inSync?: boolean; policies?: Entry[]; lastApplyResult?: string; rulesetHash?: string } | undefined;
  entry(name: string): Entry | undefined;
  kernelHas(text: string): Promise<boolean>;
  /** `nft-netpol-agent status ARGS` against the test API server: exit code and output. */
  cli(...args: string[]): Promise<{ code: number; out: string }>;
}

async function setup(t: TestContext): Promise<Env | undefined> {
  const n = await scratchNode(t, 'st');
  if (n === undefined) return undefined;
  const { api, netns } = n;
  const status = (): ReturnType<Env['status']> =>
    api.get('nodepolicystatuses', undefined, NODE)?.status as ReturnType<Env['status']>;
  return {
    ...n,
    start: (extra = {}) =>
      n.start(
        ['--drift-interval', '1s', '--status-interval', '200ms', '--heartbeat-interval', '1s', '--agent-namespace', AGENT_NS],
        extra.nft,
      ),
    status,
    entry: (name) => status()?.policies?.find((e) => e.name === name),
    kernelHas: async (text) => (await listTableIn(netns))?.includes(text) ?? false,
    async cli(...args) {
      let out = '';
      const io = { out: (x: string) => (out += `${x}\n`), err: (x: string) => (out += `${x}\n`) };
      const code = await statusCommand([...args, '--agent-namespace', AGENT_NS], io, api.kubeConfig());
      return { code, out };
    },
  };
}

const gen = (api: FakeApiServer, name: string): number => Number(api.get('networkpolicies', 'shop', name)?.metadata.generation);

test(
  'status process: reported after apply, with a Lease; a policy created while the agent was down appears after start',
  {
    timeout: 90_000,
  },
  async (t) => {
    const e = await setup(t);
    if (e === undefined) return;
    e.api.create('networkpolicies', fromApp('allow-web', 'web'));
    const a = e.start();
    await eventually('status of allow-web', () => e.entry('allow-web')?.generation === 1);
    assert.ok(await e.kernelHas(WEB_IP));
    const obj = e.api.get('nodepolicystatuses', undefined, NODE);
    const owners = obj?.metadata.ownerReferences as { uid: string }[] | undefined;
    assert.equal(owners?.[0]?.uid, e.api.get('nodes', undefined, NODE)?.metadata.uid);
    const s = e.status();
    assert.equal(s?.inSync, true);
    assert.equal(s?.lastApplyResult, 'Applied');
    assert.match(s?.rulesetHash ?? '', /^sha256:[0-9a-f]{64}$/);
    // The hash (made in slices before the write) is the sha256 of the script in force.
    const rs = JSON.parse((await a.get('/debug/ruleset')).body) as { ruleset: string };
    assert.equal(s?.rulesetHash, `sha256:${createHash('sha256').update(rs.ruleset).digest('hex')}`);
    assert.equal(e.entry('allow-web')?.localPods, 1);
    assert.equal(e.entry('allow-web')?.uid, e.api.get('networkpolicies', 'shop', 'allow-web')?.metadata.uid);
    const lease = e.api.get('leases', AGENT_NS, NODE);
    assert.equal((lease?.spec as { holderIdentity?: string }).holderIdentity, `nft-netpol-agent/${NODE}`);
    const summary = await e.cli();
    assert.equal(summary.code, 0, summary.out);
    assert.match(summary.out, /Nodes: 1: 1 in sync, 0 lagging, 0 agents not reporting/);

    // A policy that selects nothing on this node: applied (unchanged ruleset), and no status write.
    const patches = (): number => e.api.requests.filter((r) => r.method === 'PATCH' && r.path.endsWith(`/${NODE}/status`)).length;
    const before = patches();
    const unchanged = a.lines.filter((l) => l['event'] === 'status' && l['unchanged'] === true).length;
    e.api.create('namespaces', namespace('elsewhere'));
    e.api.create('networkpolicies', networkPolicy('elsewhere', 'deny-all', { podSelector: {} }));
    await a.waitForLog(
      'the writer found nothing to write',
      () => a.lines.filter((l) => l['event'] === 'status' && l['unchanged'] === true).length > unchanged,
    );
    assert.equal(patches(), before, 'a policy not relevant to the node costs it no write');
    assert.equal(e.entry('deny-all'), undefined);

    a.kill('SIGTERM');
    assert.equal((await a.exited).code, 0);
    e.api.create('networkpolicies', fromApp('allow-other', 'other'));
    assert.equal(e.entry('allow-other'), undefined, 'nothing reports a policy no agent has applied');
    const lagging = await e.cli('shop/allow-other');
    assert.equal(lagging.code, 3, lagging.out);
    assert.match(lagging.out, /lagging: node-1 reports no version/);

    const b = e.start();
    await eventually('status of allow-other after start', () => e.entry('allow-other')?.generation === 1);
    assert.ok(await e.kernelHas(OTHER_IP), 'and its rules are in the kernel');
    assert.equal((await e.cli('shop/allow-other')).code, 0);
    assert.equal(b.lines.filter((l) => l['event'] === 'status' && l['level'] === 40).length, 0, 'no status write failed');
  },
);

test(
  'status process: a policy deleted while the agent was down leaves status and kernel after start; nothing blocks the delete',
  {
    timeout: 90_000,
  },
  async (t) => {
    const e = await setup(t);
    if (e === undefined) return;
    e.api.create('networkpolicies', fromApp('allow-web', 'web'));
    e.api.create('networkpolicies', fromApp('allow-other', 'other'));
    const a = e.start();
    await eventually('both reported', () => e.entry('allow-web') !== undefined && e.entry('allow-other') !== undefined);
    a.kill('SIGTERM');
    await a.exited;
    assert.ok(e.api.delete('networkpolicies', 'shop', 'allow-web'));
    assert.equal(e.api.get('networkpolicies', 'shop', 'allow-web'), undefined, 'deleted at once: no finalizer');
    assert.ok(await e.kernelHas(WEB_IP), 'the kernel still holds it while no agent runs');
    e.start();
    await eventually('entry gone', () => e.entry('allow-web') === undefined && e.entry('allow-other') !== undefined);
    assert.equal(await e.kernelHas(WEB_IP), false, 'its rules are gone from the kernel');
    assert.ok(await e.kernelHas(OTHER_IP));
    assert.equal(e.status()?.inSync, true);
  },
);

test(
  'status process: SIGKILL mid-apply never leaves a status claiming a version the kernel lacks',
  { timeout: 90_000 },
  async (t) => {
    const e = await setup(t);
    if (e === undefined) return;
    e.api.create('networkpolicies', fromApp('db', 'web'));
    const a = e.start({ nft: e.s.nft });
    await eventually('generation 1 reported', () => e.entry('db')?.generation === 1);
    await e.s.flag('slow', true);
    const v1 = e.api.get('networkpolicies', 'shop', 'db') as KubeObject;
    e.api.update('networkpolicies', { ...v1, spec: fromApp('db', 'other').spec });
    assert.equal(gen(e.api, 'db'), 2);
    const sleepingFile = join(e.s.dir, 'sleeping');
    await eventually('apply in flight', async () => (await readFile(sleepingFile, 'utf8').catch(() => '')) !== '');
    // While the transaction hangs the kernel holds generation 1, and so does the status.
    assert.equal(e.entry('db')?.generation, 1);
    assert.ok(await e.kernelHas(WEB_IP));
    a.kill('SIGKILL');
    await a.exited;
    process.kill(Number((await readFile(sleepingFile, 'utf8')).trim()), 'SIGKILL');
    assert.ok((await e.kernelHas(WEB_IP)) && !(await e.kernelHas(OTHER_IP)), 'the kernel holds generation 1, whole');
    assert.equal(e.entry('db')?.generation, 1, 'and the status says so');
    const lag = await e.cli('shop/db', '-o', 'json');
    assert.equal(lag.code, 3);
    // Its Lease (3 s at --heartbeat-interval 1s) runs out: the node is named as not reporting.
    await eventually('agent reported dead', async () => {
      const r = await e.cli('shop/db', '-o', 'json');
      return r.code === 3 && (JSON.parse(r.out) as { policy: { notReporting: string[] } }).policy.notReporting.includes(NODE);
    });
    assert.match((await e.cli()).out, /AGENTS NOT REPORTING\n {2}node-1 \(lease expired/);

    await e.s.flag('slow', false);
    e.start({ nft: e.s.nft });
    await eventually('generation 2 reported', () => e.entry('db')?.generation === 2);
    assert.ok((await e.kernelHas(OTHER_IP)) && !(await e.kernelHas(WEB_IP)), 'and in the kernel');
    assert.equal((await e.cli('shop/db')).code, 0);
  },
);

test(
  'status process: the Node deleted: its status object is garbage-collected and not recreated; enforcement goes on',
  {
    timeout: 90_000,
  },
  async (t) => {
    const e = await setup(t);
    if (e === undefined) return;
    e.api.create('networkpolicies', fromApp('db', 'web'));
    const a = e.start();
    await eventually('reported', () => e.entry('db') !== undefined);
    const table = await listTableIn(e.netns);
    e.api.delete('nodes', undefined, NODE);
    assert.equal(e.api.get('nodepolicystatuses', undefined, NODE), undefined, 'collected with its owner');
    // A later change makes the agent want to write: it finds no Node and does not recreate the object.
    e.api.create('networkpolicies', fromApp('db-2', 'other'));
    await eventually('second policy enforced', () => e.kernelHas(OTHER_IP));
    await a.waitForLog(
      'status write refused without a Node',
      (l) => l['event'] === 'status' && /does not exist/.test(String(l['error'])),
    );
    assert.equal(e.api.get('nodepolicystatuses', undefined, NODE), undefined, 'not recreated');
    assert.ok(a.alive());
    assert.ok(table?.includes(WEB_IP));
  },
);

test(
  'status process: API server unavailable: the agent keeps enforcing, status catches up after',
  { timeout: 120_000 },
  async (t) => {
    const e = await setup(t);
    if (e === undefined) return;
    e.api.create('networkpolicies', fromApp('db', 'web'));
    const a = e.start();
    await eventually('reported', () => e.entry('db')?.generation === 1);

    // Status writes fail (the API server refuses them) while the watches still work.
    e.api.failNext(1_000_000, 503, { resource: 'nodepolicystatuses', only: 'write' });
    const v1 = e.api.get('networkpolicies', 'shop', 'db') as KubeObject;
    e.api.update('networkpolicies', { ...v1, spec: fromApp('db', 'other').spec });
    await eventually('generation 2 enforced', () => e.kernelHas(OTHER_IP));
    await eventually(
      'status writes failing',
      async () => (await a.metric('nftnp_status_writes_total', { object: 'status', result: 'error' })) >= 2,
    );
    assert.equal(e.entry('db')?.generation, 1, 'the status lags, it does not lie');
    const lag = await e.cli();
    assert.equal(lag.code, 3, lag.out);
    assert.match(lag.out, /LAGGING NODES|NOT IN FORCE/);

    // Then the whole API server goes away for a while: the kernel keeps its ruleset.
    const held = await listTableIn(e.netns);
    await e.api.refuse();
    await eventually(
      'heartbeat failing',
      async () => (await a.metric('nftnp_status_writes_total', { object: 'lease', result: 'error' })) >= 1,
    );
    assert.equal(await listTableIn(e.netns), held, 'enforcement unchanged while the API server is away');
    e.api.clearFaults();
    await e.api.accept();
    await eventually('status caught up', () => e.entry('db')?.generation === 2, 60_000);
    await eventually(
      'lease renewed again',
      async () => (await a.metric('nftnp_status_writes_total', { object: 'lease', result: 'ok' })) >= 3,
    );
    const ok = await e.cli();
    assert.equal(ok.code, 0, ok.out);
    assert.ok(a.alive());
  },
);

test(
  'status process: tenancy kinds: a NamespaceNetworkPolicy applied at each generation, its invalid fields, project isolation',
  { timeout: 90_000 },
  async (t) => {
    const e = await setup(t);
    if (e === undefined) return;
    const nsnp = (name: string, spec: Record<string, unknown>): KubeObject => ({
      apiVersion: 'network.kubesphere.io/v1alpha1',
      kind: 'NamespaceNetworkPolicy',
      metadata: { namespace: 'shop', name },
      spec,
    });
    const find = (kind: string, name: string): Entry | undefined =>
      e.status()?.policies?.find((x) => x.kind === kind && x.name === name);
    // Only node-1 runs an agent here: keep shop's pods on it (a NamespaceNetworkPolicy selects them all).
    e.api.delete('pods', 'shop', 'web');
    e.api.delete('pods', 'shop', 'other');
    const a = e.start();
    await eventually('first status', () => e.status()?.inSync === true);

    const fromShop = (port: number): KubeObject =>
      nsnp('from-shop', { policyTypes: ['Ingress'], ingress: [{ from: [{ namespace: { name: 'shop' } }], ports: [{ port }] }] });
    e.api.create('namespacenetworkpolicies', fromShop(5432));
    await eventually('from-shop applied at generation 1', () => find('NamespaceNetworkPolicy', 'from-shop')?.generation === 1);
    const applied = find('NamespaceNetworkPolicy', 'from-shop');
    assert.equal(applied?.uid, e.api.get('namespacenetworkpolicies', 'shop', 'from-shop')?.metadata.uid);
    assert.equal(applied?.namespace, 'shop');
    assert.equal(applied?.localPods, 1, 'every active pod of its namespace on this node: shop/db');
    const first = await e.cli('-n', 'shop', 'nsnp/from-shop');
    assert.equal(first.code, 0, first.out);
    assert.match(first.out, /^NamespaceNetworkPolicy shop\/from-shop \(generation 1\)\n {2}in force on 1 of 1 nodes/);

    // An edit: the status follows the kernel to generation 2.
    e.api.update('namespacenetworkpolicies', fromShop(5433));
    assert.equal(e.api.get('namespacenetworkpolicies', 'shop', 'from-shop')?.metadata.generation, 2);
    await eventually('from-shop applied at generation 2', () => find('NamespaceNetworkPolicy', 'from-shop')?.generation === 2);
    assert.ok(await e.kernelHas('5433'), 'the kernel holds generation 2');
    const second = await e.cli('NamespaceNetworkPolicy', 'from-shop', '-n', 'shop', '-o', 'json');
    assert.equal(second.code, 0, second.out);
    const json = JSON.parse(second.out) as { policy: { kind: string; generation: number; inForce: string[] } };
    assert.deepEqual([json.policy.kind, json.policy.generation, json.policy.inForce], ['NamespaceNetworkPolicy', 2, [NODE]]);

    // Invalid input: a Service peer that does not exist allows nothing and is reported.
    e.api.create(
      'namespacenetworkpolicies',
      nsnp('to-nowhere', { policyTypes: ['Egress'], egress: [{ to: [{ service: { name: 'nope' } }] }] }),
    );
    const missing = /spec\.egress\[0\]\.to\[0\]\.service: Service shop\/nope not found: this peer allows nothing/;
    await eventually('to-nowhere reported invalid', () =>
      (find('NamespaceNetworkPolicy', 'to-nowhere')?.invalidFields ?? []).some((f) => missing.test(f)),
    );
    const invalid = await e.cli('nsnp', 'to-nowhere', '-n', 'shop');
    assert.equal(invalid.code, 0, invalid.out);
    assert.match(invalid.out, new RegExp(`invalid \\(enforced fail-closed\\): ${missing.source}`));

    // Project isolation: the namespace's annotation, reported at the Namespace's version.
    e.api.update('namespaces', {
      ...namespace('shop'),
      metadata: { name: 'shop', labels: {}, annotations: { 'kubesphere.io/network-isolate': 'enabled' } },
    });
    await eventually('project isolation of shop applied', () => find('ProjectIsolation', 'shop') !== undefined);
    const ns = e.api.get('namespaces', undefined, 'shop');
    assert.equal(find('ProjectIsolation', 'shop')?.uid, ns?.metadata.uid);
    assert.equal(find('ProjectIsolation', 'shop')?.resourceVersion, ns?.metadata.resourceVersion);
    const iso = await e.cli('ns/shop');
    assert.equal(iso.code, 0, iso.out);
    assert.match(iso.out, /^project isolation of ns shop\n {2}in force on 1 of 1 nodes/);

    // A NamespaceNetworkPolicy of a namespace without pods here costs this node no status write.
    const patches = (): number => e.api.requests.filter((r) => r.method === 'PATCH' && r.path.endsWith(`/${NODE}/status`)).length;
    const before = patches();
    const unchanged = a.lines.filter((l) => l['event'] === 'status' && l['unchanged'] === true).length;
    e.api.create('namespaces', namespace('elsewhere'));
    e.api.create('namespacenetworkpolicies', { ...nsnp('p', {}), metadata: { namespace: 'elsewhere', name: 'p' } });
    await a.waitForLog(
      'the writer found nothing to write',
      () => a.lines.filter((l) => l['event'] === 'status' && l['unchanged'] === true).length > unchanged,
    );
    assert.equal(patches(), before);
    const summary = await e.cli();
    assert.equal(summary.code, 0, summary.out);
    assert.match(summary.out, /Policies: 4: 4 in force everywhere, 0 not, 1 invalid/);
  },
);
