// End to end with packets: a simulated two-node cluster (test/harness), one
// real agent process per node namespace, both watching the in-process fake
// API server. Every step changes objects through the API only, then probes
// real connections until they match (bounded). Needs root, nft, ip, python3:
// skipped locally without them, failing in CI.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { namespace, networkPolicy, type KubeObject } from '../support/fake-apiserver.ts';
import type { Expectation } from '../harness/check.ts';
import { requireDatapath } from '../harness/requirements.ts';
import { agentCluster } from './agent-cluster.ts';
import { eventually } from './agent-process.ts';

function tcp80(from: string, to: string, allowed: boolean, why: string): Expectation {
  return { probe: { from, to, protocol: 'TCP', port: 80, family: 4, via: 'pod' }, allowed, why };
}

test('agent processes enforce policy changes on real traffic', { timeout: 300_000 }, async (t) => {
  if (!requireDatapath(t)) return;
  const {
    c,
    api,
    agents,
    podObject,
    startAgents,
    expectProbes: expect,
  } = await agentCluster(t, {
    style: 'routed',
    nodes: [{ name: 'node-1' }, { name: 'node-2' }],
    pods: [
      { key: 'shop/web', node: 'node-1' },
      { key: 'shop/other', node: 'node-1' },
      { key: 'shop/db', node: 'node-2' },
      { key: 'ext/client', node: 'node-2' },
    ],
  });
  api.create('namespaces', namespace('shop'));
  api.create('namespaces', namespace('ext'));
  for (const n of c.nodeObjects()) api.create('nodes', structuredClone(n) as KubeObject);
  api.create('pods', podObject('shop/web', 'web', { app: 'web' }));
  api.create('pods', podObject('shop/other', 'other', { app: 'other' }));
  api.create('pods', podObject('shop/db', 'db', { app: 'db' }));
  api.create('pods', podObject('ext/client', 'client', { app: 'client' }));
  await startAgents(['--deny-action', 'reject', '--drift-interval', '1s']);

  await expect('no policies: all open', [
    tcp80('shop/web', 'shop/db', true, 'no policy'),
    tcp80('ext/client', 'shop/db', true, 'no policy'),
  ]);

  // Policy created.
  api.create(
    'networkpolicies',
    networkPolicy('shop', 'db-from-web', {
      podSelector: { matchLabels: { app: 'db' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 80 }] }],
    }),
  );
  await expect('policy created', [
    tcp80('shop/web', 'shop/db', true, 'app=web allowed'),
    tcp80('shop/other', 'shop/db', false, 'app=other not allowed'),
    tcp80('ext/client', 'shop/db', false, 'other namespace not allowed'),
    tcp80('shop/db', 'shop/web', true, 'web is not isolated'),
  ]);

  // Pods relabelled.
  api.patchLabels('pods', 'shop', 'web', { app: 'web-v2' });
  api.patchLabels('pods', 'shop', 'other', { app: 'web' });
  await expect('pods relabelled', [
    tcp80('shop/web', 'shop/db', false, 'web lost app=web'),
    tcp80('shop/other', 'shop/db', true, 'other gained app=web'),
  ]);

  // Policy updated to also admit a labelled namespace.
  api.update(
    'networkpolicies',
    networkPolicy('shop', 'db-from-web', {
      podSelector: { matchLabels: { app: 'db' } },
      ingress: [
        {
          from: [{ podSelector: { matchLabels: { app: 'web' } } }, { namespaceSelector: { matchLabels: { team: 'blue' } } }],
          ports: [{ port: 80 }],
        },
      ],
    }),
  );
  await expect('policy updated, namespace not yet labelled', [tcp80('ext/client', 'shop/db', false, 'ext has no team=blue')]);
  api.patchLabels('namespaces', undefined, 'ext', { team: 'blue' });
  await expect('namespace relabelled', [tcp80('ext/client', 'shop/db', true, 'ext has team=blue')]);
  api.patchLabels('namespaces', undefined, 'ext', { team: null });
  await expect('namespace label removed', [tcp80('ext/client', 'shop/db', false, 'ext lost team=blue')]);

  // Pod deleted: its IP loses every allowance. Replaced with the same IP: the new pod's labels decide.
  api.delete('pods', 'shop', 'other');
  await expect('pod deleted', [tcp80('shop/other', 'shop/db', false, 'the IP belongs to no pod')]);
  api.create('pods', podObject('shop/other', 'other-2', { app: 'web' }));
  await expect('same IP, new pod with app=web', [tcp80('shop/other', 'shop/db', true, 'other-2 has app=web')]);
  api.delete('pods', 'shop', 'other-2');
  api.create('pods', podObject('shop/other', 'other-3', { app: 'batch' }));
  await expect('same IP, new pod with app=batch', [tcp80('shop/other', 'shop/db', false, 'other-3 has app=batch')]);

  // Invalid policy: enforced fail-closed, reported as an Event.
  api.create(
    'networkpolicies',
    networkPolicy('ext', 'broken', { podSelector: {}, ingress: [{ ports: [{ port: 8080, endPort: 80 }] }] }),
  );
  await expect('invalid policy fails closed', [
    tcp80('shop/web', 'ext/client', false, 'client isolated by an invalid policy'),
    tcp80('shop/db', 'shop/web', true, 'unrelated'),
  ]);
  await eventually('Event', () => api.events.some((e) => (e.body as { reason?: string }).reason === 'InvalidNetworkPolicy'));
  assert.equal(api.events.length, 1, 'only the node that runs ext/client reports it');
  assert.equal((api.events[0]?.body as { source?: { host?: string } }).source?.host, 'node-2');

  // Policies deleted: open again.
  api.delete('networkpolicies', 'ext', 'broken');
  api.delete('networkpolicies', 'shop', 'db-from-web');
  await expect('policies deleted', [
    tcp80('shop/web', 'ext/client', true, 'no policy'),
    tcp80('shop/web', 'shop/db', true, 'no policy'),
    tcp80('ext/client', 'shop/db', true, 'no policy'),
  ]);

  for (const a of agents) assert.equal(await a.metric('nftnp_nft_restore_errors_total'), 0);
  // Changes went as incremental transactions, none rejected: element-only ones
  // (remote pods) and ones that added and deleted chains (policies created,
  // deleted, and updated: a policy update replaces peer identities, whose
  // chains and allow sets come and go; see docs/datapath.md), so the probes
  // above checked those too.
  const updates = agents.flatMap((a) =>
    a.lines
      .filter((l) => l['event'] === 'apply' && l['mode'] === 'incremental' && l['result'] === 'applied')
      .map((l) => l['update'] as Record<string, number>),
  );
  const summary = JSON.stringify(updates);
  assert.ok(
    updates.some((u) => u['chainsAdded'] === 0 && u['chainsChanged'] === 0 && u['chainsDeleted'] === 0),
    summary,
  );
  assert.ok(
    updates.some((u) => (u['chainsAdded'] ?? 0) > 0),
    summary,
  );
  // A policy update replaces peer identities in one transaction: new chains and sets in, the old
  // identities' sets out (their chains, flushed, linger until the fold: nft/recent-peers.ts).
  assert.ok(
    updates.some((u) => (u['chainsAdded'] ?? 0) > 0 && (u['setsDeleted'] ?? 0) > 0),
    summary,
  );
  // Chains deleted by an incremental transaction: the policies' deletion takes the pod chain and the
  // rule chains away (the replaced identities' chains above linger until a fold, or a full apply). A
  // check of --drift-interval 1s that starts just before that change takes it into a full apply
  // ('read-back', 'refresh'), as it may on a loaded machine: then there is no increment to look at.
  const deletion = agents
    .flatMap((a) => a.lines)
    .filter(
      (l) =>
        l['event'] === 'apply' && (l['reasons'] as string[] | undefined)?.includes('networkpolicies delete shop/db-from-web'),
    );
  assert.ok(deletion.length > 0, 'the policies deletion was applied');
  for (const l of deletion)
    if (l['mode'] === 'incremental')
      assert.ok(((l['update'] as Record<string, number> | undefined)?.['chainsDeleted'] ?? 0) > 0, JSON.stringify(l));
  assert.ok(
    deletion.some((l) => l['mode'] !== undefined),
    `one node changed its table for the deletion: ${JSON.stringify(deletion)}`,
  );
  for (const a of agents)
    assert.deepEqual(
      a.lines.filter((l) => l['mode'] === 'incremental' && l['level'] === 'warn'),
      [],
    );
});
