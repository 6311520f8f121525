// explain on ClusterNetworkPolicy's tiers: the tier, policy, priority and rule
// name that decided, what a Pass handed on, and what is not enforced, in
// words and in the JSON of `explain -o json` and /debug/explain.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ClusterNetworkPolicy, ClusterPolicyRule, ClusterState, NamespacedPods } from '../../src/model/types.ts';
import { explainJson, explainText } from '../../src/policy/explain.ts';
import { verdict, type Endpoint } from '../../src/policy/verdict.ts';
import { ALL, ns, pod, podPeer, policy, rule, sel, state } from '../support/state-builder.ts';

const SHOP = sel({ team: 'shop' });
const OPS = sel({ team: 'ops' });
const WEB = sel({ app: 'web' });

function cnp(
  name: string,
  tier: 'Admin' | 'Baseline',
  priority: number,
  o: { ingress?: ClusterPolicyRule[]; egress?: ClusterPolicyRule[] },
): ClusterNetworkPolicy {
  const subject: NamespacedPods = { namespaceSelector: SHOP, podSelector: ALL };
  return {
    name,
    sourceKind: 'ClusterNetworkPolicy',
    tier,
    priority,
    subject,
    ingress: o.ingress ?? [],
    egress: o.egress ?? [],
    errors: [],
  };
}

const r = (action: ClusterPolicyRule['action'], peers: ClusterPolicyRule['peers'], name = ''): ClusterPolicyRule => ({
  name,
  action,
  peers,
  protocols: undefined,
  invalid: false,
});
const fromOps = { kind: 'pods' as const, namespaceSelector: OPS, podSelector: ALL };

function cluster(cnps: ClusterNetworkPolicy[], withNp = false): ClusterState {
  const s = state({
    namespaces: [ns('shop', { team: 'shop' }), ns('ops', { team: 'ops' })],
    pods: [
      pod('shop', 'web', { labels: { app: 'web' }, ips: ['10.0.1.1'] }),
      pod('shop', 'cart', { labels: { app: 'cart' }, ips: ['10.0.1.2'] }),
      pod('ops', 'tool', { labels: { app: 'tool' }, ips: ['10.0.2.1'] }),
    ],
    policies: withNp ? [policy('shop', 'web', { podSelector: WEB, ingress: [rule([podPeer(ALL, OPS)])] })] : [],
  });
  return { ...s, clusterPolicies: cnps };
}

const at = (s: ClusterState, text: string): Endpoint => {
  const [namespace, name] = text.split('/');
  const p = s.pods.find((x) => x.namespace === namespace && x.name === name);
  return p === undefined ? { kind: 'ip', ip: text } : { kind: 'pod', pod: p };
};

test('an Admin Deny: the first lines name the policy, tier, priority and rule', () => {
  const s = cluster([
    cnp('deny-metadata', 'Admin', 10, {
      egress: [r('Deny', [{ kind: 'networks', cidrs: ['169.254.169.254/32'] }], 'block-imds')],
    }),
  ]);
  const f = at(s, 'shop/cart');
  const t = at(s, '169.254.169.254');
  const out = explainText(verdict(s, f, t, 'TCP', 80), f, t);
  assert.match(
    out,
    /^DENIED: shop\/cart \(10\.0\.1\.2\) -> 169\.254\.169\.254 on 80\/TCP \(IPv4\)\ndenied by egress at the source: ClusterNetworkPolicy deny-metadata \(Admin tier, priority 10\) egress rule 0 "block-imds": Deny\n/,
  );
  assert.match(
    out,
    /egress at the source shop\/cart \(10\.0\.1\.2\): DENIED\n {2}policies: none \(not isolated\)\n {2}cluster policies: ClusterNetworkPolicy deny-metadata\n {2}decided by: ClusterNetworkPolicy deny-metadata \(Admin tier, priority 10\) egress rule 0 "block-imds": Deny\n {2}egress of shop\/cart to 169\.254\.169\.254 on port 80\/TCP denied by ClusterNetworkPolicy deny-metadata/,
  );
});

test('an Admin Pass, then a NetworkPolicy allow: both named, in order', () => {
  const s = cluster([cnp('x', 'Admin', 5, { ingress: [r('Pass', [fromOps], 'to-np')] })], true);
  const f = at(s, 'ops/tool');
  const t = at(s, 'shop/web');
  const out = explainText(verdict(s, f, t, 'TCP', 80), f, t);
  assert.match(out, /^ALLOWED: /);
  assert.match(
    out,
    /ingress at the destination shop\/web \(10\.0\.1\.1\): allowed\n {2}policies: shop\/web\n {2}cluster policies: ClusterNetworkPolicy x\n {2}passed on by: ClusterNetworkPolicy x \(Admin tier, priority 5\) ingress rule 0 "to-np": Pass\n {2}passed by ClusterNetworkPolicy x .*to the NetworkPolicy tier; shop\/web is isolated for ingress by shop\/web; allowed by shop\/web ingress\[0\]\./,
  );
});

test('domainNames: a not-enforced note, and the Deny that follows decides', () => {
  const s = cluster([
    cnp('egress', 'Baseline', 0, {
      egress: [
        r('Accept', [{ kind: 'domainNames', names: ['example.com'] }], 'docs'),
        r('Deny', [{ kind: 'networks', cidrs: ['0.0.0.0/0'] }], 'rest'),
      ],
    }),
  ]);
  const f = at(s, 'shop/cart');
  const t = at(s, '93.184.216.34');
  const out = explainText(verdict(s, f, t, 'TCP', 443), f, t);
  assert.match(
    out,
    /\n {2}not enforced: ClusterNetworkPolicy egress \(Baseline tier, priority 0\) egress rule 0 "docs": Accept: domainNames are not enforced by this agent\n/,
  );
  assert.match(
    out,
    /denied by egress at the source: ClusterNetworkPolicy egress \(Baseline tier, priority 0\) egress rule 1 "rest": Deny/,
  );
});

test('JSON: tier, decidedBy, passed, clusterPolicies and notEnforced of each direction', () => {
  const s = cluster([
    cnp('a', 'Admin', 1, { ingress: [r('Pass', [fromOps], 'hand-on')] }),
    cnp('b', 'Baseline', 2, { ingress: [r('Deny', [fromOps], 'no-ops')] }),
  ]);
  const f = at(s, 'ops/tool');
  const t = at(s, 'shop/web');
  const j = JSON.parse(JSON.stringify(explainJson(verdict(s, f, t, 'TCP', 80), f, t))) as ReturnType<typeof explainJson>;
  assert.equal(j.allowed, false);
  assert.deepEqual(
    [j.egress.tier, j.egress.decidedBy, j.egress.passed, j.egress.clusterPolicies, j.egress.notEnforced],
    ['default', null, [], [], []],
  );
  const pass = {
    policy: 'ClusterNetworkPolicy a',
    kind: 'ClusterNetworkPolicy',
    tier: 'admin',
    priority: 1,
    direction: 'ingress',
    rule: 0,
    name: 'hand-on',
    action: 'Pass',
    description: 'ClusterNetworkPolicy a (Admin tier, priority 1) ingress rule 0 "hand-on": Pass',
    notEnforced: null,
  };
  assert.deepEqual(
    { ...j.ingress, reason: '' },
    {
      allowed: false,
      isolated: false,
      policies: [],
      allowedBy: [],
      reason: '',
      tier: 'baseline',
      decidedBy: {
        ...pass,
        policy: 'ClusterNetworkPolicy b',
        tier: 'baseline',
        priority: 2,
        name: 'no-ops',
        action: 'Deny',
        description: 'ClusterNetworkPolicy b (Baseline tier, priority 2) ingress rule 0 "no-ops": Deny',
      },
      passed: [pass],
      clusterPolicies: ['ClusterNetworkPolicy a', 'ClusterNetworkPolicy b'],
      notEnforced: [],
    },
  );
  assert.equal(
    j.ingress.reason,
    'passed by ClusterNetworkPolicy a (Admin tier, priority 1) ingress rule 0 "hand-on": Pass to the NetworkPolicy tier; no policy of the NetworkPolicy tier selects shop/web for ingress: not isolated; ingress to shop/web from ops/tool on port 80/TCP denied by ClusterNetworkPolicy b (Baseline tier, priority 2) ingress rule 0 "no-ops": Deny.',
  );
});
