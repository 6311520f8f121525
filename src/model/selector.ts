// Label selector semantics (k8s.io/apimachinery labels.Selector) on validated selectors.
import type { LabelSelector, Labels, SelectorRequirement } from './types.ts';

export const EVERYTHING: LabelSelector = Object.freeze({ matchLabels: Object.freeze({}), matchExpressions: Object.freeze([]) });

function requirementMatches(r: SelectorRequirement, labels: Labels): boolean {
  const has = Object.hasOwn(labels, r.key);
  switch (r.operator) {
    case 'In':
      return has && r.values.includes(labels[r.key] as string);
    case 'NotIn':
      // Like Kubernetes: a missing key satisfies NotIn.
      return !has || !r.values.includes(labels[r.key] as string);
    case 'Exists':
      return has;
    case 'DoesNotExist':
      return !has;
  }
}

export function selectorMatches(sel: LabelSelector, labels: Labels): boolean {
  for (const [k, v] of Object.entries(sel.matchLabels)) {
    if (!Object.hasOwn(labels, k) || labels[k] !== v) return false;
  }
  for (const r of sel.matchExpressions) if (!requirementMatches(r, labels)) return false;
  return true;
}

/**
 * selectorMatches with the selector read once: for testing many label sets
 * against one selector (no per-call allocation).
 */
export function selectorMatcher(sel: LabelSelector): (labels: Labels) => boolean {
  const keys = Object.keys(sel.matchLabels);
  const values = keys.map((k) => sel.matchLabels[k]);
  const exprs = sel.matchExpressions;
  return (labels) => {
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      // The value first: most label sets differ there, and then one lookup suffices.
      if (labels[k] !== values[i] || !Object.hasOwn(labels, k)) return false;
    }
    // Indexed: an iterator per call otherwise (tens of thousands of label sets per compile).
    for (let i = 0; i < exprs.length; i++) if (!requirementMatches(exprs[i]!, labels)) return false;
    return true;
  };
}

export function selectorIsEmpty(sel: LabelSelector): boolean {
  return Object.keys(sel.matchLabels).length === 0 && sel.matchExpressions.length === 0;
}

/** Canonical text, stable across key order: used for hashing and human output. */
export function formatSelector(sel: LabelSelector): string {
  const keys = Object.keys(sel.matchLabels);
  // The common selectors (none, or one label): no arrays to build, sort and join (thousands per compile with tiered policies).
  if (sel.matchExpressions.length === 0 && keys.length <= 1)
    return keys.length === 0 ? '{}' : `${keys[0]!}=${sel.matchLabels[keys[0]!]}`;
  const parts: string[] = [];
  for (const k of keys.sort()) parts.push(`${k}=${sel.matchLabels[k]}`);
  const exprs = sel.matchExpressions.map((r) => {
    const vals = [...r.values].sort().join(',');
    switch (r.operator) {
      case 'In':
        return `${r.key} in (${vals})`;
      case 'NotIn':
        return `${r.key} notin (${vals})`;
      case 'Exists':
        return r.key;
      case 'DoesNotExist':
        return `!${r.key}`;
    }
  });
  parts.push(...exprs.sort());
  return parts.length === 0 ? '{}' : parts.join(', ');
}
