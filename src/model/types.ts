// Normalized, validated cluster state: the input of every pure stage
// (reference evaluator, compiler, renderer). Raw Kubernetes objects are
// turned into these by model/normalize.ts; nothing downstream looks at raw
// objects again.
import type { ReadonlyList } from './list.ts';

export type Protocol = 'TCP' | 'UDP' | 'SCTP';
export const PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];

export type Family = 4 | 6;
export const FAMILIES: readonly Family[] = [4, 6];
export type Direction = 'ingress' | 'egress';
export const DIRECTIONS: readonly Direction[] = ['ingress', 'egress'];

export type Labels = Readonly<Record<string, string>>;

export type SelectorOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

export interface SelectorRequirement {
  readonly key: string;
  readonly operator: SelectorOperator;
  readonly values: readonly string[];
}

/** A validated label selector. `{}` (no labels, no expressions) selects everything. */
export interface LabelSelector {
  readonly matchLabels: Labels;
  readonly matchExpressions: readonly SelectorRequirement[];
}

export interface Namespace {
  readonly name: string;
  /** Always carries `kubernetes.io/metadata.name`, as the API server sets it. */
  readonly labels: Labels;
  /** Only present (true) with the annotation `kubesphere.io/network-isolate: enabled` (see docs/tenancy.md). */
  readonly networkIsolate?: true;
  /** The API object's version, only kept with networkIsolate (applied status reports project isolation by it). */
  readonly version?: ObjectVersion;
}

export interface ContainerPort {
  readonly name: string | undefined;
  readonly port: number;
  readonly protocol: Protocol;
}

export interface Pod {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Labels;
  readonly nodeName: string | undefined;
  readonly hostNetwork: boolean;
  /** status.phase as given (Pending, Running, Succeeded, Failed, Unknown) or undefined. */
  readonly phase: string | undefined;
  /** Canonical IP strings (see model/ip.ts formatIP), at most one per family, v4 first. */
  readonly ips: readonly string[];
  readonly ports: readonly ContainerPort[];
}

export interface Node {
  readonly name: string;
  /**
   * metadata.labels, for ClusterNetworkPolicy `nodes` peers; absent = none
   * (a `nodes` selector then sees no labels: only `{}` selects the node).
   */
  readonly labels?: Labels;
  /** Canonical IPs of status.addresses (InternalIP, ExternalIP), sorted. */
  readonly addresses: readonly string[];
  /**
   * Canonical CIDRs (host bits cleared) of spec.podCIDRs, or spec.podCIDR
   * when that list is absent; sorted, v4 first. Absent when the Node gives
   * none (e.g. CNIs with their own IPAM): then unknown local addresses
   * cannot be recognised.
   */
  readonly podCIDRs?: readonly string[];
  /** Canonical InternalIP addresses of status.addresses, sorted; only present when there are any. */
  readonly internalIPs?: readonly string[];
}

export interface PortSpec {
  readonly protocol: Protocol;
  /** undefined = every port of the protocol; string = a named container port. */
  readonly port: number | string | undefined;
  /** Only with a numeric port; the range is port..endPort inclusive. */
  readonly endPort: number | undefined;
}

export type Peer =
  | {
      readonly kind: 'pods';
      /** undefined = not given (with a namespaceSelector: every pod of the matching namespaces). */
      readonly podSelector: LabelSelector | undefined;
      /** undefined = not given: the policy's own namespace. */
      readonly namespaceSelector: LabelSelector | undefined;
    }
  | {
      readonly kind: 'ipBlock';
      /** Canonical CIDR (host bits cleared). */
      readonly cidr: string;
      readonly except: readonly string[];
    };

export interface Rule {
  /** undefined = from/to missing or empty: every source/destination. */
  readonly peers: readonly Peer[] | undefined;
  /** undefined = ports missing or empty: every port and protocol. */
  readonly ports: readonly PortSpec[] | undefined;
  /** A rule with any validation error allows nothing (fail closed). */
  readonly invalid: boolean;
}

/** NetworkPolicy's form: the pods it targets, the directions it isolates them in, its allow rules. */
export interface PolicySpec<R extends Rule = Rule> {
  /** The targets' namespace; also that of pod peers without a namespaceSelector. */
  readonly namespace: string;
  /**
   * The pods of `namespace` the policy applies to. An invalid spec.podSelector
   * is replaced by `{}` (every pod of the namespace) and all rules are marked
   * invalid: the pods are isolated and this policy allows nothing (fail closed).
   */
  readonly podSelector: LabelSelector;
  /** Directions the policy isolates (policyTypes with its defaults applied). */
  readonly types: { readonly ingress: boolean; readonly egress: boolean };
  /** Rules of isolated directions only; [] with types.ingress = deny all ingress. */
  readonly ingress: readonly R[];
  readonly egress: readonly R[];
}

export interface NetworkPolicy extends PolicySpec {
  readonly name: string;
  /** Validation errors; non-empty means the policy is (partly) enforced fail-closed. */
  readonly errors: readonly ValidationError[];
  /** The API object's version, when it came from an API server (applied status reports it). */
  readonly version?: ObjectVersion;
  /** Annotated `nft-netpol.io/staged: "true"`: evaluated in the shadow path only, not enforced (model/staged.ts). */
  readonly staged?: true;
}

/** metadata.uid, generation and resourceVersion as the API server gave them. */
export interface ObjectVersion {
  readonly uid: string | undefined;
  readonly generation: number | undefined;
  readonly resourceVersion: string | undefined;
}

/** What isolation allows besides its own scope (docs/tenancy.md); flags of render, explain, validate and run. */
export interface TenancyConfig {
  /** The cluster DNS Service (namespace/name): isolated pods may reach the pods its selector selects on port 53. */
  readonly dnsService: { readonly namespace: string; readonly name: string } | undefined;
  /** Node-local DNS cache addresses (canonical), allowed on port 53. */
  readonly nodeLocalDNS: readonly string[];
  /** Which Node status.addresses count as the nodes' addresses: InternalIP only, or InternalIP and ExternalIP. */
  readonly nodeAddresses: 'internal' | 'all';
}

/** Tenancy in force: its configuration, and what a source is still reading. */
export interface TenancySettings extends TenancyConfig {
  /** Services (ns/name) a watch is still listing: peers naming them allow nothing, without an error. */
  readonly pendingServices?: readonly string[];
}

/** tenant.kubesphere.io Workspace (v1alpha1) or WorkspaceTemplate (v1alpha2), cluster-scoped. */
export interface Workspace {
  readonly name: string;
  readonly networkIsolation: boolean;
  /** The API object's version, when it came from an API server (applied status reports workspace isolation by it). */
  readonly version?: ObjectVersion;
  /** Validation errors (an unreadable networkIsolation, read as true); absent when none. */
  readonly errors?: readonly ValidationError[];
}

export interface ServicePort {
  readonly name: string | undefined;
  readonly protocol: Protocol;
  readonly port: number;
  /** spec.ports[].targetPort, defaulted to port: a number, or a container port name resolved per pod. */
  readonly targetPort: number | string;
}

/** The part of a v1 Service that service peers use. */
export interface Service {
  readonly namespace: string;
  readonly name: string;
  /** undefined: no selector (or an empty one): the Service selects no pods (endpoints are managed by hand). */
  readonly selector: Labels | undefined;
  readonly ports: readonly ServicePort[];
}

export type NamespacePolicyPeer =
  | { readonly kind: 'namespace'; readonly name: string }
  | { readonly kind: 'ipBlock'; readonly cidr: string; readonly except: readonly string[] }
  | { readonly kind: 'service'; readonly namespace: string; readonly name: string };

export interface NamespacePolicyRule {
  /** undefined = from/to missing or empty: every source/destination. */
  readonly peers: readonly NamespacePolicyPeer[] | undefined;
  readonly ports: readonly PortSpec[] | undefined;
  readonly invalid: boolean;
}

/** network.kubesphere.io/v1alpha1 NamespaceNetworkPolicy: a NetworkPolicy for every pod of its namespace. */
export interface NamespaceNetworkPolicy {
  readonly namespace: string;
  readonly name: string;
  readonly types: { readonly ingress: boolean; readonly egress: boolean };
  readonly ingress: readonly NamespacePolicyRule[];
  readonly egress: readonly NamespacePolicyRule[];
  readonly errors: readonly ValidationError[];
  /** The API object's version, when it came from an API server (applied status reports it). */
  readonly version?: ObjectVersion;
}

/** policy.networking.k8s.io/v1alpha2 ClusterNetworkPolicy `spec.tier`. */
export type ClusterPolicyTier = 'Admin' | 'Baseline';
export const CLUSTER_POLICY_TIERS: readonly ClusterPolicyTier[] = ['Admin', 'Baseline'];
/** A ClusterNetworkPolicy rule's `action`. */
export type ClusterPolicyAction = 'Accept' | 'Deny' | 'Pass';

/**
 * Pods by namespace AND pod selector (`subject.pods`, peer `pods`); a
 * `namespaces` subject or peer is the same with podSelector `{}`. hostNetwork
 * pods are never selected.
 */
export interface NamespacedPods {
  readonly namespaceSelector: LabelSelector;
  readonly podSelector: LabelSelector;
}

export type ClusterPolicyPeer =
  /** `namespaces` or `pods`. */
  | ({ readonly kind: 'pods' } & NamespacedPods)
  /** Egress `networks`: canonical CIDRs (host bits cleared); they match pod addresses too. */
  | { readonly kind: 'networks'; readonly cidrs: readonly string[] }
  /** Egress `nodes` (experimental): the addresses of the nodes the selector selects (Node.addresses). */
  | { readonly kind: 'nodes'; readonly nodeSelector: LabelSelector }
  /** Egress `domainNames` (experimental): read, never enforced (matches nothing; reported). */
  | { readonly kind: 'domainNames'; readonly names: readonly string[] }
  /**
   * A peer with no field this version knows (a newer API): fails closed as
   * the API says: an Accept rule with it matches nothing, a Deny or Pass rule
   * with it is read as "Deny all" (src/kinds/cluster-network-policy.ts).
   */
  | { readonly kind: 'unknown' };

export type ClusterPolicyProtocol =
  /** `tcp|udp|sctp: {destinationPort: {number} | {range: {start, end}}}`; port undefined = every port of the protocol. */
  | {
      readonly kind: 'port';
      readonly protocol: Protocol;
      readonly port: number | undefined;
      readonly endPort: number | undefined;
    }
  /** `destinationNamedPort`: a container port name of the destination pod (any protocol it is declared with). */
  | { readonly kind: 'named'; readonly name: string };

export interface ClusterPolicyRule {
  /** `name` ('' when not given). */
  readonly name: string;
  readonly action: ClusterPolicyAction;
  /** `from` / `to`. */
  readonly peers: readonly ClusterPolicyPeer[];
  /** undefined: no `protocols`, every protocol and port (ICMP included). */
  readonly protocols: readonly ClusterPolicyProtocol[] | undefined;
  /**
   * Any validation error in the rule. Fails closed: an invalid Accept rule
   * matches nothing; an invalid Deny or Pass rule is read as "Deny all" (as
   * with an unknown peer), so an error never opens traffic an admin denied.
   */
  readonly invalid: boolean;
}

/**
 * ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2), cluster-scoped;
 * the legacy v1alpha1 AdminNetworkPolicy / BaselineAdminNetworkPolicy are
 * read into the same form (Allow = Accept, ports = protocols).
 */
export interface ClusterNetworkPolicy {
  readonly name: string;
  /** The kind it was read from: 'ClusterNetworkPolicy', 'AdminNetworkPolicy' or 'BaselineAdminNetworkPolicy'. */
  readonly sourceKind: string;
  readonly tier: ClusterPolicyTier;
  /** 0..1000, lower first (a legacy BaselineAdminNetworkPolicy has none: 0). */
  readonly priority: number;
  /**
   * The pods the policy applies to. An invalid subject is read as every pod
   * (fail closed together with the rules' own handling).
   */
  readonly subject: NamespacedPods;
  /** In order: the first matching rule decides. */
  readonly ingress: readonly ClusterPolicyRule[];
  readonly egress: readonly ClusterPolicyRule[];
  readonly errors: readonly ValidationError[];
  /** The API object's version, when it came from an API server. */
  readonly version?: ObjectVersion;
  /** Annotated `nft-netpol.io/staged: "true"`: evaluated in the shadow path only, not enforced (model/staged.ts). */
  readonly staged?: true;
}

export interface ValidationError {
  readonly kind: string;
  /** undefined for cluster-scoped objects. */
  readonly namespace: string | undefined;
  readonly name: string;
  /** Field path as the API server prints it, e.g. spec.ingress[0].ports[1].endPort */
  readonly path: string;
  readonly message: string;
}

export interface ClusterState {
  /** Sorted by name. */
  readonly namespaces: readonly Namespace[];
  /** Sorted by namespace, then name. An array, or (the agent's) a list shared in chunks with the last snapshot's (list.ts). */
  readonly pods: ReadonlyList<Pod>;
  /** Sorted by namespace, then name. An array, or (the agent's) a list shared in chunks with the last snapshot's, as `pods`. */
  readonly policies: ReadonlyList<NetworkPolicy>;
  /** Sorted by name. */
  readonly nodes: readonly Node[];
  /** Tenancy on (docs/tenancy.md); absent: off (no isolation, no NamespaceNetworkPolicy). */
  readonly tenancy?: TenancySettings;
  /** Tenancy inputs (absent = none). Sorted by name. */
  readonly workspaces?: readonly Workspace[];
  /** Sorted by namespace, then name. */
  readonly namespacePolicies?: readonly NamespaceNetworkPolicy[];
  /** Only the Services that service peers and the DNS allowance name. Sorted by namespace, then name. */
  readonly services?: readonly Service[];
  /** ClusterNetworkPolicies (and legacy ANP/BANP read as such); absent = none. Sorted by name. */
  readonly clusterPolicies?: readonly ClusterNetworkPolicy[];
}

/** `default/web spec.ingress[0].ports[1].endPort: must be >= port (8080)` */
export function formatValidationError(e: ValidationError): string {
  const id = e.namespace === undefined ? e.name : `${e.namespace}/${e.name}`;
  return `${id} ${e.path}: ${e.message}`;
}

export function objectKey(o: { readonly namespace: string; readonly name: string }): string {
  return `${o.namespace}/${o.name}`;
}

/** Pods that can be a target or a peer: not hostNetwork, has an IP, not finished. */
export function isActivePod(p: Pod): boolean {
  return !p.hostNetwork && p.ips.length > 0 && p.phase !== 'Succeeded' && p.phase !== 'Failed';
}
