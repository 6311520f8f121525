// explain --staged (policy/staged.ts): the verdict with staged policies
// enforced, what changes per direction, and which staged policy and rule
// cause it; and that a staged policy changes no enforced verdict.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readStaged, stagedNames, withStagedEnforced } from '../../src/model/staged.ts';
import { stagedChangesText, stagedPolicyLabels, stagedVerdict } from '../../src/policy/staged.ts';
import { verdict, type Endpoint } from '../../src/policy/verdict.ts';
import type { ClusterState } from '../../src/model/types.ts';
import { clusterNetworkPolicy } from '../cases/cnp-conformance.ts';
import { networkPolicy, type RawObject } from '../cases/raw.ts';
import { stateOf } from '../harness/enforce.ts';

const STAGED = { 'nft-netpol.io/staged': 'true' };
const staged = (o: RawObject): RawObject => ({ ...o, metadata: { ...o.metadata, annotations: STAGED } });

const ns = (name: string): RawObject => ({
  apiVersion: 'v1',
  kind: 'Namespace',
  metadata: { name, labels: { 'kubernetes.io/metadata.name': name } },
});
const pod = (namespace: string, name: string, ip: string, app: string): RawObject =>
  ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels: { app } },
    spec: { nodeName: 'node-1', containers: [{ name: 'c', image: 'x' }] },
    status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] },
  }) as RawObject;

const CLUSTER: RawObject[] = [
  ns('shop'),
  ns('ops'),
  pod('shop', 'web', '10.0.0.2', 'web'),
  pod('shop', 'db', '10.0.0.3', 'db'),
  pod('ops', 'mon', '10.0.0.4', 'mon'),
];
const DB_FROM_WEB = networkPolicy('shop', 'db-from-web', {
  podSelector: { matchLabels: { app: 'db' } },
  ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 5432 }] }],
});
const DENY_DB = networkPolicy('shop', 'deny-db', { podSelector: { matchLabels: { app: 'db' } }, policyTypes: ['Ingress'] });

function podEp(s: ClusterState, key: string): Endpoint {
  const p = s.pods.find((x) => `${x.namespace}/${x.name}` === key);
  assert.ok(p !== undefined);
  return { kind: 'pod', pod: p };
}

test('the annotation: only "true" stages a policy; the kinds skip staged objects, withStagedEnforced enforces them', () => {
  assert.equal(readStaged({ 'nft-netpol.io/staged': 'true' }), true);
  for (const v of ['True', 'yes', '1', '', undefined]) assert.equal(readStaged({ 'nft-netpol.io/staged': v }), false, String(v));
  assert.equal(readStaged(undefined), false);
  const s = stateOf([...CLUSTER, staged(DB_FROM_WEB)]);
  assert.deepEqual(stagedNames(s), { policies: ['shop/db-from-web'], clusterPolicies: [] });
  // Not enforced: mon reaches db; with it enforced, it does not.
  assert.equal(verdict(s, podEp(s, 'ops/mon'), podEp(s, 'shop/db'), 'TCP', 5432).allowed, true);
  const e = withStagedEnforced(s);
  assert.equal(verdict(e, podEp(s, 'ops/mon'), podEp(s, 'shop/db'), 'TCP', 5432).allowed, false);
  assert.equal(withStagedEnforced(stateOf(CLUSTER)).policies.length, 0);
});

test('would deny: a staged allow-list policy isolates the pod; the reason and the staged policy are named', () => {
  const s = stateOf([...CLUSTER, staged(DB_FROM_WEB)]);
  const v = stagedVerdict(s, podEp(s, 'ops/mon'), podEp(s, 'shop/db'), 'TCP', 5432);
  assert.equal(v.enforced.allowed, true);
  assert.equal(v.staged.allowed, false);
  assert.deepEqual(
    v.changes.map((c) => [c.direction, c.change, c.policies]),
    [['ingress', 'would-deny', ['shop/db-from-web']]],
  );
  assert.match(v.changes[0]!.reason, /isolated/);
  // web is allowed either way: no change.
  const w = stagedVerdict(s, podEp(s, 'shop/web'), podEp(s, 'shop/db'), 'TCP', 5432);
  assert.deepEqual(w.changes, []);
  assert.match(stagedChangesText(w, 1), /no change/);
  assert.match(stagedChangesText(v, 1), /ingress at the destination: would deny by shop\/db-from-web/);
});

test('would allow: a staged allow under an enforced deny names the allowing rule', () => {
  const s = stateOf([...CLUSTER, DENY_DB, staged(DB_FROM_WEB)]);
  const v = stagedVerdict(s, podEp(s, 'shop/web'), podEp(s, 'shop/db'), 'TCP', 5432);
  assert.equal(v.enforced.allowed, false);
  assert.equal(v.staged.allowed, true);
  assert.equal(v.changes.length, 1);
  assert.equal(v.changes[0]!.change, 'would-allow');
  assert.deepEqual(v.changes[0]!.policies, ['shop/db-from-web']);
  assert.match(v.changes[0]!.rule ?? '', /db-from-web/);
  // Another port stays denied with or without it.
  assert.deepEqual(stagedVerdict(s, podEp(s, 'shop/web'), podEp(s, 'shop/db'), 'TCP', 80).changes, []);
});

test('a staged ClusterNetworkPolicy Deny: would deny, decided by that rule; unstaged, it is enforced', () => {
  const cnp = clusterNetworkPolicy('no-mon', {
    tier: 'Admin',
    priority: 5,
    subject: { namespaces: { matchLabels: { 'kubernetes.io/metadata.name': 'shop' } } },
    ingress: [
      { name: 'block-ops', action: 'Deny', from: [{ namespaces: { matchLabels: { 'kubernetes.io/metadata.name': 'ops' } } }] },
    ],
  });
  const s = stateOf([...CLUSTER, staged(cnp)]);
  assert.deepEqual([...stagedPolicyLabels(s)], ['ClusterNetworkPolicy no-mon']);
  assert.deepEqual(stagedNames(s), { policies: [], clusterPolicies: ['ClusterNetworkPolicy no-mon'] });
  const v = stagedVerdict(s, podEp(s, 'ops/mon'), podEp(s, 'shop/web'), 'TCP', 80);
  assert.equal(v.enforced.allowed, true);
  assert.deepEqual(
    v.changes.map((c) => [c.direction, c.change, c.policies]),
    [['ingress', 'would-deny', ['ClusterNetworkPolicy no-mon']]],
  );
  assert.match(v.changes[0]!.rule ?? '', /block-ops/);
  const enforced = stateOf([...CLUSTER, cnp]);
  assert.equal(verdict(enforced, podEp(enforced, 'ops/mon'), podEp(enforced, 'shop/web'), 'TCP', 80).allowed, false);
});

test('nothing staged: no change, and the same verdict object as verdict()', () => {
  const s = stateOf([...CLUSTER, DENY_DB]);
  const v = stagedVerdict(s, podEp(s, 'shop/web'), podEp(s, 'shop/db'), 'TCP', 5432);
  assert.equal(v.staged, v.enforced);
  assert.deepEqual(v.changes, []);
  assert.equal(stagedChangesText(v, 0), 'staged policies: none\n');
});
