// KubeClusterSource against the fake API server (its own list/watch over
// node:http, kube-http.ts): every informer trap of
// shared/references/client-node.md, and the selective remote-pod watches.
import { afterEach, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeClusterSource } from '../../src/kube/kube-source.ts';
import type { KubeSourceOptions } from '../../src/kube/kube-source.ts';
import { restartDelay } from '../../src/kube/resource-watch.ts';
import type { RestartReason, SourceLogger } from '../../src/kube/source.ts';
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
  // ClusterNetworkPolicies have their own tests (cluster-policy-source.test.ts): these count the watches without them.
  const s = new KubeClusterSource({
    kubeConfig: api.kubeConfig(),
    nodeName: 'node-1',
    timing: FAST,
    planDebounceMs: 5,
    clusterPolicies: false,
    ...opts,
  });
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

function restartsBy(s: KubeClusterSource, resource: string, reason: RestartReason): number {
  return s.status().find((w) => w.resource === resource)?.restartsByReason?.[reason] ?? -1;
}

/** A logger that keeps every line (level, message, fields). */
function capture(): { log: SourceLogger; lines: { level: string; msg: string; obj: Record<string, unknown> }[] } {
  const lines: { level: string; msg: string; obj: Record<string, unknown> }[] = [];
  const at =
    (level: string) =>
    (obj: object, msg?: string): void => {
      lines.push({ level, msg: msg ?? '', obj: obj as Record<string, unknown> });
    };
  return { log: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }, lines };
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
  // Node labels are kept (ClusterNetworkPolicy `nodes` peers select by them).
  assert.deepEqual(snap.nodes, [
    { name: 'node-1', addresses: ['192.168.0.1'], labels: { 'kubernetes.io/hostname': 'node-1' }, internalIPs: ['192.168.0.1'] },
  ]);
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

test('410 Expired: the informer relists, and objects deleted meanwhile disappear; logged at info, counted as gone', async () => {
  const cap = capture();
  const s = await started({ log: cap.log });
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
  const w = 'pods spec.nodeName=node-1';
  assert.equal(restartsBy(s, w, 'gone'), 1, 'the relist is counted, as gone');
  assert.equal(restartsBy(s, w, 'error'), 0, 'a 410 is no error');
  assert.equal(restartsBy(s, w, 'closed'), 1, 'the stream the test ended');
  const logged = cap.lines.filter((l) => l.msg.includes('410 Gone') && l.obj['watch'] === w);
  assert.deepEqual(
    logged.map((l) => l.level),
    ['info'],
    'logged once, at info',
  );
});

test('a quiet stream is probed, not restarted; a dead one (silent while its resource changes) is restarted as stalled', async () => {
  await api.close();
  // Bookmarks as a real watch cache sends them: only when the resource moved.
  api = await FakeApiServer.start({ token: 'sekret', bookmarkIntervalMs: 20 });
  seed(api);
  const cap = capture();
  const s = await started({ timing: { ...FAST, idleTimeoutMs: 300 }, log: cap.log });
  await waitFor(() => api.watchers().length === 5, 'watching');
  // The agent's streams ask for bookmarks; its probe watches do not.
  const mainStreams = (): number[] => api.watchers().flatMap((w) => (w.bookmarks ? [w.id] : []));
  const streams = mainStreams();
  // Other resources keep changing (the global RV moves) while namespaces are quiet.
  const probeWatches = (): number =>
    api.requests.filter((r) => r.watch && r.path === '/api/v1/namespaces' && r.query.timeoutSeconds === '1').length;
  let i = 0;
  await waitFor(
    async () => {
      api.create('pods', pod('ops', `churn-${i}`, {}, 'node-9', `10.0.9.${(i++ % 250) + 1}`));
      await new Promise((r) => setTimeout(r, 20));
      return probeWatches() >= 2;
    },
    'two probes of the quiet namespaces stream',
    15_000,
  );
  assert.equal(totalRestarts(s), 0, 'quiet streams are not restarted');
  assert.deepEqual(mainStreams(), streams, 'the same streams, never reopened');
  assert.ok(
    s.status().every((w) => w.lastError === undefined),
    JSON.stringify(s.status()),
  );
  assert.ok(
    cap.lines.some((l) => l.level === 'debug' && l.msg === 'silent watch stream is quiet' && l.obj['watch'] === 'namespaces'),
  );
  // The namespaces stream goes dead while namespaces change: the probe finds the missed event.
  api.silence('namespaces');
  api.create('namespaces', namespace('during-silence'));
  await waitFor(() => restartsBy(s, 'namespaces', 'stalled') === 1, 'stalled restart', 15_000);
  await waitFor(() => s.snapshot().namespaces.some((n) => n.name === 'during-silence'), 'caught up');
  assert.match(s.status().find((w) => w.resource === 'namespaces')?.lastError ?? '', /stalled: missed the event/);
  assert.equal(restartsBy(s, 'namespaces', 'error'), 0, 'a stalled stream is not counted as an error');
  assert.ok(cap.lines.some((l) => l.level === 'warn' && l.msg === 'watch stream missed events; restarting'));
  assert.equal(restarts(s, 'networkpolicies'), 0);
});

test('a stream the server ends is resumed from its resourceVersion and counted as closed, not as an error', async () => {
  const s = await started();
  await waitFor(() => api.watchers().length === 5, 'watching');
  const lists = (): number => api.requests.filter((r) => !r.watch && r.method === 'GET').length;
  const before = lists();
  api.endStreams('namespaces');
  api.create('namespaces', namespace('after-close'));
  await waitFor(() => s.snapshot().namespaces.some((n) => n.name === 'after-close'), 'resumed');
  assert.equal(restartsBy(s, 'namespaces', 'closed'), 1);
  assert.equal(restartsBy(s, 'namespaces', 'error'), 0);
  assert.equal(lists(), before, 'no relist');
});

test('after an API server outage the watches follow the returned server within 5 s (default backoff, capped)', async () => {
  const s = await started({ timing: {} });
  await waitFor(() => api.watchers().length === 5, 'watching');
  await api.refuse();
  // Long enough for the backoff to reach its cap (250 ms doubling to 3 s: the 5th delay).
  await waitFor(() => restartsBy(s, 'namespaces', 'error') >= 5, 'backoff at its cap', 30_000);
  api.create('namespaces', namespace('during-outage'));
  await api.accept();
  // A requirement, not a measurement: converged within a bounded wait of 5 s.
  await waitFor(() => s.snapshot().namespaces.some((n) => n.name === 'during-outage'), 'followed the server', 5_000);
  assert.ok(s.synced());
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

test('the peer plan waits while the agent is busy (applying or a change pending), and at most 1 s', async () => {
  const s = await started();
  await waitFor(() => api.watchers().length === 5, 'watching');
  let busy = true;
  s.deferWhile(() => busy);
  api.create('networkpolicies', webFrom('web-from-cache', { podSelector: { matchLabels: { app: 'cache' } } }));
  await waitFor(() => s.snapshot().policies.some((p) => p.name === 'web-from-cache'), 'policy seen');
  await new Promise((r) => setTimeout(r, 200));
  assert.ok(!api.watchers().some((w) => w.labelSelector === 'app=cache'), 'no plan while busy');
  busy = false;
  await waitFor(() => pods(s).includes('shop/cache-1'), 'planned once quiet');

  // Busy for good: the plan still comes, late.
  busy = true;
  api.create('networkpolicies', webFrom('web-from-mon', { namespaceSelector: {}, podSelector: { matchLabels: { app: 'mon' } } }));
  await waitFor(() => pods(s).includes('ops/mon-1'), 'planned after the longest wait', 5000);
});

test('local pod churn that the same policies select keeps the plan; a local pod another policy selects brings its peers', async () => {
  const s = await started();
  await waitFor(() => api.watchers().length === 5, 'watching');
  const before = api.watchers().map((w) => w.id);
  // A rollout of local web pods: the policies selecting local pods stay the same.
  for (let i = 0; i < 20; i++) {
    api.create('pods', pod('shop', `web-r${i}`, { app: 'web' }, 'node-1', `10.0.1.${10 + i}`));
    if (i > 0) api.delete('pods', 'shop', `web-r${i - 1}`);
  }
  await waitFor(() => pods(s).includes('shop/web-r19') && !pods(s).includes('shop/web-r18'), 'rollout seen');
  assert.deepEqual(
    api.watchers().map((w) => w.id),
    before,
    'no watch opened or closed',
  );
  // A local pod of a kind another policy selects: that policy's peers are watched.
  api.create(
    'networkpolicies',
    networkPolicy('ops', 'mon-from-cache', {
      podSelector: { matchLabels: { app: 'mon' } },
      ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'cache' } } }] }],
    }),
  );
  await waitFor(() => s.peerPlan()?.watches.length === 1, 'policy seen, not relevant yet');
  api.create('pods', pod('ops', 'mon-2', { app: 'mon' }, 'node-1', '10.0.1.50'));
  await waitFor(() => pods(s).includes('shop/cache-1'), 'the new relevant policy brings its peers');
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

test('a local pod in a peer watch too: the local watch alone says it is there, so each change notifies once and shows at once', async () => {
  // db-0 runs here and is a peer of web-from-backend: the local watch and a peer watch both carry it.
  api.create('networkpolicies', webFrom('web-from-backend', { podSelector: { matchLabels: { tier: 'backend' } } }));
  api.create('pods', pod('shop', 'db-0', { app: 'db', tier: 'backend' }, 'node-1', '10.0.1.5'));
  const s = await started();
  await waitFor(
    () =>
      s.status().some((w) => w.resource.startsWith('pods -n shop') && w.resource.includes('tier') && w.synced && w.objects > 0),
    'the peer watch of tier=backend listed',
  );
  const reasons: string[] = [];
  // What the snapshot holds of db-0 when each change is announced (the agent snapshots then).
  const seen: string[] = [];
  s.onChange((r) => {
    if (!r.includes('shop/db-0')) return;
    reasons.push(r);
    seen.push(s.snapshot().pods.some((p) => p.name === 'db-0') ? 'there' : 'gone');
  });
  api.delete('pods', 'shop', 'db-0');
  await waitFor(() => !pods(s).includes('shop/db-0'), 'db-0 deleted');
  // Both streams delivered (a later change of another pod in the same peer watch shows the peer stream is past it).
  api.create('pods', pod('shop', 'db-9', { app: 'db', tier: 'backend' }, 'node-2', '10.0.2.19'));
  await waitFor(() => pods(s).includes('shop/db-9'), 'db-9 seen');
  assert.deepEqual(reasons, ['pods delete shop/db-0'], "one change: the local watch's");
  assert.deepEqual(seen, ['gone'], 'the change shows in the snapshot it announces');
  api.create('pods', pod('shop', 'db-0', { app: 'db', tier: 'backend' }, 'node-1', '10.0.1.5'));
  await waitFor(() => pods(s).includes('shop/db-0'), 'db-0 back');
  api.delete('pods', 'shop', 'db-9');
  await waitFor(() => !pods(s).includes('shop/db-9'), 'db-9 deleted');
  assert.deepEqual(reasons, ['pods delete shop/db-0', 'pods add shop/db-0']);
  assert.deepEqual(seen, ['gone', 'there']);
  assert.equal(s.snapshot().pods.find((p) => p.name === 'db-0')?.nodeName, 'node-1');
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
