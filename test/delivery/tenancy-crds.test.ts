// The optional tenancy CRDs (daemonset/tenancy/, a kustomize component, and
// daemonset/tenancy-crds/ that applies only it): they render, they are valid
// CustomResourceDefinitions, and their OpenAPI schemas reject what the
// agent's validation rejects (checked with ajv on the JSON-schema part; the
// one CEL rule, endPort >= port, is checked to be present, since CEL needs an
// API server to run).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { Ajv } from 'ajv';
import { normalizeNamespacePolicy, normalizeWorkspace } from '../../src/model/normalize.ts';
import { DAEMONSET_DIR, IN_CI, arr, at, parseYamlStream, rec, run, which } from './support.ts';

function render(t: TestContext, dir: string): Record<string, unknown>[] | undefined {
  const kubectl = which('kubectl');
  if (kubectl === undefined) {
    if (IN_CI) assert.fail('kubectl (with kustomize) is required in CI');
    t.skip('kubectl not on PATH');
    return undefined;
  }
  const r = run(kubectl, ['kustomize', dir]);
  assert.equal(r.status, 0, r.stderr);
  return parseYamlStream(r.stdout, dir).map((o, i) => rec(o, `object ${i}`));
}

function crd(objs: readonly Record<string, unknown>[], name: string): Record<string, unknown> {
  const o = objs.find((x) => rec(x.metadata, 'metadata').name === name);
  assert.ok(o !== undefined, name);
  return o;
}

function validator(c: Record<string, unknown>, version: string): (obj: unknown) => boolean {
  const v = arr(at(c, 'spec.versions'), 'versions').find((x) => at(x, 'name') === version);
  const schema = rec(at(v, 'schema.openAPIV3Schema'), 'schema');
  // Kubernetes' extensions are not JSON-schema keywords.
  const ajv = new Ajv({ strict: false, allErrors: true });
  return ajv.compile(schema);
}

const nsnp = (spec: unknown): Record<string, unknown> => ({
  apiVersion: 'network.kubesphere.io/v1alpha1',
  kind: 'NamespaceNetworkPolicy',
  metadata: { name: 'p', namespace: 'shop' },
  spec,
});

test('the component renders two CRDs; tenancy-crds applies only them; both validate as CRDs', async (t) => {
  const objs = render(t, join(DAEMONSET_DIR, 'tenancy-crds'));
  if (objs === undefined) return;
  assert.deepEqual(objs.map((o) => `${String(o.kind)}/${String(rec(o.metadata, 'm').name)}`).sort(), [
    'CustomResourceDefinition/namespacenetworkpolicies.network.kubesphere.io',
    'CustomResourceDefinition/workspaces.tenant.kubesphere.io',
  ]);
  const { CustomResourceDefinition } = await import('kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition');
  for (const o of objs) new CustomResourceDefinition(o as never).validate();
  const ws = crd(objs, 'workspaces.tenant.kubesphere.io');
  assert.deepEqual(
    arr(at(ws, 'spec.versions'), 'v').map(
      (v) => `${String(at(v, 'name'))} served=${String(at(v, 'served'))} storage=${String(at(v, 'storage'))}`,
    ),
    ['v1alpha1 served=true storage=true', 'v1alpha2 served=true storage=false'],
  );
  for (const v of arr(at(ws, 'spec.versions'), 'v'))
    assert.ok(arr(at(v, 'additionalPrinterColumns'), 'cols').some((c) => at(c, 'jsonPath') === '.spec.networkIsolation'));
  const np = crd(objs, 'namespacenetworkpolicies.network.kubesphere.io');
  assert.deepEqual(at(np, 'spec.names.shortNames'), ['nsnp']);
  assert.ok(arr(at(np, 'spec.versions'), 'v').every((v) => arr(at(v, 'additionalPrinterColumns'), 'c').length > 0));
});

test('the schemas reject what the model rejects, and accept what it accepts', (t) => {
  const objs = render(t, join(DAEMONSET_DIR, 'tenancy-crds'));
  if (objs === undefined) return;
  const np = crd(objs, 'namespacenetworkpolicies.network.kubesphere.io');
  const valid = validator(np, 'v1alpha1');
  const cases: [string, unknown, boolean][] = [
    [
      'every peer kind, ports with endPort',
      {
        policyTypes: ['Ingress', 'Egress'],
        ingress: [{ from: [{ namespace: { name: 'lab' } }, { ipBlock: { cidr: '10.0.0.0/8', except: ['10.1.0.0/16'] } }] }],
        egress: [
          {
            to: [{ service: { name: 'api', namespace: 'cart' } }],
            ports: [{ protocol: 'TCP', port: 8000, endPort: 8100 }, { port: 'http' }],
          },
        ],
      },
      true,
    ],
    ['a peer with neither field', { ingress: [{ from: [{}] }] }, false],
    ['a peer with two fields', { ingress: [{ from: [{ namespace: { name: 'a' }, service: { name: 'b' } }] }] }, false],
    ['a namespace peer without name', { ingress: [{ from: [{ namespace: {} }] }] }, false],
    ['an unknown protocol', { egress: [{ ports: [{ protocol: 'ICMP', port: 1 }] }] }, false],
    ['a port out of range', { egress: [{ ports: [{ port: 70000 }] }] }, false],
    ['a bad port name', { egress: [{ ports: [{ port: 'Not_A_Name' }] }] }, false],
    ['port 0', { egress: [{ ports: [{ port: 0 }] }] }, false],
    ['a port name longer than 15', { egress: [{ ports: [{ port: 'a-very-long-port-name' }] }] }, false],
    ['a port neither number nor name', { egress: [{ ports: [{ port: true }] }] }, false],
    ['an unknown policy type', { policyTypes: ['Sideways'] }, false],
  ];
  for (const [what, spec, ok] of cases) {
    assert.equal(valid(nsnp(spec)), ok, `schema: ${what}`);
    const r = normalizeNamespacePolicy(nsnp(spec));
    assert.equal(r.errors.length === 0, ok, `model: ${what}: ${JSON.stringify(r.errors)}`);
  }
  // endPort < port: a CEL rule (the API server runs it); the model rejects it too.
  const rules = JSON.stringify(np);
  assert.match(rules, /self\.endPort >= self\.port/);
  assert.ok(normalizeNamespacePolicy(nsnp({ egress: [{ ports: [{ port: 90, endPort: 80 }] }] })).errors.length > 0);

  const ws = crd(objs, 'workspaces.tenant.kubesphere.io');
  for (const version of ['v1alpha1', 'v1alpha2']) {
    const w = validator(ws, version);
    const obj = (spec: unknown) => ({
      apiVersion: `tenant.kubesphere.io/${version}`,
      kind: 'Workspace',
      metadata: { name: 'acme' },
      spec,
    });
    assert.equal(w(obj({ manager: 'admin', networkIsolation: true })), true);
    assert.equal(normalizeWorkspace(obj({ networkIsolation: true })).errors.length, 0);
    assert.equal(w(obj({ networkIsolation: 'yes' })), false);
    assert.ok(normalizeWorkspace(obj({ networkIsolation: 'yes' })).errors.length > 0);
  }
});
