// The agent as a real process against the in-process fake API server,
// applying into a scratch network namespace; checks the kernel table with
// `nft list`. Needs root, nft and ip: skipped locally without them, failing
// in CI (CI=true).
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FakeApiServer, networkPolicy } from '../support/fake-apiserver.ts';
import { createNetns, deleteNetns, uniquePrefix } from '../harness/netns.ts';
import { requireDatapath } from '../harness/requirements.ts';
import { AgentProcess, eventually, listTableIn, nftIn, type Scratch } from './agent-process.ts';
import { DB_IP, OTHER_IP, scratchNode, WEB_IP } from './scratch-node.ts';

const ALLOW_WEB = networkPolicy('shop', 'db-allow-web', {
  podSelector: { matchLabels: { app: 'db' } },
  ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 5432 }] }],
});
const ALLOW_OTHER = networkPolicy('shop', 'db-allow-other', {
  podSelector: { matchLabels: { app: 'db' } },
  ingress: [{ from: [{ podSelector: { matchLabels: { app: 'other' } } }] }],
});

interface Env {
  readonly api: FakeApiServer;
  readonly netns: string;
  readonly s: Scratch;
  readonly agents: AgentProcess[];
  start(extra?: { nft?: string; args?: string[] }): AgentProcess;
}

/** A fake API server with one local and two remote pods, a scratch netns, and cleanup. */
async function setup(t: TestContext): Promise<Env | undefined> {
  const n = await scratchNode(t, 'k');
  if (n === undefined) return undefined;
  return { ...n, start: (extra = {}) => n.start(['--drift-interval', '300ms', ...(extra.args ?? [])], extra.nft) };
}

async function tableHas(netns: string, text: string): Promise<boolean> {
  return (await listTableIn(netns))?.includes(text) ?? false;
}

test(
  'agent process: waits for sync, applies, follows changes, exits 0 on SIGTERM leaving the table',
  { timeout: 90_000 },
  async (t) => {
    const e = await setup(t);
    if (e === undefined) return;
    // A ruleset left by a previous run, and an API server whose policy lists fail.
    await nftIn(e.netns, ['-f', '-'], 'table inet nft-netpol {\n\tcomment "left by a previous run"\n}\n');
    e.api.failNext(1_000_000, 500, { only: 'list', resource: 'networkpolicies' });
    e.api.create('networkpolicies', ALLOW_WEB);
    const a = e.start();
    await eventually(
      'failing policy lists',
      () => e.api.requests.filter((r) => r.path.includes('networkpolicies') && r.status === 500).length >= 2,
    );
    assert.equal((await a.get('/readyz')).status, 503);
    assert.equal(await a.metric('nftnp_resync_state'), 1);
    assert.match((await listTableIn(e.netns)) ?? '', /left by a previous run/, 'nothing written before sync');

    e.api.clearFaults();
    await a.waitReady();
    await eventually('policy peer in the kernel', () => tableHas(e.netns, WEB_IP));
    assert.doesNotMatch((await listTableIn(e.netns)) ?? '', /left by a previous run/);
    assert.equal(await a.metric('nftnp_resync_state'), 3);
    assert.equal(await a.metric('nftnp_active_local_endpoints'), 1);
    assert.equal(await a.metric('nftnp_cluster_num_policies'), 1);

    // Policy updated, another created, the first deleted.
    e.api.update('networkpolicies', {
      ...ALLOW_WEB,
      spec: { ...(ALLOW_WEB.spec as object), ingress: [{ from: [{ podSelector: { matchLabels: { app: 'other' } } }] }] },
    });
    await eventually('updated peers', async () => (await tableHas(e.netns, OTHER_IP)) && !(await tableHas(e.netns, WEB_IP)));
    e.api.create('networkpolicies', { ...ALLOW_WEB, metadata: { name: 'db-allow-web-2', namespace: 'shop' } });
    await eventually('second policy', () => tableHas(e.netns, WEB_IP));
    e.api.delete('networkpolicies', 'shop', 'db-allow-web-2');
    await eventually('second policy gone', async () => !(await tableHas(e.netns, WEB_IP)));
    // Local pod deleted: its IP leaves the table at once.
    assert.ok(await tableHas(e.netns, DB_IP));
    e.api.delete('pods', 'shop', 'db');
    await eventually('local pod gone', async () => !(await tableHas(e.netns, DB_IP)));
    assert.ok((await a.metric('nftnp_event_to_applied_seconds_count')) >= 4);
    const applyLines = a.lines.filter((l) => l['event'] === 'apply' && l['result'] === 'applied');
    assert.ok(applyLines.every((l) => typeof l['durationMs'] === 'number' && typeof l['rules'] === 'number'));

    // A remote pod's address may be held out of its pod map for a moment (nft/recent-peers.ts):
    // the fold is an apply of its own a second after the last one; let it come before the listing.
    await eventually('no fold pending', () => {
      const last = a.lines.filter((l) => l['event'] === 'apply' && l['result'] === 'applied').at(-1);
      return last !== undefined && Date.now() - Date.parse(String(last['time'])) > 1500;
    });
    const before = await listTableIn(e.netns);
    a.kill('SIGTERM');
    const exit = await a.exited;
    assert.equal(exit.code, 0, a.tail());
    assert.equal(await listTableIn(e.netns), before, 'the ruleset stays in force after exit');
  },
);

test('agent process: a failing nft keeps the previous ruleset, is counted, and recovers', { timeout: 90_000 }, async (t) => {
  const e = await setup(t);
  if (e === undefined) return;
  e.api.create('networkpolicies', ALLOW_WEB);
  const a = e.start({ nft: e.s.nft });
  await a.waitReady();
  const before = await listTableIn(e.netns);
  assert.ok(before?.includes(WEB_IP));
  await e.s.flag('fail', true);
  e.api.create('networkpolicies', ALLOW_OTHER);
  await eventually('restore errors counted', async () => (await a.metric('nftnp_nft_restore_errors_total')) >= 2);
  assert.equal(await listTableIn(e.netns), before, 'the previous ruleset holds');
  assert.ok((await a.metric('nftnp_dataplane_failures_total')) >= 2);
  assert.equal(await a.metric('nftnp_in_sync'), 0);
  const failed = a.lines.find((l) => l['event'] === 'apply' && l['result'] === 'failed');
  assert.match(String(failed?.['error']), /injected failure/);
  assert.equal((await a.get('/readyz')).status, 200, 'still ready: a ruleset is in force');
  await e.s.flag('fail', false);
  await eventually('recovered', () => tableHas(e.netns, OTHER_IP), 45_000);
  await eventually('in sync', async () => (await a.metric('nftnp_in_sync')) === 1);
});

test(
  'agent process: an nft without its interactive CLI: the long-lived nft -i is given up once, nft -f applies every change',
  { timeout: 90_000 },
  async (t) => {
    const e = await setup(t);
    if (e === undefined) return;
    await e.s.flag('nocli', true);
    e.api.create('networkpolicies', ALLOW_WEB);
    const a = e.start({ nft: e.s.nft });
    await a.waitReady();
    e.api.create('networkpolicies', ALLOW_OTHER);
    await eventually('the change applied', () => tableHas(e.netns, OTHER_IP), 45_000);
    const unusable = (): number =>
      a.lines.filter(
        (l) => l['event'] === 'nft-session' && l['state'] === 'unusable' && /no interactive CLI/.test(String(l['detail'])),
      ).length;
    assert.equal(unusable(), 1);
    assert.equal(await a.metric('nftnp_nft_restore_errors_total'), 0, 'the fallback is not an error');
    e.api.delete('networkpolicies', 'shop', 'db-allow-other');
    await eventually('the next change applied', async () => !(await tableHas(e.netns, OTHER_IP)), 45_000);
    assert.equal(unusable(), 1, 'said once');
  },
);

test('agent process: a table flushed, edited or deleted from outside is repaired', { timeout: 90_000 }, async (t) => {
  const e = await setup(t);
  if (e === undefined) return;
  e.api.create('networkpolicies', ALLOW_WEB);
  const a = e.start();
  await a.waitReady();
  const good = await listTableIn(e.netns);
  // Tamper only once the agent has read its own apply back (as an operator would, seconds later).
  const settled = (n: number) =>
    eventually(`repair ${n} read back`, async () => {
      const rs = JSON.parse((await a.get('/debug/ruleset')).body) as { kernelMatches: boolean | null };
      return rs.kernelMatches === true && (await a.metric('nftnp_drift_repairs_total')) >= n;
    });
  await settled(0);
  await nftIn(e.netns, ['flush', 'table', 'inet', 'nft-netpol']);
  await eventually('repaired after flush', async () => (await listTableIn(e.netns)) === good);
  await settled(1);
  await nftIn(e.netns, ['delete', 'table', 'inet', 'nft-netpol']);
  await eventually('repaired after delete', async () => (await listTableIn(e.netns)) === good);
  await settled(2);
  await nftIn(e.netns, ['add', 'chain', 'inet', 'nft-netpol', 'intruder']);
  await eventually('repaired after edit', async () => (await listTableIn(e.netns)) === good);
  await settled(3);
  assert.ok(a.lines.some((l) => l['event'] === 'drift-repaired'));
  // And it stays so. Eventually: a second repair of the same edit (the
  // monitor's event and a drift check both saw it) leaves "unknown" until
  // its own read-back; a mismatch would never turn into a match.
  let last = { kernelMatches: null as boolean | null, detail: null as string | null };
  await eventually('still matching', async () => {
    last = JSON.parse((await a.get('/debug/ruleset')).body) as typeof last;
    return last.kernelMatches === true;
  }).catch((e: unknown) => {
    throw new Error(`${String(e)}: ${String(last.kernelMatches)} ${String(last.detail)}\n${a.tail()}`);
  });
  assert.equal(await listTableIn(e.netns), good);
});

test('agent process: SIGKILL during an apply leaves a whole ruleset; a restart converges', { timeout: 90_000 }, async (t) => {
  const e = await setup(t);
  if (e === undefined) return;
  e.api.create('networkpolicies', ALLOW_WEB);
  const a = e.start({ nft: e.s.nft });
  await a.waitReady();
  const before = await listTableIn(e.netns);
  await e.s.flag('slow', true);
  e.api.create('networkpolicies', ALLOW_OTHER);
  const sleepingFile = join(e.s.dir, 'sleeping');
  await eventually('apply in flight', async () => (await readFile(sleepingFile, 'utf8').catch(() => '')) !== '');
  // Kill the agent and its nft mid-transaction, as a container kill would.
  a.kill('SIGKILL');
  await a.exited;
  process.kill(Number((await readFile(sleepingFile, 'utf8')).trim()), 'SIGKILL');
  assert.equal(await listTableIn(e.netns), before, 'the kernel holds the old ruleset, whole');

  await e.s.flag('slow', false);
  const b = e.start({ nft: e.s.nft });
  await b.waitReady();
  await eventually('converged', async () => (await tableHas(e.netns, OTHER_IP)) && (await tableHas(e.netns, WEB_IP)));
});

test('agent process: an invalid policy is enforced fail-closed and produces one Event', { timeout: 90_000 }, async (t) => {
  const e = await setup(t);
  if (e === undefined) return;
  const a = e.start();
  await a.waitReady();
  const open = await listTableIn(e.netns);
  e.api.create(
    'networkpolicies',
    networkPolicy('shop', 'broken', {
      podSelector: { matchLabels: { app: 'db' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 8080, endPort: 80 }] }],
    }),
  );
  await eventually('Event recorded', () => e.api.events.length >= 1);
  const ev = e.api.events[0]?.body as {
    reason?: string;
    type?: string;
    message?: string;
    involvedObject?: { kind?: string; name?: string; namespace?: string };
  };
  assert.equal(ev.reason, 'InvalidNetworkPolicy');
  assert.equal(ev.type, 'Warning');
  assert.deepEqual(
    [ev.involvedObject?.kind, ev.involvedObject?.namespace, ev.involvedObject?.name],
    ['NetworkPolicy', 'shop', 'broken'],
  );
  assert.match(String(ev.message), /shop\/broken spec\.ingress\[0\]\.ports\[0\]\.endPort/);
  await eventually('counted', async () => (await a.metric('nftnp_invalid_policies')) === 1);
  // Fail closed: the pod is now isolated (the table changed) and the invalid rule's peer got no allowance.
  await eventually('isolated', async () => (await listTableIn(e.netns)) !== open);
  assert.equal(await tableHas(e.netns, WEB_IP), false, 'the invalid rule allows nothing');
  const state = JSON.parse((await a.get('/debug/state')).body) as {
    invalidPolicies: { policy: string }[];
    localPods: { pod: string; ingress: string[] }[];
  };
  assert.deepEqual(
    state.invalidPolicies.map((p) => p.policy),
    ['shop/broken'],
  );
  assert.deepEqual(state.localPods[0]?.ingress, ['shop/broken']);
  // Touching an unrelated object does not repeat the Event.
  e.api.patchLabels('pods', 'shop', 'db', { extra: 'x' });
  await eventually('reconciled', () => a.lines.filter((l) => l['event'] === 'apply').length >= 3);
  assert.equal(e.api.events.length, 1);
});

test('agent process: watch resets, 410 expiry and an API server restart are followed', { timeout: 120_000 }, async (t) => {
  const e = await setup(t);
  if (e === undefined) return;
  const a = e.start();
  await a.waitReady();

  e.api.resetConnections();
  e.api.create('networkpolicies', ALLOW_WEB);
  await eventually('change after a stream reset', () => tableHas(e.netns, WEB_IP), 45_000);

  e.api.compact();
  e.api.resetConnections();
  e.api.create('networkpolicies', ALLOW_OTHER);
  await eventually('change after 410 expiry', () => tableHas(e.netns, OTHER_IP), 45_000);

  await e.api.refuse();
  await new Promise((r) => setTimeout(r, 300));
  await e.api.accept();
  e.api.delete('networkpolicies', 'shop', 'db-allow-web');
  await eventually('change after an API server restart', async () => !(await tableHas(e.netns, WEB_IP)), 60_000);
  await eventually('restarts counted by reason: errors (resets, refused) and the 410 relist', async () => {
    const body = (await a.get('/metrics', 'metrics')).body;
    return (
      /^nftnp_watch_restarts_total\{resource="[a-z]+",reason="error"\} [1-9]/m.test(body) &&
      /^nftnp_watch_restarts_total\{resource="[a-z]+",reason="gone"\} [1-9]/m.test(body)
    );
  });
  const relisted = a.lines.filter((l) => l['msg'] === 'watch resourceVersion expired (410 Gone); relisting');
  assert.ok(relisted.length >= 1, 'the relist after 410 Gone is logged');
  assert.ok(
    relisted.every((l) => l['level'] === 'info'),
    'at info',
  );
  await eventually('in sync', async () => (await a.metric('nftnp_in_sync')) === 1);
});

test('cleanup removes the table and exits 0, also when it is absent', { timeout: 60_000 }, async (t) => {
  if (!requireDatapath(t)) return;
  const netns = `${uniquePrefix()}c`;
  await createNetns([netns]);
  t.after(() => deleteNetns([netns]));
  await nftIn(netns, ['-f', '-'], 'table inet nft-netpol {\n\tchain c {\n\t}\n}\ntable inet other {\n}\n');
  const { execa } = await import('execa');
  const main = new URL('../../src/cli/main.ts', import.meta.url).pathname;
  const r1 = await execa(process.execPath, [main, 'cleanup', '--netns', netns], { reject: false });
  assert.equal(r1.exitCode, 0, r1.stderr);
  assert.equal(await listTableIn(netns), undefined);
  assert.notEqual(await listTableIn(netns, 'other'), undefined, 'other tables untouched');
  const r2 = await execa(process.execPath, [main, 'cleanup', '--netns', netns], { reject: false });
  assert.equal(r2.exitCode, 0, r2.stderr);
  const bad = await execa(process.execPath, [main, 'cleanup', '--table', 'x;y'], { reject: false });
  assert.equal(bad.exitCode, 2);
});
