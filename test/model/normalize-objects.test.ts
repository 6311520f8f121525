import { test } from 'node:test';
import assert from 'node:assert/strict';
import { normalizeNamespace, normalizeNode, normalizePod } from '../../src/model/normalize.ts';
import { formatValidationError, isActivePod } from '../../src/model/types.ts';
import type { Pod } from '../../src/model/types.ts';

function pod(
  spec: Record<string, unknown>,
  status: Record<string, unknown>,
  metadata: Record<string, unknown> = { name: 'p', namespace: 'ns' },
): Record<string, unknown> {
  return { apiVersion: 'v1', kind: 'Pod', metadata, spec, status };
}

function okPod(obj: unknown): { pod: Pod; errors: string[] } {
  const r = normalizePod(obj);
  assert.ok(r.ok, JSON.stringify(r.errors));
  return { pod: r.value, errors: r.errors.map(formatValidationError) };
}

test('pod basics: labels, node, hostNetwork, phase, default namespace', () => {
  const { pod: p, errors } = okPod(
    pod(
      { nodeName: 'node-1', hostNetwork: true },
      { phase: 'Running', podIP: '10.0.0.1' },
      { name: 'p', labels: { b: '2', a: '1' } },
    ),
  );
  assert.deepEqual(errors, []);
  assert.deepEqual(p, {
    namespace: 'default',
    name: 'p',
    labels: { a: '1', b: '2' },
    nodeName: 'node-1',
    hostNetwork: true,
    phase: 'Running',
    ips: ['10.0.0.1'],
    ports: [],
  });
  assert.deepEqual(Object.keys(p.labels), ['a', 'b']);
  assert.equal(isActivePod(p), false, 'hostNetwork pods are never active');
});

test('pod phases and activity', () => {
  const cases: [string | undefined, boolean][] = [
    ['Running', true],
    ['Pending', true],
    [undefined, true],
    ['Unknown', true],
    ['Succeeded', false],
    ['Failed', false],
  ];
  for (const [phase, active] of cases) {
    const { pod: p } = okPod(pod({}, phase === undefined ? { podIP: '10.0.0.1' } : { phase, podIP: '10.0.0.1' }));
    assert.equal(p.phase, phase);
    assert.equal(isActivePod(p), active, String(phase));
  }
  const { pod: noIP } = okPod(pod({}, { phase: 'Pending' }));
  assert.deepEqual(noIP.ips, []);
  assert.equal(isActivePod(noIP), false);
});

test('pod IPs: podIPs first, podIP fallback, canonical, one per family, v4 first', () => {
  const cases: { name: string; status: Record<string, unknown>; ips: string[]; errors?: string[] }[] = [
    {
      name: 'dual stack, v6 listed first',
      status: { podIP: 'fd00::1', podIPs: [{ ip: 'FD00:0::1' }, { ip: '10.0.0.1' }] },
      ips: ['10.0.0.1', 'fd00::1'],
    },
    { name: 'podIP fallback', status: { podIP: '10.0.0.2' }, ips: ['10.0.0.2'] },
    { name: 'empty podIPs falls back', status: { podIP: '10.0.0.2', podIPs: [] }, ips: ['10.0.0.2'] },
    { name: 'podIPs wins over podIP', status: { podIP: '10.0.0.9', podIPs: [{ ip: '10.0.0.3' }] }, ips: ['10.0.0.3'] },
    { name: 'empty podIP', status: { podIP: '' }, ips: [] },
    {
      name: 'invalid IP dropped',
      status: { podIPs: [{ ip: '10.0.0.300' }, { ip: 'fd00::2' }] },
      ips: ['fd00::2'],
      errors: ['ns/p status.podIPs[0].ip: must be a valid IP address, not "10.0.0.300"'],
    },
    {
      name: 'invalid podIP',
      status: { podIP: 'nope' },
      ips: [],
      errors: ['ns/p status.podIP: must be a valid IP address, not "nope"'],
    },
    {
      name: 'non-string ip',
      status: { podIPs: [{ ip: 10 }] },
      ips: [],
      errors: ['ns/p status.podIPs[0].ip: must be a valid IP address, not 10'],
    },
    {
      name: 'two of a family: first kept',
      status: { podIPs: [{ ip: '10.0.0.1' }, { ip: '10.0.0.2' }] },
      ips: ['10.0.0.1'],
      errors: ['ns/p status.podIPs[1].ip: may not have more than one IPv4 address'],
    },
    {
      name: 'podIPs not a list',
      status: { podIPs: '10.0.0.1', podIP: '10.0.0.1' },
      ips: ['10.0.0.1'],
      errors: ['ns/p status.podIPs: must be a list, not "10.0.0.1"'],
    },
  ];
  for (const c of cases) {
    const { pod: p, errors } = okPod(pod({}, c.status));
    assert.deepEqual(p.ips, c.ips, c.name);
    assert.deepEqual(errors, c.errors ?? [], c.name);
  }
});

test('container ports: containers and sidecars, defaults, sorting, errors', () => {
  const spec = {
    initContainers: [
      { name: 'init', ports: [{ name: 'ignored', containerPort: 1 }] },
      { name: 'sidecar', restartPolicy: 'Always', ports: [{ name: 'admin', containerPort: 15000 }] },
    ],
    containers: [
      {
        name: 'web',
        ports: [
          { name: 'http', containerPort: 8080 },
          { containerPort: 9000, protocol: 'UDP' },
          { name: 'dns', containerPort: 53, protocol: 'UDP' },
          { name: 'dns', containerPort: 53, protocol: 'TCP' },
        ],
      },
      {
        name: 'bad',
        ports: [
          { name: 'x', containerPort: 0 },
          { name: 'y', containerPort: 80, protocol: 'ICMP' },
          { name: 'Bad_Name', containerPort: 81 },
          { name: 'z' },
          'junk',
        ],
      },
      { name: 'dup', ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }] },
    ],
  };
  const { pod: p, errors } = okPod(pod(spec, {}));
  assert.deepEqual(p.ports, [
    { name: undefined, port: 9000, protocol: 'UDP' },
    { name: 'admin', port: 15000, protocol: 'TCP' },
    { name: 'dns', port: 53, protocol: 'TCP' },
    { name: 'dns', port: 53, protocol: 'UDP' },
    { name: 'http', port: 8080, protocol: 'TCP' },
  ]);
  assert.deepEqual(errors, [
    'ns/p spec.containers[1].ports[0].containerPort: must be between 1 and 65535, inclusive (got 0)',
    'ns/p spec.containers[1].ports[1].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP"',
    'ns/p spec.containers[1].ports[2].name: must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)',
    'ns/p spec.containers[1].ports[3].containerPort: Required value',
    'ns/p spec.containers[1].ports[4]: must be an object, not "junk"',
  ]);
});

test('pod garbage never throws and keeps what it can', () => {
  const cases: { name: string; obj: unknown; ok: boolean; errors: string[] }[] = [
    { name: 'minimal', obj: pod({}, {}, { name: 'p' }), ok: true, errors: [] },
    {
      name: 'no name',
      obj: { kind: 'Pod', metadata: {} },
      ok: false,
      errors: ['default/<unnamed> metadata.name: Required value'],
    },
    {
      name: 'wrong kind',
      obj: { kind: 'Service', metadata: { name: 's' } },
      ok: false,
      errors: ['default/s kind: must be Pod, not "Service"'],
    },
    {
      name: 'namespace not a string',
      obj: { kind: 'Pod', metadata: { name: 'p', namespace: 3 } },
      ok: false,
      errors: ['default/<unnamed> metadata.namespace: must be a string, not 3'],
    },
    {
      name: 'non-string label dropped',
      obj: { kind: 'Pod', metadata: { name: 'p', labels: { a: 1, b: 'x' } } },
      ok: true,
      errors: ['default/p metadata.labels: value of "a" must be a string, not 1'],
    },
    {
      name: 'hostNetwork not a boolean',
      obj: { kind: 'Pod', metadata: { name: 'p' }, spec: { hostNetwork: 'yes' } },
      ok: true,
      errors: ['default/p spec.hostNetwork: must be a boolean, not "yes"'],
    },
    {
      name: 'spec not an object',
      obj: { kind: 'Pod', metadata: { name: 'p' }, spec: 5, status: [] },
      ok: true,
      errors: ['default/p spec: must be an object, not 5', 'default/p status: must be an object, not a list'],
    },
  ];
  for (const c of cases) {
    const r = normalizePod(c.obj);
    assert.equal(r.ok, c.ok, c.name);
    assert.deepEqual(r.errors.map(formatValidationError), c.errors, c.name);
  }
  const r = normalizePod({ kind: 'Pod', metadata: { name: 'p', labels: { a: 1, b: 'x' } }, spec: { hostNetwork: 'yes' } });
  assert.ok(r.ok);
  assert.deepEqual(r.value.labels, { b: 'x' });
  assert.equal(r.value.hostNetwork, false);
});

test('label key "__proto__" is a plain (invalid, dropped) key, never a prototype', () => {
  const labels = JSON.parse('{"__proto__": "x", "ok": "y"}') as unknown;
  const r = normalizePod({ kind: 'Pod', metadata: { name: 'p', labels } });
  assert.ok(r.ok);
  assert.deepEqual(r.value.labels, { ok: 'y' });
  assert.equal(Object.getPrototypeOf(r.value.labels), Object.prototype);
});

test('namespaces always carry kubernetes.io/metadata.name', () => {
  const cases: { name: string; obj: unknown; labels: Record<string, string> }[] = [
    {
      name: 'no labels',
      obj: { kind: 'Namespace', metadata: { name: 'shop' } },
      labels: { 'kubernetes.io/metadata.name': 'shop' },
    },
    {
      name: 'labels kept and sorted',
      obj: { kind: 'Namespace', metadata: { name: 'shop', labels: { z: '1', team: 'a' } } },
      labels: { 'kubernetes.io/metadata.name': 'shop', team: 'a', z: '1' },
    },
    {
      name: 'wrong value overridden',
      obj: { kind: 'Namespace', metadata: { name: 'shop', labels: { 'kubernetes.io/metadata.name': 'other' } } },
      labels: { 'kubernetes.io/metadata.name': 'shop' },
    },
    {
      name: 'namespace field ignored (cluster-scoped)',
      obj: { kind: 'Namespace', metadata: { name: 'shop', namespace: 'x' } },
      labels: { 'kubernetes.io/metadata.name': 'shop' },
    },
  ];
  for (const c of cases) {
    const r = normalizeNamespace(c.obj);
    assert.ok(r.ok, c.name);
    assert.deepEqual(r.errors, [], c.name);
    assert.deepEqual(r.value, { name: 'shop', labels: c.labels }, c.name);
    assert.deepEqual(Object.keys(r.value.labels), Object.keys(c.labels).sort(), c.name);
  }
  const bad = normalizeNamespace({ kind: 'Namespace', metadata: { name: 'Shop.Prod' } });
  assert.ok(bad.ok);
  assert.equal(bad.errors[0]?.path, 'metadata.name');
  assert.equal(bad.errors[0]?.namespace, undefined);
  assert.equal(normalizeNamespace({ kind: 'Namespace', metadata: {} }).ok, false);
});

test('nodes: InternalIP/ExternalIP addresses, canonical, sorted, deduplicated', () => {
  const r = normalizeNode({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'node-1' },
    status: {
      addresses: [
        { type: 'Hostname', address: 'node-1' },
        { type: 'InternalIP', address: 'FD00::0011' },
        { type: 'ExternalIP', address: '203.0.113.7' },
        { type: 'InternalIP', address: '192.168.56.11' },
        { type: 'InternalDNS', address: 'node-1.internal' },
        { type: 'InternalIP', address: '192.168.56.11' },
        { type: 'InternalIP', address: 'bogus' },
      ],
    },
  });
  assert.ok(r.ok);
  assert.deepEqual(r.value, {
    name: 'node-1',
    addresses: ['192.168.56.11', '203.0.113.7', 'fd00::11'],
    internalIPs: ['192.168.56.11', 'fd00::11'],
  });
  assert.deepEqual(r.errors.map(formatValidationError), [
    'node-1 status.addresses[6].address: must be a valid IP address, not "bogus"',
  ]);
  const bare = normalizeNode({ kind: 'Node', metadata: { name: 'n' } });
  assert.ok(bare.ok);
  assert.deepEqual(bare.value, { name: 'n', addresses: [] });
});

test('nodes: podCIDRs from spec.podCIDRs, else spec.podCIDR; canonical, v4 first; bad ones reported', () => {
  const nodeWith = (spec: Record<string, unknown>): ReturnType<typeof normalizeNode> =>
    normalizeNode({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-1' }, spec });
  const cases: { name: string; spec: Record<string, unknown>; podCIDRs: string[] | undefined; errors?: string[] }[] = [
    {
      name: 'dual stack, v6 listed first',
      spec: { podCIDR: 'fd00:1::/64', podCIDRs: ['FD00:1:0::/64', '10.244.1.0/24'] },
      podCIDRs: ['10.244.1.0/24', 'fd00:1::/64'],
    },
    { name: 'podCIDR only (older clusters)', spec: { podCIDR: '10.244.2.0/24' }, podCIDRs: ['10.244.2.0/24'] },
    { name: 'empty podCIDRs falls back', spec: { podCIDR: '10.244.2.0/24', podCIDRs: [] }, podCIDRs: ['10.244.2.0/24'] },
    {
      name: 'podCIDRs wins over podCIDR',
      spec: { podCIDR: '10.9.0.0/24', podCIDRs: ['10.244.3.0/24'] },
      podCIDRs: ['10.244.3.0/24'],
    },
    {
      name: 'host bits cleared, duplicates merged',
      spec: { podCIDRs: ['10.244.4.7/24', '10.244.4.0/24'] },
      podCIDRs: ['10.244.4.0/24'],
    },
    { name: 'none: the field is absent', spec: {}, podCIDRs: undefined },
    { name: 'empty podCIDR', spec: { podCIDR: '' }, podCIDRs: undefined },
    {
      name: 'invalid entries dropped and reported',
      spec: { podCIDRs: ['10.244.5.0/24', '10.244.5.1', 'bogus/8', 7, 'fd00::/129'] },
      podCIDRs: ['10.244.5.0/24'],
      errors: [
        'node-1 spec.podCIDRs[1]: must be a valid CIDR, not a bare address: "10.244.5.1"',
        'node-1 spec.podCIDRs[2]: must be a valid CIDR: bad address in "bogus/8"',
        'node-1 spec.podCIDRs[3]: must be a string, not 7',
        'node-1 spec.podCIDRs[4]: must be a valid CIDR: prefix length 129 too long for IPv6',
      ],
    },
    {
      name: 'invalid podCIDR',
      spec: { podCIDR: '10.0.0.0/33' },
      podCIDRs: undefined,
      errors: ['node-1 spec.podCIDR: must be a valid CIDR: prefix length 33 too long for IPv4'],
    },
    {
      name: 'podCIDRs not a list',
      spec: { podCIDRs: '10.0.0.0/24' },
      podCIDRs: undefined,
      errors: ['node-1 spec.podCIDRs: must be a list, not "10.0.0.0/24"'],
    },
  ];
  for (const c of cases) {
    const r = nodeWith(c.spec);
    assert.ok(r.ok, c.name);
    assert.deepEqual(
      r.value,
      c.podCIDRs === undefined ? { name: 'node-1', addresses: [] } : { name: 'node-1', addresses: [], podCIDRs: c.podCIDRs },
      c.name,
    );
    assert.deepEqual(r.errors.map(formatValidationError), c.errors ?? [], c.name);
  }
});
