import { test } from 'node:test';
import assert from 'node:assert/strict';
import { normalizePolicy } from '../../src/model/normalize.ts';
import { EVERYTHING } from '../../src/model/selector.ts';
import { formatValidationError } from '../../src/model/types.ts';
import type { NetworkPolicy, Rule } from '../../src/model/types.ts';

function np(spec: unknown, metadata: Record<string, unknown> = { name: 'web', namespace: 'default' }): Record<string, unknown> {
  return { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata, spec };
}

function ok(obj: unknown): NetworkPolicy {
  const r = normalizePolicy(obj);
  assert.ok(r.ok, `expected ok, got ${JSON.stringify(r.errors)}`);
  return r.value;
}

function errLines(p: NetworkPolicy): string[] {
  return p.errors.map(formatValidationError);
}

const INVALID: Rule = { peers: [], ports: [], invalid: true };

test('a valid policy normalizes without errors', () => {
  const p = ok(
    np({
      podSelector: { matchLabels: { app: 'web' } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        { from: [{ podSelector: { matchLabels: { role: 'fe' } } }], ports: [{ port: 8080 }, { protocol: 'UDP', port: 'dns' }] },
      ],
      egress: [
        {
          to: [{ ipBlock: { cidr: '10.0.0.0/8', except: ['10.1.0.0/16'] } }],
          ports: [{ protocol: 'SCTP', port: 3000, endPort: 3010 }],
        },
      ],
    }),
  );
  assert.deepEqual(p, {
    namespace: 'default',
    name: 'web',
    podSelector: { matchLabels: { app: 'web' }, matchExpressions: [] },
    types: { ingress: true, egress: true },
    ingress: [
      {
        peers: [
          { kind: 'pods', podSelector: { matchLabels: { role: 'fe' }, matchExpressions: [] }, namespaceSelector: undefined },
        ],
        ports: [
          { protocol: 'TCP', port: 8080, endPort: undefined },
          { protocol: 'UDP', port: 'dns', endPort: undefined },
        ],
        invalid: false,
      },
    ],
    egress: [
      {
        peers: [{ kind: 'ipBlock', cidr: '10.0.0.0/8', except: ['10.1.0.0/16'] }],
        ports: [{ protocol: 'SCTP', port: 3000, endPort: 3010 }],
        invalid: false,
      },
    ],
    errors: [],
  });
});

// Every port rule of ValidateNetworkPolicyPort and KEP-2079, with the exact error line.
test('port validation (protocol, port, endPort / KEP-2079)', () => {
  const cases: {
    name: string;
    port: unknown;
    want: string[];
    spec?: { protocol: string; port: number | string | undefined; endPort: number | undefined };
  }[] = [
    { name: 'default protocol TCP', port: { port: 80 }, want: [], spec: { protocol: 'TCP', port: 80, endPort: undefined } },
    {
      name: 'no port = all ports of the protocol',
      port: { protocol: 'UDP' },
      want: [],
      spec: { protocol: 'UDP', port: undefined, endPort: undefined },
    },
    { name: 'range', port: { port: 30000, endPort: 32767 }, want: [], spec: { protocol: 'TCP', port: 30000, endPort: 32767 } },
    { name: 'endPort == port', port: { port: 80, endPort: 80 }, want: [], spec: { protocol: 'TCP', port: 80, endPort: 80 } },
    { name: 'full range', port: { port: 1, endPort: 65535 }, want: [], spec: { protocol: 'TCP', port: 1, endPort: 65535 } },
    { name: 'named port', port: { port: 'http-alt' }, want: [], spec: { protocol: 'TCP', port: 'http-alt', endPort: undefined } },
    {
      name: 'endPort < port',
      port: { port: 8080, endPort: 8000 },
      want: ['default/web spec.ingress[0].ports[1].endPort: must be >= port (8080)'],
    },
    {
      name: 'endPort with named port',
      port: { port: 'http', endPort: 8090 },
      want: ['default/web spec.ingress[0].ports[1].endPort: cannot be used with a named port ("http")'],
    },
    {
      name: 'endPort without port',
      port: { endPort: 8090 },
      want: ['default/web spec.ingress[0].ports[1].endPort: may not be specified without port'],
    },
    {
      name: 'endPort above 65535',
      port: { port: 80, endPort: 65536 },
      want: ['default/web spec.ingress[0].ports[1].endPort: must be between 1 and 65535, inclusive (got 65536)'],
    },
    {
      name: 'endPort not an integer',
      port: { port: 80, endPort: '90' },
      want: ['default/web spec.ingress[0].ports[1].endPort: must be an integer, not "90"'],
    },
    {
      name: 'port 0',
      port: { port: 0 },
      want: ['default/web spec.ingress[0].ports[1].port: must be between 1 and 65535, inclusive (got 0)'],
    },
    {
      name: 'port 65536',
      port: { port: 65536 },
      want: ['default/web spec.ingress[0].ports[1].port: must be between 1 and 65535, inclusive (got 65536)'],
    },
    {
      name: 'port fraction',
      port: { port: 80.5 },
      want: ['default/web spec.ingress[0].ports[1].port: must be an integer, not 80.5'],
    },
    {
      name: 'port boolean',
      port: { port: true },
      want: ['default/web spec.ingress[0].ports[1].port: must be a port number or name, not true'],
    },
    {
      name: 'numeric string is a (bad) name',
      port: { port: '80' },
      want: ['default/web spec.ingress[0].ports[1].port: invalid port name "80": must contain at least one letter (a-z)'],
    },
    {
      name: 'name too long',
      port: { port: 'abcdefghijklmnop' },
      want: [
        'default/web spec.ingress[0].ports[1].port: invalid port name "abcdefghijklmnop": must be no more than 15 characters',
      ],
    },
    {
      name: 'name uppercase',
      port: { port: 'HTTP' },
      want: [
        'default/web spec.ingress[0].ports[1].port: invalid port name "HTTP": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)',
        'default/web spec.ingress[0].ports[1].port: invalid port name "HTTP": must contain at least one letter (a-z)',
      ],
    },
    {
      name: 'name double hyphen',
      port: { port: 'a--b' },
      want: ['default/web spec.ingress[0].ports[1].port: invalid port name "a--b": must not contain consecutive hyphens'],
    },
    {
      name: 'name leading hyphen',
      port: { port: '-ab' },
      want: ['default/web spec.ingress[0].ports[1].port: invalid port name "-ab": must not begin or end with a hyphen'],
    },
    {
      name: 'empty name',
      port: { port: '' },
      want: [
        'default/web spec.ingress[0].ports[1].port: invalid port name "": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)',
        'default/web spec.ingress[0].ports[1].port: invalid port name "": must contain at least one letter (a-z)',
      ],
    },
    {
      name: 'unknown protocol',
      port: { protocol: 'ICMP', port: 8 },
      want: ['default/web spec.ingress[0].ports[1].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP"'],
    },
    {
      name: 'lowercase protocol',
      port: { protocol: 'tcp', port: 8 },
      want: ['default/web spec.ingress[0].ports[1].protocol: Unsupported value: "tcp": supported values: "TCP", "UDP", "SCTP"'],
    },
    { name: 'port entry not an object', port: 80, want: ['default/web spec.ingress[0].ports[1]: must be an object, not 80'] },
  ];
  for (const c of cases) {
    const p = ok(np({ podSelector: {}, ingress: [{ ports: [{ port: 443 }, c.port] }, { ports: [{ port: 22 }] }] }));
    assert.deepEqual(errLines(p), c.want, c.name);
    // The other rule is unaffected either way.
    assert.deepEqual(
      p.ingress[1],
      { peers: undefined, ports: [{ protocol: 'TCP', port: 22, endPort: undefined }], invalid: false },
      c.name,
    );
    if (c.want.length > 0) assert.deepEqual(p.ingress[0], INVALID, c.name);
    else assert.deepEqual(p.ingress[0]?.ports?.[1], c.spec, c.name);
  }
});

test('peer validation (exactly one of ipBlock or selectors, CIDRs, except)', () => {
  const cases: { name: string; peer: unknown; want: string[]; peerOut?: unknown }[] = [
    {
      name: 'pod selector only',
      peer: { podSelector: {} },
      want: [],
      peerOut: { kind: 'pods', podSelector: EVERYTHING, namespaceSelector: undefined },
    },
    {
      name: 'namespace selector only',
      peer: { namespaceSelector: { matchLabels: { team: 'a' } } },
      want: [],
      peerOut: { kind: 'pods', podSelector: undefined, namespaceSelector: { matchLabels: { team: 'a' }, matchExpressions: [] } },
    },
    {
      name: 'both selectors (AND)',
      peer: { podSelector: { matchLabels: { a: 'b' } }, namespaceSelector: {} },
      want: [],
      peerOut: { kind: 'pods', podSelector: { matchLabels: { a: 'b' }, matchExpressions: [] }, namespaceSelector: EVERYTHING },
    },
    {
      name: 'ipBlock host bits cleared',
      peer: { ipBlock: { cidr: '10.1.2.3/16' } },
      want: [],
      peerOut: { kind: 'ipBlock', cidr: '10.1.0.0/16', except: [] },
    },
    {
      name: 'v6 ipBlock canonical, except sorted and deduplicated',
      peer: { ipBlock: { cidr: 'FD00:0::/32', except: ['fd00:0:2::/48', 'fd00:0:1::/48', 'fd00:0:1:ffff::/48'] } },
      want: [],
      peerOut: { kind: 'ipBlock', cidr: 'fd00::/32', except: ['fd00:0:1::/48', 'fd00:0:2::/48'] },
    },
    { name: 'empty peer', peer: {}, want: ['default/web spec.ingress[0].from[0]: must specify a peer'] },
    {
      name: 'null selectors count as absent',
      peer: { podSelector: null, ipBlock: null },
      want: ['default/web spec.ingress[0].from[0]: must specify a peer'],
    },
    {
      name: 'ipBlock and podSelector',
      peer: { ipBlock: { cidr: '10.0.0.0/8' }, podSelector: {} },
      want: ['default/web spec.ingress[0].from[0]: may not specify both ipBlock and another peer'],
    },
    {
      name: 'ipBlock and namespaceSelector',
      peer: { ipBlock: { cidr: '10.0.0.0/8' }, namespaceSelector: {} },
      want: ['default/web spec.ingress[0].from[0]: may not specify both ipBlock and another peer'],
    },
    { name: 'missing cidr', peer: { ipBlock: {} }, want: ['default/web spec.ingress[0].from[0].ipBlock.cidr: Required value'] },
    {
      name: 'bad cidr',
      peer: { ipBlock: { cidr: '10.0.0.300/8' } },
      want: ['default/web spec.ingress[0].from[0].ipBlock.cidr: must be a valid CIDR: bad address in "10.0.0.300/8"'],
    },
    {
      name: 'bare address',
      peer: { ipBlock: { cidr: '10.0.0.1' } },
      want: ['default/web spec.ingress[0].from[0].ipBlock.cidr: must be a valid CIDR, not a bare address: "10.0.0.1"'],
    },
    {
      name: 'prefix too long',
      peer: { ipBlock: { cidr: '10.0.0.0/33' } },
      want: ['default/web spec.ingress[0].from[0].ipBlock.cidr: must be a valid CIDR: prefix length 33 too long for IPv4'],
    },
    {
      name: 'except outside',
      peer: { ipBlock: { cidr: '10.0.0.0/16', except: ['10.0.1.0/24', '10.1.0.0/24'] } },
      want: ['default/web spec.ingress[0].from[0].ipBlock.except[1]: must be a strict subset of cidr (10.0.0.0/16)'],
    },
    {
      name: 'except equal to cidr (not strict)',
      peer: { ipBlock: { cidr: '10.0.0.0/16', except: ['10.0.0.0/16'] } },
      want: ['default/web spec.ingress[0].from[0].ipBlock.except[0]: must be a strict subset of cidr (10.0.0.0/16)'],
    },
    {
      name: 'except wider than cidr',
      peer: { ipBlock: { cidr: '10.0.0.0/16', except: ['10.0.0.0/8'] } },
      want: ['default/web spec.ingress[0].from[0].ipBlock.except[0]: must be a strict subset of cidr (10.0.0.0/16)'],
    },
    {
      name: 'except of the other family',
      peer: { ipBlock: { cidr: '0.0.0.0/0', except: ['fd00::/8'] } },
      want: ['default/web spec.ingress[0].from[0].ipBlock.except[0]: must be a strict subset of cidr (0.0.0.0/0)'],
    },
    {
      name: 'except not a CIDR',
      peer: { ipBlock: { cidr: '10.0.0.0/8', except: ['10.1.0.0'] } },
      want: ['default/web spec.ingress[0].from[0].ipBlock.except[0]: must be a valid CIDR, not a bare address: "10.1.0.0"'],
    },
    {
      name: 'except not a list',
      peer: { ipBlock: { cidr: '10.0.0.0/8', except: '10.1.0.0/16' } },
      want: ['default/web spec.ingress[0].from[0].ipBlock.except: must be a list, not "10.1.0.0/16"'],
    },
    {
      name: 'cidr not a string',
      peer: { ipBlock: { cidr: 10 } },
      want: ['default/web spec.ingress[0].from[0].ipBlock.cidr: must be a string, not 10'],
    },
    { name: 'peer not an object', peer: 'pods', want: ['default/web spec.ingress[0].from[0]: must be an object, not "pods"'] },
  ];
  for (const c of cases) {
    const p = ok(np({ podSelector: {}, ingress: [{ from: [c.peer] }] }));
    assert.deepEqual(errLines(p), c.want, c.name);
    if (c.want.length > 0) assert.deepEqual(p.ingress, [INVALID], c.name);
    else assert.deepEqual(p.ingress[0]?.peers, [c.peerOut], c.name);
  }
});

test('label selector validation in peers and spec.podSelector', () => {
  const cases: { name: string; sel: unknown; want: string[] }[] = [
    { name: 'In with values', sel: { matchExpressions: [{ key: 'a', operator: 'In', values: ['x'] }] }, want: [] },
    { name: 'Exists without values', sel: { matchExpressions: [{ key: 'a', operator: 'Exists' }] }, want: [] },
    { name: 'prefixed key', sel: { matchLabels: { 'example.com/tier': 'web' } }, want: [] },
    { name: 'empty value', sel: { matchLabels: { a: '' } }, want: [] },
    {
      name: 'In without values',
      sel: { matchExpressions: [{ key: 'a', operator: 'In', values: [] }] },
      want: ["@.matchExpressions[0].values: must be specified when `operator` is 'In' or 'NotIn'"],
    },
    {
      name: 'NotIn without values',
      sel: { matchExpressions: [{ key: 'a', operator: 'NotIn' }] },
      want: ["@.matchExpressions[0].values: must be specified when `operator` is 'In' or 'NotIn'"],
    },
    {
      name: 'Exists with values',
      sel: { matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] },
      want: ["@.matchExpressions[0].values: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"],
    },
    {
      name: 'DoesNotExist with values',
      sel: { matchExpressions: [{ key: 'a', operator: 'DoesNotExist', values: ['x'] }] },
      want: ["@.matchExpressions[0].values: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"],
    },
    {
      name: 'unknown operator',
      sel: { matchExpressions: [{ key: 'a', operator: 'Equals', values: ['x'] }] },
      want: ['@.matchExpressions[0].operator: "Equals" is not a valid selector operator (In, NotIn, Exists, DoesNotExist)'],
    },
    {
      name: 'missing operator',
      sel: { matchExpressions: [{ key: 'a' }] },
      want: ['@.matchExpressions[0].operator: Required value'],
    },
    {
      name: 'missing key',
      sel: { matchExpressions: [{ operator: 'Exists' }] },
      want: ['@.matchExpressions[0].key: Required value'],
    },
    {
      name: 'bad key',
      sel: { matchExpressions: [{ key: 'a b', operator: 'Exists' }] },
      want: [
        "@.matchExpressions[0].key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', 'my.name' or '123-abc')",
      ],
    },
    {
      name: 'bad expression value',
      sel: { matchExpressions: [{ key: 'a', operator: 'In', values: ['x y'] }] },
      want: [
        "@.matchExpressions[0].values[0]: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', 'my_value' or '12345')",
      ],
    },
    {
      name: 'bad matchLabels key',
      sel: { matchLabels: { '-a': 'x' } },
      want: [
        "@.matchLabels: key \"-a\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', 'my.name' or '123-abc')",
      ],
    },
    {
      name: 'bad key prefix',
      sel: { matchLabels: { 'Example.com/a': 'x' } },
      want: [
        "@.matchLabels: key \"Example.com/a\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com')",
      ],
    },
    {
      name: 'too long value',
      sel: { matchLabels: { a: 'x'.repeat(64) } },
      want: [`@.matchLabels: value "${'x'.repeat(64)}" of "a": must be no more than 63 characters`],
    },
    {
      name: 'non-string matchLabels value',
      sel: { matchLabels: { version: 1 } },
      want: ['@.matchLabels: value of "version" must be a string, not 1'],
    },
    { name: 'selector not an object', sel: 'app=web', want: ['@: must be an object, not "app=web"'] },
    {
      name: 'matchExpressions not a list',
      sel: { matchExpressions: {} },
      want: ['@.matchExpressions: must be a list, not an object'],
    },
  ];
  for (const c of cases) {
    // As a peer's podSelector: only that rule is invalid.
    const peer = ok(np({ podSelector: {}, ingress: [{ from: [{ podSelector: c.sel }] }, {}] }));
    assert.deepEqual(
      peer.errors.map((e) => `${e.path}: ${e.message}`),
      c.want.map((w) => w.replace('@', 'spec.ingress[0].from[0].podSelector')),
      `peer: ${c.name}`,
    );
    assert.equal(peer.ingress[0]?.invalid, c.want.length > 0, c.name);
    assert.deepEqual(peer.ingress[1], { peers: undefined, ports: undefined, invalid: false }, c.name);
    // As spec.podSelector: the whole namespace is selected and every rule is invalid.
    const top = ok(np({ podSelector: c.sel, ingress: [{}], egress: [{}] }));
    assert.deepEqual(
      top.errors.map((e) => `${e.path}: ${e.message}`),
      c.want.map((w) => w.replace('@', 'spec.podSelector')),
      `podSelector: ${c.name}`,
    );
    if (c.want.length > 0) {
      assert.deepEqual(top.podSelector, EVERYTHING, c.name);
      assert.deepEqual(top.types, { ingress: true, egress: true }, c.name);
      assert.deepEqual(top.ingress, [INVALID], c.name);
      assert.deepEqual(top.egress, [INVALID], c.name);
    } else {
      assert.deepEqual(top.ingress, [{ peers: undefined, ports: undefined, invalid: false }], c.name);
    }
  }
});

test('selectors are normalized to sorted sets', () => {
  const a = ok(
    np({
      podSelector: {
        matchLabels: { b: '2', a: '1' },
        matchExpressions: [
          { key: 'z', operator: 'In', values: ['y', 'x', 'y'] },
          { key: 'a', operator: 'Exists' },
        ],
      },
    }),
  );
  const b = ok(
    np({
      podSelector: {
        matchExpressions: [
          { operator: 'Exists', key: 'a' },
          { values: ['x', 'y'], key: 'z', operator: 'In' },
        ],
        matchLabels: { a: '1', b: '2' },
      },
    }),
  );
  assert.deepEqual(a, b);
  assert.deepEqual(Object.keys(a.podSelector.matchLabels), ['a', 'b']);
  assert.deepEqual(a.podSelector.matchExpressions, [
    { key: 'a', operator: 'Exists', values: [] },
    { key: 'z', operator: 'In', values: ['x', 'y'] },
  ]);
});

test('policyTypes and its defaults', () => {
  const rule = { ports: [{ port: 1 }] };
  const r = { peers: undefined, ports: [{ protocol: 'TCP', port: 1, endPort: undefined }], invalid: false };
  const cases: {
    name: string;
    spec: Record<string, unknown>;
    types: [boolean, boolean];
    ingress: unknown[];
    egress: unknown[];
    errors?: string[];
  }[] = [
    { name: 'nothing: ingress isolated, no rules (deny all ingress)', spec: {}, types: [true, false], ingress: [], egress: [] },
    { name: 'ingress rules only', spec: { ingress: [rule] }, types: [true, false], ingress: [r], egress: [] },
    { name: 'egress rules: both isolated', spec: { egress: [rule] }, types: [true, true], ingress: [], egress: [r] },
    // SetDefaults_NetworkPolicy uses len(spec.Egress) != 0: an empty list does not isolate egress.
    {
      name: 'egress: [] without policyTypes: ingress only (API server default)',
      spec: { egress: [] },
      types: [true, false],
      ingress: [],
      egress: [],
    },
    {
      name: 'policyTypes: [] = absent',
      spec: { policyTypes: [], egress: [rule] },
      types: [true, true],
      ingress: [],
      egress: [r],
    },
    {
      name: 'Egress only: ingress rules dropped',
      spec: { policyTypes: ['Egress'], ingress: [rule], egress: [rule] },
      types: [false, true],
      ingress: [],
      egress: [r],
    },
    {
      name: 'Ingress only: egress rules dropped',
      spec: { policyTypes: ['Ingress'], ingress: [rule], egress: [rule] },
      types: [true, false],
      ingress: [r],
      egress: [],
    },
    {
      name: 'both, no rules: deny all',
      spec: { policyTypes: ['Ingress', 'Egress'] },
      types: [true, true],
      ingress: [],
      egress: [],
    },
    {
      name: 'ingress: [{}] allows all',
      spec: { ingress: [{}] },
      types: [true, false],
      ingress: [{ peers: undefined, ports: undefined, invalid: false }],
      egress: [],
    },
    {
      name: 'empty from/ports = all',
      spec: { ingress: [{ from: [], ports: [] }] },
      types: [true, false],
      ingress: [{ peers: undefined, ports: undefined, invalid: false }],
      egress: [],
    },
    {
      name: 'unknown type: isolate both, keep validly listed direction',
      spec: { policyTypes: ['Ingress', 'Egres'], ingress: [rule], egress: [rule] },
      types: [true, true],
      ingress: [r],
      egress: [],
      errors: ['default/web spec.policyTypes[1]: Unsupported value: "Egres": supported values: "Ingress", "Egress"'],
    },
    {
      name: 'lowercase type',
      spec: { policyTypes: ['ingress'], ingress: [rule] },
      types: [true, true],
      ingress: [],
      egress: [],
      errors: ['default/web spec.policyTypes[0]: Unsupported value: "ingress": supported values: "Ingress", "Egress"'],
    },
    {
      name: 'duplicate type: flagged, same meaning',
      spec: { policyTypes: ['Egress', 'Egress'], ingress: [rule], egress: [rule] },
      types: [false, true],
      ingress: [],
      egress: [r],
      errors: ['default/web spec.policyTypes[1]: Duplicate value: "Egress"'],
    },
    {
      name: 'more than two',
      spec: { policyTypes: ['Ingress', 'Egress', 'Ingress'], ingress: [rule], egress: [rule] },
      types: [true, true],
      ingress: [r],
      egress: [r],
      errors: [
        'default/web spec.policyTypes: may not specify more than two policyTypes',
        'default/web spec.policyTypes[2]: Duplicate value: "Ingress"',
      ],
    },
    {
      name: 'errors in rules of a non-isolated direction are still reported',
      spec: { policyTypes: ['Ingress'], egress: [{ ports: [{ port: 0 }] }] },
      types: [true, false],
      ingress: [],
      egress: [],
      errors: ['default/web spec.egress[0].ports[0].port: must be between 1 and 65535, inclusive (got 0)'],
    },
  ];
  for (const c of cases) {
    const p = ok(np({ podSelector: {}, ...c.spec }));
    assert.deepEqual([p.types.ingress, p.types.egress], c.types, c.name);
    assert.deepEqual(p.ingress, c.ingress, c.name);
    assert.deepEqual(p.egress, c.egress, c.name);
    assert.deepEqual(errLines(p), c.errors ?? [], c.name);
  }
});

test('an invalid rule fails closed, the other rules keep working', () => {
  const p = ok(
    np({
      podSelector: { matchLabels: { app: 'db' } },
      ingress: [
        { from: [{ podSelector: {} }], ports: [{ port: 5432 }, { port: 5433, endPort: 5400 }] },
        { from: [{ ipBlock: { cidr: '10.0.0.0/8' } }] },
      ],
    }),
  );
  assert.deepEqual(errLines(p), ['default/web spec.ingress[0].ports[1].endPort: must be >= port (5433)']);
  assert.deepEqual(p.ingress[0], INVALID);
  assert.deepEqual(p.ingress[1], {
    peers: [{ kind: 'ipBlock', cidr: '10.0.0.0/8', except: [] }],
    ports: undefined,
    invalid: false,
  });
  assert.deepEqual(p.podSelector, { matchLabels: { app: 'db' }, matchExpressions: [] });
});

test('garbage under spec isolates the namespace in both directions, with no rules', () => {
  const failClosed = { podSelector: EVERYTHING, types: { ingress: true, egress: true }, ingress: [], egress: [] };
  const cases: { name: string; spec: unknown; want: string[] }[] = [
    { name: 'spec a string', spec: 'allow everything', want: ['default/web spec: must be an object, not "allow everything"'] },
    { name: 'spec a list', spec: [], want: ['default/web spec: must be an object, not a list'] },
    {
      name: 'ingress an object',
      spec: { podSelector: {}, ingress: { from: [] } },
      want: ['default/web spec.ingress: must be a list, not an object'],
    },
    {
      name: 'egress a string',
      spec: { podSelector: {}, egress: 'none' },
      want: ['default/web spec.egress: must be a list, not "none"'],
    },
    {
      name: 'policyTypes a string',
      spec: { podSelector: {}, policyTypes: 'Ingress', ingress: [{}] },
      want: ['default/web spec.policyTypes: must be a list, not "Ingress"'],
    },
  ];
  for (const c of cases) {
    const p = ok(np(c.spec));
    const { namespace, name, errors, ...rest } = p;
    assert.deepEqual([namespace, name], ['default', 'web'], c.name);
    assert.deepEqual(rest, failClosed, c.name);
    assert.deepEqual(errors.map(formatValidationError), c.want, c.name);
  }
});

test('rule-level garbage invalidates only that rule', () => {
  const cases: { name: string; rule: unknown; want: string }[] = [
    { name: 'rule not an object', rule: 'all', want: 'default/web spec.ingress[0]: must be an object, not "all"' },
    {
      name: 'from not a list',
      rule: { from: { podSelector: {} } },
      want: 'default/web spec.ingress[0].from: must be a list, not an object',
    },
    { name: 'ports not a list', rule: { ports: 80 }, want: 'default/web spec.ingress[0].ports: must be a list, not 80' },
  ];
  for (const c of cases) {
    const p = ok(np({ podSelector: {}, ingress: [c.rule, {}] }));
    assert.deepEqual(errLines(p), [c.want], c.name);
    assert.deepEqual(p.ingress, [INVALID, { peers: undefined, ports: undefined, invalid: false }], c.name);
  }
});

test('missing spec or podSelector is the zero value: all pods, ingress isolated', () => {
  for (const spec of [undefined, null, {}, { podSelector: null }]) {
    const p = ok(np(spec));
    assert.deepEqual(p.errors, []);
    assert.deepEqual(p.podSelector, EVERYTHING);
    assert.deepEqual(p.types, { ingress: true, egress: false });
    assert.deepEqual([p.ingress, p.egress], [[], []]);
  }
});

test('identity: name required, namespace defaults, apiVersion and kind checked', () => {
  const cases: { name: string; obj: unknown; ok: boolean; want: string[]; ns?: string }[] = [
    { name: 'no namespace -> default', obj: np({}, { name: 'a' }), ok: true, want: [], ns: 'default' },
    { name: 'given namespace', obj: np({}, { name: 'a', namespace: 'shop' }), ok: true, want: [], ns: 'shop' },
    { name: 'no name', obj: np({}, { namespace: 'shop' }), ok: false, want: ['shop/<unnamed> metadata.name: Required value'] },
    { name: 'empty name', obj: np({}, { name: '' }), ok: false, want: ['default/<unnamed> metadata.name: Required value'] },
    {
      name: 'name not a string',
      obj: np({}, { name: 7 }),
      ok: false,
      want: ['default/<unnamed> metadata.name: must be a string, not 7'],
    },
    {
      name: 'no metadata',
      obj: { kind: 'NetworkPolicy', spec: {} },
      ok: false,
      want: ['default/<unnamed> metadata.name: Required value'],
    },
    { name: 'not an object', obj: 42, ok: false, want: ['default/<unnamed> <root>: must be an object, not 42'] },
    {
      name: 'wrong apiVersion',
      obj: { ...np({}), apiVersion: 'extensions/v1beta1' },
      ok: false,
      want: ['default/web apiVersion: "extensions/v1beta1" is not supported for NetworkPolicy (want networking.k8s.io/v1)'],
    },
    {
      name: 'wrong kind',
      obj: { ...np({}), kind: 'Pod' },
      ok: false,
      want: ['default/web kind: must be NetworkPolicy, not "Pod"'],
    },
    {
      name: 'no kind/apiVersion (watch list items) is fine',
      obj: { metadata: { name: 'a', namespace: 'x' }, spec: {} },
      ok: true,
      want: [],
      ns: 'x',
    },
    {
      name: 'invalid name is reported but the policy is enforced',
      obj: np({}, { name: 'Web_1' }),
      ok: true,
      want: [
        "default/Web_1 metadata.name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com')",
      ],
      ns: 'default',
    },
  ];
  for (const c of cases) {
    const r = normalizePolicy(c.obj);
    assert.equal(r.ok, c.ok, c.name);
    assert.deepEqual(r.errors.map(formatValidationError), c.want, c.name);
    for (const e of r.errors) assert.equal(e.kind, 'NetworkPolicy', c.name);
    if (r.ok) assert.equal(r.value.namespace, c.ns, c.name);
  }
});

test('ok results carry their errors on the policy too', () => {
  const r = normalizePolicy(np({ podSelector: {}, ingress: [{ ports: [{ port: 0 }] }] }));
  assert.ok(r.ok);
  assert.equal(r.errors.length, 1);
  assert.deepEqual(r.value.errors, r.errors);
});
