// The `status` answer as a pure function: which nodes must enforce a policy,
// which do (current generation, same uid), which lag and since when, which
// agents are not reporting; the summary, the exit decision, argument parsing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseStatusArgs } from '../../src/cli/status.ts';
import { buildReport, leaseState, policyText, summaryText, type ReportInput } from '../../src/status/report.ts';
import { relevantPolicies } from '../../src/status/build.ts';
import type { AppliedPolicy, LeaseObject, NodePolicyStatusObject } from '../../src/status/types.ts';
import type { NetworkPolicy } from '../../src/model/types.ts';
import { pod, policy, sel } from '../support/state-builder.ts';

const NOW = Date.UTC(2026, 0, 1, 12);
const lease = (node: string, renewedAgoS: number): LeaseObject => ({
  metadata: { name: node },
  spec: { renewTime: new Date(NOW - renewedAgoS * 1000).toISOString(), leaseDurationSeconds: 90 },
});
const entry = (name: string, generation: number, uid = `uid-${name}`): AppliedPolicy => ({
  kind: 'NetworkPolicy',
  namespace: 'shop',
  name,
  uid,
  generation,
  resourceVersion: String(generation),
  appliedTime: '2026-01-01T11:00:00.000Z',
  localPods: 1,
});
const nps = (
  node: string,
  policies: AppliedPolicy[],
  extra: Partial<NodePolicyStatusObject['status']> = {},
): NodePolicyStatusObject => ({
  metadata: { name: node },
  status: {
    inSync: true,
    lastApplyResult: 'Applied',
    policies,
    counts: { localPods: 1, policies: policies.length, chains: 0, rules: 0, sets: 0, elements: 0 },
    ...extra,
  },
});
const web: NetworkPolicy = {
  ...policy('shop', 'web', { podSelector: sel({ app: 'web' }) }),
  version: { uid: 'uid-web', generation: 3, resourceVersion: '3' },
};
const pods = [
  pod('shop', 'w1', { labels: { app: 'web' }, ips: ['10.0.0.1'], node: 'n1' }),
  pod('shop', 'w2', { labels: { app: 'web' }, ips: ['10.0.0.2'], node: 'n2' }),
  pod('shop', 'w3', { labels: { app: 'web' }, ips: ['10.0.0.3'], node: 'n3' }),
  pod('shop', 'done', { labels: { app: 'web' }, ips: ['10.0.0.9'], node: 'n4', phase: 'Succeeded' }),
  pod('shop', 'db', { labels: { app: 'db' }, ips: ['10.0.0.4'], node: 'n4' }),
];

function input(over: Partial<ReportInput> = {}): ReportInput {
  return {
    now: NOW,
    nodes: ['n1', 'n2', 'n3', 'n4'],
    statuses: [nps('n1', [entry('web', 3)]), nps('n2', [entry('web', 2)]), nps('n3', [entry('web', 3)]), nps('n4', [])],
    leases: [lease('n1', 10), lease('n2', 10), lease('n3', 200), lease('n4', 10)],
    policies: [web],
    pods,
    ...over,
  };
}

test('a policy: in force where the live agent reports its generation; lagging and dead nodes named', () => {
  const r = buildReport(input());
  const p = r.policies[0];
  assert.deepEqual(p?.nodes, ['n1', 'n2', 'n3'], 'nodes hosting active pods it selects (not n4: finished pod)');
  assert.deepEqual(p?.inForce, ['n1']);
  assert.deepEqual(p?.lagging, [{ node: 'n2', generation: 2, since: '2026-01-01T11:00:00.000Z', lastError: undefined }]);
  assert.deepEqual(p?.notReporting, ['n3']);
  assert.equal(r.ok, false);
  assert.deepEqual(r.summary.lagging, ['n2']);
  assert.deepEqual(r.summary.notReporting, ['n3']);
  assert.equal(r.summary.inSync, 2, 'n1 and n4');
  const text = policyText(r, p!, NOW);
  assert.match(text, /in force on 1 of 3 nodes that host pods it selects/);
  assert.match(text, /lagging: n2 has generation 2 since 2026-01-01T11:00:00.000Z \(60m ago\)/);
  assert.match(text, /agent not reporting: n3 \(lease expired/);
});

test('all in force: ok, summary says so', () => {
  const r = buildReport(
    input({
      statuses: [nps('n1', [entry('web', 3)]), nps('n2', [entry('web', 4)]), nps('n3', [entry('web', 3)])],
      leases: ['n1', 'n2', 'n3'].map((n) => lease(n, 5)),
    }),
  );
  assert.equal(r.ok, true);
  assert.match(summaryText(r, NOW, false), /Everything is in force\./);
  assert.equal(r.summary.notReporting.length, 0, 'n4 has no Lease but hosts no selected pod: not counted as dead');
});

test('a re-created policy (new uid) is not in force where only the old one is reported', () => {
  const r = buildReport(
    input({ statuses: [nps('n1', [entry('web', 3, 'old-uid')])], leases: [lease('n1', 1)], pods: pods.slice(0, 1) }),
  );
  assert.deepEqual(r.policies[0]?.inForce, []);
  assert.equal(r.policies[0]?.lagging[0]?.node, 'n1');
});

test('a failed apply and a kernel out of sync make a node lag, with the error', () => {
  const r = buildReport(
    input({
      statuses: [nps('n1', [entry('web', 2)], { inSync: false, lastApplyResult: 'Failed', lastError: 'nft failed: x' })],
      leases: [lease('n1', 1)],
      pods: pods.slice(0, 1),
    }),
  );
  assert.equal(r.policies[0]?.lagging[0]?.lastError, 'nft failed: x');
  assert.match(summaryText(r, NOW, true), /LAGGING NODES\n {2}n1: in sync false, last apply Failed/);
});

test('a node without a Lease hosting selected pods is not reporting; invalid policies are listed, not failing', () => {
  const bad: NetworkPolicy = {
    ...web,
    errors: [{ kind: 'NetworkPolicy', namespace: 'shop', name: 'web', path: 'spec.ingress[0].ports[0].port', message: 'bad' }],
  };
  const r = buildReport(
    input({
      policies: [bad],
      leases: [lease('n1', 1), lease('n2', 1), lease('n3', 1)],
      statuses: [nps('n1', [entry('web', 3)]), nps('n2', [entry('web', 3)]), nps('n3', [entry('web', 3)])],
    }),
  );
  assert.equal(r.ok, true);
  assert.deepEqual(r.policies[0]?.invalidFields, ['spec.ingress[0].ports[0].port: bad']);
  assert.match(
    summaryText(r, NOW, false),
    /INVALID POLICIES \(enforced fail-closed\)\n {2}shop\/web: spec.ingress\[0\].ports\[0\].port: bad/,
  );
  const noLease = buildReport(input({ leases: [], statuses: [] }));
  assert.deepEqual(noLease.summary.notReporting, ['n1', 'n2', 'n3']);
});

test('lease state: alive within renewTime + duration, expired after, missing', () => {
  assert.equal(leaseState(lease('n', 89), NOW).state, 'alive');
  assert.equal(leaseState(lease('n', 91), NOW).state, 'expired');
  assert.equal(leaseState(undefined, NOW).state, 'no-lease');
  assert.equal(
    leaseState({ metadata: { name: 'n' }, spec: { renewTime: new Date(NOW), leaseDurationSeconds: 1 } }, NOW).state,
    'alive',
  );
});

test('status arguments: POLICY as NAME in -n or NS/NAME, outputs, usage errors', () => {
  assert.deepEqual(parseStatusArgs(['-n', 'shop', 'web']), {
    namespace: 'shop',
    policy: { kind: 'NetworkPolicy', namespace: 'shop', name: 'web' },
    output: 'text',
    agentNamespace: 'nft-netpol-system',
    tenancy: true,
  });
  assert.deepEqual(parseStatusArgs(['bank/p', '-o', 'json']), {
    namespace: 'bank',
    policy: { kind: 'NetworkPolicy', namespace: 'bank', name: 'p' },
    output: 'json',
    agentNamespace: 'nft-netpol-system',
    tenancy: true,
  });
  assert.equal(parseStatusArgs(['-h']), 'help');
  assert.throws(() => parseStatusArgs(['-o', 'xml']), /--output must be text, wide, json or yaml/);
  assert.equal((parseStatusArgs(['-o', 'yaml']) as { output: string }).output, 'yaml');
  assert.throws(() => parseStatusArgs(['a', 'b', 'c']), /at most one policy/);
  assert.throws(() => parseStatusArgs(['a', 'b']), /unknown TYPE "a"/);
  assert.throws(() => parseStatusArgs(['a/b/c']), /NAME, NAMESPACE\/NAME or TYPE\/NAME/);
});

test('status arguments: kubectl-style TYPE/NAME and TYPE NAME name the tenancy kinds', () => {
  const policyOf = (argv: string[]) => {
    const a = parseStatusArgs(argv);
    assert.notEqual(a, 'help');
    return a === 'help' ? undefined : { namespace: a.namespace, policy: a.policy };
  };
  const nsnp = { kind: 'NamespaceNetworkPolicy', namespace: 'shop', name: 'p' };
  assert.deepEqual(policyOf(['-n', 'shop', 'nsnp/p']), { namespace: 'shop', policy: nsnp });
  assert.deepEqual(policyOf(['-n', 'shop', 'nsnp', 'p']), { namespace: 'shop', policy: nsnp });
  assert.deepEqual(policyOf(['NamespaceNetworkPolicy', 'p', '-n', 'shop']), { namespace: 'shop', policy: nsnp });
  assert.deepEqual(policyOf(['namespacenetworkpolicies.network.kubesphere.io/p', '-n', 'shop']), {
    namespace: 'shop',
    policy: nsnp,
  });
  // Without -n, as kubectl: the default namespace.
  assert.deepEqual(policyOf(['nsnp/p'])?.policy, { ...nsnp, namespace: 'default' });
  assert.deepEqual(policyOf(['netpol/web', '-n', 'shop'])?.policy, { kind: 'NetworkPolicy', namespace: 'shop', name: 'web' });
  // A namespace's isolation reads that namespace; a workspace's reads every namespace.
  assert.deepEqual(policyOf(['ns/shop']), { namespace: 'shop', policy: { kind: 'namespace', name: 'shop' } });
  assert.deepEqual(policyOf(['namespace', 'shop']), { namespace: 'shop', policy: { kind: 'namespace', name: 'shop' } });
  assert.deepEqual(policyOf(['workspace/acme']), { namespace: undefined, policy: { kind: 'workspace', name: 'acme' } });
  // X/Y with X not a type stays NAMESPACE/NAME of a NetworkPolicy.
  assert.deepEqual(policyOf(['shop/ns'])?.policy, { kind: 'NetworkPolicy', namespace: 'shop', name: 'ns' });
  assert.throws(() => parseStatusArgs(['--no-tenancy', 'nsnp/p']), /--no-tenancy checks NetworkPolicies only/);
  const a = parseStatusArgs(['--no-tenancy']);
  assert.ok(a !== 'help' && !a.tenancy);
});

test('a staged policy is named as such: in the policy text, the summary, and the node entry', () => {
  const staged: NetworkPolicy = { ...web, staged: true };
  const r = buildReport(input({ policies: [staged] }));
  assert.equal(r.policies[0]?.staged, true);
  assert.match(policyText(r, r.policies[0]!, NOW), /STAGED: not enforced/);
  assert.match(
    summaryText(r, NOW, false),
    /STAGED POLICIES \(not enforced[^\n]*\n {2}NetworkPolicy shop\/web|STAGED POLICIES \(not enforced[^\n]*\n {2}shop\/web/,
  );
  assert.equal(buildReport(input()).policies[0]?.staged, undefined, 'an enforced policy has no staged mark');
  const node = relevantPolicies({ namespaces: [], pods, policies: [staged], nodes: [] }, 'n1', NOW, undefined);
  assert.deepEqual(
    node.map((e) => [e.name, e.staged]),
    [['web', true]],
  );
});
