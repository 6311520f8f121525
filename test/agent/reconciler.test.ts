// The reconcile loop against fakes: sync gate, coalescing, backoff, drift,
// invalid-policy Events, readiness. Real rendering (pure), fake kernel.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Reconciler, type ReconcilerOptions } from '../../src/agent/reconciler.ts';
import type { Outcome } from '../../src/agent/outcome.ts';
import { SETTLE_ABOVE_MS } from '../../src/agent/kernel-state.ts';
import { nodeRenderer } from '../../src/agent/agent.ts';
import { renderNode } from '../support/render-node.ts';
import type { ClusterState } from '../../src/model/types.ts';
import { pod, policy, rule, podPeer, sel, state, node } from '../support/state-builder.ts';
import {
  captureLogger,
  deferred,
  FakeDataplane,
  FakeEvents,
  FakeSource,
  histogramCount,
  metricValue,
  testMetrics,
  waitFor,
  withErrors,
} from './fakes.ts';

const NODE = 'node-1';

function clusterWith(n: number): ClusterState {
  const pods = Array.from({ length: n }, (_, i) => pod('default', `p${i}`, { labels: { app: 'web' }, ips: [`10.0.0.${i + 1}`] }));
  return state({
    pods,
    policies: [policy('default', 'web', { podSelector: sel({ app: 'web' }), ingress: [rule([podPeer(sel({ app: 'web' }))])] })],
    nodes: [node(NODE)],
  });
}

function setup(opts: Partial<ReconcilerOptions> = {}, initial: ClusterState = clusterWith(1)) {
  const source = new FakeSource(initial);
  const dataplane = new FakeDataplane();
  const events = new FakeEvents();
  const { metrics, port } = testMetrics();
  const { log, lines } = captureLogger();
  const released: string[][] = [];
  const fullApplies: number[] = [];
  const r = new Reconciler(
    {
      source,
      render: nodeRenderer(NODE, {
        table: 'nft-netpol',
        denyAction: 'drop',
        unknownLocalEndpoints: 'allow',
        allowPodToNode: false,
        logDenied: undefined,
      }),
      dataplane,
      metrics: port,
      log,
      events,
      onReleasedIPs: (ips) => {
        released.push([...ips]);
        return Promise.resolve();
      },
      afterFullApply: () => fullApplies.push(dataplane.lists),
    },
    { nodeName: NODE, debounceMs: 2, driftIntervalMs: 0, backoff: { initialMs: 10, maxMs: 40 }, syncPollMs: 5, ...opts },
  );
  return { r, source, dataplane, events, metrics, lines, released, fullApplies };
}

test('nothing is written before the source has synced; the first apply follows the sync', async () => {
  const t = setup();
  t.source.isSynced = false;
  t.dataplane.kernel = 'left by a previous run';
  t.r.start();
  t.r.notify('pod added');
  t.r.notify('policy added');
  // Give the loop many chances to misbehave, then check nothing was touched.
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(t.dataplane.attempts, 0);
  assert.equal(t.dataplane.kernel, 'left by a previous run');
  assert.equal(t.r.ready(), false);
  assert.equal(t.r.status().phase, 'waiting-for-sync');
  assert.equal(await metricValue(t.metrics, 'nftnp_resync_state'), 1);

  t.source.isSynced = true;
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('ready', () => t.r.ready());
  assert.equal(t.dataplane.kernel, renderNode(t.source.current, NODE).text);
  await waitFor('in sync', async () => (await metricValue(t.metrics, 'nftnp_resync_state')) === 3);
  assert.equal(await metricValue(t.metrics, 'nftnp_in_sync'), 1);
  assert.equal(await metricValue(t.metrics, 'nftnp_nft_restore_calls_total'), 1);
  assert.equal(await metricValue(t.metrics, 'nftnp_active_local_endpoints'), 1);
  assert.equal(await metricValue(t.metrics, 'nftnp_cluster_num_policies'), 1);
  assert.ok((await metricValue(t.metrics, 'nftnp_last_successful_apply_timestamp_seconds')) > 1e9);
  assert.ok(t.lines.some((l) => l['event'] === 'apply' && l['result'] === 'applied' && typeof l['durationMs'] === 'number'));
  // The initial sync is not counted as an event-to-applied sample.
  assert.equal(await histogramCount(t.metrics, 'nftnp_event_to_applied_seconds'), 0);
  await t.r.stop(1000);
});

test('changes during an apply coalesce into one more apply of the latest state', async () => {
  const t = setup();
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  const gate = deferred();
  t.dataplane.gate = gate.promise;
  t.source.current = clusterWith(2);
  t.r.notify('pod added');
  await waitFor('second apply in flight', () => t.dataplane.attempts === 2);
  assert.equal(t.r.status().applying, true);
  for (let i = 3; i <= 12; i++) {
    t.source.current = clusterWith(i);
    t.r.notify(`pod p${i - 1} added`);
  }
  gate.resolve();
  t.dataplane.gate = undefined;
  await waitFor('latest state applied', () => t.dataplane.kernel === renderNode(clusterWith(12), NODE).text);
  await waitFor('idle', () => !t.r.status().pending && !t.r.status().applying);
  // 1 initial + 1 in flight + 1 for the ten coalesced changes.
  assert.equal(t.dataplane.applies.length, 3);
  assert.equal(await histogramCount(t.metrics, 'nftnp_event_to_applied_seconds'), 2);
  await t.r.stop(1000);
});

test('an unchanged ruleset still in the kernel is not re-applied', async () => {
  const t = setup();
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  t.r.notify('pod status changed');
  await waitFor('unchanged', () => t.r.status().lastApply?.result === 'unchanged');
  assert.equal(t.dataplane.attempts, 1);
  assert.equal(await metricValue(t.metrics, 'nftnp_nft_restore_calls_total'), 1);
  await t.r.stop(1000);
});

test('an unchanged render trusts a recent kernel check instead of listing again', async () => {
  const t = setup({ kernelCheckFreshMs: 60_000 });
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('read back', () => t.dataplane.lists === 1);
  for (let i = 0; i < 5; i++) {
    t.r.notify(`status ${i}`);
    await waitFor('reconciled', () => t.r.status().lastApply?.result === 'unchanged' && !t.r.status().pending);
  }
  assert.equal(t.dataplane.lists, 1, 'the read-back after the apply is recent enough');
  assert.equal(t.dataplane.attempts, 1);
  await t.r.stop(1000);
});

test('the read-back after an apply is given up when a newer change is queued', async () => {
  const t = setup();
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('idle', () => !t.r.status().applying);
  const gate = deferred();
  t.dataplane.listGate = gate.promise;
  t.source.current = clusterWith(2);
  t.r.notify('pod added');
  await waitFor('read-back in flight', () => t.dataplane.applies.length === 2 && t.dataplane.lists === 2);
  t.source.current = clusterWith(3);
  t.r.notify('another pod');
  await waitFor('read-back aborted', () => t.dataplane.aborted === 1);
  t.dataplane.listGate = undefined;
  gate.resolve();
  await waitFor('latest applied', () => t.dataplane.kernel === renderNode(clusterWith(3), NODE).text);
  await waitFor('idle', () => !t.r.status().applying && !t.r.status().pending);
  await t.r.checkDriftNow();
  assert.equal(t.r.status().lastDriftCheck?.result, 'match', 'the latest apply was read back');
  await t.r.stop(1000);
});

test('the garbage hook runs after a full apply and its read-back, not after an incremental one', async () => {
  const t = setup({ incremental: true }, withRemotePeers(1));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('hook', () => t.fullApplies.length === 1);
  assert.deepEqual(t.fullApplies, [1], 'called once the read-back had listed the table');
  t.source.current = withRemotePeers(2);
  t.r.notify('remote pod added');
  await waitFor('increment', () => t.dataplane.increments.length === 1);
  await waitFor('idle', () => !t.r.status().applying && !t.r.status().pending);
  assert.equal(t.fullApplies.length, 1, 'an incremental apply leaves it alone');
  await t.r.stop(1000);
});

test('a dear listing waits for a quiet moment: a change within that wait cancels the read-back before it lists', async () => {
  const t = setup();
  // A big table: every listing takes longer than SETTLE_ABOVE_MS, so a read-back first waits twice that.
  t.dataplane.listDelayMs = SETTLE_ABOVE_MS + 50;
  t.r.start();
  await waitFor('first apply read back', () => t.dataplane.applies.length === 1 && t.dataplane.lists === 1);
  await waitFor('idle', () => !t.r.status().applying);
  t.source.current = clusterWith(2);
  t.r.notify('pod added');
  await waitFor('second apply', () => t.dataplane.applies.length === 2);
  // Within the wait (2 x 300 ms): the second apply's read-back is cancelled before it lists.
  t.source.current = clusterWith(3);
  t.r.notify('another pod');
  await waitFor('third apply', () => t.dataplane.applies.length === 3);
  assert.equal(t.dataplane.lists, 1, 'no listing started for the second apply');
  assert.equal(t.dataplane.aborted, 0);
  await waitFor('the last apply read back after its wait', () => t.dataplane.lists === 2);
  await waitFor('idle', () => !t.r.status().applying && !t.r.status().pending);
  await t.r.checkDriftNow();
  assert.equal(t.r.status().lastDriftCheck?.result, 'match', 'the latest apply was read back');
  await t.r.stop(1000);
});

test("a change that comes while an apply is running skips that apply's read-back: the next apply follows at once", async () => {
  const t = setup();
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('idle', () => !t.r.status().applying);
  const lists = t.dataplane.lists;
  const gate = deferred();
  t.dataplane.gate = gate.promise;
  t.source.current = clusterWith(2);
  t.r.notify('pod added');
  await waitFor('second apply in flight', () => t.dataplane.attempts === 2);
  // Arrives before that apply's read-back could start (nothing to cancel yet).
  t.source.current = clusterWith(3);
  t.r.notify('another pod');
  t.dataplane.gate = undefined;
  gate.resolve();
  await waitFor('latest applied', () => t.dataplane.kernel === renderNode(clusterWith(3), NODE).text);
  await waitFor('idle', () => !t.r.status().applying && !t.r.status().pending);
  assert.equal(t.dataplane.aborted, 0, 'no listing started only to be aborted');
  assert.equal(t.dataplane.lists, lists + 1, 'only the latest apply was read back');
  await t.r.checkDriftNow();
  assert.equal(t.r.status().lastDriftCheck?.result, 'match', 'the latest apply was read back');
  await t.r.stop(1000);
});

test('without a read-back of the last apply, the drift check re-applies and counts no repair', async () => {
  const t = setup();
  t.r.start();
  t.dataplane.listFails = true;
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('idle', () => !t.r.status().applying);
  t.dataplane.listFails = false;
  await t.r.checkDriftNow();
  assert.equal(t.dataplane.applies.length, 2);
  assert.equal(await metricValue(t.metrics, 'nftnp_drift_repairs_total'), 0);
  await t.r.checkDriftNow();
  assert.equal(t.r.status().lastDriftCheck?.result, 'match');
  assert.equal(t.dataplane.applies.length, 2);
  await t.r.stop(1000);
});

test('without a read-back, a change the table monitor reported is re-applied and counted as its repair', async () => {
  const t = setup();
  t.r.start();
  t.dataplane.listFails = true;
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('idle', () => !t.r.status().applying);
  t.dataplane.listFails = false;
  // Another process deleted our rules before any read-back was captured.
  t.r.kernelChanged('21 rule(s) deleted by another process');
  await waitFor('re-applied', () => t.dataplane.applies.length === 2);
  await waitFor('counted', async () => (await metricValue(t.metrics, 'nftnp_drift_repairs_total')) === 1);
  await t.r.stop(1000);
});

function withRemotePeers(n: number, locals = 2): ClusterState {
  const base = clusterWith(locals);
  const remote = Array.from({ length: n }, (_, i) =>
    pod('default', `r${i}`, { labels: { app: 'web' }, ips: [`10.0.9.${i + 1}`], node: 'node-2' }),
  );
  return { ...base, pods: [...base.pods, ...remote].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) };
}

test('a change that alters nothing after a put-off read-back trusts the last transaction: no listing first, no full apply; it reads back', async () => {
  const t = setup({ incremental: true }, withRemotePeers(1));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('idle', () => !t.r.status().applying);
  const lists = t.dataplane.lists;
  const gate = deferred();
  t.dataplane.listGate = gate.promise;
  t.source.current = withRemotePeers(2);
  t.r.notify('remote pod added');
  await waitFor(
    'read-back of the increment in flight',
    () => t.dataplane.increments.length === 1 && t.dataplane.lists === lists + 1,
  );
  // A pod deletion's first event (deletionTimestamp set): same ruleset.
  t.source.current = withRemotePeers(2);
  t.r.notify('remote pod terminating');
  await waitFor('read-back put off', () => t.dataplane.aborted === 1);
  t.dataplane.listGate = undefined;
  gate.resolve();
  await waitFor('unchanged', () => t.r.status().lastApply?.result === 'unchanged');
  await waitFor('idle', () => !t.r.status().applying && !t.r.status().pending);
  assert.equal(t.dataplane.applies.length, 1, 'no full apply');
  assert.equal(t.dataplane.increments.length, 1);
  assert.equal(t.dataplane.lists, lists + 2, 'one listing: the read-back after the unchanged run');
  await t.r.checkDriftNow();
  assert.equal(t.r.status().lastDriftCheck?.result, 'match', 'the read-back captured the kernel');
  await t.r.stop(1000);
});

test('after a table monitor report, a change that alters nothing lists the table instead of trusting it', async () => {
  const t = setup({ incremental: true }, withRemotePeers(1));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('idle', () => !t.r.status().applying);
  const gate = deferred();
  t.dataplane.listGate = gate.promise;
  t.source.current = withRemotePeers(2);
  t.r.notify('remote pod added');
  await waitFor('increment', () => t.dataplane.increments.length === 1);
  t.source.current = withRemotePeers(2);
  t.r.notify('remote pod terminating');
  await waitFor('read-back put off', () => t.dataplane.aborted === 1);
  t.dataplane.listGate = undefined;
  gate.resolve();
  await waitFor('idle', () => !t.r.status().applying && !t.r.status().pending);
  // Someone else touches the table: the trust is gone.
  t.dataplane.kernel = 'flushed by someone';
  t.r.kernelChanged('delete rule inet nft-netpol x handle 1');
  await waitFor('repaired', () => t.dataplane.kernel === renderNode(withRemotePeers(2), NODE).text);
  await t.r.stop(1000);
});

test('pod and policy changes go as increments; refreshes after increments as the full table', async () => {
  const t = setup({ incremental: true, driftIntervalMs: 0 }, withRemotePeers(1));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  t.source.current = withRemotePeers(2);
  t.r.notify('remote pod added');
  await waitFor('increment', () => t.dataplane.increments.length === 1);
  assert.match(
    t.dataplane.increments[0] ?? '',
    /^add element inet nft-netpol ingress-peers-v4 \{ 10\.0\.9\.2 : jump KUBE-PEERS-[0-9a-f]{12}-IN \}$/m,
  );
  assert.doesNotMatch(t.dataplane.increments[0] ?? '', /10\.0\.9\.1\b/);
  await waitFor('recorded', () => t.r.status().lastApply?.mode === 'incremental');
  t.source.current = withRemotePeers(0);
  t.r.notify('remote pods deleted');
  await waitFor('second increment', () => t.dataplane.increments.length === 2);
  assert.match(
    t.dataplane.increments[1] ?? '',
    /^delete element inet nft-netpol ingress-peers-v4 \{ 10\.0\.9\.1, 10\.0\.9\.2 \}$/m,
  );
  // A new local pod that a policy isolates: its chains are added in an increment too.
  t.source.current = withRemotePeers(0, 3);
  t.r.notify('local pod added');
  await waitFor('third increment', () => t.dataplane.increments.length === 3);
  assert.match(t.dataplane.increments[2] ?? '', /^add chain inet nft-netpol KUBE-POD-FW-[0-9a-f]{12}-IN /m);
  assert.equal(t.dataplane.applies.length, 1);
  await waitFor('logged', () =>
    t.lines.some((l) => l['mode'] === 'incremental' && (l['update'] as { chainsAdded?: number } | undefined)?.chainsAdded === 1),
  );
  // Each apply line says where its time went.
  const applied = t.lines.filter((l) => l['event'] === 'apply' && l['result'] === 'applied');
  assert.ok(applied.length >= 4);
  for (const l of applied)
    assert.deepEqual(Object.keys(l['phasesMs'] as object), ['snapshot', 'compile', 'update', 'render', 'nft']);
  // And when it ended on the process's monotonic clock, in order (applies are serial), none in the future.
  const ends = applied.map((l) => l['monoMs']);
  assert.ok(
    ends.every((x) => typeof x === 'number' && /^\d+(\.\d{1,2})?$/.test(String(x)) && x <= performance.now()),
    JSON.stringify(ends),
  );
  assert.deepEqual(
    ends,
    [...(ends as number[])].sort((a, b) => a - b),
  );
  // After increments, the drift check refreshes once with the full table.
  t.source.current = withRemotePeers(1, 3);
  t.r.notify('remote pod');
  await waitFor('fourth increment', () => t.dataplane.increments.length === 4);
  await waitFor('idle', () => !t.r.status().applying && !t.r.status().pending);
  await t.r.checkDriftNow();
  assert.equal(t.dataplane.applies.length, 2);
  assert.equal(t.r.status().lastApply?.mode, 'full');
  assert.equal(t.dataplane.kernel, renderNode(withRemotePeers(1, 3), NODE).text);
  await t.r.checkDriftNow();
  assert.equal(t.dataplane.applies.length, 2, 'one refresh only');
  assert.equal(await metricValue(t.metrics, 'nftnp_drift_repairs_total'), 0);
  await t.r.stop(1000);
});

test('a periodic drift check gives way to a change that comes while it lists; one the table monitor asked for does not, and leaves the refresh to the next check', async () => {
  const t = setup({ incremental: true }, withRemotePeers(0));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('idle', () => !t.r.status().applying && !t.r.status().pending);
  const checked = t.r.status().lastDriftCheck;
  let peers = 0;
  // One round: a check lists (held by the gate) and a remote pod comes; the gate opens after a while.
  const round = async (start: () => Promise<void>, gaveWay: boolean): Promise<void> => {
    const gate = deferred();
    t.dataplane.listGate = gate.promise;
    const lists = t.dataplane.lists;
    const aborted = t.dataplane.aborted;
    const increments = t.dataplane.increments.length;
    const check = start();
    await waitFor('check listing', () => t.dataplane.lists === lists + 1);
    t.source.current = withRemotePeers(++peers);
    t.r.notify('remote pod added');
    if (gaveWay) await waitFor('increment while the check would list', () => t.dataplane.increments.length === increments + 1);
    // Else the change cannot go before the gate opens; a while for it to try.
    else await new Promise((r) => setTimeout(r, 50));
    assert.equal(t.dataplane.aborted > aborted, gaveWay, 'listing given up');
    assert.equal(t.dataplane.increments.length, increments + (gaveWay ? 1 : 0));
    t.dataplane.listGate = undefined;
    gate.resolve();
    await check;
    await waitFor('increment', () => t.dataplane.increments.length === increments + 1);
    await waitFor('idle', () => !t.r.status().applying && !t.r.status().pending);
  };
  for (let i = 1; i <= 3; i++) {
    await round(() => t.r.checkDriftNow(), true);
    assert.equal(await metricValue(t.metrics, 'nftnp_drift_checks_given_way_total'), i);
    assert.deepEqual(t.r.status().lastDriftCheck, checked, 'a check that gave way reports nothing');
  }
  // The table monitor's report: its check lists regardless, the change waits
  // for it and then goes as an increment (the refresh after increments is
  // not taken while a change waits: it would be the change's full apply).
  const fullApplies = t.dataplane.applies.length;
  await round(async () => t.r.kernelChanged('delete rule inet nft-netpol x handle 1'), false);
  assert.equal(await metricValue(t.metrics, 'nftnp_drift_checks_given_way_total'), 3);
  assert.equal(t.r.status().lastDriftCheck?.result, 'match');
  assert.equal(t.dataplane.applies.length, fullApplies, 'no refresh while a change waited');
  assert.match(t.dataplane.increments.at(-1) ?? '', /10\.0\.9\.4 : jump/);
  // A quiet check refreshes.
  await t.r.checkDriftNow();
  assert.equal(t.dataplane.applies.length, fullApplies + 1, 'the refresh after increments');
  assert.equal(t.dataplane.kernel, renderNode(withRemotePeers(4), NODE).text);
  await t.r.stop(1000);
});

test('the refresh after increments comes at most once per refresh interval', async () => {
  const t = setup({ incremental: true, refreshIntervalMs: 300 }, withRemotePeers(0));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  t.source.current = withRemotePeers(1);
  t.r.notify('remote pod added');
  await waitFor('increment', () => t.dataplane.increments.length === 1);
  await waitFor('idle', () => !t.r.status().applying && !t.r.status().pending);
  await t.r.checkDriftNow();
  assert.equal(t.r.status().lastDriftCheck?.result, 'match');
  assert.equal(t.dataplane.applies.length, 1, 'the full apply was within the interval: no refresh');
  await new Promise((r) => setTimeout(r, 350));
  await t.r.checkDriftNow();
  assert.equal(t.dataplane.applies.length, 2, 'the refresh, once the interval passed');
  assert.equal(t.dataplane.kernel, renderNode(withRemotePeers(1), NODE).text);
  assert.equal(await metricValue(t.metrics, 'nftnp_refreshes_total', { taken_by: 'check' }), 1);
  assert.equal(await metricValue(t.metrics, 'nftnp_refreshes_total', { taken_by: 'change' }), 0);
  await t.r.stop(1000);
});

test('with no quiet moment for the refresh in twice its interval, the next change goes as the full table', async () => {
  // No periodic check runs here (driftIntervalMs 0): as under a stream of
  // changes, where every check finds a change waiting and returns.
  const t = setup({ incremental: true, refreshIntervalMs: 500 }, withRemotePeers(0));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  let peers = 0;
  const change = async (): Promise<void> => {
    const before = t.dataplane.applies.length + t.dataplane.increments.length;
    t.source.current = withRemotePeers(++peers);
    t.r.notify('remote pod added');
    await waitFor('applied', () => t.dataplane.applies.length + t.dataplane.increments.length === before + 1);
    await waitFor('idle', () => !t.r.status().applying && !t.r.status().pending);
  };
  await change();
  await new Promise((r) => setTimeout(r, 100));
  await change();
  assert.equal(t.dataplane.increments.length, 2, 'within twice the interval: increments');
  assert.equal(t.dataplane.applies.length, 1);
  await new Promise((r) => setTimeout(r, 1000));
  await change();
  assert.equal(t.dataplane.applies.length, 2, 'the change took the refresh');
  assert.equal(t.dataplane.increments.length, 2);
  assert.equal(t.r.status().lastApply?.mode, 'full');
  assert.equal(t.dataplane.kernel, renderNode(withRemotePeers(3), NODE).text);
  assert.equal(await metricValue(t.metrics, 'nftnp_refreshes_total', { taken_by: 'change' }), 1);
  assert.ok(t.lines.some((l) => l['event'] === 'refresh' && l['takenBy'] === 'change'));
  assert.equal(await metricValue(t.metrics, 'nftnp_drift_repairs_total'), 0, 'not a repair');
  // The interval starts again: the next change is an increment.
  await change();
  assert.equal(t.dataplane.increments.length, 3);
  assert.equal(t.dataplane.applies.length, 2);
  await t.r.stop(1000);
});

test('without a refresh interval (drift checks off) no change is taken as a refresh', async () => {
  const t = setup({ incremental: true }, withRemotePeers(0));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  for (let i = 1; i <= 3; i++) {
    t.source.current = withRemotePeers(i);
    t.r.notify('remote pod added');
    await waitFor('increment', () => t.dataplane.increments.length === i);
    await waitFor('idle', () => !t.r.status().applying && !t.r.status().pending);
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(t.dataplane.applies.length, 1);
  await t.r.stop(1000);
});

test('a rejected increment falls back to the full table in the same apply', async () => {
  const t = setup({ incremental: true }, withRemotePeers(1));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  t.dataplane.failIncrements = true;
  t.source.current = withRemotePeers(3);
  t.r.notify('remote pods added');
  await waitFor('full apply', () => t.dataplane.applies.length === 2);
  assert.equal(t.dataplane.kernel, renderNode(withRemotePeers(3), NODE).text);
  assert.equal(t.r.status().lastApply?.mode, 'full');
  assert.equal(t.r.status().consecutiveFailures, 0);
  assert.equal(await metricValue(t.metrics, 'nftnp_nft_restore_errors_total'), 0, 'the fallback is not a failure');
  assert.equal(await metricValue(t.metrics, 'nftnp_nft_restore_calls_total'), 3);
  assert.ok(t.lines.some((l) => l['mode'] === 'incremental' && /No such file/.test(String(l['error']))));
  await t.r.stop(1000);
});

test('a failed transaction keeps the previous ruleset, is counted and retried with growing backoff', async () => {
  const t = setup();
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  const before = t.dataplane.kernel;
  t.dataplane.failNext = 3;
  t.source.current = clusterWith(3);
  t.r.notify('pod added');
  for (let n = 1; n <= 3; n++) {
    await waitFor(`failure ${n}`, () => t.r.status().consecutiveFailures === n);
    assert.equal(t.r.status().lastApply?.result, 'failed');
    assert.equal(t.dataplane.kernel, before, 'the previous ruleset stays in force');
    assert.equal(t.r.status().phase, 'out-of-sync');
    assert.equal(t.r.ready(), true, 'still ready: a ruleset is in force');
  }
  await waitFor('recovered', () => t.dataplane.kernel === renderNode(clusterWith(3), NODE).text);
  await waitFor('failures reset', () => t.r.status().consecutiveFailures === 0);
  assert.equal(await metricValue(t.metrics, 'nftnp_nft_restore_errors_total'), 3);
  assert.equal(await metricValue(t.metrics, 'nftnp_dataplane_failures_total'), 3);
  const failed = t.lines.filter((l) => l['event'] === 'apply' && l['result'] === 'failed');
  assert.equal(failed.length, 3);
  assert.deepEqual(
    failed.map((l) => l['retryInMs']),
    [10, 20, 40],
  );
  assert.match(String(failed[0]?.['error']), /No such file or directory/);
  // The latency of the change counts from its event to the apply that finally succeeded.
  assert.equal(await histogramCount(t.metrics, 'nftnp_event_to_applied_seconds'), 1);
  await t.r.stop(1000);
});

test('backoff is capped and new changes wait for it', async () => {
  const t = setup({ backoff: { initialMs: 5, maxMs: 15 } });
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  t.dataplane.failNext = 5;
  t.source.current = clusterWith(2);
  t.r.notify('x');
  await waitFor('5 failures', () => t.r.status().consecutiveFailures === 5);
  const retries = t.lines.filter((l) => l['result'] === 'failed').map((l) => l['retryInMs']);
  assert.deepEqual(retries, [5, 10, 15, 15, 15]);
  await waitFor('recovered', () => t.r.status().consecutiveFailures === 0);
  // Five failures and one success: notifications during backoff did not add attempts.
  assert.equal(t.dataplane.attempts, 1 + 6);
  await t.r.stop(1000);
});

test('a render exception is a dataplane failure, not a crash', async () => {
  const t = setup();
  let boom = true;
  const source = t.source;
  const dataplane = t.dataplane;
  const { port, metrics } = testMetrics();
  const { log } = captureLogger();
  const r = new Reconciler(
    {
      source,
      render: (s) => {
        if (boom) throw new Error('compiler bug');
        return renderNode(s, NODE);
      },
      dataplane,
      metrics: port,
      log,
      events: t.events,
    },
    { nodeName: NODE, debounceMs: 1, driftIntervalMs: 0, backoff: { initialMs: 5, maxMs: 5 }, syncPollMs: 5 },
  );
  r.start();
  await waitFor('failure', () => r.status().consecutiveFailures >= 1);
  assert.match(String(r.status().lastApply?.error), /render failed: compiler bug/);
  assert.equal(dataplane.attempts, 0);
  assert.equal(r.ready(), false);
  boom = false;
  await waitFor('applied', () => r.ready());
  assert.ok((await metricValue(metrics, 'nftnp_dataplane_failures_total')) >= 1);
  await r.stop(1000);
});

test('drift: counters changing is not drift; a flushed or deleted table is restored and counted', async () => {
  const t = setup();
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  const good = t.dataplane.kernel;

  await t.r.checkDriftNow(); // counters differ between listings: still a match
  assert.equal(t.r.status().lastDriftCheck?.result, 'match');
  assert.equal(t.dataplane.applies.length, 1);

  t.dataplane.kernel = 'table inet nft-netpol {\n}\n';
  await t.r.checkDriftNow();
  assert.equal(t.r.status().lastDriftCheck?.result, 'drifted');
  assert.equal(t.dataplane.kernel, good);
  assert.equal(await metricValue(t.metrics, 'nftnp_drift_repairs_total'), 1);

  t.dataplane.kernel = undefined;
  await t.r.checkDriftNow();
  assert.match(String(t.r.status().lastDriftCheck?.detail), /table missing/);
  assert.equal(t.dataplane.kernel, good);
  assert.equal(await metricValue(t.metrics, 'nftnp_drift_repairs_total'), 2);
  assert.ok(t.lines.some((l) => l['event'] === 'drift-repaired'));
  await t.r.stop(1000);
});

test('drift timer repairs without being asked; an unchanged render after tampering re-applies', async () => {
  const t = setup({ driftIntervalMs: 20, kernelCheckFreshMs: 0 });
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  const good = t.dataplane.kernel;
  t.dataplane.kernel = `${good}\n# someone added a rule`;
  await waitFor('repaired by the timer', () => t.dataplane.kernel === good);
  assert.equal(await metricValue(t.metrics, 'nftnp_drift_repairs_total'), 1);

  // Skip-if-unchanged must notice tampering too.
  t.dataplane.kernel = undefined;
  t.r.notify('pod status changed');
  await waitFor('repaired on the next change', () => t.dataplane.kernel === good);
  await t.r.stop(1000);
});

test('invalid policies: logged once per change; one Event per change from each node that enforces them', async () => {
  const web = policy('default', 'web', { podSelector: sel({ app: 'web' }) });
  const far = policy('default', 'far', { podSelector: sel({ app: 'far' }) });
  const mk = (policies: (typeof web)[]) =>
    state({
      pods: [
        pod('default', 'w', { labels: { app: 'web' }, ips: ['10.0.0.1'] }),
        pod('default', 'f', { labels: { app: 'far' }, ips: ['10.0.1.1'], node: 'node-2' }),
      ],
      policies,
      nodes: [node(NODE), node('node-2')],
    });
  const t = setup({}, mk([withErrors(web, 'must be >= port (8080)'), withErrors(far, 'bad')]));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('event', () => t.events.events.length === 1);
  const ev = t.events.events[0];
  assert.deepEqual(ev?.ref, { namespace: 'default', name: 'web' });
  assert.equal(ev?.reason, 'InvalidNetworkPolicy');
  assert.match(String(ev?.message), /default\/web spec\.ingress\[0\]\.ports\[0\]\.endPort: must be >= port \(8080\)/);
  assert.equal(await metricValue(t.metrics, 'nftnp_invalid_policies'), 2);
  assert.equal(t.lines.filter((l) => l['event'] === 'invalid-policy').length, 2, 'both logged here');

  // Same errors again: no new Event or log line.
  t.source.current = { ...mk([withErrors(web, 'must be >= port (8080)'), withErrors(far, 'bad')]) };
  t.r.notify('policy resynced');
  await waitFor('reconciled', () => t.r.status().lastApply?.result === 'unchanged');
  assert.equal(t.events.events.length, 1);

  // Different errors: a new Event.
  t.source.current = mk([withErrors(web, 'must be >= port (9090)'), withErrors(far, 'bad')]);
  t.r.notify('policy updated');
  await waitFor('second event', () => t.events.events.length === 2);
  assert.match(String(t.events.events[1]?.message), /9090/);

  // Fixed, then broken again the same way: reported again.
  t.source.current = mk([web, withErrors(far, 'bad')]);
  t.r.notify('policy fixed');
  await waitFor('resolved', async () => (await metricValue(t.metrics, 'nftnp_invalid_policies')) === 1);
  t.source.current = mk([withErrors(web, 'must be >= port (9090)'), withErrors(far, 'bad')]);
  t.r.notify('policy broken');
  await waitFor('third event', () => t.events.events.length === 3);
  assert.ok(
    t.events.events.every((e) => e.ref.name === 'web'),
    'far selects only a pod of node-2',
  );

  // A pod that `far` selects arrives here: this node now enforces it and reports it.
  const withLocalFar = mk([withErrors(web, 'must be >= port (9090)'), withErrors(far, 'bad')]);
  t.source.current = {
    ...withLocalFar,
    pods: [...withLocalFar.pods, pod('default', 'f2', { labels: { app: 'far' }, ips: ['10.0.0.9'] })],
  };
  t.r.notify('pod added');
  await waitFor('event for far', () => t.events.events.length === 4);
  assert.equal(t.events.events[3]?.ref.name, 'far');
  await t.r.stop(1000);
});

test('a failing Event sink is logged and does not stop enforcement', async () => {
  const t = setup(
    {},
    state({
      pods: [pod('default', 'w', { ips: ['10.0.0.1'] })],
      policies: [withErrors(policy('default', 'web'), 'bad')],
      nodes: [node(NODE)],
    }),
  );
  t.events.fail = true;
  t.r.start();
  await waitFor('applied', () => t.r.ready());
  await waitFor('warning logged', () => t.lines.some((l) => l['event'] === 'k8s-event'));
  assert.equal(t.dataplane.applies.length, 1);
  await t.r.stop(1000);
});

test('watch restarts are counted from status deltas per resource', async () => {
  const t = setup({ watchPollMs: 5 });
  t.source.watches = [
    { resource: 'pods', restarts: 0 },
    { resource: 'networkpolicies', restarts: 2 },
  ];
  t.r.start();
  await waitFor(
    'first count',
    async () =>
      (await metricValue(t.metrics, 'nftnp_watch_restarts_total', { resource: 'networkpolicies', reason: 'error' })) === 2,
  );
  t.source.watches = [
    { resource: 'pods', restarts: 3 },
    { resource: 'networkpolicies', restarts: 2 },
  ];
  await waitFor(
    'pods counted',
    async () => (await metricValue(t.metrics, 'nftnp_watch_restarts_total', { resource: 'pods', reason: 'error' })) === 3,
  );
  assert.equal(await metricValue(t.metrics, 'nftnp_watch_restarts_total', { resource: 'networkpolicies', reason: 'error' }), 2);
  await t.r.stop(1000);
});

test('watch restarts are counted by reason: only failures under reason="error"', async () => {
  const t = setup({ watchPollMs: 5 });
  const by = (error: number, stalled: number, gone: number, closed: number) => ({ error, stalled, gone, closed });
  t.source.watches = [{ resource: 'pods spec.nodeName=n1', restarts: 3, restartsByReason: by(0, 0, 1, 2) }];
  t.r.start();
  const value = (reason: string): Promise<number> =>
    metricValue(t.metrics, 'nftnp_watch_restarts_total', { resource: 'pods', reason });
  await waitFor('closed counted', async () => (await value('closed')) === 2);
  assert.equal(await value('gone'), 1);
  assert.equal(await value('error'), 0);
  t.source.watches = [{ resource: 'pods spec.nodeName=n1', restarts: 5, restartsByReason: by(1, 1, 1, 2) }];
  await waitFor('error and stalled counted', async () => (await value('error')) === 1 && (await value('stalled')) === 1);
  assert.equal(await value('closed'), 2);
  await t.r.stop(1000);
});

test('removed and reused pod IPs are handed to the conntrack hook', async () => {
  const mk = (pods: ReturnType<typeof pod>[]) => state({ pods, nodes: [node(NODE)] });
  const t = setup(
    {},
    mk([
      pod('default', 'a', { ips: ['10.0.0.1'] }),
      pod('default', 'b', { ips: ['10.0.0.2'] }),
      pod('default', 'c', { ips: ['10.0.0.3'] }),
    ]),
  );
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  // a deleted, b's IP reused by a new pod, c finished.
  t.source.current = mk([
    pod('default', 'b2', { ips: ['10.0.0.2'] }),
    pod('default', 'c', { ips: ['10.0.0.3'], phase: 'Succeeded' }),
  ]);
  t.r.notify('pods changed');
  await waitFor('released', () => t.released.length === 1);
  assert.deepEqual(t.released[0], ['10.0.0.1', '10.0.0.2', '10.0.0.3']);
  await t.r.stop(1000);
});

test('liveness fails while one apply is stuck past the wedge limit; stop abandons it', async () => {
  const t = setup({ wedgeMs: 20 });
  const gate = deferred();
  t.dataplane.gate = gate.promise;
  t.r.start();
  await waitFor('apply in flight', () => t.dataplane.attempts === 1);
  assert.equal(t.r.ready(), false);
  await waitFor('wedged', () => !t.r.health().ok);
  assert.match(t.r.health().detail, /in flight/);
  const finished = await t.r.stop(10);
  assert.equal(finished, false);
  gate.resolve();
});

test('stop waits for the apply in flight to finish', async () => {
  const t = setup();
  const gate = deferred();
  t.dataplane.gate = gate.promise;
  t.r.start();
  await waitFor('apply in flight', () => t.dataplane.attempts === 1);
  const stopping = t.r.stop(5000);
  gate.resolve();
  assert.equal(await stopping, true);
  assert.equal(t.dataplane.applies.length, 1);
  t.r.notify('after stop');
  assert.equal(t.r.status().pending, false);
});

test('outcome listeners get one record per run: what the kernel now holds, or why not', async () => {
  const t = setup({ incremental: true }, withRemotePeers(1));
  const seen: Outcome[] = [];
  const off = t.r.onOutcome((o) => seen.push(o));
  t.r.onOutcome(() => {
    throw new Error('a broken listener');
  });
  t.r.start();
  await waitFor('first apply', () => seen.some((o) => o.kind === 'apply' && o.result === 'applied'));
  const first = seen.find((o) => o.kind === 'apply');
  assert.ok(first?.kind === 'apply');
  assert.equal(first.mode, 'full');
  assert.equal(first.enforced?.state, t.source.current, 'the snapshot the kernel now holds');
  assert.deepEqual(
    first.enforced?.localPods.map((p) => p.name),
    ['p0', 'p1'],
  );
  assert.deepEqual(
    first.enforced?.state.policies.map((p) => p.name),
    ['web'],
  );
  t.dataplane.failNext = 1;
  t.dataplane.failIncrements = true;
  t.source.current = withRemotePeers(2);
  t.r.notify('remote pod added');
  await waitFor('failed', () => seen.some((o) => o.kind === 'apply' && o.result === 'failed'));
  const failed = seen.find((o) => o.kind === 'apply' && o.result === 'failed');
  assert.ok(failed?.kind === 'apply');
  assert.equal(failed.enforced, undefined);
  assert.equal(failed.retry?.attempt, 1);
  assert.equal(failed.state, t.source.current);
  await waitFor('retried', () => t.r.status().consecutiveFailures === 0);
  await t.r.checkDriftNow();
  assert.ok(seen.some((o) => o.kind === 'check' && o.result === 'match'));
  off();
  const n = seen.length;
  t.r.notify('after unsubscribe');
  await waitFor('reconciled', () => !t.r.status().pending && !t.r.status().applying);
  assert.equal(seen.length, n);
  assert.ok(t.lines.some((l) => l['msg'] === 'outcome listener failed; continuing'));
  await t.r.stop(1000);
});

test('a table someone deleted is counted as a drift repair when a rejected increment finds it', async () => {
  const t = setup({ incremental: true }, withRemotePeers(1));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('read back', () => t.dataplane.lists === 1);
  const deleted = t.r.status().driftRepairs;
  assert.equal(deleted, 0);
  // Someone deletes the table; the next change's increment is rejected.
  t.dataplane.kernel = undefined;
  t.dataplane.failIncrements = true;
  t.source.current = withRemotePeers(2);
  t.r.notify('remote pod added');
  await waitFor('restored', () => t.dataplane.kernel === renderNode(withRemotePeers(2), NODE).text);
  await waitFor('counted', async () => (await metricValue(t.metrics, 'nftnp_drift_repairs_total')) === 1);
  assert.equal(t.r.status().driftRepairs, 1);
  const line = t.lines.find((l) => l['event'] === 'drift-repaired');
  assert.equal(line?.['foundBy'], 'rejected-increment');
  assert.match(String(line?.['detail']), /table missing/);
  await t.r.stop(1000);
});

test('a table deleted while no read-back was captured is still a repair when the check restores it', async () => {
  const t = setup();
  t.dataplane.listFails = true;
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('idle', () => !t.r.status().applying);
  t.dataplane.listFails = false;
  t.dataplane.kernel = undefined;
  await t.r.checkDriftNow();
  assert.equal(t.dataplane.applies.length, 2);
  assert.equal(await metricValue(t.metrics, 'nftnp_drift_repairs_total'), 1);
  await t.r.stop(1000);
});

test('a change the monitor reports is checked at once: a deleted table restored and counted as its find, a match left alone', async () => {
  const t = setup({ incremental: true }, withRemotePeers(1));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('read back', () => t.dataplane.lists === 1);
  const good = t.dataplane.kernel;
  t.dataplane.kernel = undefined;
  t.r.kernelChanged('3 rule(s) deleted by another process, first: delete rule inet nft-netpol forward-egress handle 4');
  await waitFor('restored', () => t.dataplane.kernel === good);
  assert.equal(t.dataplane.applies.length, 2);
  await waitFor('read back again', () => t.dataplane.lists === 3);
  assert.equal(await metricValue(t.metrics, 'nftnp_drift_repairs_total'), 1);
  const line = t.lines.find((l) => l['event'] === 'drift-repaired');
  assert.equal(line?.['foundBy'], 'table-monitor');
  assert.match(String(line?.['detail']), /table missing/);
  // A report after which the table still matches: listed, nothing applied, nothing counted.
  t.r.kernelChanged('nft monitor restarted: changes may have been missed');
  await waitFor('checked', () => t.dataplane.lists === 4);
  await waitFor('idle', () => !t.r.status().applying && !t.r.status().pending);
  assert.equal(t.dataplane.applies.length, 2);
  assert.equal(await metricValue(t.metrics, 'nftnp_drift_repairs_total'), 1);
  await t.r.stop(1000);
});

/** The table as `nft flush table` leaves it: every chain, set and map, no rules. */
function rulesFlushed(text: string): string {
  let inChain = false;
  return text
    .split('\n')
    .filter((l) => {
      if (/^\tchain /.test(l)) inChain = true;
      else if (l === '\t}') inChain = false;
      else if (inChain && /^\t\t/.test(l) && !/^\t\t(type|comment) /.test(l)) return false;
      return true;
    })
    .join('\n');
}

test('a foreign change seen while a change is pending: the apply checks first, restores the full table and counts it', async () => {
  const t = setup({ incremental: true }, withRemotePeers(1));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  await waitFor('read back', () => t.dataplane.lists === 1);
  // A remote pod arrives (an increment is due) and, before it goes in,
  // someone empties the table's chains: an increment alone would leave the
  // table open and its read-back would take that for the applied state.
  t.source.current = withRemotePeers(2);
  t.r.notify('remote pod added');
  t.dataplane.kernel = rulesFlushed(t.dataplane.kernel ?? '');
  t.r.kernelChanged('rule deleted by process 4244 (nft)');
  const want = renderNode(withRemotePeers(2), NODE).text;
  await waitFor('restored', () => t.dataplane.kernel === want);
  await waitFor('counted', async () => (await metricValue(t.metrics, 'nftnp_drift_repairs_total')) === 1);
  assert.equal(t.lines.find((l) => l['event'] === 'drift-repaired')?.['foundBy'], 'table-monitor');
  await t.r.stop(1000);
});

test('a foreign change when the refresh is overdue: the full apply is counted as the repair it is, not as a refresh', async () => {
  const t = setup({ incremental: true, refreshIntervalMs: 50 }, withRemotePeers(1));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  t.source.current = withRemotePeers(2);
  t.r.notify('remote pod added');
  await waitFor('increment', () => t.dataplane.increments.length === 1);
  await waitFor('idle', () => !t.r.status().applying && !t.r.status().pending);
  await new Promise((r) => setTimeout(r, 150));
  t.source.current = withRemotePeers(3);
  t.r.notify('remote pod added');
  t.dataplane.kernel = rulesFlushed(t.dataplane.kernel ?? '');
  t.r.kernelChanged('rule deleted by process 4244 (nft)');
  await waitFor('restored', () => t.dataplane.kernel === renderNode(withRemotePeers(3), NODE).text);
  await waitFor('counted', async () => (await metricValue(t.metrics, 'nftnp_drift_repairs_total')) === 1);
  assert.equal(await metricValue(t.metrics, 'nftnp_refreshes_total', { taken_by: 'change' }), 0);
  await t.r.stop(1000);
});

test('held peers: a remote pod joining an identity goes into plain sets, folded into the map after a quiet moment or by a commit that validates anyway', async () => {
  const t = setup({ incremental: true, peerHoldMs: 40 }, withRemotePeers(1));
  t.r.start();
  await waitFor('first apply', () => t.dataplane.applies.length === 1);
  t.source.current = withRemotePeers(2);
  t.r.notify('remote pod added');
  await waitFor('held', () => t.dataplane.increments.length === 1);
  const held = t.dataplane.increments[0] ?? '';
  // Plain sets only: nothing in the commit makes the kernel validate its jump graph.
  assert.match(held, /^add element inet nft-netpol ingress-peers-v4-r-KUBE-PEERS-[0-9a-f]{12}-IN \{ 10\.0\.9\.2 \}$/m);
  assert.match(held, /^add element inet nft-netpol ingress-peers-v4-recent \{ 10\.0\.9\.2 \}$/m);
  assert.doesNotMatch(held, /jump|goto|add rule/);
  // Seen from outside: the gauge and the reconciler's view (/debug/ruleset) name the held address.
  assert.equal(await metricValue(t.metrics, 'nftnp_peer_addresses_held'), 1);
  assert.match(
    [...(t.r.heldPeers().get('ingress-peers-v4')?.entries() ?? [])].join(),
    /^10\.0\.9\.2,KUBE-PEERS-[0-9a-f]{12}-IN$/,
  );
  // Quiet for peerHoldMs: the fold is an apply of its own, the address goes into the map.
  await waitFor('folded', () => t.dataplane.increments.length === 2);
  const folded = t.dataplane.increments[1] ?? '';
  assert.match(folded, /^add element inet nft-netpol ingress-peers-v4 \{ 10\.0\.9\.2 : jump KUBE-PEERS-[0-9a-f]{12}-IN \}$/m);
  assert.match(folded, /^delete element inet nft-netpol ingress-peers-v4-r-KUBE-PEERS-[0-9a-f]{12}-IN \{ 10\.0\.9\.2 \}$/m);
  assert.match(folded, /^delete element inet nft-netpol ingress-peers-v4-recent \{ 10\.0\.9\.2 \}$/m);
  await waitFor('logged', () =>
    t.lines.some(
      (l) =>
        l['event'] === 'apply' &&
        (l['reasons'] as string[] | undefined)?.[0] === 'fold held peers' &&
        (l['update'] as { peersFoldedIn?: number } | undefined)?.peersFoldedIn === 1,
    ),
  );
  assert.ok(t.lines.some((l) => (l['update'] as { peersHeldOut?: number } | undefined)?.peersHeldOut === 1));
  // Nothing held any more: no further fold.
  await new Promise((r) => setTimeout(r, 120));
  assert.equal(t.dataplane.increments.length, 2);
  assert.equal(await metricValue(t.metrics, 'nftnp_peer_addresses_held'), 0);
  assert.ok([...t.r.heldPeers().values()].every((m) => m.size === 0));
  await t.r.stop(1000);

  // A long hold: a new local pod's commit (its chains: the kernel validates anyway) folds the held address.
  const u = setup({ incremental: true, peerHoldMs: 60_000 }, withRemotePeers(1));
  u.r.start();
  await waitFor('first apply', () => u.dataplane.applies.length === 1);
  u.source.current = withRemotePeers(2);
  u.r.notify('remote pod added');
  await waitFor('held', () => u.dataplane.increments.length === 1);
  assert.doesNotMatch(u.dataplane.increments[0] ?? '', /jump/);
  u.source.current = withRemotePeers(2, 3);
  u.r.notify('local pod added');
  await waitFor('local pod', () => u.dataplane.increments.length === 2);
  assert.match(u.dataplane.increments[1] ?? '', /^add chain inet nft-netpol KUBE-POD-FW-/m);
  assert.match(u.dataplane.increments[1] ?? '', /^add element inet nft-netpol ingress-peers-v4 \{ .*\b10\.0\.9\.2 : jump /m);
  // Held again, then a full apply (the refresh after increments): it holds nothing out, no fold follows.
  u.source.current = withRemotePeers(3, 3);
  u.r.notify('remote pod added');
  await waitFor('held again', () => u.dataplane.increments.length === 3);
  assert.doesNotMatch(u.dataplane.increments[2] ?? '', /jump/);
  await waitFor('idle', () => !u.r.status().applying && !u.r.status().pending);
  await u.r.checkDriftNow();
  assert.equal(u.r.status().lastApply?.mode, 'full');
  assert.equal(u.dataplane.kernel, renderNode(withRemotePeers(3, 3), NODE).text);
  await u.r.stop(1000);
});
