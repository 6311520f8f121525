// Builds normalized ClusterState values directly (no raw objects, no
// normalizer) for compiler and renderer tests. Defaults describe a running,
// active pod; namespaces referenced by pods or policies are created with the
// label the API server sets.
import type {
  ClusterState,
  ContainerPort,
  LabelSelector,
  Namespace,
  NetworkPolicy,
  Node,
  Peer,
  Pod,
  PortSpec,
  Protocol,
  Rule,
  SelectorRequirement,
} from '../../src/model/types.ts';

export function sel(matchLabels: Record<string, string> = {}, matchExpressions: SelectorRequirement[] = []): LabelSelector {
  return { matchLabels, matchExpressions };
}

export const ALL: LabelSelector = sel();

export function ns(name: string, labels: Record<string, string> = {}): Namespace {
  return { name, labels: { 'kubernetes.io/metadata.name': name, ...labels } };
}

export interface PodOpts {
  labels?: Record<string, string>;
  node?: string | undefined;
  ips?: string[];
  ports?: ContainerPort[];
  phase?: string;
  hostNetwork?: boolean;
}

export function pod(namespace: string, name: string, o: PodOpts = {}): Pod {
  return {
    namespace,
    name,
    labels: o.labels ?? {},
    nodeName: 'node' in o ? o.node : 'node-1',
    hostNetwork: o.hostNetwork ?? false,
    phase: o.phase ?? 'Running',
    ips: o.ips ?? [],
    ports: o.ports ?? [],
  };
}

export function cport(name: string | undefined, port: number, protocol: Protocol = 'TCP'): ContainerPort {
  return { name, port, protocol };
}

export function podPeer(podSelector: LabelSelector | undefined, namespaceSelector?: LabelSelector): Peer {
  return { kind: 'pods', podSelector, namespaceSelector };
}

export function ipBlock(cidr: string, except: string[] = []): Peer {
  return { kind: 'ipBlock', cidr, except };
}

export function port(protocol: Protocol, p?: number | string, endPort?: number): PortSpec {
  return { protocol, port: p, endPort };
}

export function rule(peers?: Peer[], ports?: PortSpec[], invalid = false): Rule {
  return { peers, ports, invalid };
}

export interface PolicyOpts {
  podSelector?: LabelSelector;
  ingress?: Rule[];
  egress?: Rule[];
  /** Default: ingress always, egress when egress rules are given (like policyTypes defaulting). */
  types?: { ingress: boolean; egress: boolean };
}

export function policy(namespace: string, name: string, o: PolicyOpts = {}): NetworkPolicy {
  return {
    namespace,
    name,
    podSelector: o.podSelector ?? ALL,
    types: o.types ?? { ingress: true, egress: o.egress !== undefined },
    ingress: o.ingress ?? [],
    egress: o.egress ?? [],
    errors: [],
  };
}

export function node(name: string, addresses: string[] = []): Node {
  return { name, addresses };
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A sorted ClusterState; missing namespaces are added unless `strictNamespaces`. */
export function state(parts: {
  namespaces?: readonly Namespace[];
  pods?: readonly Pod[];
  policies?: readonly NetworkPolicy[];
  nodes?: readonly Node[];
  strictNamespaces?: boolean;
}): ClusterState {
  const namespaces = new Map<string, Namespace>();
  for (const n of parts.namespaces ?? []) namespaces.set(n.name, n);
  if (parts.strictNamespaces !== true) {
    for (const o of [...(parts.pods ?? []), ...(parts.policies ?? [])])
      if (!namespaces.has(o.namespace)) namespaces.set(o.namespace, ns(o.namespace));
  }
  const byKey = (a: { namespace: string; name: string }, b: { namespace: string; name: string }) =>
    cmp(a.namespace, b.namespace) || cmp(a.name, b.name);
  return {
    namespaces: [...namespaces.values()].sort((a, b) => cmp(a.name, b.name)),
    pods: [...(parts.pods ?? [])].sort(byKey),
    policies: [...(parts.policies ?? [])].sort(byKey),
    nodes: [...(parts.nodes ?? [node('node-1')])].sort((a, b) => cmp(a.name, b.name)),
  };
}

/** The pod `namespace/name` of a state; throws if the state has none (a test's input must hold what it names). */
export function podOf(state: ClusterState, key: string): Pod {
  const pod = state.pods.find((p) => `${p.namespace}/${p.name}` === key);
  if (pod === undefined) throw new Error(`pod ${key} missing from the state`);
  return pod;
}
