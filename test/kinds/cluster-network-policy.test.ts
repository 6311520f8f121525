// ClusterNetworkPolicy as an ordered kind: what each object becomes in the
// engines' terms (subjects, peers, ports, origins, fail-closed resolution),
// memoized per object, registered after the allow-list kinds.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clusterNetworkPolicyKind, tierClusterNetworkPolicy } from '../../src/kinds/cluster-network-policy.ts';
import { POLICY_KINDS, tieredPolicies } from '../../src/kinds/registry.ts';
import type { ClusterNetworkPolicy, ClusterPolicyRule, ClusterState } from '../../src/model/types.ts';
import { ALL, sel, state } from '../support/state-builder.ts';

const OPS = sel({ team: 'ops' });

function cnp(name: string, o: Partial<ClusterNetworkPolicy> = {}): ClusterNetworkPolicy {
  return {
    name,
    sourceKind: 'ClusterNetworkPolicy',
    tier: 'Admin',
    priority: 10,
    subject: { namespaceSelector: ALL, podSelector: ALL },
    ingress: [],
    egress: [],
    errors: [],
    ...o,
  };
}

const rule = (o: Partial<ClusterPolicyRule>): ClusterPolicyRule => ({
  name: '',
  action: 'Deny',
  peers: [],
  protocols: undefined,
  invalid: false,
  ...o,
});

test('registered once, as an ordered kind after the allow-list kinds', () => {
  assert.equal(POLICY_KINDS.filter((k) => k === clusterNetworkPolicyKind).length, 1);
  assert.equal(clusterNetworkPolicyKind.tier, 'ordered');
  const last = POLICY_KINDS.findIndex((k) => k.tier === 'ordered');
  assert.ok(POLICY_KINDS.slice(0, last).every((k) => k.tier === 'allow-list'));
  assert.deepEqual(tieredPolicies(state({})), [], 'no clusterPolicies: none');
});

test('origin, label, key, tier, priority and rule descriptions', () => {
  const t = tierClusterNetworkPolicy(
    cnp('deny-metadata', {
      egress: [rule({ name: 'block-imds', peers: [{ kind: 'networks', cidrs: ['169.254.169.254/32'] }] })],
      ingress: [rule({ action: 'Pass', peers: [{ kind: 'pods', namespaceSelector: OPS, podSelector: ALL }] })],
    }),
  );
  assert.deepEqual(t.origin, {
    kind: 'ClusterNetworkPolicy',
    namespace: '',
    name: 'deny-metadata',
    label: 'ClusterNetworkPolicy deny-metadata',
  });
  assert.deepEqual([t.key, t.tier, t.priority], ['ClusterNetworkPolicy/deny-metadata', 'admin', 10]);
  assert.deepEqual(t.egress[0]?.origin, {
    policy: t.origin,
    direction: 'egress',
    index: 0,
    name: 'block-imds',
    action: 'Deny',
    description: 'ClusterNetworkPolicy deny-metadata (Admin tier, priority 10) egress rule 0 "block-imds": Deny',
  });
  assert.equal(
    t.ingress[0]?.origin.description,
    'ClusterNetworkPolicy deny-metadata (Admin tier, priority 10) ingress rule 0: Pass',
  );
  assert.deepEqual(t.ingress[0]?.peers, [{ kind: 'pods', namespaceSelector: OPS, podSelector: ALL }]);
});

test('legacy kinds keep their kind in the origin and the key (a CNP of the same name stays apart)', () => {
  const s: ClusterState = {
    ...state({}),
    clusterPolicies: [
      cnp('x', { sourceKind: 'BaselineAdminNetworkPolicy', tier: 'Baseline', priority: 0 }),
      cnp('x'),
      cnp('x', { sourceKind: 'AdminNetworkPolicy' }),
    ],
  };
  const ts = clusterNetworkPolicyKind.tieredPolicies(s);
  assert.deepEqual(
    ts.map((t) => [t.key, t.tier, t.origin.label]),
    [
      ['AdminNetworkPolicy/x', 'admin', 'AdminNetworkPolicy x'],
      ['ClusterNetworkPolicy/x', 'admin', 'ClusterNetworkPolicy x'],
      ['BaselineAdminNetworkPolicy/x', 'baseline', 'BaselineAdminNetworkPolicy x'],
    ],
  );
});

test('memoized per object: an unchanged object keeps its tiered policy', () => {
  const o = cnp('a', { egress: [rule({ peers: [{ kind: 'networks', cidrs: ['10.0.0.0/8'] }] })] });
  const s1: ClusterState = { ...state({}), clusterPolicies: [o] };
  const s2: ClusterState = { ...state({}), clusterPolicies: [o, cnp('b')] };
  assert.equal(clusterNetworkPolicyKind.tieredPolicies(s1)[0], clusterNetworkPolicyKind.tieredPolicies(s2)[0]);
  assert.notEqual(tierClusterNetworkPolicy(o), tierClusterNetworkPolicy({ ...o }));
});

test('ordered by tier, priority, then name', () => {
  const s: ClusterState = {
    ...state({}),
    clusterPolicies: [
      cnp('a', { tier: 'Baseline', priority: 0 }),
      cnp('b', { priority: 5 }),
      cnp('c', { priority: 1 }),
      cnp('d', { priority: 5 }),
    ],
  };
  assert.deepEqual(
    clusterNetworkPolicyKind.tieredPolicies(s).map((t) => t.origin.name),
    ['c', 'b', 'd', 'a'],
  );
});

test('resolution: peers, protocols, domainNames, unknown peers and invalid rules (fail closed)', () => {
  const pods = { kind: 'pods' as const, namespaceSelector: OPS, podSelector: sel({ app: 'x' }) };
  const t = tierClusterNetworkPolicy(
    cnp('r', {
      egress: [
        rule({
          action: 'Accept',
          peers: [pods, { kind: 'networks', cidrs: ['10.0.0.0/8'] }, { kind: 'nodes', nodeSelector: ALL }],
          protocols: [
            { kind: 'port', protocol: 'TCP', port: 80, endPort: 80 },
            { kind: 'port', protocol: 'UDP', port: undefined, endPort: undefined },
            { kind: 'named', name: 'http' },
          ],
        }),
        rule({ action: 'Accept', peers: [{ kind: 'domainNames', names: ['example.com'] }] }),
        rule({
          action: 'Accept',
          peers: [
            { kind: 'domainNames', names: ['a.example'] },
            { kind: 'networks', cidrs: ['192.0.2.0/24'] },
          ],
        }),
        rule({ action: 'Accept', peers: [{ kind: 'unknown' }, pods] }),
        rule({
          action: 'Deny',
          peers: [{ kind: 'unknown' }, pods],
          protocols: [{ kind: 'port', protocol: 'TCP', port: 22, endPort: 22 }],
        }),
        rule({ action: 'Pass', peers: [{ kind: 'unknown' }] }),
        rule({ action: 'Deny', peers: [{ kind: 'domainNames', names: ['a.example'] }] }),
        rule({ action: 'Accept', peers: [pods], invalid: true }),
        rule({ action: 'Deny', peers: [pods], protocols: [{ kind: 'named', name: 'x' }], invalid: true }),
        rule({ action: 'Pass', peers: [pods], invalid: true }),
      ],
    }),
  );
  const got = t.egress.map((r) => ({ action: r.action, peers: r.peers, ports: r.ports, notEnforced: r.notEnforced }));
  assert.deepEqual(got, [
    {
      action: 'Accept',
      peers: [pods, { kind: 'networks', cidrs: ['10.0.0.0/8'] }, { kind: 'nodes', nodeSelector: ALL }],
      ports: [
        { kind: 'port', protocol: 'TCP', port: 80, endPort: 80 },
        { kind: 'port', protocol: 'UDP', port: undefined, endPort: undefined },
        { kind: 'named', name: 'http' },
      ],
      notEnforced: undefined,
    },
    { action: 'Accept', peers: [], ports: undefined, notEnforced: 'domainNames are not enforced by this agent' },
    {
      action: 'Accept',
      peers: [{ kind: 'networks', cidrs: ['192.0.2.0/24'] }],
      ports: undefined,
      notEnforced: 'domainNames are not enforced by this agent',
    },
    {
      action: 'Accept',
      peers: [],
      ports: undefined,
      notEnforced: 'a peer of an unknown type: the rule matches nothing (fail closed)',
    },
    // "Deny all" (the API's fail closed for Deny and Pass): every address, protocol and port.
    {
      action: 'Deny',
      peers: [{ kind: 'all' }],
      ports: undefined,
      notEnforced: 'a peer of an unknown type: the rule is read as Deny all (fail closed)',
    },
    {
      action: 'Deny',
      peers: [{ kind: 'all' }],
      ports: undefined,
      notEnforced: 'a peer of an unknown type: the rule is read as Deny all (fail closed)',
    },
    {
      action: 'Deny',
      peers: [{ kind: 'all' }],
      ports: undefined,
      notEnforced: 'domainNames outside an Accept rule: the rule is read as Deny all (fail closed)',
    },
    { action: 'Accept', peers: [], ports: undefined, notEnforced: 'the rule is invalid: the rule matches nothing (fail closed)' },
    {
      action: 'Deny',
      peers: [{ kind: 'all' }],
      ports: undefined,
      notEnforced: 'the rule is invalid: the rule is read as Deny all (fail closed)',
    },
    {
      action: 'Deny',
      peers: [{ kind: 'all' }],
      ports: undefined,
      notEnforced: 'the rule is invalid: the rule is read as Deny all (fail closed)',
    },
  ]);
});
