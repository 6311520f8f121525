// Namespace (v1) -> normalized Namespace.
import { ANY, objectFields } from './field-tree.ts';
import { field, isRecord, normalizeLabels, objectVersion, readHead, sortedLabels } from './normalize-common.ts';
import type { Normalized } from './normalize-common.ts';
import type { Namespace } from './types.ts';

export const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';
/** KubeSphere's project isolation switch (see docs/tenancy.md). */
export const NETWORK_ISOLATE_ANNOTATION = 'kubesphere.io/network-isolate';

/** v1 Namespace fields (strict field checks, field-tree.ts). */
export const NAMESPACE_FIELDS = objectFields({ spec: ANY, status: ANY });

export function normalizeNamespace(obj: unknown): Normalized<Namespace> {
  const h = readHead(obj, 'Namespace', false, 'v1');
  if (!h.ok) return h;
  const { name, metadata, sink } = h.head;
  const { labels } = normalizeLabels(field(metadata, 'labels'), 'metadata.labels', sink.report);
  const annotations = field(metadata, 'annotations');
  const isolate = isRecord(annotations) ? field(annotations, NETWORK_ISOLATE_ANNOTATION) : undefined;
  const ns = namespaceWithLabels(name, labels);
  // Only the exact value KubeSphere writes switches isolation on; anything else is off, as in KubeSphere.
  if (isolate !== 'enabled') return { ok: true, value: ns, errors: sink.errors };
  // The version only where it is reported (project isolation): other namespaces keep their
  // identity across edits that change nothing the model holds.
  const version = objectVersion(metadata);
  return { ok: true, value: { ...ns, networkIsolate: true, ...(version === undefined ? {} : { version }) }, errors: sink.errors };
}

/** The API server always sets kubernetes.io/metadata.name to the name (overriding any given value). */
export function namespaceWithLabels(name: string, labels: Readonly<Record<string, string>>): Namespace {
  const rest = Object.entries(labels).filter(([k]) => k !== NAMESPACE_NAME_LABEL);
  return { name, labels: sortedLabels([...rest, [NAMESPACE_NAME_LABEL, name]]) };
}
