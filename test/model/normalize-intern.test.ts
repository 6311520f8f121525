// Sharing of equal parts of normalized pods (labels, container ports, port
// lists): one instance per distinct value, frozen, values unchanged, and
// pools that never keep a value alive.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { EMPTY, StringPool, WeakPool } from '../../src/model/normalize-intern.ts';
import { normalizePod } from '../../src/model/normalize.ts';
import type { Pod } from '../../src/model/types.ts';

function podObject(
  name: string,
  labels: Record<string, unknown>,
  ports: Record<string, unknown>[],
  ips: string[] = ['10.0.0.1'],
): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { namespace: 'shop', name, labels },
    spec: { nodeName: 'node-1', containers: [{ name: 'c', ports }] },
    status: { phase: 'Running', podIPs: ips.map((ip) => ({ ip })) },
  };
}

function normalized(obj: unknown): Pod {
  const r = normalizePod(obj);
  assert.ok(r.ok, JSON.stringify(r.errors));
  return r.value;
}

test('pods with equal labels share one frozen labels object; different labels do not', () => {
  const a = normalized(podObject('a', { app: 'web', tier: 'front' }, []));
  const b = normalized(podObject('b', { tier: 'front', app: 'web' }, []));
  const c = normalized(podObject('c', { app: 'web', tier: 'back' }, []));
  const d = normalized(podObject('d', { app: 'web' }, []));
  assert.equal(a.labels, b.labels, 'equal labels in any order: one object');
  assert.notEqual(a.labels, c.labels);
  assert.notEqual(a.labels, d.labels);
  assert.deepEqual(a.labels, { app: 'web', tier: 'front' });
  assert.deepEqual(Object.keys(b.labels), ['app', 'tier'], 'still sorted by key');
  assert.deepEqual(c.labels, { app: 'web', tier: 'back' });
  assert.ok(Object.isFrozen(a.labels));
  // A shared object cannot be changed through one pod behind the others' backs.
  assert.throws(() => {
    (a.labels as Record<string, string>).app = 'x';
  }, TypeError);
  assert.equal(b.labels.app, 'web');
  // Invalid labels are dropped before sharing: the valid rest is shared.
  const e = normalizePod(podObject('e', { app: 'web', tier: 'front', 'bad key!': 'x' }, []));
  assert.ok(e.ok);
  assert.equal(e.value.labels, a.labels);
  assert.equal(e.errors.length, 1);
  // No labels at all: one shared empty object.
  assert.equal(
    normalized(podObject('f', {}, [])).labels,
    normalized({ ...podObject('g', {}, []), metadata: { namespace: 'shop', name: 'g' } }).labels,
  );
});

test('equal container ports are one frozen list of shared frozen ports', () => {
  const http = { name: 'http', containerPort: 8080 };
  const metrics = { name: 'metrics', containerPort: 9090, protocol: 'TCP' };
  const a = normalized(podObject('a', {}, [http, metrics]));
  const b = normalized(podObject('b', {}, [metrics, http]));
  const c = normalized(podObject('c', {}, [http]));
  const d = normalized(podObject('d', {}, [{ name: 'http', containerPort: 8080, protocol: 'UDP' }]));
  assert.equal(a.ports, b.ports, 'the same ports in another order: one list');
  assert.deepEqual(a.ports, [
    { name: 'http', port: 8080, protocol: 'TCP' },
    { name: 'metrics', port: 9090, protocol: 'TCP' },
  ]);
  assert.notEqual(c.ports, a.ports);
  assert.equal(c.ports[0], a.ports[0], 'one object per distinct port, across lists');
  assert.notEqual(d.ports[0], c.ports[0], 'another protocol is another port');
  assert.deepEqual(d.ports, [{ name: 'http', port: 8080, protocol: 'UDP' }]);
  assert.ok(Object.isFrozen(a.ports) && Object.isFrozen(a.ports[0]));
  const none = normalized(podObject('e', {}, []));
  assert.equal(none.ports, EMPTY);
  assert.deepEqual(none.ports, []);
});

test('IP lists: exact, one per family, v4 first; no IPs is the shared empty list', () => {
  assert.deepEqual(normalized(podObject('a', {}, [], ['fd00::1', '10.0.0.1'])).ips, ['10.0.0.1', 'fd00::1']);
  assert.deepEqual(normalized(podObject('b', {}, [], ['fd00::0:1'])).ips, ['fd00::1']);
  const pending = normalized(podObject('c', {}, [], []));
  assert.equal(pending.ips, EMPTY);
  assert.deepEqual(pending.ips, []);
  assert.ok(Object.isFrozen(EMPTY));
});

test('WeakPool: equal content shares, a hash collision with other content does not', () => {
  const pool = new WeakPool<{ v: string }>((a, b) => a.v === b.v);
  const x = { v: 'x' };
  assert.equal(pool.intern(1, x), x);
  assert.equal(pool.intern(1, { v: 'x' }), x);
  const y = { v: 'y' };
  assert.equal(pool.intern(1, y), y, 'same hash, other content: not shared, still correct');
  assert.equal(pool.intern(1, { v: 'y' }), y, 'the newer value took the slot');
  // Hashes outside the small-integer range are folded, not rejected.
  const z = { v: 'z' };
  assert.equal(pool.intern(0x8000_0001, z), z);
  assert.equal(pool.intern(0x8000_0001, { v: 'z' }), z);
});

test('WeakPool keeps nothing alive: entries of collected values are swept', async () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const pool = new WeakPool<{ i: number }>((a, b) => a.i === b.i);
  const kept: { i: number }[] = [];
  for (let i = 0; i < 1_500; i++) {
    const v = pool.intern(i, { i });
    if (i % 100 === 0) kept.push(v);
  }
  // WeakRef targets stay alive until the current job ends.
  await new Promise((resolve) => setImmediate(resolve));
  gc();
  for (let i = 1_500; i < 3_000; i++) pool.intern(i, { i });
  assert.ok(pool.size < 2_000, `swept: ${pool.size} entries`);
  for (const v of kept) assert.equal(pool.intern(v.i, { i: v.i }), v, 'live values are still shared');
});

test('StringPool: equal strings, bounded', () => {
  const pool = new StringPool(4);
  for (const s of ['a', 'b', 'a', 'c', 'd', 'e', 'f']) assert.equal(pool.intern(s), s);
  assert.ok(pool.size <= 4);
});
