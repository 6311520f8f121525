// The optional ClusterNetworkPolicy CRD (daemonset/cluster-network-policy-crds/):
// it renders, is a valid and structural CustomResourceDefinition, and its
// validation agrees with the agent's normalizer (normalize-cluster-policy.ts)
// object by object: the OpenAPI part checked with ajv, `x-kubernetes-list-type:
// set` by hand, and every x-kubernetes-validations rule evaluated with a real
// CEL implementation (@marcbachmann/cel-js; Kubernetes' isCIDR registered
// from node:net, independently of the model's CIDR parser).
import assert from 'node:assert/strict';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { Environment } from '@marcbachmann/cel-js';
import { Ajv } from 'ajv';
import { normalizeClusterNetworkPolicy } from '../../src/model/normalize.ts';
import { formatValidationError } from '../../src/model/types.ts';
import { DAEMONSET_DIR, IN_CI, arr, at, parseYamlStream, rec, run, str, which } from './support.ts';

function render(t: TestContext): Record<string, unknown>[] | undefined {
  const kubectl = which('kubectl');
  if (kubectl === undefined) {
    if (IN_CI) assert.fail('kubectl (with kustomize) is required in CI');
    t.skip('kubectl not on PATH');
    return undefined;
  }
  const dir = join(DAEMONSET_DIR, 'cluster-network-policy-crds');
  const r = run(kubectl, ['kustomize', dir]);
  assert.equal(r.status, 0, r.stderr);
  return parseYamlStream(r.stdout, dir).map((o, i) => rec(o, `object ${i}`));
}

function schemaOf(crd: Record<string, unknown>): Record<string, unknown> {
  const v = arr(at(crd, 'spec.versions'), 'versions').find((x) => at(x, 'name') === 'v1alpha2');
  return rec(at(v, 'schema.openAPIV3Schema'), 'schema');
}

/** The structural-schema rules that apply to a schema without anyOf/allOf/oneOf/not: a type on every node. */
function structuralProblems(s: unknown, path: string, out: string[]): string[] {
  const node = rec(s, path);
  for (const k of ['anyOf', 'allOf', 'oneOf', 'not']) if (k in node) out.push(`${path}: ${k} (not used here)`);
  if (
    typeof node.type !== 'string' &&
    node['x-kubernetes-int-or-string'] !== true &&
    node['x-kubernetes-preserve-unknown-fields'] !== true
  )
    out.push(`${path}: no type`);
  if (node.type === 'array' && node.items === undefined) out.push(`${path}: array without items`);
  for (const [k, v] of Object.entries(rec(node.properties ?? {}, `${path}.properties`)))
    structuralProblems(v, `${path}.${k}`, out);
  if (node.items !== undefined) structuralProblems(node.items, `${path}[]`, out);
  if (typeof node.additionalProperties === 'object') structuralProblems(node.additionalProperties, `${path}{}`, out);
  return out;
}

/** Kubernetes' CEL isCIDR: an IPv4 or IPv6 address (no zone, no leading zeros) / a decimal prefix within the family's bits. */
function isCIDR(s: string): boolean {
  const m = /^([^/]+)\/(0|[1-9][0-9]{0,2})$/.exec(s);
  if (m === null) return false;
  const fam = isIP(m[1] ?? '');
  if (fam === 0 || (fam === 4 && /(^|\.)0\d/.test(m[1] ?? ''))) return false;
  return Number(m[2]) <= (fam === 4 ? 32 : 128);
}

const cel = new Environment({ unlistedVariablesAreDyn: true }).registerFunction('isCIDR(string): bool', isCIDR);

/** Every failed check of the CRD's validation for `obj`: ajv (OpenAPI), list-type set, CEL rules. */
function crdProblems(
  schema: Record<string, unknown>,
  validate: (o: unknown) => boolean,
  errors: () => unknown,
  obj: unknown,
): string[] {
  const out: string[] = [];
  if (!validate(obj)) out.push(`openapi: ${JSON.stringify(errors())}`);
  const walk = (s: Record<string, unknown>, v: unknown, path: string): void => {
    if (v === undefined || v === null) return;
    for (const r of arr(s['x-kubernetes-validations'] ?? [], 'rules')) {
      let ok: unknown;
      try {
        ok = cel.evaluate(str(at(r, 'rule'), 'rule'), { self: v });
      } catch {
        // A rule that cannot evaluate (wrong types) is the OpenAPI part's to report.
        ok = true;
      }
      if (ok !== true) out.push(`${path}: ${str(at(r, 'message'), 'message')}`);
    }
    if (Array.isArray(v)) {
      if (s['x-kubernetes-list-type'] === 'set' && new Set(v.map((x) => JSON.stringify(x))).size !== v.length)
        out.push(`${path}: duplicate in a set`);
      if (s.items !== undefined) v.forEach((x, i) => walk(rec(s.items, 'items'), x, `${path}[${i}]`));
      return;
    }
    if (typeof v === 'object') {
      const props = rec(s.properties ?? {}, 'properties');
      for (const [k, x] of Object.entries(v as Record<string, unknown>))
        if (props[k] !== undefined) walk(rec(props[k], k), x, `${path}.${k}`);
    }
  };
  walk(schema, obj, '');
  return out;
}

const cnp = (spec: Record<string, unknown>): Record<string, unknown> => ({
  apiVersion: 'policy.networking.k8s.io/v1alpha2',
  kind: 'ClusterNetworkPolicy',
  metadata: { name: 'p' },
  spec: { tier: 'Admin', priority: 1, subject: { namespaces: {} }, ...spec },
});
const deny = (to: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> =>
  cnp({ egress: [{ action: 'Deny', to, ...extra }] });
const tcp = (destinationPort: unknown): unknown => ({ tcp: { destinationPort } });

/** [what, object, valid for both]. */
const CASES: [string, Record<string, unknown>, boolean][] = [
  ['a minimal policy', cnp({}), true],
  [
    'every field',
    cnp({
      tier: 'Baseline',
      priority: 1000,
      subject: {
        pods: {
          namespaceSelector: { matchLabels: { a: 'b' } },
          podSelector: { matchExpressions: [{ key: 'x', operator: 'Exists' }] },
        },
      },
      ingress: [
        {
          name: 'i',
          action: 'Pass',
          from: [{ namespaces: {} }, { pods: { podSelector: {} } }],
          protocols: [{ destinationNamedPort: 'http' }],
        },
      ],
      egress: [
        {
          action: 'Accept',
          to: [{ networks: ['10.0.0.0/8', 'fd00::/8'] }, { nodes: {} }, { domainNames: ['*.example.com', 'kubernetes.io.'] }],
          protocols: [
            tcp({ number: 443 }),
            { udp: { destinationPort: { range: { start: 1, end: 65535 } } } },
            { sctp: { destinationPort: { number: 9 } } },
          ],
        },
      ],
    }),
    true,
  ],
  ['tier missing', cnp({ tier: undefined }), false],
  ['tier not in the enum', cnp({ tier: 'Developer' }), false],
  ['priority above 1000', cnp({ priority: 1001 }), false],
  ['priority below 0', cnp({ priority: -1 }), false],
  ['subject empty', cnp({ subject: {} }), false],
  ['subject with both fields', cnp({ subject: { namespaces: {}, pods: { podSelector: {} } } }), false],
  ['pods without podSelector', cnp({ subject: { pods: { namespaceSelector: {} } } }), false],
  [
    '26 ingress rules',
    cnp({ ingress: Array.from({ length: 26 }, () => ({ action: 'Deny', from: [{ namespaces: {} }] })) }),
    false,
  ],
  ['25 egress rules', cnp({ egress: Array.from({ length: 25 }, () => ({ action: 'Deny', to: [{ namespaces: {} }] })) }), true],
  [
    'a rule name of 101 characters',
    cnp({ ingress: [{ name: 'n'.repeat(101), action: 'Deny', from: [{ namespaces: {} }] }] }),
    false,
  ],
  [
    'a rule name of 100 characters',
    cnp({ ingress: [{ name: 'n'.repeat(100), action: 'Deny', from: [{ namespaces: {} }] }] }),
    true,
  ],
  ['action Allow (v1alpha1 spelling)', cnp({ ingress: [{ action: 'Allow', from: [{ namespaces: {} }] }] }), false],
  ['from missing', cnp({ ingress: [{ action: 'Deny' }] }), false],
  ['to empty', deny([]), false],
  ['26 peers', deny(Array.from({ length: 26 }, () => ({ namespaces: {} }))), false],
  ['an empty peer', deny([{}]), false],
  ['a peer with two fields', deny([{ namespaces: {}, nodes: {} }]), false],
  ['networks empty', deny([{ networks: [] }]), false],
  ['a bare address in networks', deny([{ networks: ['10.0.0.1'] }]), false],
  ['a host address with a prefix (isCIDR accepts it)', deny([{ networks: ['10.0.0.1/8'] }]), true],
  ['an IPv4 prefix too long', deny([{ networks: ['10.0.0.0/33'] }]), false],
  ['a repeated network', deny([{ networks: ['10.0.0.0/8', '10.0.0.0/8'] }]), false],
  ['26 networks', deny([{ networks: Array.from({ length: 26 }, (_, i) => `10.${i}.0.0/16`) }]), false],
  [
    'a domain name with a wildcard inside',
    cnp({ egress: [{ action: 'Accept', to: [{ domainNames: ['a.*.example.com'] }] }] }),
    false,
  ],
  ['a single-label domain name', cnp({ egress: [{ action: 'Accept', to: [{ domainNames: ['localhost'] }] }] }), false],
  ['a repeated domain name', cnp({ egress: [{ action: 'Accept', to: [{ domainNames: ['a.io', 'a.io'] }] }] }), false],
  ['protocols empty', deny([{ namespaces: {} }], { protocols: [] }), false],
  ['tcp without destinationPort', deny([{ namespaces: {} }], { protocols: [{ tcp: {} }] }), false],
  [
    'a protocol with two fields',
    deny([{ namespaces: {} }], {
      protocols: [{ tcp: { destinationPort: { number: 1 } }, udp: { destinationPort: { number: 1 } } }],
    }),
    false,
  ],
  ['port 0', deny([{ namespaces: {} }], { protocols: [tcp({ number: 0 })] }), false],
  ['port 65536', deny([{ namespaces: {} }], { protocols: [tcp({ number: 65536 })] }), false],
  ['number and range', deny([{ namespaces: {} }], { protocols: [tcp({ number: 1, range: { start: 1, end: 2 } })] }), false],
  ['a range start = end', deny([{ namespaces: {} }], { protocols: [tcp({ range: { start: 5, end: 5 } })] }), false],
  ['a range start > end', deny([{ namespaces: {} }], { protocols: [tcp({ range: { start: 6, end: 5 } })] }), false],
  ['a range without start', deny([{ namespaces: {} }], { protocols: [tcp({ range: { end: 5 } })] }), false],
  ['a named port to pods', deny([{ pods: { podSelector: {} } }], { protocols: [{ destinationNamedPort: 'http' }] }), true],
  [
    'a named port to networks (CEL)',
    deny([{ pods: { podSelector: {} } }, { networks: ['10.0.0.0/8'] }], { protocols: [{ destinationNamedPort: 'http' }] }),
    false,
  ],
  [
    'a named port to nodes (CEL)',
    deny([{ nodes: {} }], { protocols: [tcp({ number: 1 }), { destinationNamedPort: 'http' }] }),
    false,
  ],
  [
    'a named port to domainNames (CEL)',
    cnp({ egress: [{ action: 'Accept', to: [{ domainNames: ['a.io'] }], protocols: [{ destinationNamedPort: 'http' }] }] }),
    false,
  ],
  ['a selector requirement without operator', cnp({ subject: { namespaces: { matchExpressions: [{ key: 'a' }] } } }), false],
];

/**
 * Where they differ on purpose: the normalizer also checks what the CRD's
 * schema cannot (selector semantics, as for every label selector the API
 * server validates in built-in kinds; domainNames outside Accept rules, which
 * the API documents as unsupported).
 */
const NORMALIZER_ONLY: [string, Record<string, unknown>][] = [
  ['domainNames in a Deny rule', deny([{ domainNames: ['example.com'] }])],
  ['an unknown selector operator', cnp({ subject: { namespaces: { matchExpressions: [{ key: 'a', operator: 'Is' }] } } })],
  ['In without values', cnp({ subject: { namespaces: { matchExpressions: [{ key: 'a', operator: 'In' }] } } })],
  ['an invalid label key', cnp({ subject: { namespaces: { matchLabels: { 'a b': 'c' } } } })],
];

test('the kustomization renders exactly the CRD, a valid, structural CustomResourceDefinition', async (t) => {
  const objs = render(t);
  if (objs === undefined) return;
  assert.deepEqual(
    objs.map((o) => `${String(o.kind)}/${String(rec(o.metadata, 'm').name)}`),
    ['CustomResourceDefinition/clusternetworkpolicies.policy.networking.k8s.io'],
  );
  const crd = objs[0]!;
  const { CustomResourceDefinition } = await import('kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition');
  new CustomResourceDefinition(crd as never).validate();
  assert.equal(at(crd, 'spec.scope'), 'Cluster');
  assert.deepEqual(at(crd, 'spec.names.shortNames'), ['cnp']);
  assert.match(str(rec(rec(crd.metadata, 'm').annotations, 'a')['api-approved.kubernetes.io'], 'approval'), /^https:\/\//);
  const v = rec(arr(at(crd, 'spec.versions'), 'versions')[0], 'v1alpha2');
  assert.deepEqual([v.name, v.served, v.storage, v.subresources], ['v1alpha2', true, true, { status: {} }]);
  assert.deepEqual(
    arr(v.additionalPrinterColumns, 'columns').map((c) => `${String(at(c, 'name'))} ${String(at(c, 'jsonPath'))}`),
    ['Tier .spec.tier', 'Priority .spec.priority', 'Age .metadata.creationTimestamp'],
  );
  assert.deepEqual(structuralProblems(schemaOf(crd), 'openAPIV3Schema', []), []);
});

test('the CRD validation and the normalizer agree on valid and invalid objects', (t) => {
  const objs = render(t);
  if (objs === undefined) return;
  const schema = schemaOf(objs[0]!);
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  const validate = ajv.compile(schema);
  const problems = (o: unknown): string[] => crdProblems(schema, validate, () => validate.errors, o);
  for (const [what, obj, valid] of CASES) {
    const crd = problems(obj);
    const r = normalizeClusterNetworkPolicy(obj);
    const model = r.errors.map(formatValidationError);
    assert.equal(crd.length === 0, valid, `${what}: CRD says ${JSON.stringify(crd)}`);
    // The CEL-only cases are caught by CEL, not by chance.
    if (what.includes('(CEL)') || what.startsWith('a range start'))
      assert.ok(
        crd.some((p) => !p.startsWith('openapi:')),
        `${what}: ${JSON.stringify(crd)}`,
      );
    assert.equal(model.length === 0, valid, `${what}: normalizer says ${JSON.stringify(model)}`);
  }
  for (const [what, obj] of NORMALIZER_ONLY) {
    assert.deepEqual(problems(obj), [], `${what}: the CRD accepts it`);
    assert.ok(normalizeClusterNetworkPolicy(obj).errors.length > 0, `${what}: the normalizer reports it`);
  }
});
