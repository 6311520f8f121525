// Raw Kubernetes objects -> validated normalized model. Entry points for the
// CLI (buildState over loaded manifests) and the watch layer (one object at a
// time with normalize*, then makeState).
import { ANY, object, unknownFieldMessage, unknownFields } from './field-tree.ts';
import type { FieldTree } from './field-tree.ts';
import { field, isRecord, show, UNNAMED } from './normalize-common.ts';
import type { Normalized } from './normalize-common.ts';
import {
  ADMIN_NETWORK_POLICY_FIELDS,
  BASELINE_ADMIN_NETWORK_POLICY_FIELDS,
  CLUSTER_NETWORK_POLICY_FIELDS,
  clusterPolicyKey,
  normalizeAdminNetworkPolicy,
  normalizeBaselineAdminNetworkPolicy,
  normalizeClusterNetworkPolicy,
} from './normalize-cluster-policy.ts';
import { isListObject, listItems } from './normalize-list.ts';
import { NAMESPACE_FIELDS, normalizeNamespace } from './normalize-namespace.ts';
import { NODE_FIELDS, normalizeNode } from './normalize-node.ts';
import { normalizePod, POD_FIELDS } from './normalize-pod.ts';
import { NETWORK_POLICY_FIELDS, normalizePolicy } from './normalize-policy.ts';
import {
  NAMESPACE_POLICY_FIELDS,
  normalizeNamespacePolicy,
  normalizeService,
  normalizeWorkspace,
  SERVICE_FIELDS,
  WORKSPACE_FIELDS,
} from './normalize-tenancy.ts';
import { makeState } from './state.ts';
import type {
  ClusterNetworkPolicy,
  ClusterState,
  Namespace,
  NamespaceNetworkPolicy,
  NetworkPolicy,
  Node,
  Pod,
  Service,
  ValidationError,
  Workspace,
} from './types.ts';

export type { Normalized } from './normalize-common.ts';
export { normalizeNamespace } from './normalize-namespace.ts';
export { normalizeNode } from './normalize-node.ts';
export { normalizePod } from './normalize-pod.ts';
export { normalizePolicy, NETWORK_POLICY_API_VERSION } from './normalize-policy.ts';
export { normalizeNamespacePolicy, normalizeService, normalizeWorkspace } from './normalize-tenancy.ts';
export { makeState } from './state.ts';
export {
  normalizeAdminNetworkPolicy,
  normalizeBaselineAdminNetworkPolicy,
  normalizeClusterNetworkPolicy,
} from './normalize-cluster-policy.ts';

/**
 * Kinds the engine uses, by kind name, with their normalizer. Everything else
 * is ignored. The API edge's descriptors (src/kinds/api-kinds.ts) name the same
 * normalizers (test/kinds/api-kinds.test.ts checks).
 */
const KINDS = {
  Namespace: { namespaced: false, normalize: normalizeNamespace },
  Pod: { namespaced: true, normalize: normalizePod },
  NetworkPolicy: { namespaced: true, normalize: normalizePolicy },
  Node: { namespaced: false, normalize: normalizeNode },
  // Tenancy (docs/tenancy.md).
  Workspace: { namespaced: false, normalize: normalizeWorkspace },
  WorkspaceTemplate: { namespaced: false, normalize: normalizeWorkspace },
  NamespaceNetworkPolicy: { namespaced: true, normalize: normalizeNamespacePolicy },
  Service: { namespaced: true, normalize: normalizeService },
  // Cluster-wide policy tiers (policy.networking.k8s.io v1alpha2, legacy v1alpha1).
  ClusterNetworkPolicy: { namespaced: false, normalize: normalizeClusterNetworkPolicy },
  AdminNetworkPolicy: { namespaced: false, normalize: normalizeAdminNetworkPolicy },
  BaselineAdminNetworkPolicy: { namespaced: false, normalize: normalizeBaselineAdminNetworkPolicy },
} as const satisfies Readonly<
  Record<string, { readonly namespaced: boolean; readonly normalize: (obj: unknown) => Normalized<unknown> }>
>;
type LoadedKind = keyof typeof KINDS;

function isLoadedKind(kind: string): kind is LoadedKind {
  return Object.hasOwn(KINDS, kind);
}

/** What the file loader knows of a kind: its scope and normalizer (undefined: ignored). */
export function loaderKind(
  kind: string,
): { readonly namespaced: boolean; readonly normalize: (obj: unknown) => Normalized<unknown> } | undefined {
  return isLoadedKind(kind) ? KINDS[kind] : undefined;
}

/**
 * The field tree of every kind read from files, for strict field checks
 * (field-tree.ts says how to add one). A kind missing here is not checked.
 */
export const FIELD_TREES: Readonly<Record<string, FieldTree>> = {
  Namespace: NAMESPACE_FIELDS,
  Pod: POD_FIELDS,
  NetworkPolicy: NETWORK_POLICY_FIELDS,
  Node: NODE_FIELDS,
  Workspace: WORKSPACE_FIELDS,
  WorkspaceTemplate: WORKSPACE_FIELDS,
  NamespaceNetworkPolicy: NAMESPACE_POLICY_FIELDS,
  Service: SERVICE_FIELDS,
  ClusterNetworkPolicy: CLUSTER_NETWORK_POLICY_FIELDS,
  AdminNetworkPolicy: ADMIN_NETWORK_POLICY_FIELDS,
  BaselineAdminNetworkPolicy: BASELINE_ADMIN_NETWORK_POLICY_FIELDS,
};

/** `kind: List` and typed lists (metav1.ListMeta as metadata). */
const LIST_FIELDS = object({
  apiVersion: ANY,
  kind: ANY,
  metadata: object({ selfLink: ANY, resourceVersion: ANY, continue: ANY, remainingItemCount: ANY }),
  items: ANY,
});

/**
 * What unknown fields are: errors (strict, as `kubectl apply` and the API
 * server's strict field validation), warnings, or not looked for (objects
 * from an API server, which stored none).
 */
export type UnknownFields = 'error' | 'warn' | 'ignore';

export interface BuildOptions {
  /** Default 'ignore'. */
  readonly unknownFields?: UnknownFields;
}

/** A List or typed list (`PodList`), items misspelled or not. */
function isListKind(kind: string): boolean {
  return kind === 'List' || (kind.endsWith('List') && Object.hasOwn(KINDS, kind.slice(0, -'List'.length)));
}

/** Whether buildState reads objects of this kind (the CLI names the others it ignored). */
export function readsKind(kind: string): boolean {
  return isLoadedKind(kind);
}

function identity(obj: unknown, namespaced: boolean): { namespace: string | undefined; name: string } {
  const meta = isRecord(obj) ? field(obj, 'metadata') : undefined;
  const name = isRecord(meta) ? field(meta, 'name') : undefined;
  const ns = isRecord(meta) ? field(meta, 'namespace') : undefined;
  return {
    namespace: namespaced ? (typeof ns === 'string' && ns !== '' ? ns : 'default') : undefined,
    name: typeof name === 'string' && name !== '' ? name : UNNAMED,
  };
}

export interface Built {
  readonly state: ClusterState;
  readonly errors: ValidationError[];
  /** Unknown fields under `unknownFields: 'warn'`. */
  readonly warnings: ValidationError[];
}

/**
 * Normalizes every object (lists flattened) into a ClusterState. Objects that
 * can't be identified are skipped with an error; policies with errors are kept
 * (enforced fail-closed) and their errors are listed here too. Other kinds are
 * ignored silently. A repeated object replaces the earlier one, with an error.
 */
export function buildState(objects: readonly unknown[], options: BuildOptions = {}): Built {
  const b = stateBuilder(options);
  for (const o of objects) b.add(o);
  return b.finish();
}

/**
 * buildState one object at a time, so a caller reading a big file need not
 * hold every raw object at once (the CLI's loader hands each over as parsed).
 */
export function stateBuilder(options: BuildOptions = {}): {
  add(obj: unknown): void;
  /** A list wrapper whose items come through add() (the loader flattens lists): its own fields are checked. */
  list(wrapper: unknown): void;
  finish(): Built;
} {
  const errors: ValidationError[] = [];
  const warnings: ValidationError[] = [];
  const strict = options.unknownFields ?? 'ignore';
  const unknown = (obj: unknown, tree: FieldTree, kind: string, id: { namespace: string | undefined; name: string }): void => {
    if (strict === 'ignore') return;
    const into = strict === 'error' ? errors : warnings;
    for (const path of unknownFields(obj, tree)) into.push({ kind, ...id, path, message: unknownFieldMessage(path) });
  };
  const namespaces = new Map<string, Namespace>();
  const pods = new Map<string, Pod>();
  const policies = new Map<string, NetworkPolicy>();
  const nodes = new Map<string, Node>();
  const workspaces = new Map<string, Workspace>();
  const namespacePolicies = new Map<string, NamespaceNetworkPolicy>();
  const services = new Map<string, Service>();
  const clusterPolicies = new Map<string, ClusterNetworkPolicy>();

  const keep = <T extends { readonly name: string; readonly namespace?: string }>(
    kind: string,
    into: Map<string, T>,
    r: Normalized<T>,
  ): void => {
    errors.push(...r.errors);
    if (!r.ok) return;
    const v = r.value;
    const key = v.namespace === undefined ? v.name : `${v.namespace}/${v.name}`;
    if (into.has(key)) {
      errors.push({
        kind,
        namespace: v.namespace,
        name: v.name,
        path: 'metadata.name',
        message: `duplicate ${kind} ${key}: the later definition replaces the earlier one`,
      });
    }
    into.set(key, v);
  };

  const addObject = (obj: unknown): void => {
    if (!isRecord(obj)) {
      errors.push({
        kind: '<unknown>',
        namespace: undefined,
        name: UNNAMED,
        path: '<root>',
        message: `must be an object, not ${show(obj)}`,
      });
      return;
    }
    const kind = field(obj, 'kind');
    const apiVersion = field(obj, 'apiVersion');
    const spec = typeof kind === 'string' ? loaderKind(kind) : undefined;
    const id = identity(obj, spec?.namespaced ?? false);
    if (typeof kind !== 'string' || kind === '' || typeof apiVersion !== 'string' || apiVersion === '') {
      const path = typeof apiVersion !== 'string' || apiVersion === '' ? 'apiVersion' : 'kind';
      const v = field(obj, path);
      errors.push({
        kind: typeof kind === 'string' && kind !== '' ? kind : '<unknown>',
        ...id,
        path,
        message: v === undefined || v === '' ? 'Required value' : `must be a string, not ${show(v)}`,
      });
      return;
    }
    const tree = Object.hasOwn(FIELD_TREES, kind) ? FIELD_TREES[kind] : undefined;
    if (tree !== undefined) unknown(obj, tree, kind, id);
    switch (kind) {
      case 'Namespace':
        keep(kind, namespaces, KINDS.Namespace.normalize(obj));
        break;
      case 'Pod':
        keep(kind, pods, KINDS.Pod.normalize(obj));
        break;
      case 'NetworkPolicy':
        keep(kind, policies, KINDS.NetworkPolicy.normalize(obj));
        break;
      case 'Node':
        keep(kind, nodes, KINDS.Node.normalize(obj));
        break;
      case 'Workspace':
      case 'WorkspaceTemplate':
        keep('Workspace', workspaces, KINDS[kind].normalize(obj));
        break;
      case 'NamespaceNetworkPolicy':
        keep(kind, namespacePolicies, KINDS.NamespaceNetworkPolicy.normalize(obj));
        break;
      case 'Service': {
        // Services are not ours to validate: an unusable one just selects nothing (a peer naming it says so).
        const r = KINDS.Service.normalize(obj);
        if (r.ok) services.set(`${r.value.namespace}/${r.value.name}`, r.value);
        break;
      }
      case 'ClusterNetworkPolicy':
      case 'AdminNetworkPolicy':
      case 'BaselineAdminNetworkPolicy': {
        const r = KINDS[kind].normalize(obj);
        errors.push(...r.errors);
        if (!r.ok) break;
        // The kinds share one list: keyed by kind and name, so a CNP and an ANP may share a name.
        const key = clusterPolicyKey(r.value);
        if (clusterPolicies.has(key)) {
          errors.push({
            kind,
            namespace: undefined,
            name: r.value.name,
            path: 'metadata.name',
            message: `duplicate ${kind} ${r.value.name}: the later definition replaces the earlier one`,
          });
        }
        clusterPolicies.set(key, r.value);
        break;
      }
      default:
        break;
    }
  };
  const list = (o: unknown): void => {
    const k = isRecord(o) ? field(o, 'kind') : undefined;
    if (typeof k === 'string' && isListKind(k)) unknown(o, LIST_FIELDS, k, { namespace: undefined, name: UNNAMED });
  };
  const add = (o: unknown): void => {
    list(o);
    if (isListObject(o)) for (const item of listItems(o)) addObject(item);
    else addObject(o);
  };
  const finish = (): Built => {
    const state = makeState({
      namespaces: [...namespaces.values()],
      pods: [...pods.values()],
      policies: [...policies.values()],
      nodes: [...nodes.values()],
      workspaces: [...workspaces.values()],
      namespacePolicies: [...namespacePolicies.values()],
      services: [...services.values()],
      clusterPolicies: [...clusterPolicies.values()],
    });
    return { state, errors, warnings };
  };
  return { add, list, finish };
}
