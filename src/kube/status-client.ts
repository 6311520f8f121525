// The API calls of applied status: the node's NodePolicyStatus (create, merge
// patch of /status), its Lease (create, update with a resourceVersion
// precondition) and the Node's uid for the owner reference. Thin: decisions
// (when, what, retries) live in agent/status-writer.ts and agent/heartbeat.ts.
import { kubeRequest } from './kube-http.ts';
import type { KubeAccess } from './kube-http.ts';
import { STATUS_GROUP, STATUS_PLURAL, STATUS_VERSION } from '../status/types.ts';
import type { LeaseObject, NodePolicyStatusObject } from '../status/types.ts';

/** HTTP status of a failed call (0 when there was no answer). */
export function apiCode(err: unknown): number {
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

const MERGE = 'application/merge-patch+json';

/** The Lease as sent: times as RFC 3339 with microseconds (MicroTime). */
function leaseBody(l: LeaseObject): object {
  const time = (t: string | Date | undefined): string | undefined =>
    t === undefined ? undefined : (typeof t === 'string' ? new Date(t) : t).toISOString().replace(/Z$/, '000Z');
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

interface RawLease {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; acquireTime?: string; renewTime?: string };
}

function fromLease(raw: unknown): LeaseObject {
  const l = (raw ?? {}) as RawLease;
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

export function kubeStatusApi(kc: KubeAccess): StatusApi & LeaseApi {
  const statuses = `/apis/${STATUS_GROUP}/${STATUS_VERSION}/${STATUS_PLURAL}`;
  const leases = (namespace: string): string => `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases`;
  return {
    async nodeUid(node) {
      // list (field selector) rather than get: the agent's RBAC has list/watch on nodes, no get.
      const l = (await kubeRequest(kc, 'GET', '/api/v1/nodes', { query: { fieldSelector: `metadata.name=${node}` } })) as {
        items?: { metadata?: { name?: string; uid?: string } }[];
      };
      return l.items?.find((n) => n.metadata?.name === node)?.metadata?.uid;
    },
    async createStatusObject(obj) {
      try {
        await kubeRequest(kc, 'POST', statuses, { body: obj });
        return true;
      } catch (e) {
        if (apiCode(e) === 409) return false;
        throw e;
      }
    },
    async patchStatus(name, patch) {
      try {
        return (await kubeRequest(kc, 'PATCH', `${statuses}/${encodeURIComponent(name)}/status`, {
          body: patch,
          contentType: MERGE,
        })) as NodePolicyStatusObject;
      } catch (e) {
        if (apiCode(e) === 404) return undefined;
        throw e;
      }
    },
    async readLease(namespace, name) {
      try {
        return fromLease(await kubeRequest(kc, 'GET', `${leases(namespace)}/${encodeURIComponent(name)}`));
      } catch (e) {
        if (apiCode(e) === 404) return undefined;
        throw e;
      }
    },
    async createLease(namespace, lease) {
      try {
        await kubeRequest(kc, 'POST', leases(namespace), { body: leaseBody(lease) });
        return true;
      } catch (e) {
        if (apiCode(e) === 409) return false;
        throw e;
      }
    },
    async replaceLease(namespace, lease) {
      try {
        return fromLease(
          await kubeRequest(kc, 'PUT', `${leases(namespace)}/${encodeURIComponent(lease.metadata.name)}`, {
            body: leaseBody(lease),
          }),
        );
      } catch (e) {
        const code = apiCode(e);
        if (code === 409) return 'conflict';
        if (code === 404) return 'gone';
        throw e;
      }
    },
  };
}
