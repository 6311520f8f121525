// Strict field checking, as the API server's strict field validation does it
// (`kubectl apply` since 1.27, `--validate=strict`): a field the schema does not
// know is an error naming its path, in the API server's words
// (`unknown field "spec.ingress[0].ports[0].prot"`). A misspelled
// `podselector:` otherwise reads as "no podSelector", which selects every pod
// of the namespace.
//
// Each kind's schema is data: a small tree of the fields it may have. Only
// files are checked this way (validate, render, explain): what an API server
// stored has no unknown fields, and this agent's tree may be older than the
// server's schema, so the watch path never calls this.
//
// Registering a kind: its normalizer module exports its tree, built with
// `object`, `listOf`, `ANY` and the shared `objectFields` (apiVersion, kind,
// metadata as ObjectMeta), and `FIELD_TREES` in normalize.ts maps the kind's
// name to it, e.g. `ClusterNetworkPolicy: CLUSTER_NETWORK_POLICY_FIELDS`.
// A part the project does not read, or whose fields change with Kubernetes
// versions (a Pod's spec), is `ANY` or an `open` object: a false alarm on a
// valid object is worse than a missed typo.
import { isRecord } from './normalize-common.ts';

/** Anything goes below this field (free-form maps such as labels, or parts not modelled). */
export const ANY = { kind: 'any' } as const;

export interface ObjectTree {
  readonly kind: 'object';
  readonly fields: Readonly<Record<string, FieldTree>>;
  /** Fields not listed are allowed (and not checked). */
  readonly open: boolean;
}

export interface ListTree {
  readonly kind: 'list';
  readonly items: FieldTree;
}

export type FieldTree = typeof ANY | ObjectTree | ListTree;

/** An object whose fields are exactly these (the API server rejects any other). */
export function object(fields: Readonly<Record<string, FieldTree>>): ObjectTree {
  return { kind: 'object', fields, open: false };
}

/** An object of which only these fields are checked; others pass. */
export function openObject(fields: Readonly<Record<string, FieldTree>>): ObjectTree {
  return { kind: 'object', fields, open: true };
}

export function listOf(items: FieldTree): ListTree {
  return { kind: 'list', items };
}

/** metav1.ObjectMeta: what a manifest's metadata may hold (kubectl get -o yaml output included). */
export const OBJECT_META = object({
  name: ANY,
  generateName: ANY,
  namespace: ANY,
  selfLink: ANY,
  uid: ANY,
  resourceVersion: ANY,
  generation: ANY,
  creationTimestamp: ANY,
  deletionTimestamp: ANY,
  deletionGracePeriodSeconds: ANY,
  labels: ANY,
  annotations: ANY,
  ownerReferences: ANY,
  finalizers: ANY,
  managedFields: ANY,
  // Removed in 1.24 but still in old manifests; the API server of that time accepted it.
  clusterName: ANY,
});

/** metav1.LabelSelector. */
export const LABEL_SELECTOR = object({
  matchLabels: ANY,
  matchExpressions: listOf(object({ key: ANY, operator: ANY, values: ANY })),
});

/** A top-level object: apiVersion, kind, metadata, and these fields. */
export function objectFields(fields: Readonly<Record<string, FieldTree>>): ObjectTree {
  return object({ apiVersion: ANY, kind: ANY, metadata: OBJECT_META, ...fields });
}

/** The API server's message for an unknown field. */
export function unknownFieldMessage(path: string): string {
  return `unknown field "${path}"`;
}

/**
 * The paths of every field of `value` that `tree` does not know, in document
 * order, as the API server prints them: `spec.ingress[0].from[1].podSelectr`.
 * Values of the wrong type are not reported here (the normalizers do that).
 */
export function unknownFields(value: unknown, tree: FieldTree, path = ''): string[] {
  const out: string[] = [];
  walk(value, tree, path, out);
  return out;
}

function walk(value: unknown, tree: FieldTree, path: string, out: string[]): void {
  if (tree.kind === 'any') return;
  if (tree.kind === 'list') {
    if (!Array.isArray(value)) return;
    value.forEach((item, i) => walk(item, tree.items, `${path}[${i}]`, out));
    return;
  }
  if (!isRecord(value)) return;
  for (const key of Object.keys(value)) {
    const p = path === '' ? key : `${path}.${key}`;
    const sub = Object.hasOwn(tree.fields, key) ? tree.fields[key] : undefined;
    if (sub === undefined) {
      if (!tree.open) out.push(p);
    } else {
      walk(value[key], sub, p, out);
    }
  }
}
