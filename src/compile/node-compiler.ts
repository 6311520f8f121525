// compileNode for a stream of snapshots: the agent compiles after every change,
// and a change is usually a pod or two. Rebuilding the cluster index and
// resolving every peer selector again costs O(cluster) each time (~25 ms at
// 10k pods, ~200 ms at 100k); here the index is advanced by the pod diff and
// only the peer results a changed pod can affect are recomputed. The output
// is always exactly compileNode(state, ...) (property-tested); anything the
// diff cannot express (namespaces changed, a large change) starts afresh.
import type { ClusterState, Namespace, Pod } from '../model/types.ts';
import { byObjectKey } from '../model/state.ts';
import { commonEnds, listChange, listEnds } from '../model/list-diff.ts';
import { listArray } from '../model/list.ts';
import type { ReadonlyList } from '../model/list.ts';
import { PolicyChainMemo } from './chain-memo.ts';
import { ClusterIndex } from './cluster-index.ts';
import { compileWithParts } from './compile.ts';
import type { CompiledRuleset } from '../ruleset/ir.ts';
import { resolveOptions, type RenderOptions } from '../ruleset/options.ts';
import { PeerChurn } from './peer-churn.ts';
import { PeerResolver } from './peers.ts';

export interface PodDiff {
  /** Objects of the old state that the new one does not hold. */
  readonly removed: readonly Pod[];
  /** Objects of the new state that the old one does not hold. */
  readonly added: readonly Pod[];
}

/**
 * The pods that differ between two states' pod lists, by object identity
 * (the sources keep an unchanged pod's object), or undefined past `limit`.
 * A merge walk over lists sorted by namespace/name; on unsorted input it
 * still reports every object not in both, only less tightly.
 */
export function diffPods(prevList: ReadonlyList<Pod>, nextList: ReadonlyList<Pod>, limit: number): PodDiff | undefined {
  const removed: Pod[] = [];
  const added: Pod[] = [];
  // The source keeps the list while no pod changed (a policy change), and
  // says what it moved when it made this list from the last one.
  if (prevList === nextList) return { removed, added };
  const known = listChange(prevList, nextList);
  if (known !== undefined)
    return known.removed.length + known.added.length > limit
      ? undefined
      : { removed: [...known.removed], added: [...known.added] };
  // Lists nobody recorded a change for (tests, a source rebuilt): walked as arrays.
  const prev = listArray(prevList);
  const next = listArray(nextList);
  // The common head and tail first, by identity alone: for a change or two
  // this is all of the walk (a tight loop, ~0.2 ms at 100k pods).
  const ends = commonEnds(prev, next);
  let i = ends.head;
  const tail = ends.tail;
  const prevEnd = prev.length - tail;
  const nextEnd = next.length - tail;
  let j = i;
  while (i < prevEnd || j < nextEnd) {
    const a = i < prevEnd ? prev[i] : undefined;
    const b = j < nextEnd ? next[j] : undefined;
    if (a !== undefined && a === b) {
      i++;
      j++;
      continue;
    }
    const c = a === undefined ? 1 : b === undefined ? -1 : byObjectKey(a, b);
    if (c <= 0 && a !== undefined) {
      removed.push(a);
      i++;
    }
    if (c >= 0 && b !== undefined) {
      added.push(b);
      j++;
    }
    if (removed.length + added.length > limit) return undefined;
  }
  return { removed, added };
}

function sameLabels(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  if (a === b) return true;
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && b[k] === a[k]);
}

/** The same policies by object: the same list, or (tests, a rebuilt source) one entry for entry. */
function samePolicies(a: ClusterState['policies'], b: ClusterState['policies']): boolean {
  return a === b || (a.length === b.length && listEnds(a, b).head === a.length);
}

export function sameNamespaces(a: readonly Namespace[], b: readonly Namespace[]): boolean {
  return (
    // The source keeps the list while no namespace changed (a walk of 5k namespaces per change otherwise).
    a === b ||
    (a.length === b.length &&
      a.every((x, i) => {
        const y = b[i];
        return y !== undefined && (x === y || (x.name === y.name && sameLabels(x.labels, y.labels)));
      }))
  );
}

export interface CompilerCaches {
  /** Memoized namespaceSelector results. */
  readonly nsSelectors: number;
  /** Label keys with postings. */
  readonly labelKeys: number;
  /** Resolved pod peers (scope + selector). */
  readonly peers: number;
  /** Resolved rule peer unions. */
  readonly rules: number;
}

export class NodeCompiler {
  readonly #node: string;
  readonly #opts: RenderOptions;
  #prev:
    | { state: ClusterState; idx: ClusterIndex; peers: PeerResolver; chains: PolicyChainMemo; churn: PeerChurn | undefined }
    | undefined;
  #mode: 'fresh' | 'incremental' | 'churn' | undefined;
  #kept: CompilerCaches = { nsSelectors: 0, labelKeys: 0, peers: 0, rules: 0 };
  #localPods: readonly Pod[] = [];

  readonly #scanLimit: number | undefined;

  /** scanLimit: see ClusterIndex (tests set 0 to exercise the label postings on small clusters). */
  constructor(nodeName: string, opts?: Partial<RenderOptions>, scanLimit?: number) {
    this.#node = nodeName;
    this.#opts = resolveOptions(opts);
    this.#scanLimit = scanLimit;
  }

  /** The active pods of the node in the last compiled state, sorted by key (what Enforced.localPods holds). */
  get localPods(): readonly Pod[] {
    return this.#localPods;
  }

  #chainsKept = 0;
  #chainCounts: { readonly kept: number; readonly compiled: number } = { kept: 0, compiled: 0 };

  /**
   * Policy chains kept for the next compile, and how many the compiles since
   * the last fresh one took over or compiled (chain-memo.ts; for tests).
   */
  get chains(): { readonly kept: number; readonly taken: number; readonly compiled: number } {
    return { kept: this.#chainsKept, taken: this.#chainCounts.kept, compiled: this.#chainCounts.compiled };
  }

  /** Sizes of the caches kept for the next compile (for tests and debugging). */
  get kept(): CompilerCaches {
    return this.#kept;
  }

  /**
   * How the last compile went: from scratch, advanced from the previous one,
   * or (churn) only remote pods changed and their churn was applied to the
   * previous result (peer-churn.ts).
   */
  get lastMode(): 'fresh' | 'incremental' | 'churn' | undefined {
    return this.#mode;
  }

  /** Same result as compileNode(state, nodeName, opts). */
  compile(state: ClusterState): CompiledRuleset {
    const prev = this.#prev;
    // Forgotten until this compile succeeds: a throw must not leave a half-advanced index.
    this.#prev = undefined;
    // Past this many changed objects a fresh index is as cheap and simpler.
    const limit = Math.max(256, prev === undefined ? 0 : prev.state.pods.length >> 3);
    let diff =
      prev !== undefined && sameNamespaces(prev.state.namespaces, state.namespaces)
        ? diffPods(prev.state.pods, state.pods, limit)
        : undefined;
    const d = diff;
    if (prev !== undefined && d !== undefined && prev.churn !== undefined && this.#onlyRemotePods(prev.state, state, d)) {
      let out: CompiledRuleset | undefined;
      try {
        out = prev.churn.apply(d.removed, d.added);
      } catch {
        // A count that disagrees with the compile it came from: never trust it, compile afresh.
        out = undefined;
        diff = undefined;
      }
      if (out !== undefined) {
        prev.idx.advance(state, d.removed, d.added);
        prev.peers.advance(d.removed, d.added);
        this.#mode = 'churn';
        this.#prev = { ...prev, state };
        return out;
      }
    }
    let idx: ClusterIndex;
    let peers: PeerResolver;
    let chains: PolicyChainMemo;
    let counts: ReadonlyMap<string, Map<string, number>> | undefined;
    let reuse: ReturnType<PeerChurn['parts']> | undefined;
    if (prev !== undefined && diff !== undefined) {
      reuse = prev.churn?.parts();
      // The churn's counts per peer set follow this diff too: the next remote change need not count again.
      prev.churn?.advance(diff.removed, diff.added);
      counts = prev.churn?.counts();
      idx = prev.idx;
      peers = prev.peers;
      chains = prev.chains;
      idx.advance(state, diff.removed, diff.added);
      peers.advance(diff.removed, diff.added);
      this.#mode = 'incremental';
    } else {
      idx = new ClusterIndex(state, this.#scanLimit, this.#node);
      // Tests lower the scan limit to exercise the small-cluster paths: the resolver's patching too.
      peers = new PeerResolver(idx, this.#scanLimit);
      // The kept chains read the resolver: they go with it.
      chains = new PolicyChainMemo();
      this.#mode = 'fresh';
    }
    peers.beginCompile();
    // (A lowered scan limit also lowers the identity patch's limit: its fallbacks get exercised too.)
    const patchLimit = this.#scanLimit === undefined ? undefined : Math.max(2, this.#scanLimit);
    const { flat, ruleset, churnable } = compileWithParts(
      state,
      this.#node,
      this.#opts,
      idx,
      peers,
      reuse,
      undefined,
      patchLimit,
      chains,
    );
    // Keep only what this compile used: the caches follow the policies in force.
    const p = peers.sweep();
    this.#kept = { ...idx.sweep(p.nsSelectors, p.labelKeys), peers: p.peers, rules: p.rules };
    this.#chainsKept = chains.sweep();
    this.#chainCounts = chains.counts;
    const churn = !churnable
      ? undefined
      : new PeerChurn(
          flat,
          {
            namespacesMatching: (sel) => idx.namespacesMatching(sel),
            podsOf: (f) => (f.peers === undefined ? [] : peers.destinations(f.peers, f.namespace).pods),
          },
          counts,
        );
    this.#prev = { state, idx, peers, chains, churn };
    // A copy: the index's list moves on with the next diff. (Remote churn leaves it as it is.)
    this.#localPods = [...idx.podsOnNode(this.#node)];
    return ruleset;
  }

  /**
   * Did only pods of other nodes change? Then nothing of the state but the
   * peer sets' content changed for this node. The other lists are compared
   * by object (the sources keep an unchanged object): a walk of pointers.
   */
  #onlyRemotePods(prev: ClusterState, next: ClusterState, diff: PodDiff): boolean {
    if (diff.removed.some((p) => p.nodeName === this.#node) || diff.added.some((p) => p.nodeName === this.#node)) return false;
    const same = <T>(a: readonly T[] | undefined, b: readonly T[] | undefined): boolean =>
      a === b || (a !== undefined && b !== undefined && a.length === b.length && a.every((x, i) => x === b[i]));
    return (
      // By object, not sameNamespaces' labels: an annotation (project isolation) changes the tenancy kinds' rules.
      same(prev.namespaces, next.namespaces) &&
      samePolicies(prev.policies, next.policies) &&
      same(prev.nodes, next.nodes) &&
      same(prev.clusterPolicies, next.clusterPolicies) &&
      same(prev.namespacePolicies, next.namespacePolicies) &&
      same(prev.workspaces, next.workspaces) &&
      same(prev.services, next.services) &&
      // The agent's source keeps its tenancy settings while they are the same.
      prev.tenancy === next.tenancy
    );
  }
}
