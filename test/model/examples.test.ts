import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { loadManifests } from '../../src/model/load.ts';
import { buildState } from '../../src/model/normalize.ts';
import { formatValidationError, isActivePod } from '../../src/model/types.ts';

const root = (p: string): string => fileURLToPath(new URL(`../../${p}`, import.meta.url));

test('examples/ loads and validates with zero errors', async () => {
  const { objects, errors } = await loadManifests([root('examples')]);
  assert.deepEqual(errors, []);
  const built = buildState(objects);
  assert.deepEqual(built.errors.map(formatValidationError), []);
  const s = built.state;
  assert.deepEqual(
    s.nodes.map((n) => [n.name, n.addresses]),
    [
      ['node-1', ['192.168.56.11', 'fd00:56::11']],
      ['node-2', ['192.168.56.12', 'fd00:56::12']],
    ],
  );
  assert.deepEqual(
    s.namespaces.map((n) => n.name),
    ['kube-system', 'monitoring', 'payments', 'shop'],
  );
  // Pods on both nodes, dual-stack, in the node's pod CIDR.
  for (const p of s.pods.filter(isActivePod)) {
    const n = p.nodeName === 'node-1' ? 1 : 2;
    assert.equal(p.ips.length, 2, p.name);
    assert.ok(p.ips[0]?.startsWith(`10.244.${n}.`), `${p.name} ${p.ips[0]}`);
    assert.ok(p.ips[1]?.startsWith(`fd00:10:244:${n}::`), `${p.name} ${p.ips[1]}`);
  }
  assert.ok(s.pods.some((p) => p.nodeName === 'node-1') && s.pods.some((p) => p.nodeName === 'node-2'));
  // The features the examples are meant to show are all there.
  const rules = [...s.policies].flatMap((p) => [...p.ingress, ...p.egress]);
  const ports = rules.flatMap((r) => r.ports ?? []);
  const peers = rules.flatMap((r) => r.peers ?? []);
  const ranges = ports.filter((p) => p.endPort !== undefined).map((p) => `${p.port}-${p.endPort}`);
  assert.deepEqual(ranges.sort(), ['1-110', '112-444', '30000-32767', '446-65535', '49152-65535']);
  assert.ok(
    ports.some((p) => typeof p.port === 'string'),
    'named ports',
  );
  assert.ok(
    peers.some((p) => p.kind === 'ipBlock' && p.except.length > 0 && p.cidr.includes('.')),
    'v4 except',
  );
  assert.ok(
    peers.some((p) => p.kind === 'ipBlock' && p.except.length > 0 && p.cidr.includes(':')),
    'v6 except',
  );
  assert.ok(
    peers.some((p) => p.kind === 'pods' && p.podSelector !== undefined && p.namespaceSelector !== undefined),
    'AND peer',
  );
  assert.ok(
    s.policies.some((p) => p.types.ingress && p.types.egress && p.ingress.length === 0 && p.egress.length === 0),
    'default deny',
  );
  assert.ok(s.pods.some((p) => p.hostNetwork) && s.pods.some((p) => p.phase === 'Succeeded'));
  assert.ok(
    s.pods.some((p) => p.ports.some((cp) => cp.name === 'envoy-admin')),
    'sidecar port',
  );
  // ClusterNetworkPolicies: an Admin and a Baseline policy.
  assert.deepEqual(
    s.clusterPolicies?.map((p) => [p.name, p.tier, p.priority, p.ingress.length, p.egress.length]),
    [
      ['cluster-guardrails', 'Admin', 10, 1, 1],
      ['payments-namespace-default', 'Baseline', 100, 1, 0],
    ],
  );
  const guard = s.clusterPolicies?.[0];
  assert.deepEqual(guard?.egress[0]?.peers, [{ kind: 'networks', cidrs: ['169.254.169.254/32', 'fd00:ec2::254/128'] }]);
  assert.deepEqual(guard?.ingress[0]?.protocols, [{ kind: 'named', name: 'metrics' }]);
});

test('examples-invalid/ yields the expected error lines and enforces fail-closed', async () => {
  const { objects, errors } = await loadManifests([root('examples-invalid')]);
  assert.deepEqual(errors, []);
  const built = buildState(objects);
  assert.deepEqual(built.errors.filter((e) => e.kind === 'NetworkPolicy').map(formatValidationError), [
    'shop/endport-below-port spec.ingress[0].ports[1].endPort: must be >= port (65535)',
    'shop/endport-with-named-port spec.ingress[0].ports[0].endPort: cannot be used with a named port ("http")',
    'shop/endport-without-port spec.egress[0].ports[0].endPort: may not be specified without port',
    'shop/bad-cidr spec.ingress[0].from[0].ipBlock.cidr: must be a valid CIDR: bad address in "10.0.0.300/8"',
    'shop/except-outside-cidr spec.ingress[0].from[0].ipBlock.except[1]: must be a strict subset of cidr (10.0.0.0/16)',
    'shop/unknown-protocol spec.ingress[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP"',
    'payments/bad-operator spec.podSelector.matchExpressions[0].operator: "Equals" is not a valid selector operator (In, NotIn, Exists, DoesNotExist)',
    'payments/string-port-number spec.ingress[0].ports[0].port: invalid port name "8443": must contain at least one letter (a-z)',
    'payments/empty-peer spec.ingress[0].from[0]: must specify a peer',
    'payments/old-api-version apiVersion: "networking.k8s.io/v1beta1" is not supported for NetworkPolicy (want networking.k8s.io/v1)',
  ]);
  // The ClusterNetworkPolicy: kept, its placement (priority) unreadable, so
  // every pod is its subject and only its Deny rules stay in force; each
  // invalid rule fails closed by its action.
  const cnp = built.state.clusterPolicies ?? [];
  assert.deepEqual(cnp.flatMap((p) => p.errors).map(formatValidationError), [
    'bad-guardrails spec.priority: Invalid value: 2000: spec.priority in body should be less than or equal to 1000',
    'bad-guardrails spec.ingress[0].action: Unsupported value: "Allow": supported values: "Accept", "Deny", "Pass"',
    'bad-guardrails spec.egress[0].to[0].networks[0]: Invalid value: "string": Invalid CIDR format provided',
    'bad-guardrails spec.egress[1]: Invalid value: "object": networks/nodes/domainNames peer cannot be set with namedPorts since there are no namedPorts for networks/nodes/domainNames',
    'bad-guardrails spec.egress[2].protocols[0].tcp.destinationPort.range: Invalid value: "object": Start port must be less than End port',
    'bad-guardrails spec.egress[3].to[0].domainNames: domainNames peers are only supported in Accept rules',
  ]);
  assert.deepEqual(
    cnp[0]?.egress.map((r) => [r.name, r.action, r.invalid]),
    [
      ['not-a-cidr', 'Deny', true],
      ['named-port-to-networks', 'Accept', true],
      ['reversed-range', 'Deny', true],
      ['domains-only-accept', 'Deny', true],
    ],
  );
  assert.equal(cnp[0]?.ingress[0]?.invalid, true);
  // All but the wrong-apiVersion one are kept, and none of their rules allows anything.
  const s = built.state;
  assert.equal(s.policies.length, 9);
  for (const p of s.policies) {
    assert.ok(p.errors.length > 0, p.name);
    for (const r of [...p.ingress, ...p.egress]) assert.deepEqual(r, { peers: [], ports: [], invalid: true }, p.name);
  }
  const badOp = s.policies.find((p) => p.name === 'bad-operator');
  assert.deepEqual(badOp?.podSelector, { matchLabels: {}, matchExpressions: [] }, 'bad podSelector selects the whole namespace');
});

test('examples and examples-invalid together: invalid ones only add errors', async () => {
  const { objects } = await loadManifests([root('examples'), root('examples-invalid')]);
  const built = buildState(objects);
  assert.equal(built.errors.length, 10 + 6);
  assert.equal(built.state.policies.length, 14 + 9);
  assert.equal(built.state.clusterPolicies?.length, 2 + 1);
});
