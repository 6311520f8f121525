// Applied status of the tenancy kinds (docs/tenancy.md): what a node reports
// for NamespaceNetworkPolicies and for a namespace's project or workspace
// isolation, and how `status` decides they are in force. Inputs are raw API
// objects through the real normalizers, as the agent and the command read them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { normalizeNamespace, normalizeNamespacePolicy, normalizeService, normalizeWorkspace } from '../../src/model/normalize.ts';
import { DEFAULT_TENANCY } from '../../src/model/tenancy-config.ts';
import type { ClusterState, Namespace, NamespaceNetworkPolicy, Service, Workspace } from '../../src/model/types.ts';
import { buildStatus, relevantPolicies, statusPatch } from '../../src/status/build.ts';
import { buildReport, policyText, summaryText, type ReportInput } from '../../src/status/report.ts';
import type { AppliedPolicy, NodePolicyStatusObject } from '../../src/status/types.ts';
import { pod, policy, sel, state } from '../support/state-builder.ts';

const NODE = 'node-1';
const AT = Date.UTC(2026, 0, 1, 10);
const NOW = Date.UTC(2026, 0, 1, 12);

function ok<T>(n: { ok: true; value: T } | { ok: false }): T {
  assert.ok(n.ok);
  return n.value;
}
const meta = (name: string, uid: string, generation: number | undefined, rv: string, namespace?: string) => ({
  name,
  uid,
  resourceVersion: rv,
  ...(generation === undefined ? {} : { generation }),
  ...(namespace === undefined ? {} : { namespace }),
});
const namespace = (name: string, o: { isolate?: boolean; workspace?: string; rv?: string } = {}): Namespace =>
  ok(
    normalizeNamespace({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: {
        ...meta(name, `uid-ns-${name}`, undefined, o.rv ?? '5'),
        labels: o.workspace === undefined ? {} : { 'kubesphere.io/workspace': o.workspace },
        annotations: o.isolate === true ? { 'kubesphere.io/network-isolate': 'enabled' } : {},
      },
    }),
  );
const workspace = (name: string, networkIsolation: unknown, generation = 1): Workspace =>
  ok(
    normalizeWorkspace({
      apiVersion: 'tenant.kubesphere.io/v1alpha1',
      kind: 'Workspace',
      metadata: meta(name, `uid-ws-${name}`, generation, String(100 + generation)),
      spec: { networkIsolation },
    }),
  );
const nsnp = (ns: string, name: string, generation: number, spec: unknown): NamespaceNetworkPolicy =>
  ok(
    normalizeNamespacePolicy({
      apiVersion: 'network.kubesphere.io/v1alpha1',
      kind: 'NamespaceNetworkPolicy',
      metadata: meta(name, `uid-nsnp-${name}`, generation, String(200 + generation), ns),
      spec,
    }),
  );
const service = (ns: string, name: string): Service =>
  ok(
    normalizeService({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: ns },
      spec: { selector: { app: name }, ports: [{ port: 80 }] },
    }),
  );

const pods = [
  pod('shop', 'web-0', { labels: { app: 'web' }, ips: ['10.0.0.1'] }),
  pod('shop', 'web-1', { labels: { app: 'web' }, ips: ['10.0.0.2'] }),
  pod('cart', 'api-0', { labels: { app: 'api' }, ips: ['10.0.1.1'] }),
  pod('lab', 'db-0', { labels: { app: 'db' }, ips: ['10.0.2.1'], node: 'node-2' }),
  pod('ml', 'job-0', { labels: { app: 'job' }, ips: ['10.0.3.1'], node: 'node-2' }),
];
const allowApi = nsnp('shop', 'to-api', 2, { egress: [{ to: [{ service: { name: 'api', namespace: 'cart' } }] }] });
const broken = nsnp('shop', 'broken', 1, {
  ingress: [{ from: [{ namespace: { name: 'lab' }, ipBlock: { cidr: '10.0.0.0/8' } }] }],
  egress: [{ to: [{ service: { name: 'nope' } }] }],
});
const labOnly = nsnp('lab', 'p', 1, {});

function tenancyState(over: { namespaces?: Namespace[]; workspaces?: Workspace[] } = {}): ClusterState {
  const base = state({
    namespaces: over.namespaces ?? [
      namespace('shop', { isolate: true, workspace: 'acme' }),
      namespace('cart', { workspace: 'acme' }),
      namespace('lab', { workspace: 'acme' }),
      namespace('ml'),
    ],
    pods,
    policies: [
      {
        ...policy('cart', 'np', { podSelector: sel({ app: 'api' }) }),
        version: { uid: 'u-np', generation: 1, resourceVersion: '9' },
      },
    ],
  });
  return {
    ...base,
    tenancy: DEFAULT_TENANCY,
    workspaces: over.workspaces ?? [workspace('acme', true, 3)],
    namespacePolicies: [broken, allowApi, labOnly].sort((a, b) =>
      a.namespace === b.namespace ? (a.name < b.name ? -1 : 1) : a.namespace < b.namespace ? -1 : 1,
    ),
    services: [service('cart', 'api')],
  };
}

test('a node reports the NamespaceNetworkPolicies and the isolation of its namespaces, at their versions', () => {
  const entries = relevantPolicies(tenancyState(), NODE, AT, undefined);
  const t = new Date(AT).toISOString();
  assert.deepEqual(entries, [
    {
      kind: 'NamespaceNetworkPolicy',
      namespace: 'shop',
      name: 'broken',
      uid: 'uid-nsnp-broken',
      generation: 1,
      resourceVersion: '201',
      appliedTime: t,
      localPods: 2,
      invalidFields: [
        'spec.ingress[0].from[0]: may not specify more than one of namespace, ipBlock and service',
        'spec.egress[0].to[0].service: Service shop/nope not found: this peer allows nothing',
      ],
    },
    {
      kind: 'NamespaceNetworkPolicy',
      namespace: 'shop',
      name: 'to-api',
      uid: 'uid-nsnp-to-api',
      generation: 2,
      resourceVersion: '202',
      appliedTime: t,
      localPods: 2,
    },
    {
      kind: 'NetworkPolicy',
      namespace: 'cart',
      name: 'np',
      uid: 'u-np',
      generation: 1,
      resourceVersion: '9',
      appliedTime: t,
      localPods: 1,
    },
    // Project isolation wins over the workspace's: shop's entry is ProjectIsolation, named after the namespace.
    {
      kind: 'ProjectIsolation',
      namespace: 'shop',
      name: 'shop',
      uid: 'uid-ns-shop',
      resourceVersion: '5',
      appliedTime: t,
      localPods: 2,
    },
    {
      kind: 'WorkspaceIsolation',
      namespace: 'cart',
      name: 'acme',
      uid: 'uid-ws-acme',
      generation: 3,
      resourceVersion: '103',
      appliedTime: t,
      localPods: 1,
    },
  ]);
  // lab's policy and isolation are node-2's business (no pod of lab here); ml is not isolated.
  assert.deepEqual(
    relevantPolicies(tenancyState(), 'node-2', AT, undefined).map((e) => `${e.kind} ${e.namespace}/${e.name}`),
    ['NamespaceNetworkPolicy lab/p', 'WorkspaceIsolation lab/acme'],
  );
});

test('tenancy off: no tenancy entries even with tenancy objects in the state', () => {
  const { tenancy: _, ...off } = tenancyState();
  assert.deepEqual(
    relevantPolicies(off, NODE, AT, undefined).map((e) => e.kind),
    ['NetworkPolicy'],
  );
});

test('an invalid Workspace networkIsolation shows on its isolation entries (read as true: isolated)', () => {
  const s = tenancyState({ workspaces: [workspace('acme', 'yes', 4)] });
  const cart = relevantPolicies(s, NODE, AT, undefined).find((e) => e.kind === 'WorkspaceIsolation');
  assert.equal(cart?.generation, 4);
  assert.deepEqual(cart?.invalidFields, ['spec.networkIsolation: must be a boolean, not "yes"']);
});

test('status writes follow tenancy changes: an edit moves one entry, unrelated edits write nothing', () => {
  const stats = { chains: 1, rules: 1, sets: 1, maps: 0, elements: 1, localPods: 3, policies: 1 };
  const content = (st: ClusterState, at: number, prev?: ReturnType<typeof buildStatus>) =>
    buildStatus(
      {
        node: NODE,
        applied: { state: st, stats, hash: 'sha256:aa', atUnixMs: at },
        last: { result: 'Applied', atUnixMs: AT, error: undefined },
        inSync: true,
        agentVersion: '0',
        nftVersion: undefined,
      },
      prev,
    );
  const first = content(tenancyState(), AT);
  // Same objects re-applied later: nothing to write.
  assert.equal(statusPatch(first, content(tenancyState(), AT + 60_000, first)), undefined);
  // Turning workspace isolation off removes cart's entry only (shop keeps its project isolation).
  const off = content(tenancyState({ workspaces: [workspace('acme', false, 4)] }), AT + 60_000, first);
  assert.deepEqual(
    off.policies.map((e) => e.kind),
    ['NamespaceNetworkPolicy', 'NamespaceNetworkPolicy', 'NetworkPolicy', 'ProjectIsolation'],
  );
  // The untouched entries keep their appliedTime.
  assert.ok(off.policies.every((e) => e.appliedTime === new Date(AT).toISOString()));
  // An edit of a namespace without pods here (ml is on node-2) changes nothing on this node.
  const mlEdit = content(
    tenancyState({
      namespaces: [
        namespace('shop', { isolate: true, workspace: 'acme' }),
        namespace('cart', { workspace: 'acme' }),
        namespace('lab', { workspace: 'acme' }),
        namespace('ml', { isolate: true }),
      ],
    }),
    AT + 60_000,
    first,
  );
  assert.equal(statusPatch(first, mlEdit), undefined);
});

// ------------------------------------------------------------------ report

const entry = (e: Partial<AppliedPolicy> & Pick<AppliedPolicy, 'kind' | 'namespace' | 'name'>): AppliedPolicy => ({
  appliedTime: '2026-01-01T11:00:00.000Z',
  localPods: 1,
  ...e,
});
const nodeStatus = (node: string, policies: AppliedPolicy[]): NodePolicyStatusObject => ({
  metadata: { name: node },
  status: {
    inSync: true,
    lastApplyResult: 'Applied',
    policies,
    counts: { localPods: 1, policies: policies.length, chains: 0, rules: 0, sets: 0, elements: 0 },
  },
});
const lease = (node: string) => ({
  metadata: { name: node },
  spec: { renewTime: new Date(NOW - 10_000).toISOString(), leaseDurationSeconds: 90 },
});

function reportInput(statuses: NodePolicyStatusObject[]): ReportInput {
  const st = tenancyState();
  return {
    now: NOW,
    nodes: ['node-1', 'node-2'],
    statuses,
    leases: [lease('node-1'), lease('node-2')],
    policies: [],
    pods,
    tenancy: { namespacePolicies: st.namespacePolicies ?? [], namespaces: st.namespaces, workspaces: st.workspaces ?? [] },
  };
}

test('report: tenancy kinds are in force where the nodes hosting their pods report them at the current version', () => {
  // What the agents would write: node-1 fully caught up, node-2 at an older NSNP generation and without lab's isolation.
  const n1 = relevantPolicies(tenancyState(), 'node-1', AT, undefined);
  const n2 = [entry({ kind: 'NamespaceNetworkPolicy', namespace: 'lab', name: 'p', uid: 'uid-nsnp-p', generation: 0 })];
  const r = buildReport(reportInput([nodeStatus('node-1', n1), nodeStatus('node-2', n2)]));
  const by = new Map(r.policies.map((p) => [`${p.kind} ${p.namespace}/${p.name}`, p]));
  assert.deepEqual([...by.keys()].sort(), [
    'NamespaceNetworkPolicy lab/p',
    'NamespaceNetworkPolicy shop/broken',
    'NamespaceNetworkPolicy shop/to-api',
    'ProjectIsolation shop/shop',
    'WorkspaceIsolation cart/acme',
    'WorkspaceIsolation lab/acme',
  ]);
  assert.deepEqual(by.get('NamespaceNetworkPolicy shop/to-api')?.inForce, ['node-1']);
  assert.deepEqual(by.get('ProjectIsolation shop/shop')?.inForce, ['node-1']);
  assert.deepEqual(by.get('WorkspaceIsolation cart/acme')?.inForce, ['node-1']);
  assert.deepEqual(by.get('NamespaceNetworkPolicy lab/p')?.lagging, [
    { node: 'node-2', generation: 0, since: '2026-01-01T11:00:00.000Z', lastError: undefined },
  ]);
  assert.deepEqual(
    by.get('WorkspaceIsolation lab/acme')?.lagging.map((l) => [l.node, l.generation]),
    [['node-2', undefined]],
  );
  // Its own errors from the object, the Service it names from the agent that resolved it.
  assert.deepEqual(by.get('NamespaceNetworkPolicy shop/broken')?.invalidFields, [
    'spec.ingress[0].from[0]: may not specify more than one of namespace, ipBlock and service',
    'spec.egress[0].to[0].service: Service shop/nope not found: this peer allows nothing',
  ]);
  assert.equal(r.ok, false);
  const text = summaryText(r, NOW, false);
  assert.match(text, /workspace isolation of acme \(ns lab\): 0\/1 nodes; lagging: node-2 \(gen none\)/);
  assert.match(text, /NamespaceNetworkPolicy shop\/broken: spec.ingress\[0\]/);
  const lab = by.get('WorkspaceIsolation lab/acme');
  assert.ok(lab !== undefined);
  assert.match(policyText(r, lab, NOW), /^workspace isolation of acme \(ns lab\) \(generation 3\)\n {2}in force on 0 of 1 nodes/);
});

test('report: a project isolation entry of a deleted and re-created namespace (other uid) is not in force', () => {
  const stale = entry({ kind: 'ProjectIsolation', namespace: 'shop', name: 'shop', uid: 'uid-old', resourceVersion: '1' });
  const r = buildReport(reportInput([nodeStatus('node-1', [stale])]));
  const shop = r.policies.find((p) => p.kind === 'ProjectIsolation');
  assert.deepEqual(
    shop?.lagging.map((l) => l.node),
    ['node-1'],
  );
});

test('report: entries without kind (older agents) count as NetworkPolicy entries', () => {
  const old = {
    namespace: 'cart',
    name: 'np',
    uid: 'u-np',
    generation: 1,
    appliedTime: 't',
    localPods: 1,
  } as unknown as AppliedPolicy;
  const np = {
    ...policy('cart', 'np', { podSelector: sel({ app: 'api' }) }),
    version: { uid: 'u-np', generation: 1, resourceVersion: '9' },
  };
  const r = buildReport({ ...reportInput([nodeStatus('node-1', [old])]), tenancy: undefined, policies: [np] });
  assert.deepEqual(r.policies[0]?.inForce, ['node-1']);
  assert.equal(r.ok, true);
});
