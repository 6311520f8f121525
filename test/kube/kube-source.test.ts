// KubeClusterSource against the fake API server through the unmodified
// client: every informer trap of shared/references/client-node.md, and the
// selective remote-pod watches.
import { afterEach, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeClusterSource } from '../../src/kube/kube-source.ts';
import type { KubeSourceOptions } from '../../src/kube/kube-source.ts';
import { restartDelay } from '../../src/kube/resource-watch.ts';
import type { SourceLogger } from '../../src/kube/source.ts';
import type { NetworkPolicy } from '../../src/model/types.ts';
import { FakeApiServer, namespace, networkPolicy, node, pod, waitFor } from '../support/fake-apiserver.ts';

const unhandled: unknown[] = [];
process.on('unhandledRejection', (reason) => {
  unhandled.push(reason);
});

const FAST = { restartInitialMs: 20, restartMaxMs: 200, reconnectMaxMs: 50, idleTimeoutMs: 0, listTimeoutMs: 5_000 };

let api: FakeApiServer;
let sources: KubeClusterSource[] = [];

beforeEach(async () => {
  unhandled.length = 0;
  api = await FakeApiServer.start({ token: 'sekret', bookmarkIntervalMs: 0 });
  seed(api);
});

afterEach(async () => {
  for (const s of sources) await s.stop();
  sources = [];
  await api.close();
  assert.deepEqual(unhandled, [], 'no unhandled rejections');
});

function seed(a: FakeApiServer): void {
  a.create('namespaces', namespace('shop', { team: 'a' }));
  a.create('namespaces', namespace('billing', { team: 'a' }));
  a.create('namespaces', namespace('ops', { team: 'b' }));
  a.create('nodes', node('node-1', ['192.168.0.1']));
  a.create('nodes', node('node-2', ['192.168.0.2']));
  a.create('pods', pod('shop', 'web-1', { app: 'web' }, 'node-1', '10.0.1.1'));
  a.create('pods', pod('shop', 'db-1', { app: 'db' }, 'node-2', '10.0.2.1'));
  a.create('pods', pod('shop', 'cache-1', { app: 'cache' }, 'node-2', '10.0.2.2'));
  a.create('pods', pod('billing', 'db-2', { app: 'db' }, 'node-2', '10.0.2.3'));
  a.create('pods', pod('ops', 'mon-1', { app: 'mon' }, 'node-2', '10.0.2.4'));
  a.create('networkpolicies', webFrom('web-from-db', { podSelector: { matchLabels: { app: 'db' } } }));
}

function webFrom(name: string, ...peers: Record<string, unknown>[]): ReturnType<typeof networkPolicy> {
  return networkPolicy('shop', name, { podSelector: { matchLabels: { app: 'web' } }, ingress: [{ from: peers }] });
}

function source(opts: Partial<KubeSourceOptions> = {}): KubeClusterSource {
  const s = new KubeClusterSource({ kubeConfig: api.kubeConfig(), nodeName: 'node-1', timing: FAST, planDebounceMs: 5, ...opts });
  sources.push(s);
  return s;
}

async function started(opts: Partial<KubeSourceOptions> = {}): Promise<KubeClusterSource> {
  const s = source(opts);
  await s.start();
  await waitFor(() => s.synced(), 'synced');
  return s;
}

function pods(s: KubeClusterSource): string[] {
  return s.snapshot().pods.map((p) => `${p.namespace}/${p.name}`);
}

function restarts(s: KubeClusterSource, resource: string): number {
  return s.status().find((w) => w.resource === resource)?.restarts ?? -1;
}

function totalRestarts(s: KubeClusterSource): number {
  return s.status().reduce((n, w) => n + w.restarts, 0);
}

test('initial sync: local pods, needed peers only, every namespace and policy, the local node', async () => {
  const s = source();
  const changes: string[] = [];
  s.onChange((r) => changes.push(r));
  await s.start();
  assert.equal(s.synced(), false, 'nothing has listed yet');
  await waitFor(() => s.synced(), 'synced');
  assert.deepEqual(pods(s), ['shop/db-1', 'shop/web-1']);
  const snap = s.snapshot();
  assert.deepEqual(
    snap.namespaces.map((n) => n.name),
    ['billing', 'ops', 'shop'],
  );
  assert.deepEqual(
    snap.policies.map((p) => p.name),
    ['web-from-db'],
  );
  assert.deepEqual(snap.nodes, [{ name: 'node-1', addresses: ['192.168.0.1'] }]);
  assert.ok(changes.includes('synced'));
  assert.deepEqual(
    s.status().map((w) => w.resource),
    ['pods spec.nodeName=node-1', 'namespaces', 'networkpolicies', 'nodes metadata.name=node-1', 'pods -n shop app=db'],
  );
  // Server side: the remote pods watch carries the selector; every watch asked for bookmarks.
  await waitFor(() => api.watchers().length === 5, 'five watches open');
  const podWatches = api.watchers().filter((w) => w.resource === 'pods');
  assert.deepEqual(podWatches.map((w) => `${w.namespace ?? '*'} ${w.labelSelector ?? '-'} ${w.fieldSelector ?? '-'}`).sort(), [
    '* - spec.nodeName=node-1',
    'shop app=db -',
  ]);
  assert.ok(api.watchers().every((w) => w.bookmarks));
});

test('lists are paged: every object arrives, several requests per list', async () => {
  for (let i = 0; i < 7; i++) api.create('pods', pod('shop', `db-p${i}`, { app: 'db' }, 'node-2', `10.0.3.${i + 1}`));
  const s = await started({ listPageSize: 2 });
  assert.equal(pods(s).filter((p) => p.startsWith('shop/db-')).length, 8);
  const pages = api.requests.filter((r) => !r.watch && r.path === '/api/v1/namespaces/shop/pods');
  assert.equal(pages.length, 4, '8 pods in pages of 2');
  assert.ok(pages.slice(1).every((r) => r.query.continue !== undefined && r.query.limit === '2'));
});

test('synced() stays false while a list fails; the watch restarts with backoff until it lists', async () => {
  api.failNext(1_000, 500, { only: 'list', resource: 'networkpolicies' });
  const s = source();
  await s.start();
  await waitFor(() => restarts(s, 'networkpolicies') >= 3, 'policy watch restarts');
  assert.equal(s.synced(), false);
  const st = s.status().find((w) => w.resource === 'networkpolicies');
  assert.equal(st?.synced, false);
  assert.match(st?.lastError ?? '', /500/);
  assert.equal(s.status().find((w) => w.resource === 'namespaces')?.synced, true);
  api.clearFaults();
  await waitFor(() => s.synced(), 'synced after the list succeeds');
  assert.deepEqual(
    s.snapshot().policies.map((p) => p.name),
    ['web-from-db'],
  );
  assert.equal(s.status().find((w) => w.resource === 'networkpolicies')?.lastError, undefined);
});

test('restart delays grow exponentially with jitter and are capped', () => {
  const t = { restartInitialMs: 100, restartMaxMs: 1_000 };
  assert.deepEqual(
    [1, 2, 3, 4, 5, 50].map((f) => restartDelay(t, f, () => 0.5)),
    [100, 200, 400, 800, 1_000, 1_000],
  );
  assert.equal(
    restartDelay(t, 1, () => 0),
    80,
  );
  assert.equal(
    restartDelay(t, 1, () => 1),
    120,
  );
});

test('connection reset mid-stream: every watch restarts and catches up', async () => {
  const s = await started();
  await waitFor(() => api.watchers().length === 5, 'watching');
  api.resetConnections();
  api.create('pods', pod('shop', 'db-3', { app: 'db' }, 'node-3', '10.0.2.9'));
  api.create('pods', pod('shop', 'web-2', { app: 'web' }, 'node-1', '10.0.1.2'));
  await waitFor(() => pods(s).includes('shop/db-3') && pods(s).includes('shop/web-2'), 'caught up');
  await waitFor(() => totalRestarts(s) >= 5, 'each watch restarted');
  for (const w of s.status()) assert.ok(w.restarts >= 1, `${w.resource} restarted`);
});

test('API server down, then up: restarts with backoff while refused, recovers after', async () => {
  const s = await started();
  await api.refuse();
  await waitFor(() => restarts(s, 'namespaces') >= 3, 'repeated restarts while refused');
  assert.match(s.status().find((w) => w.resource === 'namespaces')?.lastError ?? '', /fetch failed|ECONNREFUSED/);
  api.create('namespaces', namespace('new-ns'));
  api.delete('pods', 'shop', 'db-1');
  await api.accept();
  await waitFor(() => s.snapshot().namespaces.some((n) => n.name === 'new-ns'), 'new namespace');
  await waitFor(() => !pods(s).includes('shop/db-1'), 'deleted peer gone');
  assert.ok(s.synced());
});

test('500 and 401/403 on the watch request: restarted, then resumed from the last RV without a relist', async () => {
  const s = await started();
  await waitFor(() => api.watchers().length === 5, 'watching');
  const lists = (): number => api.requests.filter((r) => !r.watch && r.method === 'GET').length;
  const listsBefore = lists();
  api.failNext(1, 500, { only: 'watch', resource: 'namespaces' });
  api.failNext(1, 403, { only: 'watch', resource: 'namespaces' });
  api.endStreams('namespaces');
  await waitFor(() => restarts(s, 'namespaces') >= 2, 'two restarts');
  api.create('namespaces', namespace('after-errors'));
  await waitFor(() => s.snapshot().namespaces.some((n) => n.name === 'after-errors'), 'resumed');
  assert.equal(lists(), listsBefore, 'resumed from the resourceVersion: no relist');

  // 401: the server stops accepting our token until it is restored.
  api.setToken('rotated');
  api.endStreams('networkpolicies');
  await waitFor(() => (s.status().find((w) => w.resource === 'networkpolicies')?.restarts ?? 0) >= 2, 'restarts on 401');
  assert.match(s.status().find((w) => w.resource === 'networkpolicies')?.lastError ?? '', /401|Unauthorized/);
  api.create('networkpolicies', webFrom('web-from-cache', { podSelector: { matchLabels: { app: 'cache' } } }));
  api.setToken('sekret');
  await waitFor(() => s.snapshot().policies.length === 2, 'policy after 401');
  await waitFor(() => pods(s).includes('shop/cache-1'), 'its peers');
});

test('500 on a relist: restarted until the list works', async () => {
  const s = await started();
  await waitFor(() => api.watchers().length === 5, 'watching');
  api.silence('namespaces');
  api.delete('namespaces', undefined, 'ops');
  api.compact();
  api.failNext(2, 500, { only: 'list', resource: 'namespaces' });
  api.endStreams('namespaces');
  await waitFor(() => restarts(s, 'namespaces') >= 2, 'failed relists restarted');
  await waitFor(() => !s.snapshot().namespaces.some((n) => n.name === 'ops'), 'relisted');
});

test('410 Expired: the informer relists, and objects deleted meanwhile disappear', async () => {
  const s = await started();
  await waitFor(() => api.watchers().length === 5, 'watching');
  const lists = (): number => api.requests.filter((r) => !r.watch && r.path === '/api/v1/pods').length;
  const before = lists();
  // Events the watch never sees (silenced), then history compacted: its RV is too old.
  api.silence('pods');
  api.delete('pods', 'shop', 'db-1');
  api.create('pods', pod('shop', 'web-9', { app: 'web' }, 'node-1', '10.0.1.9'));
  api.compact();
  api.endStreams('pods');
  await waitFor(() => !pods(s).includes('shop/db-1') && pods(s).includes('shop/web-9'), 'relisted state');
  assert.ok(lists() > before, 'a relist happened');
  assert.equal(restarts(s, 'pods spec.nodeName=node-1'), 0, '410 is handled by the informer itself');
});

test('silent stream: detected by the watchdog and restarted; events sent meanwhile arrive', async () => {
  await api.close();
  api = await FakeApiServer.start({ token: 'sekret', bookmarkIntervalMs: 20 });
  seed(api);
  // Bookmarks every 20 ms; silence for 1.5 s is far beyond any scheduling hiccup.
  const s = await started({ timing: { ...FAST, idleTimeoutMs: 1_500 } });
  await waitFor(() => api.watchers().length === 5, 'watching');
  // Healthy streams with bookmarks are left alone.
  const quiet = api.watchers().map((w) => w.id);
  await waitFor(() => api.watchers().every((w) => w.sent >= 100), 'bookmarks flowing for longer than the idle timeout');
  assert.deepEqual(
    api.watchers().map((w) => w.id),
    quiet,
    'no restart while bookmarks arrive',
  );
  assert.equal(totalRestarts(s), 0);
  api.silence('namespaces');
  api.create('namespaces', namespace('during-silence'));
  await waitFor(() => restarts(s, 'namespaces') >= 1, 'watchdog restart', 15_000);
  await waitFor(() => s.snapshot().namespaces.some((n) => n.name === 'during-silence'), 'caught up');
  assert.match(s.status().find((w) => w.resource === 'namespaces')?.lastError ?? '', /no event or bookmark/);
  assert.equal(restarts(s, 'networkpolicies'), 0);
});

test("the library's own inactivity timeout (streamTimeoutMs) reconnects a silent stream without a restart", async () => {
  const s = await started({ timing: { ...FAST, streamTimeoutMs: 300 } });
  await waitFor(() => api.watchers().length === 5, 'watching');
  api.silence('namespaces');
  api.create('namespaces', namespace('during-silence'));
  await waitFor(() => s.snapshot().namespaces.some((n) => n.name === 'during-silence'), 'reconnected and caught up', 15_000);
  assert.equal(restarts(s, 'namespaces'), 0, 'a client-side timeout is not a failure');
  assert.equal(s.status().find((w) => w.resource === 'namespaces')?.lastError, undefined);
});

test('stop(): no restarts, no requests, no errors afterwards, even while failing', async () => {
  const s = await started();
  const changes: string[] = [];
  s.onChange((r) => changes.push(r));
  await api.refuse();
  await waitFor(() => restarts(s, 'namespaces') >= 1, 'failing');
  await s.stop();
  const restartsAtStop = s.status().map((w) => w.restarts);
  const changesAtStop = changes.length;
  await api.accept();
  const requestsAtStop = api.requests.length;
  api.create('namespaces', namespace('after-stop'));
  // An absence can only be checked by letting time pass: several max backoffs.
  await new Promise((r) => setTimeout(r, 4 * FAST.restartMaxMs));
  assert.equal(api.requests.length, requestsAtStop, 'no request after stop');
  assert.deepEqual(api.watchers(), []);
  assert.deepEqual(
    s.status().map((w) => w.restarts),
    restartsAtStop,
  );
  assert.equal(changes.length, changesAtStop);
  await s.stop(); // idempotent
});

test('stop() of a healthy source closes every stream; the AbortError it causes is ignored', async () => {
  const s = await started();
  await waitFor(() => api.watchers().length === 5, 'watching');
  await s.stop();
  await waitFor(() => api.watchers().length === 0, 'streams closed');
  assert.ok(
    s.status().every((w) => w.lastError === undefined),
    JSON.stringify(s.status()),
  );
  assert.equal(totalRestarts(s), 0);
});

test('a throwing listener is isolated: no unhandled rejection, the cache keeps updating', async () => {
  const log: string[] = [];
  const logger: SourceLogger = { debug() {}, info() {}, warn() {}, error: (o, m) => log.push(`${m ?? ''} ${JSON.stringify(o)}`) };
  const s = source({ log: logger });
  s.onChange(() => {
    throw new Error('listener boom');
  });
  s.onInvalid(() => {
    throw new Error('invalid listener boom');
  });
  const seen: string[] = [];
  s.onChange((r) => seen.push(r));
  await s.start();
  await waitFor(() => s.synced(), 'synced');
  api.create('pods', pod('shop', 'db-7', { app: 'db' }, 'node-2', '10.0.2.7'));
  api.create(
    'networkpolicies',
    networkPolicy('shop', 'bad', { podSelector: {}, ingress: [{ ports: [{ port: 90, endPort: 80 }] }] }),
  );
  await waitFor(() => pods(s).includes('shop/db-7'), 'pod after throws');
  await waitFor(() => s.snapshot().policies.some((p) => p.name === 'bad'), 'policy after throws');
  assert.ok(
    seen.some((r) => r.includes('shop/db-7')),
    'later listeners still called',
  );
  assert.ok(log.some((l) => l.includes('listener boom')));
  assert.ok(log.some((l) => l.includes('invalid listener boom')));
});

test('onInvalid: policies with validation errors, from the list and from the watch', async () => {
  api.create(
    'networkpolicies',
    networkPolicy('shop', 'bad-listed', { podSelector: {}, ingress: [{ ports: [{ port: 90, endPort: 80 }] }] }),
  );
  const s = source();
  const invalid: NetworkPolicy[] = [];
  s.onInvalid((p) => invalid.push(p));
  await s.start();
  await waitFor(() => s.synced(), 'synced');
  api.create(
    'networkpolicies',
    networkPolicy('shop', 'bad-watched', { podSelector: {}, egress: [{ ports: [{ port: 70000 }] }], policyTypes: ['Egress'] }),
  );
  await waitFor(() => invalid.length >= 2, 'both invalid policies');
  assert.deepEqual(
    invalid.map((p) => p.name),
    ['bad-listed', 'bad-watched'],
  );
  assert.ok(invalid.every((p) => p.errors.length > 0));
});

test('list and watch object shapes normalize alike through the source', async () => {
  const spec = (app: string): Record<string, unknown> => ({
    podSelector: { matchLabels: { app: 'web' } },
    ingress: [
      {
        from: [{ namespaceSelector: { matchLabels: { team: 'a' } }, podSelector: { matchLabels: { app } } }],
        ports: [{ port: 'http', protocol: 'TCP' }],
      },
    ],
  });
  api.create('networkpolicies', networkPolicy('shop', 'listed', spec('x')));
  const s = await started();
  api.create('networkpolicies', networkPolicy('shop', 'watched', spec('x')));
  await waitFor(() => s.snapshot().policies.some((p) => p.name === 'watched'), 'watched policy');
  const byName = new Map(s.snapshot().policies.map((p) => [p.name, p]));
  const strip = (p: NetworkPolicy | undefined): unknown =>
    p === undefined ? undefined : { ...p, name: '', version: { ...p.version, uid: '', resourceVersion: '' } };
  assert.deepEqual(strip(byName.get('watched')), strip(byName.get('listed')));
  assert.equal(byName.get('listed')?.ingress[0]?.peers?.length, 1);
});

test('peer demand change: watches added and removed, still-needed watches untouched, snapshot exact', async () => {
  const s = await started();
  assert.deepEqual(pods(s), ['shop/db-1', 'shop/web-1']);
  await waitFor(() => api.watchers().length === 5, 'watching');
  const dbWatch = api.watchers().find((w) => w.labelSelector === 'app=db');
  assert.ok(dbWatch !== undefined);

  // A second policy adds a peer selector spanning two namespaces.
  api.create(
    'networkpolicies',
    webFrom('web-from-team-a-cache', {
      namespaceSelector: { matchLabels: { team: 'a' } },
      podSelector: { matchLabels: { app: 'cache' } },
    }),
  );
  api.create('pods', pod('billing', 'cache-2', { app: 'cache' }, 'node-2', '10.0.2.8'));
  await waitFor(() => pods(s).includes('billing/cache-2') && pods(s).includes('shop/cache-1'), 'cache peers');
  assert.deepEqual(pods(s), ['billing/cache-2', 'shop/cache-1', 'shop/db-1', 'shop/web-1']);
  assert.ok(
    api.watchers().some((w) => w.id === dbWatch.id),
    'the app=db watch was not restarted',
  );

  // Dropping the first policy retires the app=db watch; cache stays.
  api.delete('networkpolicies', 'shop', 'web-from-db');
  await waitFor(() => !pods(s).includes('shop/db-1'), 'db peers dropped');
  assert.deepEqual(pods(s), ['billing/cache-2', 'shop/cache-1', 'shop/web-1']);
  await waitFor(() => !api.watchers().some((w) => w.labelSelector === 'app=db'), 'app=db watch closed');
  assert.deepEqual(
    s
      .status()
      .map((w) => w.resource)
      .filter((r) => r.startsWith('pods -n')),
    ['pods -n billing app=cache', 'pods -n shop app=cache'],
  );

  // A namespace gaining the label brings its peers in; a local pod losing its labels drops everything.
  api.create('pods', pod('ops', 'cache-3', { app: 'cache' }, 'node-2', '10.0.2.10'));
  api.patchLabels('namespaces', undefined, 'ops', { team: 'a' });
  await waitFor(() => pods(s).includes('ops/cache-3'), 'ops joined team a');
  api.patchLabels('pods', 'shop', 'web-1', { app: 'web-old' });
  await waitFor(() => pods(s).join() === 'shop/web-1', 'no policy selects a local pod any more');
  assert.equal(s.peerPlan()?.mode, 'none');
  assert.ok(s.synced());
});

test('a pod seen by several watches (local and peer watches) is in the snapshot once, sorted', async () => {
  api.create('networkpolicies', webFrom('web-from-backend', { podSelector: { matchLabels: { tier: 'backend' } } }));
  api.create('pods', pod('shop', 'db-3', { app: 'db', tier: 'backend' }, 'node-2', '10.0.2.9'));
  api.create('pods', pod('shop', 'db-0', { app: 'db', tier: 'backend' }, 'node-1', '10.0.1.5'));
  const s = await started();
  await waitFor(
    () => s.status().filter((w) => w.resource.startsWith('pods -n shop') && w.synced).length === 2,
    'both peer watches listed',
  );
  assert.deepEqual(pods(s), ['shop/db-0', 'shop/db-1', 'shop/db-3', 'shop/web-1']);
  const snap = s.snapshot();
  assert.equal(snap.pods.find((p) => p.name === 'db-0')?.nodeName, 'node-1');
  assert.deepEqual(snap.pods.find((p) => p.name === 'db-3')?.ips, ['10.0.2.9']);
  // Gone from one watch only (labels changed): still there once; gone from all: gone.
  api.patchLabels('pods', 'shop', 'db-3', { tier: null });
  await waitFor(() => s.snapshot().pods.find((p) => p.name === 'db-3')?.labels.tier === undefined, 'db-3 relabelled');
  assert.deepEqual(pods(s), ['shop/db-0', 'shop/db-1', 'shop/db-3', 'shop/web-1']);
  api.delete('pods', 'shop', 'db-0');
  await waitFor(() => !pods(s).includes('shop/db-0'), 'db-0 deleted');
  assert.deepEqual(pods(s), ['shop/db-1', 'shop/db-3', 'shop/web-1']);
});

test('make-before-break: a new peer watch that cannot list keeps the old one (fail closed meanwhile)', async () => {
  const s = await started();
  assert.ok(pods(s).includes('shop/db-1'));
  // Switch the policy from app=db to app=cache while the new watch's lists fail.
  api.failNext(1_000, 500, { only: 'list', resource: 'pods' });
  api.update('networkpolicies', webFrom('web-from-db', { podSelector: { matchLabels: { app: 'cache' } } }));
  await waitFor(() => (s.status().find((w) => w.resource === 'pods -n shop app=cache')?.restarts ?? 0) >= 2, 'new watch failing');
  // The old watch is kept (its pods are harmless: no policy allows them any more); the new peers are missing.
  assert.ok(pods(s).includes('shop/db-1'));
  assert.ok(!pods(s).includes('shop/cache-1'));
  assert.ok(s.synced(), 'synced() is latched after the initial sync');
  api.clearFaults();
  await waitFor(() => pods(s).includes('shop/cache-1') && !pods(s).includes('shop/db-1'), 'switched over');
});

test('past the bound: one cluster-wide pod watch, every pod in the snapshot', async () => {
  api.create(
    'networkpolicies',
    webFrom('more', { podSelector: { matchLabels: { app: 'cache' } } }, { podSelector: { matchLabels: { app: 'mon' } } }),
  );
  const s = await started({ maxPeerWatches: 2 });
  assert.equal(s.peerPlan()?.mode, 'all');
  assert.deepEqual(pods(s), ['billing/db-2', 'ops/mon-1', 'shop/cache-1', 'shop/db-1', 'shop/web-1']);
  await waitFor(() => api.watchers().length === 5, 'watching');
  assert.ok(
    api
      .watchers()
      .some(
        (w) =>
          w.resource === 'pods' && w.namespace === undefined && w.labelSelector === undefined && w.fieldSelector === undefined,
      ),
  );
  // Back under the bound: selective again, and the cluster-wide watch goes away.
  api.delete('networkpolicies', 'shop', 'more');
  await waitFor(() => s.peerPlan()?.mode === 'selective' && pods(s).join() === 'shop/db-1,shop/web-1', 'selective again');
  await waitFor(
    () => !api.watchers().some((w) => w.resource === 'pods' && w.namespace === undefined && w.fieldSelector === undefined),
    'cluster-wide watch closed',
  );
});

test('egress named port with no peers needs every pod', async () => {
  api.create(
    'networkpolicies',
    networkPolicy('shop', 'named', {
      podSelector: { matchLabels: { app: 'web' } },
      policyTypes: ['Egress'],
      egress: [{ ports: [{ port: 'metrics' }] }],
    }),
  );
  const s = await started();
  assert.equal(s.peerPlan()?.mode, 'all');
  assert.equal(pods(s).length, 5);
});

test('an update that changes nothing the engine reads (annotations, status heartbeats) is no change', async () => {
  const s = await started();
  const reasons: string[] = [];
  s.onChange((r) => reasons.push(r));
  const web = pod('shop', 'web-1', { app: 'web' }, 'node-1', '10.0.1.1');
  api.update('pods', { ...web, metadata: { ...web.metadata, annotations: { 'example.com/heartbeat': '1' } } });
  // A relevant change afterwards proves the quiet one was delivered and dropped, not still in flight.
  api.patchLabels('pods', 'shop', 'web-1', { tier: 'front' });
  await waitFor(() => reasons.some((r) => r.includes('shop/web-1')), 'label change seen');
  assert.deepEqual(reasons.filter((r) => r.includes('shop/web-1')).length, 1, reasons.join('\n'));
  assert.equal(s.snapshot().pods.find((p) => p.name === 'web-1')?.labels.tier, 'front');
});
