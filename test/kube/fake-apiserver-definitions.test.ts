// The test API server refuses a CustomResourceDefinition or a
// ValidatingAdmissionPolicy that a real API server refuses (422 Invalid,
// every field named), accepts everything daemonset/ ships, and installs the
// custom resource groups it serves when their CRD is created. Its injected
// 429s carry Retry-After like a real server's while its storage initializes.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { FakeApiServer } from '../support/fake-apiserver.ts';

const DAEMONSET = join(import.meta.dirname, '..', '..', 'daemonset');

function shipped(kind: string): Record<string, unknown>[] {
  const files = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? files(join(dir, e.name)) : /\.ya?ml$/.test(e.name) ? [join(dir, e.name)] : [],
    );
  return files(DAEMONSET)
    .flatMap((f) => parseAllDocuments(readFileSync(f, 'utf8')).map((d) => d.toJS() as unknown))
    .filter((o): o is Record<string, unknown> => typeof o === 'object' && o !== null && (o as { kind?: unknown }).kind === kind);
}

async function start(t: TestContext): Promise<FakeApiServer> {
  const api = await FakeApiServer.start({ crds: [] });
  t.after(() => api.close());
  return api;
}

async function call(
  api: FakeApiServer,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ code: number; body: Record<string, unknown>; headers: Headers }> {
  const r = await fetch(`${api.url}${path}`, {
    method,
    headers: { 'Content-Type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { code: r.status, body: (await r.json()) as Record<string, unknown>, headers: r.headers };
}

const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
const NSNPS = '/apis/network.kubesphere.io/v1alpha1/namespacenetworkpolicies';

test('a non-structural CRD is refused with 422 Invalid naming the field; nothing is installed', async (t) => {
  const api = await start(t);
  const crd = structuredClone(
    shipped('CustomResourceDefinition').find(
      (c) => (c.metadata as { name?: unknown }).name === 'namespacenetworkpolicies.network.kubesphere.io',
    ),
  );
  assert.ok(crd !== undefined);
  // The port as the CRD had it before: type and bounds inside anyOf.
  const port = (
    (
      (((crd.spec as { versions: unknown[] }).versions[0] as Record<string, unknown>).schema as Record<string, unknown>)
        .openAPIV3Schema as Record<string, unknown>
    ).properties as Record<string, unknown>
  ).spec as Record<string, unknown> as {
    properties: { ingress: { items: { properties: { ports: { items: { properties: { port: unknown } } } } } } };
  };
  port.properties.ingress.items.properties.ports.items.properties.port = {
    'x-kubernetes-int-or-string': true,
    anyOf: [
      { type: 'integer', minimum: 1, maximum: 65535 },
      { type: 'string', pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' },
    ],
  };
  const r = await call(api, 'POST', CRDS, crd);
  assert.equal(r.code, 422);
  assert.equal(r.body.reason, 'Invalid');
  // ingress and egress share the ports schema (a YAML alias): both are named, sorted like the API server sorts.
  const at = (rule: string, i: number): string =>
    `spec.validation.openAPIV3Schema.properties[spec].properties[${rule}].items.properties[ports].items.properties[port].anyOf[${i}].type`;
  const fields = [at('egress', 0), at('egress', 1), at('ingress', 0), at('ingress', 1)];
  assert.equal(
    r.body.message,
    `CustomResourceDefinition.apiextensions.k8s.io "namespacenetworkpolicies.network.kubesphere.io" is invalid: [${fields.map((f) => `${f}: Forbidden: must be empty to be structural`).join(', ')}]`,
  );
  const field = fields[0];
  const details = r.body.details as { causes: unknown[]; kind: string };
  assert.equal(details.kind, 'CustomResourceDefinition');
  assert.deepEqual(details.causes[0], {
    reason: 'FieldValueForbidden',
    message: 'Forbidden: must be empty to be structural',
    field,
  });
  assert.equal((await call(api, 'GET', `${CRDS}/namespacenetworkpolicies.network.kubesphere.io`)).code, 404);
  assert.equal((await call(api, 'GET', `${NSNPS}`)).code, 404, 'the group stays uninstalled');
});

test('every CRD and admission policy daemonset/ ships is accepted; a CRD installs its group, deleting it uninstalls it', async (t) => {
  const api = await start(t);
  assert.equal((await call(api, 'GET', NSNPS)).code, 404);
  const crds = shipped('CustomResourceDefinition');
  assert.ok(crds.length >= 3);
  for (const c of crds) {
    const r = await call(api, 'POST', CRDS, c);
    assert.equal(r.code, 201, JSON.stringify(r.body));
  }
  assert.equal((await call(api, 'GET', NSNPS)).code, 200, 'created CRD installs network.kubesphere.io');
  const again = await call(api, 'POST', CRDS, crds[0]);
  assert.equal(again.code, 409);
  const listed = await call(api, 'GET', CRDS);
  assert.equal((listed.body.items as unknown[]).length, crds.length);
  for (const [plural, kind] of [
    ['validatingadmissionpolicies', 'ValidatingAdmissionPolicy'],
    ['validatingadmissionpolicybindings', 'ValidatingAdmissionPolicyBinding'],
  ] as const)
    for (const o of shipped(kind)) {
      const r = await call(api, 'POST', `/apis/admissionregistration.k8s.io/v1/${plural}`, o);
      assert.equal(r.code, 201, JSON.stringify(r.body));
    }
  assert.equal(api.definitions('ValidatingAdmissionPolicy').length, shipped('ValidatingAdmissionPolicy').length);
  const del = await call(api, 'DELETE', `${CRDS}/namespacenetworkpolicies.network.kubesphere.io`);
  assert.equal(del.code, 200);
  assert.equal((await call(api, 'GET', NSNPS)).code, 404, 'deleting the CRD uninstalls the group');
});

test('a broken ValidatingAdmissionPolicy is refused', async (t) => {
  const api = await start(t);
  const [vap] = shipped('ValidatingAdmissionPolicy');
  assert.ok(vap !== undefined);
  const broken = structuredClone(vap) as { spec: { validations: { reason: string }[] } };
  broken.spec.validations[0] = { ...broken.spec.validations[0], reason: 'NotAllowed' } as { reason: string };
  const r = await call(api, 'POST', '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies', broken);
  assert.equal(r.code, 422);
  assert.match(String(r.body.message), /spec\.validations\[0\]\.reason: Unsupported value: "NotAllowed"/);
});

test('an injected 429 carries Retry-After and details.retryAfterSeconds, like "storage is (re)initializing"', async (t) => {
  const api = await start(t);
  api.failNext(1, 429, { retryAfterSeconds: 1, message: 'storage is (re)initializing' });
  const r = await call(api, 'GET', '/api/v1/nodes');
  assert.equal(r.code, 429);
  assert.equal(r.headers.get('retry-after'), '1');
  assert.equal(r.body.reason, 'TooManyRequests');
  assert.equal(r.body.message, 'storage is (re)initializing');
  assert.deepEqual(r.body.details, { retryAfterSeconds: 1 });
  assert.equal((await call(api, 'GET', '/api/v1/nodes')).code, 200);
});
