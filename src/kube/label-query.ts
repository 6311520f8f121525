// A validated LabelSelector as Kubernetes label-selector query text
// (`?labelSelector=`), for server-side filtered pod watches.
import type { LabelSelector } from '../model/types.ts';

// Characters that would change the meaning of the query text. Validated label
// keys and values never contain them; the check keeps this module total.
const UNSAFE = /[\s,()!=]/;

/**
 * `app=db,tier in (a,b),!canary`; requirements sorted so equal selectors give
 * equal text. '' for the empty selector (everything). undefined when the
 * selector can't be expressed (In/NotIn without values, unsafe characters):
 * the caller then watches a superset.
 */
export function labelQuery(sel: LabelSelector): string | undefined {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(sel.matchLabels)) {
    if (UNSAFE.test(k) || UNSAFE.test(v) || k === '') return undefined;
    parts.push(`${k}=${v}`);
  }
  for (const r of sel.matchExpressions) {
    if (UNSAFE.test(r.key) || r.key === '') return undefined;
    switch (r.operator) {
      case 'In':
      case 'NotIn': {
        if (r.values.length === 0 || r.values.some((v) => UNSAFE.test(v))) return undefined;
        const vals = [...new Set(r.values)].sort().join(',');
        parts.push(`${r.key} ${r.operator === 'In' ? 'in' : 'notin'} (${vals})`);
        break;
      }
      case 'Exists':
        parts.push(r.key);
        break;
      case 'DoesNotExist':
        parts.push(`!${r.key}`);
        break;
    }
  }
  return [...new Set(parts)].sort().join(',');
}
