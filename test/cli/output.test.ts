// What scripts and people read (issue #21, items 4 and 10): kinds the engine
// does not read are named on stderr, never skipped without a word; every
// command's JSON and YAML hold errors as {object, path, message}, also when
// the input cannot be read at all.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { main } from '../../src/cli/main.ts';
import { deniedCommand } from '../../src/cli/denied.ts';

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (s) => void (out += `${s}\n`), err: (s) => void (err += `${s}\n`) });
  return { code, out, err };
}

async function withFiles(files: Record<string, string>, fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'nftnp-out-'));
  try {
    for (const [name, body] of Object.entries(files)) await writeFile(join(dir, name), body);
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const SERVICE_AND_DEPLOYMENT = `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}}}
`;

test('objects of kinds the engine does not read are named on stderr, not skipped silently', async () => {
  await withFiles({ 'app.yaml': SERVICE_AND_DEPLOYMENT }, async (dir) => {
    const f = join(dir, 'app.yaml');
    const v = await run(['validate', '-f', f]);
    assert.equal(v.code, 0, v.err);
    assert.match(v.out, /^ok: 0 policies/);
    // Services are read (NamespaceNetworkPolicy peers name them); Deployments are not.
    assert.match(v.err, /^read: 1 Service$/m);
    assert.match(v.err, /^ignored: 1 Deployment \(kinds nft-netpol-agent does not read\)$/m);
    const j = JSON.parse((await run(['validate', '-f', f, '-o', 'json'])).out) as { read: unknown; ignored: unknown };
    assert.deepEqual(j.read, { Service: 1 });
    assert.deepEqual(j.ignored, { Deployment: 1 });
    for (const argv of [
      ['render', '--node', 'n', '-f', f],
      ['explain', '-f', f, '--from', '10.0.0.1', '--to', '10.0.0.2', '--port', '80'],
    ]) {
      const r = await run(argv);
      assert.equal(r.code, 0, r.err);
      assert.match(r.err, /^ignored: 1 Deployment /m, argv[0]);
    }
    // Nothing ignored: no line.
    assert.doesNotMatch((await run(['validate', '-f', 'examples/'])).err, /ignored/);
  });
});

const BAD_ENDPORT = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web, namespace: default}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - ports:
    - {port: 8080, endPort: 8000}
`;

interface ErrorsDoc {
  readonly errors: readonly unknown[];
}

/** The documents of the three offline commands for the same input, in json and in yaml. */
async function documents(f: string): Promise<{ argv: string; code: number; doc: ErrorsDoc }[]> {
  const out = [];
  for (const cmd of [
    ['validate', '-f', f],
    ['render', '--node', 'n', '-f', f],
    ['explain', '-f', f, '--from', '10.0.0.1', '--to', '10.0.0.2', '--port', '80'],
  ]) {
    for (const format of ['json', 'yaml']) {
      const r = await run([...cmd, '-o', format]);
      const doc = (format === 'json' ? JSON.parse(r.out) : parseYaml(r.out)) as ErrorsDoc;
      out.push({ argv: [...cmd, '-o', format].join(' '), code: r.code, doc });
    }
  }
  return out;
}

test('an invalid field is the same {object, path, message} in every command, in json and yaml', async () => {
  await withFiles({ 'p.yaml': BAD_ENDPORT }, async (dir) => {
    const expected = [
      { object: 'NetworkPolicy default/web', path: 'spec.ingress[0].ports[0].endPort', message: 'must be >= port (8080)' },
    ];
    for (const d of await documents(join(dir, 'p.yaml'))) {
      assert.equal(d.code, 1, d.argv);
      assert.deepEqual(d.doc.errors, expected, d.argv);
    }
  });
});

test('a YAML syntax error is a document with its position, not an empty stdout', async () => {
  await withFiles({ 'bad.yaml': 'kind: NetworkPolicy\nspec: [unclosed\n' }, async (dir) => {
    const f = join(dir, 'bad.yaml');
    for (const d of await documents(f)) {
      assert.equal(d.code, 1, d.argv);
      assert.equal(d.doc.errors.length, 1, d.argv);
      const [e] = d.doc.errors as { object: string; path: string; message: string }[];
      assert.equal(e?.object, f, d.argv);
      assert.match(e?.path ?? '', /^line \d+, column \d+$/, d.argv);
      assert.match(e?.message ?? '', /^not valid YAML or JSON: /, d.argv);
    }
    const render = JSON.parse((await run(['render', '--node', 'n', '-f', f, '-o', 'json'])).out) as Record<string, unknown>;
    assert.equal(render['ruleset'], null, 'nothing rendered from unreadable input');
  });
});

test('explain: an endpoint that is not found is an error object under -o json', async () => {
  const r = await run(['explain', '-f', 'examples/', '--from', 'nope/x', '--to', '10.0.0.1', '--port', '80', '-o', 'json']);
  assert.equal(r.code, 1);
  assert.deepEqual(JSON.parse(r.out), {
    allowed: null,
    errors: [{ object: '--from', path: '', message: 'pod nope/x not found (no namespace nope)' }],
  });
});

test('explain and render answer in yaml what they answer in json', async () => {
  for (const cmd of [
    ['explain', '-f', 'examples/', '--from', 'shop/cart-5c8b7', '--to', 'payments/api-0', '--port', '8443'],
    ['render', '--node', 'node-1', '-f', 'examples/'],
  ]) {
    const j = await run([...cmd, '-o', 'json']);
    const y = await run([...cmd, '-o', 'yaml']);
    assert.equal(y.code, j.code);
    assert.deepEqual(parseYaml(y.out), JSON.parse(j.out), cmd[0]);
  }
});

test('denied: -o yaml, and an unreachable agent is an error document under -o json/yaml', async () => {
  for (const format of ['json', 'yaml']) {
    let out = '';
    const code = await deniedCommand(['--addr', '127.0.0.1:1', '-o', format], { out: (s) => (out += s), err: () => {} });
    assert.equal(code, 1);
    const doc = (format === 'json' ? JSON.parse(out) : parseYaml(out)) as {
      errors: { object: string; path: string; message: string }[];
    };
    assert.equal(doc.errors.length, 1);
    assert.equal(doc.errors[0]?.object, 'http://127.0.0.1:1/debug/denied');
    assert.match(doc.errors[0]?.message ?? '', /cannot reach the agent/);
  }
});
