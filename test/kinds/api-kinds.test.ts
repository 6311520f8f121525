// The API kind descriptors (src/kinds/api-kinds.ts) against the places that
// must agree with them: the engines' registry, the file loader, the status
// entry kinds and the Event reasons.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  API_KINDS,
  CLUSTER_POLICY_APIS,
  apiKind,
  apiVersionOf,
  collectionPath,
  invalidReason,
  statusTypeNames,
} from '../../src/kinds/api-kinds.ts';
import { POLICY_KINDS } from '../../src/kinds/registry.ts';
import { loaderKind, readsKind } from '../../src/model/normalize.ts';
import { CLUSTER_POLICY_KINDS } from '../../src/model/normalize-cluster-policy.ts';
import { POLICY_KINDS as STATUS_POLICY_KINDS } from '../../src/status/types.ts';

describe('API kind descriptors', () => {
  test('one descriptor per kind, one per resource', () => {
    const kinds = API_KINDS.map((d) => d.kind);
    assert.equal(new Set(kinds).size, kinds.length);
    const resources = API_KINDS.map((d) => `${d.group}/${d.plural}`);
    assert.equal(new Set(resources).size, resources.length);
  });

  test('every engine kind is fed by a descriptor, and every descriptor feeds registered kinds', () => {
    const engine = new Set(POLICY_KINDS.map((k) => k.kind));
    const fed = new Set(API_KINDS.flatMap((d) => d.engineKinds));
    assert.deepEqual(
      [...fed].filter((k) => !engine.has(k)),
      [],
    );
    assert.deepEqual(
      [...engine].filter((k) => !fed.has(k)),
      [],
    );
  });

  test('the file loader knows every descriptor kind, with the same scope and normalizer', () => {
    for (const d of API_KINDS) {
      const l = loaderKind(d.kind);
      assert.ok(l !== undefined, `the file loader ignores ${d.kind}`);
      assert.equal(readsKind(d.kind), true);
      assert.equal(l.namespaced, d.namespaced, `${d.kind} scope`);
      assert.equal(l.normalize, d.normalize, `${d.kind} normalizer`);
    }
    assert.equal(loaderKind('ConfigMap'), undefined);
  });

  test('the normalizer reads its own kind and apiVersion', () => {
    for (const d of API_KINDS) {
      const r = d.normalize({
        apiVersion: apiVersionOf(d),
        kind: d.kind,
        metadata: { name: 'x', ...(d.namespaced ? { namespace: 'ns' } : {}) },
        spec: {},
      });
      assert.ok(r.ok || r.errors.every((e) => e.path !== 'kind' && e.path !== 'apiVersion'), `${d.kind}: ${JSON.stringify(r)}`);
    }
  });

  test('the cluster policy kinds are the model kinds read into ClusterNetworkPolicy', () => {
    assert.deepEqual(
      CLUSTER_POLICY_APIS.map((d) => d.kind),
      [...CLUSTER_POLICY_KINDS],
    );
    for (const d of CLUSTER_POLICY_APIS) {
      assert.equal(d.optional, true);
      assert.equal(d.watched, 'cluster-policies');
    }
    // The kube source watches CLUSTER_POLICY_APIS, and the Workspace and NamespaceNetworkPolicy descriptors with tenancy:
    // every optional watched descriptor is one of those.
    assert.deepEqual(
      API_KINDS.filter((d) => d.optional && d.watched !== 'never').map((d) => d.kind),
      ['NamespaceNetworkPolicy', 'Workspace', ...CLUSTER_POLICY_KINDS],
    );
  });

  test('paths, versions and Event reasons', () => {
    assert.equal(collectionPath(apiKind('Pod') ?? assert.fail()), '/api/v1/pods');
    assert.equal(collectionPath(apiKind('NetworkPolicy') ?? assert.fail()), '/apis/networking.k8s.io/v1/networkpolicies');
    assert.equal(apiVersionOf(apiKind('Namespace') ?? assert.fail()), 'v1');
    assert.equal(apiVersionOf(apiKind('ClusterNetworkPolicy') ?? assert.fail()), 'policy.networking.k8s.io/v1alpha2');
    assert.equal(invalidReason('NetworkPolicy'), 'InvalidNetworkPolicy');
    assert.equal(invalidReason('NamespaceNetworkPolicy'), 'InvalidNamespaceNetworkPolicy');
    assert.equal(invalidReason('BaselineAdminNetworkPolicy'), 'InvalidBaselineAdminNetworkPolicy');
    // Every kind with an Event names itself in it (what `kubectl describe` users search for).
    for (const d of API_KINDS) if (d.invalidReason !== undefined) assert.equal(d.invalidReason, `Invalid${d.kind}`);
  });

  test('status entries: the kinds NodePolicyStatus names, in their order', () => {
    assert.deepEqual(STATUS_POLICY_KINDS, [
      'NetworkPolicy',
      'NamespaceNetworkPolicy',
      'ProjectIsolation',
      'WorkspaceIsolation',
      'ClusterNetworkPolicy',
      'AdminNetworkPolicy',
      'BaselineAdminNetworkPolicy',
    ]);
    // A kind that has status names has status entries, and its entries are its own kind or its isolation.
    for (const d of API_KINDS) if (d.status !== undefined) assert.ok(d.statusEntries.length > 0, d.kind);
  });

  test('status names: kubectl names also with their group, one target each', () => {
    const names = statusTypeNames();
    assert.equal(names.get('netpol'), 'NetworkPolicy');
    assert.equal(names.get('networkpolicies.networking.k8s.io'), 'NetworkPolicy');
    assert.equal(names.get('nsnp'), 'NamespaceNetworkPolicy');
    assert.equal(names.get('ns'), 'namespace');
    assert.equal(names.get('ns.'), undefined);
    assert.equal(names.get('workspaces.tenant.kubesphere.io'), 'workspace');
    assert.equal(names.get('workspaceisolation.tenant.kubesphere.io'), undefined);
    assert.equal(names.get('cnp'), 'ClusterNetworkPolicy');
    assert.equal(names.get('banps.policy.networking.k8s.io'), 'BaselineAdminNetworkPolicy');
    // No name is claimed twice.
    const all = API_KINDS.flatMap((d) => (d.status === undefined ? [] : [...d.status.names, ...d.status.aliases]));
    assert.equal(new Set(all).size, all.length);
  });
});
