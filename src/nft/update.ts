// Incremental updates, the way Calico Felix keeps nftables in sync: the
// kernel holds `prev` (the last ruleset applied successfully); the update is
// one nft script that changes only what differs from `next`:
//
//   - set and map elements: `delete element` / `add element` for exactly the
//     differences (pods coming and going, relabelled, IPs reused);
//   - sets: new ones added (with their elements), unused ones deleted;
//   - pod and policy chains: new ones added, changed ones flushed and refilled,
//     unused ones flushed and deleted.
//
// With `hold` (the agent's), the kernel may hold remote addresses out of the
// pod peer maps and keep dropped identities' dispatch rules a while longer
// (recent-peers.ts): the update then starts from `prev` as the kernel has it.
//
// nft applies a file as one transaction: packets see `prev` or `next`, never
// a mix, and if anything in it fails (the kernel does not hold `prev`, an
// element to delete is missing) nothing of it is applied. Base chains, maps
// and the table itself are fixed per node (except the staged policies' shadow
// base chains and maps, compile/staged.ts, updated by name); a change to them (or to an
// object's declaration, which `add` cannot change in place) falls back to the
// full script (render.ts), which is always the recovery path.
import { commonEnds, listChange } from '../model/list-diff.ts';
import { listArray } from '../model/list.ts';
import type { ReadonlyList } from '../model/list.ts';
import type { Chain, CompiledRuleset, DecisionElement, MapElement, SetElement } from '../ruleset/ir.ts';
import { decisionSize } from '../ruleset/ir.ts';
import { addressText, elementText, keyText, sameAddress, sameElement, sameKey } from './elements.ts';
import {
  NO_HELD_PEERS,
  NO_LINGERING,
  planPeerChanges,
  type HoldInput,
  type HeldPeers,
  type Lingering,
  type PeerMapChange,
} from './recent-peers.ts';
import { recentChainName } from '../ruleset/ids.ts';
import {
  decisionDeclaration,
  decisionElementText,
  decisionElementTexts,
  elementList,
  limitDeclaration,
  mapDeclaration,
  mapElementText,
  quoted,
  renderRuleset,
  ruleText,
  setDeclaration,
} from './render.ts';

export interface UpdateCounts {
  /** Elements added / removed, including those of added / deleted sets (a map key whose verdict changed is one of each). */
  readonly added: number;
  readonly removed: number;
  readonly chainsAdded: number;
  /** Existing chains whose rules were replaced (flush + add rule). */
  readonly chainsChanged: number;
  readonly chainsDeleted: number;
  readonly setsAdded: number;
  readonly setsDeleted: number;
  /** Remote addresses this update holds out of the pod peer maps, and folds back in (recent-peers.ts). */
  readonly heldOut: number;
  readonly foldedIn: number;
}

export type RulesetUpdate =
  /** Apply `text` on top of `prev`; the kernel then holds `held` out of the pod peer maps (recent-peers.ts). */
  | ({
      readonly kind: 'incremental';
      readonly text: string;
      readonly held: HeldPeers;
      readonly lingering: Lingering;
    } & UpdateCounts)
  /** `text` is renderRuleset(next); `reason` says why an incremental update was not possible (for logs). */
  | { readonly kind: 'full'; readonly text: string; readonly reason: string };

// Where a pod peer map's planned element commands go (not nft syntax: never printed).
const SLOT = '\u0000';

/** Does the update change anything at all? */
export function isEmptyUpdate(u: UpdateCounts): boolean {
  return u.added + u.removed + u.chainsAdded + u.chainsChanged + u.chainsDeleted + u.setsAdded + u.setsDeleted === 0;
}

interface Diff {
  readonly removed: readonly string[];
  readonly added: readonly string[];
}

/**
 * Elements only in `prev` (removed) and only in `next` (added), each in its
 * list's order, as text. Both lists hold unique elements in the compiler's
 * order, so a common head and tail are in both (found by comparing values,
 * no text) and only the window between them is printed and hashed: for one
 * pod's churn that is a handful of elements, not the set.
 */
function diffElements(prevList: ReadonlyList<SetElement>, nextList: ReadonlyList<SetElement>): Diff {
  // The compiler hands an unchanged set's elements on as the same list.
  if (prevList === nextList) return { removed: [], added: [] };
  // A split identity's set (compile/peer-split.ts) records its patch: no walk of its 26k elements.
  const rec = listChange(prevList, nextList);
  if (rec !== undefined) return { removed: rec.removed.map(elementText), added: rec.added.map(elementText) };
  // Unrecorded (a fresh compile's list against a patched one): as arrays.
  const prev = listArray(prevList);
  const next = listArray(nextList);
  const { head, tail } = commonEnds(prev, next, sameElement);
  if (head === prev.length && head === next.length) return { removed: [], added: [] };
  const a = prev.slice(head, prev.length - tail).map(elementText);
  const b = next.slice(head, next.length - tail).map(elementText);
  const before = new Set(a);
  const after = new Set(b);
  return { removed: a.filter((e) => !after.has(e)), added: b.filter((e) => !before.has(e)) };
}

/** The window of two sorted lists between their common head and tail (compared with `same`). */
function window<T>(prevList: ReadonlyList<T>, nextList: ReadonlyList<T>, same: (a: T, b: T) => boolean): [T[], T[]] | undefined {
  if (prevList === nextList) return undefined;
  // A patched map (compile/peer-split.ts) is a ChunkedList; unrecorded against another list (a fresh compile's), compared as arrays.
  const prev = listArray(prevList);
  const next = listArray(nextList);
  const { head, tail } = commonEnds(prev, next, same);
  if (head === prev.length && head === next.length) return undefined;
  return [prev.slice(head, prev.length - tail), next.slice(head, next.length - tail)];
}

// The compiler hands unchanged elements on as the same objects: identity first (the head and tail of a 43k-element map).
const sameMapElement = (a: MapElement, b: MapElement): boolean => a === b || (a.chain === b.chain && sameAddress(a.key, b.key));

const sameDecision = (a: DecisionElement, b: DecisionElement): boolean =>
  a === b ||
  (a.verdict.kind === b.verdict.kind &&
    (a.verdict.kind !== 'goto' || b.verdict.kind !== 'goto' || a.verdict.chain === b.verdict.chain) &&
    a.comment === b.comment &&
    sameKey(a.key, b.key));

function full(next: CompiledRuleset, reason: string): RulesetUpdate {
  return { kind: 'full', text: renderRuleset(next), reason };
}

function sameRules(a: Chain, b: Chain): boolean {
  if (a.rules === b.rules) return true;
  return (
    a.rules.length === b.rules.length &&
    a.rules.every((r, i) => {
      const other = b.rules[i];
      // The compiler reuses rule objects across chains and compiles: no text for those.
      return other !== undefined && (r === other || ruleText(r) === ruleText(other));
    })
  );
}

/**
 * chainDeclaration(a) === chainDeclaration(b), without making either: the
 * compiler makes every policy chain anew on a local pod's or a policy's
 * change, and two declarations per chain were strings for hundreds of chains
 * per apply (issue 24, memory).
 */
function sameDeclaration(a: Chain, b: Chain): boolean {
  if (a.comment !== b.comment) return false;
  if (a.base === b.base) return true;
  return a.base !== undefined && b.base !== undefined && a.base.hook === b.base.hook && a.base.priority === b.base.priority;
}

// The staged shadow path's base chains and maps (compile/staged.ts) come and
// go with staged policies: updated by name like the other chains and sets.
function isFixedBase(c: Chain): boolean {
  return c.role === 'base' && c.shadow !== true;
}

function chainDeclaration(c: Chain): string {
  const parts: string[] = [];
  if (c.base !== undefined) {
    const p = c.base.priority;
    const prio = p === 0 ? 'filter' : p > 0 ? `filter + ${p}` : `filter - ${-p}`;
    parts.push(`type filter hook ${c.base.hook} priority ${prio}; policy accept;`);
  }
  if (c.comment !== undefined) parts.push(`comment ${quoted(c.comment)};`);
  return parts.length === 0 ? '' : ` { ${parts.join(' ')} }`;
}

function byName<T extends { readonly name: string }>(xs: readonly T[]): Map<string, T> {
  return new Map(xs.map((x) => [x.name, x]));
}

/** fixedPart per ruleset: each is the next of one update and the prev of the following one. */
const fixedParts = new WeakMap<CompiledRuleset, string>();

/** Base chains, maps (declarations only), named limits and the table comment: what an update never changes. */
function fixedPart(c: CompiledRuleset): string {
  let text = fixedParts.get(c);
  if (text === undefined) fixedParts.set(c, (text = fixedPartText(c)));
  return text;
}

function fixedPartText(c: CompiledRuleset): string {
  const base = c.chains
    .filter(isFixedBase)
    .map((ch) => `${ch.name} ${JSON.stringify(ch.base)} ${ch.comment ?? ''}\n${ch.rules.map(ruleText).join('\n')}`);
  const maps = c.maps.filter((m) => m.shadow !== true).map((m) => `${m.name} ${m.kind} ${m.direction} ${mapDeclaration(m)}`);
  const limits = c.limits.map((l) => `limit ${l.name} ${limitDeclaration(l)}`);
  return [c.comment, ...base, ...maps, ...limits].join('\n');
}

/**
 * The cheapest correct script taking the kernel from `prev` (the last ruleset
 * applied successfully) to `next`: incremental commands when the fixed part is
 * unchanged, else the full replacement. `prev` undefined: full.
 */
export function renderUpdate(prev: CompiledRuleset | undefined, next: CompiledRuleset, hold?: HoldInput): RulesetUpdate {
  if (prev === undefined) return full(next, 'no previous ruleset');
  if (prev.table !== next.table) return full(next, `table changed from ${prev.table}`);
  if (fixedPart(prev) !== fixedPart(next)) return full(next, 'base chains or verdict maps changed');

  const t = `inet ${next.table}`;
  const prevSets = byName(prev.sets);
  const nextSets = byName(next.sets);
  const prevChains = byName(prev.chains.filter((c) => !isFixedBase(c)));
  const nextChains = byName(next.chains.filter((c) => !isFixedBase(c)));

  const addSets: string[] = [];
  const deleteElements: string[] = [];
  const addElements: string[] = [];
  let added = 0;
  let removed = 0;
  // Whether something besides the pod peer maps' elements makes the kernel validate its jump graph (recent-peers.ts).
  let validates = false;
  const peerChanges: PeerMapChange[] = [];

  for (const s of next.sets) {
    const old = prevSets.get(s.name);
    if (old === undefined) {
      addSets.push(`add set ${t} ${s.name} { ${setDeclaration(s)} }`);
      if (s.elements.length > 0) addSets.push(`add element ${t} ${s.name} ${elementList(s.elements.map(elementText), '\t')}`);
      added += s.elements.length;
      continue;
    }
    if (old === s) continue;
    // `add set` cannot change a declaration in place (nft ignores it).
    if (setDeclaration(old) !== setDeclaration(s)) return full(next, `set ${s.name} declared differently`);
    const d = diffElements(old.elements, s.elements);
    if (d.removed.length > 0) deleteElements.push(`delete element ${t} ${s.name} ${elementList(d.removed, '\t')}`);
    if (d.added.length > 0) addElements.push(`add element ${t} ${s.name} ${elementList(d.added, '\t')}`);
    added += d.added.length;
    removed += d.removed.length;
  }
  // Sets gone from next: deleted at the end (a dropped identity's held-address set may linger, below).
  const goneSets = prev.sets.filter((s) => !nextSets.has(s.name));

  const prevFixedMaps = prev.maps.filter((m) => m.shadow !== true);
  const prevShadowMaps = byName(prev.maps.filter((m) => m.shadow === true));
  const nextShadowMaps = byName(next.maps.filter((m) => m.shadow === true));
  const addShadowMaps: string[] = [];
  const deleteShadowMaps: string[] = [];
  for (const m of prev.maps) {
    if (m.shadow !== true || nextShadowMaps.has(m.name)) continue;
    deleteShadowMaps.push(`delete map ${t} ${m.name}`);
    removed += m.elements.length;
  }
  let fixedIndex = 0;
  next.maps.forEach((m) => {
    let old: ReadonlyList<MapElement>;
    if (m.shadow === true) {
      const p = prevShadowMaps.get(m.name);
      if (p === undefined || mapDeclaration(p) !== mapDeclaration(m) || p.kind !== m.kind) {
        if (p !== undefined) deleteShadowMaps.push(`delete map ${t} ${m.name}`);
        addShadowMaps.push(`add map ${t} ${m.name} { ${mapDeclaration(m)} }`);
        if (m.elements.length > 0)
          addElements.push(
            `add element ${t} ${m.name} ${elementList(
              m.elements.map((e) => mapElementText(m, e)),
              '\t',
            )}`,
          );
        added += m.elements.length;
        if (m.elements.some((e) => e.chain !== undefined)) validates = true;
        return;
      }
      old = p.elements;
    } else {
      old = prevFixedMaps[fixedIndex++]?.elements ?? [];
    }
    const podPeers = m.kind === 'peers' && !m.interval && m.shadow !== true;
    // A pod peer map's element commands are planned below (recent-peers.ts); their place is kept here.
    if (podPeers) {
      deleteElements.push(`${SLOT}${m.name}`);
      addElements.push(`${SLOT}${m.name}`);
    }
    // What the compiler changed, when it recorded that (a patched pod map: no walk of 43k
    // elements); else as diffElements: both lists are sorted by key, so only the window
    // between a common head and tail can differ.
    const rec = listChange(old, m.elements);
    const w =
      rec !== undefined
        ? rec.removed.length + rec.added.length === 0
          ? undefined
          : ([rec.removed, rec.added] as const)
        : window(old, m.elements, sameMapElement);
    if (w === undefined) return;
    const [before, after] = w;
    const keyed = (e: MapElement): [string, string] => [addressText(e.key), mapElementText(m, e)];
    const nextText = new Map(after.map(keyed));
    const prevText = new Map(before.map(keyed));
    // A key whose verdict changed is deleted (by key alone) and added again.
    const gone = [...prevText].filter(([k, text]) => nextText.get(k) !== text).map(([k]) => k);
    const comeEls = after.filter((e) => prevText.get(addressText(e.key)) !== nextText.get(addressText(e.key)));
    if (podPeers) {
      // A pod peer map: its elements may be held out of it (recent-peers.ts), planned below.
      const come = comeEls.map((e) => ({ addr: addressText(e.key), chain: e.chain ?? '', text: mapElementText(m, e) }));
      peerChanges.push({ map: m, gone, come });
      return;
    }
    const come = comeEls.map((e) => mapElementText(m, e));
    if (comeEls.some((e) => e.chain !== undefined)) validates = true;
    if (gone.length > 0) deleteElements.push(`delete element ${t} ${m.name} ${elementList(gone, '\t')}`);
    if (come.length > 0) addElements.push(`add element ${t} ${m.name} ${elementList(come, '\t')}`);
    added += come.length;
    removed += gone.length;
  });

  // Decision maps come and go like sets; a key whose verdict changed is deleted (by key) and added again.
  const prevDecisions = byName(prev.decisions);
  const nextDecisions = byName(next.decisions);
  const addDecisionMaps: string[] = [];
  for (const m of next.decisions) {
    const old = prevDecisions.get(m.name);
    if (old === undefined) {
      addDecisionMaps.push(`add map ${t} ${m.name} { ${decisionDeclaration(m)} }`);
      const texts = decisionElementTexts(m);
      if (texts.some((x) => / : (goto|jump) /.test(x))) validates = true;
      if (texts.length > 0) addElements.push(`add element ${t} ${m.name} ${elementList(texts, '\t')}`);
      added += texts.length;
      continue;
    }
    // The compiler hands an unchanged map on as the same object: no declaration text for it.
    if (old === m) continue;
    if (decisionDeclaration(old) !== decisionDeclaration(m)) return full(next, `map ${m.name} declared differently`);
    // Sorted by key like the verdict maps: only the window between a common head and tail can differ.
    const w = window(old.elements, m.elements, sameDecision);
    if (w === undefined) continue;
    const keyed = (e: DecisionElement): [string, string] => [keyText(e.key), decisionElementText(e)];
    const before = new Map(w[0].map(keyed));
    const after = new Map(w[1].map(keyed));
    const gone = [...before].filter(([k, text]) => after.get(k) !== text).map(([k]) => k);
    const come = [...after].filter(([k, text]) => before.get(k) !== text).map(([, text]) => text);
    if (come.some((x) => / : (goto|jump) /.test(x))) validates = true;
    if (gone.length > 0) deleteElements.push(`delete element ${t} ${m.name} ${elementList(gone, '\t')}`);
    if (come.length > 0) addElements.push(`add element ${t} ${m.name} ${elementList(come, '\t')}`);
    added += come.length;
    removed += gone.length;
  }
  const deleteDecisionMaps: string[] = [];
  for (const m of prev.decisions) {
    if (nextDecisions.has(m.name)) continue;
    deleteDecisionMaps.push(`delete map ${t} ${m.name}`);
    removed += decisionSize(m);
  }

  const addChains: string[] = [];
  const flushChains: string[] = [];
  const addRules: string[] = [];
  let chainsChanged = 0;
  // The dispatch chains of held addresses (recent-peers.ts): rules appended, dropped ones left until a fold.
  const lingerIn = hold?.lingering ?? NO_LINGERING;
  const folding = hold === undefined || hold.fold;
  const dispatchNames = new Set(
    next.sets.flatMap((x) =>
      x.recent !== undefined && x.recent.chain === undefined ? [recentChainName(x.recent.direction, x.recent.family)] : [],
    ),
  );
  const dispatchOut = new Map<string, readonly string[]>();
  const lingerChains = new Set(lingerIn.chains);
  const lingerSets = new Set(lingerIn.sets);
  const identitiesOf = (c: Chain): string[] => c.rules.flatMap((r) => (r.verdict.kind === 'goto' ? [r.verdict.chain] : []));
  for (const c of next.chains) {
    if (isFixedBase(c)) continue;
    const old = prevChains.get(c.name);
    const kernelIds = lingerIn.dispatch.get(c.name);
    if (old !== undefined && dispatchNames.has(c.name) && !folding && sameDeclaration(old, c)) {
      // As the kernel has it: appended rules for new identities; dropped ones stay.
      const kernel = kernelIds ?? identitiesOf(old);
      const have = new Set(kernel);
      const want = identitiesOf(c);
      const appended = c.rules.filter((r) => r.verdict.kind === 'goto' && !have.has(r.verdict.chain));
      for (const r of appended) addRules.push(`add rule ${t} ${c.name} ${ruleText(r)}`);
      if (appended.length > 0) chainsChanged++;
      const now = [...kernel, ...appended.flatMap((r) => (r.verdict.kind === 'goto' ? [r.verdict.chain] : []))];
      if (now.length !== want.length || now.some((x, i) => x !== want[i])) dispatchOut.set(c.name, now);
      continue;
    }
    if (old === c && kernelIds === undefined) continue;
    if (old === c) {
      // Folding: the kernel's dispatch chain is rewritten as compiled.
      flushChains.push(`flush chain ${t} ${c.name}`);
      chainsChanged++;
      for (const r of c.rules) addRules.push(`add rule ${t} ${c.name} ${ruleText(r)}`);
      continue;
    }
    if (old === undefined) {
      addChains.push(`add chain ${t} ${c.name}${chainDeclaration(c)}`);
    } else if (!sameDeclaration(old, c)) {
      return full(next, `chain ${c.name} declared differently`);
    } else if (!sameRules(old, c) || kernelIds !== undefined) {
      flushChains.push(`flush chain ${t} ${c.name}`);
      chainsChanged++;
    } else continue;
    for (const r of c.rules) addRules.push(`add rule ${t} ${c.name} ${ruleText(r)}`);
  }
  // A chain that lingered and is compiled again (its identity came back): the kernel has it, flushed.
  for (const c of next.chains) lingerChains.delete(c.name);
  for (const x of next.sets) lingerSets.delete(x.name);
  // Every rule added makes the kernel validate (rules with verdicts or lookups: all of ours).
  if (addRules.length > 0) validates = true;
  const plan = planPeerChanges(next.table, peerChanges, hold ?? { held: NO_HELD_PEERS, fold: true }, prev, next, validates);
  if (plan === undefined) return full(next, 'held peer addresses out of step with the applied ruleset');
  const slotted = (lines: readonly string[], planned: ReadonlyMap<string, readonly string[]>): string[] =>
    lines.flatMap((l) => (l.startsWith(SLOT) ? (planned.get(l.slice(SLOT.length)) ?? []) : [l]));
  const deletes = slotted(deleteElements, plan.deleteElements);
  const adds = slotted(addElements, plan.addElements);
  added += plan.added;
  removed += plan.removed;
  const gone = prev.chains.filter((c) => !isFixedBase(c) && !nextChains.has(c.name));
  // A chain must be empty to be deleted, and unreferenced: jumps to it are in
  // chains flushed above, map entries to it are deleted above. One a kernel
  // dispatch chain still names (not folding) lingers, flushed, with its set.
  const named = new Set([...dispatchOut.values()].flat());
  for (const c of gone) flushChains.push(`flush chain ${t} ${c.name}`);
  const deleteChains: string[] = [];
  for (const c of gone) {
    if (named.has(c.name)) lingerChains.add(c.name);
    else deleteChains.push(`delete chain ${t} ${c.name}`);
  }
  const deleteSets: string[] = [];
  for (const x of goneSets) {
    if (x.recent?.chain !== undefined && named.has(x.recent.chain)) {
      lingerSets.add(x.name);
      continue;
    }
    deleteSets.push(`delete set ${t} ${x.name}`);
    removed += x.elements.length;
  }
  // Folding (or the kernel's dispatch chains are as compiled again): what lingered goes.
  if (dispatchOut.size === 0) {
    for (const name of [...lingerChains].sort()) deleteChains.push(`delete chain ${t} ${name}`);
    for (const name of [...lingerSets].sort()) deleteSets.push(`delete set ${t} ${name}`);
    lingerChains.clear();
    lingerSets.clear();
  }
  const lingering: Lingering =
    dispatchOut.size + lingerChains.size + lingerSets.size === 0
      ? NO_LINGERING
      : { dispatch: dispatchOut, chains: lingerChains, sets: lingerSets };

  const counts: UpdateCounts = {
    added,
    removed,
    chainsAdded: addChains.length,
    chainsChanged,
    chainsDeleted: deleteChains.length,
    setsAdded: addSets.filter((l) => l.startsWith('add set')).length + addDecisionMaps.length + addShadowMaps.length,
    setsDeleted: deleteSets.length + deleteDecisionMaps.length + deleteShadowMaps.length,
    heldOut: plan.heldOut,
    foldedIn: plan.foldedIn,
  };
  const node = next.node.replace(/[^A-Za-z0-9._-]/g, '_');
  const header = `# nft-netpol-agent incremental update for node ${node}: ${added} elements added, ${removed} removed; chains ${counts.chainsAdded} added, ${chainsChanged} changed, ${counts.chainsDeleted} deleted; sets ${counts.setsAdded} added, ${counts.setsDeleted} deleted`;
  // Order: what rules and map entries refer to exists before they are added;
  // element deletes precede adds (a replaced interval or map key is free
  // again); nothing is deleted while still referenced (a decision map goes
  // before the rule chains its elements name, after the chains using it are flushed).
  const text = [
    header,
    ...addSets,
    ...addChains,
    ...addDecisionMaps,
    ...deletes,
    ...flushChains,
    ...deleteShadowMaps.filter((l) => addShadowMaps.some((a) => a.startsWith(l.replace('delete map', 'add map')))),
    ...addShadowMaps,
    ...addRules,
    ...adds,
    ...deleteDecisionMaps,
    ...deleteShadowMaps.filter((l) => !addShadowMaps.some((a) => a.startsWith(l.replace('delete map', 'add map')))),
    ...deleteChains,
    ...deleteSets,
    '',
  ].join('\n');
  return { kind: 'incremental', text, held: plan.held, lingering, ...counts };
}
