// Invalid ClusterNetworkPolicies (and the legacy ANP / BANP) are reported
// like invalid NetworkPolicies: a log line and, from the nodes whose active
// pods their subject selects, one Warning Event per change of their errors.
// They are cluster-scoped, so the Event lives in the agent's namespace and
// its involvedObject has no namespace; it is written through the real client
// to the fake API server.
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api } from '@kubernetes/client-node';
import { diffInvalid, eventMessage, invalidKey, reportsEventFor } from '../../src/agent/invalid-policies.ts';
import { kubeEventSink, policyEvent } from '../../src/agent/event-sink.ts';
import { InvalidPolicyReports } from '../../src/agent/reports.ts';
import { buildState } from '../../src/model/normalize.ts';
import type { ClusterState } from '../../src/model/types.ts';
import { FakeApiServer, namespace, pod, waitFor } from '../support/fake-apiserver.ts';
import { captureLogger, FakeEvents, testMetrics, metricValue } from './fakes.ts';

let api: FakeApiServer | undefined;
afterEach(async () => {
  await api?.close();
  api = undefined;
});

const cnp = (name: string, priority: number, subject: unknown): unknown => ({
  apiVersion: 'policy.networking.k8s.io/v1alpha2',
  kind: 'ClusterNetworkPolicy',
  metadata: { name },
  spec: { tier: 'Admin', priority, subject, egress: [{ action: 'Deny', to: [{ networks: ['10.0.0.1'] }] }] },
});

function cluster(...policies: unknown[]): ClusterState {
  return buildState([
    namespace('shop', { team: 'a' }),
    namespace('ops', { team: 'b' }),
    pod('shop', 'web-1', { app: 'web' }, 'node-1', '10.0.1.1'),
    pod('ops', 'mon-1', { app: 'mon' }, 'node-2', '10.0.2.1'),
    ...policies,
  ]).state;
}

const SHOP = { namespaces: { matchLabels: { team: 'a' } } };

test('diffInvalid lists invalid cluster policies by kind and name; only enforcing nodes report them', () => {
  const s = cluster(cnp('guard', 1, SHOP), cnp('other', 1, SHOP), {
    apiVersion: 'policy.networking.k8s.io/v1alpha1',
    kind: 'AdminNetworkPolicy',
    metadata: { name: 'guard' },
    spec: {
      priority: 1,
      subject: { pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: 'mon' } } } },
      ingress: [{ action: 'Allow', from: [{}] }],
    },
  });
  const d = diffInvalid(new Map(), s);
  assert.deepEqual(
    d.all.map((p) => [invalidKey(p), p.object?.apiVersion, p.errors.length]),
    // The state's order: by name, then kind.
    [
      ['AdminNetworkPolicy:/guard', 'policy.networking.k8s.io/v1alpha1', 1],
      ['ClusterNetworkPolicy:/guard', 'policy.networking.k8s.io/v1alpha2', 1],
      ['ClusterNetworkPolicy:/other', 'policy.networking.k8s.io/v1alpha2', 1],
    ],
  );
  const guard = d.all.find((p) => invalidKey(p) === 'ClusterNetworkPolicy:/guard');
  assert.ok(guard !== undefined);
  assert.equal(
    eventMessage(guard),
    'ClusterNetworkPolicy is invalid and enforced fail-closed (its invalid Accept rules match nothing, its invalid Deny and Pass rules everything): guard spec.egress[0].to[0].networks[0]: Invalid value: "string": Invalid CIDR format provided',
  );
  // The CNP selects shop (node-1's pod); the ANP selects app=mon (node-2's pod).
  assert.equal(reportsEventFor(s, 'node-1', 'ClusterNetworkPolicy:/guard'), true);
  assert.equal(reportsEventFor(s, 'node-2', 'ClusterNetworkPolicy:/guard'), false);
  assert.equal(reportsEventFor(s, 'node-2', 'AdminNetworkPolicy:/guard'), true);
  assert.equal(reportsEventFor(s, 'node-1', 'AdminNetworkPolicy:/guard'), false);
  assert.equal(reportsEventFor(s, 'node-1', 'ClusterNetworkPolicy:/gone'), false);
  // Fixed: no longer listed (resolved).
  const next = diffInvalid(d.next, cluster());
  assert.deepEqual([...next.resolved].sort(), [
    'AdminNetworkPolicy:/guard',
    'ClusterNetworkPolicy:/guard',
    'ClusterNetworkPolicy:/other',
  ]);
});

test('the Event of a cluster-scoped object: in the given namespace, involvedObject without one', () => {
  const ev = policyEvent(
    { namespace: '', name: 'guard', kind: { apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy' } },
    'InvalidClusterNetworkPolicy',
    'm',
    'node-1',
    new Date(0),
    'nft-netpol-system',
  );
  assert.equal(ev.metadata.namespace, 'nft-netpol-system');
  assert.deepEqual(ev.involvedObject, {
    apiVersion: 'policy.networking.k8s.io/v1alpha2',
    kind: 'ClusterNetworkPolicy',
    name: 'guard',
  });
  assert.equal(policyEvent({ namespace: '', name: 'x' }, 'R', 'm', 'n', new Date(0)).metadata.namespace, 'default');
});

test('InvalidPolicyReports: one Event per change of a CNP errors, written to the API server in the agent namespace', async () => {
  api = await FakeApiServer.start({ bookmarkIntervalMs: 0 });
  const sink = kubeEventSink(api.kubeConfig().makeApiClient(CoreV1Api), 'node-1', 'nft-netpol-system');
  const { log, lines } = captureLogger();
  const { metrics, port } = testMetrics();
  const reports = new InvalidPolicyReports('node-1', port, log, sink);
  reports.report(cluster(cnp('guard', 1, SHOP)));
  await waitFor(() => api?.events.length === 1, 'the Event');
  const ev = api.events[0];
  assert.equal(ev?.namespace, 'nft-netpol-system');
  assert.equal(ev?.body.reason, 'InvalidClusterNetworkPolicy');
  assert.deepEqual(ev?.body.involvedObject, {
    apiVersion: 'policy.networking.k8s.io/v1alpha2',
    kind: 'ClusterNetworkPolicy',
    name: 'guard',
  });
  assert.equal(await metricValue(metrics, 'nftnp_invalid_policies'), 1);
  const line = lines.find((l) => l.event === 'invalid-policy');
  assert.equal(line?.policy, 'guard');
  assert.equal(line?.kind, 'ClusterNetworkPolicy');
  // Same errors again: no new Event; other errors: one more.
  reports.report(cluster(cnp('guard', 1, SHOP)));
  reports.report(cluster(cnp('guard', 2000, SHOP)));
  await waitFor(() => api?.events.length === 2, 'the second Event');
  assert.match(String(api.events[1]?.body.message), /spec\.priority/);
  // A fake sink sees the same ref (what the agent passes on).
  const fake = new FakeEvents();
  new InvalidPolicyReports('node-1', port, log, fake).report(cluster(cnp('guard', 1, SHOP)));
  assert.deepEqual(fake.events[0]?.ref, {
    namespace: '',
    name: 'guard',
    kind: { apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy' },
  });
});
