// What every command shares in its output: the formats (-o text|json|yaml),
// one shape for an error in JSON and YAML ({object, path, message}), and what
// the input held that the engine does not read.
import type { LoadError } from '../model/load.ts';
import { readsKind } from '../model/normalize.ts';
import type { ValidationError } from '../model/types.ts';
import { yaml } from '../model/yaml-lib.ts';

export type Format = 'text' | 'json' | 'yaml';

/** The error of every command's JSON and YAML output. */
export interface ErrorObject {
  /** What is wrong: `NetworkPolicy shop/web`, `Namespace shop`, a file (`x.yaml`, `x.yaml#2`), a flag (`--from`). */
  readonly object: string;
  /** Where in it: a field path (`spec.ingress[0].ports[1].endPort`), `line 3, column 5` in a file, or "". */
  readonly path: string;
  readonly message: string;
}

/** `-o` of a command that answers in text, json or yaml; undefined when `v` is none of them. */
export function parseFormat(v: string | undefined): Format | undefined {
  return v === 'text' || v === 'json' || v === 'yaml' ? v : undefined;
}

/** A JSON or YAML document, the same data in both. */
export function formatDocument(format: 'json' | 'yaml', doc: unknown): string {
  return format === 'json' ? JSON.stringify(doc, null, 2) : yaml().stringify(doc, { lineWidth: 0 });
}

export function validationErrorObject(e: ValidationError): ErrorObject {
  const id = e.namespace === undefined ? e.name : `${e.namespace}/${e.name}`;
  return { object: `${e.kind} ${id}`, path: e.path, message: e.message };
}

// The loader puts the position into its message ("line 3, column 5: ..." after
// the "not valid YAML or JSON: " prefix, or "items[2]: ..." in a List).
const YAML_POSITION = /^(not valid YAML or JSON: )(line \d+, column \d+): (.*)$/s;
const LIST_ITEM = /^(items\[\d+\]): (.*)$/s;

export function loadErrorObject(e: LoadError): ErrorObject {
  const y = YAML_POSITION.exec(e.message);
  if (y !== null) return { object: e.source, path: y[2] ?? '', message: `${y[1] ?? ''}${y[3] ?? ''}` };
  const l = LIST_ITEM.exec(e.message);
  if (l !== null) return { object: e.source, path: l[1] ?? '', message: l[2] ?? '' };
  return { object: e.source, path: '', message: e.message };
}

/** Objects by kind: those the engine reads, and those it ignores, in the order the input names them. */
export interface KindCounts {
  readonly read: Readonly<Record<string, number>>;
  readonly ignored: Readonly<Record<string, number>>;
}

/** Objects by kind, read and ignored, counted as they are parsed (the CLI does not keep them). */
export function kindCounter(): { add(o: unknown): void; counts(): KindCounts } {
  const read = new Map<string, number>();
  const ignored = new Map<string, number>();
  return {
    add(o) {
      const kind = typeof o === 'object' && o !== null && 'kind' in o && typeof o.kind === 'string' ? o.kind : '<no kind>';
      const into = readsKind(kind) ? read : ignored;
      into.set(kind, (into.get(kind) ?? 0) + 1);
    },
    counts: () => ({ read: Object.fromEntries(read), ignored: Object.fromEntries(ignored) }),
  };
}

/** `1 Service, 2 Deployment` */
export function countsText(counts: Readonly<Record<string, number>>): string {
  return Object.entries(counts)
    .map(([k, n]) => `${n} ${k}`)
    .join(', ');
}
