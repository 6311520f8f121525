import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { loadAllYaml } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { buildState, makeState, normalizePolicy, normalizePod } from '../../src/model/normalize.ts';
import { makeState as makeStateDirect } from '../../src/model/state.ts';
import { formatValidationError } from '../../src/model/types.ts';

const objects: unknown[] = [
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop', labels: { team: 'shop' } } },
  {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'b', namespace: 'shop', labels: { app: 'b' } },
    spec: { nodeName: 'n1' },
    status: { podIP: '10.0.0.2' },
  },
  { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'a', namespace: 'shop' }, status: { podIP: '10.0.0.1' } },
  { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'lonely' }, status: { podIP: '10.0.0.3' } },
  {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: 'deny', namespace: 'other' },
    spec: { podSelector: {} },
  },
  { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n2' } },
  {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'n1' },
    status: { addresses: [{ type: 'InternalIP', address: '192.168.0.1' }] },
  },
  { apiVersion: 'v1', kind: 'Service', metadata: { name: 'svc', namespace: 'shop' }, spec: { ports: 'whatever' } },
  { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'dep' } },
];

test('buildState sorts, adds implicit namespaces and ignores other kinds', () => {
  const { state, errors } = buildState(objects);
  assert.deepEqual(errors, []);
  assert.deepEqual(state.namespaces, [
    { name: 'default', labels: { 'kubernetes.io/metadata.name': 'default' } },
    { name: 'other', labels: { 'kubernetes.io/metadata.name': 'other' } },
    { name: 'shop', labels: { 'kubernetes.io/metadata.name': 'shop', team: 'shop' } },
  ]);
  assert.deepEqual(
    state.pods.map((p) => `${p.namespace}/${p.name}`),
    ['default/lonely', 'shop/a', 'shop/b'],
  );
  assert.deepEqual(
    state.policies.map((p) => `${p.namespace}/${p.name}`),
    ['other/deny'],
  );
  assert.deepEqual(state.nodes, [
    { name: 'n1', addresses: ['192.168.0.1'], internalIPs: ['192.168.0.1'] },
    { name: 'n2', addresses: [] },
  ]);
  // A Service is kept for service peers, never validated: an unusable one just selects nothing.
  assert.deepEqual(state.services, [{ namespace: 'shop', name: 'svc', selector: undefined, ports: [] }]);
});

test('determinism: object order and key order do not matter', () => {
  const shuffleKeys = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(shuffleKeys);
    if (typeof v === 'object' && v !== null)
      return Object.fromEntries(
        Object.entries(v)
          .reverse()
          .map(([k, x]) => [k, shuffleKeys(x)]),
      );
    return v;
  };
  const a = buildState(objects);
  const b = buildState([...objects].reverse().map(shuffleKeys));
  assert.deepEqual(b, a);
  assert.deepEqual(JSON.stringify(b.state), JSON.stringify(a.state), 'same key order too');
});

test('buildState errors: unidentifiable objects skipped, bad policies kept fail-closed, duplicates', () => {
  const { state, errors } = buildState([
    'not an object',
    { kind: 'Pod', metadata: { name: 'x' } },
    { apiVersion: 'v1', metadata: { name: 'y' } },
    { apiVersion: 'v1', kind: 'Pod', metadata: {} },
    { apiVersion: 'policy/v1', kind: 'NetworkPolicy', metadata: { name: 'calico-ish' } },
    {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'bad', namespace: 'shop' },
      spec: { ingress: [{ ports: [{ port: 80, endPort: 79 }] }] },
    },
    { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'dup' }, status: { podIP: '10.0.0.1' } },
    { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'dup' }, status: { podIP: '10.0.0.2' } },
  ]);
  assert.deepEqual(errors.map(formatValidationError), [
    '<unnamed> <root>: must be an object, not "not an object"',
    'default/x apiVersion: Required value',
    'y kind: Required value',
    'default/<unnamed> metadata.name: Required value',
    'default/calico-ish apiVersion: "policy/v1" is not supported for NetworkPolicy (want networking.k8s.io/v1)',
    'shop/bad spec.ingress[0].ports[0].endPort: must be >= port (80)',
    'default/dup metadata.name: duplicate Pod default/dup: the later definition replaces the earlier one',
  ]);
  assert.deepEqual(
    state.policies.map((p) => [p.name, p.ingress]),
    [['bad', [{ peers: [], ports: [], invalid: true }]]],
  );
  assert.deepEqual(
    state.pods.map((p) => [p.name, p.ips]),
    [['dup', ['10.0.0.2']]],
  );
});

test('makeState is reachable from both modules and keeps given namespaces', () => {
  assert.equal(makeState, makeStateDirect);
  const s = makeState({
    namespaces: [{ name: 'z', labels: { 'kubernetes.io/metadata.name': 'z', x: 'y' } }],
    pods: [],
    policies: [],
    nodes: [],
  });
  assert.deepEqual(s, {
    namespaces: [{ name: 'z', labels: { 'kubernetes.io/metadata.name': 'z', x: 'y' } }],
    pods: [],
    policies: [],
    nodes: [],
  });
});

// Objects from @kubernetes/client-node lists are model instances: `_from` instead of
// `from`, Date objects for timestamps. They must normalize exactly like raw JSON.
test('client-node objects (_from, Date) normalize like raw watch JSON', async () => {
  const text = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: web
  namespace: shop
  creationTimestamp: "2024-05-01T10:00:00Z"
  labels: {owner: team-a}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress, Egress]
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {team: a}}
      podSelector: {matchExpressions: [{key: role, operator: In, values: [fe]}]}
    - ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}
    ports: [{port: 80, endPort: 90}, {protocol: UDP, port: dns}]
  egress:
  - to: [{ipBlock: {cidr: "fd00::/8"}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: shop
  creationTimestamp: "2024-05-01T10:00:00Z"
  deletionTimestamp: "2024-05-01T11:00:00Z"
spec:
  nodeName: node-1
  containers: [{name: web, image: x, ports: [{name: http, containerPort: 80}]}]
status:
  phase: Running
  startTime: "2024-05-01T10:00:01Z"
  podIPs: [{ip: 10.0.0.5}, {ip: "fd00::5"}]
`;
  const models = loadAllYaml(text) as unknown[];
  const raw = text.split('\n---\n').map((d) => parse(d) as unknown);
  const m0 = models[0] as { spec: { ingress: Record<string, unknown>[] }; metadata: { creationTimestamp: unknown } };
  assert.ok('_from' in (m0.spec.ingress[0] ?? {}), 'client-node uses _from');
  assert.ok(m0.metadata.creationTimestamp instanceof Date, 'client-node uses Date');

  const fromModel = normalizePolicy(models[0]);
  const fromRaw = normalizePolicy(raw[0]);
  assert.ok(fromModel.ok && fromRaw.ok);
  assert.deepEqual(fromModel.errors, []);
  assert.deepEqual(fromModel, fromRaw);
  assert.equal(fromModel.value.ingress[0]?.peers?.length, 2);
  assert.deepEqual(normalizePod(models[1]), normalizePod(raw[1]));
  assert.deepEqual(buildState(models), buildState(raw));

  // A Date where raw JSON has a string changes nothing either.
  const withDate = {
    ...(raw[1] as Record<string, unknown>),
    metadata: { name: 'web-1', namespace: 'shop', creationTimestamp: new Date(0) },
  };
  assert.deepEqual(normalizePod(withDate), normalizePod(raw[1]));

  // The whole example cluster too.
  const examples = (
    await Promise.all(
      ['cluster.yaml', 'policies-shop.yaml', 'policies-payments.yaml', 'cluster-network-policies.yaml'].map((f) =>
        readFile(new URL(`../../examples/${f}`, import.meta.url), 'utf8'),
      ),
    )
  ).join('\n---\n');
  const exModels = loadAllYaml(examples).filter((o: unknown) => o !== null) as unknown[];
  const exRaw = examples
    .split(/^---$/m)
    .map((d) => parse(d) as unknown)
    .filter((o) => o !== null);
  assert.deepEqual(buildState(exModels), buildState(exRaw));
});

test('`from` wins over `_from` when both are present; either alone works', () => {
  const mk = (rule: Record<string, unknown>): unknown => ({
    metadata: { name: 'p' },
    spec: { podSelector: {}, ingress: [rule] },
  });
  const peer = [{ ipBlock: { cidr: '10.0.0.0/8' } }];
  const other = [{ ipBlock: { cidr: '192.168.0.0/16' } }];
  const a = normalizePolicy(mk({ from: peer }));
  const b = normalizePolicy(mk({ _from: peer }));
  const c = normalizePolicy(mk({ from: peer, _from: other }));
  assert.ok(a.ok && b.ok && c.ok);
  assert.deepEqual(a.value, b.value);
  assert.deepEqual(c.value, a.value);
  assert.deepEqual(a.value.ingress[0]?.peers, [{ kind: 'ipBlock', cidr: '10.0.0.0/8', except: [] }]);
});
