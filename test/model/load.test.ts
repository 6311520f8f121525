import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, rm, writeFile, chmod, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadManifests, parseManifestText } from '../../src/model/load.ts';
import type { LoadError } from '../../src/model/load.ts';

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'netpol-load-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

function parse(text: string, source = 'f.yaml'): { objects: unknown[]; errors: LoadError[] } {
  const objects: unknown[] = [];
  const errors: LoadError[] = [];
  parseManifestText(text, source, objects, errors);
  return { objects, errors };
}

function names(objects: unknown[]): string[] {
  return objects.map((o) => {
    const meta = (o as { metadata?: { name?: string } }).metadata;
    return `${(o as { kind?: string }).kind}/${meta?.name}`;
  });
}

const POD_A = 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n';

test('manifest text parsing', () => {
  // Parser messages are the yaml library's: matched loosely, the position exactly.
  const cases: { name: string; text: string; objects: string[]; errors: { source: string; message: string | RegExp }[] }[] = [
    { name: 'single document', text: POD_A, objects: ['Pod/a'], errors: [] },
    {
      name: 'multi-document with empty and comment-only docs',
      text: `---\n${POD_A}---\n# nothing\n---\n${POD_A.replace('a\n', 'b\n')}---\n`,
      objects: ['Pod/a', 'Pod/b'],
      errors: [],
    },
    {
      name: 'JSON',
      text: '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop"}}',
      objects: ['Namespace/shop'],
      errors: [],
    },
    {
      name: 'kind: List flattened',
      text: JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [
          { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'x' } },
          { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n' } },
        ],
      }),
      objects: ['Pod/x', 'Node/n'],
      errors: [],
    },
    {
      name: 'typed list items without kind get it from the list',
      text: 'apiVersion: networking.k8s.io/v1\nkind: NetworkPolicyList\nitems:\n- metadata: {name: p1}\n- metadata: {name: p2}\n',
      objects: ['NetworkPolicy/p1', 'NetworkPolicy/p2'],
      errors: [],
    },
    {
      name: 'nested lists',
      text: JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [{ apiVersion: 'v1', kind: 'PodList', items: [{ metadata: { name: 'deep' } }] }],
      }),
      objects: ['Pod/deep'],
      errors: [],
    },
    {
      name: 'YAML syntax error has the line number (counted in the whole file)',
      text: `${POD_A}---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: b\n   bad: x\n`,
      objects: ['Pod/a'],
      errors: [{ source: 'f.yaml#2', message: /^not valid YAML or JSON: line 9, column 9: \S/ }],
    },
    {
      name: 'broken JSON',
      text: '{"apiVersion": "v1", "kind": "Pod",\n "metadata": {"name": "a"}',
      objects: [],
      errors: [{ source: 'f.yaml', message: /^not valid YAML or JSON: line 2, column 27: .*\}/ }],
    },
    {
      name: 'document is a list',
      text: '- a\n- b\n',
      objects: [],
      errors: [{ source: 'f.yaml', message: 'not a Kubernetes object: the document is a list' }],
    },
    {
      name: 'document is a string',
      text: 'hello world\n',
      objects: [],
      errors: [{ source: 'f.yaml', message: 'not a Kubernetes object: the document is "hello world"' }],
    },
    {
      name: 'missing apiVersion',
      text: 'kind: Pod\nmetadata: {name: a}\n',
      objects: [],
      errors: [{ source: 'f.yaml', message: 'not a Kubernetes object: apiVersion is not set' }],
    },
    {
      name: 'missing both',
      text: 'metadata: {name: a}\n',
      objects: [],
      errors: [{ source: 'f.yaml', message: 'not a Kubernetes object: apiVersion and kind are not set' }],
    },
    {
      name: 'missing name',
      text: 'apiVersion: v1\nkind: Pod\nmetadata: {namespace: x}\n',
      objects: [],
      errors: [{ source: 'f.yaml', message: 'Pod: metadata.name is not set' }],
    },
    {
      name: 'name not a string',
      text: 'apiVersion: v1\nkind: Pod\nmetadata: {name: [a]}\n',
      objects: [],
      errors: [{ source: 'f.yaml', message: 'Pod: metadata.name is not a string (a list)' }],
    },
    {
      name: 'bad list item',
      text: JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [{ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'x' } }, { kind: 'Pod' }],
      }),
      objects: ['Pod/x'],
      errors: [{ source: 'f.yaml', message: 'items[1]: not a Kubernetes object: apiVersion is not set' }],
    },
    { name: 'empty file', text: '', objects: [], errors: [] },
    {
      name: 'other kinds are loaded (buildState ignores them)',
      text: 'apiVersion: v1\nkind: Service\nmetadata: {name: s}\n',
      objects: ['Service/s'],
      errors: [],
    },
  ];
  for (const c of cases) {
    const r = parse(c.text);
    assert.deepEqual(names(r.objects), c.objects, c.name);
    assert.equal(r.errors.length, c.errors.length, c.name);
    c.errors.forEach((want, i) => {
      const got = r.errors[i];
      assert.equal(got?.source, want.source, c.name);
      if (typeof want.message === 'string') assert.equal(got?.message, want.message, c.name);
      else assert.match(got?.message ?? '', want.message, c.name);
    });
  }
});

test('a namespaced object without metadata.namespace is left as is (normalize defaults it)', () => {
  const r = parse(POD_A);
  assert.deepEqual(r.objects, [{ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'a' } }]);
});

test('files and directories: recursive, sorted, only manifest extensions', async () => {
  const d = join(dir, 'tree');
  await mkdir(join(d, 'b-sub', 'deeper'), { recursive: true });
  await mkdir(join(d, 'a-sub'), { recursive: true });
  const pod = (n: string): string => `apiVersion: v1\nkind: Pod\nmetadata: {name: ${n}}\n`;
  await writeFile(join(d, 'z.yaml'), pod('z'));
  await writeFile(join(d, 'm.json'), JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'm' } }));
  await writeFile(join(d, 'c.yml'), pod('c'));
  await writeFile(join(d, 'notes.txt'), 'not a manifest');
  await writeFile(join(d, 'README.md'), '# hi');
  await writeFile(join(d, 'a-sub', 'x.yaml'), pod('ax'));
  await writeFile(join(d, 'b-sub', 'deeper', 'y.YAML'), pod('by'));
  await writeFile(join(d, 'b-sub', 'a.yaml'), pod('ba'));
  const r = await loadManifests([d]);
  assert.deepEqual(r.errors, []);
  assert.deepEqual(names(r.objects), ['Pod/ax', 'Pod/ba', 'Pod/by', 'Pod/c', 'Pod/m', 'Pod/z']);

  // An explicitly named file is read whatever its extension; order of arguments is kept.
  const explicit = join(dir, 'explicit.txt');
  await writeFile(explicit, pod('explicit'));
  const r2 = await loadManifests([explicit, join(d, 'c.yml')]);
  assert.deepEqual(names(r2.objects), ['Pod/explicit', 'Pod/c']);
});

test('unreadable paths are errors, not exceptions', async () => {
  const missing = join(dir, 'nope.yaml');
  const empty = join(dir, 'empty-dir');
  await mkdir(empty);
  const r = await loadManifests([missing, empty]);
  assert.deepEqual(r.objects, []);
  assert.deepEqual(r.errors, [
    { source: missing, message: 'cannot read: no such file or directory' },
    { source: empty, message: 'no manifest files (*.yaml, *.yml, *.json) in directory' },
  ]);
});

test('unreadable file inside a directory and symlink loops', async (t) => {
  const d = join(dir, 'perm');
  await mkdir(d);
  await writeFile(join(d, 'ok.yaml'), POD_A);
  await symlink(d, join(d, 'loop'));
  const secret = join(d, 'secret.yaml');
  await writeFile(secret, POD_A);
  await chmod(secret, 0o000);
  const r = await loadManifests([d]);
  // The loop is entered at most once more: ok.yaml and secret.yaml are not read twice.
  if (process.getuid?.() === 0) {
    // root reads anything: only the loop matters here.
    t.diagnostic('running as root: permission check skipped');
    assert.deepEqual(r.errors, []);
    assert.deepEqual(names(r.objects), ['Pod/a', 'Pod/a']);
  } else {
    assert.deepEqual(r.errors, [{ source: secret, message: 'cannot read: permission denied' }]);
    assert.deepEqual(names(r.objects), ['Pod/a']);
  }
});

test('multi-document sources are numbered from 1', () => {
  const r = parse(`${POD_A}---\n- 1\n---\n${POD_A}`, 'x.yaml');
  assert.deepEqual(r.errors, [{ source: 'x.yaml#2', message: 'not a Kubernetes object: the document is a list' }]);
  assert.equal(r.objects.length, 2);
});
