// The test API server's write semantics that applied status relies on, over
// plain HTTP as any client sees them: status subresource, merge patch,
// resourceVersion preconditions (409), generation, Leases, owner-reference GC.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { FakeApiServer, networkPolicy, node, waitFor, type KubeObject } from '../support/fake-apiserver.ts';

const CR = '/apis/nft-netpol.io/v1alpha1/nodepolicystatuses';

async function setup(t: TestContext): Promise<{
  api: FakeApiServer;
  call: (
    m: string,
    p: string,
    body?: unknown,
    ct?: string,
  ) => Promise<{ status: number; body: KubeObject & { reason?: string } }>;
}> {
  const api = await FakeApiServer.start();
  t.after(() => api.close());
  const call = async (method: string, path: string, body?: unknown, ct = 'application/json') => {
    const res = await fetch(`${api.url}${path}`, {
      method,
      headers: { 'Content-Type': ct },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as KubeObject & { reason?: string } };
  };
  return { api, call };
}

test('custom resource: status is ignored on create and on the main resource; /status changes only status', async (t) => {
  const { call } = await setup(t);
  const created = await call('POST', CR, {
    apiVersion: 'nft-netpol.io/v1alpha1',
    kind: 'NodePolicyStatus',
    metadata: { name: 'n1' },
    spec: { nodeName: 'n1' },
    status: { inSync: true },
  });
  assert.equal(created.status, 201);
  assert.equal(created.body.status, undefined, 'status dropped on create');
  assert.equal(created.body.metadata.generation, 1);
  assert.equal((await call('POST', CR, { metadata: { name: 'n1' } })).body.reason, 'AlreadyExists');

  const s = await call(
    'PATCH',
    `${CR}/n1/status`,
    { status: { inSync: true, policies: [{ name: 'a' }] }, spec: { nodeName: 'x' } },
    'application/merge-patch+json',
  );
  assert.equal(s.status, 200);
  assert.deepEqual(s.body.status, { inSync: true, policies: [{ name: 'a' }] });
  assert.deepEqual(s.body.spec, { nodeName: 'n1' }, 'spec untouched through /status');
  assert.equal(s.body.metadata.generation, 1, 'a status change is no generation');

  const m = await call(
    'PATCH',
    `${CR}/n1`,
    { spec: { nodeName: 'n2' }, status: { inSync: false } },
    'application/merge-patch+json',
  );
  assert.deepEqual(m.body.status, { inSync: true, policies: [{ name: 'a' }] }, 'status untouched through the main resource');
  assert.equal(m.body.metadata.generation, 2, 'a spec change bumps the generation');

  // Merge patch: null deletes, lists replace.
  const n = await call('PATCH', `${CR}/n1/status`, { status: { inSync: null, policies: [] } }, 'application/merge-patch+json');
  assert.deepEqual(n.body.status, { policies: [] });
  assert.equal((await call('PATCH', `${CR}/n1/status`, {}, 'application/strategic-merge-patch+json')).status, 415);
  assert.equal((await call('PATCH', `${CR}/nope/status`, {}, 'application/merge-patch+json')).status, 404);
});

test('resourceVersion preconditions: a stale PUT or patch gets 409 Conflict', async (t) => {
  const { call } = await setup(t);
  const lease = {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: 'n1' },
    spec: { holderIdentity: 'a', leaseDurationSeconds: 40 },
  };
  const c = await call('POST', '/apis/coordination.k8s.io/v1/namespaces/sys/leases', lease);
  assert.equal(c.status, 201);
  const rv = c.body.metadata.resourceVersion;
  const u1 = await call('PUT', '/apis/coordination.k8s.io/v1/namespaces/sys/leases/n1', {
    ...c.body,
    spec: { holderIdentity: 'b' },
  });
  assert.equal(u1.status, 200);
  assert.notEqual(u1.body.metadata.resourceVersion, rv);
  const stale = await call('PUT', '/apis/coordination.k8s.io/v1/namespaces/sys/leases/n1', {
    ...c.body,
    spec: { holderIdentity: 'c' },
  });
  assert.equal(stale.status, 409);
  assert.equal(stale.body.reason, 'Conflict');
  const stalePatch = await call(
    'PATCH',
    '/apis/coordination.k8s.io/v1/namespaces/sys/leases/n1',
    { metadata: { resourceVersion: rv } },
    'application/merge-patch+json',
  );
  assert.equal(stalePatch.status, 409);
  // Without a resourceVersion, an update is unconditional.
  const { resourceVersion: _rv, ...meta } = c.body.metadata;
  assert.equal(
    (await call('PUT', '/apis/coordination.k8s.io/v1/namespaces/sys/leases/n1', { ...c.body, metadata: meta })).status,
    200,
  );
});

test('NetworkPolicy generation follows spec changes only', async (t) => {
  const { api } = await setup(t);
  const p = api.create('networkpolicies', networkPolicy('shop', 'p', { podSelector: {} }));
  assert.equal(p.metadata.generation, 1);
  const labelled = api.update('networkpolicies', { ...p, metadata: { ...p.metadata, labels: { a: 'b' } } });
  assert.equal(labelled.metadata.generation, 1);
  const changed = api.update('networkpolicies', { ...labelled, spec: { podSelector: { matchLabels: { a: 'b' } } } });
  assert.equal(changed.metadata.generation, 2);
});

test('owner references: dependents go with their owner, and a dangling owner is collected', async (t) => {
  const { api, call } = await setup(t);
  const n = api.create('nodes', node('n1', []));
  const owned = await call('POST', CR, {
    metadata: { name: 'n1', ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: 'n1', uid: n.metadata.uid }] },
  });
  assert.equal(owned.status, 201);
  const dangling = await call('POST', CR, {
    metadata: { name: 'n9', ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: 'n9', uid: 'uid-gone' }] },
  });
  assert.equal(dangling.status, 201, 'created, like the real server');
  await waitFor(() => api.get('nodepolicystatuses', undefined, 'n9') === undefined, 'dangling dependent collected');
  assert.ok(api.get('nodepolicystatuses', undefined, 'n1') !== undefined, 'owned object stays while its owner exists');
  // Deleting the owner (through the control API, as tests do) deletes its dependent.
  const del = await fetch(`${api.url}/_fake/objects/nodes/n1`, { method: 'DELETE' });
  assert.equal(del.status, 200);
  assert.equal(api.get('nodepolicystatuses', undefined, 'n1'), undefined, 'collected with its owner');
});
