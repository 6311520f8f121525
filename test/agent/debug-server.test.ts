// The HTTP endpoints in-process, over a reconciler with a fake kernel.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { Reconciler } from '../../src/agent/reconciler.ts';
import { renderNode } from '../support/render-node.ts';
import { debugHandler, metricsHandler, type AgentView } from '../../src/agent/debug-server.ts';
import { closeServer, listen, ListenError } from '../../src/observability/http-server.ts';
import { pod, podPeer, policy, port, rule, sel, state, node } from '../support/state-builder.ts';
import { captureLogger, FakeDataplane, FakeEvents, FakeSource, testMetrics, waitFor, withErrors } from './fakes.ts';
import { NO_HELD_PEERS, type HeldPeers } from '../../src/nft/recent-peers.ts';
import type { RulesView } from '../../src/agent/rules/endpoint.ts';

const NODE = 'node-1';

async function fixture(
  t: { after: (fn: () => Promise<void>) => void },
  o: { allowPodToNode?: boolean; rules?: RulesView; countersWaitMs?: number } = {},
) {
  const s = state({
    pods: [
      pod('shop', 'web', { labels: { app: 'web' }, ips: ['10.0.0.1'] }),
      pod('shop', 'db', { labels: { app: 'db' }, ips: ['10.0.0.2'] }),
      pod('shop', 'other', { labels: { app: 'other' }, ips: ['10.0.1.9'], node: 'node-2' }),
    ],
    policies: [
      policy('shop', 'db-from-web', {
        podSelector: sel({ app: 'db' }),
        ingress: [rule([podPeer(sel({ app: 'web' }))], [port('TCP', 5432)])],
      }),
      withErrors(policy('shop', 'broken', { podSelector: sel({ app: 'nothing' }) }), 'must be >= port (8080)'),
      ...(o.allowPodToNode === undefined
        ? []
        : [policy('shop', 'db-no-egress', { podSelector: sel({ app: 'db' }), types: { ingress: false, egress: true } })]),
    ],
    nodes: [node(NODE, o.allowPodToNode === undefined ? [] : ['192.168.100.1'])],
  });
  const source = new FakeSource(s);
  source.isSynced = false;
  const dataplane = new FakeDataplane();
  const { metrics, port: mport } = testMetrics();
  const { log } = captureLogger();
  const r = new Reconciler(
    { source, render: (st) => renderNode(st, NODE), dataplane, metrics: mport, log, events: new FakeEvents() },
    { nodeName: NODE, debounceMs: 1, driftIntervalMs: 0, syncPollMs: 5 },
  );
  const held: { value: HeldPeers } = { value: NO_HELD_PEERS };
  const view: AgentView = {
    nodeName: NODE,
    table: 'nft-netpol',
    ...(o.allowPodToNode === undefined ? {} : { allowPodToNode: o.allowPodToNode }),
    health: () => r.health(),
    ready: () => r.ready(),
    status: () => r.status(),
    snapshot: () => (source.synced() ? source.snapshot() : undefined),
    watches: () => [
      {
        resource: 'pods spec.nodeName=node-1',
        synced: source.synced(),
        restarts: 1,
        restartsByReason: { error: 0, stalled: 0, gone: 1, closed: 0 },
        lastEventAt: 0,
        lastError: undefined,
        objects: 2,
      },
    ],
    lastAppliedText: () => r.lastAppliedText(),
    lastFailedText: () => r.lastFailedText(),
    kernelMatches: () => r.kernelMatches(),
    heldPeers: () => held.value,
    ...(o.rules === undefined ? {} : { rules: o.rules }),
  };
  const errors: unknown[] = [];
  const servers: Server[] = [];
  const d = await listen(
    debugHandler(view, (e) => errors.push(e)),
    '127.0.0.1',
    0,
    'debug',
  );
  const m = await listen(
    metricsHandler(view, metrics.registry, (e) => errors.push(e), o.countersWaitMs),
    '127.0.0.1',
    0,
    'metrics',
  );
  servers.push(d.server, m.server);
  t.after(async () => {
    await r.stop(1000);
    for (const srv of servers) await closeServer(srv);
  });
  r.start();
  const get = async (p: number, path: string, accept?: string) => {
    const res = await fetch(`http://127.0.0.1:${p}${path}`, accept === undefined ? {} : { headers: { accept } });
    return { status: res.status, type: res.headers.get('content-type') ?? '', body: await res.text() };
  };
  return {
    held,
    r,
    source,
    dataplane,
    errors,
    debugPort: d.port,
    debug: (path: string, accept?: string) => get(d.port, path, accept),
    metrics: (path: string) => get(m.port, path),
  };
}

test('readiness follows the first apply; liveness is independent of sync', async (t) => {
  const f = await fixture(t);
  assert.equal((await f.debug('/healthz')).status, 200);
  const notReady = await f.debug('/readyz');
  assert.equal(notReady.status, 503);
  assert.match(notReady.body, /waiting for the initial sync/);
  assert.equal((await f.metrics('/readyz')).status, 503);
  f.source.isSynced = true;
  await waitFor('ready', async () => (await f.debug('/readyz')).status === 200);
  assert.equal((await f.metrics('/readyz')).status, 200);
  assert.equal((await f.metrics('/healthz')).status, 200);
});

test('/metrics serves the Prometheus exposition', async (t) => {
  const f = await fixture(t);
  f.source.isSynced = true;
  await waitFor('ready', () => f.r.ready());
  const m = await f.metrics('/metrics');
  assert.equal(m.status, 200);
  assert.match(m.type, /text\/plain; version=0\.0\.4/);
  assert.match(m.body, /^nftnp_nft_restore_calls_total 1$/m);
  assert.match(m.body, /^nftnp_invalid_policies 1$/m);
  assert.match(m.body, /^nftnp_resync_state 3$/m);
  assert.equal((await f.metrics('/debug/state')).status, 404, 'debug endpoints are not on the metrics listener');
});

test(
  '/metrics does not wait for a slow counters listing beyond its bound: the last read counters are served',
  { timeout: 10_000 },
  async (t) => {
    let refreshes = 0;
    const stuck: RulesView = {
      refresh: () => {
        refreshes++;
        return new Promise<void>(() => {}); // a listing starved of CPU
      },
      snapshot: () => ({ readAtMs: undefined, startedAtMs: 0, maxSeries: 10, dropped: 0, rules: [] }),
    };
    const f = await fixture(t, { rules: stuck, countersWaitMs: 50 });
    f.source.isSynced = true;
    await waitFor('ready', () => f.r.ready());
    const m = await f.metrics('/metrics');
    assert.equal(m.status, 200);
    assert.match(m.body, /^nftnp_nft_restore_calls_total 1$/m);
    assert.equal(refreshes, 1, 'the scrape asked for a read');
  },
);

test('/debug/state: JSON by default, text on request', async (t) => {
  const f = await fixture(t);
  f.source.isSynced = true;
  await waitFor('ready', () => f.r.ready());
  const j = await f.debug('/debug/state');
  assert.equal(j.status, 200);
  assert.match(j.type, /application\/json/);
  const body = JSON.parse(j.body) as Record<string, unknown>;
  assert.equal(body['node'], NODE);
  assert.equal(body['phase'], 'in-sync');
  assert.deepEqual(
    (body['localPods'] as { pod: string; ingress: string[] }[]).map((p) => [p.pod, p.ingress]),
    [
      ['shop/db', ['shop/db-from-web']],
      ['shop/web', []],
    ],
  );
  assert.deepEqual(body['invalidPolicies'], [
    { policy: 'shop/broken', errors: ['shop/broken spec.ingress[0].ports[0].endPort: must be >= port (8080)'] },
  ]);
  assert.equal((body['lastApply'] as { result: string }).result, 'applied');
  assert.equal((body['watches'] as { restarts: number }[])[0]?.restarts, 1);
  assert.deepEqual((body['watches'] as { restartsByReason: unknown }[])[0]?.restartsByReason, {
    error: 0,
    stalled: 0,
    gone: 1,
    closed: 0,
  });

  for (const [path, accept] of [
    ['/debug/state?format=text', undefined],
    ['/debug/state', 'text/plain'],
  ] as const) {
    const txt = await f.debug(path, accept);
    assert.match(txt.type, /text\/plain/);
    assert.match(txt.body, /phase in-sync/);
    assert.match(txt.body, /shop\/db {2}10\.0\.0\.2\n {4}ingress: shop\/db-from-web/);
    assert.match(txt.body, /invalid policies \(1\):\n {2}shop\/broken/);
    assert.match(txt.body, /pods spec\.nodeName=node-1: synced, 2 objects, 1 restarts \(gone 1\)/);
  }
  assert.match((await f.debug('/debug/state', '*/*')).type, /application\/json/);
});

test('/debug/ruleset shows the last applied text and whether the kernel still has it', async (t) => {
  const f = await fixture(t);
  assert.equal((await f.debug('/debug/ruleset')).status, 503);
  f.source.isSynced = true;
  await waitFor('ready', () => f.r.ready());
  const ok = JSON.parse((await f.debug('/debug/ruleset')).body) as { kernelMatches: boolean; ruleset: string };
  assert.equal(ok.kernelMatches, true);
  assert.match(ok.ruleset, /^table inet nft-netpol \{$/m);
  assert.deepEqual((ok as { heldPeers?: unknown }).heldPeers, []);
  assert.doesNotMatch((await f.debug('/debug/ruleset?format=text')).body, /^# held out of the pod peer maps/m);
  // A remote address held out of the pod peer map: the page says where it is in the kernel.
  f.held.value = new Map([['ingress-peers-v4', new Map([['10.0.1.9', 'KUBE-PEERS-0123456789ab-IN']])]]);
  const holding = JSON.parse((await f.debug('/debug/ruleset')).body) as { heldPeers: unknown };
  assert.deepEqual(holding.heldPeers, [{ map: 'ingress-peers-v4', address: '10.0.1.9', chain: 'KUBE-PEERS-0123456789ab-IN' }]);
  assert.match(
    (await f.debug('/debug/ruleset?format=text')).body,
    /^# kernel matches the last apply: yes\n# held out of the pod peer maps until the next fold .*: 1\n# {3}ingress-peers-v4 10\.0\.1\.9 -> KUBE-PEERS-0123456789ab-IN\n# nft-netpol-agent ruleset for node /,
  );
  f.held.value = NO_HELD_PEERS;
  f.dataplane.kernel = undefined;
  const gone = JSON.parse((await f.debug('/debug/ruleset')).body) as { kernelMatches: boolean; detail: string };
  assert.equal(gone.kernelMatches, false);
  assert.match(gone.detail, /table missing/);
  const txt = await f.debug('/debug/ruleset?format=text');
  assert.match(txt.body, /^# kernel matches the last apply: no \(table missing\)/);

  // While nft rejects a new ruleset, the rejected script is shown next to the one in force.
  f.dataplane.failNext = 1000;
  f.source.current = { ...f.source.current, pods: f.source.current.pods.filter((p) => p.name !== 'web') };
  f.r.notify('pod deleted');
  await waitFor('failure', () => f.r.status().consecutiveFailures >= 1);
  const failing = JSON.parse((await f.debug('/debug/ruleset')).body) as {
    ruleset: string;
    failedRuleset: string;
    failedError: string;
  };
  assert.notEqual(failing.failedRuleset, failing.ruleset);
  assert.match(failing.failedError, /nft failed/);
  assert.match(
    (await f.debug('/debug/ruleset?format=text')).body,
    /# ---- the last transaction nft rejected \(nft failed: .*\); not in force ----/,
  );
});

test('/debug/explain answers live and rejects bad parameters with 400', async (t) => {
  const f = await fixture(t);
  assert.equal((await f.debug('/debug/explain?from=shop/web&to=shop/db&port=5432')).status, 503, 'not synced yet');
  f.source.isSynced = true;
  await waitFor('ready', () => f.r.ready());
  const allowed = await f.debug('/debug/explain?from=shop/web&to=shop/db&port=5432');
  assert.equal(allowed.status, 200);
  assert.equal((JSON.parse(allowed.body) as { allowed: boolean }).allowed, true);
  const denied = await f.debug('/debug/explain?from=shop/other&to=shop/db&port=5432/tcp&format=text');
  assert.equal(denied.status, 200);
  assert.match(denied.body, /^DENIED/);
  const cases: [string, RegExp][] = [
    ['/debug/explain?from=shop/web&to=shop/db', /from, to and port are required/],
    ['/debug/explain?from=shop/web&to=shop/db&port=http', /port: .*not PORT/],
    ['/debug/explain?from=shop/nope&to=shop/db&port=80', /from: .*not found/],
    ['/debug/explain?from=shop/web&to=shop/db&port=80&family=5', /family: must be 4 or 6/],
  ];
  for (const [path, re] of cases) {
    const r = await f.debug(path);
    assert.equal(r.status, 400, path);
    assert.match((JSON.parse(r.body) as { error: string }).error, re, path);
  }
  assert.equal((await f.debug('/nope')).status, 404);
  assert.equal((await fetch(`http://127.0.0.1:${f.debugPort}/debug/state`, { method: 'POST' })).status, 405, 'read-only');
  assert.deepEqual(f.errors, []);
});

test('/debug/explain judges egress to the own node as the agent was told (--allow-pod-to-node)', async (t) => {
  for (const allowPodToNode of [false, true]) {
    const f = await fixture(t, { allowPodToNode });
    f.source.isSynced = true;
    await waitFor('ready', () => f.r.ready());
    const r = await f.debug('/debug/explain?from=shop/db&to=192.168.100.1&port=10250');
    assert.equal(r.status, 200);
    const v = JSON.parse(r.body) as { allowed: boolean };
    assert.equal(v.allowed, allowPodToNode, r.body);
    if (allowPodToNode) assert.match(r.body, /--allow-pod-to-node/);
  }
});

test('a port in use is a clear error', async () => {
  const a = await listen(() => {}, '127.0.0.1', 0, 'first');
  try {
    await assert.rejects(
      listen(() => {}, '127.0.0.1', a.port, 'debug (--debug-addr)'),
      (e: unknown) =>
        e instanceof ListenError &&
        /cannot listen on 127\.0\.0\.1:\d+ for debug \(--debug-addr\): the address is already in use/.test(e.message),
    );
  } finally {
    await closeServer(a.server);
  }
});
