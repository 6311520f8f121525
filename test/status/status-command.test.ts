// The `status` command against the test API server (no agent: the node's
// status object and Lease are written here as an agent would): the tenancy
// kinds named kubectl-style, lagging generations, and CRDs that are not
// installed (no objects, not an error).
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { parse as parseYaml } from 'yaml';
import { statusCommand } from '../../src/cli/status.ts';
import { FakeApiServer, namespace, node, pod, type KubeObject } from '../support/fake-apiserver.ts';

const AGENT_NS = 'nft-netpol-system';

async function server(t: TestContext, crds?: readonly string[]): Promise<FakeApiServer> {
  const api = await FakeApiServer.start(crds === undefined ? {} : { crds });
  t.after(() => api.close());
  api.create('namespaces', namespace('shop'));
  api.create('namespaces', namespace('cart', { 'kubesphere.io/workspace': 'acme' }));
  api.create('nodes', node('node-1', ['172.18.0.11']));
  api.create('pods', pod('shop', 'web', { app: 'web' }, 'node-1', '10.244.1.10'));
  api.create('pods', pod('cart', 'api', { app: 'api' }, 'node-1', '10.244.1.11'));
  api.create('leases', {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { namespace: AGENT_NS, name: 'node-1' },
    spec: { holderIdentity: 'nft-netpol-agent/node-1', leaseDurationSeconds: 90, renewTime: new Date().toISOString() },
  });
  return api;
}

function reports(api: FakeApiServer, policies: readonly Record<string, unknown>[]): void {
  const obj: KubeObject = {
    apiVersion: 'nft-netpol.io/v1alpha1',
    kind: 'NodePolicyStatus',
    metadata: { name: 'node-1' },
    spec: { nodeName: 'node-1' },
    status: { inSync: true, lastApplyResult: 'Applied', policies },
  };
  if (api.get('nodepolicystatuses', undefined, 'node-1') === undefined) api.create('nodepolicystatuses', obj);
  else api.update('nodepolicystatuses', obj);
}

async function status(api: FakeApiServer, ...args: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const io = { out: (x: string) => (out += `${x}\n`), err: (x: string) => (out += `${x}\n`) };
  const code = await statusCommand([...args, '--agent-namespace', AGENT_NS], io, api.kubeConfig());
  return { code, out };
}

const nsnp = (port: number): KubeObject => ({
  apiVersion: 'network.kubesphere.io/v1alpha1',
  kind: 'NamespaceNetworkPolicy',
  metadata: { namespace: 'shop', name: 'p' },
  spec: { ingress: [{ from: [{ namespace: { name: 'shop' } }], ports: [{ port }] }] },
});

test('status command: a NamespaceNetworkPolicy in force at its generation, then lagging after an edit', async (t) => {
  const api = await server(t);
  const created = api.create('namespacenetworkpolicies', nsnp(80));
  const entry = (generation: number) => ({
    kind: 'NamespaceNetworkPolicy',
    namespace: 'shop',
    name: 'p',
    uid: created.metadata.uid,
    generation,
    appliedTime: new Date().toISOString(),
    localPods: 1,
  });
  reports(api, [entry(1)]);
  const ok = await status(api, '-n', 'shop', 'nsnp/p');
  assert.equal(ok.code, 0, ok.out);
  assert.match(ok.out, /^NamespaceNetworkPolicy shop\/p \(generation 1\)\n {2}in force on 1 of 1 nodes/);
  api.update('namespacenetworkpolicies', nsnp(81));
  const lag = await status(api, 'namespacenetworkpolicy', 'p', '-n', 'shop');
  assert.equal(lag.code, 3, lag.out);
  assert.match(lag.out, /\(generation 2\)\n {2}in force on 0 of 1 nodes.*\n {2}lagging: node-1 has generation 1 since/);
  const summary = await status(api);
  assert.equal(summary.code, 3, summary.out);
  assert.match(summary.out, /NamespaceNetworkPolicy shop\/p: 0\/1 nodes; lagging: node-1 \(gen 1\)/);
  // Checking NetworkPolicies only (agents run with --no-tenancy): nothing to lag.
  assert.equal((await status(api, '--no-tenancy')).code, 0);
  const missing = await status(api, '-n', 'shop', 'nsnp/nope');
  assert.equal(missing.code, 1);
  assert.match(missing.out, /NamespaceNetworkPolicy shop\/nope not found/);
});

test('status command: a workspace isolation the node does not report lags; ns/NAME of a namespace without isolation is not found', async (t) => {
  const api = await server(t);
  api.create('workspaces', {
    apiVersion: 'tenant.kubesphere.io/v1alpha1',
    kind: 'Workspace',
    metadata: { name: 'acme' },
    spec: { networkIsolation: true },
  });
  reports(api, []);
  const ws = await status(api, 'workspace/acme');
  assert.equal(ws.code, 3, ws.out);
  assert.match(ws.out, /^workspace isolation of acme \(ns cart\) \(generation 1\)\n.*\n {2}lagging: node-1 reports no version/);
  const uid = api.get('workspaces', undefined, 'acme')?.metadata.uid;
  reports(api, [
    { kind: 'WorkspaceIsolation', namespace: 'cart', name: 'acme', uid, generation: 1, appliedTime: 't', localPods: 1 },
  ]);
  assert.equal((await status(api, 'ns', 'cart')).code, 0);
  const none = await status(api, 'ns/shop');
  assert.equal(none.code, 1);
  assert.match(none.out, /namespace shop not found or not isolated/);
});

test('status command: tenancy CRDs not installed count as no objects', async (t) => {
  const api = await server(t, []);
  reports(api, []);
  const r = await status(api);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /Everything is in force/);
});

test('status command: -o json and -o yaml hold invalid fields and failures as {object, path, message}', async (t) => {
  const api = await server(t);
  api.create('networkpolicies', {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { namespace: 'shop', name: 'web' },
    spec: { podSelector: { matchLabels: { app: 'web' } }, ingress: [{ ports: [{ port: 8080, endPort: 8000 }] }] },
  });
  reports(api, []);
  const expected = [
    { object: 'NetworkPolicy shop/web', path: 'spec.ingress[0].ports[0].endPort', message: 'must be >= port (8080)' },
  ];
  for (const format of ['json', 'yaml']) {
    for (const args of [
      ['-o', format],
      ['shop/web', '-o', format],
    ]) {
      let out = '';
      const code = await statusCommand(
        [...args, '--agent-namespace', AGENT_NS],
        { out: (x) => (out += x), err: () => {} },
        api.kubeConfig(),
      );
      assert.equal(code, 3, args.join(' '));
      const doc = (format === 'json' ? JSON.parse(out) : parseYaml(out)) as { errors: unknown };
      assert.deepEqual(doc.errors, expected, args.join(' '));
    }
    let out = '';
    const code = await statusCommand(
      ['shop/nope', '-o', format, '--agent-namespace', AGENT_NS],
      { out: (x) => (out += x), err: () => {} },
      api.kubeConfig(),
    );
    assert.equal(code, 1);
    const doc = (format === 'json' ? JSON.parse(out) : parseYaml(out)) as { errors: unknown };
    assert.deepEqual(doc.errors, [{ object: 'NetworkPolicy shop/nope', path: '', message: 'NetworkPolicy shop/nope not found' }]);
  }
});
