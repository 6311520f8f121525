// `kind: List` and typed lists (PodList, NetworkPolicyList, ...) -> their items.
import { field, isRecord } from './normalize-common.ts';

/** True for List and *List kinds that carry an items list. */
export function isListObject(obj: unknown): boolean {
  if (!isRecord(obj)) return false;
  const kind = field(obj, 'kind');
  return typeof kind === 'string' && kind.endsWith('List') && Array.isArray(field(obj, 'items'));
}

/**
 * The items of a list, recursively. Items of typed lists straight from the API
 * (e.g. a PodList) carry no kind/apiVersion: they get the list's, minus "List".
 */
export function listItems(list: unknown): unknown[] {
  if (!isRecord(list)) return [];
  const kind = field(list, 'kind');
  const items = field(list, 'items');
  if (typeof kind !== 'string' || !Array.isArray(items)) return [];
  const itemKind = kind === 'List' ? undefined : kind.slice(0, -'List'.length);
  const apiVersion = field(list, 'apiVersion');
  const out: unknown[] = [];
  for (const item of items) {
    let it: unknown = item;
    if (
      itemKind !== undefined &&
      isRecord(item) &&
      field(item, 'kind') === undefined &&
      field(item, 'apiVersion') === undefined
    ) {
      it = { ...item, kind: itemKind, ...(apiVersion === undefined ? {} : { apiVersion }) };
    }
    if (isListObject(it)) out.push(...listItems(it));
    else out.push(it);
  }
  return out;
}

/** Objects with every list replaced by its items. */
export function flattenLists(objects: readonly unknown[]): unknown[] {
  return objects.flatMap((o) => (isListObject(o) ? listItems(o) : [o]));
}
