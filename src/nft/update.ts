// Element-only updates, the way Calico Felix keeps nftables in sync: when the
// new ruleset has the same tables, chains, rules and set/map declarations as
// the one the kernel holds and differs only in set or map elements (pods
// coming and going, relabelled, IPs reused), the update is one nft script of
// `delete element` / `add element` commands for exactly the differences,
// instead of the whole table again. nft applies a file as one transaction:
// if anything in it fails (the kernel does not hold `prev`, an element to
// delete is missing), nothing of it is applied. Anything structural falls
// back to the full script (render.ts), which is always the recovery path.
import type { CompiledRuleset } from '../compile/ir.ts';
import { elementList, mapElementText, renderRuleset } from './render.ts';

export type RulesetUpdate =
  /** Apply `text` on top of `prev`; added/removed count elements (a changed map entry is one of each). */
  | { readonly kind: 'incremental'; readonly text: string; readonly added: number; readonly removed: number }
  /** `text` is renderRuleset(next); `reason` says why an element update was not possible (for logs). */
  | { readonly kind: 'full'; readonly text: string; readonly reason: string };

/**
 * The ruleset without its set and map elements, as script text: two rulesets
 * with equal skeletons differ only in elements. The declaration order is part
 * of it, so the kernel's listing after an element update is the listing a full
 * apply of `next` would give.
 */
export function rulesetSkeleton(c: CompiledRuleset): string {
  return renderRuleset({ ...c, sets: c.sets.map((s) => ({ ...s, elements: [] })), maps: c.maps.map((m) => ({ ...m, elements: [] })) });
}

interface Diff {
  readonly removed: readonly string[];
  readonly added: readonly string[];
}

/**
 * Elements only in `prev` (removed) and only in `next` (added), each in its
 * list's order. Both lists hold unique elements in the compiler's order, so a
 * common head and tail are in both and only the window between them needs
 * hashing: for one pod's churn that is a handful of elements, not the set.
 */
function diffElements(prev: readonly string[], next: readonly string[]): Diff {
  let head = 0;
  const max = Math.min(prev.length, next.length);
  while (head < max && prev[head] === next[head]) head++;
  let tail = 0;
  while (tail < max - head && prev[prev.length - 1 - tail] === next[next.length - 1 - tail]) tail++;
  if (head === prev.length && head === next.length) return { removed: [], added: [] };
  const a = prev.slice(head, prev.length - tail);
  const b = next.slice(head, next.length - tail);
  const before = new Set(a);
  const after = new Set(b);
  return { removed: a.filter((e) => !after.has(e)), added: b.filter((e) => !before.has(e)) };
}

function firstDifferentLine(a: string, b: string): string {
  const la = a.split('\n');
  const lb = b.split('\n');
  for (let i = 0; i < Math.max(la.length, lb.length); i++) {
    if (la[i] !== lb[i]) return (lb[i] ?? la[i] ?? '').trim().slice(0, 160);
  }
  return '';
}

function full(next: CompiledRuleset, reason: string): RulesetUpdate {
  return { kind: 'full', text: renderRuleset(next), reason };
}

/**
 * The cheapest correct script taking the kernel from `prev` (the last ruleset
 * applied successfully) to `next`: element commands when only elements
 * differ, else the full replacement. `prev` undefined: full.
 */
export function renderUpdate(prev: CompiledRuleset | undefined, next: CompiledRuleset): RulesetUpdate {
  if (prev === undefined) return full(next, 'no previous ruleset');
  if (prev.table !== next.table) return full(next, `table changed from ${prev.table}`);
  const a = rulesetSkeleton(prev);
  const b = rulesetSkeleton(next);
  if (a !== b) return full(next, `structure changed at: ${firstDifferentLine(a, b)}`);

  const t = next.table;
  const deletes: string[] = [];
  const adds: string[] = [];
  let added = 0;
  let removed = 0;
  const emit = (name: string, d: Diff, deleteKeys: readonly string[]): void => {
    // Map elements are deleted by key alone.
    if (deleteKeys.length > 0) deletes.push(`delete element inet ${t} ${name} ${elementList(deleteKeys, '\t')}`);
    if (d.added.length > 0) adds.push(`add element inet ${t} ${name} ${elementList(d.added, '\t')}`);
    added += d.added.length;
    removed += d.removed.length;
  };
  // Equal skeletons: the same sets and maps, in the same order.
  next.sets.forEach((s, i) => {
    const d = diffElements(prev.sets[i]?.elements ?? [], s.elements);
    emit(s.name, d, d.removed);
  });
  next.maps.forEach((m, i) => {
    const before = prev.maps[i]?.elements ?? [];
    if (before.length === m.elements.length && before.every((e, j) => e.key === m.elements[j]?.key && e.chain === m.elements[j]?.chain)) return;
    const nextText = new Map(m.elements.map((e) => [e.key, mapElementText(e)]));
    const prevText = new Map(before.map((e) => [e.key, mapElementText(e)]));
    // A key whose verdict changed is deleted and added again in the same transaction.
    const gone = before.filter((e) => nextText.get(e.key) !== prevText.get(e.key));
    const d = { removed: gone.map((e) => prevText.get(e.key) ?? ''), added: m.elements.filter((e) => prevText.get(e.key) !== nextText.get(e.key)).map(mapElementText) };
    emit(m.name, d, gone.map((e) => e.key));
  });
  // Deletes first: a replaced interval or map key is free again when its successor is added.
  const text = [`# nft-netpol-agent element update for node ${next.node.replace(/[^A-Za-z0-9._-]/g, '_')}: ${added} added, ${removed} removed`, ...deletes, ...adds, ''].join('\n');
  return { kind: 'incremental', text, added, removed };
}
