// ClusterSource over the Kubernetes API: what one node needs, not the cluster.
//
// Fixed watches:
//   pods        spec.nodeName=<node>   the local pods (targets of all rules here)
//   namespaces                         all: namespaceSelectors are evaluated here
//   networkpolicies                    all namespaces: relevance needs every policy
//   nodes       metadata.name=<node>   the local node's addresses (kubelet probes)
// Remote pods are watched only as far as the peers of policies that select a
// local pod need them (peer-demand.ts): namespaced pod watches with a
// server-side labelSelector per distinct peer selector, collapsing to
// cluster-wide selector watches and finally to one cluster-wide pod watch past
// maxPeerWatches. The plan is recomputed (debounced) whenever policies, local
// pods or namespaces change.
//
// Plan changes are make-before-break: new peer watches start at once, and
// watches no longer needed keep their cache (and stay in the snapshot) until
// every watch of the new plan has listed; watches kept by both plans are never
// touched, so still-needed pods are never dropped.
//
// Tenancy (opts.tenancy set, docs/tenancy.md) adds: Workspaces and
// NamespaceNetworkPolicies (custom resources that may be absent: see
// optional-watch.ts), every Node (the nodes' addresses are an isolation
// allowance), and one watch per Service that a service peer or the DNS
// allowance names (only those; past maxServiceWatches one cluster-wide watch).
// The snapshot carries the policies tenancy derives, and the peer plan
// follows their peers too.
//
// ClusterNetworkPolicies (policy.networking.k8s.io/v1alpha2) and the legacy
// v1alpha1 AdminNetworkPolicies / BaselineAdminNetworkPolicies are watched
// whenever their CRDs are installed (optional watches, re-probed like the
// tenancy CRDs). Their pod and namespace peers join the peer plan; their
// nodes peers make the source watch every Node (only while a policy that
// selects a local pod has one; with tenancy every Node is watched anyway).
//
// synced() latches true once the four fixed watches and the peer watches of
// the first plan have all listed. After that a newly needed peer watch that
// has not listed yet leaves its pods out of the snapshot: traffic from or to
// them is denied until it has (fail closed), while every other change keeps
// flowing to the kernel, including ones that revoke access.
import { kubeList } from './kube-http.ts';
import type { KubeAccess, Query, RawList } from './kube-http.ts';
import { assembleState, byClusterPolicy, byObjectKey, makeState } from '../model/state.ts';
import { namespaceWithLabels } from '../model/normalize-namespace.ts';
import { ChunkedSortedView } from './sorted-view.ts';
import type { Normalized } from '../model/normalize.ts';
import type {
  ClusterNetworkPolicy,
  ClusterState,
  Namespace,
  NamespaceNetworkPolicy,
  NetworkPolicy,
  Node,
  Pod,
  Service,
  TenancySettings,
  Workspace,
} from '../model/types.ts';
import type { TenancyConfig } from '../model/types.ts';
import type { ReadonlyList } from '../model/list.ts';
import {
  CLUSTER_POLICY_APIS,
  NAMESPACE_API,
  NAMESPACE_NETWORK_POLICY_API,
  NETWORK_POLICY_API,
  NODE_API,
  POD_API,
  SERVICE_API,
  WORKSPACE_API,
  collectionPath,
} from '../kinds/api-kinds.ts';
import type { ApiKind } from '../kinds/api-kinds.ts';
import { contributedPolicies } from '../kinds/registry.ts';
import { namespaceNetworkPolicyKind, projectIsolationKind, workspaceIsolationKind } from '../kinds/tenancy.ts';
import { OptionalWatch } from './optional-watch.ts';
import type { WatchLike } from './optional-watch.ts';
import {
  ALL_PODS,
  DEFAULT_MAX_PEER_WATCHES,
  nodePeersNeeded,
  planPeerWatches,
  relevantClusterPolicies,
  relevantPolicies,
  samePlan,
} from './peer-demand.ts';
import type { PeerPlan, PodWatchSpec } from './peer-demand.ts';
import { ResourceWatch } from './resource-watch.ts';
import type { ChangeType, ListPage, WatchTiming } from './resource-watch.ts';
import { SILENT_LOGGER } from './source.ts';
import type { ClusterSource, SourceLogger, WatchStatus } from './source.ts';

export interface KubeSourceOptions {
  /** Credentials and server: the lean loader's (kube-access.ts) or a client-node KubeConfig. */
  readonly kubeConfig: KubeAccess;
  /** This node's name (spec.nodeName of its pods). */
  readonly nodeName: string;
  /** Bound on remote pod watches before falling back to cluster-wide ones (default 32). */
  readonly maxPeerWatches?: number;
  /**
   * 'needed' (default): remote pods as the relevant policies' peers need them.
   * 'all': one cluster-wide pod watch (every pod), e.g. for comparison or when
   * the API server should serve fewer, wider watches.
   */
  readonly remotePods?: 'needed' | 'all';
  /** Debounce of peer-plan recomputation after policy/pod/namespace changes (default 20 ms). */
  readonly planDebounceMs?: number;
  readonly timing?: Partial<WatchTiming>;
  /** Objects per list page (default 500): bounds the memory peak of (re)lists. */
  readonly listPageSize?: number;
  readonly log?: SourceLogger;
  /** Tenancy on (docs/tenancy.md): watch Workspaces, NamespaceNetworkPolicies, named Services and every Node. */
  readonly tenancy?: TenancyConfig;
  /** While a tenancy or network-policy-api CRD is not installed, how often to look again (default 30 s). */
  readonly crdProbeMs?: number;
  /** Bound on per-Service watches before one cluster-wide Service watch (default 32). */
  readonly maxServiceWatches?: number;
  /**
   * Watch ClusterNetworkPolicies and the legacy AdminNetworkPolicies /
   * BaselineAdminNetworkPolicies while their CRDs are installed (default true).
   */
  readonly clusterPolicies?: boolean;
}

/** A plan waits this many times the last plan's duration after it (see #schedulePlan). */
const PLAN_BACKOFF = 4;
/** A plan put off by the agent's applies looks again after this long, and waits at most PLAN_DEFER_MAX_MS. */
const PLAN_RETRY_MS = 25;
const PLAN_DEFER_MAX_MS = 1_000;

/** The key of the single cluster-wide Service watch (past maxServiceWatches). */
const ALL_SERVICES = '*';

/** The Services tenancy needs (ns/name, sorted): those service peers name, and the cluster DNS. */
export function neededServices(nsnps: readonly NamespaceNetworkPolicy[], config: TenancyConfig): string[] {
  const out = new Set<string>();
  if (config.dnsService !== undefined) out.add(`${config.dnsService.namespace}/${config.dnsService.name}`);
  for (const p of nsnps)
    for (const r of [...p.ingress, ...p.egress])
      for (const peer of r.peers ?? []) if (peer.kind === 'service') out.add(`${peer.namespace}/${peer.name}`);
  return [...out].sort();
}

interface PeerWatch {
  spec: PodWatchSpec;
  /** Namespaces filter of spec, as a set. */
  filter: ReadonlySet<string> | undefined;
  readonly watch: ResourceWatch<Pod>;
  /** Not in the current plan: dropped once the current plan has synced. */
  retiring: boolean;
}

export interface SourceCounters {
  /** Objects received from the API server (list items + watch events), all watches. */
  readonly received: number;
  /** Objects cached, all watches. */
  readonly objects: number;
  readonly watches: number;
  readonly peerMode: PeerPlan['mode'] | undefined;
}

function paging(page: ListPage): Query {
  return { limit: page.limit, continue: page.continue };
}

function peerName(spec: PodWatchSpec): string {
  const where = spec.namespace === undefined ? ' (all namespaces)' : ` -n ${spec.namespace}`;
  return `pods${where}${spec.labelSelector === '' ? '' : ` ${spec.labelSelector}`}`;
}

const byName = (a: { readonly name: string }, b: { readonly name: string }): number =>
  a.name < b.name ? -1 : a.name > b.name ? 1 : 0;

export class KubeClusterSource implements ClusterSource {
  readonly #opts: KubeSourceOptions;
  readonly #log: SourceLogger;
  #workspaces: OptionalWatch<Workspace> | undefined;
  #nsnps: OptionalWatch<NamespaceNetworkPolicy> | undefined;
  #clusterPolicies: OptionalWatch<ClusterNetworkPolicy>[] = [];
  /** Every Node, while a cluster policy's nodes peer needs them (without tenancy, which watches every Node anyway). */
  #allNodes: ResourceWatch<Node> | undefined;
  /** ns/name (or ALL_SERVICES) -> its watch. */
  readonly #services = new Map<string, ResourceWatch<Service>>();
  #neededServices: ReadonlySet<string> = new Set();
  #state: 'new' | 'running' | 'stopped' = 'new';
  #localPods: ResourceWatch<Pod> | undefined;
  #namespaces: ResourceWatch<Namespace> | undefined;
  #policies: ResourceWatch<NetworkPolicy> | undefined;
  #nodes: ResourceWatch<Node> | undefined;
  readonly #peers = new Map<string, PeerWatch>();
  #retired = { received: 0 };
  #plan: PeerPlan | undefined;
  #planTimer: NodeJS.Timeout | undefined;
  #busy: (() => boolean) | undefined;
  /** Policies (and cluster policies) that selected a local pod at the last plan, in order. */
  #lastRelevant: readonly object[] | undefined;
  /** Something besides local pods changed since the last plan (policies, namespaces, a watch synced). */
  #planInputsChanged = true;
  /** Duration and end (Date.now()) of the last plan: spaces the next one. */
  #lastPlanMs = 0;
  #lastPlanEnd = 0;
  #synced = false;
  #cache: ClusterState | undefined;
  /** The snapshot's pods and policies, advanced by the keys that changed (sorted-view.ts). */
  readonly #podView = new ChunkedSortedView<Pod>();
  readonly #policyView = new ChunkedSortedView<NetworkPolicy>();
  /** The snapshot's other lists, sorted, kept until their kind changes (an unchanged list is the same array). */
  readonly #lists = new Map<string, unknown>();
  #lastTenancy: TenancySettings | undefined;
  readonly #changeListeners: ((reason: string) => void)[] = [];
  readonly #invalidListeners: ((policy: NetworkPolicy) => void)[] = [];

  constructor(opts: KubeSourceOptions) {
    this.#opts = opts;
    this.#log = opts.log ?? SILENT_LOGGER;
  }

  /** One page of a collection (raw JSON, as the watch delivers objects). */
  #get(path: string, query: Query): Promise<RawList> {
    return kubeList(this.#opts.kubeConfig, path, query);
  }

  async start(): Promise<void> {
    if (this.#state !== 'new') return;
    this.#state = 'running';
    const node = this.#opts.nodeName;
    const nodeSel = `spec.nodeName=${node}`;
    this.#localPods = this.#watch<Pod>(
      POD_API.plural,
      `${POD_API.plural} ${nodeSel}`,
      collectionPath(POD_API),
      POD_API.normalize,
      (page) => this.#get(collectionPath(POD_API), { fieldSelector: nodeSel, ...paging(page) }),
      {
        fieldSelector: nodeSel,
        replan: true,
        probeList: () => this.#get(collectionPath(POD_API), { limit: 1 }),
      },
    );
    this.#namespaces = this.#watch<Namespace>(
      NAMESPACE_API.plural,
      NAMESPACE_API.plural,
      collectionPath(NAMESPACE_API),
      NAMESPACE_API.normalize,
      (page) => this.#get(collectionPath(NAMESPACE_API), paging(page)),
      { replan: true, probeList: () => this.#get(collectionPath(NAMESPACE_API), { limit: 1 }) },
    );
    this.#policies = this.#watch<NetworkPolicy>(
      NETWORK_POLICY_API.plural,
      NETWORK_POLICY_API.plural,
      collectionPath(NETWORK_POLICY_API),
      NETWORK_POLICY_API.normalize,
      (page) => this.#get(collectionPath(NETWORK_POLICY_API), paging(page)),
      { replan: true, invalid: true, probeList: () => this.#get(collectionPath(NETWORK_POLICY_API), { limit: 1 }) },
    );
    const nameSel = `metadata.name=${node}`;
    // With tenancy, every node: their addresses are an isolation allowance.
    this.#nodes =
      this.#opts.tenancy === undefined
        ? this.#watch<Node>(
            NODE_API.plural,
            `${NODE_API.plural} ${nameSel}`,
            collectionPath(NODE_API),
            NODE_API.normalize,
            (page) => this.#get(collectionPath(NODE_API), { fieldSelector: nameSel, ...paging(page) }),
            { fieldSelector: nameSel, probeList: () => this.#get(collectionPath(NODE_API), { limit: 1 }) },
          )
        : this.#watch<Node>(
            NODE_API.plural,
            NODE_API.plural,
            collectionPath(NODE_API),
            NODE_API.normalize,
            (page) => this.#get(collectionPath(NODE_API), paging(page)),
            { probeList: () => this.#get(collectionPath(NODE_API), { limit: 1 }) },
          );
    if (this.#opts.tenancy !== undefined) {
      this.#workspaces = this.#optional(WORKSPACE_API);
      this.#nsnps = this.#optional(NAMESPACE_NETWORK_POLICY_API);
    }
    this.#clusterPolicies = this.#opts.clusterPolicies === false ? [] : CLUSTER_POLICY_APIS.map((d) => this.#optional(d));
    for (const w of this.#fixed()) w.start();
    this.#planServices();
  }

  /** A watch of a custom resource that may not be installed (optional-watch.ts), cluster-wide. */
  #optional<T>(d: ApiKind<T>): OptionalWatch<T> {
    const r = { group: d.group, version: d.version, plural: d.plural };
    const list = (page: ListPage): Promise<RawList> => this.#get(collectionPath(d), paging(page));
    return new OptionalWatch<T>({
      name: r.plural,
      probe: () => list({ limit: 1, continue: undefined }),
      make: () =>
        this.#watch<T>(d.plural, d.plural, collectionPath(d), d.normalize, list, {
          replan: true,
          invalid: false,
        }),
      ...(this.#opts.crdProbeMs === undefined ? {} : { probeMs: this.#opts.crdProbeMs }),
      onSynced: () => this.#watchSynced(r.plural),
      onAppeared: () => this.#emit(`${r.plural} appeared`),
      log: this.#log,
    });
  }

  /** Starts the Service watches tenancy needs now, and stops those it no longer needs. */
  #planServices(): void {
    const t = this.#opts.tenancy;
    if (t === undefined || this.#state !== 'running') return;
    const needed = neededServices([...(this.#nsnps?.values() ?? [])], t);
    this.#neededServices = new Set(needed);
    const max = this.#opts.maxServiceWatches ?? 32;
    const keys = needed.length > max ? [ALL_SERVICES] : needed;
    const wanted = new Set(keys);
    for (const key of keys) {
      if (this.#services.has(key)) continue;
      let w: ResourceWatch<Service>;
      if (key === ALL_SERVICES) {
        w = this.#watch<Service>(
          SERVICE_API.plural,
          `${SERVICE_API.plural} (all namespaces)`,
          collectionPath(SERVICE_API),
          SERVICE_API.normalize,
          (page) => this.#get(collectionPath(SERVICE_API), paging(page)),
          { replan: true },
        );
      } else {
        const [namespace = '', name = ''] = key.split('/');
        const sel = `metadata.name=${name}`;
        const servicesIn = `/api/${SERVICE_API.version}/namespaces/${encodeURIComponent(namespace)}/${SERVICE_API.plural}`;
        w = this.#watch<Service>(
          SERVICE_API.plural,
          `${SERVICE_API.plural} -n ${namespace} ${sel}`,
          servicesIn,
          SERVICE_API.normalize,
          (page) => this.#get(servicesIn, { fieldSelector: sel, ...paging(page) }),
          { fieldSelector: sel, replan: true },
        );
      }
      this.#services.set(key, w);
      w.start();
    }
    for (const [key, w] of this.#services) {
      if (wanted.has(key)) continue;
      this.#services.delete(key);
      this.#retired.received += w.received;
      void w.stop();
      this.#emit(`service watch ${w.name} dropped`);
    }
  }

  /** Starts or stops the every-Node watch that cluster policies' nodes peers need. */
  #planNodes(): void {
    if (this.#opts.tenancy !== undefined || this.#state !== 'running') return;
    const needed = nodePeersNeeded({
      policies: [],
      localPods: [...(this.#localPods?.values() ?? [])],
      namespaces: [...(this.#namespaces?.values() ?? [])],
      clusterPolicies: this.#clusterPolicyValues(),
    });
    if (needed && this.#allNodes === undefined) {
      this.#allNodes = this.#watch<Node>(
        NODE_API.plural,
        NODE_API.plural,
        collectionPath(NODE_API),
        NODE_API.normalize,
        (page) => this.#get(collectionPath(NODE_API), paging(page)),
        {
          probeList: () => this.#get(collectionPath(NODE_API), { limit: 1 }),
        },
      );
      this.#allNodes.start();
    } else if (!needed && this.#allNodes !== undefined) {
      const w = this.#allNodes;
      this.#allNodes = undefined;
      this.#retired.received += w.received;
      void w.stop();
      this.#emit('every-node watch dropped');
    }
  }

  #clusterPolicyValues(): ClusterNetworkPolicy[] {
    return this.#clusterPolicies.flatMap((w) => [...w.values()]);
  }

  /** The nodes of the snapshot: this node's watch, and every Node while that watch runs. */
  #nodeValues(): Node[] {
    const byName = new Map<string, Node>();
    for (const n of this.#nodes?.values() ?? []) byName.set(n.name, n);
    for (const n of this.#allNodes?.values() ?? []) if (!byName.has(n.name)) byName.set(n.name, n);
    return [...byName.values()];
  }

  async stop(): Promise<void> {
    if (this.#state === 'stopped') return;
    this.#state = 'stopped';
    clearTimeout(this.#planTimer);
    await Promise.all(
      [
        ...this.#fixed(),
        ...[...this.#peers.values()].map((p) => p.watch),
        ...this.#services.values(),
        ...(this.#allNodes === undefined ? [] : [this.#allNodes]),
      ].map((w) => w.stop()),
    );
  }

  synced(): boolean {
    return this.#synced;
  }

  snapshot(): ClusterState {
    if (this.#cache !== undefined) return this.#cache;
    // The work of a snapshot follows what changed since the last one: the
    // pods and policies are advanced by key, the other lists rebuilt only
    // when their kind changed (issue 24; at 100k pods sorting every pod was
    // 40-60 ms of each change).
    const pods = this.#podView.list({ all: () => this.#allPods(), get: (ns, name) => this.#pod(ns, name) });
    const policies = this.#policyView.list({
      all: () => [...(this.#policies?.values() ?? [])],
      get: (ns, name) => this.#policies?.get(name, ns),
    });
    const t = this.#opts.tenancy;
    const parts = this.#list('tenancy', () => {
      const p = this.#tenancyParts();
      return {
        workspaces: p.workspaces.sort((a, b) => byName(a, b)),
        namespacePolicies: p.namespacePolicies.sort(byObjectKey),
        services: p.services.sort(byObjectKey),
      };
    });
    const state = assembleState({
      namespaces: this.#list('namespaces', () => this.#namespaceValues(pods, policies, parts.namespacePolicies)),
      pods,
      policies,
      nodes: this.#list('nodes', () => this.#nodeValues().sort(byName)),
      ...parts,
      ...(t === undefined ? {} : { tenancy: this.#tenancySettings(t) }),
      clusterPolicies: this.#list('clusterpolicies', () => this.#clusterPolicyValues().sort(byClusterPolicy)),
    });
    this.#cache = state;
    return state;
  }

  /** A list of the snapshot, built again only after a change of its kind (#changed drops it). */
  #list<T>(kind: string, build: () => T): T {
    if (this.#lists.has(kind)) return this.#lists.get(kind) as T;
    const v = build();
    this.#lists.set(kind, v);
    return v;
  }

  /**
   * Every pod of the watches, one per key. A pod can be in several watches
   * (as different objects): the local watch alone says what pods this node
   * has (a peer watch's copy of one is left out, so its events change
   * nothing: see the peer watches' `ignored`), and among peer watches the
   * one added last wins (#pod says the same for one key). A local pod is in
   * a peer watch too whenever a policy's peers select it (at 100k pods: every
   * pod, in the cluster-wide watch), and the two streams deliver its events
   * in either order: with either copy standing in for the other, a deletion
   * showed only once both had come, and the first event's apply changed
   * nothing but held the second's back by the debounce (~40 ms).
   */
  #allPods(): Pod[] {
    const all: Pod[] = [...(this.#localPods?.values() ?? [])];
    const node = this.#opts.nodeName;
    for (const pw of [...this.#peers.values()].reverse()) {
      for (const p of pw.watch.values())
        if ((pw.filter === undefined || pw.filter.has(p.namespace)) && p.nodeName !== node) all.push(p);
    }
    // Stable: the first of each key is the one that wins.
    all.sort(byObjectKey);
    let n = 0;
    for (let i = 0; i < all.length; i++) {
      const p = all[i] as Pod;
      const prev = n === 0 ? undefined : all[n - 1];
      if (prev !== undefined && prev.namespace === p.namespace && prev.name === p.name) continue;
      all[n++] = p;
    }
    all.length = n;
    return all;
  }

  /** The pod of one key, by the precedence of #allPods. */
  #pod(ns: string, name: string): Pod | undefined {
    const local = this.#localPods?.get(name, ns);
    if (local !== undefined) return local;
    const peers = [...this.#peers.values()];
    for (let i = peers.length - 1; i >= 0; i--) {
      const pw = peers[i] as PeerWatch;
      if (pw.filter !== undefined && !pw.filter.has(ns)) continue;
      const p = pw.watch.get(name, ns);
      // A copy of one of this node's pods is passed over, as #allPods does.
      if (p !== undefined && p.nodeName !== this.#opts.nodeName) return p;
    }
    return undefined;
  }

  /** The namespaces, sorted, with an implicit (label-less) one for objects in a namespace not (yet) seen. */
  #namespaceValues(
    pods: ReadonlyList<Pod>,
    policies: ReadonlyList<NetworkPolicy>,
    nsnps: readonly NamespaceNetworkPolicy[],
  ): Namespace[] {
    const all = new Map<string, Namespace>();
    for (const ns of this.#namespaces?.values() ?? []) all.set(ns.name, ns);
    for (const list of [pods, policies, nsnps]) {
      for (const o of list) if (!all.has(o.namespace)) all.set(o.namespace, namespaceWithLabels(o.namespace, {}));
    }
    return [...all.values()].sort(byName);
  }

  /** The tenancy settings with the Services still pending: the same object while they are the same. */
  #tenancySettings(t: NonNullable<KubeSourceOptions['tenancy']>): TenancySettings {
    const pending = [...this.#pendingServices()];
    const last = this.#lastTenancy;
    if (last?.pendingServices?.length === pending.length && pending.every((k, i) => last.pendingServices?.[i] === k)) {
      return last;
    }
    const next: TenancySettings = { ...t, pendingServices: pending };
    this.#lastTenancy = next;
    return next;
  }

  /** Needed Services whose watch has not listed yet (or not started: the NSNP naming them just arrived). */
  #pendingServices(): ReadonlySet<string> {
    const t = this.#opts.tenancy;
    if (t === undefined) return new Set();
    const all = this.#services.get(ALL_SERVICES);
    const out = new Set<string>();
    for (const key of neededServices([...(this.#nsnps?.values() ?? [])], t)) {
      const w = all ?? this.#services.get(key);
      if (w === undefined || !w.synced()) out.add(key);
    }
    return out;
  }

  /** The tenancy inputs of the snapshot (only the Services tenancy needs). */
  #tenancyParts(): { workspaces: Workspace[]; namespacePolicies: NamespaceNetworkPolicy[]; services: Service[] } {
    const services = new Map<string, Service>();
    for (const w of this.#services.values()) {
      for (const svc of w.values()) {
        const key = `${svc.namespace}/${svc.name}`;
        if (this.#neededServices.has(key)) services.set(key, svc);
      }
    }
    return {
      workspaces: [...(this.#workspaces?.values() ?? [])],
      namespacePolicies: [...(this.#nsnps?.values() ?? [])],
      services: [...services.values()],
    };
  }

  onChange(listener: (reason: string) => void): void {
    this.#changeListeners.push(listener);
  }

  onInvalid(listener: (policy: NetworkPolicy) => void): void {
    this.#invalidListeners.push(listener);
  }

  status(): readonly WatchStatus[] {
    const peers = [...this.#peers.values()].sort((a, b) => (a.spec.key < b.spec.key ? -1 : a.spec.key > b.spec.key ? 1 : 0));
    const services = [...this.#services.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, w]) => w);
    const nodes = this.#allNodes === undefined ? [] : [this.#allNodes];
    return [...this.#fixed(), ...peers.map((p) => p.watch), ...services, ...nodes].map((w) => w.status());
  }

  /** The current remote-pod plan (undefined before the first one). */
  peerPlan(): PeerPlan | undefined {
    return this.#plan;
  }

  /** For benchmarks and debugging. */
  counters(): SourceCounters {
    const all = [
      ...this.#fixed(),
      ...[...this.#peers.values()].map((p) => p.watch),
      ...this.#services.values(),
      ...(this.#allNodes === undefined ? [] : [this.#allNodes]),
    ];
    return {
      received: this.#retired.received + all.reduce((n, w) => n + w.received, 0),
      objects: all.reduce((n, w) => n + w.size, 0),
      watches: all.length,
      peerMode: this.#plan?.mode,
    };
  }

  // ------------------------------------------------------------ internals

  #fixed(): WatchLike<unknown>[] {
    const out: WatchLike<unknown>[] = [];
    for (const w of [
      this.#localPods,
      this.#namespaces,
      this.#policies,
      this.#nodes,
      this.#workspaces,
      this.#nsnps,
      ...this.#clusterPolicies,
    ])
      if (w !== undefined) out.push(w as WatchLike<unknown>);
    return out;
  }

  #watch<T>(
    kind: string,
    name: string,
    path: string,
    normalize: (raw: unknown) => Normalized<T>,
    list: (page: ListPage) => Promise<RawList>,
    opts: {
      fieldSelector?: string;
      labelSelector?: string;
      replan?: boolean;
      invalid?: boolean;
      filter?: () => ReadonlySet<string> | undefined;
      /** The liveness probe's list: limit 1, no selectors (only its resourceVersion matters). */
      probeList?: () => Promise<RawList>;
      /** Changes of objects the snapshot takes from another watch: no change here (both versions pass). */
      ignored?: (o: T) => boolean;
    },
  ): ResourceWatch<T> {
    const ignored = opts.ignored;
    return new ResourceWatch<T>({
      name,
      kubeConfig: this.#opts.kubeConfig,
      path,
      labelSelector: opts.labelSelector,
      fieldSelector: opts.fieldSelector,
      list,
      ...(opts.probeList === undefined ? {} : { probeList: opts.probeList }),
      normalize,
      log: this.#log,
      ...(this.#opts.listPageSize === undefined ? {} : { pageSize: this.#opts.listPageSize }),
      ...(this.#opts.timing === undefined ? {} : { timing: this.#opts.timing }),
      onChange: (type, key, value, prev) => {
        if (ignored !== undefined && (value === undefined || ignored(value)) && (prev === undefined || ignored(prev))) return;
        this.#changed(kind, type, key, opts.replan === true, opts.filter);
      },
      onSynced: () => this.#watchSynced(name),
      ...(opts.invalid === true
        ? {
            onErrors: (value: T | undefined, errors) => {
              if (value === undefined) {
                this.#log.warn({ kind, errors: errors.length }, 'object rejected by validation');
                return;
              }
              for (const l of this.#invalidListeners) this.#safe(() => l(value as NetworkPolicy));
            },
          }
        : {}),
    });
  }

  #safe(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.#log.error({ err: String(err) }, 'source listener failed');
    }
  }

  /** Something changed as a whole (a watch added, dropped, refiltered or synced): every list is built anew. */
  #emit(reason: string): void {
    this.#podView.invalidate();
    this.#policyView.invalidate();
    this.#lists.clear();
    this.#notify(reason);
  }

  #notify(reason: string): void {
    this.#cache = undefined;
    for (const l of this.#changeListeners) this.#safe(() => l(reason));
  }

  /** One object of a kind changed: what the next snapshot must look at again. */
  #touch(kind: string, key: string): void {
    if (kind === POD_API.plural || kind === NETWORK_POLICY_API.plural) {
      (kind === POD_API.plural ? this.#podView : this.#policyView).touch(key);
      // In a namespace not seen (yet): the implicit namespaces may change.
      const ns = key.slice(0, key.indexOf('/'));
      if (this.#namespaces?.get(ns) === undefined) this.#lists.delete('namespaces');
      return;
    }
    // Few objects of these kinds (or, for namespaces and nodes, rare changes): their lists are rebuilt.
    this.#lists.clear();
  }

  #changed(
    kind: string,
    type: ChangeType,
    key: string,
    replan: boolean,
    filter: (() => ReadonlySet<string> | undefined) | undefined,
  ): void {
    if (this.#state !== 'running') return;
    this.#touch(kind, key);
    if (replan) {
      // Local pods reach the plan only through the policies that select them (#peerPlan).
      if (kind !== POD_API.plural) this.#planInputsChanged = true;
      this.#schedulePlan();
    }
    const f = filter?.();
    if (f !== undefined) {
      const ns = key.slice(0, key.indexOf('/'));
      if (!f.has(ns)) return;
    }
    this.#notify(`${kind} ${type} ${key}`);
  }

  #watchSynced(name: string): void {
    if (this.#state !== 'running') return;
    this.#planInputsChanged = true;
    this.#schedulePlan();
    this.#retire();
    this.#checkSynced();
    this.#emit(`${name} synced`);
  }

  #baseSynced(): boolean {
    return this.#localPods?.synced() === true && this.#namespaces?.synced() === true && this.#policies?.synced() === true;
  }

  #schedulePlan(): void {
    if (this.#state !== 'running' || this.#planTimer !== undefined || !this.#baseSynced()) return;
    // A plan walks every policy and, per namespaceSelector peer, every
    // namespace: ~300 ms at 100k pods / 10k policies. Under a stream of local
    // pod and policy changes (a rollout: tens per second) re-planning after
    // each would keep the event loop busy and hold back applies; so the next
    // plan waits at least 4x as long as the last one took (planning stays
    // under ~20 % of the loop). Late plans only delay new peer watches, whose
    // pods are denied until they list (fail closed).
    const debounce = this.#opts.planDebounceMs ?? 20;
    const wait = Math.max(debounce, this.#lastPlanEnd + PLAN_BACKOFF * this.#lastPlanMs - Date.now());
    this.#planTimer = setTimeout(() => this.#planWhenQuiet(Date.now()), wait);
  }

  deferWhile(busy: () => boolean): void {
    this.#busy = busy;
  }

  // The plan's walk (tens of ms at 100k pods) would otherwise run beside the
  // apply of the change that asked for it, on the same event loop: the nft
  // transaction's end waits for it (issue 24: local pod and policy changes'
  // tails). Late plans only delay new peer watches (fail closed).
  #planWhenQuiet(since: number): void {
    this.#planTimer = undefined;
    if (this.#state !== 'running') return;
    // Before the first sync the agent only waits for it: a plan then is what it waits for.
    if (this.#busy?.() === true && this.synced() && Date.now() - since < PLAN_DEFER_MAX_MS) {
      this.#planTimer = setTimeout(() => this.#planWhenQuiet(since), PLAN_RETRY_MS);
      return;
    }
    const t0 = performance.now();
    this.#safe(() => this.#replan());
    this.#lastPlanMs = performance.now() - t0;
    this.#lastPlanEnd = Date.now();
  }

  #replan(): void {
    if (this.#state !== 'running') return;
    this.#planServices();
    this.#planNodes();
    const plan: PeerPlan =
      this.#opts.remotePods === 'all'
        ? { mode: 'all', watches: [ALL_PODS], reason: 'configured: remotePods=all' }
        : this.#peerPlan();
    if (this.#plan !== undefined && samePlan(plan, this.#plan)) {
      this.#checkSynced();
      return;
    }
    const wanted = new Set(plan.watches.map((w) => w.key));
    let added = 0;
    for (const spec of plan.watches) {
      const have = this.#peers.get(spec.key);
      const filter = spec.namespaces === undefined ? undefined : new Set(spec.namespaces);
      if (have !== undefined) {
        have.spec = spec;
        have.filter = filter;
        have.retiring = false;
        continue;
      }
      const path =
        spec.namespace === undefined
          ? collectionPath(POD_API)
          : `/api/${POD_API.version}/namespaces/${encodeURIComponent(spec.namespace)}/${POD_API.plural}`;
      const pw: PeerWatch = {
        spec,
        filter,
        retiring: false,
        watch: this.#watch<Pod>(
          POD_API.plural,
          peerName(spec),
          path,
          POD_API.normalize,
          (page) =>
            this.#get(path, { labelSelector: spec.labelSelector === '' ? undefined : spec.labelSelector, ...paging(page) }),
          {
            ...(spec.labelSelector === '' ? {} : { labelSelector: spec.labelSelector }),
            filter: () => this.#peers.get(spec.key)?.filter,
            probeList: () => this.#get(path, { limit: 1 }),
            // This node's pods come from the local watch alone (#allPods).
            ignored: (p) => p.nodeName === this.#opts.nodeName,
          },
        ),
      };
      this.#peers.set(spec.key, pw);
      pw.watch.start();
      added++;
    }
    let retiring = 0;
    for (const [key, pw] of this.#peers) {
      if (!wanted.has(key) && !pw.retiring) {
        pw.retiring = true;
        retiring++;
      }
    }
    this.#plan = plan;
    this.#log.info(
      {
        mode: plan.mode,
        watches: plan.watches.length,
        added,
        retiring,
        ...(plan.reason === undefined ? {} : { reason: plan.reason }),
      },
      'remote pod watches planned',
    );
    this.#retire();
    this.#checkSynced();
    this.#emit(`peer plan ${plan.mode}: ${plan.watches.length} watches (+${added}, -${retiring})`);
  }

  /**
   * The peer plan for the current caches. When only local pods changed since
   * the last plan and the policies selecting them are the same objects, the
   * plan is the same (it depends on local pods only through that set): kept
   * without walking every policy and namespace again.
   */
  #peerPlan(): PeerPlan {
    const input = {
      policies: [...(this.#policies?.values() ?? []), ...this.#derivedPolicies()],
      localPods: [...(this.#localPods?.values() ?? [])],
      // The same array until a namespace changes: the plan memoizes selector matches per list.
      namespaces: this.#list('plan-namespaces', () => [...(this.#namespaces?.values() ?? [])]),
      clusterPolicies: this.#clusterPolicyValues(),
    };
    const relevant: readonly object[] = [
      ...relevantPolicies(input.policies, input.localPods),
      ...relevantClusterPolicies(input.clusterPolicies, input.localPods, input.namespaces),
    ];
    const last = this.#lastRelevant;
    const inputsChanged = this.#planInputsChanged;
    this.#lastRelevant = relevant;
    this.#planInputsChanged = false;
    if (
      !inputsChanged &&
      this.#plan !== undefined &&
      last !== undefined &&
      last.length === relevant.length &&
      last.every((p, i) => p === relevant[i])
    )
      return this.#plan;
    return planPeerWatches(input, this.#opts.maxPeerWatches ?? DEFAULT_MAX_PEER_WATCHES);
  }

  /**
   * Every Service the listed NamespaceNetworkPolicies name has a listed watch
   * (so the first ruleset never reports a Service missing that only was not
   * read yet). Starts the watches still missing.
   */
  #servicesSynced(): boolean {
    const t = this.#opts.tenancy;
    if (t === undefined) return true;
    const needed = neededServices([...(this.#nsnps?.values() ?? [])], t);
    const keys = needed.length > (this.#opts.maxServiceWatches ?? 32) ? [ALL_SERVICES] : needed;
    if (keys.some((k) => !this.#services.has(k))) this.#planServices();
    return keys.every((k) => this.#services.get(k)?.synced() === true);
  }

  /**
   * The policies the tenancy kinds contribute from the current caches, in
   * NetworkPolicy's form: their pod peers are demands of the peer plan too.
   */
  #derivedPolicies(): readonly NetworkPolicy[] {
    const t = this.#opts.tenancy;
    if (t === undefined) return [];
    const state = makeState({
      namespaces: [...(this.#namespaces?.values() ?? [])],
      pods: [],
      policies: [],
      nodes: [...(this.#nodes?.values() ?? [])],
      ...this.#tenancyParts(),
      tenancy: t,
    });
    return contributedPolicies(state, [namespaceNetworkPolicyKind, projectIsolationKind, workspaceIsolationKind]).map((c) => ({
      namespace: c.namespace,
      name: c.key,
      podSelector: c.podSelector,
      types: c.types,
      ingress: c.ingress,
      egress: c.egress,
      errors: [],
    }));
  }

  /** Drops watches that left the plan, once every watch of the plan has listed. */
  #retire(): void {
    const current = [...this.#peers.values()].filter((p) => !p.retiring);
    if (current.some((p) => !p.watch.synced())) return;
    for (const [key, pw] of this.#peers) {
      if (!pw.retiring) continue;
      this.#peers.delete(key);
      this.#retired.received += pw.watch.received;
      void pw.watch.stop();
      this.#emit(`peer watch ${pw.watch.name} dropped`);
    }
  }

  #checkSynced(): void {
    if (this.#synced || this.#state !== 'running' || this.#plan === undefined) return;
    // A plan is pending (a watch just listed, e.g. ClusterNetworkPolicies): its peer watches come first.
    if (this.#planTimer !== undefined) return;
    if (!this.#fixed().every((w) => w.synced())) return;
    if ([...this.#peers.values()].some((p) => !p.retiring && !p.watch.synced())) return;
    if (!this.#servicesSynced()) return;
    if (this.#allNodes !== undefined && !this.#allNodes.synced()) return;
    this.#synced = true;
    this.#log.info({ watches: this.#fixed().length + this.#peers.size }, 'cluster state synced');
    this.#emit('synced');
  }
}
