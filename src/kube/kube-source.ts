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
// synced() latches true once the four fixed watches and the peer watches of
// the first plan have all listed. After that a newly needed peer watch that
// has not listed yet leaves its pods out of the snapshot: traffic from or to
// them is denied until it has (fail closed), while every other change keeps
// flowing to the kernel, including ones that revoke access.
import { CoreV1Api, NetworkingV1Api } from '@kubernetes/client-node';
import type { KubeConfig, KubernetesListObject } from '@kubernetes/client-node';
import { byObjectKey } from '../model/state.ts';
import { makeState, normalizeNamespace, normalizeNode, normalizePod, normalizePolicy } from '../model/normalize.ts';
import type { Normalized } from '../model/normalize.ts';
import type { ClusterState, Namespace, NetworkPolicy, Node, Pod } from '../model/types.ts';
import { ALL_PODS, DEFAULT_MAX_PEER_WATCHES, planPeerWatches, samePlan } from './peer-demand.ts';
import type { PeerPlan, PodWatchSpec } from './peer-demand.ts';
import { ResourceWatch } from './resource-watch.ts';
import type { ChangeType, ListPage, WatchTiming } from './resource-watch.ts';
import { SILENT_LOGGER } from './source.ts';
import type { ClusterSource, SourceLogger, WatchStatus } from './source.ts';

export interface KubeSourceOptions {
  readonly kubeConfig: KubeConfig;
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

function paging(page: ListPage): { limit?: number; _continue?: string } {
  return {
    ...(page.limit === undefined ? {} : { limit: page.limit }),
    ...(page.continue === undefined ? {} : { _continue: page.continue }),
  };
}

function peerName(spec: PodWatchSpec): string {
  const where = spec.namespace === undefined ? ' (all namespaces)' : ` -n ${spec.namespace}`;
  return `pods${where}${spec.labelSelector === '' ? '' : ` ${spec.labelSelector}`}`;
}

export class KubeClusterSource implements ClusterSource {
  readonly #opts: KubeSourceOptions;
  readonly #log: SourceLogger;
  readonly #core: CoreV1Api;
  readonly #net: NetworkingV1Api;
  #state: 'new' | 'running' | 'stopped' = 'new';
  #localPods: ResourceWatch<Pod> | undefined;
  #namespaces: ResourceWatch<Namespace> | undefined;
  #policies: ResourceWatch<NetworkPolicy> | undefined;
  #nodes: ResourceWatch<Node> | undefined;
  readonly #peers = new Map<string, PeerWatch>();
  #retired = { received: 0 };
  #plan: PeerPlan | undefined;
  #planTimer: NodeJS.Timeout | undefined;
  #synced = false;
  #cache: ClusterState | undefined;
  readonly #changeListeners: ((reason: string) => void)[] = [];
  readonly #invalidListeners: ((policy: NetworkPolicy) => void)[] = [];

  constructor(opts: KubeSourceOptions) {
    this.#opts = opts;
    this.#log = opts.log ?? SILENT_LOGGER;
    this.#core = opts.kubeConfig.makeApiClient(CoreV1Api);
    this.#net = opts.kubeConfig.makeApiClient(NetworkingV1Api);
  }

  async start(): Promise<void> {
    if (this.#state !== 'new') return;
    this.#state = 'running';
    const node = this.#opts.nodeName;
    const nodeSel = `spec.nodeName=${node}`;
    this.#localPods = this.#watch<Pod>(
      'pods',
      `pods ${nodeSel}`,
      '/api/v1/pods',
      normalizePod,
      (page) => this.#core.listPodForAllNamespaces({ fieldSelector: nodeSel, ...paging(page) }),
      {
        fieldSelector: nodeSel,
        replan: true,
        probeList: () => this.#core.listPodForAllNamespaces({ limit: 1 }),
      },
    );
    this.#namespaces = this.#watch<Namespace>(
      'namespaces',
      'namespaces',
      '/api/v1/namespaces',
      normalizeNamespace,
      (page) => this.#core.listNamespace(paging(page)),
      { replan: true, probeList: () => this.#core.listNamespace({ limit: 1 }) },
    );
    this.#policies = this.#watch<NetworkPolicy>(
      'networkpolicies',
      'networkpolicies',
      '/apis/networking.k8s.io/v1/networkpolicies',
      normalizePolicy,
      (page) => this.#net.listNetworkPolicyForAllNamespaces(paging(page)),
      { replan: true, invalid: true, probeList: () => this.#net.listNetworkPolicyForAllNamespaces({ limit: 1 }) },
    );
    const nameSel = `metadata.name=${node}`;
    this.#nodes = this.#watch<Node>(
      'nodes',
      `nodes ${nameSel}`,
      '/api/v1/nodes',
      normalizeNode,
      (page) => this.#core.listNode({ fieldSelector: nameSel, ...paging(page) }),
      { fieldSelector: nameSel, probeList: () => this.#core.listNode({ limit: 1 }) },
    );
    for (const w of this.#fixed()) w.start();
  }

  async stop(): Promise<void> {
    if (this.#state === 'stopped') return;
    this.#state = 'stopped';
    clearTimeout(this.#planTimer);
    await Promise.all([...this.#fixed(), ...[...this.#peers.values()].map((p) => p.watch)].map((w) => w.stop()));
  }

  synced(): boolean {
    return this.#synced;
  }

  snapshot(): ClusterState {
    if (this.#cache !== undefined) return this.#cache;
    // A pod can be in several watches (as different objects): the local
    // watch is authoritative for local pods, and among peer watches the one
    // added last wins. Candidates in that order, stably sorted by key, keep
    // the first of each key: no per-pod key strings or map on every change
    // (makeState's own sort is then a linear pass).
    const all: Pod[] = [...(this.#localPods?.values() ?? [])];
    for (const pw of [...this.#peers.values()].reverse()) {
      for (const p of pw.watch.values()) if (pw.filter === undefined || pw.filter.has(p.namespace)) all.push(p);
    }
    all.sort(byObjectKey);
    let n = 0;
    for (let i = 0; i < all.length; i++) {
      const p = all[i] as Pod;
      const prev = n === 0 ? undefined : all[n - 1];
      if (prev !== undefined && prev.namespace === p.namespace && prev.name === p.name) continue;
      all[n++] = p;
    }
    all.length = n;
    this.#cache = makeState({
      namespaces: [...(this.#namespaces?.values() ?? [])],
      pods: all,
      policies: [...(this.#policies?.values() ?? [])],
      nodes: [...(this.#nodes?.values() ?? [])],
    });
    return this.#cache;
  }

  onChange(listener: (reason: string) => void): void {
    this.#changeListeners.push(listener);
  }

  onInvalid(listener: (policy: NetworkPolicy) => void): void {
    this.#invalidListeners.push(listener);
  }

  status(): readonly WatchStatus[] {
    const peers = [...this.#peers.values()].sort((a, b) => (a.spec.key < b.spec.key ? -1 : a.spec.key > b.spec.key ? 1 : 0));
    return [...this.#fixed(), ...peers.map((p) => p.watch)].map((w) => w.status());
  }

  /** The current remote-pod plan (undefined before the first one). */
  peerPlan(): PeerPlan | undefined {
    return this.#plan;
  }

  /** For benchmarks and debugging. */
  counters(): SourceCounters {
    const all = [...this.#fixed(), ...[...this.#peers.values()].map((p) => p.watch)];
    return {
      received: this.#retired.received + all.reduce((n, w) => n + w.received, 0),
      objects: all.reduce((n, w) => n + w.size, 0),
      watches: all.length,
      peerMode: this.#plan?.mode,
    };
  }

  // ------------------------------------------------------------ internals

  #fixed(): ResourceWatch<unknown>[] {
    const out: ResourceWatch<unknown>[] = [];
    for (const w of [this.#localPods, this.#namespaces, this.#policies, this.#nodes])
      if (w !== undefined) out.push(w as ResourceWatch<unknown>);
    return out;
  }

  #watch<T>(
    kind: string,
    name: string,
    path: string,
    normalize: (raw: unknown) => Normalized<T>,
    list: (page: ListPage) => Promise<KubernetesListObject<object>>,
    opts: {
      fieldSelector?: string;
      labelSelector?: string;
      replan?: boolean;
      invalid?: boolean;
      filter?: () => ReadonlySet<string> | undefined;
      /** The liveness probe's list: limit 1, no selectors (only its resourceVersion matters). */
      probeList?: () => Promise<KubernetesListObject<object>>;
    },
  ): ResourceWatch<T> {
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
      onChange: (type, key) => this.#changed(kind, type, key, opts.replan === true, opts.filter),
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

  #emit(reason: string): void {
    this.#cache = undefined;
    for (const l of this.#changeListeners) this.#safe(() => l(reason));
  }

  #changed(
    kind: string,
    type: ChangeType,
    key: string,
    replan: boolean,
    filter: (() => ReadonlySet<string> | undefined) | undefined,
  ): void {
    if (this.#state !== 'running') return;
    if (replan) this.#schedulePlan();
    const f = filter?.();
    if (f !== undefined) {
      const ns = key.slice(0, key.indexOf('/'));
      if (!f.has(ns)) return;
    }
    this.#emit(`${kind} ${type} ${key}`);
  }

  #watchSynced(name: string): void {
    if (this.#state !== 'running') return;
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
    this.#planTimer = setTimeout(() => {
      this.#planTimer = undefined;
      this.#safe(() => this.#replan());
    }, this.#opts.planDebounceMs ?? 20);
  }

  #replan(): void {
    if (this.#state !== 'running') return;
    const plan: PeerPlan =
      this.#opts.remotePods === 'all'
        ? { mode: 'all', watches: [ALL_PODS], reason: 'configured: remotePods=all' }
        : planPeerWatches(
            {
              policies: [...(this.#policies?.values() ?? [])],
              localPods: [...(this.#localPods?.values() ?? [])],
              namespaces: [...(this.#namespaces?.values() ?? [])],
            },
            this.#opts.maxPeerWatches ?? DEFAULT_MAX_PEER_WATCHES,
          );
    if (this.#plan !== undefined && samePlan(plan, this.#plan)) return;
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
      const pw: PeerWatch = {
        spec,
        filter,
        retiring: false,
        watch: this.#watch<Pod>(
          'pods',
          peerName(spec),
          spec.namespace === undefined ? '/api/v1/pods' : `/api/v1/namespaces/${encodeURIComponent(spec.namespace)}/pods`,
          normalizePod,
          (page) => {
            const sel = spec.labelSelector === '' ? {} : { labelSelector: spec.labelSelector };
            return spec.namespace === undefined
              ? this.#core.listPodForAllNamespaces({ ...sel, ...paging(page) })
              : this.#core.listNamespacedPod({ namespace: spec.namespace, ...sel, ...paging(page) });
          },
          {
            ...(spec.labelSelector === '' ? {} : { labelSelector: spec.labelSelector }),
            filter: () => this.#peers.get(spec.key)?.filter,
            probeList: () =>
              spec.namespace === undefined
                ? this.#core.listPodForAllNamespaces({ limit: 1 })
                : this.#core.listNamespacedPod({ namespace: spec.namespace, limit: 1 }),
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
    if (!this.#fixed().every((w) => w.synced())) return;
    if ([...this.#peers.values()].some((p) => !p.retiring && !p.watch.synced())) return;
    this.#synced = true;
    this.#log.info({ watches: this.#fixed().length + this.#peers.size }, 'cluster state synced');
    this.#emit('synced');
  }
}
