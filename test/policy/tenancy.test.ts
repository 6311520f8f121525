// Truth tables for tenancy (docs/tenancy.md): project isolation, workspace
// isolation, both, DNS, node addresses, NamespaceNetworkPolicy with service
// peers, and the changes (selector, relabel, annotation removed), judged by
// the reference evaluator on the tenancy cluster.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ClusterState, Family, Protocol } from '../../src/model/types.ts';
import { explainText, parseEndpoint } from '../../src/policy/explain.ts';
import { verdict } from '../../src/policy/verdict.ts';
import type { Verdict } from '../../src/policy/verdict.ts';
import { DEFAULT_TENANCY } from '../../src/model/tenancy-config.ts';
import { namespacePolicyErrors } from '../../src/kinds/tenancy.ts';
import { nsnpObject, tenancyState } from '../cases/tenancy-cluster.ts';
import type { TenancyOptions } from '../cases/tenancy-cluster.ts';

function judge(s: ClusterState, from: string, to: string, port: number, protocol: Protocol = 'TCP', family: Family = 4): Verdict {
  const f = parseEndpoint(s, from);
  const t = parseEndpoint(s, to);
  assert.ok(f.ok && t.ok, `${from} / ${to}`);
  return verdict(s, f.value, t.value, protocol, port, { family });
}

type Row = readonly [from: string, to: string, port: number, allowed: boolean, protocol?: Protocol, only?: Family];

function table(name: string, o: TenancyOptions, rows: readonly Row[]): void {
  test(name, () => {
    const s = tenancyState(o);
    for (const family of [4, 6] as const) {
      for (const [from, to, port, want, proto, only] of rows) {
        if (only !== undefined && only !== family) continue;
        // IP endpoints are written as IPv4: only judge them in their own family.
        if (/^\d/.test(from) || /^\d/.test(to)) {
          if (family === 6) continue;
        }
        const v = judge(s, from, to, port, proto ?? 'TCP', family);
        assert.equal(v.allowed, want, `IPv${family} ${from} -> ${to}:${port}: ${v.egress.reason} / ${v.ingress.reason}`);
      }
    }
  });
}

table('no isolation: everything flows', {}, [
  ['shop/a', 'lab/b', 9090, true],
  ['lab/a', 'shop/b', 9090, true],
  ['shop/a', '8.8.8.8', 443, true],
]);

table('project isolation: same namespace both ways, nothing else', { isolatedProjects: ['shop'] }, [
  ['shop/a', 'shop/b', 9090, true],
  ['shop/b', 'shop/a', 8080, true],
  ['shop/a', 'cart/b', 9090, false], // same workspace, other namespace
  ['cart/a', 'shop/b', 9090, false],
  ['lab/a', 'shop/a', 8080, false],
  ['shop/a', 'lab/a', 8080, false],
  ['lab/a', 'cart/b', 9090, true], // others unaffected
  ['shop/a', '8.8.8.8', 443, false],
]);

table('workspace isolation: same workspace allowed, other workspace not', { isolatedWorkspaces: ['acme'] }, [
  ['shop/a', 'cart/b', 9090, true],
  ['cart/b', 'shop/a', 8080, true],
  ['shop/a', 'shop/b', 9090, true],
  ['lab/a', 'shop/a', 8080, false],
  ['shop/a', 'lab/a', 8080, false],
  ['lab/a', 'ml/b', 9090, true], // beta is not isolated
  ['cart/a', '8.8.8.8', 53, false, 'UDP'],
]);

table('both workspaces isolated', { isolatedWorkspaces: ['acme', 'beta'] }, [
  ['shop/a', 'cart/b', 9090, true],
  ['lab/a', 'ml/b', 9090, true],
  ['lab/a', 'cart/a', 8080, false],
  ['cart/a', 'ml/b', 9090, false],
]);

table('v1alpha2 WorkspaceTemplate shape isolates the same way', { isolatedWorkspaces: ['acme'], workspaceVersion: 'v1alpha2' }, [
  ['shop/a', 'cart/b', 9090, true],
  ['lab/a', 'shop/a', 8080, false],
]);

table(
  'project and workspace isolation on one namespace: project wins',
  { isolatedWorkspaces: ['acme'], isolatedProjects: ['shop'] },
  [
    ['shop/a', 'shop/b', 9090, true],
    ['shop/a', 'cart/b', 9090, false], // the workspace would allow it; the project does not
    ['cart/a', 'shop/b', 9090, false],
    ['cart/a', 'cart/b', 9090, true],
    ['cart/a', 'lab/a', 8080, false],
  ],
);

table(
  'DNS: TCP and UDP 53 to the cluster DNS pods and node-local DNS, nothing else',
  { isolatedWorkspaces: ['acme'], isolatedProjects: ['lab'] },
  [
    ['shop/a', 'kube-system/coredns-0', 53, true, 'UDP'],
    ['shop/a', 'kube-system/coredns-0', 53, true, 'TCP'],
    ['lab/a', 'kube-system/coredns-0', 53, true, 'UDP'],
    ['shop/a', 'kube-system/coredns-0', 9153, false],
    ['shop/a', '169.254.25.10', 53, true, 'UDP'],
    ['shop/a', '169.254.25.10', 80, false],
    ['shop/a', '8.8.8.8', 53, false, 'UDP'],
    ['kube-system/coredns-0', 'shop/a', 8080, false], // DNS is egress only
  ],
);

table('node addresses: probes and host-network traffic both ways', { isolatedWorkspaces: ['acme'], isolatedProjects: ['lab'] }, [
  ['192.168.56.12', 'shop/a', 8080, true], // another node's address (the own node passes anyway)
  ['192.168.56.11', 'lab/b', 9090, true],
  ['shop/a', '192.168.56.12', 10250, true],
  ['lab/b', '192.168.56.11', 6443, true],
  ['192.168.56.99', 'shop/a', 8080, false],
]);

test('node addresses are configurable: none, or all address types', () => {
  const o = { isolatedWorkspaces: ['acme'] };
  const none = tenancyState(o, { ...DEFAULT_TENANCY, nodeLocalDNS: [], dnsService: undefined });
  assert.equal(judge(none, 'shop/a', 'kube-system/coredns-0', 53, 'UDP').allowed, false);
  assert.equal(judge(none, 'shop/a', '169.254.25.10', 53, 'UDP').allowed, false);
  assert.equal(judge(none, 'shop/a', '192.168.56.12', 10250).allowed, true);
});

const SERVICE_PEERS = nsnpObject('shop', 'to-services', {
  policyTypes: ['Egress'],
  egress: [{ to: [{ service: { name: 'api', namespace: 'cart' } }, { service: { name: 'db', namespace: 'lab' } }] }],
});

table('NamespaceNetworkPolicy service peers: named target ports per pod, numeric target ports', { extra: [SERVICE_PEERS] }, [
  ['shop/a', 'cart/a', 8080, true], // http is 8080 on cart/a
  ['shop/a', 'cart/b', 9090, true], // and 9090 on cart/b
  ['shop/a', 'cart/a', 9090, false],
  ['shop/a', 'cart/b', 8080, false],
  ['shop/a', 'cart/a', 80, false], // the service port is never seen after DNAT
  ['shop/a', 'lab/b', 15432, true],
  ['shop/a', 'lab/b', 5432, false],
  ['shop/a', 'ml/a', 8080, false],
  ['cart/a', 'lab/b', 9090, true], // cart is not selected
]);

table(
  'NamespaceNetworkPolicy: namespace and ipBlock peers, ports with endPort, ingress from a service',
  {
    extra: [
      nsnpObject('lab', 'in', {
        ingress: [
          { from: [{ namespace: { name: 'ml' } }], ports: [{ port: 8000, endPort: 8100 }] },
          { from: [{ service: { name: 'api', namespace: 'cart' } }] },
          { from: [{ ipBlock: { cidr: '10.244.1.0/24', except: ['10.244.1.13/32'] } }], ports: [{ port: 9090 }] },
        ],
      }),
    ],
  },
  [
    ['ml/b', 'lab/a', 8080, true],
    ['ml/b', 'lab/b', 9090, false],
    ['cart/b', 'lab/b', 9090, true],
    ['shop/a', 'lab/b', 9090, true, 'TCP', 4], // 10.244.1.10 in the ipBlock
    ['shop/a', 'lab/b', 9090, false, 'TCP', 6], // an IPv4 block
    ['ml/a', 'lab/b', 9090, false], // 10.244.1.13 is excepted
    ['shop/b', 'lab/b', 9090, false],
    ['lab/b', 'lab/a', 8080, false], // an NSNP selects every pod of its namespace; no rule allows lab itself
  ],
);

test('missing service, or one without a selector, allows nothing, with a validation message', () => {
  const pol = nsnpObject('shop', 'missing', {
    policyTypes: ['Egress'],
    egress: [{ to: [{ service: { name: 'nope', namespace: 'cart' } }, { service: { name: 'manual', namespace: 'cart' } }] }],
  });
  const s = tenancyState({ extra: [pol] }, DEFAULT_TENANCY, true);
  for (const [to, port] of [
    ['cart/a', 8080],
    ['cart/b', 80],
    ['lab/a', 8080],
  ] as const) {
    assert.equal(judge(s, 'shop/a', to, port).allowed, false, to);
  }
  assert.deepEqual(
    namespacePolicyErrors(s).map((e) => `${e.path}: ${e.message}`),
    [
      'spec.egress[0].to[0].service: Service cart/nope not found: this peer allows nothing',
      'spec.egress[0].to[1].service: Service cart/manual has no selector (it selects no pods): this peer allows nothing',
    ],
  );
});

test('service selector changed: the allowed pods follow it (within the service namespace)', () => {
  const v2 = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { namespace: 'cart', name: 'c', labels: { app: 'cart-v2' } },
    spec: { nodeName: 'node-1', containers: [{ name: 'm', ports: [{ name: 'http', containerPort: 7070 }] }] },
    status: { phase: 'Running', podIPs: [{ ip: '10.244.1.30' }] },
  };
  const before = tenancyState({ extra: [SERVICE_PEERS, v2] });
  const after = tenancyState({ extra: [SERVICE_PEERS, v2], apiSelector: { app: 'cart-v2' } });
  assert.equal(judge(before, 'shop/a', 'cart/a', 8080).allowed, true);
  assert.equal(judge(before, 'shop/a', 'cart/c', 7070).allowed, false);
  assert.equal(judge(after, 'shop/a', 'cart/a', 8080).allowed, false);
  assert.equal(judge(after, 'shop/a', 'cart/c', 7070).allowed, true);
  // A selector matching pods in another namespace selects nothing there: a Service's pods are its own namespace's.
  const elsewhere = tenancyState({ extra: [SERVICE_PEERS], apiSelector: { app: 'ml' } });
  assert.equal(judge(elsewhere, 'shop/a', 'ml/a', 8080).allowed, false);
});

test('namespace moved from one workspace to another: isolation follows the label', () => {
  const o = { isolatedWorkspaces: ['acme', 'beta'] };
  const before = tenancyState(o);
  const after = tenancyState({ ...o, workspaceOf: { cart: 'beta' } });
  assert.equal(judge(before, 'shop/a', 'cart/b', 9090).allowed, true);
  assert.equal(judge(after, 'shop/a', 'cart/b', 9090).allowed, false);
  assert.equal(judge(after, 'lab/a', 'cart/b', 9090).allowed, true);
  // Out of every workspace: not isolated any more, but isolated workspaces still refuse it.
  const out = tenancyState({ ...o, workspaceOf: { cart: null } });
  assert.equal(judge(out, 'cart/a', '8.8.8.8', 443).allowed, true);
  assert.equal(judge(out, 'cart/a', 'shop/b', 9090).allowed, false);
});

test('annotation removed: project isolation ends', () => {
  const on = tenancyState({ isolatedProjects: ['shop'] });
  const off = tenancyState({});
  assert.equal(judge(on, 'lab/a', 'shop/b', 9090).allowed, false);
  assert.equal(judge(off, 'lab/a', 'shop/b', 9090).allowed, true);
});

test('a tenant NetworkPolicy opens more than isolation allows; user policies stay in force', () => {
  const open = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { namespace: 'shop', name: 'egress-to-lab' },
    spec: {
      podSelector: {},
      policyTypes: ['Egress'],
      egress: [{ to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'lab' } } }] }],
    },
  };
  const inLab = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { namespace: 'lab', name: 'from-shop' },
    spec: {
      podSelector: {},
      ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubesphere.io/workspace': 'acme' } } }] }],
    },
  };
  const s = tenancyState({ isolatedWorkspaces: ['acme'], extra: [open, inLab] });
  assert.equal(judge(s, 'shop/a', 'lab/b', 9090).allowed, true);
  assert.equal(judge(s, 'cart/a', 'lab/b', 9090).allowed, false); // cart has no such policy
  assert.equal(judge(s, 'ml/a', 'lab/b', 9090).allowed, false); // lab's own policy isolates it
});

test('explain names every implicit allowance and denial by its cause', () => {
  const s = tenancyState({ isolatedWorkspaces: ['acme'], isolatedProjects: ['shop', 'lab'] });
  const text = (from: string, to: string, port: number, proto: Protocol = 'TCP'): string => {
    const f = parseEndpoint(s, from);
    const t = parseEndpoint(s, to);
    assert.ok(f.ok && t.ok);
    return explainText(verdict(s, f.value, t.value, proto, port), f.value, t.value);
  };
  assert.match(
    text('shop/a', 'shop/b', 9090),
    /allowed by project isolation of ns shop \(not that of workspace acme\): same namespace/,
  );
  assert.match(
    text('cart/a', 'shop/b', 9090),
    /denied: project shop is isolated \(project isolation applies, not that of workspace acme\) and cart is another namespace/,
  );
  assert.match(
    text('cart/a', 'ml/b', 9090),
    /denied: workspace acme is isolated and ml is not in it \(it is in workspace beta\)/,
  );
  assert.match(
    text('cart/a', 'kube-system/coredns-0', 53, 'UDP'),
    /workspace isolation of acme: DNS to the cluster DNS \(pods of Service kube-system\/kube-dns\)/,
  );
  assert.match(text('192.168.56.12', 'lab/a', 8080), /project isolation of ns lab: the nodes' internal addresses/);
});
