// explain answers in the address family of the question (issue #21, item 2):
// an address on either side fixes it, pods alone use --family (default 4), a
// contradiction is a usage error; the CLI and the agent's /debug/explain take
// the same path and give the same answer. examples/ is dual-stack.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { main } from '../../src/cli/main.ts';
import { debugHandler, type AgentView } from '../../src/agent/debug-server.ts';
import { loadManifests } from '../../src/model/load.ts';
import { buildState } from '../../src/model/normalize.ts';
import { closeServer, listen } from '../../src/observability/http-server.ts';
import type { ExplainJson } from '../../src/policy/explain.ts';

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (s) => void (out += `${s}\n`), err: (s) => void (err += `${s}\n`) });
  return { code, out, err };
}

const explain = (...args: string[]) => run(['explain', '-f', 'examples/', ...args]);

// shop/frontend-7d9f4 is 10.244.1.10 and fd00:10:244:1::a; shop/cart-5c8b7 is 10.244.1.11 and fd00:10:244:1::b.
test('an IPv6 address names the IPv6 side of a dual-stack pod', async () => {
  const t = await explain('--from', '2001:db8:1::1', '--to', 'fd00:10:244:1::a', '--port', '8080');
  assert.equal(t.code, 0, t.err);
  assert.match(t.out, /^ALLOWED: 2001:db8:1::1 -> shop\/frontend-7d9f4 \(fd00:10:244:1::a\) on 8080\/TCP \(IPv6\)$/m);
  assert.doesNotMatch(t.out, /10\.244\.1\.10|IPv4/);
  const j = await explain('--from', '2001:db8:1::1', '--to', 'fd00:10:244:1::a', '--port', '8080', '-o', 'json');
  const parsed = JSON.parse(j.out) as ExplainJson;
  assert.equal(parsed.family, 6);
  assert.deepEqual(parsed.to, { kind: 'pod', namespace: 'shop', name: 'frontend-7d9f4', ip: 'fd00:10:244:1::a' });
});

test('one address fixes the family of a pod named on the other side; pods alone use --family', async () => {
  const mixed = await explain('--from', 'fd00:10:244:1::b', '--to', 'shop/frontend-7d9f4', '--port', '8080', '-o', 'json');
  const m = JSON.parse(mixed.out) as ExplainJson;
  assert.equal(m.family, 6);
  assert.deepEqual(m.from, { kind: 'pod', namespace: 'shop', name: 'cart-5c8b7', ip: 'fd00:10:244:1::b' });
  assert.equal(m.to.ip, 'fd00:10:244:1::a');
  const pods4 = JSON.parse(
    (await explain('--from', 'shop/cart-5c8b7', '--to', 'shop/frontend-7d9f4', '--port', '8080', '-o', 'json')).out,
  ) as ExplainJson;
  assert.equal(pods4.family, 4);
  assert.equal(pods4.to.ip, '10.244.1.10');
  const pods6 = JSON.parse(
    (await explain('--from', 'shop/cart-5c8b7', '--to', 'shop/frontend-7d9f4', '--port', '8080', '--family', '6', '-o', 'json'))
      .out,
  ) as ExplainJson;
  assert.equal(pods6.family, 6);
  assert.equal(pods6.to.ip, 'fd00:10:244:1::a');
});

test('a family that contradicts an address, or addresses of two families, are usage errors (exit 2)', async () => {
  const cases: [string[], RegExp][] = [
    [
      ['--from', '10.244.1.11', '--to', 'shop/frontend-7d9f4', '--family', '6'],
      /--family: 6 contradicts the IPv4 address 10\.244\.1\.11/,
    ],
    [['--from', 'shop/cart-5c8b7', '--to', 'fd00:10:244:1::a', '--family', '4'], /--family: 4 contradicts the IPv6 address/],
    [['--from', '10.244.1.11', '--to', 'fd00:10:244:1::a'], /one address family/],
    [['--from', 'shop/cart-5c8b7', '--to', 'shop/frontend-7d9f4', '--family', '5'], /--family: must be 4 or 6/],
  ];
  for (const [args, re] of cases) {
    const r = await explain(...args, '--port', '8080');
    assert.equal(r.code, 2, args.join(' '));
    assert.match(r.err, re, args.join(' '));
    assert.equal(r.out, '', args.join(' '));
  }
});

test('/debug/explain gives the CLI answer for the same question', async (t) => {
  const loaded = await loadManifests(['examples/']);
  const { state } = buildState(loaded.objects);
  const view: AgentView = {
    nodeName: 'node-1',
    table: 'nft-netpol',
    health: () => ({ ok: true, detail: '' }),
    ready: () => true,
    status: () => {
      throw new Error('not used');
    },
    snapshot: () => state,
    watches: () => [],
    lastAppliedText: () => undefined,
    lastFailedText: () => undefined,
    kernelMatches: () => Promise.reject(new Error('not used')),
  };
  const errors: unknown[] = [];
  const d = await listen(
    debugHandler(view, (e) => errors.push(e)),
    '127.0.0.1',
    0,
    'debug',
  );
  t.after(() => closeServer(d.server));
  const ask = async (q: Record<string, string>) => {
    const res = await fetch(`http://127.0.0.1:${d.port}/debug/explain?${new URLSearchParams(q).toString()}`);
    return { status: res.status, body: JSON.parse(await res.text()) as ExplainJson & { error?: string } };
  };
  const questions: Record<string, string>[] = [
    { from: '2001:db8:1::1', to: 'fd00:10:244:1::a', port: '8080' },
    { from: 'fd00:10:244:1::b', to: 'shop/frontend-7d9f4', port: '8080' },
    { from: 'shop/cart-5c8b7', to: 'shop/frontend-7d9f4', port: '8080' },
    { from: 'shop/cart-5c8b7', to: 'shop/frontend-7d9f4', port: '8080', family: '6' },
    { from: '10.244.1.11', to: 'payments/api-0', port: '8443' },
  ];
  for (const q of questions) {
    const http = await ask(q);
    assert.equal(http.status, 200, JSON.stringify(q));
    const argv = ['--from', q['from'] ?? '', '--to', q['to'] ?? '', '--port', q['port'] ?? ''];
    if (q['family'] !== undefined) argv.push('--family', q['family']);
    const cli = await explain(...argv, '-o', 'json');
    const {
      errors: _e,
      warnings: _w,
      ...cliAnswer
    } = JSON.parse(cli.out) as ExplainJson & { errors: unknown; warnings: unknown };
    assert.deepEqual(http.body, cliAnswer, JSON.stringify(q));
  }
  assert.equal((await ask({ from: '2001:db8:1::1', to: 'fd00:10:244:1::a', port: '8080' })).body.family, 6);
  const contradiction = await ask({ from: '10.244.1.11', to: 'shop/frontend-7d9f4', port: '80', family: '6' });
  assert.equal(contradiction.status, 400);
  assert.match(contradiction.body.error ?? '', /family: 6 contradicts the IPv4 address/);
  assert.deepEqual(errors, []);
});
