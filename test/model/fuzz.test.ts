// Property tests: normalization never throws on any input, and its output keeps
// the fail-closed invariants the compiler relies on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseManifestText } from '../../src/model/load.ts';
import type { LoadError } from '../../src/model/load.ts';
import { buildState, normalizeNamespace, normalizeNode, normalizePod, normalizePolicy } from '../../src/model/normalize.ts';
import type { NetworkPolicy } from '../../src/model/types.ts';

// Leaves that are sometimes valid and often subtly wrong.
const leaf = fc.oneof(
  fc.constantFrom('TCP', 'UDP', 80, 8080, 'http', 'app', 'web', 'In', 'Exists', '10.0.0.0/8', 'fd00::/8', '10.1.0.0/16'),
  fc.constantFrom(
    'TCP',
    'UDP',
    'SCTP',
    'ICMP',
    'Ingress',
    'Egress',
    'In',
    'NotIn',
    'Exists',
    'DoesNotExist',
    'Bogus',
    'http',
    '80',
    '',
    'app',
    'a/b',
    '__proto__',
    'constructor',
  ),
  fc.constantFrom(
    '10.0.0.0/8',
    '10.1.0.0/16',
    '10.0.0.1',
    'fd00::/8',
    'fd00:1::/32',
    '0.0.0.0/0',
    '::/0',
    '300.0.0.0/8',
    '10.0.0.0/33',
  ),
  fc.integer({ min: -2, max: 70000 }),
  fc.constantFrom(0, 1, 80, 443, 65535, 65536, 1.5, Number.NaN, null, true, false),
  fc.string({ maxLength: 6 }),
);
const shaped = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, leaf, tie('selector'), tie('list'), tie('peer'), tie('port'), tie('rule')),
  list: fc.array(tie('value'), { maxLength: 3 }),
  selector: fc.record(
    {
      matchLabels: fc.oneof(fc.dictionary(fc.constantFrom('app', 'a/b', 'Bad Key', '__proto__'), leaf, { maxKeys: 2 }), leaf),
      matchExpressions: fc.oneof(
        fc.array(
          fc.record(
            { key: leaf, operator: leaf, values: fc.oneof(fc.array(leaf, { maxLength: 2 }), leaf) },
            { requiredKeys: [] },
          ),
          { maxLength: 2 },
        ),
        leaf,
      ),
    },
    { requiredKeys: [] },
  ),
  peer: fc.record(
    {
      podSelector: tie('selector'),
      namespaceSelector: tie('selector'),
      ipBlock: fc.oneof(
        fc.record({ cidr: leaf, except: fc.oneof(fc.array(leaf, { maxLength: 3 }), leaf) }, { requiredKeys: [] }),
        leaf,
      ),
    },
    { requiredKeys: [] },
  ),
  port: fc.record({ protocol: leaf, port: leaf, endPort: leaf }, { requiredKeys: [] }),
  rule: fc.record(
    {
      from: fc.oneof(fc.array(tie('peer'), { maxLength: 3 }), leaf),
      _from: fc.array(tie('peer'), { maxLength: 2 }),
      to: fc.oneof(fc.array(tie('peer'), { maxLength: 3 }), leaf),
      ports: fc.oneof(fc.array(tie('port'), { maxLength: 3 }), leaf),
    },
    { requiredKeys: [] },
  ),
}));
const policyLike = fc.record(
  {
    apiVersion: fc.constantFrom('networking.k8s.io/v1', 'networking.k8s.io/v1', 'v1', undefined),
    kind: fc.constantFrom('NetworkPolicy', 'NetworkPolicy', 'Pod', undefined),
    metadata: fc.oneof(
      { arbitrary: fc.record({ name: fc.constantFrom('web', 'db'), namespace: fc.constantFrom('shop', undefined) }), weight: 8 },
      {
        arbitrary: fc.record(
          {
            name: fc.oneof(fc.constantFrom('web', 'Web_1', ''), leaf),
            namespace: fc.oneof(fc.constantFrom('shop', undefined), leaf),
          },
          { requiredKeys: [] },
        ),
        weight: 1,
      },
      { arbitrary: leaf, weight: 1 },
    ),
    spec: fc.oneof(
      fc.record(
        {
          podSelector: fc.oneof(shaped.selector, leaf),
          policyTypes: fc.oneof(fc.array(fc.constantFrom('Ingress', 'Egress', 'ingress', 'X'), { maxLength: 3 }), leaf),
          ingress: fc.oneof(
            {
              arbitrary: fc.array(fc.oneof({ arbitrary: shaped.rule, weight: 5 }, { arbitrary: leaf, weight: 1 }), {
                maxLength: 3,
              }),
              weight: 5,
            },
            { arbitrary: leaf, weight: 1 },
          ),
          egress: fc.oneof(
            {
              arbitrary: fc.array(fc.oneof({ arbitrary: shaped.rule, weight: 5 }, { arbitrary: leaf, weight: 1 }), {
                maxLength: 3,
              }),
              weight: 5,
            },
            { arbitrary: leaf, weight: 1 },
          ),
        },
        { requiredKeys: [] },
      ),
      leaf,
    ),
  },
  { requiredKeys: ['metadata', 'spec'] },
);
// Policies that the API server accepts: they must normalize without errors.
const validSelector = fc.record(
  {
    matchLabels: fc.dictionary(fc.constantFrom('app', 'tier', 'example.com/team'), fc.constantFrom('web', 'db', ''), {
      maxKeys: 2,
    }),
    matchExpressions: fc.array(
      fc.oneof(
        fc.record({
          key: fc.constantFrom('app', 'env'),
          operator: fc.constantFrom('In', 'NotIn'),
          values: fc.array(fc.constantFrom('a', 'b'), { minLength: 1, maxLength: 2 }),
        }),
        fc.record({ key: fc.constantFrom('app', 'env'), operator: fc.constantFrom('Exists', 'DoesNotExist') }),
      ),
      { maxLength: 2 },
    ),
  },
  { requiredKeys: [] },
);
const validPort = fc.oneof(
  fc.record(
    {
      protocol: fc.constantFrom('TCP', 'UDP', 'SCTP'),
      port: fc.oneof(fc.integer({ min: 1, max: 65535 }), fc.constantFrom('http', 'dns-tcp', 'a1')),
    },
    { requiredKeys: [] },
  ),
  fc
    .tuple(fc.integer({ min: 1, max: 65535 }), fc.integer({ min: 0, max: 70000 }))
    .map(([a, d]) => ({ port: a, endPort: Math.min(65535, a + d) })),
);
const validPeer = fc.oneof(
  fc
    .record({ podSelector: validSelector, namespaceSelector: validSelector }, { requiredKeys: [] })
    .filter((p) => Object.keys(p).length > 0),
  fc.record({
    ipBlock: fc.constantFrom(
      { cidr: '10.0.0.0/8', except: ['10.1.0.0/16', '10.2.3.0/24'] },
      { cidr: '::/0', except: ['fd00::/8'] },
      { cidr: '192.168.1.7/24' },
    ),
  }),
);
const validRule = fc.record(
  { peers: fc.array(validPeer, { maxLength: 3 }), ports: fc.array(validPort, { maxLength: 3 }) },
  { requiredKeys: [] },
);
const validPolicy = fc
  .record({
    podSelector: validSelector,
    policyTypes: fc.constantFrom(undefined, [], ['Ingress'], ['Egress'], ['Ingress', 'Egress'], ['Egress', 'Ingress']),
    ingress: fc.option(fc.array(validRule, { maxLength: 3 }), { nil: undefined }),
    egress: fc.option(fc.array(validRule, { maxLength: 3 }), { nil: undefined }),
    fromSpelling: fc.constantFrom('from', '_from'),
  })
  .map(({ fromSpelling, ingress, egress, ...spec }) => ({
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: 'web', namespace: 'shop' },
    spec: {
      ...spec,
      ingress: ingress?.map(({ peers, ports }) => ({ [fromSpelling]: peers, ports })),
      egress: egress?.map(({ peers, ports }) => ({ to: peers, ports })),
    },
  }));

const anyInput = fc.oneof(
  { arbitrary: validPolicy, weight: 2 },
  { arbitrary: policyLike, weight: 6 },
  { arbitrary: fc.jsonValue(), weight: 1 },
  { arbitrary: fc.anything(), weight: 1 },
);

function reverseKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(reverseKeys);
  if (typeof v === 'object' && v !== null)
    return Object.fromEntries(
      Object.entries(v)
        .reverse()
        .map(([k, x]) => [k, reverseKeys(x)]),
    );
  return v;
}

function checkInvariants(p: NetworkPolicy): void {
  for (const dir of ['ingress', 'egress'] as const) {
    if (!p.types[dir]) assert.deepEqual(p[dir], [], `${dir} rules without isolation`);
    for (const r of p[dir]) {
      if (r.invalid) {
        assert.ok(p.errors.length > 0, 'invalid rule without an error');
        assert.deepEqual([r.peers, r.ports], [[], []], 'invalid rule must match nothing');
      } else {
        assert.ok(r.peers === undefined || r.peers.length > 0, 'valid rule peers: undefined or non-empty');
        assert.ok(r.ports === undefined || r.ports.length > 0, 'valid rule ports: undefined or non-empty');
        for (const port of r.ports ?? []) {
          if (port.endPort !== undefined)
            assert.ok(typeof port.port === 'number' && port.endPort >= port.port && port.endPort <= 65535);
        }
      }
    }
  }
}

test('normalizePolicy never throws and keeps the fail-closed invariants', () => {
  fc.assert(
    fc.property(anyInput, (obj) => {
      const r = normalizePolicy(obj);
      if (!r.ok) {
        assert.ok(r.errors.length > 0, 'ok:false without an error');
        return;
      }
      assert.equal(r.value.errors, r.errors);
      checkInvariants(r.value);
      // Deterministic: the same input gives the same output.
      assert.deepEqual(normalizePolicy(obj), r);
    }),
    { numRuns: 3000 },
  );
});

test('policies the API server accepts normalize without errors', () => {
  fc.assert(
    fc.property(validPolicy, (obj) => {
      const r = normalizePolicy(obj);
      assert.ok(r.ok);
      assert.deepEqual(r.errors, []);
      checkInvariants(r.value);
      for (const rule of [...r.value.ingress, ...r.value.egress]) assert.equal(rule.invalid, false);
      // Key order never matters.
      assert.deepEqual(normalizePolicy(reverseKeys(obj)), r);
    }),
    { numRuns: 1000 },
  );
});

test('the other normalizers and buildState never throw', () => {
  fc.assert(
    fc.property(fc.array(anyInput, { maxLength: 4 }), (objs) => {
      for (const o of objs) {
        normalizePod(o);
        normalizeNode(o);
        normalizeNamespace(o);
      }
      const withKinds = objs.map((o, i) =>
        typeof o === 'object' && o !== null && !Array.isArray(o)
          ? {
              ...o,
              apiVersion: i % 2 === 0 ? 'v1' : 'networking.k8s.io/v1',
              kind: ['Pod', 'NetworkPolicy', 'Node', 'Namespace', 'List'][i % 5],
            }
          : o,
      );
      const { state } = buildState(withKinds);
      for (const p of state.policies) checkInvariants(p);
    }),
    { numRuns: 1000 },
  );
});

test('manifest text parsing never throws', () => {
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string(),
        fc.jsonValue().map((v) => JSON.stringify(v)),
        fc
          .array(
            fc.constantFrom(
              '---\n',
              'a: 1\n',
              '- x\n',
              '  b: [\n',
              'kind: List\n',
              'items: 3\n',
              'apiVersion: v1\n',
              '{',
              '}',
              '&a x\n',
              '*a\n',
            ),
          )
          .map((a) => a.join('')),
      ),
      (text) => {
        const objects: unknown[] = [];
        const errors: LoadError[] = [];
        parseManifestText(text, 'fuzz.yaml', objects, errors);
        for (const e of errors) assert.equal(typeof e.message, 'string');
      },
    ),
    { numRuns: 1000 },
  );
});
