// Per-rule counters, pure parts: kernel counters read into monotonic totals
// (offsets per rule handle, resets read as resets), the series cap, the
// listing parser, the shared listing and /debug/rules' query and reply.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { byNatural, countedRules, ruleCountersFromJson, RuleCounterState } from '../../src/agent/rules/counters.ts';
import type { KernelRuleCounter } from '../../src/agent/rules/counters.ts';
import { parseRulesQuery, rulesReply } from '../../src/agent/rules/endpoint.ts';
import { sharedListing } from '../../src/agent/rules/shared-listing.ts';
import { RuleCounters } from '../../src/agent/rules/rule-counters.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import type { CountedRule } from '../../src/ruleset/ir.ts';
import { compileNode } from '../../src/compile/compile.ts';
import { pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';
import { pino } from 'pino';

const rule0: CountedRule = {
  kind: 'NetworkPolicy',
  namespace: 'shop',
  policy: 'db',
  rule: '0',
  direction: 'ingress',
  action: 'Allow',
};
const rule1: CountedRule = { ...rule0, rule: '1' };
const rules = (...pairs: [string, CountedRule][]): Map<string, CountedRule> => new Map(pairs);
const k = (chain: string, handle: number, packets: number): KernelRuleCounter => ({ chain, handle, packets });

test('totals grow by the increase since the last read; a replaced rule (new handle) or a counter gone down counts from 0', () => {
  const s = new RuleCounterState(10);
  const r = rules(['A', rule0]);
  assert.deepEqual(s.advance(r, [k('A', 1, 5)], 1000).increased, [{ counts: rule0, delta: 5 }]);
  assert.deepEqual(s.advance(r, [k('A', 1, 7)], 2000).increased, [{ counts: rule0, delta: 2 }]);
  // A full reload: the chain is new, its rule has a new handle and a counter restarted at 0.
  assert.deepEqual(s.advance(r, [k('A', 9, 3)], 3000).increased, [{ counts: rule0, delta: 3 }]);
  // Same handle, lower value (the rule was replaced in place): read as a reset.
  assert.deepEqual(s.advance(r, [k('A', 9, 1)], 4000).increased, [{ counts: rule0, delta: 1 }]);
  // Nothing new: delta 0, last hit unchanged.
  assert.deepEqual(s.advance(r, [k('A', 9, 1)], 5000).increased, [{ counts: rule0, delta: 0 }]);
  const [t] = s.totals();
  assert.equal(t?.hits, 11);
  assert.equal(t?.lastHitMs, 4000);
});

test('a rule of several counters (a Deny with tcp reset and icmp rejects) sums them; totals sort by hits', () => {
  const s = new RuleCounterState(10);
  const r = rules(['A', rule0], ['B', rule1]);
  s.advance(r, [k('A', 1, 2), k('B', 3, 4), k('B', 4, 5)], 1000);
  assert.deepEqual(
    s.totals().map((x) => [x.chain, x.hits, x.lastHitMs]),
    [
      ['B', 9, 1000],
      ['A', 2, 1000],
    ],
  );
});

test('a rule never hit is listed with 0 hits and no last hit; a rule gone loses its totals and its series', () => {
  const s = new RuleCounterState(10);
  s.advance(rules(['A', rule0], ['B', rule1]), [k('A', 1, 0), k('B', 2, 1)], 1000);
  assert.deepEqual(
    s.totals().find((x) => x.chain === 'A'),
    {
      chain: 'A',
      counts: rule0,
      hits: 0,
      lastHitMs: undefined,
      exported: true,
    },
  );
  const a = s.advance(rules(['B', rule1]), [k('B', 2, 1)], 2000);
  assert.deepEqual(a.removed, [rule0]);
  assert.deepEqual(
    s.totals().map((x) => x.chain),
    ['B'],
  );
});

test('the cap: at most N series, the rest counted but not exported; capReached once per time the cap fills', () => {
  const s = new RuleCounterState(2);
  const mk = (i: number): CountedRule => ({ ...rule0, rule: String(i) });
  const three = rules(['A', mk(0)], ['B', mk(1)], ['C', mk(2)]);
  const a = s.advance(three, [k('C', 1, 4)], 1000);
  assert.equal(a.increased.length, 2);
  assert.equal(a.dropped, 1);
  assert.equal(a.capReached, true);
  const again = s.advance(three, [k('C', 1, 6)], 2000);
  assert.equal(again.capReached, false, 'said once');
  assert.equal(again.dropped, 1);
  const c = s.totals().find((x) => x.chain === 'C');
  assert.equal(c?.exported, false);
  assert.equal(c?.hits, 6, 'still counted');
  // A exported rule goes: the next new one gets its place; C stays unexported (no series flapping).
  const after = s.advance(rules(['B', mk(1)], ['C', mk(2)], ['D', mk(3)]), [], 3000);
  assert.deepEqual(after.removed, [mk(0)]);
  assert.deepEqual(
    after.increased.map((x) => x.counts.rule),
    ['1', '3'],
  );
  assert.equal(after.dropped, 1);
  // Cap 0: no series at all.
  const none = new RuleCounterState(0).advance(three, [], 1);
  assert.deepEqual([none.increased.length, none.dropped], [0, 3]);
});

test('the listing parser reads the counters of the rule chains asked for, nothing else', () => {
  const json = JSON.stringify({
    nftables: [
      { metainfo: { version: '1.0.6' } },
      {
        rule: {
          chain: 'KUBE-NWPLCY-aaaaaaaaaaaa-IN-0',
          handle: 7,
          expr: [{ counter: { packets: 3, bytes: 180 } }, { accept: null }],
        },
      },
      {
        rule: { chain: 'KUBE-POD-FW-bbbbbbbbbbbb-IN', handle: 8, expr: [{ counter: { packets: 9, bytes: 1 } }, { drop: null }] },
      },
      { rule: { chain: 'KUBE-NWPLCY-aaaaaaaaaaaa-IN-1', handle: 9, expr: [{ log: {} }] } },
    ],
  });
  assert.deepEqual(
    ruleCountersFromJson(
      json,
      new Map([
        ['KUBE-NWPLCY-aaaaaaaaaaaa-IN-0', rule0],
        ['KUBE-NWPLCY-aaaaaaaaaaaa-IN-1', rule1],
      ]),
    ),
    [{ chain: 'KUBE-NWPLCY-aaaaaaaaaaaa-IN-0', handle: 7, packets: 3 }],
  );
});

test('countedRules: every rule of a policy selecting a local pod has a counting chain with its labels', () => {
  const s = state({
    pods: [
      pod('shop', 'db', { labels: { app: 'db' }, ips: ['10.0.0.1'] }),
      pod('shop', 'web', { labels: { app: 'web' }, ips: ['10.0.1.1'], node: 'node-2' }),
    ],
    policies: [
      policy('shop', 'db', {
        podSelector: sel({ app: 'db' }),
        ingress: [
          rule([podPeer(sel({ app: 'web' }))], [port('TCP', 80)]),
          rule([podPeer(sel({ app: 'web' }))], [port('TCP', 81)]),
        ],
      }),
      policy('shop', 'web', { podSelector: sel({ app: 'web' }), ingress: [rule(undefined, [port('TCP', 80)])] }),
    ],
  });
  const c = countedRules(compileNode(s, 'node-1'));
  assert.deepEqual(
    [...c.values()].sort((a, b) => a.rule.localeCompare(b.rule)),
    [rule0, rule1],
  );
});

test('sharedListing: calls while one runs get its answer; later calls list again', async () => {
  let calls = 0;
  let release: (v: string) => void = () => undefined;
  const list = sharedListing(() => {
    calls++;
    return new Promise<string>((ok) => (release = ok));
  }, 0);
  const a = list();
  const b = list();
  release('x');
  assert.deepEqual([await a, await b, calls], ['x', 'x', 1]);
  const c = list();
  release('y');
  assert.deepEqual([await c, calls], ['y', 2]);
});

test('/debug/rules: query checked; rules by hits, --unused only those never hit; the metric follows the kernel monotonically', async () => {
  assert.equal(typeof parseRulesQuery(new URLSearchParams('unused=maybe')), 'string');
  assert.equal(typeof parseRulesQuery(new URLSearchParams('limit=0')), 'string');
  assert.deepEqual(parseRulesQuery(new URLSearchParams('unused=1&namespace=shop')), {
    unused: true,
    namespace: 'shop',
    limit: undefined,
  });
  const metrics = createMetrics(undefined, { defaultMetrics: false });
  const s = state({
    pods: [
      pod('shop', 'db', { labels: { app: 'db' }, ips: ['10.0.0.1'] }),
      pod('shop', 'web', { labels: { app: 'web' }, ips: ['10.0.1.1'], node: 'node-2' }),
    ],
    policies: [
      policy('shop', 'db', {
        podSelector: sel({ app: 'db' }),
        ingress: [
          rule([podPeer(sel({ app: 'web' }))], [port('TCP', 80)]),
          rule([podPeer(sel({ app: 'web' }))], [port('TCP', 81)]),
        ],
      }),
    ],
  });
  const compiled = compileNode(s, 'node-1');
  const chains = [...countedRules(compiled).keys()].sort();
  let listing: { chain: string; handle: number; packets: number }[] = [];
  const json = (): string =>
    JSON.stringify({
      nftables: listing.map((l) => ({ rule: { chain: l.chain, handle: l.handle, expr: [{ counter: { packets: l.packets } }] } })),
    });
  let now = 1_000_000;
  const rc = new RuleCounters({
    list: () => Promise.resolve(json()),
    ruleset: () => compiled,
    metrics,
    log: pino({ level: 'silent' }),
    maxSeries: 10,
    intervalMs: 0,
    now: () => now,
  });
  const first = chains.find((c) => c.endsWith('-IN-0'))!;
  const second = chains.find((c) => c.endsWith('-IN-1'))!;
  listing = [
    { chain: first, handle: 1, packets: 4 },
    { chain: second, handle: 2, packets: 0 },
  ];
  const body = async (q: string): Promise<{ rules: { rule: string; hits: number; lastHit: string | null }[] }> => {
    const r = await rulesReply(rc, new URL(`http://x/debug/rules${q}`));
    assert.equal(r.status, 200);
    return r.body as { rules: { rule: string; hits: number; lastHit: string | null }[] };
  };
  assert.deepEqual(
    (await body('')).rules.map((r) => [r.rule, r.hits, r.lastHit]),
    [
      ['0', 4, new Date(now).toISOString()],
      ['1', 0, null],
    ],
  );
  assert.deepEqual(
    (await body('?unused=1')).rules.map((r) => r.rule),
    ['1'],
  );
  const sample = async (): Promise<number> =>
    (await metrics.policyRuleConnections.get()).values.find((v) => v.labels['rule'] === '0')?.value ?? -1;
  assert.equal(await sample(), 4);
  // A full reload: new handles, counters from 0, then 2 more connections. The series goes on from 4.
  listing = [
    { chain: first, handle: 11, packets: 2 },
    { chain: second, handle: 12, packets: 0 },
  ];
  now += 5000;
  await rc.refresh(true);
  assert.equal(await sample(), 6);
});

test('reads asked for by applies in a row wait for a pause and are one listing; stop() cancels a waiting one', async () => {
  let lists = 0;
  let release: (() => void) | undefined;
  const listed = new Promise<void>((r) => (release = r));
  const parts = {
    list: () => {
      lists++;
      release?.();
      return Promise.resolve(JSON.stringify({ nftables: [] }));
    },
    ruleset: () => compileNode(state({ pods: [], policies: [] }), 'node-1'),
    metrics: createMetrics(),
    log: pino({ level: 'silent' }),
    maxSeries: 10,
    intervalMs: 0,
    quietMs: 30,
  };
  const rc = new RuleCounters(parts);
  for (let i = 0; i < 5; i++) rc.refreshWhenQuiet();
  assert.equal(lists, 0, 'nothing is listed while applies follow each other');
  await listed;
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(lists, 1, 'five applies in a row, one listing after them');

  let stoppedLists = 0;
  const stopped = new RuleCounters({
    ...parts,
    list: () => {
      stoppedLists++;
      return Promise.resolve(undefined);
    },
  });
  stopped.refreshWhenQuiet();
  stopped.stop();
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(stoppedLists, 0, 'a stopped reader lists nothing');
});

test('rule names sort naturally (2 before 10) and the rest by code units, whatever the locale', () => {
  const names = ['10', '2', 'deny-b', 'allow-10', 'allow-9', 'Zeta', 'alpha', '1'];
  assert.deepEqual([...names].sort(byNatural), ['1', '2', '10', 'Zeta', 'allow-9', 'allow-10', 'alpha', 'deny-b']);
});
