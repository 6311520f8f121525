// Kubernetes Events about NetworkPolicies. The kube sink writes core/v1
// Events (what `kubectl describe networkpolicy` shows); the file-source mode
// has no API server, so its sink only logs.
import { randomBytes } from 'node:crypto';
import type { CoreV1Api, CoreV1Event } from '@kubernetes/client-node';
import PQueue from 'p-queue';
import type { Logger } from 'pino';
import { NETWORK_POLICY_API, apiVersionOf } from '../kinds/api-kinds.ts';
import type { EventSink, ObjectRef } from './ports.ts';

export const EVENT_COMPONENT = 'nft-netpol-agent';

/** Where Events about cluster-scoped objects go when the agent's namespace is not known (client-go's recorder uses default too). */
export const CLUSTER_EVENT_NAMESPACE = 'default';

/**
 * The core/v1 Event body; pure so tests can check the shape. An Event about a
 * cluster-scoped object (ref.namespace '') lives in `clusterNamespace` and its
 * involvedObject has no namespace (what `kubectl describe cnp NAME` looks for).
 */
export function policyEvent(
  ref: ObjectRef,
  reason: string,
  message: string,
  nodeName: string,
  now: Date,
  clusterNamespace: string = CLUSTER_EVENT_NAMESPACE,
): CoreV1Event {
  // Like client-go's recorder: object name + unique suffix.
  const name = `${ref.name}.${now.getTime().toString(16)}${randomBytes(3).toString('hex')}`;
  const clusterScoped = ref.namespace === '';
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name, namespace: clusterScoped ? clusterNamespace : ref.namespace },
    involvedObject: {
      // A ref without a kind is a NetworkPolicy's.
      apiVersion: ref.kind?.apiVersion ?? apiVersionOf(NETWORK_POLICY_API),
      kind: ref.kind?.kind ?? NETWORK_POLICY_API.kind,
      ...(clusterScoped ? {} : { namespace: ref.namespace }),
      name: ref.name,
    },
    reason,
    message,
    type: 'Warning',
    count: 1,
    firstTimestamp: now,
    lastTimestamp: now,
    source: { component: EVENT_COMPONENT, host: nodeName },
    reportingComponent: EVENT_COMPONENT,
    reportingInstance: nodeName,
  };
}

/** Creates Events through the API; a few at a time so a burst cannot flood it. */
export function kubeEventSink(
  api: Pick<CoreV1Api, 'createNamespacedEvent'>,
  nodeName: string,
  clusterNamespace: string = CLUSTER_EVENT_NAMESPACE,
): EventSink {
  const q = new PQueue({ concurrency: 4 });
  return {
    async warnPolicy(ref, reason, message) {
      await q.add(async () => {
        const body = policyEvent(ref, reason, message, nodeName, new Date(), clusterNamespace);
        await api.createNamespacedEvent({ namespace: body.metadata.namespace ?? clusterNamespace, body });
      });
    },
  };
}

export function logEventSink(log: Logger): EventSink {
  return {
    warnPolicy(ref, reason, message) {
      log.debug(
        { event: 'k8s-event', policy: ref.namespace === '' ? ref.name : `${ref.namespace}/${ref.name}`, reason, message },
        'no API server: Event not created',
      );
      return Promise.resolve();
    },
  };
}
