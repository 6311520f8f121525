// Shared pieces of normalization: safe reading of raw (unknown) objects,
// error collection with the object's identity, metadata, labels and label
// selectors. Raw objects come either as plain JSON (files, watch events) or as
// @kubernetes/client-node model instances; both read the same way here.
import { labelKeyErrors, labelValueErrors, dns1123LabelErrors, dns1123SubdomainErrors } from './k8s-names.ts';
import type { LabelSelector, Labels, ObjectVersion, SelectorOperator, SelectorRequirement, ValidationError } from './types.ts';

export type Normalized<T> = { ok: true; value: T; errors: ValidationError[] } | { ok: false; errors: ValidationError[] };

export type Raw = Readonly<Record<string, unknown>>;

/** A JSON-like object (plain or a client-node model instance), not an array or Date. */
export function isRecord(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

/**
 * An own field's value; null counts as absent, as it does for the API server.
 * Own properties only, so plain objects never yield Object.prototype members
 * ("constructor"); client-node models set their fields as own properties too.
 */
export function field(obj: Raw, name: string): unknown {
  if (!Object.hasOwn(obj, name)) return undefined;
  const v = obj[name];
  return v === null ? undefined : v;
}

/** First present field among spellings (e.g. `from` / client-node's `_from`). */
export function fieldOf(obj: Raw, ...names: string[]): unknown {
  for (const n of names) {
    const v = field(obj, n);
    if (v !== undefined) return v;
  }
  return undefined;
}

/** Short rendering of a bad value for messages, never huge. */
export function show(v: unknown): string {
  let s: string;
  if (typeof v === 'string') s = JSON.stringify(v);
  else if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') s = String(v);
  else if (v === undefined) s = 'undefined';
  else if (Array.isArray(v)) s = 'a list';
  else if (typeof v === 'object') s = 'an object';
  else s = typeof v;
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

export type Report = (path: string, message: string) => void;

/** Collects validation errors for one object. */
export interface Sink {
  readonly errors: ValidationError[];
  readonly report: Report;
}

export function makeSink(kind: string, namespace: string | undefined, name: string): Sink {
  const errors: ValidationError[] = [];
  return { errors, report: (path, message) => errors.push({ kind, namespace, name, path, message }) };
}

export const UNNAMED = '<unnamed>';

export interface Head {
  readonly obj: Raw;
  readonly name: string;
  /** 'default' when a namespaced object has none; undefined for cluster-scoped kinds. */
  readonly namespace: string | undefined;
  readonly metadata: Raw;
  readonly sink: Sink;
}

/**
 * Reads kind, metadata.name and metadata.namespace. Fails (ok:false) when the
 * object can't be identified: not an object, wrong kind, no usable name.
 */
export function readHead(
  obj: unknown,
  kind: string,
  namespaced: boolean,
  apiVersion: string,
): { ok: true; head: Head } | { ok: false; errors: ValidationError[] } {
  const fail = (
    namespace: string | undefined,
    name: string,
    path: string,
    message: string,
  ): { ok: false; errors: ValidationError[] } => ({
    ok: false,
    errors: [{ kind, namespace, name, path, message }],
  });
  const defaultNs = namespaced ? 'default' : undefined;
  if (!isRecord(obj)) return fail(defaultNs, UNNAMED, '<root>', `must be an object, not ${show(obj)}`);
  const metadata = field(obj, 'metadata');
  if (metadata !== undefined && !isRecord(metadata))
    return fail(defaultNs, UNNAMED, 'metadata', `must be an object, not ${show(metadata)}`);
  const meta: Raw = metadata ?? {};

  let namespace = defaultNs;
  const nsErrors: string[] = [];
  if (namespaced) {
    const ns = field(meta, 'namespace');
    if (typeof ns === 'string' && ns !== '') {
      namespace = ns;
      nsErrors.push(...dns1123LabelErrors(ns));
    } else if (ns !== undefined && ns !== '') {
      return fail(defaultNs, UNNAMED, 'metadata.namespace', `must be a string, not ${show(ns)}`);
    }
  }
  const name = field(meta, 'name');
  const shownName = typeof name === 'string' && name !== '' ? name : UNNAMED;
  const k = field(obj, 'kind');
  if (k !== undefined && k !== kind) return fail(namespace, shownName, 'kind', `must be ${kind}, not ${show(k)}`);
  const av = field(obj, 'apiVersion');
  if (av !== undefined && av !== apiVersion)
    return fail(namespace, shownName, 'apiVersion', `${show(av)} is not supported for ${kind} (want ${apiVersion})`);
  if (name === undefined || name === '') return fail(namespace, UNNAMED, 'metadata.name', 'Required value');
  if (typeof name !== 'string') return fail(namespace, UNNAMED, 'metadata.name', `must be a string, not ${show(name)}`);

  const sink = makeSink(kind, namespace, name);
  for (const m of nsErrors) sink.report('metadata.namespace', m);
  // Namespaces are DNS labels; the other kinds used here are DNS subdomains.
  for (const m of kind === 'Namespace' ? dns1123LabelErrors(name) : dns1123SubdomainErrors(name)) sink.report('metadata.name', m);
  return { ok: true, head: { obj, name, namespace, metadata: meta, sink } };
}

/** Is `raw` an object? Reports at `path` when it is not. */
export function isObjectAt(raw: unknown, path: string, report: Report): raw is Raw {
  if (isRecord(raw)) return true;
  report(path, `must be an object, not ${show(raw)}`);
  return false;
}

/** A required, non-empty string field, or undefined with the report of what is wrong. */
export function requiredString(parent: Raw, name: string, path: string, report: Report): string | undefined {
  const v = field(parent, name);
  if (v === undefined || v === '') {
    report(path, 'Required value');
    return undefined;
  }
  if (typeof v === 'string') return v;
  report(path, `must be a string, not ${show(v)}`);
  return undefined;
}

/** A sub-object that may be absent; anything else than an object is reported and read as `{}`. */
export function subObject(parent: Raw, name: string, path: string, report: Report): Raw {
  const v = field(parent, name);
  if (v === undefined) return {};
  if (isRecord(v)) return v;
  report(path, `must be an object, not ${show(v)}`);
  return {};
}

/** A list that may be absent (undefined); anything else than a list is reported (returns undefined too). */
export function listField(parent: Raw, names: readonly string[], path: string, report: Report): readonly unknown[] | undefined {
  const v = fieldOf(parent, ...names);
  if (v === undefined) return undefined;
  if (Array.isArray(v)) return v;
  report(path, `must be a list, not ${show(v)}`);
  return undefined;
}

/** Labels sorted by key so output never depends on input key order. */
export function sortedLabels(entries: Iterable<readonly [string, string]>): Labels {
  // Object.fromEntries defines own data properties, so "__proto__" stays a plain key.
  return Object.fromEntries([...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * A string map of valid label keys and values (metadata.labels, matchLabels).
 * Returns the valid entries and whether everything was valid.
 */
export function normalizeLabels(v: unknown, path: string, report: Report): { labels: Labels; valid: boolean } {
  if (v === undefined || v === null) return { labels: {}, valid: true };
  if (!isRecord(v)) {
    report(path, `must be a map of strings, not ${show(v)}`);
    return { labels: {}, valid: false };
  }
  let valid = true;
  const out: [string, string][] = [];
  for (const [k, val] of Object.entries(v)) {
    const problems: string[] = [];
    for (const m of labelKeyErrors(k)) problems.push(`key ${show(k)}: ${m}`);
    if (typeof val !== 'string') problems.push(`value of ${show(k)} must be a string, not ${show(val)}`);
    else for (const m of labelValueErrors(val)) problems.push(`value ${show(val)} of ${show(k)}: ${m}`);
    if (problems.length === 0) out.push([k, val as string]);
    else {
      valid = false;
      for (const m of problems) report(path, m);
    }
  }
  return { labels: sortedLabels(out), valid };
}

const OPERATORS: readonly SelectorOperator[] = ['In', 'NotIn', 'Exists', 'DoesNotExist'];

function compareRequirements(a: SelectorRequirement, b: SelectorRequirement): number {
  const ka = `${a.key}\u0000${a.operator}\u0000${a.values.join('\u0000')}`;
  const kb = `${b.key}\u0000${b.operator}\u0000${b.values.join('\u0000')}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

/**
 * A label selector as metav1 ValidateLabelSelector checks it. Returns undefined
 * when anything in it is invalid (the caller decides how to fail closed).
 * Values and requirements are sorted: both are sets, and equal selectors must
 * normalize equal.
 */
export function normalizeSelector(v: unknown, path: string, report: Report): LabelSelector | undefined {
  if (!isRecord(v)) {
    report(path, `must be an object, not ${show(v)}`);
    return undefined;
  }
  let valid = true;
  const ml = normalizeLabels(field(v, 'matchLabels'), `${path}.matchLabels`, report);
  if (!ml.valid) valid = false;
  const reqs: SelectorRequirement[] = [];
  const exprs = listField(v, ['matchExpressions'], `${path}.matchExpressions`, (p, m) => {
    valid = false;
    report(p, m);
  });
  (exprs ?? []).forEach((e, i) => {
    const ep = `${path}.matchExpressions[${i}]`;
    const r = normalizeRequirement(e, ep, report);
    if (r === undefined) valid = false;
    else reqs.push(r);
  });
  if (!valid) return undefined;
  return { matchLabels: ml.labels, matchExpressions: reqs.sort(compareRequirements) };
}

function normalizeRequirement(e: unknown, ep: string, report: Report): SelectorRequirement | undefined {
  if (!isRecord(e)) {
    report(ep, `must be an object, not ${show(e)}`);
    return undefined;
  }
  let valid = true;
  const bad = (p: string, m: string): void => {
    valid = false;
    report(p, m);
  };
  const op = field(e, 'operator');
  const rawValues = field(e, 'values');
  const values: string[] = [];
  if (rawValues !== undefined && !Array.isArray(rawValues)) bad(`${ep}.values`, `must be a list, not ${show(rawValues)}`);
  else if (rawValues !== undefined) {
    rawValues.forEach((x, j) => {
      if (typeof x !== 'string') bad(`${ep}.values[${j}]`, `must be a string, not ${show(x)}`);
      else {
        for (const m of labelValueErrors(x)) bad(`${ep}.values[${j}]`, m);
        values.push(x);
      }
    });
  }
  const count = Array.isArray(rawValues) ? rawValues.length : 0;
  if (op === 'In' || op === 'NotIn') {
    if (count === 0) bad(`${ep}.values`, "must be specified when `operator` is 'In' or 'NotIn'");
  } else if (op === 'Exists' || op === 'DoesNotExist') {
    if (count > 0) bad(`${ep}.values`, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'");
  } else if (op === undefined) {
    bad(`${ep}.operator`, 'Required value');
  } else {
    bad(`${ep}.operator`, `${show(op)} is not a valid selector operator (In, NotIn, Exists, DoesNotExist)`);
  }
  const key = field(e, 'key');
  if (key === undefined || key === '') bad(`${ep}.key`, 'Required value');
  else if (typeof key !== 'string') bad(`${ep}.key`, `must be a string, not ${show(key)}`);
  else for (const m of labelKeyErrors(key)) bad(`${ep}.key`, m);
  if (!valid || typeof key !== 'string') return undefined;
  const operator = OPERATORS.find((o) => o === op);
  if (operator === undefined) return undefined;
  return { key, operator, values: [...new Set(values)].sort() };
}

/** uid, generation, resourceVersion; undefined when none is set (manifest files). */
export function objectVersion(meta: Raw): ObjectVersion | undefined {
  const uid = field(meta, 'uid');
  const generation = field(meta, 'generation');
  const resourceVersion = field(meta, 'resourceVersion');
  const v: ObjectVersion = {
    uid: typeof uid === 'string' && uid !== '' ? uid : undefined,
    generation: typeof generation === 'number' && Number.isSafeInteger(generation) ? generation : undefined,
    resourceVersion: typeof resourceVersion === 'string' && resourceVersion !== '' ? resourceVersion : undefined,
  };
  return v.uid === undefined && v.generation === undefined && v.resourceVersion === undefined ? undefined : v;
}
