// Applied status of ClusterNetworkPolicies: a node reports a CNP (at its
// version) when its subject selects an active local pod; `status cnp/NAME`
// says on how many of the nodes that concern it the current generation is
// in force, which lag and which agents do not report. Inputs are raw API
// objects through the real normalizers, as the agent and the command read them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { normalizeNamespace } from '../../src/model/normalize.ts';
import { normalizeAdminNetworkPolicy, normalizeClusterNetworkPolicy } from '../../src/model/normalize-cluster-policy.ts';
import type { ClusterNetworkPolicy, ClusterState, Namespace } from '../../src/model/types.ts';
import { relevantPolicies } from '../../src/status/build.ts';
import { buildReport, policyText, summaryText, type ReportInput } from '../../src/status/report.ts';
import { parseStatusArgs, statusCommand } from '../../src/cli/status.ts';
import type { AppliedPolicy, NodePolicyStatusObject } from '../../src/status/types.ts';
import { pod, state } from '../support/state-builder.ts';
import {
  FakeApiServer,
  namespace as nsObject,
  node as nodeObject,
  pod as podObject,
  type KubeObject,
} from '../support/fake-apiserver.ts';

const AT = Date.UTC(2026, 0, 1, 10);
const NOW = Date.UTC(2026, 0, 1, 12);

function ok<T>(n: { ok: true; value: T } | { ok: false }): T {
  assert.ok(n.ok);
  return n.value;
}
const namespace = (name: string, labels: Record<string, string>): Namespace =>
  ok(normalizeNamespace({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } }));
const cnp = (name: string, generation: number, spec: Record<string, unknown>): ClusterNetworkPolicy =>
  ok(
    normalizeClusterNetworkPolicy({
      apiVersion: 'policy.networking.k8s.io/v1alpha2',
      kind: 'ClusterNetworkPolicy',
      metadata: { name, uid: `uid-${name}`, generation, resourceVersion: String(300 + generation) },
      spec,
    }),
  );

const namespaces = [namespace('shop', { team: 'a' }), namespace('lab', { team: 'b' })];
const pods = [
  pod('shop', 'web-0', { labels: { app: 'web' }, ips: ['10.0.0.1'] }),
  pod('shop', 'web-1', { labels: { app: 'web' }, ips: ['10.0.0.2'], node: 'node-2' }),
  pod('shop', 'db-0', { labels: { app: 'db' }, ips: ['10.0.0.3'] }),
  pod('lab', 'job-0', { labels: { app: 'web' }, ips: ['10.0.1.1'], node: 'node-3' }),
  // Never a subject: hostNetwork.
  { ...pod('lab', 'agent', { labels: { app: 'web' }, ips: ['172.18.0.4'], node: 'node-4' }), hostNetwork: true },
];
const webOfTeamA = cnp('web-guard', 2, {
  tier: 'Admin',
  priority: 5,
  subject: { pods: { namespaceSelector: { matchLabels: { team: 'a' } }, podSelector: { matchLabels: { app: 'web' } } } },
  ingress: [{ name: 'deny-all', action: 'Deny', from: [{ namespaces: {} }] }],
});
const everyPod = cnp('baseline', 1, {
  tier: 'Baseline',
  priority: 100,
  subject: { namespaces: {} },
  // Invalid: enforced fail closed, reported with its field.
  egress: [{ action: 'Deny', to: [{ networks: ['10.0.0.0/33'] }] }],
});
const legacy = ok(
  normalizeAdminNetworkPolicy({
    apiVersion: 'policy.networking.k8s.io/v1alpha1',
    kind: 'AdminNetworkPolicy',
    metadata: { name: 'web-guard', uid: 'uid-anp', generation: 1 },
    spec: { priority: 1, subject: { namespaces: { matchLabels: { team: 'b' } } }, ingress: [] },
  }),
);

function clusterState(): ClusterState {
  return { ...state({ namespaces, pods }), clusterPolicies: [everyPod, legacy, webOfTeamA] };
}

test('a node reports the ClusterNetworkPolicies whose subject selects its active pods, cluster-scoped (namespace "")', () => {
  const t = new Date(AT).toISOString();
  assert.deepEqual(relevantPolicies(clusterState(), 'node-1', AT, undefined), [
    {
      kind: 'ClusterNetworkPolicy',
      namespace: '',
      name: 'baseline',
      uid: 'uid-baseline',
      generation: 1,
      resourceVersion: '301',
      appliedTime: t,
      localPods: 2,
      invalidFields: [everyPod.errors.map((e) => `${e.path}: ${e.message}`)[0]],
    },
    {
      kind: 'ClusterNetworkPolicy',
      namespace: '',
      name: 'web-guard',
      uid: 'uid-web-guard',
      generation: 2,
      resourceVersion: '302',
      appliedTime: t,
      localPods: 1,
    },
  ]);
  assert.ok(everyPod.errors.length > 0 && everyPod.errors[0]!.path.startsWith('spec.egress[0]'));
  // The legacy kind is its own entry (a CNP and an ANP may share a name).
  assert.deepEqual(
    relevantPolicies(clusterState(), 'node-3', AT, undefined).map((e) => `${e.kind} ${e.name} ${e.localPods}`),
    ['AdminNetworkPolicy web-guard 1', 'ClusterNetworkPolicy baseline 1'],
  );
  // A node with only a hostNetwork pod concerns none.
  assert.deepEqual(relevantPolicies(clusterState(), 'node-4', AT, undefined), []);
});

const lease = (name: string) => ({
  metadata: { name },
  spec: { renewTime: new Date(NOW - 10_000).toISOString(), leaseDurationSeconds: 90 },
});
const statusOf = (name: string, policies: AppliedPolicy[]): NodePolicyStatusObject => ({
  metadata: { name },
  status: { inSync: true, lastApplyResult: 'Applied', policies },
});
const entry = (name: string, generation: number, uid = `uid-${name}`): AppliedPolicy => ({
  kind: 'ClusterNetworkPolicy',
  namespace: '',
  name,
  uid,
  generation,
  appliedTime: new Date(AT).toISOString(),
  localPods: 1,
});

test('status of a ClusterNetworkPolicy: in force on the nodes its subject concerns, lagging, not reporting', () => {
  const input: ReportInput = {
    now: NOW,
    nodes: ['node-1', 'node-2', 'node-3', 'node-4'],
    statuses: [statusOf('node-1', [entry('web-guard', 2)]), statusOf('node-2', [entry('web-guard', 1)])],
    leases: [lease('node-1'), lease('node-2'), lease('node-4')],
    policies: [],
    pods,
    clusterPolicies: { policies: [webOfTeamA, everyPod], namespaces },
  };
  const r = buildReport(input);
  const guard = r.policies.find((p) => p.name === 'web-guard');
  assert.deepEqual(guard?.nodes, ['node-1', 'node-2']);
  assert.deepEqual(guard?.inForce, ['node-1']);
  assert.deepEqual(
    guard?.lagging.map((l) => [l.node, l.generation]),
    [['node-2', 1]],
  );
  const text = policyText(r, guard!, NOW);
  assert.match(
    text,
    /^ClusterNetworkPolicy web-guard \(Admin tier, priority 5\) \(generation 2\)\n {2}in force on 1 of 2 nodes that host pods it selects\n {2}lagging: node-2 has generation 1/,
  );
  const base = r.policies.find((p) => p.name === 'baseline');
  // hostNetwork pods are never subjects: node-4 is not concerned.
  assert.deepEqual(base?.nodes, ['node-1', 'node-2', 'node-3']);
  assert.deepEqual(base?.notReporting, ['node-3']);
  assert.equal(base?.invalidFields.length, 1);
  const summary = summaryText(r, NOW, true);
  assert.match(summary, /ClusterNetworkPolicy web-guard: 1\/2 nodes; lagging: node-2 \(gen 1\); not reporting: -/);
  assert.match(summary, /INVALID POLICIES \(enforced fail-closed\)\n {2}ClusterNetworkPolicy baseline: spec\.egress\[0\]/);
  assert.equal(r.ok, false);
  // Another object with the same name (recreated: new uid) is not in force where the old one is reported.
  const recreated = buildReport({ ...input, statuses: [statusOf('node-1', [entry('web-guard', 2, 'uid-old')])] });
  assert.deepEqual(recreated.policies.find((p) => p.name === 'web-guard')?.inForce, []);
  // Everything reported at the current generation: in force.
  const good = buildReport({
    ...input,
    leases: [lease('node-1'), lease('node-2')],
    statuses: [statusOf('node-1', [entry('web-guard', 2)]), statusOf('node-2', [entry('web-guard', 3)])],
    clusterPolicies: { policies: [webOfTeamA], namespaces },
  });
  assert.equal(good.ok, true, summaryText(good, NOW, true));
});

test('status arguments: cnp/NAME, clusternetworkpolicy NAME and the legacy kinds are cluster-scoped (no -n)', () => {
  for (const argv of [
    ['cnp/web-guard'],
    ['clusternetworkpolicy', 'web-guard'],
    ['ClusterNetworkPolicies.policy.networking.k8s.io/web-guard'],
  ])
    assert.deepEqual(parseStatusArgs(argv), {
      namespace: undefined,
      policy: { kind: 'ClusterNetworkPolicy', name: 'web-guard' },
      output: 'text',
      agentNamespace: 'nft-netpol-system',
      tenancy: true,
      kubeconfig: undefined,
    });
  assert.deepEqual((parseStatusArgs(['anp/x']) as { policy: unknown }).policy, { kind: 'AdminNetworkPolicy', name: 'x' });
  assert.deepEqual((parseStatusArgs(['banp', 'default']) as { policy: unknown }).policy, {
    kind: 'BaselineAdminNetworkPolicy',
    name: 'default',
  });
  assert.deepEqual((parseStatusArgs(['--no-tenancy', 'cnp/x']) as { tenancy: boolean }).tenancy, false);
  assert.throws(() => parseStatusArgs(['-n', 'shop', 'cnp/x']), /cluster-scoped: no -n/);
});

test('status command: cnp/NAME in force on the nodes its subject concerns, lagging after an edit, in the summary', async (t) => {
  const api = await FakeApiServer.start();
  t.after(() => api.close());
  api.create('namespaces', nsObject('shop', { team: 'a' }));
  api.create('namespaces', nsObject('lab', { team: 'b' }));
  api.create('nodes', nodeObject('node-1', ['172.18.0.11']));
  api.create('nodes', nodeObject('node-2', ['172.18.0.12']));
  api.create('pods', podObject('shop', 'web', { app: 'web' }, 'node-1', '10.244.1.10'));
  api.create('pods', podObject('lab', 'job', { app: 'web' }, 'node-2', '10.244.2.10'));
  const renew = new Date().toISOString();
  for (const n of ['node-1', 'node-2'])
    api.create('leases', {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { namespace: 'nft-netpol-system', name: n },
      spec: { holderIdentity: `nft-netpol-agent/${n}`, leaseDurationSeconds: 90, renewTime: renew },
    });
  const cnpObject = (priority: number): KubeObject => ({
    apiVersion: 'policy.networking.k8s.io/v1alpha2',
    kind: 'ClusterNetworkPolicy',
    metadata: { name: 'guard' },
    spec: {
      tier: 'Admin',
      priority,
      subject: { namespaces: { matchLabels: { team: 'a' } } },
      ingress: [{ action: 'Deny', from: [{ namespaces: {} }] }],
    },
  });
  const created = api.create('clusternetworkpolicies', cnpObject(5));
  api.create('nodepolicystatuses', {
    apiVersion: 'nft-netpol.io/v1alpha1',
    kind: 'NodePolicyStatus',
    metadata: { name: 'node-1' },
    spec: { nodeName: 'node-1' },
    status: {
      inSync: true,
      lastApplyResult: 'Applied',
      policies: [{ ...entry('guard', 1, created.metadata.uid), appliedTime: new Date().toISOString() }],
    },
  });
  let out = '';
  const io = { out: (x: string) => (out += `${x}\n`), err: (x: string) => (out += `${x}\n`) };
  const run = async (...args: string[]): Promise<number> => {
    out = '';
    return statusCommand([...args, '--agent-namespace', 'nft-netpol-system'], io, api.kubeConfig());
  };
  // lab's pod (node-2) is not a subject: only node-1 is concerned.
  assert.equal(await run('cnp/guard'), 0, out);
  assert.match(out, /^ClusterNetworkPolicy guard \(Admin tier, priority 5\) \(generation 1\)\n {2}in force on 1 of 1 nodes/);
  api.update('clusternetworkpolicies', cnpObject(6));
  assert.equal(await run('clusternetworkpolicy', 'guard'), 3, out);
  assert.match(out, /\(generation 2\)\n {2}in force on 0 of 1 nodes.*\n {2}lagging: node-1 has generation 1 since/);
  assert.equal(await run(), 3, out);
  assert.match(out, /ClusterNetworkPolicy guard: 0\/1 nodes; lagging: node-1 \(gen 1\)/);
  assert.equal(await run('cnp/nope'), 1, out);
  assert.match(out, /ClusterNetworkPolicy nope not found/);
});

test('status command: cnp/NAME where the ClusterNetworkPolicy CRD is not installed is not found (exit 1)', async (t) => {
  const api = await FakeApiServer.start({ crds: [] });
  t.after(() => api.close());
  api.create('namespaces', nsObject('shop'));
  api.create('nodes', nodeObject('node-1', ['172.18.0.11']));
  let out = '';
  const io = { out: (x: string) => (out += `${x}\n`), err: (x: string) => (out += `${x}\n`) };
  const code = await statusCommand(['cnp/web-guard'], io, api.kubeConfig());
  assert.equal(code, 1, out);
  assert.match(out, /ClusterNetworkPolicy web-guard not found/);
  // The cluster summary does not fail without the CRD.
  out = '';
  assert.equal(await statusCommand([], io, api.kubeConfig()), 0, out);
});
