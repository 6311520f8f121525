// Lookups over the whole cluster that the compiler needs per node. Built once
// (or advanced by a pod diff, see node-compiler.ts); the expensive parts
// (label postings, named ports) only when a relevant policy asks for them,
// and every selector result is memoized, so the cost follows what the node
// needs instead of pods x policies.
import { listArray } from '../model/list.ts';
import { parseIP } from '../model/ip.ts';
import type { IP } from '../model/ip.ts';
import { formatSelector, selectorMatcher } from '../model/selector.ts';
import { byObjectKey, insertByObjectKey } from '../model/state.ts';
import { isActivePod } from '../model/types.ts';
import { CHUNK, warmLabels, warmPods } from './pod-walk.ts';
import { parseV4 } from './v4.ts';
import type { ClusterState, ContainerPort, LabelSelector, Labels, Namespace, Pod } from '../model/types.ts';

export interface NamedPortHolder {
  readonly pod: Pod;
  readonly port: ContainerPort;
}

// Below this many candidates scanning beats looking up label postings.
const SCAN_LIMIT = 512;

/** A pod's own value of a label (never one inherited from Object.prototype). */
function labelValue(p: Pod, key: string): string | undefined {
  return Object.hasOwn(p.labels, key) ? p.labels[key] : undefined;
}

/** The value of a selector's only label; undefined when it has more or none. */
function oneLabel(matchLabels: Labels): string | undefined {
  let value: string | undefined;
  let n = 0;
  for (const k in matchLabels) {
    if (!Object.hasOwn(matchLabels, k)) continue;
    value = matchLabels[k];
    if (++n > 1) return undefined;
  }
  return value;
}

/** Inserts `p` into a list sorted by byObjectKey, keeping it sorted. */
function removeFrom(list: Pod[], p: Pod): void {
  const i = list.indexOf(p);
  if (i >= 0) list.splice(i, 1);
}

export class ClusterIndex {
  #state: ClusterState;
  readonly #podsByNs = new Map<string, Pod[]>();
  readonly #nsByName = new Map<string, Namespace>();
  readonly #nsSelectorMemo = new Map<string, readonly string[]>();
  readonly #ipMemo = new Map<string, IP | null>();
  readonly #byLabel = new Map<string, Map<string, Pod[]>>();
  /** Namespaces by value of one label key, built per key on first use (namespaces never change under an index). */
  readonly #nsByLabel = new Map<string, Map<string, Namespace[]>>();
  #namedPorts: Map<string, NamedPortHolder[]> | undefined;
  /** Active pods per node, for the nodes asked for (a compiler asks for its own), sorted by key. */
  readonly #byNode = new Map<string, Pod[]>();

  readonly #scanLimit: number;

  /**
   * scanLimit: candidates below which a selector scans instead of using label
   * postings (tests lower it). node: a node whose podsOnNode the compile will
   * ask for, collected in the same walk (each walk over 100k pods is ~5 ms of
   * memory latency).
   */
  constructor(state: ClusterState, scanLimit = SCAN_LIMIT, node?: string) {
    this.#state = state;
    this.#scanLimit = scanLimit;
    for (const ns of state.namespaces) this.#nsByName.set(ns.name, ns);
    // ClusterState.pods is sorted by namespace: the previous pod's list is mostly this one's (a lookup per namespace, not per pod).
    let lastNs: string | undefined;
    let last: Pod[] | undefined;
    const onNode: Pod[] = [];
    // Indexed: 100k pods, once per index (no iterator object per pod in code run once); by chunks, warmed first (pod-walk.ts).
    // (The agent's chunked list as one array: a copy, once per fresh index.)
    const pods = listArray(state.pods);
    for (let i = 0; i < pods.length; i++) {
      if (i % CHUNK === 0) warmPods(pods, i, Math.min(pods.length, i + CHUNK));
      const p = pods[i]!;
      if (!isActivePod(p)) continue;
      let list = p.namespace === lastNs ? last : this.#podsByNs.get(p.namespace);
      if (list === undefined) this.#podsByNs.set(p.namespace, (list = []));
      list.push(p);
      lastNs = p.namespace;
      last = list;
      if (node !== undefined && p.nodeName === node) onNode.push(p);
    }
    // What podsOnNode's walk gives: the active pods in state order, sorted (stable).
    if (node !== undefined) this.#byNode.set(node, onNode.sort(byObjectKey));
  }

  get state(): ClusterState {
    return this.#state;
  }

  /**
   * Moves the index to `state`, which has the same namespaces (names and
   * labels) as the current one and differs only in these pods: `removed`
   * are objects of the current state that `state` does not hold, `added`
   * objects of `state` the current one does not hold (a changed pod is in
   * both, old and new object). Mutates: the index of the old state is gone.
   */
  advance(state: ClusterState, removed: readonly Pod[], added: readonly Pod[]): void {
    this.#state = state;
    const gone = new Set(removed);
    const touched = new Set<string>();
    for (const p of [...removed, ...added]) touched.add(p.namespace);
    for (const ns of touched) {
      const list = (this.#podsByNs.get(ns) ?? []).filter((p) => !gone.has(p));
      for (const p of added) if (p.namespace === ns && isActivePod(p)) insertByObjectKey(list, p);
      if (list.length > 0) this.#podsByNs.set(ns, list);
      else this.#podsByNs.delete(ns);
    }
    for (const [key, m] of this.#byLabel) {
      for (const p of removed) {
        const v = labelValue(p, key);
        const list = v === undefined ? undefined : m.get(v);
        if (v === undefined || list === undefined) continue;
        removeFrom(list, p);
        if (list.length === 0) m.delete(v);
      }
      for (const p of added) {
        const v = isActivePod(p) ? labelValue(p, key) : undefined;
        if (v === undefined) continue;
        let list = m.get(v);
        if (list === undefined) m.set(v, (list = []));
        insertByObjectKey(list, p);
      }
    }
    for (const [node, list] of this.#byNode) {
      for (const p of removed) if (p.nodeName === node) removeFrom(list, p);
      for (const p of added) if (p.nodeName === node && isActivePod(p)) insertByObjectKey(list, p);
    }
    // Rebuilt on demand: few rules need it, and holders are per port.
    if (removed.some((p) => p.ports.length > 0) || added.some((p) => p.ports.length > 0)) this.#namedPorts = undefined;
    // Parsed addresses of pods long gone would pile up with churn.
    if (this.#ipMemo.size > 4 * state.pods.length + 1024) this.#ipMemo.clear();
  }

  /**
   * Keeps only the namespaceSelector results (by formatSelector text) and the
   * label postings (by key) still wanted: those of the peer results a
   * PeerResolver keeps, which are recomputed from them when a pod changes.
   */
  sweep(nsSelectors: ReadonlySet<string>, labelKeys: ReadonlySet<string>): { nsSelectors: number; labelKeys: number } {
    for (const k of this.#nsSelectorMemo.keys()) if (!nsSelectors.has(k)) this.#nsSelectorMemo.delete(k);
    for (const k of this.#byLabel.keys()) if (!labelKeys.has(k)) this.#byLabel.delete(k);
    return { nsSelectors: this.#nsSelectorMemo.size, labelKeys: this.#byLabel.size };
  }

  /**
   * Active pods scheduled on `node`, sorted by key: one walk over the pods on
   * first use, then advanced with the pod diffs (a node's own pods must not
   * cost a walk of the cluster per change).
   */
  podsOnNode(node: string): readonly Pod[] {
    let list = this.#byNode.get(node);
    if (list === undefined) {
      list = this.#state.pods.filter((p) => p.nodeName === node && isActivePod(p)).sort(byObjectKey);
      this.#byNode.set(node, list);
    }
    return list;
  }

  /** Active pods of one namespace (sorted by name). */
  podsIn(namespace: string): readonly Pod[] {
    return this.#podsByNs.get(namespace) ?? [];
  }

  /**
   * Names of the namespaces a namespaceSelector matches. A pod whose namespace
   * object is unknown matches no namespaceSelector (its labels are unknown).
   * `key`: formatSelector(sel), when the caller has it.
   */
  namespacesMatching(sel: LabelSelector, key: string = formatSelector(sel)): readonly string[] {
    let names = this.#nsSelectorMemo.get(key);
    if (names === undefined) this.#nsSelectorMemo.set(key, (names = this.#namespacesOf(sel)));
    return names;
  }

  #namespacesOf(sel: LabelSelector): readonly string[] {
    const labels = Object.entries(sel.matchLabels);
    // One label: its posting is the answer (tiered rules name a namespace so, thousands of selectors per compile).
    if (labels.length === 1 && sel.matchExpressions.length === 0)
      return (this.#nsPostings(labels[0]![0]).get(labels[0]![1]) ?? []).map((ns) => ns.name);
    // With matchLabels, only the namespaces carrying the rarest of them are
    // candidates: many selectors of one key (a workspace label each) then
    // cost one pass over the namespaces, not one each.
    let candidates: Iterable<Namespace> = this.#nsByName.values();
    let fewest = this.#nsByName.size;
    for (const [k, v] of labels) {
      const list = this.#nsPostings(k).get(v) ?? [];
      if (list.length < fewest) {
        candidates = list;
        fewest = list.length;
      }
    }
    const matches = selectorMatcher(sel);
    return [...candidates].filter((ns) => matches(ns.labels)).map((ns) => ns.name);
  }

  #nsPostings(key: string): Map<string, Namespace[]> {
    let m = this.#nsByLabel.get(key);
    if (m === undefined) {
      m = new Map();
      for (const ns of this.#nsByName.values()) {
        const v = Object.hasOwn(ns.labels, key) ? ns.labels[key] : undefined;
        if (v === undefined) continue;
        let list = m.get(v);
        if (list === undefined) m.set(v, (list = []));
        list.push(ns);
      }
      this.#nsByLabel.set(key, m);
    }
    return m;
  }

  /** Active pods in `namespaces` whose labels match `podSel` (undefined = all). */
  podsMatching(namespaces: readonly string[], podSel: LabelSelector | undefined): Pod[] {
    let candidates = 0;
    for (let n = 0; n < namespaces.length; n++) candidates += this.podsIn(namespaces[n]!).length;
    // The postings only past the scan limit (a scan reads the selector once, in selectorMatcher).
    const labels = podSel !== undefined && candidates > this.#scanLimit ? Object.entries(podSel.matchLabels) : [];
    if (podSel !== undefined && labels.length > 0) {
      let best: readonly Pod[] | undefined;
      for (const [k, v] of labels) {
        const list = this.#postings(k).get(v) ?? [];
        if (best === undefined || list.length < best.length) best = list;
      }
      const nsSet = new Set(namespaces);
      // Each candidate is a cache miss (pod, labels, namespace text): skip the checks the posting already answers.
      // A selector of one label: every pod of its posting matches. Every namespace with pods: every pod is in one.
      const selected = labels.length === 1 && podSel.matchExpressions.length === 0;
      let everyNs = 0;
      for (const ns of nsSet) if (this.#podsByNs.has(ns)) everyNs++;
      const allNs = everyNs === this.#podsByNs.size;
      if (selected && allNs) return (best ?? []).slice();
      const matches = selected ? () => true : selectorMatcher(podSel);
      return (best ?? []).filter(allNs ? (p) => matches(p.labels) : (p) => nsSet.has(p.namespace) && matches(p.labels));
    }
    const out: Pod[] = [];
    const matches = podSel === undefined ? undefined : selectorMatcher(podSel);
    // The key the matcher reads first: the chunk's labels warmed at it (pod-walk.ts).
    const key = podSel === undefined ? undefined : (Object.keys(podSel.matchLabels)[0] ?? podSel.matchExpressions[0]?.key);
    // Sized to the candidates: thousands of calls per compile scan a namespace of a few pods.
    const size = key === undefined ? 0 : Math.min(CHUNK, candidates);
    const warm: Labels[] = new Array<Labels>(size);
    const values: (string | undefined)[] = new Array<string | undefined>(size);
    const only =
      key !== undefined && podSel !== undefined && podSel.matchExpressions.length === 0 && size > 0
        ? oneLabel(podSel.matchLabels)
        : undefined;
    // Indexed loops: thousands of calls per compile (every tiered rule's pods), each a few pods.
    for (let n = 0; n < namespaces.length; n++) {
      const pods = this.podsIn(namespaces[n]!);
      if (matches === undefined || key === undefined) {
        for (let i = 0; i < pods.length; i++) if (matches === undefined || matches(pods[i]!.labels)) out.push(pods[i]!);
        continue;
      }
      for (let from = 0; from < pods.length; from += CHUNK) {
        const to = Math.min(pods.length, from + CHUNK);
        warmLabels(pods, from, to, key, warm, values);
        // One label (most selectors): the value read while warming, compared here (the matcher would read it again).
        if (only !== undefined) {
          for (let k = 0; k < to - from; k++) if (values[k] === only && Object.hasOwn(warm[k]!, key)) out.push(pods[from + k]!);
        } else for (let k = 0; k < to - from; k++) if (matches(warm[k]!)) out.push(pods[from + k]!);
      }
    }
    return out;
  }

  /** Active pods exposing a container port with this name. */
  namedPortHolders(name: string): readonly NamedPortHolder[] {
    if (this.#namedPorts === undefined) {
      const m = new Map<string, NamedPortHolder[]>();
      for (const pods of this.#podsByNs.values()) {
        for (const pod of pods) {
          for (const port of pod.ports) {
            if (port.name === undefined) continue;
            let list = m.get(port.name);
            if (list === undefined) m.set(port.name, (list = []));
            list.push({ pod, port });
          }
        }
      }
      this.#namedPorts = m;
    }
    return this.#namedPorts.get(name) ?? [];
  }

  /** Parsed address, memoized: the same pod IPs recur across many rules. */
  ip(text: string): IP | undefined {
    // IPv4 parses faster than a lookup, and a memo entry per pod would stay
    // resident with the index (see node-compiler.ts): only the rest is memoized.
    const v4 = parseV4(text);
    if (v4 !== undefined) return { family: 4, value: BigInt(v4) };
    const hit = this.#ipMemo.get(text);
    if (hit !== undefined) return hit === null ? undefined : hit;
    const ip = parseIP(text);
    this.#ipMemo.set(text, ip ?? null);
    return ip;
  }

  /** Active pods by value of one label key; built per key on first use (selectors use few keys). */
  #postings(key: string): Map<string, Pod[]> {
    let m = this.#byLabel.get(key);
    if (m === undefined) {
      m = new Map();
      // By chunks, each chunk's labels and values read first (pod-walk.ts): every active pod's labels, ~25 ms at 100k pods otherwise.
      const labels: Labels[] = new Array<Labels>(CHUNK);
      const values: (string | undefined)[] = new Array<string | undefined>(CHUNK);
      // Most pods carry one of a few values: the last one's list without a lookup.
      let lastValue: string | undefined;
      let lastList: Pod[] | undefined;
      for (const pods of this.#podsByNs.values()) {
        for (let from = 0; from < pods.length; from += CHUNK) {
          const to = Math.min(pods.length, from + CHUNK);
          warmLabels(pods, from, to, key, labels, values);
          for (let k = 0; k < to - from; k++) {
            const v = values[k];
            if (v === undefined || !Object.hasOwn(labels[k]!, key)) continue;
            let list = v === lastValue ? lastList : m.get(v);
            if (list === undefined) m.set(v, (list = []));
            lastValue = v;
            lastList = list;
            list.push(pods[from + k]!);
          }
        }
      }
      this.#byLabel.set(key, m);
    }
    return m;
  }
}
