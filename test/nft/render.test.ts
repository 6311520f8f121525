// The nft script: atomic table replacement, deny actions, fail-closed invalid
// rules, comments that hostile names cannot break, identifiers that never
// carry Kubernetes names, options.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileNode, compileRules } from '../../src/compile/compile.ts';
import { decisionElementText, renderCleanup, renderRuleset, rulesetPieces } from '../../src/nft/render.ts';
import { withClusterPolicies } from '../../scripts/bench-render.ts';
import { generateCluster } from '../../scripts/gen-cluster.ts';
import { renderNode } from '../support/render-node.ts';
import { policyId, policyRuleChainName, sanitizeComment } from '../../src/ruleset/ids.ts';
import type { ClusterState } from '../../src/model/types.ts';
import { ipBlock, pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';
import { podChain, policyChain, rules } from '../compile/ir-query.ts';
import { assertNftAccepts, haveNft, renderLog } from './nft-support.ts';
import { addressText, elementTexts } from '../../src/nft/elements.ts';

const log = renderLog();

const basic: ClusterState = state({
  pods: [
    pod('a', 'web', { labels: { app: 'web' }, ips: ['10.0.0.1', 'fd00::1'] }),
    pod('a', 'c', { labels: { app: 'c' }, ips: ['10.0.1.1'], node: 'node-2' }),
  ],
  policies: [
    policy('a', 'web', {
      podSelector: sel({ app: 'web' }),
      ingress: [rule([podPeer(sel({ app: 'c' }))], [port('TCP', 80)])],
      egress: [rule([ipBlock('10.0.0.0/8')])],
    }),
  ],
});

test('script: declare, delete and define the table in one file; nothing else', () => {
  const { text } = renderNode(basic, 'node-1');
  log.add('basic', text);
  const lines = text.split('\n');
  assert.deepEqual(lines.slice(1, 4), ['table inet nft-netpol {}', 'delete table inet nft-netpol', 'table inet nft-netpol {']);
  assert.match(lines[4] ?? '', /^\tcomment "managed by nft-netpol-agent, .*node node-1"$/);
  // Exactly one top-level table definition and no other top-level statement.
  const topLevel = lines.filter((l) => l !== '' && !l.startsWith('\t') && !l.startsWith('#') && l !== '}');
  assert.deepEqual(topLevel, ['table inet nft-netpol {}', 'delete table inet nft-netpol', 'table inet nft-netpol {']);
  assert.ok(text.endsWith('}\n'));
  assert.doesNotMatch(text, /flush ruleset|\bip filter\b|\btable ip /);
});

test('objects are declared before they are referenced', () => {
  const { text } = renderNode(basic, 'node-1');
  const at = (re: RegExp): number => {
    const i = text.search(re);
    assert.ok(i >= 0, String(re));
    return i;
  };
  assert.ok(at(/\tchain KUBE-NWPLCY-[0-9a-f]{12}-IN-0 /) < at(/\tmap allow4-/));
  assert.ok(at(/\tmap allow4-/) < at(/\tchain KUBE-PEERS-/));
  assert.ok(at(/\tchain KUBE-PEERS-/) < at(/\tmap ingress-peers-v4/));
  assert.ok(at(/\tmap ingress-ranges-v6/) < at(/\tchain ingress-peers /));
  assert.ok(at(/\tchain egress-peers /) < at(/\tchain KUBE-POD-FW-/));
  assert.ok(at(/\tchain KUBE-POD-FW-/) < at(/\tmap ingress-v4/));
  assert.ok(at(/\tmap ingress-v6/) < at(/\tchain forward-egress/));
});

test('allow maps: single ports and ranges of up to 16 ports in a hash map, longer ranges in an interval map, each to its rule', async (t) => {
  const s = state({
    pods: [
      pod('a', 'web', { labels: { app: 'web' }, ips: ['10.0.0.1'] }),
      pod('a', 'c', { labels: { app: 'c' }, ips: ['10.0.1.1'], node: 'node-2' }),
    ],
    policies: [
      policy('a', 'web', {
        podSelector: sel({ app: 'web' }),
        ingress: [
          rule(
            [podPeer(sel({ app: 'c' }))],
            [port('TCP', 80), port('TCP', 81), port('TCP', 8080, 8095), port('UDP', 9000, 9016)],
          ),
        ],
      }),
    ],
  });
  const { text } = renderNode(s, 'node-1');
  log.add('allow set kinds', text);
  const block = (re: RegExp): string => {
    const m = new RegExp(`\\tmap ${re.source} \\{\\n([\\s\\S]*?)\\n\\t\\}`).exec(text);
    assert.ok(m, String(re));
    return m[1] ?? '';
  };
  const single = block(/allow4-[0-9a-f]{12}/);
  assert.doesNotMatch(single, /flags interval/);
  const singlePorts = [...single.matchAll(/10\.0\.0\.1 \. tcp \. (\d+)\b/g)].map((m) => Number(m[1]));
  assert.deepEqual(singlePorts, [80, 81, ...Array.from({ length: 16 }, (_, i) => 8080 + i)]);
  const ranges = block(/allowrange4-[0-9a-f]{12}/);
  assert.match(ranges, /flags interval/);
  assert.match(
    ranges,
    /elements = \{ 10\.0\.0\.1 \. udp \. 9000-9016 comment "a\/web ingress\[0\]" : goto KUBE-NWPLCY-[0-9a-f]{12}-IN-0 \}/,
  );
  assert.match(
    text,
    /ip daddr \. meta l4proto \. th dport vmap @allow4-[0-9a-f]{12}\n\t\tip daddr \. meta l4proto \. th dport vmap @allowrange4-/,
  );
  if (await haveNft(t)) await assertNftAccepts(text, 'allow set kinds');
});

test('table option renames everything that names the table', () => {
  const { text } = renderNode(basic, 'node-1', { table: 'np_test-2' });
  log.add('table option', text);
  assert.match(text, /^table inet np_test-2 \{\}$/m);
  assert.match(text, /^delete table inet np_test-2$/m);
  assert.doesNotMatch(text, /nft-netpol \{/);
  for (const bad of ['', 'has space', 'semi;colon', 'x'.repeat(64), '9starts-with-digit', 'quo"te']) {
    assert.throws(() => renderNode(basic, 'node-1', { table: bad }), /invalid nft table name/, bad);
    assert.throws(() => renderCleanup(bad), /invalid nft table name/, bad);
  }
});

test('deny: drop by default; reject = tcp reset, then icmpx port-unreachable', () => {
  const drop = compileNode(basic, 'node-1');
  const reject = compileNode(basic, 'node-1', { denyAction: 'reject' });
  log.add('drop', renderRuleset(drop));
  log.add('reject', renderRuleset(reject));
  assert.deepEqual(rules(podChain(drop, 'a', 'web', 'ingress')!).slice(-1), ['counter drop comment "deny ingress to a/web"']);
  assert.deepEqual(rules(podChain(reject, 'a', 'web', 'egress')!).slice(-2), [
    'meta l4proto tcp counter reject with tcp reset comment "deny egress from a/web"',
    'counter reject with icmpx type port-unreachable comment "deny egress from a/web"',
  ]);
  // The deny is always last: nothing after it could ever run.
  for (const c of [drop, reject])
    for (const ch of c.chains.filter((x) => x.role === 'pod')) assert.notEqual(ch.rules.at(-1)?.verdict.kind, 'jump');
});

test('invalid rules render nothing (fail closed) but leave a trace in the chain comment', () => {
  const s = state({
    pods: [...basic.pods],
    policies: [
      policy('a', 'web', {
        podSelector: sel({ app: 'web' }),
        ingress: [
          rule([ipBlock('10.0.0.0/8')], [port('TCP', 80)], true),
          rule([ipBlock('192.168.0.0/16')], [port('TCP', 443)]),
          rule(undefined, undefined, true),
        ],
      }),
      policy('a', 'all-invalid', { podSelector: sel({ app: 'web' }), ingress: [rule(undefined, undefined, true)] }),
    ],
  });
  const c = compileRules(s, 'node-1');
  const flat = compileNode(s, 'node-1');
  log.add('invalid', renderRuleset(flat));
  const ch = policyChain(c, 'a', 'web', 'ingress')!;
  assert.equal(ch.rules.length, 1);
  assert.deepEqual(
    ch.rules.map((r) => r.comment),
    ['ingress[1]'],
  );
  assert.equal(ch.comment, 'ingress policy (invalid ingress[0],ingress[2] allow nothing) a/web');
  const none = policyChain(c, 'a', 'all-invalid', 'ingress')!;
  assert.deepEqual(none.rules, []);
  // Still isolating: the pod chain jumps to it and then denies.
  assert.equal(podChain(c, 'a', 'web', 'ingress')!.rules.length, 3);
  // Nothing of the invalid rules' addresses or ports made it into a set.
  const all = c.sets.flatMap(elementTexts);
  assert.ok(!all.includes('10.0.0.0/8') && !all.includes('tcp . 80'), all.join(' '));
  // Nor into the rendered form: the one valid rule is the only allow element.
  const allowed = flat.decisions.flatMap((m) => m.elements.map(decisionElementText));
  assert.deepEqual(allowed, [
    `10.0.0.1 . tcp . 443 comment "a/web ingress[1]" : goto ${policyRuleChainName(policyId('a', 'web'), 'ingress', 1)}`,
  ]);
  assert.deepEqual(
    flat.maps.find((m) => m.name === 'ingress-ranges-v4')?.elements.map((e) => addressText(e.key)),
    ['192.168.0.0/16'],
  );
});

test('comments: hostile names are sanitized and capped; identifiers are hashes', () => {
  const evil = 'a"b\\c{}';
  const node = 'node"1\n}';
  const s = state({
    pods: [
      pod(evil, `p"; flush ruleset; #`, { labels: { app: 'x' }, ips: ['10.0.0.1'], node }),
      pod(evil, 'peer\nx', { labels: { app: 'y' }, ips: ['10.0.0.2'], node: 'node-2' }),
    ],
    policies: [policy(evil, `${'n'.repeat(300)}"}`, { ingress: [rule([podPeer(sel({ app: 'y' }))], [port('TCP', 1)])] })],
  });
  const c = compileNode(s, node);
  const text = log.add('hostile', renderRuleset(c));
  const comments = [...text.matchAll(/comment "([^"\n]*)"/g)].map((m) => m[1] ?? '');
  assert.ok(comments.length > 5);
  for (const cm of comments) {
    assert.match(cm, /^[A-Za-z0-9 ._/:=,+@()[\]-]*$/, cm);
    assert.ok(cm.length <= 120, `${cm.length}`);
  }
  assert.ok(
    comments.some((cm) => cm.startsWith('deny ingress to a_b_c__/p__ flush ruleset_ _')),
    comments.join('\n'),
  );
  // Every quote in the script opens or closes a comment: none leaked from names.
  const quotes = text.split('"').length - 1;
  assert.equal(quotes, 2 * comments.length);
  assert.doesNotMatch(text, /^\s*flush/m);
  // Names in identifiers are hashes, never Kubernetes names.
  for (const ch of c.chains)
    assert.match(
      ch.name,
      /^(KUBE-(POD-FW|PEERS)-[0-9a-f]{12}-(IN|EG)|KUBE-NWPLCY-[0-9a-f]{12}-(IN|EG)-[0-9]+|forward-egress|forward-ingress|input-egress|ingress-peers|egress-peers|(ingress|egress)-recent-v[46])$/,
    );
  for (const m of [...c.sets, ...c.decisions])
    assert.match(
      m.name,
      /^(allow(all|range)?[46]-[0-9a-f]{12}|(ingress|egress)-peers-v[46]-(recent|r-KUBE-PEERS-[0-9a-f]{12}-(IN|EG)))$/,
    );
  for (const st of compileRules(s, node).sets) assert.match(st.name, /^(peer4|peer6|port|named4|named6)-[0-9a-f]{12}$/);
  assert.equal(sanitizeComment('x'.repeat(500)).length, 120);
  assert.equal(sanitizeComment('ok a/b ingress[0]'), 'ok a/b ingress[0]');
});

test('rulesetPieces: joined, the pieces are the script, in every tier layout (the status hashes them in slices)', () => {
  const g = generateCluster({ pods: 600, policies: 60, namespaces: 12, podsPerNode: 50, seed: 7 });
  const st = withClusterPolicies(g.state, 'narrow');
  let checked = 0;
  for (const tierLayout of ['shared', 'per-class', 'auto'] as const)
    for (const node of [...new Set(st.pods.map((p) => p.nodeName))].slice(0, 3)) {
      if (node === undefined) continue;
      const c = compileNode(st, node, { tierLayout });
      const pieces = [...rulesetPieces(c)];
      assert.ok(pieces.length > 20, `${node}: ${pieces.length} pieces`);
      assert.equal(pieces.join(''), renderRuleset(c), `${tierLayout} ${node}`);
      checked++;
    }
  assert.equal(checked, 9);
});

test('renderCleanup removes our table and only it; applying it twice is fine', async (t) => {
  const script = renderCleanup('nft-netpol');
  assert.equal(script, 'table inet nft-netpol {}\ndelete table inet nft-netpol\n');
  if (!(await haveNft(t))) return;
  await assertNftAccepts(script, 'cleanup');
});

log.registerCheck();
