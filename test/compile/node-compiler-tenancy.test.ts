// The remote-pod churn path (peer-churn.ts) with tenancy on: workspace and
// project isolation, NamespaceNetworkPolicies with Service and namespace
// peers, the DNS allowance. The agent's source keeps its tenancy settings
// (the same object) while they do not change, so remote pod changes take the
// churn path here too: every compile must still equal compileNode.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { compileNode } from '../../src/compile/compile.ts';
import { NodeCompiler } from '../../src/compile/node-compiler.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { buildState } from '../../src/model/normalize.ts';
import { byObjectKey } from '../../src/model/state.ts';
import type { ClusterState, Pod } from '../../src/model/types.ts';
import { nsnpObject, TENANT_NAMESPACES, tenancyStateOf, tenancyObjects } from '../cases/tenancy-cluster.ts';

const NSNPS = [
  nsnpObject('shop', 'to-api', {
    policyTypes: ['Egress'],
    egress: [{ to: [{ service: { name: 'api', namespace: 'cart' } }] }],
  }),
  nsnpObject('shop', 'from-lab', {
    policyTypes: ['Ingress'],
    ingress: [{ from: [{ namespace: { name: 'lab' } }, { service: { name: 'db', namespace: 'lab' } }] }],
  }),
];

/** A remote pod (node-2), normalized alone. */
function remotePod(ns: string, name: string, labels: Record<string, string>, ip: number): Pod {
  const raw = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels },
    spec: { nodeName: 'node-2', containers: [{ name: 'main', image: 'x', ports: [{ name: 'http', containerPort: 8080 }] }] },
    status: { phase: 'Running', podIPs: [{ ip: `10.244.2.${ip}` }, { ip: `fd00:10:244:2::${ip.toString(16)}` }] },
  };
  const p = buildState([{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }, raw]).state.pods.at(0);
  if (p === undefined) throw new Error('pod did not normalize');
  return p;
}

type Op =
  | { readonly op: 'add'; readonly ns: string; readonly app: string; readonly ip: number }
  | { readonly op: 'delete'; readonly at: number }
  | { readonly op: 'relabel'; readonly at: number; readonly app: string };

const NSS = [...TENANT_NAMESPACES, 'kube-system'];
const APPS = [...TENANT_NAMESPACES, 'kube-dns'];

test('property: with tenancy on, remote pod churn equals compileNode after every change', () => {
  const base = tenancyStateOf(tenancyObjects({ isolatedWorkspaces: ['acme'], isolatedProjects: ['lab'], extra: NSNPS }));
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.record({
      op: fc.constant('add' as const),
      ns: fc.constantFrom(...NSS),
      app: fc.constantFrom(...APPS),
      ip: fc.integer({ min: 100, max: 140 }),
    }),
    fc.record({ op: fc.constant('delete' as const), at: fc.nat() }),
    fc.record({ op: fc.constant('relabel' as const), at: fc.nat(), app: fc.constantFrom(...APPS) }),
  );
  let churn = 0;
  let other = 0;
  // Churn steps that changed the ruleset: the stream must reach the peer sets, not only pods nothing names.
  let changed = 0;
  fc.assert(
    fc.property(fc.array(opArb, { minLength: 5, maxLength: 30 }), (ops) => {
      let pods: Pod[] = [...base.pods];
      let seq = 0;
      const nc = new NodeCompiler('node-1');
      let last = renderRuleset(nc.compile(base));
      ops.forEach((op, i) => {
        const remote = pods.filter((p) => p.nodeName === 'node-2' && p.name.startsWith('x'));
        if (op.op === 'add') {
          const labels: Record<string, string> = op.app === 'kube-dns' ? { 'k8s-app': 'kube-dns' } : { app: op.app };
          pods = [...pods, remotePod(op.ns, `x${seq++}`, labels, op.ip)];
        } else if (remote.length > 0) {
          const victim = remote[op.at % remote.length] as Pod;
          pods = pods.filter((p) => p !== victim);
          if (op.op === 'relabel') {
            const labels: Record<string, string> = op.app === 'kube-dns' ? { 'k8s-app': 'kube-dns' } : { app: op.app };
            pods.push(remotePod(victim.namespace, victim.name, labels, Number(victim.ips[0]?.split('.')[3] ?? 100)));
          }
        }
        pods.sort(byObjectKey);
        // Everything else the same objects, as the agent's source keeps them.
        const s: ClusterState = { ...base, pods };
        const got = renderRuleset(nc.compile(s));
        if (nc.lastMode === 'churn') churn++;
        else other++;
        if (nc.lastMode === 'churn' && got !== last) changed++;
        last = got;
        assert.equal(got, renderRuleset(compileNode(s, 'node-1')), `after step ${i}: ${JSON.stringify(op)}`);
      });
    }),
    { numRuns: 100, seed: 20261127 },
  );
  assert.ok(churn > other, `churn ${churn}, other ${other}`);
  assert.ok(changed > churn / 4, `churn ${churn}, of which changed the ruleset ${changed}`);
});
