// Every CustomResourceDefinition and ValidatingAdmissionPolicy (with its
// binding) that the repository ships under daemonset/ passes the API server's
// own checks at create time (test/support/crd-validation.ts: structural
// schema, the OpenAPI subset, defaults; test/support/admission-policy-
// validation.ts). The scan is generic: any YAML file anywhere under daemonset/
// is read, so a new optional kustomization is covered without a list here.
// The checkers' self-tests show them refusing what a real API server refuses,
// with its field paths and texts.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
import { validateAdmissionPolicy, validateAdmissionPolicyBinding } from '../support/admission-policy-validation.ts';
import { validateCustomResourceDefinition } from '../support/crd-validation.ts';
import { errorText, invalidStatus } from '../support/field-error.ts';
import { DAEMONSET_DIR, ROOT, isRecord, parseYamlStream, readText } from './support.ts';

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? yamlFiles(join(dir, e.name)) : /\.ya?ml$/.test(e.name) ? [join(dir, e.name)] : []))
    .sort();
}

interface Shipped {
  readonly where: string;
  readonly obj: Record<string, unknown>;
}

const shipped: Shipped[] = yamlFiles(DAEMONSET_DIR).flatMap((file) =>
  parseYamlStream(readText(file), file).flatMap((doc, i) =>
    isRecord(doc) ? [{ where: `${relative(ROOT, file)}#${i}`, obj: doc }] : [],
  ),
);
const ofKind = (kind: string): Shipped[] => shipped.filter((s) => s.obj.kind === kind);
const nameOf = (o: Record<string, unknown>): string => String(isRecord(o.metadata) ? o.metadata.name : '');

describe('what daemonset/ ships passes the API server', () => {
  test('the scan finds the CRDs and the admission policy known today', () => {
    const crds = ofKind('CustomResourceDefinition').map((s) => nameOf(s.obj));
    for (const n of [
      'nodepolicystatuses.nft-netpol.io',
      'workspaces.tenant.kubesphere.io',
      'namespacenetworkpolicies.network.kubesphere.io',
    ])
      assert.ok(crds.includes(n), `${n} not found under daemonset/ (found: ${crds.join(', ')})`);
    assert.ok(ofKind('ValidatingAdmissionPolicy').length >= 1);
    assert.ok(ofKind('ValidatingAdmissionPolicyBinding').length >= 1);
  });

  for (const { where, obj } of ofKind('CustomResourceDefinition'))
    test(`CRD ${nameOf(obj)} (${where}) is structural and valid`, () => {
      assert.equal(obj.apiVersion, 'apiextensions.k8s.io/v1', `${where}: only apiextensions.k8s.io/v1 is served`);
      assert.deepEqual(validateCustomResourceDefinition(obj).map(errorText), []);
    });

  for (const { where, obj } of ofKind('ValidatingAdmissionPolicy'))
    test(`ValidatingAdmissionPolicy ${nameOf(obj)} (${where}) is valid`, () => {
      assert.equal(obj.apiVersion, 'admissionregistration.k8s.io/v1');
      assert.deepEqual(validateAdmissionPolicy(obj).map(errorText), []);
    });

  for (const { where, obj } of ofKind('ValidatingAdmissionPolicyBinding'))
    test(`ValidatingAdmissionPolicyBinding ${nameOf(obj)} (${where}) is valid and names a shipped policy`, () => {
      assert.equal(obj.apiVersion, 'admissionregistration.k8s.io/v1');
      assert.deepEqual(validateAdmissionPolicyBinding(obj).map(errorText), []);
      const policy = isRecord(obj.spec) ? obj.spec.policyName : undefined;
      assert.ok(
        ofKind('ValidatingAdmissionPolicy').some((p) => nameOf(p.obj) === policy),
        `no policy ${String(policy)}`,
      );
    });
});

// ---- self-tests: the checker refuses what the API server refuses

function crdWith(schema: Record<string, unknown>, more: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'widgets.example.com' },
    spec: {
      group: 'example.com',
      scope: 'Namespaced',
      names: { kind: 'Widget', listKind: 'WidgetList', plural: 'widgets', singular: 'widget' },
      versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: schema }, ...more }],
    },
  };
}

const root = (spec: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  type: 'object',
  properties: { apiVersion: { type: 'string' }, kind: { type: 'string' }, metadata: { type: 'object' }, spec, ...extra },
});
const errors = (crd: unknown): string[] => validateCustomResourceDefinition(crd).map(errorText);
const P = 'spec.validation.openAPIV3Schema';

describe('the CRD checker refuses what the API server refuses', () => {
  test('a structural schema with every feature the repository uses is accepted', () => {
    const ok = crdWith(
      root(
        {
          type: 'object',
          properties: {
            port: { 'x-kubernetes-int-or-string': true, anyOf: [{ type: 'integer' }, { type: 'string' }], minimum: 1 },
            any: { 'x-kubernetes-int-or-string': true },
            free: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
            labels: { type: 'object', additionalProperties: { type: 'string' } },
            mode: { type: 'string', enum: ['a', 'b'], default: 'a' },
            peers: {
              type: 'array',
              items: {
                type: 'object',
                properties: { a: { type: 'string' }, b: { type: 'string' } },
                oneOf: [{ required: ['a'] }, { required: ['b'] }],
                'x-kubernetes-validations': [{ rule: 'has(self.a) || has(self.b)', message: 'a or b' }],
              },
            },
          },
        },
        { status: { type: 'object' } },
      ),
      { subresources: { status: {} } },
    );
    assert.deepEqual(errors(ok), []);
  });

  test('type, bounds and pattern inside anyOf (the NamespaceNetworkPolicy port before the fix)', () => {
    const port = {
      'x-kubernetes-int-or-string': true,
      anyOf: [
        { type: 'integer', minimum: 1, maximum: 65535 },
        { type: 'string', pattern: '^[a-z]+$' },
      ],
    };
    const crd = crdWith(root({ type: 'object', properties: { port } }));
    assert.deepEqual(errors(crd), [
      `${P}.properties[spec].properties[port].anyOf[0].type: Forbidden: must be empty to be structural`,
      `${P}.properties[spec].properties[port].anyOf[1].type: Forbidden: must be empty to be structural`,
    ]);
    // Two versions with different schemas: reported per version.
    const two = crdWith(root({ type: 'object', properties: { port } }));
    const spec = two.spec as { versions: Record<string, unknown>[] };
    spec.versions.push({ name: 'v2', served: true, storage: false, schema: { openAPIV3Schema: root({ type: 'object' }) } });
    assert.match(
      errors(two).join('\n'),
      /^spec\.versions\[0\]\.schema\.openAPIV3Schema\.properties\[spec\]\.properties\[port\]\.anyOf\[0\]\.type: Forbidden/,
    );
  });

  test('a field without a type, description or nullable under a junctor, a field a junctor names that does not exist', () => {
    assert.deepEqual(errors(crdWith(root({ type: 'object', properties: { x: {} } }))), [
      `${P}.properties[spec].properties[x].type: Required value: must not be empty for specified object fields`,
    ]);
    assert.deepEqual(errors(crdWith(root({ type: 'array' }))), [
      `${P}.properties[spec].items: Required value: must be specified`,
    ]);
    assert.deepEqual(errors(crdWith(root({ type: 'object', allOf: [{ description: 'd', nullable: true }] }))), [
      `${P}.properties[spec].allOf[0].description: Forbidden: must be empty to be structural`,
      `${P}.properties[spec].allOf[0].nullable: Forbidden: must be false to be structural`,
    ]);
    assert.deepEqual(errors(crdWith({ ...root({ type: 'object' }), anyOf: [{ properties: { nope: { minimum: 1 } } }] })), [
      `${P}.properties[nope]: Required value: because it is defined in ${P}.anyOf[0].properties[nope]`,
    ]);
  });

  test('metadata beyond name/generateName, additionalProperties at the root and beside properties', () => {
    const meta = crdWith({
      type: 'object',
      properties: { metadata: { type: 'object', properties: { labels: { type: 'object' } } } },
    });
    assert.deepEqual(errors(meta), [
      `${P}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified`,
    ]);
    const nameOnly = crdWith({
      type: 'object',
      properties: { metadata: { type: 'object', properties: { name: { type: 'string', maxLength: 20 } } } },
    });
    assert.deepEqual(errors(nameOnly), []);
    assert.deepEqual(errors(crdWith({ type: 'object', additionalProperties: { type: 'string' } })), [
      `${P}.additionalProperties: Forbidden: must not be used at the root`,
    ]);
    const both = crdWith(root({ type: 'object', properties: { a: { type: 'string' } }, additionalProperties: false }));
    assert.deepEqual(errors(both), [
      `${P}.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive`,
    ]);
  });

  test('defaults must be valid, pruned, and not in metadata', () => {
    const bad = crdWith(
      root({
        type: 'object',
        properties: {
          mode: { type: 'string', enum: ['a', 'b'], default: 'c' },
          n: { type: 'integer', minimum: 1, default: 0 },
          o: { type: 'object', properties: { k: { type: 'string' } }, default: { k: 'v', extra: 1 } },
        },
      }),
    );
    const text = errors(bad).join('\n');
    assert.match(text, /properties\[mode\]\.default: Invalid value: "c": .*should be one of \["a","b"\]/);
    assert.match(text, /properties\[n\]\.default: Invalid value: 0: .*greater than or equal to 1/);
    assert.match(text, /properties\[o\]\.default: Invalid value: \{"k":"v","extra":1\}: must not have unknown fields/);
    const inMeta = crdWith({ type: 'object', properties: { metadata: { type: 'object', default: {} } } });
    assert.deepEqual(errors(inMeta), [`${P}.properties[metadata].default: Forbidden: must not be set in top-level metadata`]);
  });

  test('a bad CEL rule, names and versions', () => {
    const cel = crdWith(root({ type: 'object', 'x-kubernetes-validations': [{ rule: 'self.a >' }] }));
    assert.match(
      errors(cel).join('\n'),
      /properties\[spec\]\.x-kubernetes-validations\[0\]\.rule: Invalid value: .*compilation failed/,
    );
    const misnamed = { ...crdWith(root({ type: 'object' })), metadata: { name: 'gadgets.example.com' } };
    assert.deepEqual(errors(misnamed), [
      'metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group',
    ]);
  });

  test('a CEL rule under lists without maxItems is over the cost budget (the endPort rule before maxItems)', () => {
    // The checker's estimate is a lower bound of the API server's: what it refuses, the API server refuses.
    const rule = '!has(self.endPort) || (has(self.port) && type(self.port) == int && self.endPort >= self.port)';
    const spec = (maxItems: Record<string, number>): Record<string, unknown> => ({
      type: 'object',
      properties: {
        rules: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              ports: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: { port: { 'x-kubernetes-int-or-string': true }, endPort: { type: 'integer' } },
                  'x-kubernetes-validations': [{ rule, message: 'endPort >= port' }],
                },
                ...maxItems,
              },
            },
          },
          ...maxItems,
        },
      },
    });
    assert.deepEqual(errors(crdWith(root(spec({})))), [
      `${P}.properties[spec].properties[rules].items.properties[ports].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of 1.048576x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)`,
    ]);
    assert.deepEqual(errors(crdWith(root(spec({ maxItems: 256 })))), []);
  });

  test('the 422 Status names the object and each field', () => {
    const s = invalidStatus('apiextensions.k8s.io', 'CustomResourceDefinition', 'widgets.example.com', [
      ...validateCustomResourceDefinition(crdWith(root({ type: 'object', properties: { x: {} } }))),
    ]);
    assert.equal(s.code, 422);
    assert.equal(s.reason, 'Invalid');
    assert.equal(
      s.message,
      `CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid: ${P}.properties[spec].properties[x].type: Required value: must not be empty for specified object fields`,
    );
  });
});

describe('the admission policy checker refuses what the API server refuses', () => {
  const policy = (spec: Record<string, unknown>): Record<string, unknown> => ({
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: 'p' },
    spec,
  });
  const rules = [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }];

  test('no validations, a bad reason, a message with a line break, an unknown operation, a bad expression', () => {
    const text = (o: unknown): string => validateAdmissionPolicy(o).map(errorText).join('\n');
    assert.match(
      text(policy({ matchConstraints: { resourceRules: rules } })),
      /spec\.validations: Required value: validations or auditAnnotations/,
    );
    const bad = policy({
      failurePolicy: 'Sometimes',
      matchConstraints: { resourceRules: [{ ...rules[0], operations: ['PATCH'] }] },
      matchConditions: [
        { name: 'a', expression: 'true' },
        { name: 'a', expression: 'true' },
      ],
      validations: [{ expression: 'request.name ==', message: 'two\nlines', reason: 'NotAllowed' }],
    });
    const t = text(bad);
    assert.match(t, /spec\.failurePolicy: Unsupported value: "Sometimes"/);
    assert.match(t, /spec\.matchConstraints\.resourceRules\[0\]\.operations\[0\]: Unsupported value: "PATCH"/);
    assert.match(t, /spec\.matchConditions\[1\]\.name: Duplicate value: "a"/);
    assert.match(t, /spec\.validations\[0\]\.expression: Invalid value: .*compilation failed/);
    assert.match(t, /spec\.validations\[0\]\.message: Invalid value: .*message must not contain line breaks/);
    assert.match(t, /spec\.validations\[0\]\.reason: Unsupported value: "NotAllowed"/);
  });

  test('a binding with Deny and Warn, or no action', () => {
    const binding = (actions: unknown): unknown => ({
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: 'b' },
      spec: { policyName: 'p', validationActions: actions },
    });
    assert.match(
      validateAdmissionPolicyBinding(binding(['Deny', 'Warn']))
        .map(errorText)
        .join('\n'),
      /must not contain both Deny and Warn/,
    );
    assert.match(
      validateAdmissionPolicyBinding(binding([])).map(errorText).join('\n'),
      /spec\.validationActions: Required value: at least one validation action is required/,
    );
  });
});
