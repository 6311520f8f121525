// Applied status in daemonset/: the NodePolicyStatus CRD (what the agent
// writes and `status` reads), the Lease Role, the DaemonSet's settings and
// the optional ValidatingAdmissionPolicy.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { Ajv } from 'ajv';
import { DEFAULT_TENANCY } from '../../src/model/tenancy-config.ts';
import { tenancyState } from '../cases/tenancy-cluster.ts';
import { STATUS_GROUP, STATUS_KIND, STATUS_PLURAL, STATUS_VERSION } from '../../src/status/types.ts';
import { buildStatus } from '../../src/status/build.ts';
import { pod, policy, sel, state } from '../support/state-builder.ts';
import { DAEMONSET_DIR, arr, at, parseYamlStream, readText, rec, str } from './support.ts';

const docs = (file: string): Record<string, unknown>[] =>
  parseYamlStream(readText(join(DAEMONSET_DIR, file)), file).map((d) => rec(d, file));
const crd = rec(docs('nodepolicystatus-crd.yaml')[0], 'crd');
const version = rec(arr(at(crd, 'spec.versions'), 'versions')[0], 'version');

test('the CRD serves the kind the agent writes: cluster-scoped, status subresource, one version', () => {
  assert.equal(at(crd, 'metadata.name'), `${STATUS_PLURAL}.${STATUS_GROUP}`);
  assert.equal(at(crd, 'spec.group'), STATUS_GROUP);
  assert.equal(at(crd, 'spec.scope'), 'Cluster');
  assert.equal(at(crd, 'spec.names.kind'), STATUS_KIND);
  assert.equal(at(crd, 'spec.names.plural'), STATUS_PLURAL);
  assert.equal(version.name, STATUS_VERSION);
  assert.deepEqual(at(version, 'subresources'), { status: {} });
});

test('printer columns: node, in sync, policies, last apply, age', () => {
  const cols = arr(version.additionalPrinterColumns, 'columns').map((c) => rec(c, 'column'));
  const plain = cols.filter((c) => c.priority === undefined).map((c) => [c.name, c.jsonPath]);
  assert.deepEqual(plain, [
    ['Node', '.spec.nodeName'],
    ['In Sync', '.status.inSync'],
    ['Policies', '.status.counts.policies'],
    ['Last Apply', '.status.lastApplyTime'],
    ['Age', '.metadata.creationTimestamp'],
  ]);
});

test('the schema declares every field the builder writes (a structural schema prunes unknown ones)', () => {
  const p = {
    ...policy('shop', 'web', { podSelector: sel({ app: 'web' }) }),
    version: { uid: 'u', generation: 1, resourceVersion: '1' },
  };
  const bad = { ...p, errors: [{ kind: 'NetworkPolicy', namespace: 'shop', name: 'web', path: 'spec', message: 'x' }] };
  const s = buildStatus(
    {
      node: 'n1',
      applied: {
        state: state({ pods: [pod('shop', 'w', { labels: { app: 'web' }, ips: ['10.0.0.1'], node: 'n1' })], policies: [bad] }),
        stats: { chains: 1, rules: 1, sets: 1, maps: 1, elements: 1, localPods: 1, policies: 1 },
        hash: 'sha256:x',
        atUnixMs: 0,
      },
      last: { result: 'Failed', atUnixMs: 0, error: 'e' },
      inSync: false,
      agentVersion: 'v',
      nftVersion: 'n',
    },
    undefined,
  );
  const schema = rec(at(version, 'schema.openAPIV3Schema.properties.status.properties'), 'status schema');
  for (const k of Object.keys(s)) assert.ok(k in schema, `status.${k} is in the schema`);
  for (const k of Object.keys(s.counts)) assert.ok(k in rec(at(schema, 'counts.properties'), 'counts'), `counts.${k}`);
  const item = rec(at(schema, 'policies.items.properties'), 'policy item');
  for (const k of Object.keys(s.policies[0] ?? {})) assert.ok(k in item, `policies[].${k} is in the schema`);
});

test('the Lease Role: get, create and update on leases in the agent namespace, nothing else', () => {
  const [role, binding] = docs('lease-role.yaml');
  assert.equal(role?.kind, 'Role');
  assert.deepEqual(role?.rules, [
    { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] },
  ]);
  assert.deepEqual(at(binding, 'subjects'), [
    { kind: 'ServiceAccount', name: 'nft-netpol-agent', namespace: 'nft-netpol-system' },
  ]);
});

test('the DaemonSet gives the agent its namespace (Leases) and the status intervals', () => {
  const ds = rec(docs('daemonset.yaml')[0], 'ds');
  const env = arr(at(ds, 'spec.template.spec.containers.0.env'), 'env').map((e) => rec(e, 'env'));
  assert.deepEqual(env.find((e) => e.name === 'POD_NAMESPACE')?.valueFrom, { fieldRef: { fieldPath: 'metadata.namespace' } });
  assert.equal(env.find((e) => e.name === 'STATUS_INTERVAL')?.value, '5s');
  assert.equal(env.find((e) => e.name === 'HEARTBEAT_INTERVAL')?.value, '30s');
});

test('the optional admission policy ties the agent account to its own node, fail closed', () => {
  const [vap, binding] = parseYamlStream(
    readText(join(DAEMONSET_DIR, 'status-admission', 'validatingadmissionpolicy.yaml')),
    'vap',
  ).map((d) => rec(d, 'vap'));
  assert.equal(vap?.kind, 'ValidatingAdmissionPolicy');
  assert.equal(at(vap, 'spec.failurePolicy'), 'Fail');
  assert.match(
    str(at(vap, 'spec.matchConditions.0.expression'), 'match'),
    /system:serviceaccount:nft-netpol-system:nft-netpol-agent/,
  );
  const rules = arr(at(vap, 'spec.matchConstraints.resourceRules'), 'rules').map((r) => rec(r, 'rule'));
  assert.deepEqual(
    rules.map((r) => r.resources),
    [['nodepolicystatuses', 'nodepolicystatuses/status'], ['leases']],
  );
  assert.match(
    str(at(vap, 'spec.validations.0.expression'), 'validation'),
    /request\.name == request\.userInfo\.extra\['authentication\.kubernetes\.io\/node-name'\]\[0\]/,
  );
  assert.equal(at(binding, 'spec.policyName'), at(vap, 'metadata.name'));
  assert.deepEqual(at(binding, 'spec.validationActions'), ['Deny']);
});

test('the schema accepts the tenancy entries as the builder writes them (ajv on the structural schema)', () => {
  const statusSchema = rec(at(version, 'schema.openAPIV3Schema.properties.status'), 'status schema');
  const valid = new Ajv({ strict: false, allErrors: true }).compile(statusSchema);
  const s = buildStatus(
    {
      node: 'node-1',
      applied: {
        state: tenancyState({ isolatedWorkspaces: ['acme'], isolatedProjects: ['lab'] }, DEFAULT_TENANCY, true),
        stats: { chains: 1, rules: 1, sets: 1, maps: 1, elements: 1, localPods: 1, policies: 1 },
        hash: 'sha256:x',
        atUnixMs: 0,
      },
      last: { result: 'Applied', atUnixMs: 0, error: undefined },
      inSync: true,
      agentVersion: 'v',
      nftVersion: 'n',
    },
    undefined,
  );
  const kinds = new Set(s.policies.map((p) => p.kind));
  assert.ok(kinds.has('ProjectIsolation') || kinds.has('WorkspaceIsolation'), [...kinds].join(','));
  assert.ok(valid(s), JSON.stringify(valid.errors));
  // An entry of an older agent without kind is not what the agent writes: the schema requires kind.
  const { kind: _, ...noKind } = s.policies[0] ?? { kind: '' };
  assert.equal(valid({ ...s, policies: [noKind] }), false);
});
