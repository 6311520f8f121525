// The API calls of applied status: the node's NodePolicyStatus (create, merge
// patch of /status), its Lease (create, update with a resourceVersion
// precondition) and the Node's uid for the owner reference. Thin: decisions
// (when, what, retries) live in agent/status-writer.ts and agent/heartbeat.ts.
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  V1MicroTime,
} from '@kubernetes/client-node';
import type { KubeConfig, V1Lease } from '@kubernetes/client-node';
import { STATUS_GROUP, STATUS_PLURAL, STATUS_VERSION } from '../status/types.ts';
import type { LeaseObject, NodePolicyStatusObject } from '../status/types.ts';

/** HTTP status of a failed call (0 when there was no answer). */
export function apiCode(err: unknown): number {
  if (err instanceof ApiException) return err.code;
  const c = (err as { code?: unknown; statusCode?: unknown } | null)?.statusCode ?? (err as { code?: unknown } | null)?.code;
  return typeof c === 'number' ? c : 0;
}

export interface StatusApi {
  /** The Node's uid; undefined when the Node does not exist. */
  nodeUid(node: string): Promise<string | undefined>;
  /** POST; resolves false when it already exists (409). */
  createStatusObject(obj: NodePolicyStatusObject): Promise<boolean>;
  /** JSON merge patch of /status; resolves undefined when the object does not exist (404). */
  patchStatus(name: string, patch: object): Promise<NodePolicyStatusObject | undefined>;
}

export interface LeaseApi {
  /** undefined when it does not exist. */
  readLease(namespace: string, name: string): Promise<LeaseObject | undefined>;
  /** Resolves false when it already exists (409). */
  createLease(namespace: string, lease: LeaseObject): Promise<boolean>;
  /** PUT with the lease's resourceVersion; resolves 'conflict' on 409, 'gone' on 404. */
  replaceLease(namespace: string, lease: LeaseObject): Promise<LeaseObject | 'conflict' | 'gone'>;
}

const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

function toV1Lease(l: LeaseObject): V1Lease {
  const time = (t: string | Date | undefined): V1MicroTime | undefined => (t === undefined ? undefined : new V1MicroTime(t));
  const s = l.spec ?? {};
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { ...l.metadata },
    spec: {
      ...(s.holderIdentity === undefined ? {} : { holderIdentity: s.holderIdentity }),
      ...(s.leaseDurationSeconds === undefined ? {} : { leaseDurationSeconds: s.leaseDurationSeconds }),
      ...(s.acquireTime === undefined ? {} : { acquireTime: time(s.acquireTime) }),
      ...(s.renewTime === undefined ? {} : { renewTime: time(s.renewTime) }),
    },
  };
}

function fromV1Lease(l: V1Lease): LeaseObject {
  return {
    metadata: {
      name: l.metadata?.name ?? '',
      ...(l.metadata?.namespace === undefined ? {} : { namespace: l.metadata.namespace }),
      ...(l.metadata?.resourceVersion === undefined ? {} : { resourceVersion: l.metadata.resourceVersion }),
    },
    spec: {
      ...(l.spec?.holderIdentity === undefined ? {} : { holderIdentity: l.spec.holderIdentity }),
      ...(l.spec?.leaseDurationSeconds === undefined ? {} : { leaseDurationSeconds: l.spec.leaseDurationSeconds }),
      ...(l.spec?.acquireTime === undefined ? {} : { acquireTime: l.spec.acquireTime }),
      ...(l.spec?.renewTime === undefined ? {} : { renewTime: l.spec.renewTime }),
    },
  };
}

export function kubeStatusApi(kc: KubeConfig): StatusApi & LeaseApi {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  const coord = kc.makeApiClient(CoordinationV1Api);
  const where = { group: STATUS_GROUP, version: STATUS_VERSION, plural: STATUS_PLURAL };
  return {
    async nodeUid(node) {
      // list (field selector) rather than get: the agent's RBAC has list/watch on nodes, no get.
      const l = await core.listNode({ fieldSelector: `metadata.name=${node}` });
      return l.items.find((n) => n.metadata?.name === node)?.metadata?.uid;
    },
    async createStatusObject(obj) {
      try {
        await custom.createClusterCustomObject({ ...where, body: obj });
        return true;
      } catch (e) {
        if (apiCode(e) === 409) return false;
        throw e;
      }
    },
    async patchStatus(name, patch) {
      try {
        return (await custom.patchClusterCustomObjectStatus({ ...where, name, body: patch }, MERGE)) as NodePolicyStatusObject;
      } catch (e) {
        if (apiCode(e) === 404) return undefined;
        throw e;
      }
    },
    async readLease(namespace, name) {
      try {
        return fromV1Lease(await coord.readNamespacedLease({ namespace, name }));
      } catch (e) {
        if (apiCode(e) === 404) return undefined;
        throw e;
      }
    },
    async createLease(namespace, lease) {
      try {
        await coord.createNamespacedLease({ namespace, body: toV1Lease(lease) });
        return true;
      } catch (e) {
        if (apiCode(e) === 409) return false;
        throw e;
      }
    },
    async replaceLease(namespace, lease) {
      try {
        return fromV1Lease(await coord.replaceNamespacedLease({ namespace, name: lease.metadata.name, body: toV1Lease(lease) }));
      } catch (e) {
        const code = apiCode(e);
        if (code === 409) return 'conflict';
        if (code === 404) return 'gone';
        throw e;
      }
    },
  };
}
