// The agent's side of tenancy: NamespaceNetworkPolicy errors become their own
// invalid-object reports (key, Event kind, the nodes that report them), and
// /debug/state lists every tenancy policy of the local namespaces by cause.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { diffInvalid, eventMessage, invalidKey, reportsEventFor } from '../../src/agent/invalid-policies.ts';
import { Reconciler } from '../../src/agent/reconciler.ts';
import { debugHandler, type AgentView } from '../../src/agent/debug-server.ts';
import { closeServer, listen } from '../../src/observability/http-server.ts';
import { renderNode } from '../support/render-node.ts';
import { nsnpObject, tenancyState } from '../cases/tenancy-cluster.ts';
import { DEFAULT_TENANCY } from '../../src/model/tenancy-config.ts';
import { captureLogger, FakeDataplane, FakeEvents, FakeSource, testMetrics, waitFor } from './fakes.ts';

const MISSING = nsnpObject('shop', 'to-nowhere', {
  policyTypes: ['Egress'],
  egress: [{ to: [{ service: { name: 'nope', namespace: 'cart' } }] }],
});

test('an NSNP with a missing Service is an invalid NamespaceNetworkPolicy, reported by nodes with pods in its namespace', () => {
  const s = tenancyState({ extra: [MISSING] }, DEFAULT_TENANCY, true);
  const d = diffInvalid(new Map(), s);
  assert.equal(d.all.length, 1);
  const inv = d.all[0]!;
  assert.equal(invalidKey(inv), 'NamespaceNetworkPolicy:shop/to-nowhere');
  assert.deepEqual(inv.object, { apiVersion: 'network.kubesphere.io/v1alpha1', kind: 'NamespaceNetworkPolicy' });
  assert.match(
    eventMessage(inv),
    /^NamespaceNetworkPolicy is invalid .*spec\.egress\[0\]\.to\[0\]\.service: Service cart\/nope not found/,
  );
  assert.equal(reportsEventFor(s, 'node-1', invalidKey(inv)), true, 'shop/a runs on node-1');
  assert.equal(reportsEventFor(s, 'node-3', invalidKey(inv)), false);
  // Tenancy off: nothing derived, nothing reported.
  const { tenancy: _off, ...off } = s;
  assert.equal(diffInvalid(new Map(), off).all.length, 0);
});

test('/debug/state lists the tenancy policies of the local namespaces with every rule by cause', async (t) => {
  const s = tenancyState({ isolatedWorkspaces: ['acme'], isolatedProjects: ['lab'], extra: [MISSING] }, DEFAULT_TENANCY, true);
  const source = new FakeSource(s);
  const { port: mport } = testMetrics();
  const { log } = captureLogger();
  const r = new Reconciler(
    {
      source,
      render: (st) => renderNode(st, 'node-1'),
      dataplane: new FakeDataplane(),
      metrics: mport,
      log,
      events: new FakeEvents(),
    },
    { nodeName: 'node-1', debounceMs: 1, driftIntervalMs: 0, syncPollMs: 5 },
  );
  const view: AgentView = {
    nodeName: 'node-1',
    table: 'nft-netpol',
    health: () => r.health(),
    ready: () => r.ready(),
    status: () => r.status(),
    snapshot: () => source.snapshot(),
    watches: () => [],
    lastAppliedText: () => r.lastAppliedText(),
    lastFailedText: () => r.lastFailedText(),
    kernelMatches: () => r.kernelMatches(),
  };
  const d = await listen(
    debugHandler(view, () => undefined),
    '127.0.0.1',
    0,
    'debug',
  );
  const servers: Server[] = [d.server];
  t.after(async () => {
    await r.stop(1000);
    for (const srv of servers) await closeServer(srv);
  });
  r.start();
  await waitFor('ready', () => r.ready());
  const text = await (await fetch(`http://127.0.0.1:${d.port}/debug/state?format=text`)).text();
  assert.match(text, /tenancy policies of local namespaces \(\d+\):/);
  assert.match(text, /project isolation of ns lab \(ProjectIsolation, ns lab\)/);
  assert.match(text, /ingress: project isolation of ns lab: same namespace/);
  assert.match(text, /egress: workspace isolation of acme: DNS to the cluster DNS \(pods of Service kube-system\/kube-dns\)/);
  assert.match(text, /egress: NamespaceNetworkPolicy shop\/to-nowhere egress\[0\] to service cart\/nope \(allows nothing\)/);
  assert.match(text, /NamespaceNetworkPolicy:shop\/to-nowhere|shop\/to-nowhere spec\.egress\[0\]\.to\[0\]\.service/);
  const json = (await (await fetch(`http://127.0.0.1:${d.port}/debug/state?format=json`)).json()) as {
    tenancy: { kind: string; policy: string; rules: { cause: string }[] }[];
  };
  const lab = json.tenancy.find((p) => p.kind === 'ProjectIsolation');
  assert.deepEqual(
    lab?.rules.map((x) => x.cause),
    [
      'project isolation of ns lab: same namespace',
      "project isolation of ns lab: the nodes' internal addresses",
      'project isolation of ns lab: same namespace',
      'project isolation of ns lab: DNS to the cluster DNS (pods of Service kube-system/kube-dns)',
      'project isolation of ns lab: DNS to node-local DNS 169.254.25.10',
      "project isolation of ns lab: the nodes' internal addresses",
    ],
  );
});
