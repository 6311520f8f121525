// ClusterNetworkPolicy and the legacy AdminNetworkPolicy / BaselineAdminNetworkPolicy:
// the normalized form of valid objects, and for invalid ones the exact
// errors (paths and messages as the API server prints them) and how each
// fails closed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  buildState,
  normalizeAdminNetworkPolicy,
  normalizeBaselineAdminNetworkPolicy,
  normalizeClusterNetworkPolicy,
} from '../../src/model/normalize.ts';
import { EVERYTHING } from '../../src/model/selector.ts';
import { formatValidationError } from '../../src/model/types.ts';
import type { ClusterNetworkPolicy, ClusterPolicyRule } from '../../src/model/types.ts';

function cnp(spec: unknown, name = 'p'): Record<string, unknown> {
  return { apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy', metadata: { name }, spec };
}

/** A valid Admin spec with one rule of `dir` replaced/added by `rule`. */
function withRule(dir: 'ingress' | 'egress', rule: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return cnp({ tier: 'Admin', priority: 10, subject: { namespaces: {} }, [dir]: [rule], ...extra });
}

function norm(obj: unknown, f = normalizeClusterNetworkPolicy): ClusterNetworkPolicy {
  const r = f(obj);
  assert.ok(r.ok, `expected a policy, got ${JSON.stringify(r.errors)}`);
  return r.value;
}

function lines(p: ClusterNetworkPolicy): string[] {
  return p.errors.map(formatValidationError);
}

const sel = (labels: Record<string, string>) => ({ matchLabels: labels, matchExpressions: [] });

test('a valid ClusterNetworkPolicy normalizes to the model form', () => {
  const p = norm(
    cnp(
      {
        tier: 'Baseline',
        priority: 7,
        subject: { pods: { namespaceSelector: { matchLabels: { team: 'a' } }, podSelector: { matchLabels: { app: 'db' } } } },
        ingress: [
          {
            name: 'from-web',
            action: 'Accept',
            from: [{ namespaces: { matchLabels: { team: 'a' } } }, { pods: { podSelector: {} } }],
          },
        ],
        egress: [
          {
            action: 'Deny',
            to: [{ networks: ['10.1.2.3/8', '169.254.169.254/32'] }, { nodes: { matchLabels: { role: 'cp' } } }],
            protocols: [
              { tcp: { destinationPort: { number: 443 } } },
              { udp: { destinationPort: { range: { start: 1000, end: 2000 } } } },
              { sctp: { destinationPort: { number: 9 } } },
            ],
          },
          {
            action: 'Pass',
            to: [{ pods: { namespaceSelector: {}, podSelector: {} } }],
            protocols: [{ destinationNamedPort: 'http' }],
          },
          { action: 'Accept', to: [{ domainNames: ['*.example.com', 'kubernetes.io'] }] },
        ],
      },
      'db',
    ),
  );
  assert.deepEqual(p, {
    name: 'db',
    sourceKind: 'ClusterNetworkPolicy',
    tier: 'Baseline',
    priority: 7,
    subject: { namespaceSelector: sel({ team: 'a' }), podSelector: sel({ app: 'db' }) },
    ingress: [
      {
        name: 'from-web',
        action: 'Accept',
        peers: [
          { kind: 'pods', namespaceSelector: sel({ team: 'a' }), podSelector: EVERYTHING },
          { kind: 'pods', namespaceSelector: EVERYTHING, podSelector: sel({}) },
        ],
        protocols: undefined,
        invalid: false,
      },
    ],
    egress: [
      {
        name: '',
        action: 'Deny',
        peers: [
          { kind: 'networks', cidrs: ['10.0.0.0/8', '169.254.169.254/32'] },
          { kind: 'nodes', nodeSelector: sel({ role: 'cp' }) },
        ],
        protocols: [
          { kind: 'port', protocol: 'TCP', port: 443, endPort: undefined },
          { kind: 'port', protocol: 'UDP', port: 1000, endPort: 2000 },
          { kind: 'port', protocol: 'SCTP', port: 9, endPort: undefined },
        ],
        invalid: false,
      },
      {
        name: '',
        action: 'Pass',
        peers: [{ kind: 'pods', namespaceSelector: sel({}), podSelector: sel({}) }],
        protocols: [{ kind: 'named', name: 'http' }],
        invalid: false,
      },
      {
        name: '',
        action: 'Accept',
        peers: [{ kind: 'domainNames', names: ['*.example.com', 'kubernetes.io'] }],
        protocols: undefined,
        invalid: false,
      },
    ],
    errors: [],
  });
});

test('metadata uid/generation/resourceVersion are kept as the version', () => {
  const o = cnp({ tier: 'Admin', priority: 0, subject: { namespaces: {} } });
  o.metadata = { name: 'v', uid: 'u-1', generation: 3, resourceVersion: '42' };
  assert.deepEqual(norm(o).version, { uid: 'u-1', generation: 3, resourceVersion: '42' });
});

// [what, rule direction, rule, expected error lines] — each makes only that rule invalid.
const RULE_CASES: [string, 'ingress' | 'egress', unknown, string[]][] = [
  ['action missing', 'ingress', { from: [{ namespaces: {} }] }, ['p spec.ingress[0].action: Required value']],
  [
    'action not in the enum',
    'ingress',
    { action: 'Allow', from: [{ namespaces: {} }] },
    ['p spec.ingress[0].action: Unsupported value: "Allow": supported values: "Accept", "Deny", "Pass"'],
  ],
  [
    'rule name over 100 characters',
    'egress',
    { name: 'x'.repeat(101), action: 'Deny', to: [{ networks: ['10.0.0.0/8'] }] },
    ['p spec.egress[0].name: Too long: may not be more than 100 bytes'],
  ],
  ['from missing', 'ingress', { action: 'Deny' }, ['p spec.ingress[0].from: Required value']],
  [
    'from empty',
    'ingress',
    { action: 'Deny', from: [] },
    ['p spec.ingress[0].from: Invalid value: 0: spec.ingress[0].from in body should have at least 1 items'],
  ],
  [
    'to over 25 peers',
    'egress',
    { action: 'Deny', to: Array.from({ length: 26 }, () => ({ namespaces: {} })) },
    ['p spec.egress[0].to: Too many: 26: must have at most 25 items'],
  ],
  [
    'a peer with two fields',
    'egress',
    { action: 'Deny', to: [{ namespaces: {}, networks: ['10.0.0.0/8'] }] },
    ['p spec.egress[0].to[0]: Invalid value: 2: spec.egress[0].to[0] in body should have at most 1 properties'],
  ],
  [
    'an empty peer',
    'ingress',
    { action: 'Deny', from: [{}] },
    ['p spec.ingress[0].from[0]: Invalid value: 0: spec.ingress[0].from[0] in body should have at least 1 properties'],
  ],
  [
    'pods peer without podSelector',
    'ingress',
    { action: 'Accept', from: [{ pods: { namespaceSelector: {} } }] },
    ['p spec.ingress[0].from[0].pods.podSelector: Required value'],
  ],
  [
    'a selector operator that does not exist',
    'ingress',
    { action: 'Accept', from: [{ namespaces: { matchExpressions: [{ key: 'a', operator: 'Is' }] } }] },
    [
      'p spec.ingress[0].from[0].namespaces.matchExpressions[0].operator: "Is" is not a valid selector operator (In, NotIn, Exists, DoesNotExist)',
    ],
  ],
  [
    'In without values',
    'egress',
    { action: 'Deny', to: [{ nodes: { matchExpressions: [{ key: 'a', operator: 'In' }] } }] },
    ["p spec.egress[0].to[0].nodes.matchExpressions[0].values: must be specified when `operator` is 'In' or 'NotIn'"],
  ],
  [
    'a bad label value',
    'ingress',
    { action: 'Accept', from: [{ pods: { podSelector: { matchLabels: { app: 'a b' } } } }] },
    [
      "p spec.ingress[0].from[0].pods.podSelector.matchLabels: value \"a b\" of \"app\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', 'my_value' or '12345')",
    ],
  ],
  [
    'networks empty',
    'egress',
    { action: 'Deny', to: [{ networks: [] }] },
    ['p spec.egress[0].to[0].networks: Invalid value: 0: spec.egress[0].to[0].networks in body should have at least 1 items'],
  ],
  [
    'networks over 25',
    'egress',
    { action: 'Deny', to: [{ networks: Array.from({ length: 26 }, (_, i) => `10.0.${i}.0/24`) }] },
    ['p spec.egress[0].to[0].networks: Too many: 26: must have at most 25 items'],
  ],
  [
    'a network that is not a CIDR',
    'egress',
    { action: 'Deny', to: [{ networks: ['10.0.0.0/8', '10.0.0.1'] }] },
    ['p spec.egress[0].to[0].networks[1]: Invalid value: "string": Invalid CIDR format provided'],
  ],
  [
    'a repeated network (listType=set)',
    'egress',
    { action: 'Deny', to: [{ networks: ['10.0.0.0/8', '10.0.0.0/8'] }] },
    ['p spec.egress[0].to[0].networks[1]: Duplicate value: "10.0.0.0/8"'],
  ],
  [
    'a network longer than 43 characters',
    'egress',
    { action: 'Deny', to: [{ networks: ['0000:0000:0000:0000:0000:0000:0000:0000:0000/128'] }] },
    ['p spec.egress[0].to[0].networks[0]: Too long: may not be more than 43 bytes'],
  ],
  [
    'a domain name that does not match the pattern',
    'egress',
    { action: 'Accept', to: [{ domainNames: ['foo.*.example.com'] }] },
    [
      'p spec.egress[0].to[0].domainNames[0]: Invalid value: "foo.*.example.com": spec.egress[0].to[0].domainNames[0] in body should match \'^(\\*\\.)?([a-zA-z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?\\.)+[a-zA-z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?\\.?$\'',
    ],
  ],
  [
    'domainNames in a Deny rule (documented, not checked by the CRD)',
    'egress',
    { action: 'Deny', to: [{ domainNames: ['example.com'] }] },
    ['p spec.egress[0].to[0].domainNames: domainNames peers are only supported in Accept rules'],
  ],
  [
    'protocols empty',
    'ingress',
    { action: 'Deny', from: [{ namespaces: {} }], protocols: [] },
    ['p spec.ingress[0].protocols: Invalid value: 0: spec.ingress[0].protocols in body should have at least 1 items'],
  ],
  [
    'a protocol with two fields',
    'ingress',
    {
      action: 'Deny',
      from: [{ namespaces: {} }],
      protocols: [{ tcp: { destinationPort: { number: 1 } }, destinationNamedPort: 'x' }],
    },
    ['p spec.ingress[0].protocols[0]: Invalid value: 2: spec.ingress[0].protocols[0] in body should have at most 1 properties'],
  ],
  [
    'tcp without destinationPort',
    'ingress',
    { action: 'Deny', from: [{ namespaces: {} }], protocols: [{ tcp: {} }] },
    [
      'p spec.ingress[0].protocols[0].tcp: Invalid value: 0: spec.ingress[0].protocols[0].tcp in body should have at least 1 properties',
    ],
  ],
  [
    'a port out of range',
    'ingress',
    { action: 'Deny', from: [{ namespaces: {} }], protocols: [{ udp: { destinationPort: { number: 65536 } } }] },
    [
      'p spec.ingress[0].protocols[0].udp.destinationPort.number: Invalid value: 65536: spec.ingress[0].protocols[0].udp.destinationPort.number in body should be less than or equal to 65535',
    ],
  ],
  [
    'number and range together',
    'ingress',
    {
      action: 'Deny',
      from: [{ namespaces: {} }],
      protocols: [{ tcp: { destinationPort: { number: 80, range: { start: 1, end: 2 } } } }],
    },
    [
      'p spec.ingress[0].protocols[0].tcp.destinationPort: Invalid value: 2: spec.ingress[0].protocols[0].tcp.destinationPort in body should have at most 1 properties',
    ],
  ],
  [
    'a range with start = end',
    'egress',
    { action: 'Deny', to: [{ namespaces: {} }], protocols: [{ sctp: { destinationPort: { range: { start: 80, end: 80 } } } }] },
    ['p spec.egress[0].protocols[0].sctp.destinationPort.range: Invalid value: "object": Start port must be less than End port'],
  ],
  [
    'a range without end',
    'egress',
    { action: 'Deny', to: [{ namespaces: {} }], protocols: [{ tcp: { destinationPort: { range: { start: 80 } } } }] },
    ['p spec.egress[0].protocols[0].tcp.destinationPort.range.end: Required value'],
  ],
  [
    'a named port with a networks peer (CEL)',
    'egress',
    {
      action: 'Accept',
      to: [{ pods: { podSelector: {} } }, { networks: ['10.0.0.0/8'] }],
      protocols: [{ destinationNamedPort: 'http' }],
    },
    [
      'p spec.egress[0]: Invalid value: "object": networks/nodes/domainNames peer cannot be set with namedPorts since there are no namedPorts for networks/nodes/domainNames',
    ],
  ],
  [
    'a named port with a nodes peer (CEL)',
    'egress',
    { action: 'Deny', to: [{ nodes: {} }], protocols: [{ destinationNamedPort: 'http' }] },
    [
      'p spec.egress[0]: Invalid value: "object": networks/nodes/domainNames peer cannot be set with namedPorts since there are no namedPorts for networks/nodes/domainNames',
    ],
  ],
  ['a rule that is not an object', 'ingress', 'Deny', ['p spec.ingress[0]: must be an object, not "Deny"']],
];

for (const [what, dir, rule, want] of RULE_CASES) {
  test(`invalid rule: ${what}`, () => {
    const good = { action: 'Deny', [dir === 'ingress' ? 'from' : 'to']: [{ namespaces: {} }] };
    const p = norm(cnp({ tier: 'Admin', priority: 1, subject: { namespaces: {} }, [dir]: [good, rule] }));
    assert.deepEqual(
      lines(p),
      want.map((l) => l.replace(`spec.${dir}[0]`, `spec.${dir}[1]`).replaceAll(`spec.${dir}[0]`, `spec.${dir}[1]`)),
    );
    const rules = p[dir];
    assert.equal(rules.length, 2);
    assert.equal(rules[0]?.invalid, false, 'the other rule stays valid');
    assert.equal(rules[1]?.invalid, true);
    assert.deepEqual(rules[1]?.peers, []);
    assert.ok(p.errors.every((e) => e.kind === 'ClusterNetworkPolicy' && e.namespace === undefined && e.name === 'p'));
  });
}

test('an invalid rule keeps its action and name: Accept matches nothing, Deny / Pass everything (by the flag)', () => {
  const p = norm(
    withRule(
      'egress',
      { name: 'n', action: 'Pass', to: [{ networks: ['bad'] }] },
      {
        ingress: [{ action: 'Accept', from: [{}] }],
      },
    ),
  );
  assert.deepEqual(p.egress[0], {
    name: 'n',
    action: 'Pass',
    peers: [],
    protocols: [],
    invalid: true,
  } satisfies ClusterPolicyRule);
  assert.deepEqual(p.ingress[0], { name: '', action: 'Accept', peers: [], protocols: [], invalid: true });
});

test('an invalid action fails closed as Deny', () => {
  const p = norm(withRule('ingress', { action: 'Drop', from: [{ namespaces: {} }] }));
  assert.equal(p.ingress[0]?.action, 'Deny');
  assert.equal(p.ingress[0]?.invalid, true);
});

test('a peer with only a field this version does not know is unknown, without an error', () => {
  const p = norm(withRule('egress', { action: 'Deny', to: [{ externalNetworkSet: 'x' }, { networks: ['10.0.0.0/8'] }] }));
  assert.deepEqual(lines(p), []);
  assert.deepEqual(p.egress[0]?.peers, [{ kind: 'unknown' }, { kind: 'networks', cidrs: ['10.0.0.0/8'] }]);
  assert.equal(p.egress[0]?.invalid, false);
  // Ingress knows only namespaces and pods: networks there is a newer API's (or a pruned) field.
  const q = norm(withRule('ingress', { action: 'Accept', from: [{ networks: ['10.0.0.0/8'] }] }));
  assert.deepEqual(q.ingress[0]?.peers, [{ kind: 'unknown' }]);
});

// Placement: tier, priority, subject, spec.
const PLACEMENT_CASES: [string, unknown, string[]][] = [
  ['spec missing', undefined, ['p spec: Required value']],
  ['spec not an object', 'x', ['p spec: must be an object, not "x"']],
  ['tier missing', { priority: 1, subject: { namespaces: {} } }, ['p spec.tier: Required value']],
  [
    'tier not in the enum',
    { tier: 'NetworkPolicy', priority: 1, subject: { namespaces: {} } },
    ['p spec.tier: Unsupported value: "NetworkPolicy": supported values: "Admin", "Baseline"'],
  ],
  ['priority missing', { tier: 'Admin', subject: { namespaces: {} } }, ['p spec.priority: Required value']],
  [
    'priority over 1000',
    { tier: 'Admin', priority: 1001, subject: { namespaces: {} } },
    ['p spec.priority: Invalid value: 1001: spec.priority in body should be less than or equal to 1000'],
  ],
  [
    'priority negative',
    { tier: 'Admin', priority: -1, subject: { namespaces: {} } },
    ['p spec.priority: Invalid value: -1: spec.priority in body should be greater than or equal to 0'],
  ],
  [
    'priority not an integer',
    { tier: 'Admin', priority: 1.5, subject: { namespaces: {} } },
    ['p spec.priority: must be an integer, not 1.5'],
  ],
  ['subject missing', { tier: 'Admin', priority: 1 }, ['p spec.subject: Required value']],
  [
    'subject empty',
    { tier: 'Admin', priority: 1, subject: {} },
    ['p spec.subject: Invalid value: 0: spec.subject in body should have at least 1 properties'],
  ],
  [
    'subject with both fields',
    { tier: 'Admin', priority: 1, subject: { namespaces: {}, pods: { podSelector: {} } } },
    ['p spec.subject: Invalid value: 2: spec.subject in body should have at most 1 properties'],
  ],
  [
    'subject with a bad selector',
    { tier: 'Admin', priority: 1, subject: { namespaces: { matchLabels: { 'a/b/c': 'x' } } } },
    [
      "p spec.subject.namespaces.matchLabels: key \"a/b/c\": a qualified name must consist of an optional DNS subdomain prefix and '/' and a name (e.g. 'example.com/MyName')",
    ],
  ],
];

for (const [what, spec, want] of PLACEMENT_CASES) {
  test(`unreadable placement: ${what}; every pod is the subject and only Deny rules keep their meaning`, () => {
    const rules = {
      ingress: [
        { action: 'Accept', from: [{ namespaces: {} }] },
        { action: 'Deny', from: [{ namespaces: {} }] },
        { action: 'Pass', from: [{ namespaces: {} }] },
      ],
    };
    const full = spec === undefined ? undefined : typeof spec === 'object' ? { ...spec, ...rules } : spec;
    const o = cnp(full);
    if (full === undefined) delete o.spec;
    const p = norm(o);
    assert.deepEqual(lines(p), want);
    assert.deepEqual(p.subject, { namespaceSelector: EVERYTHING, podSelector: EVERYTHING });
    if (typeof full === 'object') {
      assert.deepEqual(
        p.ingress.map((r) => [r.action, r.invalid, r.peers.length]),
        [
          ['Accept', true, 0],
          ['Deny', false, 1],
          ['Pass', false, 0],
        ],
      );
    } else assert.deepEqual(p.ingress, []);
  });
}

test('more than 25 rules is reported; the rules are kept', () => {
  const rules = Array.from({ length: 26 }, () => ({ action: 'Deny', to: [{ namespaces: {} }] }));
  const p = norm(cnp({ tier: 'Admin', priority: 1, subject: { namespaces: {} }, egress: rules }));
  assert.deepEqual(lines(p), ['p spec.egress: Too many: 26: must have at most 25 items']);
  assert.equal(p.egress.length, 26);
  assert.ok(p.egress.every((r) => !r.invalid));
});

test('wrong apiVersion or no name: not read at all', () => {
  const o = cnp({});
  o.apiVersion = 'policy.networking.k8s.io/v1alpha1';
  const r = normalizeClusterNetworkPolicy(o);
  assert.equal(r.ok, false);
  assert.deepEqual(r.errors.map(formatValidationError), [
    'p apiVersion: "policy.networking.k8s.io/v1alpha1" is not supported for ClusterNetworkPolicy (want policy.networking.k8s.io/v1alpha2)',
  ]);
});

// ---------------------------------------------------------------- legacy v1alpha1

function anp(spec: unknown, name = 'a'): Record<string, unknown> {
  return { apiVersion: 'policy.networking.k8s.io/v1alpha1', kind: 'AdminNetworkPolicy', metadata: { name }, spec };
}
function banp(spec: unknown, name = 'default'): Record<string, unknown> {
  return { apiVersion: 'policy.networking.k8s.io/v1alpha1', kind: 'BaselineAdminNetworkPolicy', metadata: { name }, spec };
}

test('AdminNetworkPolicy reads as an Admin tier policy: Allow is Accept, ports are protocols', () => {
  const p = norm(
    anp({
      priority: 3,
      subject: { namespaces: { matchLabels: { env: 'prod' } } },
      ingress: [
        {
          name: 'r',
          action: 'Allow',
          from: [{ pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: 'mon' } } } }],
          ports: [
            { portNumber: { protocol: 'UDP', port: 53 } },
            { portNumber: { port: 80 } },
            { namedPort: 'metrics' },
            { portRange: { start: 8000, end: 8000 } },
            { portRange: { protocol: 'SCTP', start: 1, end: 9 } },
          ],
        },
      ],
      egress: [{ action: 'Pass', to: [{ networks: ['fd00::1/8'] }, { domainNames: ['example.com'] }, { nodes: {} }] }],
    }),
    normalizeAdminNetworkPolicy,
  );
  assert.deepEqual(lines(p), ['a spec.egress[0].to[1].domainNames: domainNames peers are only supported in Accept rules']);
  assert.equal(p.sourceKind, 'AdminNetworkPolicy');
  assert.equal(p.tier, 'Admin');
  assert.equal(p.priority, 3);
  assert.deepEqual(p.ingress[0], {
    name: 'r',
    action: 'Accept',
    peers: [{ kind: 'pods', namespaceSelector: sel({}), podSelector: sel({ app: 'mon' }) }],
    protocols: [
      { kind: 'port', protocol: 'UDP', port: 53, endPort: undefined },
      { kind: 'port', protocol: 'TCP', port: 80, endPort: undefined },
      { kind: 'named', name: 'metrics' },
      { kind: 'port', protocol: 'TCP', port: 8000, endPort: 8000 },
      { kind: 'port', protocol: 'SCTP', port: 1, endPort: 9 },
    ],
    invalid: false,
  });
  assert.equal(p.egress[0]?.invalid, true);
});

test('AdminNetworkPolicy limits are 100 (rules, peers, ports) and its errors name its kind', () => {
  const rules = Array.from({ length: 100 }, () => ({ action: 'Deny', to: [{ namespaces: {} }] }));
  assert.deepEqual(
    lines(norm(anp({ priority: 1, subject: { namespaces: {} }, egress: rules }), normalizeAdminNetworkPolicy)),
    [],
  );
  const p = norm(
    anp({
      priority: 1,
      subject: { namespaces: {} },
      egress: [...rules, { action: 'Accept', to: [{ networks: ['10.0.0.0/8'] }], ports: [{ namedPort: 'x' }] }],
      ingress: [{ action: 'Allow', from: [{ namespaces: {} }], ports: [{ portNumber: { protocol: 'ICMP', port: 1 } }, {}] }],
    }),
    normalizeAdminNetworkPolicy,
  );
  assert.deepEqual(lines(p), [
    'a spec.ingress[0].ports[0].portNumber.protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP"',
    'a spec.ingress[0].ports[1]: Invalid value: 0: spec.ingress[0].ports[1] in body should have at least 1 properties',
    'a spec.egress: Too many: 101: must have at most 100 items',
    'a spec.egress[100].action: Unsupported value: "Accept": supported values: "Allow", "Deny", "Pass"',
    'a spec.egress[100]: Invalid value: "object": networks/nodes/domainNames peer cannot be set with namedPorts since there are no namedPorts for networks/nodes/domainNames',
  ]);
  assert.ok(p.errors.every((e) => e.kind === 'AdminNetworkPolicy'));
});

test('BaselineAdminNetworkPolicy: Baseline tier, priority 0, Allow/Deny only, named default', () => {
  const p = norm(
    banp({
      subject: { namespaces: {} },
      ingress: [{ action: 'Deny', from: [{ namespaces: {} }] }],
      egress: [
        { action: 'Pass', to: [{ namespaces: {} }] },
        { action: 'Allow', to: [{ domainNames: ['example.com'] }] },
        { action: 'Allow', to: [{ nodes: {} }], ports: [{ namedPort: 'x' }] },
        { action: 'Allow', to: [{ namespaces: {} }], ports: [{ portRange: { start: 9, end: 8 } }] },
      ],
    }),
    normalizeBaselineAdminNetworkPolicy,
  );
  assert.equal(p.tier, 'Baseline');
  assert.equal(p.priority, 0);
  assert.equal(p.sourceKind, 'BaselineAdminNetworkPolicy');
  assert.deepEqual(
    lines(p),
    [
      'default spec.egress[0].action: Unsupported value: "Pass": supported values: "Allow", "Deny"',
      'default spec.egress[3].ports[0].portRange: Invalid value: "object": Start port must not be greater than End port',
      'default spec.egress[2]: Invalid value: "object": networks/nodes peer cannot be set with namedPorts since there are no namedPorts for networks/nodes',
    ].sort((a, b) => (a.split(' ')[1] ?? '').localeCompare(b.split(' ')[1] ?? '')),
  );
  // domainNames is not a BANP peer field: a newer API's for this kind.
  assert.deepEqual(p.egress[1]?.peers, [{ kind: 'unknown' }]);
  assert.deepEqual(
    p.egress.map((r) => r.invalid),
    [true, false, true, true],
  );
  const other = norm(banp({ subject: { namespaces: {} } }, 'other'), normalizeBaselineAdminNetworkPolicy);
  assert.deepEqual(lines(other), [
    'other metadata.name: Invalid value: "object": Only one baseline admin network policy with metadata.name="default" can be created in the cluster',
  ]);
});

test('buildState: every kind in one sorted list; same names across kinds are kept apart, repeats reported', () => {
  const spec = { tier: 'Admin', priority: 1, subject: { namespaces: {} } };
  const { state, errors } = buildState([
    cnp(spec, 'b'),
    anp({ priority: 1, subject: { namespaces: {} } }, 'b'),
    cnp(spec, 'a'),
    banp({ subject: { namespaces: {} } }),
    cnp({ ...spec, priority: 2 }, 'a'),
  ]);
  assert.deepEqual(
    state.clusterPolicies?.map((p) => `${p.name}:${p.sourceKind}:${p.priority}`),
    ['a:ClusterNetworkPolicy:2', 'b:AdminNetworkPolicy:1', 'b:ClusterNetworkPolicy:1', 'default:BaselineAdminNetworkPolicy:0'],
  );
  assert.deepEqual(errors.map(formatValidationError), [
    'a metadata.name: duplicate ClusterNetworkPolicy a: the later definition replaces the earlier one',
  ]);
  assert.equal(buildState([]).state.clusterPolicies, undefined);
});

// ---------------------------------------------------------------- properties

const leaf = fc.oneof(
  fc.constantFrom(
    'Admin',
    'Baseline',
    'Accept',
    'Deny',
    'Pass',
    'Allow',
    '',
    'x',
    '10.0.0.0/8',
    '10.0.0.1',
    'fd00::/8',
    'a.io',
    '*.a.io',
  ),
  fc.constantFrom(0, 1, 80, 1000, 1001, 65535, 65536, -1, 1.5, null, true),
  fc.constantFrom({}, [], { a: 1 }),
);
const selector = fc.oneof(
  fc.constant({}),
  fc.record({ matchLabels: fc.oneof(fc.constant({ app: 'web' }), fc.constant({ 'a b': 'c' }), leaf) }, { requiredKeys: [] }),
  fc.record({ matchExpressions: fc.array(fc.record({ key: leaf, operator: leaf }, { requiredKeys: [] }), { maxLength: 2 }) }),
  leaf,
);
const peer = fc.oneof(
  fc.record(
    {
      namespaces: selector,
      pods: fc.record({ namespaceSelector: selector, podSelector: selector }, { requiredKeys: [] }),
      nodes: selector,
      networks: fc.oneof(fc.array(leaf, { maxLength: 3 }), leaf),
      domainNames: fc.oneof(fc.array(leaf, { maxLength: 2 }), leaf),
      newField: leaf,
    },
    { requiredKeys: [] },
  ),
  leaf,
);
const port = fc.oneof(
  fc.record({ number: leaf }, { requiredKeys: [] }),
  fc.record({ range: fc.oneof(fc.record({ start: leaf, end: leaf }, { requiredKeys: [] }), leaf) }),
  leaf,
);
const protocol = fc.oneof(
  fc.record(
    {
      tcp: fc.oneof(fc.record({ destinationPort: port }, { requiredKeys: [] }), leaf),
      udp: fc.record({ destinationPort: port }),
      destinationNamedPort: leaf,
    },
    { requiredKeys: [] },
  ),
  leaf,
);
const rule = fc.oneof(
  fc.record(
    {
      name: leaf,
      action: leaf,
      from: fc.oneof(fc.array(peer, { maxLength: 3 }), leaf),
      to: fc.oneof(fc.array(peer, { maxLength: 3 }), leaf),
      protocols: fc.oneof(fc.array(protocol, { maxLength: 2 }), leaf),
    },
    { requiredKeys: [] },
  ),
  leaf,
);
const cnpLike = fc.record(
  {
    tier: leaf,
    priority: leaf,
    subject: fc.oneof(
      fc.record({ namespaces: selector, pods: fc.record({ podSelector: selector }) }, { requiredKeys: [] }),
      leaf,
    ),
    ingress: fc.oneof(fc.array(rule, { maxLength: 3 }), leaf),
    egress: fc.oneof(fc.array(rule, { maxLength: 3 }), leaf),
  },
  { requiredKeys: [] },
);

test('property: any spec normalizes without throwing, and the fail-closed invariants hold', () => {
  fc.assert(
    fc.property(cnpLike, fc.constantFrom(normalizeClusterNetworkPolicy, normalizeAdminNetworkPolicy), (spec, f) => {
      const obj =
        f === normalizeClusterNetworkPolicy
          ? cnp(spec)
          : { ...cnp(spec), apiVersion: 'policy.networking.k8s.io/v1alpha1', kind: 'AdminNetworkPolicy' };
      const r = f(obj);
      assert.ok(r.ok);
      const p = r.value;
      assert.ok(p.errors.every((e) => e.namespace === undefined && e.name === 'p'));
      assert.ok(Number.isInteger(p.priority) && p.priority >= 0 && p.priority <= 1000);
      for (const rl of [...p.ingress, ...p.egress]) {
        // An invalid rule carries no peers or protocols that could be read as its meaning.
        if (rl.invalid) assert.deepEqual([rl.peers, rl.protocols], [[], []]);
        else assert.ok(rl.peers.length > 0 || p.errors.some((e) => /^spec\.(tier|priority|subject)|^spec$/.test(e.path)));
      }
      if (p.errors.length === 0) assert.ok([...p.ingress, ...p.egress].every((rl) => !rl.invalid));
      // An unreadable placement: every pod, and no Accept or Pass rule that can match anything.
      if (p.errors.some((e) => /^spec\.(tier|priority|subject)|^spec$/.test(e.path))) {
        assert.deepEqual(p.subject, { namespaceSelector: EVERYTHING, podSelector: EVERYTHING });
        for (const rl of [...p.ingress, ...p.egress]) {
          if (rl.action === 'Accept') assert.equal(rl.invalid, true);
          if (rl.action === 'Pass' && !rl.invalid) assert.deepEqual(rl.peers, []);
        }
      }
    }),
    { numRuns: 2000 },
  );
});

test('fields this version does not know beside known ones are not counted against MaxProperties (the unknown-field check reports them)', () => {
  const p = norm(
    withRule('egress', {
      action: 'Deny',
      to: [{ networks: ['10.0.0.0/8'], futurePeerOption: true }],
      protocols: [{ tcp: { destinationPort: { number: 80 }, sourcePort: { number: 1 } } }],
    }),
  );
  assert.deepEqual(lines(p), []);
  assert.deepEqual(p.egress[0]?.peers, [{ kind: 'networks', cidrs: ['10.0.0.0/8'] }]);
  assert.deepEqual(p.egress[0]?.protocols, [{ kind: 'port', protocol: 'TCP', port: 80, endPort: undefined }]);
});
