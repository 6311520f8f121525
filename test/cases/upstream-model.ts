// The upstream NetworkPolicy e2e model (test/e2e/network/netpol/model.go) as
// raw Kubernetes objects: namespaces x, y, z, each with pods a, b, c, one
// container per (port x protocol) serving a named container port
// `serve-<port>-<proto>`. Addresses and node placement come from the caller,
// so the datapath harness can put the pods where its network has them.
import type { Protocol } from '../../src/model/types.ts';
import type { RawObject } from './raw.ts';

export type { RawObject } from './raw.ts';

export const UPSTREAM_NAMESPACES = ['x', 'y', 'z'] as const;
export const UPSTREAM_POD_NAMES = ['a', 'b', 'c'] as const;
export const UPSTREAM_PORTS = [80, 81] as const;
export const UPSTREAM_PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];

/** The 9 pods as `ns/pod`, in upstream's order (x/a, x/b, ..., z/c): the axes of every truth table. */
export const UPSTREAM_PODS: readonly string[] = UPSTREAM_NAMESPACES.flatMap((ns) => UPSTREAM_POD_NAMES.map((p) => `${ns}/${p}`));

export const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

export const AGNHOST_IMAGE = 'registry.k8s.io/e2e-test-images/agnhost:2.53';

export interface PodAddresses {
  readonly v4: string;
  /** Omit for a single-stack (IPv4) harness. */
  readonly v6?: string | undefined;
}

export interface UpstreamModelOptions {
  readonly podIPs: (namespace: string, pod: string) => PodAddresses;
  /** spec.nodeName; default: no node (unscheduled as far as the model says). */
  readonly nodeName?: (namespace: string, pod: string) => string | undefined;
  /** status.hostIP of the pod's node, if the harness wants it set. */
  readonly hostIP?: (namespace: string, pod: string) => string | undefined;
}

/** `serve-80-tcp` */
export function containerPortName(port: number, protocol: Protocol): string {
  return `serve-${port}-${protocol.toLowerCase()}`;
}

/** `cont-80-tcp` */
export function containerName(port: number, protocol: Protocol): string {
  return `cont-${port}-${protocol.toLowerCase()}`;
}

/**
 * Default addresses: 10.244.<ns>.<10+pod> and fd00:10:244:<ns>::<10+pod>.
 * Cases 35/36 (upstream makeLargeCIDRForIP) take the /4 around x/b's address
 * and expect every other pod inside it, as upstream does: any addressing
 * where all pod IPs share one /4 per family keeps their tables true.
 */
export function defaultPodIPs(namespace: string, pod: string): PodAddresses {
  const n = UPSTREAM_NAMESPACES.indexOf(namespace as 'x') + 1;
  const p = UPSTREAM_POD_NAMES.indexOf(pod as 'a') + 10;
  return { v4: `10.244.${n}.${p}`, v6: `fd00:10:244:${n}::${p}` };
}

export function upstreamNamespace(name: string): RawObject {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { [NAMESPACE_NAME_LABEL]: name, ns: name } } };
}

export function upstreamPod(namespace: string, name: string, opts: UpstreamModelOptions): RawObject {
  const ips = opts.podIPs(namespace, name);
  const podIPs = ips.v6 === undefined ? [{ ip: ips.v4 }] : [{ ip: ips.v4 }, { ip: ips.v6 }];
  const nodeName = opts.nodeName?.(namespace, name);
  const hostIP = opts.hostIP?.(namespace, name);
  const containers = UPSTREAM_PORTS.flatMap((port) =>
    UPSTREAM_PROTOCOLS.map((protocol) => ({
      name: containerName(port, protocol),
      image: AGNHOST_IMAGE,
      ports: [{ containerPort: port, name: containerPortName(port, protocol), protocol }],
    })),
  );
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels: { pod: name } },
    spec: { ...(nodeName === undefined ? {} : { nodeName }), terminationGracePeriodSeconds: 0, containers },
    status: { phase: 'Running', ...(hostIP === undefined ? {} : { hostIP }), podIP: ips.v4, podIPs },
  };
}

/** A Node with InternalIP addresses (for the node-local allowance). */
export function nodeObject(name: string, internalIPs: readonly string[]): RawObject {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'kubernetes.io/hostname': name } },
    status: {
      addresses: [...internalIPs.map((address) => ({ type: 'InternalIP', address })), { type: 'Hostname', address: name }],
    },
  };
}

export interface UpstreamModel {
  readonly namespaces: readonly RawObject[];
  readonly pods: readonly RawObject[];
}

export function upstreamModel(opts: UpstreamModelOptions = { podIPs: defaultPodIPs }): UpstreamModel {
  return {
    namespaces: UPSTREAM_NAMESPACES.map(upstreamNamespace),
    pods: UPSTREAM_NAMESPACES.flatMap((ns) => UPSTREAM_POD_NAMES.map((p) => upstreamPod(ns, p, opts))),
  };
}
