// Tenancy with real packets: two workspaces of two namespaces each on two
// nodes (test/cases/tenancy-cluster.ts), both pod-network styles, IPv4 and
// IPv6, through a ClusterIP and to pod IPs. Each step's rulesets are applied
// as the agent applies them and every probe must end as the reference
// evaluator says; a few hand-written expectations per step make sure the
// oracle says what docs/tenancy.md says. Then real agents (one per node,
// watching the fake API server) enforce changes made while they run:
// isolation switched on and off, a namespace relabelled into another
// workspace, a service's selector changed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ClusterState, Family, Protocol } from '../../src/model/types.ts';
import { verdict } from '../../src/policy/verdict.ts';
import type { Endpoint } from '../../src/policy/verdict.ts';
import { agentCluster } from '../agent/agent-cluster.ts';
import { eventually } from '../agent/agent-process.ts';
import {
  namespaceObject,
  NODES,
  nsnpObject,
  serviceObject,
  tenancyObjects,
  tenancyStateOf,
  workspaceObject,
} from '../cases/tenancy-cluster.ts';
import type { Raw, TenancyOptions } from '../cases/tenancy-cluster.ts';
import { checkProbes } from '../harness/check.ts';
import type { Expectation } from '../harness/check.ts';
import { Cluster, NETWORK_STYLES } from '../harness/cluster.ts';
import type { ClusterSpec, NetworkStyle } from '../harness/cluster.ts';
import { applyState } from '../harness/enforce.ts';
import { clusterSpecFromState } from '../harness/from-state.ts';
import { nodeKey, resolveProbe } from '../harness/probe.ts';
import type { Probe } from '../harness/probe.ts';
import { datapathSkip, requireDatapath } from '../harness/requirements.ts';
import type { KubeObject } from '../support/fake-apiserver.ts';

const skip = datapathSkip();

function stateOf(objects: readonly Raw[]): ClusterState {
  return tenancyStateOf(objects);
}

/** The harness cluster for the tenancy objects; cart's pods also serve Service port 80 -> their `http` port. */
function spec(style: NetworkStyle): ClusterSpec {
  const base = clusterSpecFromState(stateOf(tenancyObjects()), style);
  return {
    ...base,
    pods: base.pods.map((p) => {
      if (!p.key.startsWith('cart/')) return p;
      const http = p.key === 'cart/a' ? 8080 : 9090;
      const same = [...(p.tcp ?? []), 80, 81]
        .filter((x) => x !== 80)
        .map((port) => ({ protocol: 'TCP' as const, port, targetPort: port }));
      return {
        ...p,
        services: [
          { protocol: 'TCP', port: 80, targetPort: http },
          ...same,
          ...[80, 81].map((port) => ({ protocol: 'UDP' as const, port, targetPort: port })),
        ],
      };
    }),
  };
}

const SOURCES = ['shop/a', 'shop/b', 'cart/b', 'lab/a', 'ml/b', nodeKey('node-2')];
const DESTS: readonly (readonly [string, Protocol, number])[] = [
  ['shop/a', 'TCP', 8080],
  ['shop/b', 'TCP', 9090],
  ['cart/a', 'TCP', 8080],
  ['cart/b', 'TCP', 9090],
  ['lab/b', 'TCP', 9090],
  ['ml/a', 'TCP', 8080],
  ['kube-system/coredns-0', 'UDP', 53],
  ['kube-system/coredns-0', 'TCP', 53],
  [nodeKey('node-1'), 'TCP', 80],
];

function endpoint(c: Cluster, state: ClusterState, key: string, family: Family): Endpoint {
  if (key.startsWith('node:')) {
    const n = c.node(key.slice(5));
    return { kind: 'ip', ip: family === 4 ? n.addresses.v4 : n.addresses.v6 };
  }
  const pod = state.pods.find((p) => `${p.namespace}/${p.name}` === key);
  if (pod === undefined) throw new Error(`no pod ${key}`);
  return { kind: 'pod', pod };
}

/** Every probe of the matrix (and cart's Service port 80), expected as the oracle says after DNAT. */
function oracleExpectations(c: Cluster, state: ClusterState, families: readonly Family[] = [4, 6]): Expectation[] {
  const out: Expectation[] = [];
  for (const family of families) {
    for (const via of ['service', 'pod'] as const) {
      for (const from of SOURCES) {
        const dests = [
          ...DESTS,
          ...(via === 'service'
            ? ([
                ['cart/a', 'TCP', 80],
                ['cart/b', 'TCP', 80],
              ] as const)
            : []),
        ];
        for (const [to, protocol, port] of dests) {
          if (from === to) continue;
          const probe: Probe = { from, to, protocol, port, family, via };
          const r = resolveProbe(c, probe);
          const v = verdict(state, endpoint(c, state, from, family), endpoint(c, state, to, family), protocol, r.targetPort, {
            family,
          });
          out.push({
            probe,
            allowed: v.allowed,
            why: v.allowed ? 'oracle: allowed' : `oracle: ${v.egress.allowed ? v.ingress.reason : v.egress.reason}`,
          });
        }
      }
    }
  }
  return out;
}

type Must = readonly [from: string, to: string, port: number, allowed: boolean];

/** Hand-written: the oracle says what the semantics say (IPv4 and IPv6, pod IPs). */
function checkMust(c: Cluster, state: ClusterState, must: readonly Must[]): void {
  for (const family of [4, 6] as const) {
    for (const [from, to, port, allowed] of must) {
      const proto: Protocol = port === 53 ? 'UDP' : 'TCP';
      const v = verdict(state, endpoint(c, state, from, family), endpoint(c, state, to, family), proto, port, { family });
      assert.equal(v.allowed, allowed, `IPv${family} ${from} -> ${to}:${port}: ${v.egress.reason} / ${v.ingress.reason}`);
    }
  }
}

const TENANT_POLICY: Raw = {
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  metadata: { namespace: 'shop', name: 'egress-to-lab' },
  spec: {
    podSelector: {},
    policyTypes: ['Egress'],
    egress: [{ to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'lab' } } }] }],
  },
};
const LAB_FROM_ACME: Raw = {
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  metadata: { namespace: 'lab', name: 'from-shop' },
  spec: {
    podSelector: {},
    ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'shop' } } }] }],
  },
};
const SVC_NSNP = nsnpObject('shop', 'to-api', {
  policyTypes: ['Egress'],
  egress: [{ to: [{ service: { name: 'api', namespace: 'cart' } }] }],
});

const STEPS: readonly { name: string; o: TenancyOptions; must: readonly Must[] }[] = [
  {
    name: 'project isolation of shop',
    o: { isolatedProjects: ['shop'] },
    must: [
      ['shop/a', 'shop/b', 9090, true],
      ['shop/a', 'cart/b', 9090, false],
      ['lab/a', 'shop/a', 8080, false],
      ['lab/a', 'cart/b', 9090, true],
      ['node:node-2', 'shop/a', 8080, true],
      ['shop/a', 'kube-system/coredns-0', 53, true],
    ],
  },
  {
    name: 'workspace isolation of acme',
    o: { isolatedWorkspaces: ['acme'] },
    must: [
      ['shop/a', 'cart/b', 9090, true],
      ['lab/a', 'cart/b', 9090, false],
      ['cart/a', 'ml/a', 8080, false],
      ['node:node-2', 'cart/a', 8080, true],
    ],
  },
  {
    name: 'both: acme isolated, shop project-isolated',
    o: { isolatedWorkspaces: ['acme'], isolatedProjects: ['shop'] },
    must: [
      ['shop/a', 'cart/b', 9090, false],
      ['cart/a', 'cart/b', 9090, true],
      ['cart/b', 'shop/a', 8080, false],
    ],
  },
  {
    name: 'a tenant NetworkPolicy opens one extra path out of isolation',
    o: { isolatedWorkspaces: ['acme', 'beta'], extra: [TENANT_POLICY, LAB_FROM_ACME] },
    must: [
      ['shop/a', 'lab/b', 9090, true],
      ['cart/a', 'lab/b', 9090, false],
      ['shop/a', 'ml/a', 8080, false],
    ],
  },
  {
    name: 'a NamespaceNetworkPolicy with a service peer (target ports, named per pod)',
    o: { extra: [SVC_NSNP] },
    must: [
      ['shop/a', 'cart/a', 8080, true],
      ['shop/a', 'cart/b', 9090, true],
      ['shop/a', 'cart/a', 9090, false],
      ['shop/a', 'lab/b', 9090, false],
      ['lab/a', 'cart/a', 8080, true],
    ],
  },
];

for (const style of NETWORK_STYLES) {
  describe(`tenancy, ${style} pod network`, { skip }, () => {
    let c: Cluster;
    before(async () => {
      c = await Cluster.create(spec(style));
    });
    after(async () => {
      await c?.destroy();
    });
    for (const step of STEPS) {
      test(step.name, async () => {
        const state = stateOf(tenancyObjects(step.o));
        checkMust(c, state, step.must);
        await applyState(c, state);
        const exps = oracleExpectations(c, state);
        assert.ok(exps.some((e) => e.allowed) && exps.some((e) => !e.allowed));
        const wrong = await checkProbes(c, exps);
        if (wrong.length > 0) assert.fail(`${step.name}: ${wrong.length} of ${exps.length} probes differ\n${wrong.join('\n')}`);
      });
    }
  });
}

for (const style of NETWORK_STYLES)
  test(`real agents enforce tenancy changes made while they run, ${style} pod network`, { timeout: 300_000 }, async (t) => {
    if (!requireDatapath(t)) return;
    const { c, api, agents, startAgents, expectProbes } = await agentCluster(t, spec(style));
    let o: TenancyOptions = { extra: [SVC_NSNP] };
    api.load(tenancyObjects(o) as KubeObject[]);
    await startAgents(['--deny-action', 'reject', '--drift-interval', '1s']);

    const expect = async (step: string, must: readonly Must[]): Promise<void> => {
      const state = stateOf(tenancyObjects(o));
      checkMust(c, state, must);
      const exps = oracleExpectations(c, state, [4, 6]).filter((e) => e.probe.via === 'pod' || e.probe.family === 4);
      await expectProbes(step, exps);
    };

    await expect('no isolation; NSNP on shop egress', [
      ['shop/a', 'cart/a', 8080, true],
      ['shop/a', 'lab/b', 9090, false],
      ['lab/a', 'shop/a', 8080, true],
    ]);

    o = { ...o, isolatedWorkspaces: ['acme'] };
    api.apply('workspaces', workspaceObject('acme', true) as KubeObject);
    await expect('workspace isolation switched on', [
      ['lab/a', 'cart/b', 9090, false],
      ['shop/a', 'cart/b', 9090, true],
    ]);

    o = { ...o, workspaceOf: { cart: 'beta' } };
    api.apply('namespaces', namespaceObject('cart', 'beta', false) as KubeObject);
    await expect('cart relabelled into workspace beta', [
      ['lab/a', 'cart/b', 9090, true],
      ['cart/a', 'shop/b', 9090, false], // shop is in isolated acme, cart no longer
    ]);

    o = { ...o, isolatedProjects: ['lab'] };
    api.apply('namespaces', namespaceObject('lab', 'beta', true) as KubeObject);
    await expect('project isolation of lab switched on', [
      ['cart/a', 'lab/b', 9090, false],
      ['lab/a', 'lab/b', 9090, true],
    ]);

    o = { ...o, isolatedProjects: [] };
    api.apply('namespaces', namespaceObject('lab', 'beta', false) as KubeObject);
    await expect('annotation removed', [['cart/a', 'lab/b', 9090, true]]);

    o = { ...o, isolatedWorkspaces: [] };
    api.apply('workspaces', workspaceObject('acme', false) as KubeObject);
    await expect('workspace isolation switched off', [
      ['lab/a', 'shop/b', 9090, true],
      ['shop/a', 'cart/a', 8080, true], // the NSNP's service peer
    ]);

    o = { ...o, apiSelector: { app: 'nobody' } };
    api.apply(
      'services',
      serviceObject('cart', 'api', { app: 'nobody' }, [
        { name: 'web', port: 80, protocol: 'TCP', targetPort: 'http' },
      ]) as KubeObject,
    );
    await expect('service selector changed to select nothing', [
      ['shop/a', 'cart/a', 8080, false],
      ['shop/a', 'cart/b', 9090, false],
    ]);
    for (const a of agents) assert.equal(await a.metric('nftnp_nft_restore_errors_total'), 0);
    assert.ok(NODES.length === 2);
  });

test('a real agent starts without the tenancy CRDs and enforces them once installed', { timeout: 180_000 }, async (t) => {
  if (!requireDatapath(t)) return;
  const { c, api, agents, startAgents } = await agentCluster(t, spec('routed'), { crds: [] });
  // The Workspace is stored, but not served until its CRD is installed.
  api.load(tenancyObjects({ isolatedWorkspaces: ['acme'] }) as KubeObject[]);
  await startAgents(['--deny-action', 'reject', '--drift-interval', '1s', '--crd-recheck', '1s']);
  const lab = (allowed: boolean): Expectation => ({
    probe: { from: 'lab/a', to: 'shop/b', protocol: 'TCP', port: 9090, family: 4, via: 'pod' },
    allowed,
  });
  assert.deepEqual(await checkProbes(c, [lab(true)]), [], 'no Workspace served: acme is not isolated');
  const state = await agents[0]!.get('/debug/state?format=text');
  assert.match(state.body, /workspaces \(not installed\)/);

  api.installCRDs();
  let last: string[] = [];
  await eventually(
    'the Workspace picked up',
    async () => {
      last = await checkProbes(c, [lab(false)]);
      return last.length === 0;
    },
    60_000,
  ).catch(() => assert.fail(`${last.join('\n')}\n${agents[1]?.tail(20) ?? ''}`));
  // node-1 runs lab/a and, for its own isolated pods, watches acme's pods: it knows both ends
  // once its pod watches follow the new plan (the denial above may come from node-2 first).
  let explained = '';
  await eventually(
    'node-1 explains the denial by the workspace',
    async () => {
      explained = (await agents[0]!.get('/debug/explain?from=lab/a&to=shop/b&port=9090/TCP&format=text')).body;
      return /denied: workspace acme is isolated and lab is not in it/.test(explained);
    },
    30_000,
  ).catch(() => assert.fail(`node-1's explain: ${explained}`));
  for (const a of agents) assert.equal(await a.metric('nftnp_nft_restore_errors_total'), 0);
});
