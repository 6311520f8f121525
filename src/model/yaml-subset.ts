// A fast reader for the plain block YAML that kubectl, Helm and generators
// write (`key: value` maps, `- ` lists, plain and quoted one-line scalars,
// one-line flow collections, comments), which the full `yaml` library reads
// about ten times slower through its CST and document model: a 20 MB
// manifest file took 9 s of its 10 s there.
//
// It never decides a hard case: anything outside that subset (anchors, tags,
// block scalars, multi-line scalars, tabs, odd indentation, duplicate keys,
// plain scalars the core schema reads as floats, octal or hex, non-string
// keys) makes it answer FALLBACK, and the caller reads the document with the
// full library, which also words any error. On what it accepts, its value is
// the library's (YAML 1.2 core schema), as test/model/yaml-subset.test.ts
// checks against the library on generated documents.

export const FALLBACK: unique symbol = Symbol('FALLBACK');

/** Thrown inside the parser to give up; caught at the top. */
class GiveUp extends Error {}
const giveUp = (): never => {
  throw new GiveUp();
};

export interface DocumentText {
  readonly text: string;
  /** 0-based line of the document's first line in the file (for error positions). */
  readonly line: number;
}

const MARKER = /^---[ ]*$/;

/**
 * The file's documents, split at `---` lines as the YAML stream reads them:
 * what precedes the first marker is a document only if it holds more than
 * comments; a trailing marker opens an empty document. Undefined when the
 * stream has anything that makes splitting on lines unsafe (directives,
 * `...` end markers, a marker with content, a byte-order mark).
 */
export function splitDocuments(text: string): DocumentText[] | undefined {
  if (text.startsWith('\uFEFF')) return undefined;
  const docs: DocumentText[] = [];
  let start = 0;
  let startLine = 0;
  let line = 0;
  let pos = 0;
  let first = true;
  const close = (end: number): void => {
    const t = text.slice(start, end);
    if (!first || hasContent(t)) docs.push({ text: t, line: startLine });
  };
  while (pos <= text.length) {
    let nl = text.indexOf('\n', pos);
    if (nl < 0) nl = text.length;
    const c = text.charCodeAt(pos);
    // '-' '.' '%': only lines starting with these can be markers or directives.
    if (c === 0x2d || c === 0x2e || c === 0x25) {
      const l = text.slice(pos, nl);
      if (MARKER.test(l)) {
        close(pos);
        first = false;
        start = nl + 1;
        startLine = line + 1;
      } else if (l.startsWith('---') || l.startsWith('...') || c === 0x25) {
        return undefined;
      }
    }
    pos = nl + 1;
    line++;
  }
  close(text.length);
  return docs;
}

function hasContent(t: string): boolean {
  for (const l of t.split('\n')) {
    const s = l.trim();
    if (s !== '' && !s.startsWith('#')) return true;
  }
  return false;
}

interface Line {
  indent: number;
  text: string;
}

/** One document's value, or FALLBACK when the document is outside the subset. */
export function parseSubset(text: string): unknown {
  if (text.includes('\t') || text.includes('\r')) return FALLBACK;
  const lines: Line[] = [];
  for (const raw of text.split('\n')) {
    let i = 0;
    while (raw.charCodeAt(i) === 0x20) i++;
    const t = raw.slice(i);
    // Blank and comment-only lines carry nothing (comments may sit at any indentation).
    if (t === '' || t.charCodeAt(0) === 0x23) continue;
    lines.push({ indent: i, text: t.trimEnd() });
  }
  if (lines.length === 0) return null;
  try {
    const first = lines[0] as Line;
    // A document that is one scalar or flow collection.
    if (lines.length === 1 && !isSeqItem(first.text) && !isMapEntry(first.text)) return inline(first.text);
    const p = new BlockParser(lines);
    const v = p.block(first.indent);
    if (p.pos < lines.length) giveUp();
    return v;
  } catch (e) {
    if (e instanceof GiveUp) return FALLBACK;
    throw e;
  }
}

const isSeqItem = (t: string): boolean => t === '-' || t.startsWith('- ');

class BlockParser {
  pos = 0;
  readonly #lines: Line[];

  constructor(lines: Line[]) {
    this.#lines = lines;
  }

  block(n: number): unknown {
    const line = this.#lines[this.pos] as Line;
    if (isSeqItem(line.text)) return this.seq(n);
    return this.map(n);
  }

  map(n: number): Record<string, unknown> {
    const obj: Record<string, unknown> = {};
    const lines = this.#lines;
    while (this.pos < lines.length) {
      const line = lines[this.pos] as Line;
      if (line.indent < n) break;
      if (line.indent > n || isSeqItem(line.text)) giveUp();
      const { key, rest } = splitKey(line.text);
      if (Object.hasOwn(obj, key)) giveUp();
      this.pos++;
      obj[key] = rest === '' ? this.nested(n, true) : inline(rest);
    }
    return obj;
  }

  /** The value of `key:` or `-` with nothing after it: a deeper block, a same-indent list (maps only), or null. */
  nested(n: number, inMap: boolean): unknown {
    const line = this.#lines[this.pos];
    if (line === undefined) return null;
    if (line.indent > n) return this.block(line.indent);
    if (inMap && line.indent === n && isSeqItem(line.text)) return this.seq(n);
    return null;
  }

  seq(n: number): unknown[] {
    const arr: unknown[] = [];
    const lines = this.#lines;
    while (this.pos < lines.length) {
      const line = lines[this.pos] as Line;
      if (line.indent < n) break;
      if (line.indent > n) giveUp();
      if (!isSeqItem(line.text)) break;
      let k = 1;
      while (line.text.charCodeAt(k) === 0x20) k++;
      const content = line.text.slice(k);
      if (content === '' || content.startsWith('#')) {
        this.pos++;
        arr.push(this.nested(n, false));
        continue;
      }
      // `- key: v` and `- - x`: a block whose first line starts at the content's column.
      if (isSeqItem(content) || isMapEntry(content)) {
        lines[this.pos] = { indent: n + k, text: content };
        arr.push(this.block(n + k));
        continue;
      }
      this.pos++;
      arr.push(inline(content));
    }
    return arr;
  }
}

/** Characters that may not start a plain scalar (some only when followed by a space). */
const INDICATORS = new Set(['&', '*', '!', '|', '>', '%', '@', '`', '#', ',', '[', ']', '{', '}', '"', "'", '?', ':', '-']);

function isMapEntry(t: string): boolean {
  const c = t[0] ?? '';
  if (c === '"' || c === "'") return quotedKey(t) !== undefined;
  if (c === '{' || c === '[') return false;
  return keyEnd(t) >= 0;
}

/** Index of the `:` that ends a plain key (followed by a space or the end), or -1. */
function keyEnd(t: string): number {
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    if (c === 0x3a && (i + 1 === t.length || t.charCodeAt(i + 1) === 0x20)) return i;
    if (c === 0x23 && i > 0 && t.charCodeAt(i - 1) === 0x20) return -1; // a comment before any key end
  }
  return -1;
}

/** `"key": ...` or `'key': ...`: the key and where its `:` is, or undefined. */
function quotedKey(t: string): { key: string; end: number } | undefined {
  const f = new FlowParser(t);
  let key: unknown;
  try {
    key = f.value();
  } catch (e) {
    if (e instanceof GiveUp) return undefined;
    throw e;
  }
  let i = f.i;
  while (t.charCodeAt(i) === 0x20) i++;
  if (typeof key !== 'string' || t[i] !== ':' || (i + 1 < t.length && t[i + 1] !== ' ')) return undefined;
  return { key, end: i };
}

const KEY_UNSAFE = /["'{}[\],&*!|>%@`]/;

function splitKey(t: string): { key: string; rest: string } {
  const c = t[0] ?? '';
  let key: string;
  let end: number;
  if (c === '"' || c === "'") {
    const q = quotedKey(t);
    if (q === undefined) return giveUp();
    ({ key, end } = q);
  } else {
    end = keyEnd(t);
    if (end <= 0) giveUp();
    key = t.slice(0, end).trimEnd();
    // Keys the core schema reads as null, booleans or numbers become other strings in JS.
    if (!plainOk(key) || KEY_UNSAFE.test(key) || resolvePlain(key) !== key) giveUp();
  }
  // Merge keys merge; __proto__ would not be an own field.
  if (key.length > 1024 || key === '__proto__' || key === '<<') giveUp();
  let rest = t.slice(end + 1).trimStart();
  if (rest.startsWith('#')) rest = '';
  return { key, rest };
}

/** A value on the line of its key or dash: quoted, flow or plain. */
function inline(t: string): unknown {
  const c = t[0];
  if (c === '"' || c === "'" || c === '{' || c === '[') {
    const f = new FlowParser(t);
    const v = f.value();
    f.end();
    return v;
  }
  const s = stripComment(t);
  if (!plainOk(s) || s.includes(': ') || s.endsWith(':')) giveUp();
  return resolvePlain(s);
}

function stripComment(t: string): string {
  const i = t.indexOf(' #');
  return (i < 0 ? t : t.slice(0, i)).trimEnd();
}

function plainOk(s: string): boolean {
  const c = s[0];
  if (c === undefined) return false;
  if (!INDICATORS.has(c)) return true;
  // `-x` is a plain scalar; `-` followed by a space or nothing is not.
  return c === '-' && s.length > 1 && s[1] !== ' ';
}

const SPECIAL_NUMBER =
  /^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|0o[0-7]+|0x[0-9a-fA-F]+)$/;

/** A plain scalar as the YAML 1.2 core schema reads it; floats, octal and hex give up (rare here). */
function resolvePlain(s: string): unknown {
  switch (s) {
    case '~':
    case 'null':
    case 'Null':
    case 'NULL':
      return null;
    case 'true':
    case 'True':
    case 'TRUE':
      return true;
    case 'false':
    case 'False':
    case 'FALSE':
      return false;
    default:
      break;
  }
  const c = s.charCodeAt(0);
  // Only strings starting with a digit, a sign or a dot can be numbers.
  if ((c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e) {
    if (/^[-+]?[0-9]{1,15}$/.test(s)) return Number(s);
    if (SPECIAL_NUMBER.test(s) || /^[-+]?[0-9]+$/.test(s)) giveUp();
  }
  return s;
}

const JSON_ESCAPES = /^(?:[^"\\]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*$/;

/** One-line flow collections and quoted scalars. */
class FlowParser {
  i = 0;
  readonly #s: string;

  constructor(s: string) {
    this.#s = s;
  }

  #ws(): void {
    while (this.#s.charCodeAt(this.i) === 0x20) this.i++;
  }

  /** Nothing but spaces and a comment may follow. */
  end(): void {
    const rest = this.#s.slice(this.i);
    if (rest.trim() !== '' && !/^ +#/.test(rest)) giveUp();
  }

  value(): unknown {
    this.#ws();
    const c = this.#s[this.i];
    if (c === '{') return this.#map();
    if (c === '[') return this.#seq();
    if (c === '"') return this.#double();
    if (c === "'") return this.#single();
    return this.#plain();
  }

  #double(): string {
    const s = this.#s;
    let j = this.i + 1;
    while (j < s.length && s[j] !== '"') j += s[j] === '\\' ? 2 : 1;
    if (j >= s.length) giveUp();
    const inner = s.slice(this.i + 1, j);
    if (!JSON_ESCAPES.test(inner)) giveUp();
    this.i = j + 1;
    return JSON.parse(`"${inner}"`) as string;
  }

  #single(): string {
    const s = this.#s;
    let j = this.i + 1;
    let out = '';
    for (;;) {
      const q = s.indexOf("'", j);
      if (q < 0) giveUp();
      out += s.slice(j, q);
      if (s[q + 1] === "'") {
        out += "'";
        j = q + 2;
      } else {
        this.i = q + 1;
        return out;
      }
    }
  }

  #plain(): unknown {
    const s = this.#s;
    const start = this.i;
    let j = start;
    for (; j < s.length; j++) {
      const c = s[j];
      if (c === ',' || c === '[' || c === ']' || c === '{' || c === '}') break;
      if (c === ':' && (j + 1 === s.length || ' ,[]{}'.includes(s[j + 1] as string))) break;
      if (c === '#' && s[j - 1] === ' ') break;
    }
    const text = s.slice(start, j).trim();
    if (!plainOk(text)) giveUp();
    this.i = j;
    return resolvePlain(text);
  }

  #key(): string {
    this.#ws();
    const c = this.#s[this.i];
    if (c === '"' || c === "'") {
      const k = c === '"' ? this.#double() : this.#single();
      if (k === '__proto__') giveUp();
      return k;
    }
    const start = this.i;
    const k = this.#plain();
    const text = this.#s.slice(start, this.i).trim();
    if (typeof k !== 'string' || k !== text || k === '__proto__' || k === '<<' || KEY_UNSAFE.test(k)) giveUp();
    return k as string;
  }

  #map(): Record<string, unknown> {
    const obj: Record<string, unknown> = {};
    this.i++;
    for (;;) {
      this.#ws();
      if (this.#s[this.i] === '}') {
        this.i++;
        return obj;
      }
      const key = this.#key();
      this.#ws();
      if (this.#s[this.i] !== ':') giveUp();
      this.i++;
      this.#ws();
      const n = this.#s[this.i];
      const v = n === ',' || n === '}' ? null : this.value();
      if (Object.hasOwn(obj, key)) giveUp();
      obj[key] = v;
      this.#ws();
      if (this.#s[this.i] === ',') this.i++;
      else if (this.#s[this.i] !== '}') giveUp();
    }
  }

  #seq(): unknown[] {
    const arr: unknown[] = [];
    this.i++;
    for (;;) {
      this.#ws();
      if (this.#s[this.i] === ']') {
        this.i++;
        return arr;
      }
      arr.push(this.value());
      this.#ws();
      if (this.#s[this.i] === ',') this.i++;
      else if (this.#s[this.i] !== ']') giveUp();
    }
  }
}
