// KubeClusterSource with tenancy on, against the fake API server through the
// unmodified client: the tenancy CRDs absent at start and installed later
// (no crash loop, picked up), every node's addresses, only the Services that
// service peers name, and the derived policies in the snapshot.
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeClusterSource } from '../../src/kube/kube-source.ts';
import type { KubeSourceOptions } from '../../src/kube/kube-source.ts';
import { DEFAULT_TENANCY } from '../../src/model/tenancy-config.ts';
import { contributedPolicies } from '../../src/kinds/registry.ts';
import { namespacePolicyErrors } from '../../src/kinds/tenancy.ts';
import type { KubeObject } from '../support/fake-apiserver.ts';
import { FakeApiServer, waitFor } from '../support/fake-apiserver.ts';
import { nsnpObject, tenancyObjects, workspaceObject } from '../cases/tenancy-cluster.ts';
import type { TenancyOptions } from '../cases/tenancy-cluster.ts';

const FAST = { restartInitialMs: 20, restartMaxMs: 200, reconnectMaxMs: 50, idleTimeoutMs: 0, listTimeoutMs: 5_000 };

let api: FakeApiServer | undefined;
const sources: KubeClusterSource[] = [];

afterEach(async () => {
  for (const s of sources.splice(0)) await s.stop();
  await api?.close();
  api = undefined;
});

const SVC_POLICY = nsnpObject('shop', 'to-api', {
  policyTypes: ['Egress'],
  egress: [{ to: [{ service: { name: 'api', namespace: 'cart' } }] }],
});

async function serve(o: TenancyOptions, crds: readonly string[] | undefined): Promise<FakeApiServer> {
  api = await FakeApiServer.start({ bookmarkIntervalMs: 0, ...(crds === undefined ? {} : { crds }) });
  api.load(tenancyObjects(o) as KubeObject[]);
  return api;
}

async function started(a: FakeApiServer, opts: Partial<KubeSourceOptions> = {}): Promise<KubeClusterSource> {
  const s = new KubeClusterSource({
    kubeConfig: a.kubeConfig(),
    nodeName: 'node-1',
    timing: FAST,
    planDebounceMs: 5,
    tenancy: DEFAULT_TENANCY,
    crdProbeMs: 50,
    ...opts,
  });
  sources.push(s);
  await s.start();
  await waitFor(() => s.synced(), 'synced');
  return s;
}

function derived(s: KubeClusterSource): string[] {
  return contributedPolicies(s.snapshot())
    .filter((p) => p.origin.kind !== 'NetworkPolicy')
    .map((p) => p.key)
    .sort();
}

function nsnpRule(s: KubeClusterSource): { invalid: boolean } | undefined {
  return contributedPolicies(s.snapshot()).find((p) => p.key === 'NamespaceNetworkPolicy:shop/to-api')?.egress[0];
}

test('CRDs absent at start: synced without them (project isolation still works), picked up once installed', async () => {
  const a = await serve({ isolatedWorkspaces: ['acme'], isolatedProjects: ['lab'], extra: [SVC_POLICY] }, []);
  const s = await started(a);
  // Namespace annotations need no CRD.
  assert.deepEqual(derived(s), ['ProjectIsolation:lab']);
  const st = s.status().map((w) => w.resource);
  assert.ok(st.includes('workspaces (not installed)') && st.includes('namespacenetworkpolicies (not installed)'), st.join(', '));
  const before = a.requests.filter((r) => r.path.includes('kubesphere.io')).length;
  await waitFor(() => a.requests.filter((r) => r.path.includes('kubesphere.io')).length > before + 2, 'probed again');
  assert.equal(
    s.status().reduce((n, w) => n + w.restarts, 0),
    0,
    'no restarts while absent',
  );

  a.installCRDs();
  await waitFor(() => derived(s).length === 4, 'workspace and NSNP policies derived');
  assert.deepEqual(derived(s), [
    'NamespaceNetworkPolicy:shop/to-api',
    'ProjectIsolation:lab',
    'WorkspaceIsolation:cart',
    'WorkspaceIsolation:shop',
  ]);
  // Never reported missing: while its watch lists, the Service is "not read yet" (allows nothing, no error).
  assert.deepEqual(namespacePolicyErrors(s.snapshot()), []);
  await waitFor(() => nsnpRule(s)?.invalid === false, 'service read');
  assert.ok(s.synced());

  // Changes flow: the workspace's isolation switched off.
  a.apply('workspaces', workspaceObject('acme', false) as KubeObject);
  await waitFor(() => !derived(s).includes('WorkspaceIsolation:shop'), 'workspace isolation off');

  // The CRD removed again: what was cached stays in force (no lost isolation).
  a.removeCRDs(['network.kubesphere.io']);
  await new Promise((r) => setTimeout(r, 200));
  assert.ok(derived(s).includes('NamespaceNetworkPolicy:shop/to-api'));
});

test('every node, and only the Services that service peers and the DNS allowance name', async () => {
  const a = await serve({ isolatedWorkspaces: ['acme'], extra: [SVC_POLICY] }, undefined);
  const s = await started(a);
  const snap = s.snapshot();
  assert.deepEqual(
    snap.nodes.map((n) => n.name),
    ['node-1', 'node-2'],
  );
  assert.deepEqual(
    (snap.services ?? []).map((x) => `${x.namespace}/${x.name}`),
    ['cart/api', 'kube-system/kube-dns'],
  );
  // Synced means listed; a watch request may still be on its way to the server.
  const serviceWatches = () =>
    a
      .watchers()
      .filter((w) => w.resource === 'services')
      .map((w) => `${w.namespace ?? '*'} ${w.fieldSelector ?? '-'}`)
      .sort();
  await waitFor(() => serviceWatches().length >= 2, 'both service watches open');
  assert.deepEqual(serviceWatches(), ['cart metadata.name=api', 'kube-system metadata.name=kube-dns']);
  // A service peer added later gets its watch; the selector change of a watched service reaches the snapshot.
  a.apply(
    'namespacenetworkpolicies',
    nsnpObject('shop', 'to-db', {
      policyTypes: ['Egress'],
      egress: [{ to: [{ service: { name: 'db', namespace: 'lab' } }] }],
    }) as KubeObject,
  );
  await waitFor(() => (s.snapshot().services ?? []).some((x) => x.name === 'db'), 'lab/db watched');
  const api1 = a.get('services', 'cart', 'api');
  assert.ok(api1 !== undefined);
  a.apply('services', { ...api1, spec: { ...(api1.spec as object), selector: { app: 'other' } } });
  await waitFor(() => s.snapshot().services?.find((x) => x.name === 'api')?.selector?.app === 'other', 'selector change seen');
  // The service peer's pods are remote pods the plan watches.
  await waitFor(() => s.snapshot().pods.some((p) => p.namespace === 'lab' && p.name === 'b'), 'lab pods watched');
});
