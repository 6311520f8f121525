// The reference evaluator on ClusterNetworkPolicy's tiers (Admin ->
// NetworkPolicy -> Baseline -> allowed), one table per rule of the API
// (policy.networking.k8s.io/v1alpha2), in the style of kube-network-policies'
// table tests. States are built in the model's terms (the normalizer has its
// own tests). Each row names the direction it judges; an expectation is
// `allow` / `deny` and the tier that decided it.
//
//   namespaces  shop {team: shop}   ops {team: ops}
//   shop/web    app=web   10.0.1.1 fd00::1:1  node-1  http 80/TCP, metrics 9090/TCP
//   shop/cart   app=cart  10.0.1.2 fd00::1:2  node-2  http 8080/TCP
//   ops/tool    app=tool  10.0.2.1 fd00::2:1  node-1
//   ops/other   app=other 10.0.2.2 fd00::2:2  node-1
//   shop/hostnet app=web  hostNetwork on node-2: 192.168.0.2 fd00:ff::2 (the node's addresses)
//   nodes       node-1 {role: worker} 192.168.0.1 fd00:ff::1;  node-2 {role: control-plane} 192.168.0.2 fd00:ff::2
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { tieredPolicies } from '../../src/kinds/registry.ts';
import type {
  ClusterNetworkPolicy,
  ClusterPolicyAction,
  ClusterPolicyPeer,
  ClusterPolicyProtocol,
  ClusterPolicyRule,
  ClusterState,
  Direction,
  Family,
  LabelSelector,
  NamespacedPods,
  NetworkPolicy,
  Protocol,
} from '../../src/model/types.ts';
import { verdict, type DecidingTier, type Endpoint } from '../../src/policy/verdict.ts';
import { ALL, cport, ipBlock, node, ns, pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';

const SHOP = sel({ team: 'shop' });
const OPS = sel({ team: 'ops' });
const WEB = sel({ app: 'web' });

const BASE = state({
  namespaces: [ns('shop', { team: 'shop' }), ns('ops', { team: 'ops' })],
  pods: [
    pod('shop', 'web', {
      labels: { app: 'web' },
      ips: ['10.0.1.1', 'fd00::1:1'],
      node: 'node-1',
      ports: [cport('http', 80), cport('metrics', 9090)],
    }),
    pod('shop', 'cart', {
      labels: { app: 'cart' },
      ips: ['10.0.1.2', 'fd00::1:2'],
      node: 'node-2',
      ports: [cport('http', 8080)],
    }),
    pod('ops', 'tool', { labels: { app: 'tool' }, ips: ['10.0.2.1', 'fd00::2:1'], node: 'node-1' }),
    pod('ops', 'other', { labels: { app: 'other' }, ips: ['10.0.2.2', 'fd00::2:2'], node: 'node-1' }),
    pod('shop', 'hostnet', { labels: { app: 'web' }, ips: ['192.168.0.2', 'fd00:ff::2'], node: 'node-2', hostNetwork: true }),
  ],
  nodes: [
    { ...node('node-1', ['192.168.0.1', 'fd00:ff::1']), labels: { role: 'worker' } },
    { ...node('node-2', ['192.168.0.2', 'fd00:ff::2']), labels: { role: 'control-plane' } },
  ],
});

// --- ClusterNetworkPolicy in the model's terms ---

const nsSubject = (namespaceSelector: LabelSelector): NamespacedPods => ({ namespaceSelector, podSelector: ALL });
const podSubject = (namespaceSelector: LabelSelector, podSelector: LabelSelector): NamespacedPods => ({
  namespaceSelector,
  podSelector,
});
const pods = (namespaceSelector: LabelSelector, podSelector: LabelSelector = ALL): ClusterPolicyPeer => ({
  kind: 'pods',
  namespaceSelector,
  podSelector,
});
const namespaces = (s: LabelSelector): ClusterPolicyPeer => pods(s, ALL);
const networks = (...cidrs: string[]): ClusterPolicyPeer => ({ kind: 'networks', cidrs });
const nodes = (nodeSelector: LabelSelector): ClusterPolicyPeer => ({ kind: 'nodes', nodeSelector });
const domains = (...names: string[]): ClusterPolicyPeer => ({ kind: 'domainNames', names });
const UNKNOWN: ClusterPolicyPeer = { kind: 'unknown' };
const proto = (protocol: Protocol, p?: number, end?: number): ClusterPolicyProtocol => ({
  kind: 'port',
  protocol,
  port: p,
  endPort: end ?? p,
});
const named = (name: string): ClusterPolicyProtocol => ({ kind: 'named', name });

function r(
  action: ClusterPolicyAction,
  peers: ClusterPolicyPeer[],
  o: { protocols?: ClusterPolicyProtocol[]; name?: string; invalid?: boolean } = {},
): ClusterPolicyRule {
  return { name: o.name ?? '', action, peers, protocols: o.protocols, invalid: o.invalid ?? false };
}

function cnp(
  name: string,
  tier: 'Admin' | 'Baseline',
  priority: number,
  subject: NamespacedPods,
  o: { ingress?: ClusterPolicyRule[]; egress?: ClusterPolicyRule[] },
): ClusterNetworkPolicy {
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
const admin = (name: string, priority: number, subject: NamespacedPods, o: Parameters<typeof cnp>[4]) =>
  cnp(name, 'Admin', priority, subject, o);
const baseline = (name: string, priority: number, subject: NamespacedPods, o: Parameters<typeof cnp>[4]) =>
  cnp(name, 'Baseline', priority, subject, o);

function withPolicies(cnps: readonly ClusterNetworkPolicy[], nps: readonly NetworkPolicy[] = []): ClusterState {
  return {
    ...BASE,
    policies: [...nps].sort((a, b) => (`${a.namespace}/${a.name}` < `${b.namespace}/${b.name}` ? -1 : 1)),
    clusterPolicies: [...cnps].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
  };
}

// NetworkPolicies of the rows.
const npWebAllowAll = policy('shop', 'web-all', { podSelector: WEB, ingress: [rule()] });
const npWebDenyAll = policy('shop', 'web-none', { podSelector: WEB, ingress: [] });
const npWebFromOps = policy('shop', 'web-from-ops', { podSelector: WEB, ingress: [rule([podPeer(ALL, OPS)])] });

// --- the table ---

function endpoint(s: ClusterState, text: string): Endpoint {
  const m = /^([^/]+)\/([^/]+)$/.exec(text);
  if (m === null) return { kind: 'ip', ip: text };
  const p = s.pods.find((x) => x.namespace === m[1] && x.name === m[2]);
  assert.ok(p !== undefined, `no pod ${text}`);
  return { kind: 'pod', pod: p };
}

type Want = `${'allow' | 'deny'} ${DecidingTier}`;
/** from, to, `PORT[/PROTO]`, expected. */
type Conn = readonly [string, string, string, Want];

interface Row {
  readonly name: string;
  readonly dir: Direction;
  readonly cnps: readonly ClusterNetworkPolicy[];
  readonly nps?: readonly NetworkPolicy[];
  readonly family?: Family;
  readonly conns: readonly Conn[];
}

function check(s: ClusterState, row: Row, [from, to, pp, want]: Conn): string | undefined {
  const [p, protoText] = pp.split('/');
  const protocol = (protoText ?? 'TCP') as Protocol;
  const v = verdict(s, endpoint(s, from), endpoint(s, to), protocol, Number(p), { family: row.family ?? 4 });
  const d = v[row.dir];
  const got: Want = `${d.allowed ? 'allow' : 'deny'} ${d.tier}`;
  return got === want ? undefined : `${from} -> ${to} ${pp} (${row.dir}): want ${want}, got ${got} (${d.reason})`;
}

function table(title: string, rows: readonly Row[]): void {
  describe(title, () => {
    for (const row of rows) {
      test(row.name, () => {
        const s = withPolicies(row.cnps, row.nps);
        assert.deepEqual(
          row.conns.map((c) => check(s, row, c)).filter((x) => x !== undefined),
          [],
        );
      });
    }
  });
}

const shopIn = (rules: ClusterPolicyRule[]) => ({ ingress: rules });

table('tier order: Admin -> NetworkPolicy -> Baseline -> allowed', [
  {
    name: 'Admin Deny beats a NetworkPolicy allow',
    dir: 'ingress',
    cnps: [admin('deny-ops', 10, nsSubject(SHOP), shopIn([r('Deny', [namespaces(OPS)])]))],
    nps: [npWebAllowAll],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny admin'],
      ['shop/cart', 'shop/web', '80', 'allow networkpolicy'],
    ],
  },
  {
    name: 'Admin Accept beats NetworkPolicy isolation',
    dir: 'ingress',
    cnps: [admin('accept-ops', 10, nsSubject(SHOP), shopIn([r('Accept', [namespaces(OPS)])]))],
    nps: [npWebDenyAll],
    conns: [
      ['ops/tool', 'shop/web', '80', 'allow admin'],
      ['shop/cart', 'shop/web', '80', 'deny networkpolicy'],
    ],
  },
  {
    name: 'Admin Pass: the NetworkPolicy decides (and a later Admin Deny is skipped)',
    dir: 'ingress',
    cnps: [
      admin('pass-ops', 5, nsSubject(SHOP), shopIn([r('Pass', [namespaces(OPS)])])),
      admin('deny-all', 10, nsSubject(SHOP), shopIn([r('Deny', [namespaces(ALL)])])),
    ],
    nps: [npWebFromOps],
    conns: [
      ['ops/tool', 'shop/web', '80', 'allow networkpolicy'],
      ['shop/cart', 'shop/web', '80', 'deny admin'],
    ],
  },
  {
    name: 'Admin Pass to an isolating NetworkPolicy that does not allow: denied there',
    dir: 'ingress',
    cnps: [admin('pass-ops', 5, nsSubject(SHOP), shopIn([r('Pass', [namespaces(OPS)])]))],
    nps: [npWebDenyAll],
    conns: [['ops/tool', 'shop/web', '80', 'deny networkpolicy']],
  },
  {
    name: 'Admin Pass, no NetworkPolicy isolates: the Baseline decides',
    dir: 'ingress',
    cnps: [
      admin('pass-ops', 5, nsSubject(SHOP), shopIn([r('Pass', [namespaces(OPS)])])),
      baseline('deny-ops', 5, nsSubject(SHOP), shopIn([r('Deny', [namespaces(OPS)])])),
    ],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny baseline'],
      ['shop/cart', 'shop/web', '80', 'allow default'],
    ],
  },
  {
    name: 'Baseline Deny is overridden by a NetworkPolicy (allow or isolation)',
    dir: 'ingress',
    cnps: [baseline('deny-all', 0, nsSubject(ALL), shopIn([r('Deny', [namespaces(ALL)])]))],
    nps: [npWebFromOps],
    conns: [
      ['ops/tool', 'shop/web', '80', 'allow networkpolicy'],
      ['shop/cart', 'shop/web', '80', 'deny networkpolicy'],
      ['ops/tool', 'shop/cart', '80', 'deny baseline'],
    ],
  },
  {
    name: 'Baseline Accept does not open what a NetworkPolicy isolates',
    dir: 'ingress',
    cnps: [baseline('accept-all', 0, nsSubject(ALL), shopIn([r('Accept', [namespaces(ALL)])]))],
    nps: [npWebDenyAll],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny networkpolicy'],
      ['ops/tool', 'shop/cart', '80', 'allow baseline'],
    ],
  },
  {
    name: 'Baseline Pass: allowed by default (a later Baseline Deny is skipped)',
    dir: 'ingress',
    cnps: [baseline('b', 0, nsSubject(SHOP), shopIn([r('Pass', [namespaces(OPS)]), r('Deny', [namespaces(ALL)])]))],
    conns: [
      ['ops/tool', 'shop/web', '80', 'allow default'],
      ['shop/cart', 'shop/web', '80', 'deny baseline'],
    ],
  },
  {
    name: 'nothing matches: allowed by default; selecting a pod does not isolate it',
    dir: 'ingress',
    cnps: [
      admin('a', 0, nsSubject(SHOP), shopIn([r('Deny', [namespaces(sel({ team: 'nobody' }))])])),
      baseline('b', 0, nsSubject(SHOP), shopIn([r('Deny', [namespaces(sel({ team: 'nobody' }))])])),
    ],
    conns: [
      ['ops/tool', 'shop/web', '80', 'allow default'],
      ['203.0.113.9', 'shop/web', '80', 'allow default'],
    ],
  },
]);

table('priorities: lower first; equal priorities by name', [
  {
    name: 'Deny at 20 before Accept at 30',
    dir: 'ingress',
    cnps: [
      admin('z-deny', 20, nsSubject(SHOP), shopIn([r('Deny', [namespaces(OPS)])])),
      admin('a-accept', 30, nsSubject(SHOP), shopIn([r('Accept', [namespaces(OPS)])])),
    ],
    conns: [['ops/tool', 'shop/web', '80', 'deny admin']],
  },
  {
    name: 'Accept at 20 before Deny at 30',
    dir: 'ingress',
    cnps: [
      admin('z-accept', 20, nsSubject(SHOP), shopIn([r('Accept', [namespaces(OPS)])])),
      admin('a-deny', 30, nsSubject(SHOP), shopIn([r('Deny', [namespaces(OPS)])])),
    ],
    conns: [['ops/tool', 'shop/web', '80', 'allow admin']],
  },
  {
    name: 'equal priority: "aaa" (Accept) before "bbb" (Deny)',
    dir: 'ingress',
    cnps: [
      admin('bbb', 10, nsSubject(SHOP), shopIn([r('Deny', [namespaces(OPS)])])),
      admin('aaa', 10, nsSubject(SHOP), shopIn([r('Accept', [namespaces(OPS)])])),
    ],
    conns: [['ops/tool', 'shop/web', '80', 'allow admin']],
  },
  {
    name: 'equal priority: "aaa" (Deny) before "bbb" (Accept)',
    dir: 'ingress',
    cnps: [
      admin('aaa', 10, nsSubject(SHOP), shopIn([r('Deny', [namespaces(OPS)])])),
      admin('bbb', 10, nsSubject(SHOP), shopIn([r('Accept', [namespaces(OPS)])])),
    ],
    conns: [['ops/tool', 'shop/web', '80', 'deny admin']],
  },
  {
    name: 'Baseline priorities too; any Admin policy before any Baseline one',
    dir: 'ingress',
    cnps: [
      baseline('b-accept', 1, nsSubject(SHOP), shopIn([r('Accept', [namespaces(OPS)])])),
      baseline('b-deny', 2, nsSubject(SHOP), shopIn([r('Deny', [namespaces(ALL)])])),
      admin('a-pass', 1000, nsSubject(SHOP), shopIn([r('Deny', [pods(OPS, sel({ app: 'other' }))])])),
    ],
    conns: [
      ['ops/tool', 'shop/web', '80', 'allow baseline'],
      ['ops/other', 'shop/web', '80', 'deny admin'],
      ['shop/cart', 'shop/web', '80', 'deny baseline'],
    ],
  },
]);

table('rule order within a policy', [
  {
    name: 'Accept 80 before Deny all',
    dir: 'ingress',
    cnps: [
      admin(
        'p',
        0,
        nsSubject(SHOP),
        shopIn([r('Accept', [namespaces(OPS)], { protocols: [proto('TCP', 80)] }), r('Deny', [namespaces(OPS)])]),
      ),
    ],
    nps: [npWebDenyAll],
    conns: [
      ['ops/tool', 'shop/web', '80', 'allow admin'],
      ['ops/tool', 'shop/web', '81', 'deny admin'],
    ],
  },
  {
    name: 'Deny all before Accept 80: the Accept is never reached',
    dir: 'ingress',
    cnps: [
      admin(
        'p',
        0,
        nsSubject(SHOP),
        shopIn([r('Deny', [namespaces(OPS)]), r('Accept', [namespaces(OPS)], { protocols: [proto('TCP', 80)] })]),
      ),
    ],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny admin'],
      ['ops/tool', 'shop/web', '81', 'deny admin'],
    ],
  },
]);

table('subjects', [
  {
    name: 'namespaces: every pod of the namespace',
    dir: 'ingress',
    cnps: [admin('p', 0, nsSubject(SHOP), shopIn([r('Deny', [namespaces(OPS)])]))],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny admin'],
      ['ops/tool', 'shop/cart', '80', 'deny admin'],
      ['shop/web', 'ops/other', '80', 'allow default'],
    ],
  },
  {
    name: 'pods: namespace AND pod selector',
    dir: 'ingress',
    cnps: [admin('p', 0, podSubject(SHOP, WEB), shopIn([r('Deny', [namespaces(OPS)])]))],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny admin'],
      ['ops/tool', 'shop/cart', '80', 'allow default'],
    ],
  },
  {
    name: 'a hostNetwork pod is never a subject (ingress)',
    dir: 'ingress',
    cnps: [admin('p', 0, podSubject(SHOP, WEB), shopIn([r('Deny', [namespaces(ALL)]), r('Deny', [networks('0.0.0.0/0')])]))],
    conns: [
      ['ops/tool', 'shop/hostnet', '80', 'allow default'],
      ['ops/tool', 'shop/web', '80', 'deny admin'],
    ],
  },
  {
    name: 'a hostNetwork pod is never a subject (egress)',
    dir: 'egress',
    cnps: [admin('p', 0, nsSubject(SHOP), { egress: [r('Deny', [networks('0.0.0.0/0')])] })],
    conns: [
      ['shop/hostnet', 'ops/tool', '80', 'allow default'],
      ['shop/cart', 'ops/tool', '80', 'deny admin'],
    ],
  },
]);

table('peers', [
  {
    name: 'pods: namespace AND pod selector; a hostNetwork pod is never a pod peer',
    dir: 'ingress',
    cnps: [admin('p', 0, nsSubject(OPS), shopIn([r('Deny', [pods(SHOP, WEB)])]))],
    conns: [
      ['shop/web', 'ops/tool', '80', 'deny admin'],
      ['shop/cart', 'ops/tool', '80', 'allow default'],
      ['shop/hostnet', 'ops/tool', '80', 'allow default'],
    ],
  },
  {
    name: 'namespaces: every pod of the namespaces',
    dir: 'ingress',
    cnps: [admin('p', 0, nsSubject(OPS), shopIn([r('Deny', [namespaces(SHOP)])]))],
    conns: [
      ['shop/web', 'ops/tool', '80', 'deny admin'],
      ['shop/cart', 'ops/tool', '80', 'deny admin'],
      ['ops/other', 'ops/tool', '80', 'allow default'],
      ['203.0.113.9', 'ops/tool', '80', 'allow default'],
    ],
  },
  {
    name: 'networks match pod addresses too, and any other address',
    dir: 'egress',
    cnps: [
      admin('p', 0, podSubject(SHOP, sel({ app: 'cart' })), { egress: [r('Deny', [networks('10.0.1.0/24', '203.0.113.0/24')])] }),
    ],
    conns: [
      ['shop/cart', 'shop/web', '80', 'deny admin'],
      ['shop/cart', 'ops/tool', '80', 'allow default'],
      ['shop/cart', '203.0.113.9', '80', 'deny admin'],
      ['shop/cart', '198.51.100.1', '80', 'allow default'],
    ],
  },
  {
    name: "networks match a hostNetwork pod's address",
    dir: 'egress',
    cnps: [admin('p', 0, podSubject(SHOP, sel({ app: 'cart' })), { egress: [r('Deny', [networks('192.168.0.0/24')])] })],
    conns: [['shop/cart', 'shop/hostnet', '80', 'deny admin']],
  },
  {
    name: 'nodes: the addresses of the selected nodes (a hostNetwork pod on one too)',
    dir: 'egress',
    cnps: [admin('p', 0, nsSubject(SHOP), { egress: [r('Deny', [nodes(sel({ role: 'control-plane' }))])] })],
    conns: [
      ['shop/cart', '192.168.0.2', '80', 'deny admin'],
      ['shop/cart', 'shop/hostnet', '80', 'deny admin'],
      ['shop/cart', '192.168.0.1', '80', 'allow default'],
      ['shop/cart', 'ops/tool', '80', 'allow default'],
    ],
  },
  {
    name: 'nodes {}: every node',
    dir: 'egress',
    cnps: [admin('p', 0, nsSubject(SHOP), { egress: [r('Deny', [nodes(ALL)])] })],
    conns: [
      ['shop/cart', '192.168.0.2', '80', 'deny admin'],
      ['shop/cart', '192.168.0.1', '80', 'deny admin'],
      ['shop/cart', '192.168.0.3', '80', 'allow default'],
    ],
  },
  {
    name: "traffic from the pod's own node is allowed ahead of every tier",
    dir: 'ingress',
    cnps: [admin('p', 0, nsSubject(SHOP), shopIn([r('Deny', [networks('0.0.0.0/0')])]))],
    conns: [
      ['192.168.0.1', 'shop/web', '80', 'allow default'],
      ['192.168.0.2', 'shop/web', '80', 'deny admin'],
    ],
  },
]);

table('ports', [
  {
    name: 'a number: that port of that protocol only',
    dir: 'ingress',
    cnps: [admin('p', 0, nsSubject(SHOP), shopIn([r('Deny', [namespaces(OPS)], { protocols: [proto('TCP', 80)] })]))],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny admin'],
      ['ops/tool', 'shop/web', '81', 'allow default'],
      ['ops/tool', 'shop/web', '80/UDP', 'allow default'],
    ],
  },
  {
    name: 'a range, both ends included',
    dir: 'ingress',
    cnps: [admin('p', 0, nsSubject(SHOP), shopIn([r('Deny', [namespaces(OPS)], { protocols: [proto('TCP', 8000, 8080)] })]))],
    conns: [
      ['ops/tool', 'shop/web', '7999', 'allow default'],
      ['ops/tool', 'shop/web', '8000', 'deny admin'],
      ['ops/tool', 'shop/web', '8080', 'deny admin'],
      ['ops/tool', 'shop/web', '8081', 'allow default'],
    ],
  },
  {
    name: 'a protocol without a port: every port of it',
    dir: 'ingress',
    cnps: [admin('p', 0, nsSubject(SHOP), shopIn([r('Deny', [namespaces(OPS)], { protocols: [proto('UDP')] })]))],
    conns: [
      ['ops/tool', 'shop/web', '53/UDP', 'deny admin'],
      ['ops/tool', 'shop/web', '65535/UDP', 'deny admin'],
      ['ops/tool', 'shop/web', '53/TCP', 'allow default'],
    ],
  },
  {
    name: 'no protocols: every protocol and port',
    dir: 'ingress',
    cnps: [admin('p', 0, nsSubject(SHOP), shopIn([r('Deny', [namespaces(OPS)])]))],
    conns: [
      ['ops/tool', 'shop/web', '1/TCP', 'deny admin'],
      ['ops/tool', 'shop/web', '53/UDP', 'deny admin'],
      ['ops/tool', 'shop/web', '3868/SCTP', 'deny admin'],
    ],
  },
  {
    name: 'named, ingress: resolved on the local (destination) pod',
    dir: 'ingress',
    cnps: [admin('p', 0, nsSubject(SHOP), shopIn([r('Deny', [namespaces(OPS)], { protocols: [named('http')] })]))],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny admin'],
      ['ops/tool', 'shop/web', '9090', 'allow default'],
      ['ops/tool', 'shop/web', '80/UDP', 'allow default'],
      ['ops/tool', 'shop/cart', '8080', 'deny admin'],
      ['ops/tool', 'shop/cart', '80', 'allow default'],
    ],
  },
  {
    name: 'named, egress: resolved on the peer; an address has no names',
    dir: 'egress',
    cnps: [
      admin('p', 0, nsSubject(OPS), {
        egress: [r('Deny', [namespaces(SHOP), networks('0.0.0.0/0')], { protocols: [named('http')] })],
      }),
    ],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny admin'],
      ['ops/tool', 'shop/cart', '8080', 'deny admin'],
      ['ops/tool', 'shop/cart', '80', 'allow default'],
      ['ops/tool', 'ops/other', '80', 'allow default'],
      ['ops/tool', '203.0.113.9', '80', 'allow default'],
    ],
  },
]);

table('fail closed', [
  {
    name: 'an unknown peer in Accept: the rule matches nothing',
    dir: 'ingress',
    cnps: [admin('p', 0, nsSubject(SHOP), shopIn([r('Accept', [UNKNOWN, namespaces(OPS)])]))],
    nps: [npWebDenyAll],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny networkpolicy'],
      ['ops/tool', 'shop/cart', '80', 'allow default'],
    ],
  },
  {
    name: 'an unknown peer in Deny: Deny all (every address, protocol and port)',
    dir: 'ingress',
    cnps: [admin('p', 0, nsSubject(SHOP), shopIn([r('Deny', [UNKNOWN], { protocols: [proto('TCP', 80)] })]))],
    nps: [npWebAllowAll],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny admin'],
      ['203.0.113.9', 'shop/web', '80', 'deny admin'],
      ['shop/hostnet', 'shop/web', '80', 'deny admin'],
      ['ops/tool', 'shop/web', '81', 'deny admin'],
      ['ops/tool', 'shop/web', '53/UDP', 'deny admin'],
    ],
  },
  {
    name: 'an unknown peer in Pass: Deny all, as the API says (a Pass could skip a later Deny)',
    dir: 'ingress',
    cnps: [admin('p', 0, nsSubject(SHOP), shopIn([r('Pass', [UNKNOWN]), r('Accept', [namespaces(ALL)])]))],
    nps: [npWebFromOps],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny admin'],
      ['shop/cart', 'shop/web', '80', 'deny admin'],
      ['shop/web', 'shop/cart', '80', 'deny admin'],
    ],
  },
  {
    name: 'an invalid Accept rule matches nothing',
    dir: 'ingress',
    cnps: [admin('p', 0, nsSubject(SHOP), shopIn([r('Accept', [namespaces(ALL)], { invalid: true })]))],
    nps: [npWebDenyAll],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny networkpolicy'],
      ['ops/tool', 'shop/cart', '80', 'allow default'],
    ],
  },
  {
    name: 'an invalid Deny rule matches all traffic, whatever its peers and protocols',
    dir: 'ingress',
    cnps: [
      admin(
        'p',
        0,
        nsSubject(SHOP),
        shopIn([r('Deny', [namespaces(sel({ team: 'nobody' }))], { protocols: [proto('TCP', 80)], invalid: true })]),
      ),
    ],
    nps: [npWebAllowAll],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny admin'],
      ['ops/tool', 'shop/web', '53/UDP', 'deny admin'],
      ['203.0.113.9', 'shop/cart', '9/SCTP', 'deny admin'],
    ],
  },
  {
    name: 'an invalid Pass rule is read as Deny all',
    dir: 'ingress',
    cnps: [
      admin('p', 0, nsSubject(SHOP), shopIn([r('Pass', [namespaces(OPS)], { invalid: true }), r('Accept', [namespaces(ALL)])])),
    ],
    nps: [npWebFromOps],
    conns: [
      ['ops/tool', 'shop/web', '80', 'deny admin'],
      ['shop/cart', 'shop/web', '80', 'deny admin'],
    ],
  },
  {
    name: 'domainNames are not enforced: an Accept with only domainNames matches nothing',
    dir: 'egress',
    cnps: [
      admin('p', 0, nsSubject(SHOP), { egress: [r('Accept', [domains('example.com')]), r('Deny', [networks('0.0.0.0/0')])] }),
    ],
    conns: [['shop/cart', '203.0.113.9', '443', 'deny admin']],
  },
  {
    name: 'domainNames in a Deny rule (the API allows them in Accept only): Deny all',
    dir: 'egress',
    cnps: [admin('p', 0, nsSubject(SHOP), { egress: [r('Deny', [domains('example.com')], { protocols: [proto('TCP', 443)] })] })],
    conns: [
      ['shop/cart', '203.0.113.9', '443', 'deny admin'],
      ['shop/cart', 'ops/tool', '443', 'deny admin'],
      ['shop/cart', '203.0.113.9', '80', 'deny admin'],
    ],
  },
  {
    name: 'domainNames beside other peers: those still match',
    dir: 'egress',
    cnps: [
      admin('p', 0, nsSubject(SHOP), {
        egress: [r('Accept', [domains('*.example.com'), networks('203.0.113.0/24')]), r('Deny', [networks('0.0.0.0/0')])],
      }),
    ],
    conns: [
      ['shop/cart', '203.0.113.9', '443', 'allow admin'],
      ['shop/cart', '198.51.100.1', '443', 'deny admin'],
    ],
  },
]);

// kube-router's nftables backend once let an ipBlock `except` (a deny) of one
// rule block traffic a later rule allowed. Across tiers: a Pass before a Deny
// must hand the connection to the NetworkPolicy, whose allow then wins.
const npCartEgress = policy('shop', 'cart-out', {
  podSelector: sel({ app: 'cart' }),
  egress: [rule([ipBlock('10.0.0.0/8', ['10.0.2.0/24'])]), rule([podPeer(sel({ app: 'other' }), OPS)])],
});
const npCartEgress6 = policy('shop', 'cart-out', {
  podSelector: sel({ app: 'cart' }),
  egress: [rule([ipBlock('fd00::/16', ['fd00::2:0/112'])]), rule([podPeer(sel({ app: 'other' }), OPS)])],
});
const cartSubject = podSubject(SHOP, sel({ app: 'cart' }));
const npWebFromCidr = policy('shop', 'web-from-ten', {
  podSelector: WEB,
  ingress: [rule([ipBlock('10.0.0.0/8', ['10.0.2.0/24'])], [port('TCP', 80)]), rule([podPeer(sel({ app: 'other' }), OPS)])],
});

table('an earlier Deny never blocks what a later tier allows (kube-router regression)', [
  {
    name: 'IPv4: Admin Pass 10/8, Deny 0/0; the NetworkPolicy allows 10/8 except 10.0.2/24, and ops/other by a later rule',
    dir: 'egress',
    cnps: [admin('p', 0, cartSubject, { egress: [r('Pass', [networks('10.0.0.0/8')]), r('Deny', [networks('0.0.0.0/0')])] })],
    nps: [npCartEgress],
    conns: [
      ['shop/cart', 'shop/web', '80', 'allow networkpolicy'],
      ['shop/cart', 'ops/tool', '80', 'deny networkpolicy'],
      ['shop/cart', 'ops/other', '80', 'allow networkpolicy'],
      ['shop/cart', '203.0.113.9', '80', 'deny admin'],
    ],
  },
  {
    name: 'IPv6: Admin Pass fd00::/16, Deny ::/0; the same NetworkPolicy in IPv6',
    dir: 'egress',
    family: 6,
    cnps: [admin('p', 0, cartSubject, { egress: [r('Pass', [networks('fd00::/16')]), r('Deny', [networks('::/0')])] })],
    nps: [npCartEgress6],
    conns: [
      ['shop/cart', 'shop/web', '80', 'allow networkpolicy'],
      ['shop/cart', 'ops/tool', '80', 'deny networkpolicy'],
      ['shop/cart', 'ops/other', '80', 'allow networkpolicy'],
      ['shop/cart', '2001:db8::9', '80', 'deny admin'],
    ],
  },
  {
    name: 'Admin Pass, Baseline Deny 0/0: a NetworkPolicy allow with an except, then a later rule',
    dir: 'ingress',
    cnps: [
      admin('a', 0, podSubject(SHOP, WEB), shopIn([r('Pass', [namespaces(OPS)])])),
      baseline('b', 0, nsSubject(ALL), shopIn([r('Deny', [namespaces(ALL)])])),
    ],
    nps: [npWebFromCidr],
    conns: [
      ['ops/other', 'shop/web', '80', 'allow networkpolicy'],
      ['ops/other', 'shop/web', '81', 'allow networkpolicy'],
      ['ops/tool', 'shop/web', '80', 'deny networkpolicy'],
      ['shop/cart', 'shop/web', '80', 'allow networkpolicy'],
      ['ops/tool', 'shop/cart', '80', 'deny baseline'],
    ],
  },
]);

table('IPv6', [
  {
    name: 'networks: IPv6 CIDRs match IPv6 pod addresses; IPv4 CIDRs match no IPv6 address',
    dir: 'egress',
    family: 6,
    cnps: [admin('p', 0, cartSubject, { egress: [r('Deny', [networks('fd00::1:0/112', '10.0.0.0/8')])] })],
    conns: [
      ['shop/cart', 'shop/web', '80', 'deny admin'],
      ['shop/cart', 'ops/tool', '80', 'allow default'],
      ['shop/cart', '2001:db8::9', '80', 'allow default'],
    ],
  },
  {
    name: 'nodes: the IPv6 addresses of the selected nodes',
    dir: 'egress',
    family: 6,
    cnps: [admin('p', 0, cartSubject, { egress: [r('Deny', [nodes(sel({ role: 'worker' }))])] })],
    conns: [
      ['shop/cart', 'fd00:ff::1', '80', 'deny admin'],
      ['shop/cart', 'fd00:ff::2', '80', 'allow default'],
    ],
  },
  {
    name: 'pods and tiers in IPv6',
    dir: 'ingress',
    family: 6,
    cnps: [
      admin('a', 0, nsSubject(SHOP), shopIn([r('Deny', [pods(OPS, sel({ app: 'other' }))]), r('Pass', [namespaces(OPS)])])),
      baseline('b', 0, nsSubject(SHOP), shopIn([r('Deny', [namespaces(ALL)])])),
    ],
    nps: [npWebFromOps],
    conns: [
      ['ops/other', 'shop/web', '80', 'deny admin'],
      ['ops/tool', 'shop/web', '80', 'allow networkpolicy'],
      ['ops/tool', 'shop/cart', '80', 'deny baseline'],
      ['fd00:ff::1', 'shop/web', '80', 'allow default'],
    ],
  },
]);

describe('the verdict names the tier, the rule and what a Pass handed on', () => {
  test('an Admin Deny: decidedBy carries the policy, tier, priority, rule index, name and action', () => {
    const s = withPolicies([
      admin('deny-metadata', 10, nsSubject(SHOP), {
        egress: [r('Deny', [networks('169.254.169.254/32')], { name: 'block-imds' })],
      }),
    ]);
    const v = verdict(s, endpoint(s, 'shop/cart'), endpoint(s, '169.254.169.254'), 'TCP', 80);
    assert.equal(v.allowed, false);
    assert.equal(v.egress.tier, 'admin');
    assert.deepEqual(v.egress.decidedBy, {
      policy: 'ClusterNetworkPolicy deny-metadata',
      kind: 'ClusterNetworkPolicy',
      tier: 'admin',
      priority: 10,
      direction: 'egress',
      rule: 0,
      name: 'block-imds',
      action: 'Deny',
      description: 'ClusterNetworkPolicy deny-metadata (Admin tier, priority 10) egress rule 0 "block-imds": Deny',
      notEnforced: undefined,
    });
    assert.deepEqual(v.egress.passed, []);
    assert.deepEqual(v.egress.allowedBy, []);
    assert.deepEqual(v.egress.clusterPolicies, ['ClusterNetworkPolicy deny-metadata']);
    assert.equal(
      v.egress.reason,
      'egress of shop/cart to 169.254.169.254 on port 80/TCP denied by ClusterNetworkPolicy deny-metadata (Admin tier, priority 10) egress rule 0 "block-imds": Deny.',
    );
  });

  test('an Admin Accept is the allowing rule', () => {
    const s = withPolicies([admin('ok', 3, nsSubject(SHOP), shopIn([r('Accept', [namespaces(OPS)])]))], [npWebDenyAll]);
    const v = verdict(s, endpoint(s, 'ops/tool'), endpoint(s, 'shop/web'), 'TCP', 80);
    assert.equal(v.ingress.tier, 'admin');
    assert.equal(v.ingress.isolated, true, 'a NetworkPolicy still selects it');
    assert.deepEqual(v.ingress.policies, ['shop/web-none']);
    assert.deepEqual(
      v.ingress.allowedBy.map((a) => a.description),
      ['ClusterNetworkPolicy ok (Admin tier, priority 3) ingress rule 0: Accept'],
    );
    assert.match(v.ingress.reason, /the NetworkPolicy tier, shop\/web-none, is not reached/);
  });

  test('Admin Pass, then a NetworkPolicy allow: passed names the Pass rule, tier is networkpolicy', () => {
    const s = withPolicies(
      [admin('x', 5, nsSubject(SHOP), shopIn([r('Pass', [namespaces(OPS)], { name: 'to-np' })]))],
      [npWebFromOps],
    );
    const v = verdict(s, endpoint(s, 'ops/tool'), endpoint(s, 'shop/web'), 'TCP', 80);
    assert.equal(v.ingress.allowed, true);
    assert.equal(v.ingress.tier, 'networkpolicy');
    assert.equal(v.ingress.decidedBy, undefined);
    assert.deepEqual(
      v.ingress.passed.map((p) => [p.policy, p.tier, p.priority, p.rule, p.name, p.action]),
      [['ClusterNetworkPolicy x', 'admin', 5, 0, 'to-np', 'Pass']],
    );
    assert.deepEqual(
      v.ingress.allowedBy.map((a) => a.description),
      ['shop/web-from-ops ingress[0]'],
    );
    assert.match(
      v.ingress.reason,
      /^passed by ClusterNetworkPolicy x \(Admin tier, priority 5\) ingress rule 0 "to-np": Pass to the NetworkPolicy tier; .*allowed by shop\/web-from-ops ingress\[0\]/,
    );
  });

  test('Passes in both tiers end in the default, each listed', () => {
    const s = withPolicies([
      admin('a', 1, nsSubject(SHOP), shopIn([r('Pass', [namespaces(OPS)])])),
      baseline('b', 2, nsSubject(SHOP), shopIn([r('Pass', [namespaces(OPS)])])),
    ]);
    const v = verdict(s, endpoint(s, 'ops/tool'), endpoint(s, 'shop/web'), 'TCP', 80);
    assert.equal(v.ingress.allowed, true);
    assert.equal(v.ingress.tier, 'default');
    assert.deepEqual(
      v.ingress.passed.map((p) => p.policy),
      ['ClusterNetworkPolicy a', 'ClusterNetworkPolicy b'],
    );
  });

  test('the default: the reason says what selected the pod and that nothing (further) matched', () => {
    const s = withPolicies([admin('a', 1, nsSubject(SHOP), shopIn([r('Pass', [namespaces(OPS)])]))]);
    const reason = (from: string) => verdict(s, endpoint(s, from), endpoint(s, 'shop/web'), 'TCP', 80).ingress.reason;
    assert.equal(
      reason('ops/tool'),
      'passed by ClusterNetworkPolicy a (Admin tier, priority 1) ingress rule 0: Pass to the NetworkPolicy tier; no policy of the NetworkPolicy tier selects shop/web for ingress: not isolated; no later rule matched.',
    );
    assert.equal(
      reason('shop/cart'),
      'no policy of the NetworkPolicy tier selects shop/web for ingress: not isolated; no rule of ClusterNetworkPolicy a matched.',
    );
  });

  test('notEnforced lists the reached rules that are not enforced as written', () => {
    const s = withPolicies([
      admin('dns', 0, nsSubject(SHOP), {
        egress: [r('Accept', [domains('example.com')], { name: 'web' }), r('Deny', [UNKNOWN]), r('Accept', [UNKNOWN])],
      }),
    ]);
    const v = verdict(s, endpoint(s, 'shop/cart'), endpoint(s, '203.0.113.9'), 'TCP', 443);
    assert.equal(v.egress.allowed, false);
    assert.deepEqual(v.egress.notEnforced, [
      'ClusterNetworkPolicy dns (Admin tier, priority 0) egress rule 0 "web": Accept: domainNames are not enforced by this agent',
      'ClusterNetworkPolicy dns (Admin tier, priority 0) egress rule 1: Deny: a peer of an unknown type: the rule is read as Deny all (fail closed)',
    ]);
    assert.equal(v.egress.decidedBy?.rule, 1);
  });

  test('the order of the objects in the state does not change the order of evaluation', () => {
    const a = admin('aaa', 10, nsSubject(SHOP), shopIn([r('Deny', [namespaces(OPS)])]));
    const b = admin('bbb', 10, nsSubject(SHOP), shopIn([r('Accept', [namespaces(OPS)])]));
    const c = admin('ccc', 9, nsSubject(SHOP), shopIn([r('Pass', [pods(OPS, sel({ app: 'other' }))])]));
    const orders = [
      [a, b, c],
      [c, b, a],
      [b, c, a],
    ];
    const answers = orders.map((list) => {
      const s: ClusterState = { ...BASE, clusterPolicies: list };
      return ['ops/tool', 'ops/other'].map((from) => {
        const v = verdict(s, endpoint(s, from), endpoint(s, 'shop/web'), 'TCP', 80);
        return `${v.ingress.tier} ${v.ingress.decidedBy?.policy ?? v.ingress.passed[0]?.policy ?? '-'}`;
      });
    });
    assert.deepEqual(answers, [
      ['admin ClusterNetworkPolicy aaa', 'default ClusterNetworkPolicy ccc'],
      ['admin ClusterNetworkPolicy aaa', 'default ClusterNetworkPolicy ccc'],
      ['admin ClusterNetworkPolicy aaa', 'default ClusterNetworkPolicy ccc'],
    ]);
    assert.deepEqual(
      tieredPolicies({ ...BASE, clusterPolicies: [b, a, c] }).map((p) => p.origin.name),
      ['ccc', 'aaa', 'bbb'],
    );
  });

  test('both directions: an egress Admin Deny at the source and an ingress Baseline Deny at the destination', () => {
    const s = withPolicies([
      admin('out', 0, nsSubject(OPS), { egress: [r('Deny', [namespaces(SHOP)], { protocols: [proto('TCP', 80)] })] }),
      baseline('in', 0, nsSubject(SHOP), shopIn([r('Deny', [namespaces(OPS)], { protocols: [proto('TCP', 81)] })])),
    ]);
    const v80 = verdict(s, endpoint(s, 'ops/tool'), endpoint(s, 'shop/web'), 'TCP', 80);
    const v81 = verdict(s, endpoint(s, 'ops/tool'), endpoint(s, 'shop/web'), 'TCP', 81);
    assert.deepEqual(
      [v80.allowed, v80.egress.tier, v80.ingress.tier, v81.allowed, v81.egress.tier, v81.ingress.tier],
      [false, 'admin', 'default', false, 'default', 'baseline'],
    );
  });

  test('without ClusterNetworkPolicies a verdict is as before, decided by the NetworkPolicy tier or the default', () => {
    const s = withPolicies([], [npWebFromOps]);
    const v = verdict(s, endpoint(s, 'ops/tool'), endpoint(s, 'shop/web'), 'TCP', 80);
    assert.deepEqual(
      [v.allowed, v.egress.tier, v.ingress.tier, v.ingress.passed, v.ingress.clusterPolicies, v.ingress.notEnforced],
      [true, 'default', 'networkpolicy', [], [], []],
    );
  });
});
