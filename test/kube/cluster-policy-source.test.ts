// KubeClusterSource and ClusterNetworkPolicies (plus the legacy v1alpha1
// AdminNetworkPolicy / BaselineAdminNetworkPolicy) against the fake API
// server through the unmodified client: CRDs absent at start and installed
// later, removed again (the cache stays: fail closed), the peer plan
// following their pod peers, and every Node watched only while a nodes peer
// needs it.
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeClusterSource } from '../../src/kube/kube-source.ts';
import type { KubeSourceOptions } from '../../src/kube/kube-source.ts';
import { clusterNetworkPolicy, FakeApiServer, namespace, node, pod, waitFor } from '../support/fake-apiserver.ts';
import type { KubeObject } from '../support/fake-apiserver.ts';

const FAST = { restartInitialMs: 20, restartMaxMs: 200, reconnectMaxMs: 50, idleTimeoutMs: 0, listTimeoutMs: 5_000 };
const CNP_CRD = 'clusternetworkpolicies.policy.networking.k8s.io';

let api: FakeApiServer | undefined;
const sources: KubeClusterSource[] = [];

afterEach(async () => {
  for (const s of sources.splice(0)) await s.stop();
  await api?.close();
  api = undefined;
});

async function serve(crds: readonly string[]): Promise<FakeApiServer> {
  const a = await FakeApiServer.start({ bookmarkIntervalMs: 0, crds });
  a.create('namespaces', namespace('shop', { team: 'a' }));
  a.create('namespaces', namespace('ops', { purpose: 'monitoring' }));
  a.create('nodes', node('node-1', ['192.168.0.1']));
  a.create('nodes', node('node-2', ['192.168.0.2']));
  a.create('pods', pod('shop', 'web-1', { app: 'web' }, 'node-1', '10.0.1.1'));
  a.create('pods', pod('shop', 'db-1', { app: 'db' }, 'node-2', '10.0.2.1'));
  a.create('pods', pod('ops', 'mon-1', { app: 'mon' }, 'node-2', '10.0.2.4'));
  api = a;
  return a;
}

async function started(a: FakeApiServer, opts: Partial<KubeSourceOptions> = {}): Promise<KubeClusterSource> {
  const s = new KubeClusterSource({
    kubeConfig: a.kubeConfig(),
    nodeName: 'node-1',
    timing: FAST,
    planDebounceMs: 5,
    crdProbeMs: 50,
    ...opts,
  });
  sources.push(s);
  await s.start();
  await waitFor(() => s.synced(), 'synced');
  return s;
}

/** Admin: pods of shop accept ingress from the monitoring pods (a pods peer: a peer-plan demand). */
const FROM_MONITORING_SPEC = {
  tier: 'Admin',
  priority: 5,
  subject: { namespaces: { matchLabels: { team: 'a' } } },
  ingress: [
    {
      action: 'Accept',
      from: [
        { pods: { namespaceSelector: { matchLabels: { purpose: 'monitoring' } }, podSelector: { matchLabels: { app: 'mon' } } } },
      ],
    },
  ],
};
const FROM_MONITORING = clusterNetworkPolicy('from-monitoring', FROM_MONITORING_SPEC);

const names = (s: KubeClusterSource): string[] => (s.snapshot().clusterPolicies ?? []).map((p) => `${p.sourceKind}/${p.name}`);
const peerKeys = (s: KubeClusterSource): string[] => (s.peerPlan()?.watches ?? []).map((w) => w.key);
const nodeNames = (s: KubeClusterSource): string[] => s.snapshot().nodes.map((n) => n.name);

test('CRD absent at start: synced without it; installed later: picked up, its peers planned; removed: its cache stays', async () => {
  const a = await serve([]);
  const s = await started(a);
  assert.deepEqual(names(s), []);
  assert.ok(s.status().some((w) => w.resource === 'clusternetworkpolicies (not installed)' && w.synced));
  assert.deepEqual(peerKeys(s), []);

  a.installCRDs([CNP_CRD]);
  a.create('clusternetworkpolicies', FROM_MONITORING);
  await waitFor(() => names(s).length === 1, 'the CNP after its CRD appeared');
  assert.deepEqual(names(s), ['ClusterNetworkPolicy/from-monitoring']);
  assert.deepEqual(s.snapshot().clusterPolicies?.[0]?.errors, []);
  // Its pods peer selects pods of ops cluster-wide: a watch of app=mon in ops, and the pod in the snapshot.
  await waitFor(() => peerKeys(s).includes('ops|app=mon'), 'peer watch of the CNP');
  await waitFor(() => s.snapshot().pods.some((p) => p.name === 'mon-1'), 'the peer pod');
  // The legacy kinds are still not installed (only the CNP CRD is).
  assert.ok(s.status().some((w) => w.resource === 'adminnetworkpolicies (not installed)'));

  // The CRD goes away: the watch fails and retries, and what was in force stays in force.
  a.removeCRDs([CNP_CRD]);
  a.endStreams('clusternetworkpolicies');
  await waitFor(
    () => s.status().find((w) => w.resource === 'clusternetworkpolicies')?.lastError !== undefined,
    'the watch noticing the removal',
  );
  assert.deepEqual(names(s), ['ClusterNetworkPolicy/from-monitoring']);
});

test('installed: CNPs and the legacy kinds in one sorted list; updates, invalid objects and deletes flow through', async () => {
  const a = await serve(['policy.networking.k8s.io']);
  a.create('clusternetworkpolicies', FROM_MONITORING);
  a.create('adminnetworkpolicies', {
    apiVersion: 'policy.networking.k8s.io/v1alpha1',
    kind: 'AdminNetworkPolicy',
    metadata: { name: 'from-monitoring' },
    spec: { priority: 1, subject: { namespaces: {} }, egress: [{ action: 'Deny', to: [{ networks: ['169.254.169.254/32'] }] }] },
  } as KubeObject);
  a.create('baselineadminnetworkpolicies', {
    apiVersion: 'policy.networking.k8s.io/v1alpha1',
    kind: 'BaselineAdminNetworkPolicy',
    metadata: { name: 'default' },
    spec: { subject: { namespaces: {} }, ingress: [{ action: 'Deny', from: [{ namespaces: { matchLabels: { team: 'b' } } }] }] },
  } as KubeObject);
  const s = await started(a);
  // By name, then by kind: names may repeat across kinds.
  assert.deepEqual(names(s), [
    'BaselineAdminNetworkPolicy/default',
    'AdminNetworkPolicy/from-monitoring',
    'ClusterNetworkPolicy/from-monitoring',
  ]);

  // synced() waited for the CNP's peer watch (its plan came after the CNP list).
  assert.ok(peerKeys(s).includes('ops|app=mon'));
  assert.ok(s.snapshot().pods.some((p) => p.name === 'mon-1'));
  // Every version is kept for applied status.
  assert.equal(s.snapshot().clusterPolicies?.find((p) => p.sourceKind === 'ClusterNetworkPolicy')?.version?.generation, 1);

  // An object the API server would reject still arrives (e.g. from an older CRD): kept, fail closed, errors in the snapshot.
  a.update('clusternetworkpolicies', clusterNetworkPolicy('from-monitoring', { ...FROM_MONITORING_SPEC, priority: 5000 }));
  await waitFor(() => (s.snapshot().clusterPolicies ?? []).some((p) => p.errors.length > 0), 'the invalid update');
  const bad = s.snapshot().clusterPolicies?.find((p) => p.sourceKind === 'ClusterNetworkPolicy');
  assert.deepEqual(
    bad?.errors.map((e) => `${e.kind} ${e.path}`),
    ['ClusterNetworkPolicy spec.priority'],
  );
  assert.equal(bad?.ingress[0]?.invalid, true, 'its Accept rule matches nothing');

  a.delete('clusternetworkpolicies', undefined, 'from-monitoring');
  await waitFor(() => !names(s).includes('ClusterNetworkPolicy/from-monitoring'), 'the delete');
  // No policy needs the monitoring pods any more: the plan drops their watch.
  await waitFor(() => !peerKeys(s).includes('ops|app=mon'), 'peer watch dropped');
});

test('a nodes peer makes the source watch every Node, only while a policy selecting a local pod has one', async () => {
  const a = await serve([CNP_CRD]);
  const s = await started(a);
  assert.deepEqual(nodeNames(s), ['node-1']);
  const spec = {
    tier: 'Admin',
    priority: 1,
    subject: { pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: 'web' } } } },
    egress: [{ action: 'Accept', to: [{ nodes: { matchLabels: {} } }] }],
  };
  a.create('clusternetworkpolicies', clusterNetworkPolicy('to-nodes', spec));
  await waitFor(() => nodeNames(s).length === 2, 'every node');
  assert.deepEqual(nodeNames(s), ['node-1', 'node-2']);
  assert.ok(s.status().some((w) => w.resource === 'nodes'));
  // A subject with no local pod needs no nodes: the watch goes again.
  a.update(
    'clusternetworkpolicies',
    clusterNetworkPolicy('to-nodes', {
      ...spec,
      subject: { pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: 'db' } } } },
    }),
  );
  await waitFor(() => nodeNames(s).length === 1, 'only the local node');
  assert.ok(!s.status().some((w) => w.resource === 'nodes'));
});

test('clusterPolicies: false watches none of the three', async () => {
  const a = await serve(['policy.networking.k8s.io']);
  a.create('clusternetworkpolicies', FROM_MONITORING);
  const s = await started(a, { clusterPolicies: false });
  assert.equal(s.snapshot().clusterPolicies, undefined);
  assert.ok(!s.status().some((w) => w.resource.includes('networkpolicies') && w.resource !== 'networkpolicies'));
});
