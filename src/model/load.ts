// Reading manifests the way `kubectl apply -f` takes them: files, directories
// (*.yaml, *.yml, *.json, recursively, in sorted order), `-` for stdin,
// multi-document YAML, JSON, and List kinds (flattened). Only structure is
// checked here (parseable, an object, apiVersion/kind/metadata.name present),
// because only here is the file and line known; field validation is
// normalize's job.
import { readdir, readFile, realpath, stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { field, isRecord, show } from './normalize-common.ts';
import { isListObject, listItems } from './normalize-list.ts';
import { FALLBACK, parseSubset, splitDocuments } from './yaml-subset.ts';
import { yaml } from './yaml-lib.ts';

export interface LoadError {
  /** "path/file.yaml", "path/file.yaml#3" (1-based document number in a multi-document file) or "<stdin>". */
  readonly source: string;
  readonly message: string;
}

const MANIFEST_EXTENSIONS = new Set(['.yaml', '.yml', '.json']);

/**
 * Where parsed objects go: an array, or a consumer that need not keep them
 * (normalize.ts's stateBuilder). Lists arrive as their items; `list`, when
 * present, sees each list wrapper first (its own fields, for strict checks).
 */
export interface ObjectSink {
  push(value: unknown): unknown;
  list?(wrapper: unknown): void;
}

export async function loadManifests(paths: readonly string[]): Promise<{ objects: unknown[]; errors: LoadError[] }> {
  const objects: unknown[] = [];
  const errors = await readManifests(paths, objects);
  return { objects, errors };
}

/** loadManifests into a sink: a big file's raw objects need not pile up. */
export async function readManifests(paths: readonly string[], objects: ObjectSink): Promise<LoadError[]> {
  const errors: LoadError[] = [];
  for (const p of paths) {
    if (p === '-') {
      const text = await readStdin();
      parseManifestText(text, '<stdin>', objects, errors);
      continue;
    }
    const files = await expandPath(p, errors);
    for (const f of files) {
      let text: string;
      try {
        text = await readFile(f, 'utf8');
      } catch (e) {
        errors.push({ source: f, message: `cannot read: ${fsMessage(e)}` });
        continue;
      }
      parseManifestText(text, f, objects, errors);
    }
  }
  return errors;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

/** A node:fs error as a short human message (no stack, no errno noise). */
function fsMessage(e: unknown): string {
  const code = isRecord(e) ? field(e, 'code') : undefined;
  switch (code) {
    case 'ENOENT':
      return 'no such file or directory';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'EISDIR':
      return 'is a directory';
    case 'ENOTDIR':
      return 'not a directory';
    case 'ELOOP':
      return 'too many levels of symbolic links';
    default:
      return e instanceof Error ? e.message : String(e);
  }
}

/** A path given on the command line -> the files to read, in order. */
async function expandPath(p: string, errors: LoadError[]): Promise<string[]> {
  let st;
  try {
    st = await stat(p);
  } catch (e) {
    errors.push({ source: p, message: `cannot read: ${fsMessage(e)}` });
    return [];
  }
  // An explicitly named file is read whatever its extension, as kubectl does.
  if (!st.isDirectory()) return [p];
  const files: string[] = [];
  await walk(p, files, errors, new Set());
  if (files.length === 0) errors.push({ source: p, message: 'no manifest files (*.yaml, *.yml, *.json) in directory' });
  return files;
}

async function walk(dir: string, files: string[], errors: LoadError[], seen: Set<string>): Promise<void> {
  let real: string;
  let names: string[];
  try {
    real = await realpath(dir);
    names = await readdir(dir);
  } catch (e) {
    errors.push({ source: dir, message: `cannot read: ${fsMessage(e)}` });
    return;
  }
  if (seen.has(real)) return; // symlink loop
  seen.add(real);
  // Plain code-unit order: stable across locales.
  for (const name of names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
    const full = join(dir, name);
    let st;
    try {
      st = await stat(full);
    } catch (e) {
      errors.push({ source: full, message: `cannot read: ${fsMessage(e)}` });
      continue;
    }
    if (st.isDirectory()) await walk(full, files, errors, seen);
    else if (st.isFile() && MANIFEST_EXTENSIONS.has(extname(name).toLowerCase())) files.push(full);
  }
}

const YAML_OPTIONS = { merge: true, prettyErrors: true } as const;

/**
 * Parses one file's text (YAML, which includes JSON) into objects. Exported for
 * tests and for callers that already hold the text.
 *
 * Documents are split on `---` lines and read by the fast subset reader
 * (yaml-subset.ts); a document it declines is read by the full library, one
 * document at a time, so a big file never holds every document's syntax tree
 * at once. Streams that can't be split on lines go to the library whole.
 */
export function parseManifestText(text: string, source: string, objects: ObjectSink, errors: LoadError[]): void {
  const docs = splitDocuments(text);
  if (docs === undefined) {
    parseStream(text, source, objects, errors);
    return;
  }
  docs.forEach((d, i) => {
    const src = docs.length > 1 ? `${source}#${i + 1}` : source;
    let value = parseSubset(d.text);
    if (value === FALLBACK) {
      const doc = yaml().parseDocument(d.text, YAML_OPTIONS);
      const first = doc.errors[0];
      if (first !== undefined) {
        errors.push({ source: src, message: `not valid YAML or JSON: ${yamlErrorMessage(first, d.line)}` });
        return;
      }
      try {
        value = doc.toJS({ maxAliasCount: 1000 });
      } catch (e) {
        errors.push({ source: src, message: `not valid YAML or JSON: ${e instanceof Error ? e.message : String(e)}` });
        return;
      }
    }
    // Empty documents (a trailing `---`, only comments) are skipped, as kubectl does.
    if (value === null || value === undefined) return;
    checkObject(value, src, '', objects, errors);
  });
}

/** The whole stream through the library (directives, `...` markers: what line splitting can't handle). */
function parseStream(text: string, source: string, objects: ObjectSink, errors: LoadError[]): void {
  let docs;
  try {
    docs = yaml().parseAllDocuments(text, YAML_OPTIONS);
  } catch (e) {
    errors.push({ source, message: `not valid YAML or JSON: ${e instanceof Error ? e.message : String(e)}` });
    return;
  }
  // parseAllDocuments returns an EmptyStream (array-like with no docs) for empty input.
  const list = Array.isArray(docs) ? docs : [];
  list.forEach((doc, i) => {
    const src = list.length > 1 ? `${source}#${i + 1}` : source;
    const first = doc.errors[0];
    if (first !== undefined) {
      errors.push({ source: src, message: `not valid YAML or JSON: ${yamlErrorMessage(first)}` });
      return;
    }
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 1000 });
    } catch (e) {
      errors.push({ source: src, message: `not valid YAML or JSON: ${e instanceof Error ? e.message : String(e)}` });
      return;
    }
    // Empty documents (a trailing `---`, only comments) are skipped, as kubectl does.
    if (value === null || value === undefined) return;
    checkObject(value, src, '', objects, errors);
  });
}

function yamlErrorMessage(
  e: { message: string; linePos?: readonly { line: number; col: number }[] | undefined },
  lineOffset = 0,
): string {
  // The yaml library's message is "<what> at line L, column C:\n\n<excerpt>"; keep the first line, position first.
  const what = (e.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '').replace(/:$/, '');
  const pos = e.linePos?.[0];
  return pos === undefined ? what : `line ${pos.line + lineOffset}, column ${pos.col}: ${what}`;
}

function checkObject(value: unknown, source: string, itemPath: string, objects: ObjectSink, errors: LoadError[]): void {
  const fail = (m: string): void => {
    errors.push({ source, message: itemPath === '' ? m : `${itemPath}: ${m}` });
  };
  if (!isRecord(value)) {
    fail(`not a Kubernetes object: the document is ${show(value)}`);
    return;
  }
  if (isListObject(value)) {
    objects.list?.(value);
    // listItems flattens nested lists; the index is into the flattened items.
    listItems(value).forEach((item, i) => checkObject(item, source, `items[${i}]`, objects, errors));
    return;
  }
  const missing: string[] = [];
  for (const f of ['apiVersion', 'kind']) {
    const v = field(value, f);
    if (typeof v !== 'string' || v === '') missing.push(f);
  }
  if (missing.length > 0) {
    fail(`not a Kubernetes object: ${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not set`);
    return;
  }
  const meta = field(value, 'metadata');
  const name = isRecord(meta) ? field(meta, 'name') : undefined;
  if (typeof name !== 'string' || name === '') {
    fail(
      `${String(field(value, 'kind'))}: metadata.name is ${name === undefined || name === '' ? 'not set' : `not a string (${show(name)})`}`,
    );
    return;
  }
  objects.push(value);
}
