// Endpoint/port parsing and the text and JSON renderings of a verdict.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { explainJson, explainText, parseEndpoint, parsePortProto } from '../../src/policy/explain.ts';
import { verdict, type Endpoint } from '../../src/policy/verdict.ts';
import { pol, stateWith } from '../cases/fixture-cluster.ts';
import type { RawObject } from '../cases/raw.ts';

const web = { matchLabels: { app: 'web' } };
const client = { matchLabels: { app: 'client' } };

const state = stateWith(
  [
    pol('app', 'deny', { podSelector: {} }),
    pol('app', 'web-80', {
      podSelector: web,
      ingress: [{ ports: [{ port: 81 }] }, { from: [{ podSelector: client }], ports: [{ port: 80 }] }],
    }),
    pol('app', 'client-out', { podSelector: client, policyTypes: ['Egress'], egress: [{ ports: [{ port: 80 }] }] }),
  ],
  // A second pod that once had app/client's address and has finished.
  [
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'old', namespace: 'ops' },
      spec: { nodeName: 'node-1', containers: [] },
      status: { phase: 'Failed', podIP: '10.0.1.3' },
    } satisfies RawObject,
  ],
);

function ep(text: string): Endpoint {
  const r = parseEndpoint(state, text);
  assert.ok(r.ok, r.ok ? '' : r.error);
  return r.value;
}

describe('parseEndpoint', () => {
  const rows: [input: string, want: string][] = [
    ['app/web', 'pod app/web'],
    ['  app/web ', 'pod app/web'],
    ['10.0.1.1', 'pod app/web'],
    ['fd00:0:0:0:0:0:1:1', 'pod app/web'],
    ['10.0.1.3', 'pod app/client'], // the running pod wins over the finished one
    ['10.0.1.9', 'pod app/done'], // only a finished pod has it: still named
    ['192.168.0.1', 'pod app/hostnet'],
    ['203.0.113.9', 'ip 203.0.113.9'],
    ['2001:DB8::1', 'ip 2001:db8::1'],
    ['app/nope', 'error pod app/nope not found'],
    ['nons/web', 'error pod nons/web not found (no namespace nons)'],
    ['web', 'error "web" is neither NS/POD nor an IP address'],
    ['10.0.0.256', 'error "10.0.0.256" is neither NS/POD nor an IP address'],
    ['a/b/c', 'error "a/b/c" is neither NS/POD nor an IP address'],
  ];
  for (const [input, want] of rows) {
    test(JSON.stringify(input), () => {
      const r = parseEndpoint(state, input);
      const got = !r.ok
        ? `error ${r.error}`
        : r.value.kind === 'pod'
          ? `pod ${r.value.pod.namespace}/${r.value.pod.name}`
          : `ip ${r.value.ip}`;
      assert.equal(got, want);
    });
  }

  test('an address of several running pods is an error naming them', () => {
    const s = stateWith(
      [],
      [
        {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: 'twin', namespace: 'ops' },
          spec: { containers: [] },
          status: { phase: 'Running', podIP: '10.0.1.1' },
        },
      ],
    );
    const r = parseEndpoint(s, '10.0.1.1');
    assert.ok(!r.ok);
    assert.match(r.error, /several running pods \(app\/web, ops\/twin\)/);
  });
});

describe('parsePortProto', () => {
  const rows: [input: string, want: string][] = [
    ['80', '80/TCP'],
    ['53/udp', '53/UDP'],
    ['53/UDP', '53/UDP'],
    ['3868/Sctp', '3868/SCTP'],
    ['65535', '65535/TCP'],
    ['1/tcp', '1/TCP'],
    ['0', 'error port 0 is outside 1-65535'],
    ['65536', 'error port 65536 is outside 1-65535'],
    ['80/icmp', 'error unknown protocol "icmp": use TCP, UDP or SCTP'],
    ['http', 'error "http" is not PORT[/PROTO] (e.g. 80, 53/udp)'],
    ['80/', 'error "80/" is not PORT[/PROTO] (e.g. 80, 53/udp)'],
    ['-1', 'error "-1" is not PORT[/PROTO] (e.g. 80, 53/udp)'],
  ];
  for (const [input, want] of rows) {
    test(JSON.stringify(input), () => {
      const r = parsePortProto(input);
      assert.equal(r.ok ? `${r.value.port}/${r.value.protocol}` : `error ${r.error}`, want);
    });
  }
});

describe('explainText', () => {
  const text = (from: string, to: string, port: number) => {
    const f = ep(from);
    const t = ep(to);
    return explainText(verdict(state, f, t, 'TCP', port), f, t);
  };

  test('allowed: the answer first, then the deciding policies and rules of each side', () => {
    const out = text('app/client', 'app/web', 80);
    const lines = out.split('\n');
    assert.equal(lines[0], 'ALLOWED: app/client (10.0.1.3) -> app/web (10.0.1.1) on 80/TCP (IPv4)');
    assert.match(
      out,
      /egress at the source app\/client \(10\.0\.1\.3\): allowed\n {2}policies: app\/client-out\n.*allowed by app\/client-out egress\[0\]/,
    );
    assert.match(
      out,
      /ingress at the destination app\/web \(10\.0\.1\.1\): allowed\n {2}policies: app\/deny, app\/web-80\n.*allowed by app\/web-80 ingress\[1\]/,
    );
    assert.ok(out.indexOf('egress at') < out.indexOf('ingress at'));
  });

  test('denied at ingress: names the isolating policies and why no rule matched', () => {
    // ingress[0] takes anyone on 81, ingress[1] takes app=client on 80: neither takes ops/tool on 80.
    const out = text('ops/tool', 'app/web', 80);
    assert.match(
      out,
      /^DENIED: ops\/tool \(10\.0\.3\.1\) -> app\/web \(10\.0\.1\.1\) on 80\/TCP \(IPv4\)\ndenied by ingress at the destination\n/,
    );
    assert.match(out, /egress at the source ops\/tool \(10\.0\.3\.1\): allowed\n {2}policies: none \(not isolated\)/);
    assert.match(out, /ingress at the destination app\/web \(10\.0\.1\.1\): DENIED/);
    assert.match(
      out,
      /isolated for ingress by app\/deny and app\/web-80; no ingress rule matched both ops\/tool and port 80\/TCP/,
    );
  });

  test('denied on both sides: says so and names the port problem', () => {
    const out = text('app/client', 'app/web', 8080);
    assert.match(out, /^DENIED: .*\ndenied by egress at the source and ingress at the destination\n/);
    assert.match(
      out,
      /egress at the source app\/client \(10\.0\.1\.3\): DENIED\n {2}policies: app\/client-out\n {2}.*port 8080\/TCP is outside every rule's ports/,
    );
  });

  test('an address source and the node-local allowance', () => {
    const out = text('192.168.0.2', 'app/db', 5432);
    assert.match(out, /^ALLOWED: 192\.168\.0\.2 -> app\/db \(10\.0\.1\.2\) on 5432\/TCP/);
    assert.match(out, /the source 192\.168\.0\.2 is not a pod/);
    assert.match(out, /policies: app\/deny\n {2}192\.168\.0\.2 is an address of app\/db's node node-2/);
  });

  test('lists the allowing rules when the reason does not name them', () => {
    const s = stateWith([pol('app', 'all', { podSelector: web, ingress: [{}] })]);
    const f: Endpoint = { kind: 'ip', ip: '192.168.0.1' };
    const t = parseEndpoint(s, 'app/web');
    assert.ok(t.ok);
    const out = explainText(verdict(s, f, t.value, 'TCP', 80), f, t.value);
    assert.match(
      out,
      /node node-1.*\n {2}allowed by: app\/all ingress\[0\]|allowed by: app\/all ingress\[0\]\n {2}.*node node-1/,
    );
  });

  test('a pod without an address of the family says so', () => {
    const f = ep('other/web');
    const t = ep('app/web');
    const out = explainText(verdict(state, f, t, 'TCP', 80, { family: 6 }), f, t);
    assert.match(out, /other\/web \(no IPv6 address\) -> app\/web \(fd00::1:1\) on 80\/TCP \(IPv6\)/);
  });
});

describe('explainJson', () => {
  test('carries the answer, the endpoints and both directions as plain data', () => {
    const f = ep('app/client');
    const t = ep('app/web');
    const j = explainJson(verdict(state, f, t, 'TCP', 80), f, t);
    assert.deepEqual(JSON.parse(JSON.stringify(j)), {
      allowed: true,
      from: { kind: 'pod', namespace: 'app', name: 'client', ip: '10.0.1.3' },
      to: { kind: 'pod', namespace: 'app', name: 'web', ip: '10.0.1.1' },
      protocol: 'TCP',
      port: 80,
      family: 4,
      egress: {
        allowed: true,
        isolated: true,
        policies: ['app/client-out'],
        allowedBy: [
          {
            policy: 'app/client-out',
            direction: 'egress',
            rule: 0,
            kind: 'NetworkPolicy',
            description: 'app/client-out egress[0]',
          },
        ],
        reason: j.egress.reason,
        tier: 'networkpolicy',
        decidedBy: null,
        passed: [],
        clusterPolicies: [],
        notEnforced: [],
      },
      ingress: {
        allowed: true,
        isolated: true,
        policies: ['app/deny', 'app/web-80'],
        allowedBy: [
          { policy: 'app/web-80', direction: 'ingress', rule: 1, kind: 'NetworkPolicy', description: 'app/web-80 ingress[1]' },
        ],
        reason: j.ingress.reason,
        tier: 'networkpolicy',
        decidedBy: null,
        passed: [],
        clusterPolicies: [],
        notEnforced: [],
      },
    });
    assert.match(j.ingress.reason, /app\/web-80 ingress\[1\]/);
  });

  test('denied, with an address endpoint and a missing pod address as null', () => {
    const f: Endpoint = { kind: 'ip', ip: '2001:db8::1' };
    const t = ep('other/web');
    const j = explainJson(verdict(state, f, t, 'UDP', 53), f, t);
    assert.equal(j.family, 6);
    assert.deepEqual(j.from, { kind: 'ip', ip: '2001:db8::1' });
    assert.deepEqual(j.to, { kind: 'pod', namespace: 'other', name: 'web', ip: null });
    assert.equal(j.allowed, true, 'other/web is not isolated');

    const d = explainJson(verdict(state, ep('ops/tool'), ep('app/db'), 'TCP', 5432), ep('ops/tool'), ep('app/db'));
    assert.equal(d.allowed, false);
    assert.deepEqual(
      [d.ingress.allowed, d.ingress.isolated, d.ingress.policies, d.ingress.allowedBy],
      [false, true, ['app/deny'], []],
    );
    assert.deepEqual([d.egress.allowed, d.egress.isolated], [true, false]);
  });
});

describe('explainText with thousands of policies', () => {
  // 1000 policies select app/web; half of them allow port 80 from anywhere.
  const many = stateWith(
    Array.from({ length: 1000 }, (_, i) =>
      pol('app', `p-${String(i).padStart(4, '0')}`, {
        podSelector: web,
        ingress: i % 2 === 0 ? [{ ports: [{ port: 80 }] }] : [{ ports: [{ port: 81 }] }],
      }),
    ),
  );
  const f = parseEndpoint(many, 'app/client');
  const t = parseEndpoint(many, 'app/web');
  assert.ok(f.ok && t.ok);

  test('each line names at most 20 and says how many more; JSON keeps them all', () => {
    for (const port of [80, 8080]) {
      const v = verdict(many, f.value, t.value, 'TCP', port);
      const out = explainText(v, f.value, t.value);
      const ingress = out.slice(out.indexOf('\ningress at') + 1);
      const policiesLine = ingress.split('\n')[1] ?? '';
      assert.equal(policiesLine.match(/app\/p-/g)?.length, 20, policiesLine);
      assert.match(policiesLine, /app\/p-0019 and 980 more$/);
      for (const line of out.split('\n')) assert.ok((line.match(/app\/p-/g)?.length ?? 0) <= 40, line);
      assert.match(ingress, / and 980 more;/);
      assert.ok(out.length < 6000, `${out.length} characters`);
      assert.equal(explainJson(v, f.value, t.value).ingress.policies.length, 1000);
    }
  });
});
