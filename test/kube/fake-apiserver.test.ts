// The fake API server's protocol, exercised with the unmodified @kubernetes/client-node.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { CoreV1Api, CustomObjectsApi, EventsV1Api, ListWatch, NetworkingV1Api, Watch } from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import { normalizePolicy } from '../../src/model/normalize.ts';
import {
  FakeApiServer,
  labelsMatch,
  makeKubeConfig,
  namespace,
  networkPolicy,
  node,
  parseFieldSelector,
  parseLabelSelector,
  pod,
  waitFor,
} from '../support/fake-apiserver.ts';
import type { KubeObject } from '../support/fake-apiserver.ts';

interface Seen {
  type: string;
  name: string;
  rv: string;
  labels: Record<string, string>;
  obj: Record<string, unknown>;
}

/** Opens a raw client Watch and collects its events until stopped. */
async function collect(
  api: FakeApiServer,
  path: string,
  params: Record<string, string>,
): Promise<{ events: Seen[]; done: { err: unknown } | undefined; stop: () => void }> {
  const out: { events: Seen[]; done: { err: unknown } | undefined; stop: () => void } = {
    events: [],
    done: undefined,
    stop: () => {},
  };
  const ctl = await new Watch(api.kubeConfig()).watch(
    path,
    params,
    (type, obj: { metadata?: { name?: string; resourceVersion?: string; labels?: Record<string, string> } }) => {
      out.events.push({
        type,
        name: obj.metadata?.name ?? '',
        rv: obj.metadata?.resourceVersion ?? '',
        labels: obj.metadata?.labels ?? {},
        obj: obj as Record<string, unknown>,
      });
    },
    (err) => {
      out.done = { err };
    },
  );
  out.stop = () => ctl.abort();
  return out;
}

let api: FakeApiServer;

before(async () => {
  api = await FakeApiServer.start({ token: 'sekret', bookmarkIntervalMs: 0 });
});

after(async () => {
  await api.close();
});

test('selector parsers: equality, set, existence; fields', () => {
  const reqs = parseLabelSelector('app=web,tier!=db,env in (a, b),zone notin (x),team,!old,k==v');
  assert.ok(labelsMatch(reqs, { app: 'web', env: 'a', team: '1', k: 'v' }));
  assert.ok(labelsMatch(reqs, { app: 'web', env: 'b', team: '1', k: 'v', tier: 'fe', zone: 'y' }));
  assert.ok(!labelsMatch(reqs, { app: 'web', env: 'a', team: '1', k: 'v', tier: 'db' }));
  assert.ok(!labelsMatch(reqs, { app: 'web', env: 'c', team: '1', k: 'v' }));
  assert.ok(!labelsMatch(reqs, { app: 'web', env: 'a', team: '1', k: 'v', zone: 'x' }));
  assert.ok(!labelsMatch(reqs, { app: 'web', env: 'a', k: 'v' }));
  assert.ok(!labelsMatch(reqs, { app: 'web', env: 'a', team: '1', k: 'v', old: '' }));
  assert.ok(labelsMatch(parseLabelSelector(''), {}));
  assert.throws(() => parseLabelSelector('a in b'));
  assert.deepEqual(parseFieldSelector('spec.nodeName=n1,metadata.name!=x'), [
    { path: ['spec', 'nodeName'], value: 'n1', equal: true },
    { path: ['metadata', 'name'], value: 'x', equal: false },
  ]);
});

test('list: typed client gets JSON, a resourceVersion, and selector-filtered items', async () => {
  api.create('namespaces', namespace('proto-list', { team: 'x' }));
  api.create('pods', pod('proto-list', 'a', { app: 'a' }, 'n1', '10.1.0.1'));
  api.create('pods', pod('proto-list', 'b', { app: 'b' }, 'n2', '10.1.0.2'));
  const core = api.kubeConfig().makeApiClient(CoreV1Api);
  const all = await core.listNamespacedPod({ namespace: 'proto-list' });
  assert.deepEqual(
    all.items.map((p) => p.metadata?.name),
    ['a', 'b'],
  );
  assert.equal(all.metadata?.resourceVersion, String(api.resourceVersion));
  // The generated deserializer turns timestamps into Dates (the list shape).
  assert.ok(all.items[0]?.metadata?.creationTimestamp instanceof Date);
  const byLabel = await core.listPodForAllNamespaces({ labelSelector: 'app in (b,c)' });
  assert.deepEqual(
    byLabel.items.map((p) => p.metadata?.name),
    ['b'],
  );
  const byField = await core.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName=n1,metadata.namespace=proto-list' });
  assert.deepEqual(
    byField.items.map((p) => p.metadata?.name),
    ['a'],
  );
  const nss = await core.listNamespace({ labelSelector: 'team=x' });
  assert.deepEqual(
    nss.items.map((n) => n.metadata?.labels),
    [{ team: 'x', 'kubernetes.io/metadata.name': 'proto-list' }],
  );
});

test('list paging: limit/continue serve one consistent snapshot; a lost token is 410', async () => {
  api.create('namespaces', namespace('proto-page'));
  for (const n of ['p1', 'p2', 'p3', 'p4', 'p5']) api.create('pods', pod('proto-page', n, {}, 'n1', '10.7.0.1'));
  const core = api.kubeConfig().makeApiClient(CoreV1Api);
  const first = await core.listNamespacedPod({ namespace: 'proto-page', limit: 2 });
  assert.deepEqual(
    first.items.map((p) => p.metadata?.name),
    ['p1', 'p2'],
  );
  assert.equal(first.metadata?.remainingItemCount, 3);
  const token = first.metadata?._continue;
  assert.ok(token !== undefined && token !== '');
  // Changes after the first page do not show up in later pages.
  api.delete('pods', 'proto-page', 'p4');
  api.create('pods', pod('proto-page', 'p6', {}, 'n1', '10.7.0.6'));
  const second = await core.listNamespacedPod({ namespace: 'proto-page', limit: 2, _continue: token });
  const third = await core.listNamespacedPod({ namespace: 'proto-page', limit: 2, _continue: second.metadata?._continue ?? '' });
  assert.deepEqual(
    [...second.items, ...third.items].map((p) => p.metadata?.name),
    ['p3', 'p4', 'p5'],
  );
  assert.equal(third.metadata?._continue, undefined);
  assert.equal(third.metadata?.resourceVersion, first.metadata?.resourceVersion);
  await assert.rejects(
    core.listNamespacedPod({ namespace: 'proto-page', limit: 2, _continue: token }),
    (e: { code?: number }) => e.code === 410,
  );
});

test('big lists are streamed in chunks and arrive whole', async () => {
  api.create('namespaces', namespace('proto-big'));
  for (let i = 0; i < 1_500; i++)
    api.create('pods', pod('proto-big', `p${String(i).padStart(4, '0')}`, { i: String(i) }, 'n1', '10.8.0.1'));
  const list = await api.kubeConfig().makeApiClient(CoreV1Api).listNamespacedPod({ namespace: 'proto-big' });
  assert.equal(list.items.length, 1_500);
  assert.deepEqual([list.items[0]?.metadata?.name, list.items[1_499]?.metadata?.name], ['p0000', 'p1499']);
  assert.equal(new Set(list.items.map((p) => p.metadata?.name)).size, 1_500);
});

test('list vs watch shapes differ (Date/_from vs string/from); the normalizer reads both alike', async () => {
  const spec = { podSelector: {}, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'x' } } }] }] };
  api.create('namespaces', namespace('proto-shape'));
  const rv = api.resourceVersion;
  api.create('networkpolicies', networkPolicy('proto-shape', 'p', spec));
  const net = api.kubeConfig().makeApiClient(NetworkingV1Api);
  const listed = (await net.listNamespacedNetworkPolicy({ namespace: 'proto-shape' })).items[0];
  const w = await collect(api, '/apis/networking.k8s.io/v1/namespaces/proto-shape/networkpolicies', {
    resourceVersion: String(rv),
  });
  const watched = (await waitFor(() => w.events[0], 'watch event')).obj;
  w.stop();
  const listedRule = (listed?.spec?.ingress ?? [])[0] as unknown as Record<string, unknown>;
  const watchedRule = ((watched.spec as Record<string, unknown>).ingress as Record<string, unknown>[])[0] as Record<
    string,
    unknown
  >;
  assert.ok('_from' in listedRule && !('from' in listedRule));
  assert.ok('from' in watchedRule && !('_from' in watchedRule));
  const a = normalizePolicy(listed);
  const b = normalizePolicy(watched);
  assert.ok(a.ok && b.ok);
  assert.deepEqual(a.value, b.value);
});

test('watch: replay from a resourceVersion, then live events, in order', async () => {
  api.create('namespaces', namespace('proto-replay'));
  api.create('pods', pod('proto-replay', 'old', {}, 'n1', '10.2.0.1'));
  const rv = api.resourceVersion;
  api.create('pods', pod('proto-replay', 'p1', {}, 'n1', '10.2.0.2'));
  api.patchLabels('pods', 'proto-replay', 'p1', { v: '2' });
  const w = await collect(api, '/api/v1/namespaces/proto-replay/pods', { resourceVersion: String(rv) });
  await waitFor(() => w.events.length >= 2, 'replay');
  api.delete('pods', 'proto-replay', 'p1');
  await waitFor(() => w.events.length >= 3, 'live delete');
  w.stop();
  assert.deepEqual(
    w.events.map((e) => `${e.type} ${e.name}`),
    ['ADDED p1', 'MODIFIED p1', 'DELETED p1'],
  );
  const rvs = w.events.map((e) => Number(e.rv));
  assert.deepEqual(
    rvs,
    [...rvs].sort((x, y) => x - y),
  );
  assert.ok((rvs[0] ?? 0) > rv);
});

test('watch without resourceVersion: synthetic ADDED for current objects first', async () => {
  api.create('namespaces', namespace('proto-initial'));
  api.create('pods', pod('proto-initial', 'here', {}, 'n1', '10.3.0.1'));
  const w = await collect(api, '/api/v1/namespaces/proto-initial/pods', {});
  await waitFor(() => w.events.length >= 1, 'initial ADDED');
  w.stop();
  assert.deepEqual(
    w.events.map((e) => `${e.type} ${e.name}`),
    ['ADDED here'],
  );
});

test('watch: label selector crossing gives ADDED and DELETED (old object, new RV)', async () => {
  api.create('namespaces', namespace('proto-cross'));
  api.create('pods', pod('proto-cross', 'p', { app: 'b' }, 'n1', '10.4.0.1'));
  const w = await collect(api, '/api/v1/pods', { resourceVersion: String(api.resourceVersion), labelSelector: 'app=a' });
  api.patchLabels('pods', 'proto-cross', 'p', { app: 'a' });
  api.patchLabels('pods', 'proto-cross', 'p', { extra: '1' });
  const leaving = api.patchLabels('pods', 'proto-cross', 'p', { app: 'b' });
  api.patchLabels('pods', 'proto-cross', 'p', { extra: '2' }); // not matching before or after: nothing
  await waitFor(() => w.events.length >= 3, 'crossing events');
  w.stop();
  assert.deepEqual(
    w.events.map((e) => e.type),
    ['ADDED', 'MODIFIED', 'DELETED'],
  );
  const del = w.events[2];
  assert.equal(del?.labels.app, 'a', 'DELETED carries the last matching version');
  assert.equal(del?.rv, leaving.metadata.resourceVersion, '... with the resourceVersion of the change');
});

test('watch: field selector spec.nodeName applies to replay and live events', async () => {
  api.create('namespaces', namespace('proto-field'));
  const rv = api.resourceVersion;
  api.create('pods', pod('proto-field', 'mine', {}, 'node-x', '10.5.0.1'));
  api.create('pods', pod('proto-field', 'theirs', {}, 'node-y', '10.5.0.2'));
  const w = await collect(api, '/api/v1/pods', { resourceVersion: String(rv), fieldSelector: 'spec.nodeName=node-x' });
  api.create('pods', pod('proto-field', 'mine2', {}, 'node-x', '10.5.0.3'));
  api.create('pods', pod('proto-field', 'theirs2', {}, 'node-y', '10.5.0.4'));
  await waitFor(() => w.events.length >= 2, 'field-selected events');
  api.bookmark(); // not requested: must not arrive
  api.create('pods', pod('proto-field', 'mine3', {}, 'node-x', '10.5.0.5'));
  await waitFor(() => w.events.length >= 3, 'third event');
  w.stop();
  assert.deepEqual(
    w.events.map((e) => `${e.type} ${e.name}`),
    ['ADDED mine', 'ADDED mine2', 'ADDED mine3'],
  );
});

test('watch: bookmarks only when asked, periodic and on demand, carrying the current RV', async () => {
  const periodic = await FakeApiServer.start({ bookmarkIntervalMs: 30, bookmarkMode: 'timer' });
  try {
    const w = await collect(periodic, '/api/v1/namespaces', {
      allowWatchBookmarks: 'true',
      resourceVersion: String(periodic.resourceVersion),
    });
    await waitFor(() => w.events.filter((e) => e.type === 'BOOKMARK').length >= 2, 'periodic bookmarks');
    periodic.create('namespaces', namespace('bm'));
    await waitFor(
      () => w.events.some((e) => e.type === 'BOOKMARK' && Number(e.rv) === periodic.resourceVersion),
      'bookmark at the new RV',
    );
    w.stop();
  } finally {
    await periodic.close();
  }
  const w = await collect(api, '/api/v1/namespaces', {
    allowWatchBookmarks: 'true',
    resourceVersion: String(api.resourceVersion),
  });
  const plain = await collect(api, '/api/v1/namespaces', { resourceVersion: String(api.resourceVersion) });
  await waitFor(() => api.watchers().filter((x) => x.resource === 'namespaces').length >= 2, 'both watches registered');
  api.bookmark();
  await waitFor(() => w.events.some((e) => e.type === 'BOOKMARK'), 'on-demand bookmark');
  api.create('namespaces', namespace('proto-bm-marker'));
  await waitFor(() => plain.events.length >= 1, 'marker event');
  w.stop();
  plain.stop();
  assert.deepEqual(
    plain.events.map((e) => e.type),
    ['ADDED'],
    'no bookmark without allowWatchBookmarks',
  );
});

test('watch: like a real watch cache, a bookmark only when the resource moved past what the watcher saw', async () => {
  const real = await FakeApiServer.start({ bookmarkIntervalMs: 20 });
  try {
    real.create('namespaces', namespace('team-a', { team: 'a' }));
    real.create('namespaces', namespace('team-b', { team: 'b' }));
    const start = real.resourceVersion;
    const w = await collect(real, '/api/v1/namespaces', {
      allowWatchBookmarks: 'true',
      labelSelector: 'team=a',
      resourceVersion: String(start),
    });
    await waitFor(() => real.watchers().length === 1, 'watching');
    // Other resources change (the global RV moves): this resource is quiet, no bookmark.
    for (let i = 0; i < 20; i++) {
      real.create('pods', pod('team-a', `p${i}`, {}, 'node-1', `10.9.0.${i + 1}`));
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(w.events.length, 0, 'a quiet resource gets no bookmark, whatever else changes');
    // A change of this resource the selector filters out: the watcher learns the new RV by a bookmark.
    const hidden = real.patchLabels('namespaces', undefined, 'team-b', { tier: 'x' });
    await waitFor(() => w.events.length > 0, 'bookmark');
    assert.deepEqual(
      w.events.map((e) => `${e.type} ${e.rv}`),
      [`BOOKMARK ${hidden.metadata.resourceVersion ?? ''}`],
    );
    // Delivered events move the watcher too: no bookmark repeats what it has seen.
    const seen = real.patchLabels('namespaces', undefined, 'team-a', { tier: 'y' });
    await waitFor(() => w.events.length > 1, 'event');
    for (let i = 0; i < 10; i++) await new Promise((r) => setTimeout(r, 20));
    w.stop();
    assert.deepEqual(
      w.events.map((e) => `${e.type} ${e.rv}`),
      [`BOOKMARK ${hidden.metadata.resourceVersion ?? ''}`, `MODIFIED ${seen.metadata.resourceVersion ?? ''}`],
    );
  } finally {
    await real.close();
  }
});

test('watch: timeoutSeconds ends the stream cleanly after replaying what came after the RV', async () => {
  api.create('namespaces', namespace('proto-timeout'));
  const rv = api.resourceVersion;
  api.create('namespaces', namespace('proto-timeout-2'));
  const w = await collect(api, '/api/v1/namespaces', { resourceVersion: String(rv), timeoutSeconds: '1' });
  await waitFor(() => w.done !== undefined, 'stream ended by the server', 5_000);
  assert.equal(w.done?.err, null, 'a clean end');
  assert.deepEqual(
    w.events.map((e) => `${e.type} ${e.name}`),
    ['ADDED proto-timeout-2'],
  );
  assert.equal(api.watchers().filter((x) => x.resource === 'namespaces').length, 0);
});

test('410: too old RV gets 200 + ERROR Status (Expired) and the stream ends; the informer relists', async () => {
  api.create('namespaces', namespace('proto-410'));
  const rv = api.resourceVersion;
  api.create('pods', pod('proto-410', 'x', {}, 'n1', '10.6.0.1'));
  api.compact();
  const w = await collect(api, '/api/v1/namespaces/proto-410/pods', { resourceVersion: String(rv) });
  await waitFor(() => w.done, 'stream end');
  assert.equal(w.events.length, 1);
  assert.equal(w.events[0]?.type, 'ERROR');
  assert.equal(w.events[0]?.obj.code, 410);
  assert.equal(w.events[0]?.obj.reason, 'Expired');
  assert.equal(w.events[0]?.obj.kind, 'Status');

  // The real informer: objects deleted while it could not watch vanish after its relist.
  const kc = api.kubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const inf = new ListWatch<V1Pod>(
    '/api/v1/namespaces/proto-410/pods',
    new Watch(kc),
    () => core.listNamespacedPod({ namespace: 'proto-410' }),
    false,
  );
  const errors: unknown[] = [];
  inf.on('error', (e) => errors.push(e));
  await inf.start();
  assert.deepEqual(
    inf.list().map((p) => p.metadata?.name),
    ['x'],
  );
  const lists = (): number => api.requests.filter((r) => r.path === '/api/v1/namespaces/proto-410/pods' && !r.watch).length;
  const before = lists();
  // Make its RV too old: a reset makes it stop, so instead end the stream after compaction.
  api.create('pods', pod('proto-410', 'y', {}, 'n1', '10.6.0.2'));
  await waitFor(() => inf.list().length === 2, 'y seen');
  await waitFor(() => api.watchers().some((x) => x.namespace === 'proto-410'), 'informer watching');
  api.silence('pods');
  api.delete('pods', 'proto-410', 'x');
  api.compact();
  api.endStreams('pods');
  await waitFor(() => lists() > before, 'relist after 410', 15_000);
  await waitFor(
    () =>
      inf
        .list()
        .map((p) => p.metadata?.name)
        .join() === 'y',
    'x removed by the relist',
    15_000,
  );
  await inf.stop();
  assert.deepEqual(
    errors.filter((e) => (e as Error).name !== 'AbortError'),
    [],
  );
});

test('faults: injected 500 and 403, bearer token check (401)', async () => {
  const core = api.kubeConfig().makeApiClient(CoreV1Api);
  api.failNext(1, 500, { only: 'list' });
  await assert.rejects(core.listNamespace(), (e: { code?: number }) => e.code === 500);
  api.failNext(1, 403);
  await assert.rejects(core.listNamespace(), (e: { code?: number }) => e.code === 403);
  const items = (await core.listNamespace()).items;
  assert.ok(items.length > 0);
  const anon = makeKubeConfig(api.url, 'wrong').makeApiClient(CoreV1Api);
  await assert.rejects(anon.listNamespace(), (e: { code?: number }) => e.code === 401);
  // A watch failing with 500 ends with an error carrying the status.
  api.failNext(1, 500, { only: 'watch' });
  const w = await collect(api, '/api/v1/namespaces', {});
  const done = await waitFor(() => w.done, 'watch failure');
  assert.equal((done.err as { statusCode?: number }).statusCode, 500);
});

test('faults: reset, refuse then accept on the same port, end streams, silence', async () => {
  const port = api.port;
  const w1 = await collect(api, '/api/v1/namespaces', {});
  await waitFor(() => api.watchers().length > 0, 'watch registered');
  api.resetConnections();
  const d1 = await waitFor(() => w1.done, 'reset seen');
  assert.ok(d1.err !== null && d1.err !== undefined, 'a reset is an error for the client');

  await api.refuse();
  const core = api.kubeConfig().makeApiClient(CoreV1Api);
  await assert.rejects(core.listNamespace(), (e: Error) =>
    /ECONNREFUSED|fetch failed/.test(`${e.message} ${String((e as { cause?: unknown }).cause)}`),
  );
  await api.accept();
  assert.equal(api.port, port);
  assert.ok((await core.listNamespace()).items.length > 0);

  const w2 = await collect(api, '/api/v1/namespaces', {});
  await waitFor(() => w2.events.length > 0, 'initial events');
  api.endStreams();
  const d2 = await waitFor(() => w2.done, 'clean end');
  assert.equal(d2.err, null, 'a clean end is not an error');

  const w3 = await collect(api, '/api/v1/namespaces', { resourceVersion: String(api.resourceVersion) });
  await waitFor(() => api.watchers().some((x) => !x.silent), 'watch registered');
  api.silence();
  api.create('namespaces', namespace('proto-silent'));
  api.bookmark();
  await waitFor(() => api.watchers().every((x) => x.silent), 'silenced');
  assert.equal(w3.events.length, 0);
  assert.equal(w3.done, undefined, 'a silent stream stays open');
  w3.stop();
});

test('events: POST to core/v1 and events.k8s.io/v1 are recorded', async () => {
  const kc = api.kubeConfig();
  await kc.makeApiClient(CoreV1Api).createNamespacedEvent({
    namespace: 'shop',
    body: {
      metadata: { generateName: 'p.' },
      involvedObject: { kind: 'NetworkPolicy', namespace: 'shop', name: 'p' },
      reason: 'Invalid',
      message: 'bad',
      type: 'Warning',
    },
  });
  await kc.makeApiClient(EventsV1Api).createNamespacedEvent({
    namespace: 'shop',
    body: {
      metadata: { name: 'e2' },
      eventTime: new Date(),
      reason: 'Invalid',
      note: 'bad too',
      type: 'Warning',
      action: 'Validate',
      reportingController: 'x',
      reportingInstance: 'y',
    },
  });
  const mine = api.events.filter((e) => e.namespace === 'shop');
  assert.deepEqual(
    mine.map((e) => e.api),
    ['v1', 'events.k8s.io/v1'],
  );
  assert.equal(mine[0]?.body.reason, 'Invalid');
  assert.equal(mine[1]?.body.note, 'bad too');
});

test('standalone process: --state file, URL on stdout, control API', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'fake-api-'));
  const state = join(dir, 'state.yaml');
  const objs: KubeObject[] = [namespace('s1'), pod('s1', 'a', { app: 'a' }, 'n1', '10.9.0.1'), node('n1', ['192.168.9.1'])];
  await writeFile(state, objs.map((o) => JSON.stringify(o)).join('\n---\n'));
  const child = spawn(process.execPath, ['test/support/fake-apiserver.ts', '--port', '0', '--state', state], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).once('line', resolve);
      child.once('exit', (c) => reject(new Error(`exited ${String(c)}`)));
    });
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const core = makeKubeConfig(url).makeApiClient(CoreV1Api);
    assert.deepEqual(
      (await core.listPodForAllNamespaces()).items.map((p) => p.metadata?.name),
      ['a'],
    );
    const res = await fetch(`${url}/_fake/objects`, {
      method: 'POST',
      body: JSON.stringify(pod('s1', 'b', {}, 'n1', '10.9.0.2')),
    });
    assert.equal(res.status, 200);
    assert.deepEqual(
      (await core.listNamespacedPod({ namespace: 's1' })).items.map((p) => p.metadata?.name),
      ['a', 'b'],
    );
    await fetch(`${url}/_fake/fail?count=1&status=500`, { method: 'POST' });
    await assert.rejects(core.listNamespace(), (e: { code?: number }) => e.code === 500);
    const stats = (await (await fetch(`${url}/_fake/stats`)).json()) as { objects: Record<string, number> };
    assert.deepEqual(stats.objects, {
      pods: 2,
      namespaces: 1,
      networkpolicies: 0,
      nodes: 1,
      services: 0,
      workspaces: 0,
      namespacenetworkpolicies: 0,
      leases: 0,
      clusternetworkpolicies: 0,
      adminnetworkpolicies: 0,
      baselineadminnetworkpolicies: 0,
      nodepolicystatuses: 0,
    });
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await rm(dir, { recursive: true, force: true });
  }
});

test('custom resources exist only while their CRD is installed; objects survive an uninstall', async () => {
  const api = await FakeApiServer.start({ crds: [] });
  try {
    const custom = api.kubeConfig().makeApiClient(CustomObjectsApi);
    const list = () =>
      custom.listClusterCustomObject({ group: 'tenant.kubesphere.io', version: 'v1alpha1', plural: 'workspaces' }) as Promise<{
        items: { metadata: { name: string } }[];
      }>;
    await assert.rejects(list(), (e: { code?: number }) => e.code === 404);
    api.create('workspaces', { apiVersion: 'tenant.kubesphere.io/v1alpha1', kind: 'Workspace', metadata: { name: 'acme' } });
    api.installCRDs(['tenant.kubesphere.io']);
    assert.deepEqual(
      (await list()).items.map((w) => w.metadata.name),
      ['acme'],
    );
    // The other group is still absent.
    await assert.rejects(
      custom.listClusterCustomObject({ group: 'network.kubesphere.io', version: 'v1alpha1', plural: 'namespacenetworkpolicies' }),
      (e: { code?: number }) => e.code === 404,
    );
    api.removeCRDs();
    await assert.rejects(list(), (e: { code?: number }) => e.code === 404);
    api.installCRDs();
    assert.equal((await list()).items.length, 1);
  } finally {
    await api.close();
  }
});
