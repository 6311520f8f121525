// Kubernetes Events about NetworkPolicies. The kube sink writes core/v1
// Events (what `kubectl describe networkpolicy` shows); the file-source mode
// has no API server, so its sink only logs.
import { randomBytes } from 'node:crypto';
import type { CoreV1Api, CoreV1Event } from '@kubernetes/client-node';
import PQueue from 'p-queue';
import type { Logger } from 'pino';
import type { EventSink, ObjectRef } from './ports.ts';

export const EVENT_COMPONENT = 'nft-netpol-agent';

/** The core/v1 Event body; pure so tests can check the shape. */
export function policyEvent(ref: ObjectRef, reason: string, message: string, nodeName: string, now: Date): CoreV1Event {
  // Like client-go's recorder: object name + unique suffix.
  const name = `${ref.name}.${now.getTime().toString(16)}${randomBytes(3).toString('hex')}`;
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name, namespace: ref.namespace },
    involvedObject: {
      apiVersion: ref.kind?.apiVersion ?? 'networking.k8s.io/v1',
      kind: ref.kind?.kind ?? 'NetworkPolicy',
      namespace: ref.namespace,
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
export function kubeEventSink(api: Pick<CoreV1Api, 'createNamespacedEvent'>, nodeName: string): EventSink {
  const q = new PQueue({ concurrency: 4 });
  return {
    async warnPolicy(ref, reason, message) {
      await q.add(async () => {
        await api.createNamespacedEvent({
          namespace: ref.namespace,
          body: policyEvent(ref, reason, message, nodeName, new Date()),
        });
      });
    },
  };
}

export function logEventSink(log: Logger): EventSink {
  return {
    warnPolicy(ref, reason, message) {
      log.debug(
        { event: 'k8s-event', policy: `${ref.namespace}/${ref.name}`, reason, message },
        'no API server: Event not created',
      );
      return Promise.resolve();
    },
  };
}
