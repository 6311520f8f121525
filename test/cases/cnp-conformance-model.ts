// The model of the ClusterNetworkPolicy conformance suite
// (kubernetes-sigs/network-policy-api conformance/base/manifests.yaml) as raw
// Kubernetes objects: five namespaces labelled `conformance-house: <house>`,
// each with a two-replica agnhost StatefulSet (pods <set>-0 and <set>-1
// labelled `conformance-house: <house>`). The four pod-network sets serve
// TCP 80 (container port `web`) and 8080, UDP 5353 and 53 (container port
// `dns`), SCTP 9003 and 9005 (SCTP ports are served but not declared). The
// fifth set (forbidden-forrest/centaur) is hostNetwork: its pods answer on
// their node's address at the suite's HostNetworkPorts (8 consecutive ports,
// 34345.. by default): [0], [1] TCP (declared `web-<port>`), [2], [4] UDP
// (declared `dns-<port>`; [3], [5] are their helpers' HTTP ports), [6], [7]
// SCTP (not declared). Addresses and node placement come from the caller.
import type { Family, Protocol } from '../../src/model/types.ts';
import type { RawObject } from './raw.ts';

export const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';
export const HOUSE_LABEL = 'conformance-house';
export const NODE_OS_LABEL = 'kubernetes.io/os';

export type House = 'gryffindor' | 'slytherin' | 'hufflepuff' | 'ravenclaw' | 'forbidden-forrest';
export const HOUSES: readonly House[] = ['gryffindor', 'slytherin', 'hufflepuff', 'ravenclaw', 'forbidden-forrest'];

/** The StatefulSet of each house. */
export const STATEFULSETS: Readonly<Record<House, string>> = {
  gryffindor: 'harry-potter',
  slytherin: 'draco-malfoy',
  hufflepuff: 'cedric-diggory',
  ravenclaw: 'luna-lovegood',
  'forbidden-forrest': 'centaur',
};

/** `network-policy-conformance-<house>` */
export function houseNamespace(house: House): string {
  return `network-policy-conformance-${house}`;
}

/** `ns/name` of pod `<set>-<index>` of a house: the names probes use. */
export function housePod(house: House, index: 0 | 1): string {
  return `${houseNamespace(house)}/${STATEFULSETS[house]}-${index}`;
}

/** Every pod as `ns/name`, pod-network houses first, then the two hostNetwork centaurs. */
export const CNP_PODS: readonly string[] = HOUSES.flatMap((h) => [housePod(h, 0), housePod(h, 1)]);
export const HOST_NETWORK_HOUSE: House = 'forbidden-forrest';

export function isHostNetworkPod(key: string): boolean {
  return key.startsWith(`${houseNamespace(HOST_NETWORK_HOUSE)}/`);
}

/** The upstream suite's default HostNetworkPorts (HostNetworkPortRangeStart 34345, 8 ports). */
export const DEFAULT_HOST_NETWORK_PORTS: readonly number[] = [34345, 34346, 34347, 34348, 34349, 34350, 34351, 34352];

/** What every pod-network pod serves (manifests.yaml), with the declared container port names. */
export const POD_PORTS: readonly { readonly protocol: Protocol; readonly port: number; readonly name?: string }[] = [
  { protocol: 'TCP', port: 80, name: 'web' },
  { protocol: 'TCP', port: 8080 },
  { protocol: 'UDP', port: 5353 },
  { protocol: 'UDP', port: 53, name: 'dns' },
  { protocol: 'SCTP', port: 9003 },
  { protocol: 'SCTP', port: 9005 },
];

/** What the hostNetwork pods serve, by index into HostNetworkPorts. */
export function hostNetworkServed(hnp: readonly number[]): { protocol: Protocol; port: number; name?: string }[] {
  const p = (i: number): number => {
    const v = hnp[i];
    if (v === undefined) throw new Error(`HostNetworkPorts needs 8 ports, got ${hnp.length}`);
    return v;
  };
  return [
    { protocol: 'TCP', port: p(0), name: `web-${p(0)}` },
    { protocol: 'TCP', port: p(1), name: `web-${p(1)}` },
    { protocol: 'UDP', port: p(2), name: `dns-${p(2)}` },
    { protocol: 'TCP', port: p(3) },
    { protocol: 'UDP', port: p(4), name: `dns-${p(4)}` },
    { protocol: 'TCP', port: p(5) },
    { protocol: 'SCTP', port: p(6) },
    { protocol: 'SCTP', port: p(7) },
  ];
}

export interface DualStackIPs {
  readonly v4: string;
  readonly v6: string;
}

export interface CnpModelOptions {
  readonly nodes: readonly { readonly name: string; readonly addresses: DualStackIPs }[];
  /** The node of each pod (`ns/name`). */
  readonly placement: (key: string) => string;
  /** Addresses of pod-network pods; hostNetwork pods take their node's. */
  readonly podIPs: (key: string) => DualStackIPs;
  readonly hostNetworkPorts?: readonly number[];
}

export const DEFAULT_NODES: CnpModelOptions['nodes'] = [
  { name: 'node-1', addresses: { v4: '172.18.0.11', v6: 'fd00:172:18::11' } },
  { name: 'node-2', addresses: { v4: '172.18.0.12', v6: 'fd00:172:18::12' } },
];

/** Pods alternate between two nodes in CNP_PODS order: every house has a same-node and a cross-node pair; centaur-0 and -1 sit on different nodes. */
export function defaultPlacement(key: string): string {
  return CNP_PODS.indexOf(key) % 2 === 0 ? 'node-1' : 'node-2';
}

/** 10.244.<house>.<10+index>, fd00:10:244:<house>::<10+index> (houses 1..4). */
export function defaultPodIPs(key: string): DualStackIPs {
  const i = CNP_PODS.indexOf(key);
  if (i < 0) throw new Error(`not a conformance pod: ${key}`);
  const house = Math.floor(i / 2) + 1;
  const index = (i % 2) + 10;
  return { v4: `10.244.${house}.${index}`, v6: `fd00:10:244:${house}::${index}` };
}

export const DEFAULT_MODEL_OPTIONS: CnpModelOptions = {
  nodes: DEFAULT_NODES,
  placement: defaultPlacement,
  podIPs: defaultPodIPs,
};

function nodeAddresses(o: CnpModelOptions, node: string): DualStackIPs {
  const n = o.nodes.find((x) => x.name === node);
  if (n === undefined) throw new Error(`no node ${node} in the model`);
  return n.addresses;
}

/** The address a probe dials for a pod (a hostNetwork pod: its node's). */
export function podAddress(o: CnpModelOptions, key: string, family: Family): string {
  const ips = isHostNetworkPod(key) ? nodeAddresses(o, o.placement(key)) : o.podIPs(key);
  return family === 4 ? ips.v4 : ips.v6;
}

export function cnpNamespace(house: House): RawObject {
  const name = houseNamespace(house);
  // The API server adds kubernetes.io/metadata.name; the manifest sets conformance-house.
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name, labels: { [HOUSE_LABEL]: house, [NAMESPACE_NAME_LABEL]: name } },
  };
}

function cnpPod(o: CnpModelOptions, house: House, index: 0 | 1): RawObject {
  const key = housePod(house, index);
  const [namespace, name] = key.split('/') as [string, string];
  const node = o.placement(key);
  const hostNetwork = house === HOST_NETWORK_HOUSE;
  const ips = hostNetwork ? nodeAddresses(o, node) : o.podIPs(key);
  const served = hostNetwork ? hostNetworkServed(o.hostNetworkPorts ?? DEFAULT_HOST_NETWORK_PORTS) : POD_PORTS;
  const set = STATEFULSETS[house];
  const containers = [
    { name: `${set}-client`, image: 'registry.k8s.io/e2e-test-images/agnhost:2.45' },
    ...served.map((s) => ({
      name: `${set}-${s.port}-${s.protocol.toLowerCase()}`,
      image: 'registry.k8s.io/e2e-test-images/agnhost:2.45',
      // Only the ports the manifest declares are container ports (named ports resolve against these).
      ...(s.name === undefined ? {} : { ports: [{ containerPort: s.port, protocol: s.protocol, name: s.name }] }),
    })),
  ];
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace,
      // The template's label, and what the StatefulSet controller adds.
      labels: { [HOUSE_LABEL]: house, 'statefulset.kubernetes.io/pod-name': name, 'apps.kubernetes.io/pod-index': String(index) },
    },
    spec: { nodeName: node, ...(hostNetwork ? { hostNetwork: true } : {}), containers },
    status: {
      phase: 'Running',
      hostIP: nodeAddresses(o, node).v4,
      podIP: ips.v4,
      podIPs: [{ ip: ips.v4 }, { ip: ips.v6 }],
    },
  };
}

/** A Node with InternalIP addresses and the labels the kubelet sets (the node peers select kubernetes.io/os=linux). */
export function cnpNode(name: string, addresses: DualStackIPs): RawObject {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'kubernetes.io/hostname': name, [NODE_OS_LABEL]: 'linux' } },
    status: {
      addresses: [
        { type: 'InternalIP', address: addresses.v4 },
        { type: 'InternalIP', address: addresses.v6 },
        { type: 'Hostname', address: name },
      ],
    },
  };
}

/** Namespaces, pods and nodes of the suite, no policies. */
export function cnpModel(o: CnpModelOptions = DEFAULT_MODEL_OPTIONS): RawObject[] {
  return [
    ...HOUSES.map(cnpNamespace),
    ...HOUSES.flatMap((h) => [cnpPod(o, h, 0), cnpPod(o, h, 1)]),
    ...o.nodes.map((n) => cnpNode(n.name, n.addresses)),
  ];
}
