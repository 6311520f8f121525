// ResourceWatch on its own: the informer's cache is the only copy of the
// objects (values(), get() and size read it), so its bookkeeping must follow
// every way an object enters, changes in, or leaves that cache.
import { afterEach, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api } from '@kubernetes/client-node';
import { ResourceWatch, compactRv } from '../../src/kube/resource-watch.ts';
import type { ChangeType } from '../../src/kube/resource-watch.ts';
import { normalizePod } from '../../src/model/normalize.ts';
import type { Normalized } from '../../src/model/normalize.ts';
import type { Pod } from '../../src/model/types.ts';
import { FakeApiServer, namespace, pod, waitFor } from '../support/fake-apiserver.ts';

const FAST = { restartInitialMs: 20, restartMaxMs: 200, reconnectMaxMs: 50, idleTimeoutMs: 0, listTimeoutMs: 5_000 };

let api: FakeApiServer;
let watches: ResourceWatch<Pod>[] = [];

beforeEach(async () => {
  api = await FakeApiServer.start({ bookmarkIntervalMs: 0 });
});

afterEach(async () => {
  for (const w of watches) await w.stop();
  watches = [];
  await api.close();
});

/** Pods labelled bad=yes fail to normalize (they are not part of the model). */
function normalize(raw: unknown): Normalized<Pod> {
  const labels = (raw as { metadata?: { labels?: Record<string, string> } }).metadata?.labels;
  if (labels?.bad === 'yes')
    return { ok: false, errors: [{ kind: 'Pod', namespace: undefined, name: 'x', path: 'metadata.labels', message: 'bad' }] };
  return normalizePod(raw);
}

interface Seen {
  readonly watch: ResourceWatch<Pod>;
  readonly changes: string[];
}

async function watching(pageSize?: number): Promise<Seen> {
  const core = api.kubeConfig().makeApiClient(CoreV1Api);
  const changes: string[] = [];
  const watch = new ResourceWatch<Pod>({
    name: 'pods',
    kubeConfig: api.kubeConfig(),
    path: '/api/v1/pods',
    list: (page) =>
      core.listPodForAllNamespaces({
        ...(page.limit === undefined ? {} : { limit: page.limit }),
        ...(page.continue === undefined ? {} : { _continue: page.continue }),
      }),
    ...(pageSize === undefined ? {} : { pageSize }),
    normalize,
    timing: FAST,
    onChange: (type: ChangeType, key: string) => changes.push(`${type} ${key}`),
  });
  watches.push(watch);
  watch.start();
  await waitFor(() => watch.synced(), 'synced');
  await waitFor(() => api.watchers().length === 1, 'watching');
  return { watch, changes };
}

function keys(w: ResourceWatch<Pod>): string[] {
  return [...w.values()].map((p) => `${p.namespace}/${p.name}`).sort();
}

/** values(), get() and size agree with each other. */
function consistent(w: ResourceWatch<Pod>): void {
  const all = [...w.values()];
  assert.equal(w.size, all.length, 'size counts the objects values() yields');
  for (const p of all) assert.equal(w.get(p.name, p.namespace), p, `get(${p.name}, ${p.namespace})`);
}

test('values, get and size follow adds, updates, deletes and objects that fail to normalize', async () => {
  api.create('pods', pod('shop', 'a', { app: 'a' }, 'node-1', '10.0.0.1'));
  api.create('pods', pod('shop', 'b', { app: 'b', bad: 'yes' }, 'node-1', '10.0.0.2'));
  api.create('pods', pod('ops', 'c', { app: 'c' }, 'node-2', '10.0.0.3'));
  const { watch: w, changes } = await watching();
  assert.deepEqual(keys(w), ['ops/c', 'shop/a']);
  assert.equal(w.get('b', 'shop'), undefined, 'cached by the informer, but not part of the model');
  consistent(w);
  assert.deepEqual(changes.sort(), ['add ops/c', 'add shop/a']);
  changes.length = 0;

  // Becomes valid: an add. Becomes invalid: a delete. Deleted while invalid: nothing.
  api.patchLabels('pods', 'shop', 'b', { bad: null });
  api.patchLabels('pods', 'shop', 'a', { bad: 'yes' });
  api.delete('pods', 'shop', 'a');
  api.patchLabels('pods', 'ops', 'c', { tier: 'x' });
  await waitFor(() => changes.length === 3, 'three changes');
  assert.deepEqual(changes, ['add shop/b', 'delete shop/a', 'update ops/c']);
  assert.deepEqual(keys(w), ['ops/c', 'shop/b']);
  assert.equal(w.get('c', 'ops')?.labels.tier, 'x');
  consistent(w);

  // The last object of a namespace leaves; the namespace comes back.
  api.delete('pods', 'ops', 'c');
  api.create('pods', pod('ops', 'd', { app: 'd' }, 'node-2', '10.0.0.4'));
  await waitFor(() => changes.length === 5, 'two more changes');
  assert.deepEqual(changes.slice(3), ['delete ops/c', 'add ops/d']);
  assert.deepEqual(keys(w), ['ops/d', 'shop/b']);
  consistent(w);
});

test('an update equal to the cached value is no change; a real one replaces the object', async () => {
  api.create('pods', pod('shop', 'a', { app: 'a' }, 'node-1', '10.0.0.1'));
  const { watch: w, changes } = await watching();
  changes.length = 0;
  const before = w.get('a', 'shop');
  const a = pod('shop', 'a', { app: 'a' }, 'node-1', '10.0.0.1');
  api.update('pods', { ...a, metadata: { ...a.metadata, annotations: { heartbeat: '1' } } });
  api.patchLabels('pods', 'shop', 'a', { tier: 'x' });
  await waitFor(() => changes.length > 0, 'the label change');
  assert.deepEqual(changes, ['update shop/a'], 'the annotation-only update was no change');
  assert.notEqual(w.get('a', 'shop'), before);
  assert.equal(w.get('a', 'shop')?.labels.tier, 'x');
  consistent(w);
});

test('an annotation-only update leaves the very same cached object', async () => {
  api.create('pods', pod('shop', 'a', { app: 'a' }, 'node-1', '10.0.0.1'));
  api.create('pods', pod('shop', 'z', { app: 'z' }, 'node-1', '10.0.0.2'));
  const { watch: w, changes } = await watching();
  changes.length = 0;
  const before = w.get('a', 'shop');
  const a = pod('shop', 'a', { app: 'a' }, 'node-1', '10.0.0.1');
  api.update('pods', { ...a, metadata: { ...a.metadata, annotations: { heartbeat: '1' } } });
  // A later real change on another pod marks that the heartbeat was delivered (one stream, in order).
  api.patchLabels('pods', 'shop', 'z', { tier: 'x' });
  await waitFor(() => changes.length > 0, 'the label change');
  assert.deepEqual(changes, ['update shop/z']);
  assert.equal(w.get('a', 'shop'), before, 'same object');
  consistent(w);
});

test('a relist (410) removes what is gone and adds what is new, across pages and namespaces', async () => {
  for (let i = 0; i < 7; i++) api.create('pods', pod(`ns-${i % 3}`, `p-${i}`, { app: 'x' }, 'node-1', `10.0.0.${i + 1}`));
  api.create('pods', pod('ns-9', 'bad', { bad: 'yes' }, 'node-1', '10.0.1.1'));
  const { watch: w, changes } = await watching(2);
  assert.equal(w.size, 7);
  changes.length = 0;
  api.silence('pods');
  api.delete('pods', 'ns-0', 'p-0');
  api.delete('pods', 'ns-0', 'p-3');
  api.delete('pods', 'ns-0', 'p-6');
  api.delete('pods', 'ns-9', 'bad');
  api.create('pods', pod('ns-5', 'q', { app: 'x' }, 'node-1', '10.0.2.1'));
  api.patchLabels('pods', 'ns-1', 'p-1', { tier: 'y' });
  api.compact();
  api.endStreams('pods');
  await waitFor(() => changes.length === 5, 'relisted');
  assert.deepEqual(changes.sort(), ['add ns-5/q', 'delete ns-0/p-0', 'delete ns-0/p-3', 'delete ns-0/p-6', 'update ns-1/p-1']);
  assert.deepEqual(keys(w), ['ns-1/p-1', 'ns-1/p-4', 'ns-2/p-2', 'ns-2/p-5', 'ns-5/q']);
  consistent(w);
});

test('pods normalized from the list and from the watch share equal labels and ports', async () => {
  const ports = [{ name: 'http', containerPort: 8080 }];
  api.create('pods', pod('shop', 'a', { app: 'web', tier: 'front' }, 'node-1', '10.0.0.1', { ports }));
  api.create('pods', pod('shop', 'b', { tier: 'front', app: 'web' }, 'node-2', '10.0.0.2', { ports }));
  const { watch: w, changes } = await watching();
  api.create('pods', pod('billing', 'c', { app: 'web', tier: 'front' }, 'node-3', '10.0.0.3', { ports }));
  await waitFor(() => changes.includes('add billing/c'), 'watched pod');
  const [a, b, c] = [w.get('a', 'shop'), w.get('b', 'shop'), w.get('c', 'billing')];
  assert.ok(a !== undefined && b !== undefined && c !== undefined);
  assert.deepEqual(a.labels, { app: 'web', tier: 'front' });
  assert.equal(b.labels, a.labels, 'list: one labels object');
  assert.equal(c.labels, a.labels, 'watch: the same labels object');
  assert.equal(c.ports, a.ports, 'one ports list');
  assert.deepEqual(a.ips, ['10.0.0.1']);
});

// Silence. A real API server sends a watcher a bookmark only when the
// resource's resourceVersion moved past what the watcher has seen (the fake
// does the same by default), and a list returns the global resourceVersion,
// which moves with every write to any resource. These tests scale the idle
// limit down (150 s -> 200 ms); each probe's watch still takes the server's
// 1 s timeoutSeconds.

/** A watch of this node's pods (spec.nodeName=node-1): quiet while nothing changes there. */
async function nodePods(idleTimeoutMs: number): Promise<Seen> {
  const core = api.kubeConfig().makeApiClient(CoreV1Api);
  const changes: string[] = [];
  const fieldSelector = 'spec.nodeName=node-1';
  const watch = new ResourceWatch<Pod>({
    name: `pods ${fieldSelector}`,
    kubeConfig: api.kubeConfig(),
    path: '/api/v1/pods',
    fieldSelector,
    list: (page) =>
      core.listPodForAllNamespaces({
        fieldSelector,
        ...(page.limit === undefined ? {} : { limit: page.limit }),
        ...(page.continue === undefined ? {} : { _continue: page.continue }),
      }),
    probeList: () => core.listPodForAllNamespaces({ limit: 1 }),
    normalize,
    timing: { ...FAST, idleTimeoutMs },
    onChange: (type: ChangeType, key: string) => changes.push(`${type} ${key}`),
  });
  watches.push(watch);
  watch.start();
  await waitFor(() => watch.synced(), 'synced');
  await waitFor(() => api.watchers().length === 1, 'watching');
  return { watch, changes };
}

/** Watch requests of liveness probes (the agent's own stream never sets timeoutSeconds). */
function probeWatches(): number {
  return api.requests.filter((r) => r.watch && r.query.timeoutSeconds !== undefined).length;
}

function noRestarts(w: ResourceWatch<Pod>): void {
  const st = w.status();
  assert.equal(st.restarts, 0, JSON.stringify(st));
  assert.deepEqual(st.restartsByReason, { error: 0, stalled: 0, gone: 0, closed: 0 });
  assert.equal(st.lastError, undefined);
}

test('a quiet resource for "10 minutes" (four probes at the default 150 s idle limit) while the server moves: no restart, no error', async () => {
  await api.close();
  api = await FakeApiServer.start({ bookmarkIntervalMs: 20 });
  api.create('pods', pod('shop', 'a', { app: 'a' }, 'node-1', '10.0.0.1'));
  const { watch: w, changes } = await nodePods(200);
  const stream = api.watchers()[0]?.id;
  const rvAtSync = api.resourceVersion;
  // Other resources change all along: the server's (global) resourceVersion
  // moves past the stream's, so a list alone would call the stream dead.
  let i = 0;
  await waitFor(
    async () => {
      api.create('namespaces', namespace(`churn-${i++}`));
      await new Promise((r) => setTimeout(r, 20));
      return w.probes >= 5 && probeWatches() >= 4;
    },
    'four completed probes',
    30_000,
  );
  assert.ok(api.resourceVersion > rvAtSync + 4, 'the server moved');
  noRestarts(w);
  assert.deepEqual(
    api.watchers().flatMap((x) => (x.bookmarks ? [x.id] : [])),
    [stream],
    'the same stream all along',
  );
  assert.deepEqual(changes, ['add shop/a']);
  // ... and it still delivers.
  api.create('pods', pod('shop', 'b', { app: 'b' }, 'node-1', '10.0.0.2'));
  await waitFor(() => changes.includes('add shop/b'), 'a change after the quiet period');
  noRestarts(w);
});

test('a quiet server (nothing changes at all): the probe list alone tells quiet, no probe watch', async () => {
  api.create('pods', pod('shop', 'a', { app: 'a' }, 'node-1', '10.0.0.1'));
  const { watch: w } = await nodePods(100);
  await waitFor(() => w.probes >= 4, 'probes');
  assert.equal(probeWatches(), 0);
  assert.ok(api.requests.filter((r) => !r.watch && r.query.limit === '1').length >= 3, 'limit=1 probe lists');
  noRestarts(w);
});

test('a dead stream (silent while its resource changes) is still detected: restarted as stalled, nothing lost', async () => {
  await api.close();
  api = await FakeApiServer.start({ bookmarkIntervalMs: 20 });
  api.create('pods', pod('shop', 'a', { app: 'a' }, 'node-1', '10.0.0.1'));
  const { watch: w, changes } = await nodePods(200);
  api.silence('pods');
  api.create('pods', pod('shop', 'b', { app: 'b' }, 'node-1', '10.0.0.2'));
  api.delete('pods', 'shop', 'a');
  await waitFor(() => w.status().restartsByReason?.stalled === 1, 'stalled restart', 15_000);
  await waitFor(() => changes.includes('add shop/b') && changes.includes('delete shop/a'), 'caught up');
  assert.deepEqual(keys(w), ['shop/b']);
  const st = w.status();
  assert.equal(st.restartsByReason?.error, 0, 'not counted as an error');
  assert.equal(st.restarts, 1);
  assert.match(st.lastError ?? '', /stalled: missed the event at resourceVersion \d+/);
  consistent(w);
});

test('cached resourceVersions are held as numbers only when they convert back to the same text', () => {
  for (const rv of ['0', '7', '123456789', '999999999999999']) {
    const c = compactRv(rv);
    assert.equal(typeof c, 'number', rv);
    assert.equal(String(c), rv);
  }
  // Leading zeros, beyond 15 digits (past exact doubles), non-decimal: kept as given.
  for (const rv of ['007', '12345678901234567890', '1e3', ' 12', 'abc', '']) assert.equal(compactRv(rv), rv);
  assert.equal(compactRv(undefined), undefined);
});
