// Remote pods joining a pod identity, held out of the pod peer map for a
// moment (issue 24). A transaction that adds a `jump` or `goto` anywhere makes
// the kernel validate the table's jump graph, and that walks every element of
// every verdict map: at 100k pods the ~18.6k of `ingress-peers-v4`, 5-7 ms of
// the commit (docs/benchmarks.md). A remote pod that enters a peer set adds
// just one such element. When nothing else in the transaction makes the
// kernel validate, its address goes instead into two plain sets (nothing to
// validate) that every compile provides, empty (compile/identities.ts):
//
//   ingress-peers:      ip saddr vmap @ingress-peers-v4
//                       ip saddr @ingress-peers-v4-recent jump ingress-recent-v4
//                       ...
//   ingress-recent-v4:  ip saddr @ingress-peers-v4-r-KUBE-PEERS-<cid>-IN goto KUBE-PEERS-<cid>-IN
//                       ... (one rule per identity chain of the map)
//
// A held address is in no map: the map's lookup misses, the gate's matches
// and the identity chain runs as the map's `jump` would have run it (a `goto`
// from a jumped chain returns to the lookup chain, as the `jump` does), with
// the same rules after it. The held addresses go back into the map (folded)
// with the next transaction that makes the kernel validate anyway, when more
// than MAX_HELD would be held, or when the agent asks (agent/reconciler.ts:
// after a quiet moment), so that the kernel holds the compiled ruleset again.
// The dispatch chains are not rewritten between folds either (rewriting adds
// rules, and the kernel validates): a new identity's rule is appended, a
// dropped one's lingers with its flushed chain and empty set (Lingering;
// nft/update.ts does that part). Pure: what is held in, a plan out; the
// caller keeps it once nft took it.
import { elementList } from './render.ts';
import type { NamedSet, VerdictMap } from '../ruleset/ir.ts';

/** Held addresses: pod peer map name -> address (text) -> its identity chain. */
export type HeldPeers = ReadonlyMap<string, ReadonlyMap<string, string>>;

export const NO_HELD_PEERS: HeldPeers = new Map();

/** More held addresses than this are folded (each costs the first packet of a connection a few set lookups). */
export const MAX_HELD = 256;

/** How many addresses are held. */
export function heldCount(held: HeldPeers): number {
  let n = 0;
  for (const m of held.values()) n += m.size;
  return n;
}

/** A pod peer map's changes between two compiles: keys gone or re-pointed, elements added or re-pointed. */
export interface PeerMapChange {
  readonly map: VerdictMap;
  /** Address texts whose element goes (or changes its chain). */
  readonly gone: readonly string[];
  /** Elements that come (or change their chain): address text, chain, the element's text. */
  readonly come: readonly { readonly addr: string; readonly chain: string; readonly text: string }[];
}

/**
 * What the kernel keeps of the dispatch chains (`<dir>-recent-v4|v6`) apart
 * from the applied ruleset: a dropped identity's rule stays until the next
 * fold (taking it out means rewriting the chain, and any rule added makes the
 * kernel validate), so its chain (flushed) and its set stay too; a new
 * identity's rule is appended. By dispatch chain, the identity chains its
 * rules name in the kernel's order (no entry: as in the applied ruleset).
 */
export interface Lingering {
  readonly dispatch: ReadonlyMap<string, readonly string[]>;
  /** Identity chains (flushed) and held-address sets of dropped identities. */
  readonly chains: ReadonlySet<string>;
  readonly sets: ReadonlySet<string>;
}

export const NO_LINGERING: Lingering = { dispatch: new Map(), chains: new Set(), sets: new Set() };

export function isLingering(l: Lingering): boolean {
  return l.dispatch.size + l.chains.size + l.sets.size > 0;
}

export interface HoldInput {
  /** What the kernel holds out of the maps now. */
  readonly held: HeldPeers;
  /** What the kernel keeps of dropped identities and their dispatch rules (NO_LINGERING: nothing). */
  readonly lingering?: Lingering;
  /** Fold everything held back into the maps, hold nothing new. */
  readonly fold: boolean;
  readonly max?: number;
}

export interface HoldPlan {
  /** Element commands by the pod peer map whose change they are (its sets' too). */
  readonly deleteElements: ReadonlyMap<string, readonly string[]>;
  readonly addElements: ReadonlyMap<string, readonly string[]>;
  readonly added: number;
  readonly removed: number;
  /** What the kernel holds out once the transaction went in. */
  readonly held: HeldPeers;
  /** Addresses this transaction holds out (new) and folds back in. */
  readonly heldOut: number;
  readonly foldedIn: number;
}

interface RecentSets {
  readonly gate: string;
  /** Identity chain -> its set. */
  readonly byChain: ReadonlyMap<string, string>;
}

/** The held-address sets of each pod peer map, by map name. */
function recentSets(sets: readonly NamedSet[], maps: readonly VerdictMap[]): Map<string, RecentSets> {
  const gates = new Map<string, string>();
  const byChain = new Map<string, Map<string, string>>();
  const at = (d: string, f: number): string => `${d} ${f}`;
  for (const s of sets) {
    if (s.recent === undefined) continue;
    const k = at(s.recent.direction, s.recent.family);
    if (s.recent.chain === undefined) gates.set(k, s.name);
    else {
      let m = byChain.get(k);
      if (m === undefined) byChain.set(k, (m = new Map()));
      m.set(s.recent.chain, s.name);
    }
  }
  const out = new Map<string, RecentSets>();
  for (const m of maps) {
    if (m.kind !== 'peers' || m.interval) continue;
    const gate = gates.get(at(m.direction, m.family));
    if (gate !== undefined) out.set(m.name, { gate, byChain: byChain.get(at(m.direction, m.family)) ?? new Map() });
  }
  return out;
}

/**
 * The element commands of the pod peer maps' changes. `validates`: the rest
 * of the transaction makes the kernel validate anyway (a rule, a `jump` or
 * `goto` element elsewhere): everything held is folded then, for free. New
 * addresses are held only when each one's identity has its set both in the
 * kernel (`prevSets`) and after (`nextSets`).
 */
export function planPeerChanges(
  table: string,
  changes: readonly PeerMapChange[],
  input: HoldInput,
  prev: { readonly sets: readonly NamedSet[]; readonly maps: readonly VerdictMap[] },
  next: { readonly sets: readonly NamedSet[]; readonly maps: readonly VerdictMap[] },
  validates: boolean,
): HoldPlan | undefined {
  const before = recentSets(prev.sets, prev.maps);
  const after = recentSets(next.sets, next.maps);
  const setFor = (map: string, chain: string): string | undefined => {
    const a = before.get(map)?.byChain.get(chain);
    return a !== undefined && a === after.get(map)?.byChain.get(chain) ? a : undefined;
  };
  // Every held address's sets must be the kernel's (else the record is out of step).
  for (const [map, addrs] of input.held)
    for (const chain of addrs.values()) if (before.get(map)?.byChain.get(chain) === undefined) return undefined;
  let newlyHeld = 0;
  let holdable = !input.fold && !validates;
  for (const c of changes) {
    for (const e of c.come) if (setFor(c.map.name, e.chain) === undefined) holdable = false;
    newlyHeld += c.come.length;
  }
  // Not holding is folding: the kernel then holds the compiled maps again.
  const hold = holdable && heldCount(input.held) + newlyHeld <= (input.max ?? MAX_HELD);

  // Pod peer map -> set (or the map) -> element texts.
  const del = new Map<string, Map<string, string[]>>();
  const add = new Map<string, Map<string, string[]>>();
  let missing = false;
  let map = '';
  const push = (to: Map<string, Map<string, string[]>>, set: string | undefined, text: string): void => {
    if (set === undefined) {
      missing = true;
      return;
    }
    let bySet = to.get(map);
    if (bySet === undefined) to.set(map, (bySet = new Map()));
    let xs = bySet.get(set);
    if (xs === undefined) bySet.set(set, (xs = []));
    xs.push(text);
  };
  const held = new Map<string, ReadonlyMap<string, string>>();
  let heldOut = 0;
  let foldedIn = 0;
  const byMap = new Map(changes.map((c) => [c.map.name, c]));
  const mapNames = new Set([...byMap.keys(), ...input.held.keys()]);
  // In the maps' order (the output is a function of the inputs).
  for (const name of [...mapNames].sort()) {
    map = name;
    const c = byMap.get(name);
    const was = input.held.get(name) ?? new Map<string, string>();
    const gate = before.get(name)?.gate;
    const now = new Map(was);
    const gone = new Set(c?.gone ?? []);
    for (const addr of c?.gone ?? []) {
      const chain = was.get(addr);
      if (chain === undefined) {
        push(del, name, addr);
        continue;
      }
      // Held: out of its sets (they are the kernel's, whatever the next compile has).
      push(del, before.get(name)?.byChain.get(chain), addr);
      push(del, gate, addr);
      now.delete(addr);
    }
    if (hold) {
      const nextGate = after.get(name)?.gate;
      for (const e of c?.come ?? []) {
        push(add, setFor(name, e.chain), e.addr);
        push(add, nextGate, e.addr);
        now.set(e.addr, e.chain);
        heldOut++;
      }
    } else {
      for (const e of c?.come ?? []) push(add, name, e.text);
      for (const [addr, chain] of was) {
        if (gone.has(addr)) continue;
        push(del, before.get(name)?.byChain.get(chain), addr);
        push(del, gate, addr);
        push(add, name, `${addr} : jump ${chain}`);
        foldedIn++;
      }
      now.clear();
    }
    if (now.size > 0) held.set(name, now);
  }
  // A held address whose set the kernel does not have: the caller's record is out of step (a bug).
  if (missing) return undefined;
  let added = 0;
  let removed = 0;
  const lines = (xs: Map<string, Map<string, string[]>>, verb: 'add' | 'delete'): Map<string, string[]> =>
    new Map(
      [...xs].map(([m, bySet]) => [
        m,
        [...bySet].map(([set, texts]) => {
          if (verb === 'add') added += texts.length;
          else removed += texts.length;
          return `${verb} element inet ${table} ${set} ${elementList(texts, '\t')}`;
        }),
      ]),
    );
  return {
    deleteElements: lines(del, 'delete'),
    addElements: lines(add, 'add'),
    added,
    removed,
    held,
    heldOut,
    foldedIn,
  };
}
