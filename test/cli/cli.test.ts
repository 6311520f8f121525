import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../src/cli/main.ts';

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (s) => void (out += `${s}\n`), err: (s) => void (err += `${s}\n`) });
  return { code, out, err };
}

async function withFile(name: string, body: string, fn: (path: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'nftnp-cli-'));
  try {
    const p = join(dir, name);
    await writeFile(p, body);
    await fn(p);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const POLICY_WITH_BAD_ENDPORT = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web, namespace: default}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - ports:
    - {port: 80}
    - {port: 8080, endPort: 8000}
`;

test('usage errors exit 2 with a hint, help exits 0', async () => {
  const cases: [string[], number, RegExp][] = [
    [['frobnicate'], 2, /unknown command "frobnicate"/],
    [['render', '-f', 'examples/'], 2, /--node is required/],
    [['render', '--node', 'n', '-f', 'examples/', '--bogus'], 2, /bogus/],
    [['render', '--node', 'n', '-f', 'examples/', '-o', 'xml'], 2, /--output must be text, json or yaml/],
    [['render', '--node', 'n', '-f', 'examples/', '--deny-action', 'maybe'], 2, /--deny-action/],
    [['render', '--node', 'n', '-f', 'examples/', '--table', 'bad name;'], 2, /--table/],
    [['render', '--node', 'n', '-f', 'examples/', '--unknown-local-endpoints', 'maybe'], 2, /--unknown-local-endpoints/],
    [['validate'], 2, /-f\/--filename is required/],
    [['explain', '-f', 'examples/', '--from', 'a/b'], 2, /--from, --to and --port are required/],
    [['explain', '-f', 'examples/', '--from', 'a/b', '--to', 'c/d', '--port', '80/ICMP'], 2, /--port/],
  ];
  for (const [argv, code, re] of cases) {
    const r = await run(argv);
    assert.equal(r.code, code, argv.join(' '));
    assert.match(r.err, re, argv.join(' '));
  }
  for (const argv of [['--help'], ['render', '--help'], ['explain', '-h'], ['validate', '--help'], []]) {
    const r = await run(argv);
    assert.equal(r.code, 0, argv.join(' '));
    assert.match(r.out, /Usage:/);
  }
});

test('render of the bundled example is valid, deterministic and exits 0', async () => {
  const a = await run(['render', '--node', 'node-1', '-f', 'examples/']);
  assert.equal(a.code, 0, a.err);
  assert.match(a.out, /^table inet nft-netpol/m);
  assert.match(a.out, /KUBE-POD-FW-/);
  const b = await run(['render', '--node', 'node-1', '-f', 'examples/']);
  assert.equal(a.out, b.out);
  const j = await run(['render', '--node', 'node-1', '-f', 'examples/', '-o', 'json']);
  const parsed = JSON.parse(j.out) as { stats: { chains: number }; ruleset: string };
  assert.ok(parsed.stats.chains > 0);
  assert.equal(parsed.ruleset.trim(), a.out.trim());
});

test('garbage input: clear error, exit 1, no stack trace', async () => {
  await withFile('bad.yaml', 'kind: [unclosed\n  : : :\n', async (p) => {
    for (const cmd of [
      ['validate', '-f', p],
      ['render', '--node', 'n', '-f', p],
    ]) {
      const r = await run(cmd);
      assert.equal(r.code, 1);
      assert.match(r.err + r.out, /bad\.yaml/);
      assert.doesNotMatch(r.err + r.out, /\n\s+at .*\(.*:\d+:\d+\)/);
    }
  });
  const missing = await run(['validate', '-f', '/nonexistent/dir/x.yaml']);
  assert.equal(missing.code, 1);
  assert.match(missing.err + missing.out, /nonexistent/);
});

test('validate names object and field path; render still fails closed with exit 1', async () => {
  await withFile('p.yaml', POLICY_WITH_BAD_ENDPORT, async (p) => {
    const v = await run(['validate', '-f', p]);
    assert.equal(v.code, 1);
    assert.match(v.out, /^default\/web spec\.ingress\[0\]\.ports\[1\]\.endPort: must be >= port \(8080\)$/m);
    const vj = await run(['validate', '-f', p, '-o', 'json']);
    const parsed = JSON.parse(vj.out) as { valid: boolean; errors: { path: string }[] };
    assert.equal(parsed.valid, false);
    assert.equal(parsed.errors[0]?.path, 'spec.ingress[0].ports[1].endPort');
    const r = await run(['render', '--node', 'n', '-f', p]);
    assert.equal(r.code, 1);
    assert.match(r.err, /endPort/);
    assert.match(r.out, /^table inet nft-netpol/m);
  });
});

test('explain answers in words and in JSON', async () => {
  const t = await run(['explain', '-f', 'examples/', '--from', '10.255.255.1', '--to', '10.255.255.2', '--port', '80']);
  assert.equal(t.code, 0, t.err);
  assert.match(t.out, /ALLOWED/);
  const j = await run([
    'explain',
    '-f',
    'examples/',
    '--from',
    '10.255.255.1',
    '--to',
    '10.255.255.2',
    '--port',
    '53/udp',
    '-o',
    'json',
  ]);
  const parsed = JSON.parse(j.out) as { allowed: boolean; egress: unknown; ingress: unknown };
  assert.equal(parsed.allowed, true);
  assert.ok(parsed.egress !== undefined && parsed.ingress !== undefined);
  const bad = await run(['explain', '-f', 'examples/', '--from', 'nope/nothing', '--to', '10.0.0.1', '--port', '80']);
  assert.equal(bad.code, 1);
  assert.match(bad.err, /--from/);
});

const MISSPELLED = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db, namespace: default}
spec:
  podselector: {matchLabels: {app: db}}
  ingres:
  - from: [{podSelector: {matchLabels: {app: web}}}]
`;

test('--strict (default): misspelled fields are errors with their path, as kubectl apply rejects them', async () => {
  await withFile('typo.yaml', MISSPELLED, async (p) => {
    const r = await run(['validate', '-f', p]);
    assert.equal(r.code, 1);
    assert.equal(
      r.out,
      'default/db spec.podselector: unknown field "spec.podselector"\ndefault/db spec.ingres: unknown field "spec.ingres"\n',
    );
    const j = await run(['validate', '-f', p, '--strict', '-o', 'json']);
    assert.equal(j.code, 1);
    const parsed = JSON.parse(j.out) as { valid: boolean; errors: { path: string; message: string }[]; warnings: unknown[] };
    assert.equal(parsed.valid, false);
    assert.deepEqual(
      parsed.errors.map((e) => e.path),
      ['spec.podselector', 'spec.ingres'],
    );
    assert.deepEqual(parsed.warnings, []);
    const rendered = await run(['render', '--node', 'node-1', '-f', p]);
    assert.equal(rendered.code, 1);
    assert.match(rendered.err, /invalid: default\/db spec\.podselector: unknown field "spec\.podselector"/);
    const explained = await run(['explain', '-f', p, '--from', '10.0.0.1', '--to', '10.0.0.2', '--port', '80']);
    assert.equal(explained.code, 1);
    assert.match(explained.err, /unknown field "spec\.ingres"/);
  });
});

test('--strict=false: unknown fields are warnings (stderr and -o json), exit 0', async () => {
  await withFile('typo.yaml', MISSPELLED, async (p) => {
    const r = await run(['validate', '-f', p, '--strict=false']);
    assert.equal(r.code, 0);
    assert.match(r.out, /^ok: 1 policies/);
    assert.match(r.err, /^warning: default\/db spec\.podselector: unknown field "spec\.podselector"$/m);
    const j = await run(['validate', '-f', p, '--strict=false', '-o', 'json']);
    assert.equal(j.code, 0);
    const parsed = JSON.parse(j.out) as { valid: boolean; warnings: { object: string; path: string; message: string }[] };
    assert.equal(parsed.valid, true);
    assert.deepEqual(parsed.warnings[1], {
      object: 'NetworkPolicy default/db',
      path: 'spec.ingres',
      message: 'unknown field "spec.ingres"',
    });
    const rendered = await run(['render', '--node', 'node-1', '-f', p, '--strict=false', '-o', 'json']);
    assert.equal(rendered.code, 0);
    assert.deepEqual((JSON.parse(rendered.out) as { warnings: unknown[] }).warnings, [
      { object: 'NetworkPolicy default/db', path: 'spec.podselector', message: 'unknown field "spec.podselector"' },
      { object: 'NetworkPolicy default/db', path: 'spec.ingres', message: 'unknown field "spec.ingres"' },
    ]);
    const bad = await run(['validate', '-f', p, '--strict=maybe']);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--strict must be true or false/);
  });
});

test('validate, render and explain read ClusterNetworkPolicies: errors as for NetworkPolicies, fail-closed render', async () => {
  const ok = await run(['validate', '-f', 'examples/']);
  assert.equal(ok.code, 0, ok.out);
  assert.match(ok.out, /^ok: 14 policies, 2 cluster network policies, \d+ pods/m);
  const bad = 'examples-invalid/bad-cluster-network-policies.yaml';
  const v = await run(['validate', '-f', bad]);
  assert.equal(v.code, 1);
  assert.match(
    v.out,
    /^bad-guardrails spec\.priority: Invalid value: 2000: spec\.priority in body should be less than or equal to 1000$/m,
  );
  assert.match(
    v.out,
    /^bad-guardrails spec\.egress\[0\]\.to\[0\]\.networks\[0\]: Invalid value: "string": Invalid CIDR format provided$/m,
  );
  const vj = await run(['validate', '-f', bad, '-o', 'json']);
  const parsed = JSON.parse(vj.out) as { valid: boolean; errors: { object: string; path: string }[] };
  assert.equal(parsed.valid, false);
  assert.deepEqual(parsed.errors[0], {
    object: 'ClusterNetworkPolicy bad-guardrails',
    path: 'spec.priority',
    message: 'Invalid value: 2000: spec.priority in body should be less than or equal to 1000',
  });
  const r = await run(['render', '--node', 'node-1', '-f', 'examples/', '-f', bad]);
  assert.equal(r.code, 1);
  assert.match(r.err, /^invalid: bad-guardrails spec\.priority: /m);
  assert.match(r.out, /^table inet nft-netpol/m);
  const e = await run([
    'explain',
    '-f',
    'examples/',
    '-f',
    bad,
    '--from',
    'shop/cart-5c8b7',
    '--to',
    'payments/api-0',
    '--port',
    '8443/tcp',
  ]);
  assert.equal(e.code, 1);
  assert.match(e.err, /^invalid: bad-guardrails spec\.ingress\[0\]\.action: Unsupported value: "Allow"/m);
});

test('--allow-pod-to-node: explain judges egress to the pod’s own node as the ruleset render --allow-pod-to-node does', async () => {
  const ask = ['explain', '-f', 'examples/', '--from', 'shop/cart-5c8b7', '--to', '192.168.56.11', '--port', '10250'];
  const off = await run(ask);
  assert.equal(off.code, 0, off.err);
  assert.match(off.out, /^DENIED: .*\(192\.168\.56\.11\)/m);
  const on = await run([...ask, '--allow-pod-to-node']);
  assert.equal(on.code, 0, on.err);
  assert.match(on.out, /^ALLOWED: /m);
  assert.match(on.out, /address of shop\/cart-5c8b7's node node-1: .*--allow-pod-to-node/);
  // Another node's address stays denied.
  const other = await run([...ask.slice(0, 6), '192.168.56.12', '--port', '10250', '--allow-pod-to-node']);
  assert.match(other.out, /^DENIED: /m);

  const rule = 'fib daddr type local accept comment "pod to its own node (--allow-pod-to-node)"';
  const plain = await run(['render', '--node', 'node-1', '-f', 'examples/']);
  assert.ok(!plain.out.includes(rule));
  const r = await run(['render', '--node', 'node-1', '-f', 'examples/', '--allow-pod-to-node']);
  assert.equal(r.code, 0, r.err);
  // In input-egress, before the dispatch.
  const input = r.out.slice(r.out.indexOf('chain input-egress {'));
  assert.ok(input.includes(`${rule}\n\t\tip saddr vmap @egress-v4`), input);
  assert.equal(r.out.split(rule).length, 2, 'once');
});

test('--strict checks List wrappers read from files, and the items in them', async () => {
  const list = `
apiVersion: v1
kind: List
metdata: {}
items:
- apiVersion: networking.k8s.io/v1
  kind: NetworkPolicy
  metadata: {name: db, namespace: default}
  spec: {podSelector: {}, policyType: [Egress]}
`;
  await withFile('list.yaml', list, async (p) => {
    const r = await run(['validate', '-f', p]);
    assert.equal(r.code, 1);
    assert.equal(
      r.out,
      '<unnamed> metdata: unknown field "metdata"\ndefault/db spec.policyType: unknown field "spec.policyType"\n',
    );
  });
});

test('staged policies: explain --staged says what would change and why; validate names them; render leaves them out', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'nnp-staged-'));
  try {
    const p = join(dir, 'c.yaml');
    await writeFile(
      p,
      [
        'apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {kubernetes.io/metadata.name: shop}}',
        'apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: shop, labels: {app: web}}\nspec: {nodeName: node-1, containers: [{name: c, image: x}]}\nstatus: {phase: Running, podIP: 10.0.0.2, podIPs: [{ip: 10.0.0.2}]}',
        'apiVersion: v1\nkind: Pod\nmetadata: {name: db, namespace: shop, labels: {app: db}}\nspec: {nodeName: node-1, containers: [{name: c, image: x}]}\nstatus: {phase: Running, podIP: 10.0.0.3, podIPs: [{ip: 10.0.0.3}]}',
        'apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: db-only-api, namespace: shop, annotations: {nft-netpol.io/staged: "true"}}\nspec:\n  podSelector: {matchLabels: {app: db}}\n  ingress: [{from: [{podSelector: {matchLabels: {app: api}}}]}]',
      ].join('\n---\n'),
    );
    const t = await run(['explain', '--staged', '-f', p, '--from', 'shop/web', '--to', 'shop/db', '--port', '5432']);
    assert.equal(t.code, 0, t.err);
    assert.match(t.out, /^ALLOWED: shop\/web/);
    assert.match(
      t.out,
      /with staged policies: DENIED \(enforced: ALLOWED\)\n {2}ingress at the destination: would deny by shop\/db-only-api/,
    );
    const j = await run([
      'explain',
      '--staged',
      '-o',
      'json',
      '-f',
      p,
      '--from',
      'shop/web',
      '--to',
      'shop/db',
      '--port',
      '5432',
    ]);
    const parsed = JSON.parse(j.out) as {
      allowed: boolean;
      staged: { allowed: boolean; policies: string[]; changes: { change: string }[] };
    };
    assert.equal(parsed.allowed, true);
    assert.deepEqual(parsed.staged.policies, ['shop/db-only-api']);
    assert.equal(parsed.staged.allowed, false);
    assert.deepEqual(
      parsed.staged.changes.map((c) => c.change),
      ['would-deny'],
    );
    // Without --staged: the enforced answer only.
    const plain = await run(['explain', '-f', p, '--from', 'shop/web', '--to', 'shop/db', '--port', '5432']);
    assert.doesNotMatch(plain.out, /staged/);
    const v = await run(['validate', '-f', p]);
    assert.equal(v.code, 0);
    assert.match(v.out, /\(1 staged, not enforced\)/);
    assert.match(v.err, /staged: NetworkPolicy shop\/db-only-api \(annotated nft-netpol\.io\/staged: "true"; not enforced\)/);
    const r = await run(['render', '--node', 'node-1', '-f', p]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /chain staged-forward-ingress/);
    assert.doesNotMatch(r.out, /chain KUBE-POD-FW-[0-9a-f]+-IN \{/, 'db is not isolated: the policy is staged');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
