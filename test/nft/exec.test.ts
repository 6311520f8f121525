// runNft/listTable against the real nft: check mode, error reporting, and one
// smoke test in a scratch network namespace (apply, list back, re-apply,
// clean up). Packet-level behaviour is the datapath harness's job.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execa } from 'execa';
import { listTable, runNft } from '../../src/nft/exec.ts';
import { renderCleanup } from '../../src/nft/render.ts';
import { renderNode } from '../support/render-node.ts';
import { cport, ipBlock, pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';
import { haveNft } from './nft-support.ts';

const cluster = state({
  pods: [
    pod('a', 'web', { labels: { app: 'web' }, ips: ['10.0.0.1', 'fd00::1'], ports: [cport('http', 8080)] }),
    pod('a', 'client', { labels: { app: 'client' }, ips: ['10.0.1.1'], node: 'node-2' }),
  ],
  policies: [
    policy('a', 'web', {
      podSelector: sel({ app: 'web' }),
      ingress: [
        rule(
          [podPeer(sel({ app: 'client' })), ipBlock('192.168.0.0/16', ['192.168.1.0/24'])],
          [port('TCP', 'http'), port('TCP', 30000, 32767)],
        ),
      ],
      egress: [rule(undefined, [port('UDP', 53)])],
    }),
  ],
});

test('runNft --check: ok for a valid script, nft stderr and exit code for a bad one', async (t) => {
  if (!(await haveNft(t))) return;
  assert.deepEqual(await runNft(renderNode(cluster, 'node-1').text, { check: true }), { ok: true });
  const bad = await runNft('table inet nft-netpol-test {\n\tchain c { ip saddr @missing accept }\n}\n', { check: true });
  assert.equal(bad.ok, false);
  assert.ok(!bad.ok && bad.exitCode === 1, JSON.stringify(bad));
  assert.ok(!bad.ok && /missing/.test(bad.error) && bad.error === bad.error.trim(), JSON.stringify(bad));
});

test('runNft reports a missing nft binary without throwing', async () => {
  const r = await runNft('', { check: true, nftPath: '/nonexistent/nft' });
  assert.equal(r.ok, false);
  assert.ok(!r.ok && r.error.length > 0 && r.exitCode === undefined, JSON.stringify(r));
});

test('smoke: apply in a scratch netns, list it back, re-apply identically, clean up', async (t) => {
  if (!(await haveNft(t))) return;
  const id = randomBytes(4).toString('hex');
  const netns = `nftnp-test-${id}`;
  // A unique table name too, so the host check below cannot meet another test's table.
  const table = `nftnp-smoke-${id}`;
  await execa('ip', ['netns', 'add', netns]);
  try {
    const where = { netns };
    assert.equal(await listTable(table, where), undefined, 'fresh namespace has no table');
    const { text, stats } = renderNode(cluster, 'node-1', { denyAction: 'reject', table });
    assert.deepEqual(await runNft(text, where), { ok: true });
    const first = await listTable(table, where);
    assert.ok(first !== undefined);
    for (const want of [
      'chain forward-ingress',
      'hook forward priority filter + 1',
      'map ingress-v4',
      'KUBE-NWPLCY-',
      '10.0.0.1 : goto KUBE-POD-FW-',
      'tcp . 30000-32767',
      '10.0.0.1 . tcp . 8080',
    ]) {
      assert.ok(first.includes(want), `listing lacks ${want}:\n${first}`);
    }
    assert.equal((first.match(/^\tchain /gm) ?? []).length, stats.chains);
    // Re-applying the same script is a no-op as far as the listing goes.
    assert.deepEqual(await runNft(text, where), { ok: true });
    assert.equal(await listTable(table, where), first);
    // The host's own ruleset never saw it.
    assert.equal(await listTable(table), undefined);
    assert.deepEqual(await runNft(renderCleanup(table), where), { ok: true });
    assert.equal(await listTable(table, where), undefined);
    assert.deepEqual(await runNft(renderCleanup(table), where), { ok: true }, 'cleanup of an absent table succeeds');
  } finally {
    await execa('ip', ['netns', 'del', netns], { reject: false });
  }
});
