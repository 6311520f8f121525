// The layering of src/ (docs/architecture.md "Layering"), checked on the
// import lines of every source file: a directory may import only the layers
// listed for it, src/ never imports tests or scripts, and no file reaches
// itself through its imports. A new directory must be placed in LAYERS (and
// in the docs) before anything can import it.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = join(ROOT, 'src');

/** Each layer of src/ and the layers it may import, lowest first. */
export const LAYERS: Readonly<Record<string, readonly string[]>> = {
  model: [],
  observability: [],
  ruleset: ['model'],
  kinds: ['model'],
  policy: ['model', 'kinds'],
  compile: ['model', 'ruleset', 'kinds'],
  nft: ['model', 'ruleset'],
  status: ['model', 'ruleset', 'kinds'],
  kube: ['model', 'observability', 'kinds', 'status'],
  agent: ['model', 'observability', 'ruleset', 'kinds', 'policy', 'compile', 'nft', 'kube', 'status'],
  cli: ['model', 'observability', 'ruleset', 'kinds', 'policy', 'compile', 'nft', 'kube', 'agent', 'status'],
};

export interface SourceFile {
  /** Path relative to src/, with '/' separators. */
  readonly path: string;
  readonly text: string;
}

export interface Violation {
  readonly file: string;
  readonly specifier: string;
  readonly why: string;
}

/** Module specifiers of one file: static imports, re-exports, `import()` and `import type`. */
export function importsOf(text: string): string[] {
  return ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName);
}

function layerOf(path: string): string {
  return path.includes('/') ? path.slice(0, path.indexOf('/')) : '';
}

/** Resolved path (relative to src/) of a relative specifier, or undefined for packages and node: builtins. */
function target(from: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  return relative(SRC, resolve(SRC, dirname(from), specifier))
    .split('\\')
    .join('/');
}

/** Every import that breaks the layering, and every import cycle. */
export function violations(files: readonly SourceFile[], layers: Readonly<Record<string, readonly string[]>>): Violation[] {
  const out: Violation[] = [];
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const own = layerOf(f.path);
    const allowed = layers[own];
    if (allowed === undefined) out.push({ file: f.path, specifier: '', why: `directory "${own}" has no layer` });
    const edges: string[] = [];
    for (const spec of importsOf(f.text)) {
      const to = target(f.path, spec);
      if (to === undefined) continue;
      if (to.startsWith('..')) {
        out.push({ file: f.path, specifier: spec, why: 'imports from outside src/' });
        continue;
      }
      edges.push(to);
      const theirs = layerOf(to);
      if (theirs !== own && allowed !== undefined && !allowed.includes(theirs)) {
        out.push({ file: f.path, specifier: spec, why: `${own} may not import ${theirs}` });
      }
    }
    graph.set(f.path, edges);
  }
  // Cycles: a depth-first walk; a back edge closes one.
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (n: string): void => {
    state.set(n, 'open');
    stack.push(n);
    for (const m of graph.get(n) ?? []) {
      const s = state.get(m);
      if (s === 'open') {
        const cycle = [...stack.slice(stack.indexOf(m)), m];
        out.push({ file: n, specifier: m, why: `import cycle ${cycle.join(' -> ')}` });
      } else if (s === undefined && graph.has(m)) visit(m);
    }
    stack.pop();
    state.set(n, 'done');
  };
  for (const n of [...graph.keys()].sort()) if (!state.has(n)) visit(n);
  return out;
}

function sourceFiles(dir: string): SourceFile[] {
  const out: SourceFile[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (e.name.endsWith('.ts')) out.push({ path: relative(SRC, p).split('\\').join('/'), text: readFileSync(p, 'utf8') });
  }
  return out.sort((a, b) => (a.path < b.path ? -1 : 1));
}

describe('layering of src/', () => {
  test('every import runs down the layers, and there is no import cycle', () => {
    const files = sourceFiles(SRC);
    assert.ok(files.length > 50, `found the sources (${files.length} files)`);
    assert.deepEqual(violations(files, LAYERS), []);
  });

  test('a forbidden import, an unplaced directory and a cycle are each reported', () => {
    const files: SourceFile[] = [
      { path: 'nft/render.ts', text: "import { compileNode } from '../compile/compile.ts';\n" },
      { path: 'compile/compile.ts', text: "import type { X } from '../ruleset/ir.ts';\nexport { y } from './a.ts';\n" },
      { path: 'compile/a.ts', text: "import {\n  z,\n} from './b.ts';\n" },
      { path: 'compile/b.ts', text: "const m = await import('./a.ts');\nimport 'node:fs';\n" },
      { path: 'model/x.ts', text: "import type { T } from '../../test/support/t.ts';\n" },
      { path: 'gadgets/g.ts', text: "import { execa } from 'execa';\n" },
    ];
    const found = violations(files, LAYERS).map((v) => `${v.file}: ${v.why}`);
    assert.deepEqual(found.sort(), [
      'compile/b.ts: import cycle compile/a.ts -> compile/b.ts -> compile/a.ts',
      'gadgets/g.ts: directory "gadgets" has no layer',
      'model/x.ts: imports from outside src/',
      'nft/render.ts: nft may not import compile',
    ]);
  });

  test('docs/architecture.md names every layer', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'architecture.md'), 'utf8');
    for (const layer of Object.keys(LAYERS)) assert.match(doc, new RegExp(`src/${layer}\\b`), `src/${layer} in the docs`);
  });
});
