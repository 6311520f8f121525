// The reference evaluator, one table per rule of the NetworkPolicy spec, on
// the small cluster of test/cases/fixture-cluster.ts (read its header for the
// pods, labels, addresses and named ports the rows rely on).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { buildState } from '../../src/model/normalize.ts';
import type { ClusterState, NetworkPolicy } from '../../src/model/types.ts';
import { verdict } from '../../src/policy/verdict.ts';
import { BASE, c, endpoint, judge, pol, show, stateWith, type Conn } from '../cases/fixture-cluster.ts';
import type { RawObject } from '../cases/raw.ts';

interface Row {
  readonly name: string;
  readonly policies: readonly RawObject[];
  /** Each connection with the expected final answer. */
  readonly conns: readonly (readonly [Conn, boolean])[];
}

function table(
  title: string,
  rows: readonly Row[],
  state: (policies: readonly RawObject[]) => ClusterState = (p) => stateWith(p),
): void {
  describe(title, () => {
    for (const row of rows) {
      test(row.name, () => {
        const s = state(row.policies);
        const wrong = row.conns
          .filter(([conn, want]) => judge(s, conn).allowed !== want)
          .map(([conn, want]) => `${show(conn)}: want ${want ? 'allowed' : 'denied'}`);
        assert.deepEqual(wrong, []);
      });
    }
  });
}

const web = { matchLabels: { app: 'web' } };
const db = { matchLabels: { app: 'db' } };
const client = { matchLabels: { app: 'client' } };

describe('policyTypes defaults (SetDefaults_NetworkPolicy)', () => {
  // ingress is judged on app/client -> app/web, egress on app/web -> app/db.
  const rows: {
    name: string;
    spec: Parameters<typeof pol>[2];
    ingress: [isolated: boolean, allowed: boolean];
    egress: [isolated: boolean, allowed: boolean];
  }[] = [
    { name: 'no policyTypes, no rules: Ingress only', spec: { podSelector: web }, ingress: [true, false], egress: [false, true] },
    {
      name: 'no policyTypes, ingress [{}]: Ingress only',
      spec: { podSelector: web, ingress: [{}] },
      ingress: [true, true],
      egress: [false, true],
    },
    {
      name: 'no policyTypes, egress [{}]: Ingress and Egress',
      spec: { podSelector: web, egress: [{}] },
      ingress: [true, false],
      egress: [true, true],
    },
    {
      name: 'no policyTypes, egress []: an empty egress adds no Egress',
      spec: { podSelector: web, egress: [] },
      ingress: [true, false],
      egress: [false, true],
    },
    {
      name: '[Egress]: Egress only',
      spec: { podSelector: web, policyTypes: ['Egress'] },
      ingress: [false, true],
      egress: [true, false],
    },
    {
      name: '[Egress] ignores ingress rules',
      spec: { podSelector: web, policyTypes: ['Egress'], ingress: [{}] },
      ingress: [false, true],
      egress: [true, false],
    },
    {
      name: '[Ingress] ignores egress rules',
      spec: { podSelector: web, policyTypes: ['Ingress'], egress: [{}] },
      ingress: [true, false],
      egress: [false, true],
    },
    {
      name: '[Ingress, Egress] without rules: both denied',
      spec: { podSelector: web, policyTypes: ['Ingress', 'Egress'] },
      ingress: [true, false],
      egress: [true, false],
    },
  ];
  for (const r of rows) {
    test(r.name, () => {
      const s = stateWith([pol('app', 'p', r.spec)]);
      const vi = judge(s, c('app/client', 'app/web', 80)).ingress;
      const ve = judge(s, c('app/web', 'app/db', 8080)).egress;
      assert.deepEqual([vi.isolated, vi.allowed], r.ingress, 'ingress [isolated, allowed]');
      assert.deepEqual([ve.isolated, ve.allowed], r.egress, 'egress [isolated, allowed]');
    });
  }
});

table('isolation is per pod and per direction', [
  {
    name: 'denying ingress to app/web leaves its egress and other pods alone',
    policies: [pol('app', 'deny-web', { podSelector: web, policyTypes: ['Ingress'] })],
    conns: [
      [c('app/client', 'app/web', 80), false],
      [c('app/web', 'app/client', 80), true],
      [c('app/client', 'app/db', 8080), true],
      [c('app/client', 'other/web', 80), true],
    ],
  },
  {
    name: 'a policy selects pods of its own namespace only',
    policies: [pol('other', 'deny-web', { podSelector: web, policyTypes: ['Ingress'] })],
    conns: [
      [c('app/client', 'app/web', 80), true],
      [c('app/client', 'other/web', 80), false],
    ],
  },
  {
    name: 'denying egress of app/client leaves ingress to it alone',
    policies: [pol('app', 'deny-client-out', { podSelector: client, policyTypes: ['Egress'] })],
    conns: [
      [c('app/client', 'app/web', 80), false],
      [c('app/client', '203.0.113.9', 443), false],
      [c('app/web', 'app/client', 80), true],
    ],
  },
  {
    name: 'both sides must allow: egress allowed but ingress denied is denied',
    policies: [
      pol('app', 'client-out', { podSelector: client, policyTypes: ['Egress'], egress: [{}] }),
      pol('app', 'web-in', { podSelector: web, policyTypes: ['Ingress'] }),
    ],
    conns: [
      [c('app/client', 'app/web', 80), false],
      [c('app/client', 'app/db', 8080), true],
    ],
  },
]);

table('allowed = union of all rules of all selecting policies', [
  {
    name: 'two policies, each with one rule',
    policies: [
      pol('app', 'p1', { podSelector: web, ingress: [{ from: [{ podSelector: client }], ports: [{ port: 80 }] }] }),
      pol('app', 'p2', {
        podSelector: web,
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'b' } } }], ports: [{ port: 9090 }] }],
      }),
    ],
    conns: [
      [c('app/client', 'app/web', 80), true],
      [c('app/client', 'app/web', 9090), false],
      [c('other/client', 'app/web', 9090), true],
      [c('other/client', 'app/web', 80), false],
      [c('ops/tool', 'app/web', 80), false],
    ],
  },
  {
    name: 'two rules of one policy',
    policies: [
      pol('app', 'p', {
        podSelector: web,
        ingress: [
          { from: [{ podSelector: client }], ports: [{ port: 80 }] },
          { from: [{ namespaceSelector: { matchLabels: { team: 'b' } } }], ports: [{ port: 9090 }] },
        ],
      }),
    ],
    conns: [
      [c('app/client', 'app/web', 80), true],
      [c('app/client', 'app/web', 9090), false],
      [c('other/client', 'app/web', 9090), true],
      [c('other/client', 'app/web', 80), false],
    ],
  },
  {
    name: 'a deny-all policy takes nothing away from another policy',
    policies: [
      pol('app', 'deny-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] }),
      pol('app', 'allow-web', { podSelector: web, ingress: [{ from: [{ podSelector: client }] }] }),
    ],
    conns: [
      [c('app/client', 'app/web', 80), false], // client's egress is denied by deny-all
      [c('app/db', 'app/web', 80), false],
      [c('other/client', 'app/web', 80), false],
    ],
  },
  {
    name: 'allow-all next to deny-all allows',
    policies: [pol('app', 'deny-all', { podSelector: {} }), pol('app', 'allow-all', { podSelector: {}, ingress: [{}] })],
    conns: [
      [c('ops/tool', 'app/web', 80), true],
      [c('203.0.113.9', 'app/db', 1), true],
    ],
  },
]);

test('allowedBy lists every allowing rule, sorted by policy then rule', () => {
  const s = stateWith([
    pol('app', 'p-b', { podSelector: web, ingress: [{ ports: [{ port: 81 }] }, {}, { from: [{ podSelector: client }] }] }),
    pol('app', 'p-a', { podSelector: {}, ingress: [{ from: [{ podSelector: client }], ports: [{ port: 80 }] }] }),
    pol('app', 'p-c', { podSelector: db, ingress: [{}] }),
  ]);
  const v = judge(s, c('app/client', 'app/web', 80)).ingress;
  assert.deepEqual(v.policies, ['app/p-a', 'app/p-b']);
  assert.deepEqual(v.allowedBy, [
    { policy: 'app/p-a', direction: 'ingress', rule: 0, kind: 'NetworkPolicy', description: 'app/p-a ingress[0]' },
    { policy: 'app/p-b', direction: 'ingress', rule: 1, kind: 'NetworkPolicy', description: 'app/p-b ingress[1]' },
    { policy: 'app/p-b', direction: 'ingress', rule: 2, kind: 'NetworkPolicy', description: 'app/p-b ingress[2]' },
  ]);
  assert.match(v.reason, /app\/p-a ingress\[0\], app\/p-b ingress\[1\] and app\/p-b ingress\[2\]/);
});

const fromPeer = (peer: object): RawObject[] => [pol('app', 'p', { podSelector: web, ingress: [{ from: [peer] }] })];

table('peer selectors (ingress to app/web)', [
  {
    name: 'podSelector alone: pods of the policy namespace',
    policies: fromPeer({ podSelector: client }),
    conns: [
      [c('app/client', 'app/web', 80), true],
      [c('other/client', 'app/web', 80), false],
      [c('app/db', 'app/web', 80), false],
    ],
  },
  {
    name: 'podSelector {}: every pod of the policy namespace, no other',
    policies: fromPeer({ podSelector: {} }),
    conns: [
      [c('app/db', 'app/web', 80), true],
      [c('app/client', 'app/web', 80), true],
      [c('other/client', 'app/web', 80), false],
      [c('ops/tool', 'app/web', 80), false],
    ],
  },
  {
    name: 'namespaceSelector alone: every pod of matching namespaces',
    policies: fromPeer({ namespaceSelector: { matchLabels: { team: 'b' } } }),
    conns: [
      [c('other/client', 'app/web', 80), true],
      [c('other/web', 'app/web', 80), true],
      [c('app/client', 'app/web', 80), false],
      [c('ops/tool', 'app/web', 80), false],
    ],
  },
  {
    name: 'namespaceSelector {}: every pod of every namespace, no external address',
    policies: fromPeer({ namespaceSelector: {} }),
    conns: [
      [c('ops/tool', 'app/web', 80), true],
      [c('other/client', 'app/web', 80), true],
      [c('app/db', 'app/web', 80), true],
      [c('203.0.113.9', 'app/web', 80), false],
    ],
  },
  {
    name: 'both selectors {}: every pod everywhere',
    policies: fromPeer({ namespaceSelector: {}, podSelector: {} }),
    conns: [
      [c('ops/tool', 'app/web', 80), true],
      [c('203.0.113.9', 'app/web', 80), false],
    ],
  },
  {
    name: 'pod matchExpressions In',
    policies: fromPeer({ podSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['client', 'db'] }] } }),
    conns: [
      [c('app/client', 'app/web', 80), true],
      [c('app/db', 'app/web', 80), true],
      [c('other/client', 'app/web', 80), false],
    ],
  },
  {
    name: 'pod matchExpressions NotIn',
    policies: fromPeer({ podSelector: { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['client'] }] } }),
    conns: [
      [c('app/db', 'app/web', 80), true],
      [c('app/client', 'app/web', 80), false],
    ],
  },
  {
    name: 'pod matchExpressions Exists / DoesNotExist',
    policies: [
      pol('app', 'p', {
        podSelector: web,
        ingress: [
          {
            from: [
              {
                podSelector: {
                  matchExpressions: [
                    { key: 'app', operator: 'Exists' },
                    { key: 'tier', operator: 'DoesNotExist' },
                  ],
                },
              },
            ],
          },
        ],
      }),
    ],
    conns: [
      [c('app/client', 'app/web', 80), true],
      [c('app/db', 'app/web', 80), true],
      [c('app/web', 'app/web', 80), false], // web has a tier label
      [c('other/client', 'app/web', 80), false],
    ],
  },
  {
    name: 'namespace matchExpressions Exists',
    policies: fromPeer({ namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'Exists' }] } }),
    conns: [
      [c('other/client', 'app/web', 80), true],
      [c('app/client', 'app/web', 80), true],
      [c('ops/tool', 'app/web', 80), false],
    ],
  },
  {
    name: 'namespace matchExpressions DoesNotExist',
    policies: fromPeer({ namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'DoesNotExist' }] } }),
    conns: [
      [c('ops/tool', 'app/web', 80), true],
      [c('other/client', 'app/web', 80), false],
    ],
  },
  {
    name: 'namespace NotIn: a namespace without the key matches',
    policies: fromPeer({ namespaceSelector: { matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['prod'] }] } }),
    conns: [
      [c('other/client', 'app/web', 80), true],
      [c('ops/tool', 'app/web', 80), true],
      [c('app/client', 'app/web', 80), false],
    ],
  },
  {
    name: 'matchLabels and matchExpressions of one selector are ANDed',
    policies: fromPeer({
      namespaceSelector: { matchLabels: { team: 'b' }, matchExpressions: [{ key: 'env', operator: 'In', values: ['prod'] }] },
    }),
    conns: [
      [c('other/client', 'app/web', 80), false],
      [c('app/client', 'app/web', 80), false],
    ],
  },
]);

table('AND within a peer, OR across peers', [
  {
    name: 'one peer with both selectors: namespace AND pod',
    policies: fromPeer({ namespaceSelector: { matchLabels: { team: 'b' } }, podSelector: web }),
    conns: [
      [c('other/web', 'app/web', 80), true],
      [c('other/client', 'app/web', 80), false],
      [c('app/client', 'app/web', 80), false],
    ],
  },
  {
    name: 'two peers: namespace OR pod (the pod one in the policy namespace)',
    policies: [
      pol('app', 'p', {
        podSelector: web,
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'b' } } }, { podSelector: client }] }],
      }),
    ],
    conns: [
      [c('other/web', 'app/web', 80), true],
      [c('other/client', 'app/web', 80), true],
      [c('app/client', 'app/web', 80), true],
      [c('app/db', 'app/web', 80), false],
      [c('ops/tool', 'app/web', 80), false],
    ],
  },
  {
    name: 'egress: one peer with both selectors',
    policies: [
      pol('app', 'p', {
        podSelector: client,
        policyTypes: ['Egress'],
        egress: [{ to: [{ namespaceSelector: { matchLabels: { team: 'b' } }, podSelector: web }] }],
      }),
    ],
    conns: [
      [c('app/client', 'other/web', 80), true],
      [c('app/client', 'other/client', 80), false],
      [c('app/client', 'app/web', 80), false],
    ],
  },
]);

table('missing or empty from/to/ports mean everything', [
  {
    name: 'ingress [{}]: every source, port and protocol',
    policies: [pol('app', 'p', { podSelector: web, ingress: [{}] })],
    conns: [
      [c('ops/tool', 'app/web', 80), true],
      [c('203.0.113.9', 'app/web', 12345), true],
      [c('other/client', 'app/web', 53, 'UDP'), true],
      [c('other/client', 'app/web', 9, 'SCTP'), true],
    ],
  },
  {
    name: 'from: [] and ports: [] are the same as missing',
    policies: [pol('app', 'p', { podSelector: web, ingress: [{ from: [], ports: [] }] })],
    conns: [
      [c('ops/tool', 'app/web', 80), true],
      [c('203.0.113.9', 'app/web', 1, 'UDP'), true],
    ],
  },
  {
    name: 'ports only: those ports from anywhere, any address included',
    policies: [pol('app', 'p', { podSelector: web, ingress: [{ ports: [{ port: 80 }] }] })],
    conns: [
      [c('203.0.113.9', 'app/web', 80), true],
      [c('ops/tool', 'app/web', 80), true],
      [c('ops/tool', 'app/web', 9090), false],
    ],
  },
  {
    name: 'from only: every port and protocol from those peers',
    policies: [pol('app', 'p', { podSelector: web, ingress: [{ from: [{ podSelector: client }] }] })],
    conns: [
      [c('app/client', 'app/web', 9090), true],
      [c('app/client', 'app/web', 53, 'UDP'), true],
      [c('app/client', 'app/web', 1, 'SCTP'), true],
      [c('other/client', 'app/web', 80), false],
    ],
  },
  {
    name: 'egress [{}]: anywhere, external addresses included',
    policies: [pol('app', 'p', { podSelector: client, policyTypes: ['Egress'], egress: [{}] })],
    conns: [
      [c('app/client', '8.8.8.8', 53, 'UDP'), true],
      [c('app/client', '2001:db8::53', 53, 'UDP'), true],
    ],
  },
]);

table('ingress [{}] allows all, ingress [] denies all (and egress alike)', [
  {
    name: 'ingress: [{}]',
    policies: [pol('app', 'p', { podSelector: web, ingress: [{}] })],
    conns: [[c('ops/tool', 'app/web', 80), true]],
  },
  {
    name: 'ingress: []',
    policies: [pol('app', 'p', { podSelector: web, ingress: [] })],
    conns: [[c('app/client', 'app/web', 80), false]],
  },
  {
    name: 'egress: [{}]',
    policies: [pol('app', 'p', { podSelector: client, policyTypes: ['Egress'], egress: [{}] })],
    conns: [[c('app/client', 'ops/tool', 80), true]],
  },
  {
    name: 'egress: []',
    policies: [pol('app', 'p', { podSelector: client, policyTypes: ['Egress'], egress: [] })],
    conns: [[c('app/client', 'app/web', 80), false]],
  },
]);

const ipBlock = (cidr: string, except?: string[]) => ({ ipBlock: except === undefined ? { cidr } : { cidr, except } });

table('ipBlock', [
  {
    name: 'IPv4 cidr with except, pod addresses included',
    policies: fromPeer(ipBlock('10.0.0.0/16', ['10.0.2.0/24'])),
    conns: [
      [c('app/client', 'app/web', 80), true],
      [c('ops/tool', 'app/web', 80), true],
      [c('10.0.9.9', 'app/web', 80), true],
      [c('other/client', 'app/web', 80), false],
      [c('10.0.2.77', 'app/web', 80), false],
      [c('10.1.0.1', 'app/web', 80), false],
    ],
  },
  {
    name: 'an IPv4 block never matches IPv6 traffic of a dual-stack pod',
    policies: fromPeer(ipBlock('10.0.0.0/8')),
    conns: [
      [c('app/client', 'app/web', 80, 'TCP', 4), true],
      [c('app/client', 'app/web', 80, 'TCP', 6), false],
      [c('fd00::1:3', 'app/web', 80), false],
    ],
  },
  {
    name: 'IPv6 cidr with except',
    policies: fromPeer(ipBlock('fd00::/16', ['fd00:0:0:0:0:0:2:0/112'])),
    conns: [
      [c('app/client', 'app/web', 80, 'TCP', 6), true],
      [c('fd00::1:77', 'app/web', 80), true],
      [c('other/client', 'app/web', 80, 'TCP', 6), false],
      [c('fd00::2:5', 'app/web', 80), false],
      [c('2001:db8::1', 'app/web', 80), false],
      [c('app/client', 'app/web', 80, 'TCP', 4), false],
    ],
  },
  {
    name: '0.0.0.0/0 is every IPv4 address and no IPv6 one',
    policies: fromPeer(ipBlock('0.0.0.0/0')),
    conns: [
      [c('203.0.113.9', 'app/web', 80), true],
      [c('other/client', 'app/web', 80, 'TCP', 4), true],
      [c('other/client', 'app/web', 80, 'TCP', 6), false],
      [c('2001:db8::1', 'app/web', 80), false],
    ],
  },
  {
    name: 'one block per family for dual-stack peers',
    policies: [pol('app', 'p', { podSelector: web, ingress: [{ from: [ipBlock('10.0.1.0/24'), ipBlock('fd00::1:0/112')] }] })],
    conns: [
      [c('app/client', 'app/web', 80, 'TCP', 4), true],
      [c('app/client', 'app/web', 80, 'TCP', 6), true],
      [c('other/client', 'app/web', 80, 'TCP', 4), false],
      [c('other/client', 'app/web', 80, 'TCP', 6), false],
    ],
  },
  {
    name: 'egress to a block: pods and plain addresses in it',
    policies: [pol('app', 'p', { podSelector: client, policyTypes: ['Egress'], egress: [{ to: [ipBlock('10.0.1.0/24')] }] })],
    conns: [
      [c('app/client', 'app/web', 80), true],
      [c('app/client', '10.0.1.200', 80), true],
      [c('app/client', 'other/client', 80), false],
      [c('app/client', 'app/web', 80, 'TCP', 6), false],
    ],
  },
  {
    name: 'a pod without an address of the family matches no pod peer of it',
    policies: fromPeer({ namespaceSelector: { matchLabels: { team: 'b' } } }),
    conns: [
      [c('other/web', 'app/web', 80, 'TCP', 4), true],
      [c('other/web', 'app/web', 80, 'TCP', 6), false],
      [c('other/client', 'app/web', 80, 'TCP', 6), true],
    ],
  },
]);

table('protocols', [
  {
    name: 'SCTP matches SCTP only',
    policies: [pol('app', 'p', { podSelector: db, ingress: [{ ports: [{ protocol: 'SCTP', port: 3868 }] }] })],
    conns: [
      [c('app/client', 'app/db', 3868, 'SCTP'), true],
      [c('app/client', 'app/db', 3868, 'TCP'), false],
      [c('app/client', 'app/db', 3868, 'UDP'), false],
    ],
  },
  {
    name: 'a missing protocol is TCP',
    policies: [pol('app', 'p', { podSelector: web, ingress: [{ ports: [{ port: 80 }] }] })],
    conns: [
      [c('app/client', 'app/web', 80, 'TCP'), true],
      [c('app/client', 'app/web', 80, 'UDP'), false],
      [c('app/client', 'app/web', 80, 'SCTP'), false],
    ],
  },
  {
    name: 'UDP only',
    policies: [pol('app', 'p', { podSelector: web, ingress: [{ ports: [{ protocol: 'UDP', port: 53 }] }] })],
    conns: [
      [c('app/client', 'app/web', 53, 'UDP'), true],
      [c('app/client', 'app/web', 53, 'TCP'), false],
    ],
  },
  {
    name: 'a protocol without a port: every port of that protocol',
    policies: [pol('app', 'p', { podSelector: web, ingress: [{ ports: [{ protocol: 'UDP' }] }] })],
    conns: [
      [c('app/client', 'app/web', 1, 'UDP'), true],
      [c('app/client', 'app/web', 65535, 'UDP'), true],
      [c('app/client', 'app/web', 53, 'TCP'), false],
    ],
  },
  {
    name: 'the same port on two protocols',
    policies: [
      pol('app', 'p', {
        podSelector: web,
        ingress: [
          {
            ports: [
              { protocol: 'TCP', port: 53 },
              { protocol: 'UDP', port: 53 },
            ],
          },
        ],
      }),
    ],
    conns: [
      [c('app/client', 'app/web', 53, 'TCP'), true],
      [c('app/client', 'app/web', 53, 'UDP'), true],
      [c('app/client', 'app/web', 53, 'SCTP'), false],
    ],
  },
]);

const webOrDb = { matchExpressions: [{ key: 'app', operator: 'In', values: ['web', 'db'] }] };

table('ports: numbers, ranges, named ports', [
  {
    name: 'a single port',
    policies: [pol('app', 'p', { podSelector: web, ingress: [{ ports: [{ port: 80 }] }] })],
    conns: [
      [c('app/client', 'app/web', 80), true],
      [c('app/client', 'app/web', 81), false],
      [c('app/client', 'app/web', 79), false],
    ],
  },
  {
    name: 'port..endPort inclusive',
    policies: [pol('app', 'p', { podSelector: web, ingress: [{ ports: [{ port: 8000, endPort: 8100 }] }] })],
    conns: [
      [c('app/client', 'app/web', 7999), false],
      [c('app/client', 'app/web', 8000), true],
      [c('app/client', 'app/web', 8050), true],
      [c('app/client', 'app/web', 8100), true],
      [c('app/client', 'app/web', 8101), false],
      [c('app/client', 'app/web', 8050, 'UDP'), false],
    ],
  },
  {
    name: 'ingress named port resolves on each target: http is 80 on web, 8080 on db',
    policies: [pol('app', 'p', { podSelector: webOrDb, ingress: [{ ports: [{ port: 'http' }] }] })],
    conns: [
      [c('app/client', 'app/web', 80), true],
      [c('app/client', 'app/web', 8080), false],
      [c('app/client', 'app/db', 8080), true],
      [c('app/client', 'app/db', 80), false],
    ],
  },
  {
    name: 'egress named port resolves on the destination pod; an address has no names',
    policies: [pol('app', 'p', { podSelector: client, policyTypes: ['Egress'], egress: [{ ports: [{ port: 'http' }] }] })],
    conns: [
      [c('app/client', 'app/web', 80), true],
      [c('app/client', 'app/db', 8080), true],
      [c('app/client', 'app/db', 80), false],
      [c('app/client', 'other/web', 80), true],
      [c('app/client', 'ops/tool', 80), false],
      [c('app/client', '203.0.113.9', 80), false],
      [c('app/client', 'app/hostnet', 80), false],
    ],
  },
  {
    name: 'a named port nobody serves allows nothing',
    policies: [pol('app', 'p', { podSelector: webOrDb, ingress: [{ ports: [{ port: 'nope' }] }] })],
    conns: [
      [c('app/client', 'app/web', 80), false],
      [c('app/client', 'app/db', 8080), false],
    ],
  },
  {
    name: "a named port needs the container port's protocol",
    policies: [
      pol('app', 'p', {
        podSelector: web,
        ingress: [{ ports: [{ port: 'dns', protocol: 'TCP' }] }, { ports: [{ port: 'metrics' }] }],
      }),
    ],
    conns: [
      [c('app/client', 'app/web', 53, 'TCP'), false],
      [c('app/client', 'app/web', 53, 'UDP'), false],
      [c('app/client', 'app/web', 9090), true],
      [c('app/client', 'app/web', 80), false],
    ],
  },
  {
    name: 'a named UDP port with protocol UDP',
    policies: [pol('app', 'p', { podSelector: web, ingress: [{ ports: [{ port: 'dns', protocol: 'UDP' }] }] })],
    conns: [
      [c('app/client', 'app/web', 53, 'UDP'), true],
      [c('app/client', 'app/web', 53, 'TCP'), false],
    ],
  },
]);

table('inactive pods (hostNetwork, finished, no IP) are neither targets nor peers', [
  {
    name: 'not targets: deny-all in app does not touch them',
    policies: [pol('app', 'deny-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] })],
    conns: [
      [c('app/hostnet', 'other/client', 80), true],
      [c('other/client', 'app/hostnet', 80), true],
      [c('app/done', 'other/client', 80), true],
      [c('other/client', 'app/done', 80), true],
      [c('app/client', 'other/client', 80), false],
    ],
  },
  {
    name: 'not pod peers, even with matching labels',
    policies: [pol('app', 'p', { podSelector: db, ingress: [{ from: [{ podSelector: client }] }] })],
    conns: [
      [c('app/client', 'app/db', 8080), true],
      [c('app/done', 'app/db', 8080), false],
      [c('app/hostnet', 'app/db', 8080), false],
      [c('app/pending', 'app/db', 8080), false],
    ],
  },
  {
    name: 'their addresses still match ipBlocks',
    policies: [pol('app', 'p', { podSelector: db, ingress: [{ from: [ipBlock('192.168.0.1/32'), ipBlock('10.0.1.9/32')] }] })],
    conns: [
      [c('app/hostnet', 'app/db', 8080), true],
      [c('app/done', 'app/db', 8080), true],
      [c('app/client', 'app/db', 8080), false],
    ],
  },
]);

table('traffic from the destination pod’s own node is allowed at ingress', [
  {
    name: 'deny-all ingress in app',
    policies: [pol('app', 'deny-all', { podSelector: {}, policyTypes: ['Ingress'] })],
    conns: [
      [c('192.168.0.1', 'app/web', 80), true],
      [c('192.168.0.1', 'app/db', 8080), false],
      [c('192.168.0.2', 'app/db', 8080), true],
      [c('fd00:ffff::1', 'app/web', 80), true],
      [c('fd00:ffff::1', 'app/db', 80), false],
      [c('app/hostnet', 'app/web', 80), true],
      [c('app/hostnet', 'app/db', 8080), false],
      [c('app/client', 'app/web', 80), false],
    ],
  },
  {
    name: 'egress to the node is not exempt',
    policies: [pol('app', 'deny-out', { podSelector: {}, policyTypes: ['Egress'] })],
    conns: [[c('app/web', '192.168.0.1', 10250), false]],
  },
]);

describe('--allow-pod-to-node: egress to the source pod’s own node', () => {
  const denyOut = stateWith([pol('app', 'deny-out', { podSelector: {}, policyTypes: ['Egress', 'Ingress'] })]);
  const judgeWith = (allowPodToNode: boolean, conn: Conn) =>
    verdict(denyOut, endpoint(denyOut, conn.from), endpoint(denyOut, conn.to), conn.protocol ?? 'TCP', conn.port, {
      allowPodToNode,
      ...(conn.family === undefined ? {} : { family: conn.family }),
    });

  test('off (the default): judged like any other egress', () => {
    for (const conn of [c('app/web', '192.168.0.1', 10250), c('app/web', 'fd00:ffff::1', 10250)]) {
      assert.equal(judge(denyOut, conn).allowed, false, show(conn));
      assert.equal(judgeWith(false, conn).allowed, false, show(conn));
    }
  });

  test('on: every address of its own node (both families, any port and protocol), nothing else', () => {
    const rows: [Conn, boolean][] = [
      [c('app/web', '192.168.0.1', 10250), true],
      [c('app/web', 'fd00:ffff::1', 22), true],
      [c('app/web', '192.168.0.1', 53, 'UDP'), true],
      [c('app/client', '192.168.0.1', 10250), true],
      // node-2's address, from a pod of node-1; and from node-2's own pod.
      [c('app/web', '192.168.0.2', 10250), false],
      [c('app/db', '192.168.0.2', 10250), true],
      [c('app/db', '192.168.0.1', 10250), false],
      // A hostNetwork pod of the same node listens on the node's address: that is the node.
      [c('app/web', 'app/hostnet', 80), true],
      // Not an address of any node.
      [c('app/web', '10.0.1.3', 80), false],
      [c('app/web', 'app/client', 80), false],
    ];
    const wrong = rows.filter(([conn, want]) => judgeWith(true, conn).allowed !== want).map(([conn]) => show(conn));
    assert.deepEqual(wrong, []);
    const v = judgeWith(true, c('app/web', '192.168.0.1', 10250));
    assert.equal(v.egress.isolated, true);
    assert.deepEqual(v.egress.policies, ['app/deny-out']);
    assert.match(v.egress.reason, /192\.168\.0\.1 is an address of app\/web's node node-1: .*--allow-pod-to-node/);
  });

  test('ingress is not changed by it: a pod’s own node reaches it either way, other pods do not', () => {
    assert.equal(judgeWith(true, c('app/client', 'app/web', 80)).allowed, false);
    assert.equal(judgeWith(true, c('192.168.0.1', 'app/web', 80)).allowed, true);
  });
});

/** State where policy `name` has its rules replaced (typed, bypassing the normalizer). */
function withRules(s: ClusterState, name: string, ingress: NetworkPolicy['ingress']): ClusterState {
  return { ...s, policies: s.policies.map((p) => (p.name === name ? { ...p, ingress } : p)) };
}

describe('invalid rules allow nothing; the other rules still do', () => {
  test('from raw objects: endPort < port makes that rule invalid', () => {
    const { state, errors } = buildState([
      ...BASE,
      pol('app', 'p', { podSelector: web, ingress: [{ ports: [{ port: 9000, endPort: 8000 }] }, { ports: [{ port: 80 }] }] }),
    ]);
    assert.equal(errors.length, 1, 'one validation error');
    const v = (port: number) => judge(state, c('app/client', 'app/web', port));
    assert.equal(v(80).allowed, true);
    assert.deepEqual(v(80).ingress.allowedBy, [
      { policy: 'app/p', direction: 'ingress', rule: 1, kind: 'NetworkPolicy', description: 'app/p ingress[1]' },
    ]);
    assert.equal(v(8500).allowed, false);
    assert.equal(v(9000).allowed, false);
    assert.match(v(8500).ingress.reason, /1 invalid rule allows nothing/);
  });

  test('typed: an invalid rule shaped like allow-all still allows nothing', () => {
    const s = withRules(stateWith([pol('app', 'p', { podSelector: web, ingress: [{}] })]), 'p', [
      { peers: undefined, ports: undefined, invalid: true },
      { peers: undefined, ports: [{ protocol: 'TCP', port: 80, endPort: undefined }], invalid: false },
    ]);
    assert.equal(judge(s, c('app/client', 'app/web', 80)).allowed, true);
    assert.equal(judge(s, c('app/client', 'app/web', 81)).allowed, false);
    const only = withRules(s, 'p', [{ peers: undefined, ports: undefined, invalid: true }]);
    const v = judge(only, c('app/client', 'app/web', 80));
    assert.equal(v.allowed, false);
    assert.deepEqual(v.ingress.allowedBy, []);
    assert.match(v.ingress.reason, /none of its ingress rules is valid/);
  });

  test('an invalid podSelector isolates the whole namespace and allows nothing', () => {
    const { state, errors } = buildState([
      ...BASE,
      pol('app', 'p', { podSelector: { matchExpressions: [{ key: 'app', operator: 'Bogus', values: ['x'] }] }, ingress: [{}] }),
    ]);
    assert.ok(errors.length > 0);
    assert.equal(judge(state, c('app/client', 'app/web', 80)).allowed, false);
    assert.equal(judge(state, c('other/client', 'app/db', 8080)).allowed, false);
    assert.equal(judge(state, c('app/client', 'other/web', 80)).allowed, true, 'other namespaces and egress are untouched');
  });
});

describe('family and endpoints', () => {
  const s = stateWith([pol('app', 'p', { podSelector: web, ingress: [{ from: [{ podSelector: client }] }] })]);

  test('the family defaults to that of an IP endpoint, else 4', () => {
    assert.equal(verdict(s, endpoint(s, 'fd00::9'), endpoint(s, 'app/web'), 'TCP', 80).family, 6);
    assert.equal(verdict(s, endpoint(s, 'app/client'), endpoint(s, 'app/web'), 'TCP', 80).family, 4);
    assert.equal(verdict(s, endpoint(s, 'app/client'), endpoint(s, 'app/web'), 'TCP', 80, { family: 6 }).family, 6);
  });

  test('an IP endpoint of the other family matches no ipBlock of this one', () => {
    const t = stateWith(fromPeer(ipBlock('10.0.0.0/8')));
    assert.equal(verdict(t, endpoint(t, '10.1.1.1'), endpoint(t, 'app/web'), 'TCP', 80, { family: 6 }).allowed, false);
    assert.equal(verdict(t, endpoint(t, '10.1.1.1'), endpoint(t, 'app/web'), 'TCP', 80).allowed, true);
  });

  test('verdict fields echo the question', () => {
    const v = verdict(s, endpoint(s, 'app/client'), endpoint(s, 'app/web'), 'UDP', 53);
    assert.deepEqual([v.protocol, v.port, v.family, v.allowed], ['UDP', 53, 4, true]);
    assert.equal(v.allowed, v.egress.allowed && v.ingress.allowed);
  });
});

describe('reasons', () => {
  const s = stateWith([
    pol('app', 'deny', { podSelector: {} }),
    pol('app', 'web-80', { podSelector: web, ingress: [{ from: [{ podSelector: client }], ports: [{ port: 80 }] }] }),
  ]);
  const cases: [Conn, 'egress' | 'ingress', RegExp][] = [
    [c('app/client', 'app/web', 80), 'egress', /no policy selects app\/client for egress/],
    [c('app/client', 'app/web', 80), 'ingress', /allowed by app\/web-80 ingress\[0\]/],
    [
      c('app/client', 'app/web', 8080),
      'ingress',
      /isolated for ingress by app\/deny and app\/web-80.*port 8080\/TCP is outside every rule's ports/,
    ],
    [c('ops/tool', 'app/web', 80), 'ingress', /ops\/tool matches no rule's from peers/],
    [c('ops/tool', 'app/web', 8080), 'ingress', /neither ops\/tool nor port 8080\/TCP/],
    [c('app/client', 'app/db', 80), 'ingress', /isolated for ingress by app\/deny; its ingress rules are empty \(deny all\)/],
    [c('203.0.113.9', 'app/web', 80), 'egress', /the source 203\.0\.113\.9 is not a pod/],
    [c('app/hostnet', 'app/db', 80), 'egress', /app\/hostnet is a hostNetwork pod/],
    [c('192.168.0.1', 'app/web', 80), 'ingress', /192\.168\.0\.1 is an address of app\/web's node node-1/],
    [c('other/web', 'app/web', 80, 'TCP', 6), 'ingress', /other\/web \(it has no IPv6 address\)/],
  ];
  for (const [conn, dir, re] of cases) {
    test(`${show(conn)} ${dir}`, () => assert.match(judge(s, conn)[dir].reason, re));
  }
});

test('a few thousand pods: a full column of verdicts', () => {
  const extra: RawObject[] = [];
  for (let i = 0; i < 3000; i++) {
    extra.push({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `p${i}`, namespace: i % 2 === 0 ? 'app' : 'other', labels: { app: i % 3 === 0 ? 'client' : 'batch' } },
      spec: { nodeName: 'node-2', containers: [] },
      status: { phase: 'Running', podIP: `10.9.${Math.floor(i / 250)}.${i % 250}` },
    });
  }
  const s = stateWith(
    [
      pol('app', 'p', {
        podSelector: web,
        ingress: [
          { from: [{ podSelector: client }, { namespaceSelector: { matchLabels: { team: 'b' } }, podSelector: client }] },
        ],
      }),
    ],
    extra,
  );
  let allowed = 0;
  for (const p of s.pods) if (verdict(s, { kind: 'pod', pod: p }, endpoint(s, 'app/web'), 'TCP', 80).allowed) allowed++;
  // app/client, other/client, the 1000 p<i> labelled client (both namespaces match),
  // and app/hostnet, whose address is app/web's node's.
  assert.equal(allowed, 2 + 1000 + 1);
});
