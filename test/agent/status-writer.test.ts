// The status writer and the Lease heartbeat with the real client against the
// test API server: created on first need with the Node as owner, patched only
// with what changed, coalesced, retried after an outage, never recreated for a
// Node that is gone; Lease renewals with resourceVersion conflicts.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { Heartbeat } from '../../src/agent/heartbeat.ts';
import { StatusWriter } from '../../src/agent/status-writer.ts';
import { kubeStatusApi } from '../../src/kube/status-client.ts';
import type { StatusInput } from '../../src/status/build.ts';
import type { NetworkPolicy } from '../../src/model/types.ts';
import { FakeApiServer, node, waitFor, type KubeObject } from '../support/fake-apiserver.ts';
import { pod, policy, sel, state } from '../support/state-builder.ts';
import { captureLogger } from './fakes.ts';

const NODE = 'node-1';
const STATS = { chains: 1, rules: 1, sets: 0, maps: 0, elements: 0, localPods: 1, policies: 1 };

function inputWith(generation: number, over: Partial<StatusInput> = {}): StatusInput {
  const p: NetworkPolicy = {
    ...policy('shop', 'web', { podSelector: sel({ app: 'web' }) }),
    version: { uid: 'u1', generation, resourceVersion: String(generation) },
  };
  return {
    node: NODE,
    applied: {
      state: state({ pods: [pod('shop', 'web-0', { labels: { app: 'web' }, ips: ['10.0.0.1'] })], policies: [p] }),
      stats: STATS,
      hash: `sha256:${generation}`,
      atUnixMs: Date.now(),
    },
    last: { result: 'Applied', atUnixMs: Date.now(), error: undefined },
    inSync: true,
    agentVersion: 'test',
    nftVersion: undefined,
    ...over,
  };
}

async function setup(t: TestContext, intervalMs = 50) {
  const api = await FakeApiServer.start();
  const n = api.create('nodes', node(NODE, ['172.18.0.11']));
  const { log, lines } = captureLogger();
  const writer = new StatusWriter(kubeStatusApi(api.kubeConfig()), log, {
    node: NODE,
    intervalMs,
    jitterMs: 0,
    retryInitialMs: 20,
    retryMaxMs: 100,
  });
  t.after(async () => {
    await writer.stop();
    await api.close();
  });
  const writes = (): number =>
    api.requests.filter((r) => r.method === 'PATCH' && r.path.endsWith(`/${NODE}/status`) && r.status === 200).length;
  return { api, writer, lines, nodeUid: n.metadata.uid, writes };
}

function statusOf(api: FakeApiServer): Record<string, unknown> | undefined {
  return api.get('nodepolicystatuses', undefined, NODE)?.status as Record<string, unknown> | undefined;
}

test('the status object is created owned by its Node, then patched with only what changed', async (t) => {
  const { api, writer, nodeUid } = await setup(t);
  writer.update(() => inputWith(1));
  await waitFor(() => writer.stats().writes === 1, 'first write');
  const obj = api.get('nodepolicystatuses', undefined, NODE) as KubeObject;
  assert.deepEqual(obj.metadata.ownerReferences, [{ apiVersion: 'v1', kind: 'Node', name: NODE, uid: nodeUid }]);
  assert.equal(obj.metadata.finalizers, undefined, 'no finalizers');
  assert.deepEqual(obj.spec, { nodeName: NODE });
  const s = statusOf(api);
  assert.equal(s?.inSync, true);
  assert.equal((s?.policies as { generation: number }[])[0]?.generation, 1);

  // The same content again: no write at all.
  const before = api.requests.length;
  writer.update(() => inputWith(1));
  await waitFor(() => !writer.stats().pending, 'settled');
  await new Promise((r) => setTimeout(r, 120));
  assert.equal(writer.stats().writes, 1);
  assert.equal(api.requests.length, before, 'no request for unchanged content');

  // A change: one merge patch with the changed fields only.
  writer.update(() => inputWith(2));
  await waitFor(() => writer.stats().writes === 2, 'second write');
  const last = api.requests.filter((r) => r.method === 'PATCH').at(-1);
  assert.ok(last !== undefined && (last.bytes ?? 0) > 0);
  assert.equal((statusOf(api)?.policies as { generation: number }[])[0]?.generation, 2);
  assert.equal(statusOf(api)?.agentVersion, 'test', 'untouched fields stay');
});

test('a burst of changes within the interval costs one write with the latest content', async (t) => {
  const { writer, api, writes } = await setup(t, 400);
  writer.update(() => inputWith(1));
  await waitFor(() => writer.stats().writes === 1, 'first write');
  for (let g = 2; g <= 20; g++) writer.update(() => inputWith(g));
  await waitFor(() => writer.stats().writes === 2 && !writer.stats().pending, 'coalesced write');
  assert.equal(writes(), 2);
  assert.equal((statusOf(api)?.policies as { generation: number }[])[0]?.generation, 20);
});

test('the API server away: writes fail and are retried; the latest content lands after', async (t) => {
  const { writer, api, lines } = await setup(t);
  writer.update(() => inputWith(1));
  await waitFor(() => writer.stats().writes === 1, 'first write');
  await api.refuse();
  writer.update(() => inputWith(2));
  await waitFor(() => writer.stats().failures >= 2, 'failures while away');
  writer.update(() => inputWith(3));
  await api.accept();
  await waitFor(
    () => (statusOf(api)?.policies as { generation: number }[] | undefined)?.[0]?.generation === 3,
    'caught up',
    10_000,
  );
  assert.ok(
    lines.some((l) => l.event === 'status' && l.level === 40),
    'failure logged at warn',
  );
});

test('deleted by hand: recreated with everything; Node gone: collected and not recreated', async (t) => {
  const { writer, api } = await setup(t);
  writer.update(() => inputWith(1));
  await waitFor(() => writer.stats().writes === 1, 'first write');
  api.delete('nodepolicystatuses', undefined, NODE);
  writer.update(() => inputWith(2));
  await waitFor(() => statusOf(api)?.agentVersion === 'test', 'recreated with every field');
  assert.equal(writer.stats().creates, 2);

  api.delete('nodes', undefined, NODE);
  await waitFor(() => api.get('nodepolicystatuses', undefined, NODE) === undefined, 'garbage-collected with its Node');
  writer.update(() => inputWith(3));
  await waitFor(() => writer.stats().failures >= 2, 'the writer gives up for now');
  assert.equal(api.get('nodepolicystatuses', undefined, NODE), undefined, 'not recreated without its Node');
});

test('an existing object from a previous run: its appliedTime of the same version is kept', async (t) => {
  const { writer, api } = await setup(t);
  const input = inputWith(1);
  writer.update(() => input);
  await waitFor(() => writer.stats().writes === 1, 'first write');
  const first = (statusOf(api)?.policies as { appliedTime: string }[])[0]?.appliedTime;
  await writer.stop();
  const { log } = captureLogger();
  const again = new StatusWriter(kubeStatusApi(api.kubeConfig()), log, { node: NODE, intervalMs: 50, jitterMs: 0 });
  t.after(() => again.stop());
  const later = inputWith(1, { last: { result: 'Applied', atUnixMs: Date.now() + 60_000, error: undefined } });
  again.update(() => ({
    ...later,
    applied: later.applied === undefined ? undefined : { ...later.applied, atUnixMs: Date.now() + 60_000 },
  }));
  await waitFor(() => again.stats().writes === 1, 'write after restart');
  assert.equal((statusOf(api)?.policies as { appliedTime: string }[])[0]?.appliedTime, first);
  assert.equal(again.stats().creates, 0);
});

test('heartbeat: the Lease is created, renewed with its resourceVersion, and a conflict is resolved by re-reading', async (t) => {
  const api = await FakeApiServer.start();
  t.after(() => api.close());
  const { log } = captureLogger();
  const hb = new Heartbeat(kubeStatusApi(api.kubeConfig()), log, {
    namespace: 'nft-netpol-system',
    node: NODE,
    intervalMs: 30_000,
  });
  await hb.renew();
  const l1 = api.get('leases', 'nft-netpol-system', NODE);
  assert.equal((l1?.spec as { leaseDurationSeconds: number }).leaseDurationSeconds, 90);
  assert.equal((l1?.spec as { holderIdentity: string }).holderIdentity, `nft-netpol-agent/${NODE}`);
  await hb.renew(); // read, then PUT with its resourceVersion
  await hb.renew(); // PUT with the remembered resourceVersion
  // Someone else writes the Lease: our remembered resourceVersion is stale -> 409 -> re-read -> renewed.
  const cur = api.get('leases', 'nft-netpol-system', NODE) as KubeObject;
  api.update('leases', { ...cur, spec: { ...(cur.spec as object), holderIdentity: 'someone-else' } });
  await hb.renew();
  const puts = api.requests.filter((r) => r.method === 'PUT' && r.path.includes('/leases/'));
  assert.ok(
    puts.some((r) => r.status === 409),
    'a conflict was answered',
  );
  assert.equal(puts.at(-1)?.status, 200);
  const l2 = api.get('leases', 'nft-netpol-system', NODE);
  assert.equal((l2?.spec as { holderIdentity: string }).holderIdentity, `nft-netpol-agent/${NODE}`);
  assert.equal(hb.renewals, 4);
});
