// Which remote pods this node must know about, as a set of pod watches.
//
// A node only enforces policies that select one of its own pods: ingress to
// and egress from local pods. Those policies' peers are the only remote pods
// that matter, so instead of watching every pod in the cluster:
//
//   peer {podSelector}                     -> podSelector in the policy's namespace
//   peer {namespaceSelector, podSelector}  -> podSelector in each matching namespace
//   peer {namespaceSelector}               -> every pod of each matching namespace
//   namespaceSelector {}                   -> ... of all namespaces (one cluster-wide watch)
//   egress named port, no peers or ipBlock -> every pod (the name is resolved on
//                                             whatever pod the address belongs to)
//   ipBlock, ingress without peers         -> no pods
//
// ClusterNetworkPolicies whose subject selects a local pod add their rules'
// pod and namespace peers the same way (their namespaceSelector {} is every
// namespace); networks and nodes peers need no pods, but a Deny or Pass rule
// with an unknown peer matches every address, so with a named port it needs
// every pod. Their nodes peers need every Node instead (nodePeersNeeded).
//
// Demands are grouped by pod selector (as label-selector query text) into
// namespaced watches with a server-side labelSelector. Past `maxWatches`, the
// selectors spanning the most namespaces become one cluster-wide watch each
// (namespaces filtered client-side), and if that is not enough, or a demand is
// "every pod everywhere", one cluster-wide pod watch replaces them all.
// Pure: recomputed by the source whenever policies, local pods or namespaces change.
import { selectorIsEmpty, selectorMatches } from '../model/selector.ts';
import type { ClusterNetworkPolicy, LabelSelector, Namespace, NetworkPolicy, Pod } from '../model/types.ts';
import { labelQuery } from './label-query.ts';

export const DEFAULT_MAX_PEER_WATCHES = 32;

export interface PodWatchSpec {
  /** Stable identity: `<namespace or *>|<labelSelector>`. */
  readonly key: string;
  /** undefined = all namespaces. */
  readonly namespace: string | undefined;
  /** Label-selector query; '' = every pod. */
  readonly labelSelector: string;
  /**
   * For cluster-wide selector watches that stand for several namespaces: only
   * pods of these namespaces are needed (filtered client-side). undefined = all.
   */
  readonly namespaces: readonly string[] | undefined;
}

export interface PeerPlan {
  /** none: no remote pods needed; selective: these watches; all: one cluster-wide pod watch. */
  readonly mode: 'none' | 'selective' | 'all';
  /** Sorted by key. */
  readonly watches: readonly PodWatchSpec[];
  /** Why mode is 'all' (or a note on a degraded selective plan). */
  readonly reason: string | undefined;
}

export interface PeerDemandInput {
  readonly policies: readonly NetworkPolicy[];
  /** Pods scheduled on this node. */
  readonly localPods: readonly Pod[];
  readonly namespaces: readonly Namespace[];
  /** ClusterNetworkPolicies (and the legacy kinds read as such); absent = none. */
  readonly clusterPolicies?: readonly ClusterNetworkPolicy[];
}

export const ALL_PODS: PodWatchSpec = Object.freeze({
  key: '*|',
  namespace: undefined,
  labelSelector: '',
  namespaces: undefined,
});

type NsSet = Set<string> | 'all';

export function watchKey(namespace: string | undefined, labelSelector: string): string {
  return `${namespace ?? '*'}|${labelSelector}`;
}

function allPods(reason: string): PeerPlan {
  return { mode: 'all', watches: [ALL_PODS], reason };
}

/** The policies that select at least one (non-hostNetwork) local pod. */
export function relevantPolicies(policies: readonly NetworkPolicy[], localPods: readonly Pod[]): NetworkPolicy[] {
  const byNs = new Map<string, Pod[]>();
  for (const p of localPods) {
    // hostNetwork pods are never isolated: their policies need no peers.
    if (p.hostNetwork) continue;
    const list = byNs.get(p.namespace);
    if (list === undefined) byNs.set(p.namespace, [p]);
    else list.push(p);
  }
  return policies.filter((pol) => byNs.get(pol.namespace)?.some((p) => selectorMatches(pol.podSelector, p.labels)) === true);
}

/** The cluster policies whose subject selects at least one (non-hostNetwork) local pod. */
export function relevantClusterPolicies(
  policies: readonly ClusterNetworkPolicy[],
  localPods: readonly Pod[],
  namespaces: readonly Namespace[],
): ClusterNetworkPolicy[] {
  if (policies.length === 0) return [];
  const nsLabels = new Map(namespaces.map((n) => [n.name, n.labels]));
  const pods = localPods.filter((p) => !p.hostNetwork);
  return policies.filter((pol) =>
    pods.some((p) => {
      // A pod whose namespace is not known yet: its labels are unknown, so the policy may select it.
      const labels = nsLabels.get(p.namespace);
      return (
        (labels === undefined || selectorMatches(pol.subject.namespaceSelector, labels)) &&
        selectorMatches(pol.subject.podSelector, p.labels)
      );
    }),
  );
}

/** Does a cluster policy that selects a local pod have a nodes peer (so every Node must be known)? */
export function nodePeersNeeded(input: PeerDemandInput): boolean {
  return relevantClusterPolicies(input.clusterPolicies ?? [], input.localPods, input.namespaces).some((pol) =>
    [...pol.ingress, ...pol.egress].some((r) => !r.invalid && r.peers.some((p) => p.kind === 'nodes')),
  );
}

// Which namespaces a selector picks, per namespace list and selector object:
// a plan runs after every policy change and walked every namespace for each
// namespaceSelector peer of the node's policies (half its time at 100k pods);
// the caller passes the same list until a namespace changes, and unchanged
// policies keep their selector objects.
const nsMemo = new WeakMap<readonly Namespace[], WeakMap<LabelSelector, readonly string[]>>();

function namespacesMatching(namespaces: readonly Namespace[], sel: LabelSelector): readonly string[] {
  let bySel = nsMemo.get(namespaces);
  if (bySel === undefined) nsMemo.set(namespaces, (bySel = new WeakMap()));
  let names = bySel.get(sel);
  if (names === undefined) bySel.set(sel, (names = namespaces.filter((n) => selectorMatches(sel, n.labels)).map((n) => n.name)));
  return names;
}

export function planPeerWatches(input: PeerDemandInput, maxWatches: number = DEFAULT_MAX_PEER_WATCHES): PeerPlan {
  const demand = new Map<string, NsSet>();
  const notes: string[] = [];
  const want = (selector: string, ns: NsSet): void => {
    const cur = demand.get(selector);
    if (cur === 'all') return;
    if (ns === 'all') demand.set(selector, 'all');
    else if (cur === undefined) demand.set(selector, new Set(ns));
    else for (const n of ns) cur.add(n);
  };

  for (const pol of relevantPolicies(input.policies, input.localPods)) {
    const id = `${pol.namespace}/${pol.name}`;
    const dirs = [
      ...(pol.types.ingress ? [['ingress', pol.ingress] as const] : []),
      ...(pol.types.egress ? [['egress', pol.egress] as const] : []),
    ];
    for (const [dir, rules] of dirs) {
      for (const [i, rule] of rules.entries()) {
        // An invalid rule allows nothing: its peers are irrelevant.
        if (rule.invalid) continue;
        const named = rule.ports?.some((p) => typeof p.port === 'string') === true;
        if (dir === 'egress' && named && (rule.peers === undefined || rule.peers.some((p) => p.kind === 'ipBlock'))) {
          return allPods(
            `${id} egress[${i}] has a named port with ${rule.peers === undefined ? 'no peers' : 'an ipBlock peer'}: any pod may be the destination`,
          );
        }
        for (const peer of rule.peers ?? []) {
          if (peer.kind !== 'pods') continue;
          let selector = '';
          if (peer.podSelector !== undefined && !selectorIsEmpty(peer.podSelector)) {
            const q = labelQuery(peer.podSelector);
            if (q === undefined)
              notes.push(`${id} ${dir}[${i}]: pod selector not expressible, watching every pod of its namespaces`);
            selector = q ?? '';
          }
          let ns: NsSet;
          if (peer.namespaceSelector === undefined) ns = new Set([pol.namespace]);
          else if (selectorIsEmpty(peer.namespaceSelector)) ns = 'all';
          else {
            const nsSel = peer.namespaceSelector;
            ns = new Set(namespacesMatching(input.namespaces, nsSel));
          }
          if (ns !== 'all' && ns.size === 0) continue;
          want(selector, ns);
        }
      }
    }
  }

  for (const pol of relevantClusterPolicies(input.clusterPolicies ?? [], input.localPods, input.namespaces)) {
    for (const dir of ['ingress', 'egress'] as const) {
      for (const [i, rule] of pol[dir].entries()) {
        // An invalid rule matches nothing (Accept) or every address (Deny, Pass): no peer pods either way.
        if (rule.invalid) continue;
        const named = rule.protocols?.some((p) => p.kind === 'named') === true;
        if (dir === 'egress' && named && rule.action !== 'Accept' && rule.peers.some((p) => p.kind === 'unknown')) {
          return allPods(
            `${pol.sourceKind} ${pol.name} egress[${i}] has a named port with an unknown peer: any pod may be the destination`,
          );
        }
        for (const peer of rule.peers) {
          if (peer.kind !== 'pods') continue;
          let selector = '';
          if (!selectorIsEmpty(peer.podSelector)) {
            const q = labelQuery(peer.podSelector);
            if (q === undefined)
              notes.push(
                `${pol.sourceKind} ${pol.name} ${dir}[${i}]: pod selector not expressible, watching every pod of its namespaces`,
              );
            selector = q ?? '';
          }
          const nsSel = peer.namespaceSelector;
          const ns: NsSet = selectorIsEmpty(nsSel) ? 'all' : new Set(namespacesMatching(input.namespaces, nsSel));
          if (ns !== 'all' && ns.size === 0) continue;
          want(selector, ns);
        }
      }
    }
  }

  const every = demand.get('');
  if (every === 'all') return allPods('a peer selects every pod of every namespace');
  // (ns, every pod) makes (ns, any selector) redundant.
  if (every !== undefined) {
    for (const [sel, ns] of demand) {
      if (sel === '' || ns === 'all') continue;
      for (const n of every) ns.delete(n);
      if (ns.size === 0) demand.delete(sel);
    }
  }
  if (demand.size === 0) return { mode: 'none', watches: [], reason: undefined };

  // Selectors collapsed to one cluster-wide watch, with their namespaces as a client-side filter.
  const collapsed = new Map<string, string[]>();
  const count = (): number => [...demand.values()].reduce((n, ns) => n + (ns === 'all' ? 1 : ns.size), 0);
  while (count() > maxWatches) {
    let best: string | undefined;
    let bestSize = 1;
    for (const [sel, ns] of demand) {
      if (sel === '' || ns === 'all') continue;
      if (ns.size > bestSize) {
        best = sel;
        bestSize = ns.size;
      }
    }
    if (best === undefined) return allPods(`${count()} peer pod watches needed, more than the bound of ${maxWatches}`);
    collapsed.set(best, [...(demand.get(best) as Set<string>)].sort());
    demand.set(best, 'all');
  }

  const watches: PodWatchSpec[] = [];
  for (const [sel, ns] of demand) {
    if (ns === 'all')
      watches.push({ key: watchKey(undefined, sel), namespace: undefined, labelSelector: sel, namespaces: collapsed.get(sel) });
    else for (const n of ns) watches.push({ key: watchKey(n, sel), namespace: n, labelSelector: sel, namespaces: undefined });
  }
  watches.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { mode: 'selective', watches, reason: notes.length > 0 ? notes.join('; ') : undefined };
}

/** Same watches (keys and filters)? */
export function samePlan(a: PeerPlan, b: PeerPlan): boolean {
  if (a.mode !== b.mode || a.watches.length !== b.watches.length) return false;
  return a.watches.every((w, i) => {
    const v = b.watches[i];
    return (
      v !== undefined &&
      v.key === w.key &&
      (w.namespaces ?? []).join(',') === (v.namespaces ?? []).join(',') &&
      (w.namespaces === undefined) === (v.namespaces === undefined)
    );
  });
}
