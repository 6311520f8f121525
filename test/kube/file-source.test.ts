import { afterEach, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileClusterSource } from '../../src/kube/file-source.ts';
import type { FileSourceOptions } from '../../src/kube/file-source.ts';
import type { NetworkPolicy } from '../../src/model/types.ts';
import { namespace, networkPolicy, pod, waitFor } from '../support/fake-apiserver.ts';
import type { KubeObject } from '../support/fake-apiserver.ts';

let dir: string;
let sources: FileClusterSource[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'file-source-'));
});

afterEach(async () => {
  for (const s of sources) await s.stop();
  sources = [];
  await rm(dir, { recursive: true, force: true });
});

function yaml(...objs: KubeObject[]): string {
  // JSON is YAML; documents separated as kubectl accepts them.
  return objs.map((o) => JSON.stringify(o)).join('\n---\n');
}

function source(opts: Partial<FileSourceOptions> = {}): FileClusterSource {
  const s = new FileClusterSource({ dir, debounceMs: 20, pollMs: 50, ...opts });
  sources.push(s);
  return s;
}

const web = pod('shop', 'web', { app: 'web' }, 'node-1', '10.0.0.1');
const deny = networkPolicy('shop', 'deny', { podSelector: {}, ingress: [] });

test('first read: synced, normalized snapshot, status', async () => {
  await writeFile(join(dir, 'a.yaml'), yaml(namespace('shop', { team: 'a' }), web));
  await mkdir(join(dir, 'sub'));
  await writeFile(join(dir, 'sub', 'p.json'), JSON.stringify(deny));
  const s = source();
  const changes: string[] = [];
  s.onChange((r) => changes.push(r));
  await s.start();
  assert.ok(s.synced());
  const snap = s.snapshot();
  assert.deepEqual(
    snap.pods.map((p) => `${p.namespace}/${p.name} ${p.ips.join()}`),
    ['shop/web 10.0.0.1'],
  );
  assert.deepEqual(
    snap.policies.map((p) => p.name),
    ['deny'],
  );
  assert.deepEqual(
    snap.namespaces.map((n) => n.labels.team),
    ['a'],
  );
  assert.deepEqual(changes, ['synced']);
  const [st] = s.status();
  assert.equal(st?.synced, true);
  assert.equal(st?.objects, 3);
  assert.equal(st?.lastError, undefined);
});

test('a change to the files is picked up by fs.watch alone (no polling)', async () => {
  await writeFile(join(dir, 'a.yaml'), yaml(web));
  const s = source({ pollMs: 0 });
  const changes: string[] = [];
  s.onChange((r) => changes.push(r));
  await s.start();
  await writeFile(join(dir, 'b.yaml'), yaml(deny));
  await waitFor(() => s.snapshot().policies.length === 1, 'policy added');
  await unlink(join(dir, 'b.yaml'));
  await waitFor(() => s.snapshot().policies.length === 0, 'policy removed');
  assert.ok(changes.filter((c) => c.startsWith('files changed')).length >= 2);
});

test('the periodic stat fallback finds changes without fs.watch', async () => {
  await writeFile(join(dir, 'a.yaml'), yaml(web));
  const s = source({ fsWatch: false, pollMs: 30 });
  await s.start();
  await writeFile(join(dir, 'a.yaml'), yaml(web, deny));
  await waitFor(() => s.snapshot().policies.length === 1, 'policy via polling');
});

test('a broken file keeps the last good state and reports it; fixing it recovers', async () => {
  await writeFile(join(dir, 'a.yaml'), yaml(web, deny));
  const s = source();
  await s.start();
  await writeFile(join(dir, 'a.yaml'), 'kind: NetworkPolicy\n  bad: [indent\n');
  await waitFor(() => s.status()[0]?.lastError, 'load error reported');
  assert.match(s.status()[0]?.lastError ?? '', /a\.yaml/);
  assert.deepEqual(
    s.snapshot().policies.map((p) => p.name),
    ['deny'],
    'policies never vanish because of a broken file',
  );
  assert.ok(s.synced());
  await writeFile(join(dir, 'a.yaml'), yaml(web));
  await waitFor(() => s.snapshot().policies.length === 0 && s.status()[0]?.lastError === undefined, 'recovered');
});

test('an unreadable directory: not synced, error in status, never throws; synced once it appears', async () => {
  const missing = join(dir, 'later');
  const s = new FileClusterSource({ dir: missing, debounceMs: 10, pollMs: 30 });
  sources.push(s);
  await s.start();
  assert.equal(s.synced(), false);
  assert.match(s.status()[0]?.lastError ?? '', /no such file|cannot read/);
  assert.deepEqual(s.snapshot().pods, []);
  await mkdir(missing);
  await writeFile(join(missing, 'a.yaml'), yaml(web));
  await waitFor(() => s.synced(), 'synced after the directory appears');
  assert.equal(s.snapshot().pods.length, 1);
});

test('onInvalid: once per new or changed invalid policy', async () => {
  const bad = (port: number): KubeObject =>
    networkPolicy('shop', 'bad', { podSelector: {}, ingress: [{ ports: [{ port, endPort: 10 }] }] });
  await writeFile(join(dir, 'a.yaml'), yaml(bad(80)));
  const s = source();
  const invalid: NetworkPolicy[] = [];
  s.onInvalid((p) => invalid.push(p));
  await s.start();
  assert.deepEqual(
    invalid.map((p) => p.name),
    ['bad'],
  );
  await writeFile(join(dir, 'b.yaml'), yaml(web)); // unrelated change: no repeat
  await waitFor(() => s.snapshot().pods.length === 1, 'pod added');
  assert.equal(invalid.length, 1);
  await writeFile(join(dir, 'a.yaml'), yaml(bad(90)));
  await waitFor(() => invalid.length === 2, 'changed invalid policy reported again');
});

test('stop(): no change events afterwards', async () => {
  await writeFile(join(dir, 'a.yaml'), yaml(web));
  const s = source();
  let changes = 0;
  s.onChange(() => changes++);
  await s.start();
  await s.stop();
  const at = changes;
  await writeFile(join(dir, 'a.yaml'), yaml(web, deny));
  // Absence: wait well past debounce and poll periods.
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(changes, at);
  assert.equal(s.snapshot().policies.length, 0);
});

test('ClusterNetworkPolicies and the legacy kinds are read from the directory, and follow its changes', async () => {
  const guard = {
    apiVersion: 'policy.networking.k8s.io/v1alpha2',
    kind: 'ClusterNetworkPolicy',
    metadata: { name: 'guard' },
    spec: {
      tier: 'Admin',
      priority: 1,
      subject: { namespaces: {} },
      egress: [{ action: 'Deny', to: [{ networks: ['169.254.169.254/32'] }] }],
    },
  } as KubeObject;
  const banp = {
    apiVersion: 'policy.networking.k8s.io/v1alpha1',
    kind: 'BaselineAdminNetworkPolicy',
    metadata: { name: 'default' },
    spec: { subject: { namespaces: {} }, ingress: [{ action: 'Deny', from: [{ namespaces: {} }] }] },
  } as KubeObject;
  await writeFile(join(dir, 'cnp.yaml'), yaml(guard, banp));
  const s = source();
  await s.start();
  const names = (): string[] => (s.snapshot().clusterPolicies ?? []).map((p) => `${p.sourceKind}/${p.name}`);
  assert.deepEqual(names(), ['BaselineAdminNetworkPolicy/default', 'ClusterNetworkPolicy/guard']);
  assert.equal(s.status()[0]?.objects, 2);
  // An invalid change is kept (fail closed) with its errors.
  await writeFile(join(dir, 'cnp.yaml'), yaml({ ...guard, spec: { ...(guard.spec as object), priority: 1001 } }));
  await waitFor(() => names().length === 1, 'the change');
  assert.deepEqual(
    s.snapshot().clusterPolicies?.[0]?.errors.map((e) => e.path),
    ['spec.priority'],
  );
});
