import { test } from 'node:test';
import assert from 'node:assert/strict';
import { normalizeClusterNetworkPolicy, normalizeNamespace, normalizePod, normalizePolicy } from '../../src/model/normalize.ts';
import type { ClusterNetworkPolicy, Namespace, NetworkPolicy, Pod } from '../../src/model/types.ts';
import { labelQuery } from '../../src/kube/label-query.ts';
import { nodePeersNeeded, planPeerWatches, relevantPolicies, samePlan } from '../../src/kube/peer-demand.ts';
import { labelsMatch, parseLabelSelector } from '../support/fake-apiserver.ts';

function policy(namespace: string, name: string, spec: Record<string, unknown>): NetworkPolicy {
  const r = normalizePolicy({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace, name }, spec });
  assert.ok(r.ok);
  return r.value;
}

function localPod(namespace: string, name: string, labels: Record<string, string>, hostNetwork = false): Pod {
  const r = normalizePod({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { namespace, name, labels },
    spec: { nodeName: 'node-1', hostNetwork, containers: [] },
    status: { phase: 'Running', podIP: '10.0.0.1' },
  });
  assert.ok(r.ok);
  return r.value;
}

function ns(name: string, labels: Record<string, string> = {}): Namespace {
  const r = normalizeNamespace({
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name, labels: { 'kubernetes.io/metadata.name': name, ...labels } },
  });
  assert.ok(r.ok);
  return r.value;
}

const web = localPod('shop', 'web-1', { app: 'web' });
const namespaces = [ns('shop', { team: 'a' }), ns('billing', { team: 'a' }), ns('ops', { team: 'b' }), ns('dev')];
const selectWeb = { podSelector: { matchLabels: { app: 'web' } } };

/** Plan as comparable lines: "<key>" or "<key> [ns1,ns2]" for filtered cluster-wide watches. */
function lines(
  policies: NetworkPolicy[],
  localPods: Pod[] = [web],
  max?: number,
): { mode: string; watches: string[]; reason: string | undefined } {
  const plan = planPeerWatches({ policies, localPods, namespaces }, max);
  return {
    mode: plan.mode,
    watches: plan.watches.map((w) => (w.namespaces === undefined ? w.key : `${w.key} [${w.namespaces.join(',')}]`)),
    reason: plan.reason,
  };
}

const cases: { name: string; policies: NetworkPolicy[]; localPods?: Pod[]; max?: number; mode: string; watches: string[] }[] = [
  { name: 'no policies', policies: [], mode: 'none', watches: [] },
  {
    name: 'policy selecting no local pod',
    policies: [
      policy('shop', 'db', {
        podSelector: { matchLabels: { app: 'db' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'x' } } }] }],
      }),
    ],
    mode: 'none',
    watches: [],
  },
  {
    name: 'policy in another namespace than the local pods',
    policies: [policy('ops', 'p', { podSelector: {}, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'x' } } }] }] })],
    mode: 'none',
    watches: [],
  },
  {
    name: 'hostNetwork local pods are never isolated',
    policies: [policy('shop', 'p', { podSelector: {}, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'x' } } }] }] })],
    localPods: [localPod('shop', 'h', { app: 'web' }, true)],
    mode: 'none',
    watches: [],
  },
  {
    name: 'podSelector peer: own namespace, server-side selector',
    policies: [policy('shop', 'p', { ...selectWeb, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'fe' } } }] }] })],
    mode: 'selective',
    watches: ['shop|app=fe'],
  },
  {
    name: 'ipBlock and peerless rules need no pods',
    policies: [
      policy('shop', 'p', {
        ...selectWeb,
        policyTypes: ['Ingress', 'Egress'],
        ingress: [{}, { from: [{ ipBlock: { cidr: '10.0.0.0/8' } }] }],
        egress: [{ ports: [{ port: 53, protocol: 'UDP' }] }],
      }),
    ],
    mode: 'none',
    watches: [],
  },
  {
    name: 'same selector in two policies is watched once',
    policies: [
      policy('shop', 'p1', { ...selectWeb, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'fe' } } }] }] }),
      policy('shop', 'p2', { podSelector: {}, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'fe' } } }] }] }),
    ],
    mode: 'selective',
    watches: ['shop|app=fe'],
  },
  {
    name: 'matchExpressions become label-selector syntax',
    policies: [
      policy('shop', 'p', {
        ...selectWeb,
        ingress: [
          {
            from: [
              {
                podSelector: {
                  matchLabels: { tier: 'x' },
                  matchExpressions: [
                    { key: 'env', operator: 'In', values: ['prod', 'canary'] },
                    { key: 'gone', operator: 'DoesNotExist' },
                    { key: 'team', operator: 'Exists' },
                    { key: 'zone', operator: 'NotIn', values: ['b'] },
                  ],
                },
              },
            ],
          },
        ],
      }),
    ],
    mode: 'selective',
    watches: ['shop|!gone,env in (canary,prod),team,tier=x,zone notin (b)'],
  },
  {
    name: 'namespaceSelector + podSelector: each matching namespace',
    policies: [
      policy('shop', 'p', {
        ...selectWeb,
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'a' } }, podSelector: { matchLabels: { app: 'fe' } } }] }],
      }),
    ],
    mode: 'selective',
    watches: ['billing|app=fe', 'shop|app=fe'],
  },
  {
    name: 'namespaceSelector only: every pod of the matching namespaces',
    policies: [
      policy('shop', 'p', { ...selectWeb, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'b' } } }] }] }),
    ],
    mode: 'selective',
    watches: ['ops|'],
  },
  {
    name: 'namespaceSelector matching nothing needs nothing',
    policies: [
      policy('shop', 'p', { ...selectWeb, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'zzz' } } }] }] }),
    ],
    mode: 'none',
    watches: [],
  },
  {
    name: 'a whole-namespace watch subsumes selector watches in it',
    policies: [
      policy('shop', 'p1', { ...selectWeb, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'b' } } }] }] }),
      policy('ops', 'p2', { podSelector: {}, ingress: [] }),
      policy('shop', 'p3', {
        ...selectWeb,
        egress: [
          {
            to: [
              {
                namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ops' } },
                podSelector: { matchLabels: { app: 'm' } },
              },
            ],
          },
        ],
        policyTypes: ['Egress'],
      }),
    ],
    mode: 'selective',
    watches: ['ops|'],
  },
  {
    name: 'empty namespaceSelector + podSelector: one cluster-wide selector watch',
    policies: [
      policy('shop', 'p', {
        ...selectWeb,
        ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'mon' } } }] }],
      }),
    ],
    mode: 'selective',
    watches: ['*|app=mon'],
  },
  {
    name: 'empty namespaceSelector alone: every pod',
    policies: [policy('shop', 'p', { ...selectWeb, ingress: [{ from: [{ namespaceSelector: {} }] }] })],
    mode: 'all',
    watches: ['*|'],
  },
  {
    name: 'egress named port without peers: every pod',
    policies: [policy('shop', 'p', { ...selectWeb, policyTypes: ['Egress'], egress: [{ ports: [{ port: 'http' }] }] })],
    mode: 'all',
    watches: ['*|'],
  },
  {
    name: 'egress named port to an ipBlock: every pod',
    policies: [
      policy('shop', 'p', {
        ...selectWeb,
        policyTypes: ['Egress'],
        egress: [{ to: [{ ipBlock: { cidr: '10.0.0.0/8' } }], ports: [{ port: 'http' }] }],
      }),
    ],
    mode: 'all',
    watches: ['*|'],
  },
  {
    name: 'egress named port to pod peers: just the peers',
    policies: [
      policy('shop', 'p', {
        ...selectWeb,
        policyTypes: ['Egress'],
        egress: [{ to: [{ podSelector: { matchLabels: { app: 'db' } } }], ports: [{ port: 'sql' }] }],
      }),
    ],
    mode: 'selective',
    watches: ['shop|app=db'],
  },
  {
    name: 'ingress named port resolves on the local pod: no remote pods',
    policies: [policy('shop', 'p', { ...selectWeb, ingress: [{ ports: [{ port: 'http' }] }] })],
    mode: 'none',
    watches: [],
  },
  {
    name: 'rules of a direction the policy does not isolate are ignored',
    policies: [
      policy('shop', 'p', {
        ...selectWeb,
        policyTypes: ['Ingress'],
        egress: [{ to: [{ podSelector: { matchLabels: { app: 'db' } } }] }],
      }),
    ],
    mode: 'none',
    watches: [],
  },
  {
    name: 'invalid rules allow nothing and need no peers',
    policies: [
      policy('shop', 'p', {
        ...selectWeb,
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'fe' } } }], ports: [{ port: 80, endPort: 10 }] }],
      }),
    ],
    mode: 'none',
    watches: [],
  },
  {
    name: 'past the bound, the widest selector goes cluster-wide with a namespace filter',
    policies: [
      policy('shop', 'p', {
        ...selectWeb,
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'a' } }, podSelector: { matchLabels: { app: 'fe' } } }] }],
      }),
      policy('shop', 'q', { ...selectWeb, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'x' } } }] }] }),
    ],
    max: 2,
    mode: 'selective',
    watches: ['*|app=fe [billing,shop]', 'shop|app=x'],
  },
  {
    name: 'past the bound with nothing left to merge: one cluster-wide pod watch',
    policies: [
      policy('shop', 'p', {
        ...selectWeb,
        ingress: [
          {
            from: [
              { podSelector: { matchLabels: { app: 'a' } } },
              { podSelector: { matchLabels: { app: 'b' } } },
              { podSelector: { matchLabels: { app: 'c' } } },
            ],
          },
        ],
      }),
    ],
    max: 2,
    mode: 'all',
    watches: ['*|'],
  },
];

for (const c of cases) {
  test(`peer demand: ${c.name}`, () => {
    const got = lines(c.policies, c.localPods, c.max);
    assert.equal(got.mode, c.mode, got.reason);
    assert.deepEqual(got.watches, c.watches);
    if (c.mode === 'all') assert.ok(got.reason !== undefined && got.reason.length > 0);
  });
}

test('peer demand: the default bound is 32 distinct watches', () => {
  const peers = Array.from({ length: 33 }, (_, i) => ({ podSelector: { matchLabels: { app: `a${i}` } } }));
  const at = lines([policy('shop', 'p', { ...selectWeb, ingress: [{ from: peers.slice(0, 32) }] })]);
  assert.equal(at.mode, 'selective');
  assert.equal(at.watches.length, 32);
  assert.equal(lines([policy('shop', 'p', { ...selectWeb, ingress: [{ from: peers }] })]).mode, 'all');
});

test('peer demand: relevance follows local pod labels', () => {
  const p = policy('shop', 'p', { podSelector: { matchLabels: { app: 'db' } }, ingress: [] });
  assert.deepEqual(relevantPolicies([p], [web]), []);
  assert.deepEqual(relevantPolicies([p], [localPod('shop', 'db-1', { app: 'db' })]), [p]);
});

test('peer demand: samePlan compares keys and filters', () => {
  const a = planPeerWatches({
    policies: [policy('shop', 'p', { ...selectWeb, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'fe' } } }] }] })],
    localPods: [web],
    namespaces,
  });
  const b = planPeerWatches({
    policies: [policy('shop', 'p', { ...selectWeb, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'fe' } } }] }] })],
    localPods: [web],
    namespaces,
  });
  const c = planPeerWatches({ policies: [], localPods: [web], namespaces });
  assert.ok(samePlan(a, b));
  assert.ok(!samePlan(a, c));
});

test('label query: round-trips through the API server parser with the same meaning', () => {
  const sel = {
    matchLabels: { app: 'web', 'example.com/tier': '' },
    matchExpressions: [
      { key: 'env', operator: 'In' as const, values: ['a', 'b'] },
      { key: 'zone', operator: 'NotIn' as const, values: ['x'] },
      { key: 'team', operator: 'Exists' as const, values: [] },
      { key: 'old', operator: 'DoesNotExist' as const, values: [] },
    ],
  };
  const q = labelQuery(sel);
  assert.equal(q, '!old,app=web,env in (a,b),example.com/tier=,team,zone notin (x)');
  const reqs = parseLabelSelector(q ?? '');
  assert.ok(labelsMatch(reqs, { app: 'web', 'example.com/tier': '', env: 'b', team: 't' }));
  assert.ok(!labelsMatch(reqs, { app: 'web', 'example.com/tier': '', env: 'b', team: 't', zone: 'x' }));
  assert.ok(!labelsMatch(reqs, { app: 'web', 'example.com/tier': '', env: 'b', team: 't', old: '1' }));
  assert.ok(!labelsMatch(reqs, { app: 'web', 'example.com/tier': '', env: 'c', team: 't' }));
});

test('label query: inexpressible selectors are refused', () => {
  assert.equal(labelQuery({ matchLabels: {}, matchExpressions: [{ key: 'a', operator: 'In', values: [] }] }), undefined);
  assert.equal(labelQuery({ matchLabels: { 'a b': 'c' }, matchExpressions: [] }), undefined);
  assert.equal(labelQuery({ matchLabels: {}, matchExpressions: [] }), '');
});

// ---------------------------------------------------------------- ClusterNetworkPolicies

function cnp(name: string, spec: Record<string, unknown>): ClusterNetworkPolicy {
  const r = normalizeClusterNetworkPolicy({
    apiVersion: 'policy.networking.k8s.io/v1alpha2',
    kind: 'ClusterNetworkPolicy',
    metadata: { name },
    spec: { tier: 'Admin', priority: 1, ...spec },
  });
  assert.ok(r.ok);
  return r.value;
}

function cnpPlan(clusterPolicies: ClusterNetworkPolicy[], localPods: Pod[] = [web]): { mode: string; watches: string[] } {
  const plan = planPeerWatches({ policies: [], localPods, namespaces, clusterPolicies });
  return { mode: plan.mode, watches: plan.watches.map((w) => w.key) };
}

test('cluster policies selecting a local pod add their pod peers; namespaces {} is every namespace', () => {
  const p = cnp('a', {
    subject: { namespaces: { matchLabels: { team: 'a' } } },
    ingress: [
      {
        action: 'Accept',
        from: [{ pods: { namespaceSelector: { matchLabels: { team: 'b' } }, podSelector: { matchLabels: { app: 'mon' } } } }],
      },
      { action: 'Deny', from: [{ namespaces: { matchLabels: { team: 'a' } } }] },
    ],
    egress: [{ action: 'Deny', to: [{ networks: ['10.0.0.0/8'] }, { nodes: {} }] }],
  });
  assert.deepEqual(cnpPlan([p]), { mode: 'selective', watches: ['billing|', 'ops|app=mon', 'shop|'] });
  // The subject selects no local pod: nothing needed.
  const other = cnp('b', {
    subject: { namespaces: { matchLabels: { team: 'b' } } },
    ingress: [{ action: 'Deny', from: [{ namespaces: {} }] }],
  });
  assert.deepEqual(cnpPlan([other]), { mode: 'none', watches: [] });
  assert.deepEqual(cnpPlan([p], [localPod('shop', 'h', { app: 'web' }, true)]), { mode: 'none', watches: [] });
  // A pods peer with namespaceSelector {} spans every namespace: one cluster-wide selector watch.
  const wide = cnp('c', {
    subject: { namespaces: {} },
    ingress: [{ action: 'Accept', from: [{ pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: 'mon' } } } }] }],
  });
  assert.deepEqual(cnpPlan([wide]), { mode: 'selective', watches: ['*|app=mon'] });
  assert.deepEqual(
    cnpPlan([cnp('d', { subject: { namespaces: {} }, ingress: [{ action: 'Deny', from: [{ namespaces: {} }] }] })]).mode,
    'all',
  );
});

test('cluster policies: invalid rules need no peers; a named port with an unknown Deny peer needs every pod; nodes peers need every Node', () => {
  const invalid = cnp('a', {
    subject: { namespaces: {} },
    ingress: [{ action: 'Accept', from: [{ pods: { podSelector: { matchLabels: { app: 'x' } } }, namespaces: {} }] }],
  });
  assert.equal(invalid.ingress[0]?.invalid, true);
  assert.deepEqual(cnpPlan([invalid]), { mode: 'none', watches: [] });
  const unknown = cnp('b', {
    subject: { namespaces: {} },
    egress: [{ action: 'Deny', to: [{ somethingNew: {} }], protocols: [{ destinationNamedPort: 'http' }] }],
  });
  assert.equal(cnpPlan([unknown]).mode, 'all');
  const nodes = cnp('c', { subject: { namespaces: {} }, egress: [{ action: 'Accept', to: [{ nodes: {} }] }] });
  assert.equal(nodePeersNeeded({ policies: [], localPods: [web], namespaces, clusterPolicies: [nodes] }), true);
  assert.equal(nodePeersNeeded({ policies: [], localPods: [], namespaces, clusterPolicies: [nodes] }), false);
  assert.equal(nodePeersNeeded({ policies: [], localPods: [web], namespaces, clusterPolicies: [unknown] }), false);
});
