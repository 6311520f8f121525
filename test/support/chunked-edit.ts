// A ChunkedList made from the last one as the agent's source makes its lists
// (kube/sorted-view.ts): the changed middle edited, every other chunk shared.
import { commonEnds } from '../../src/model/list-diff.ts';
import { ChunkedList, type ListEdit } from '../../src/model/list.ts';

/** `next` (an array) as an edit of `prev`: the middle where they differ replaced, the chunks around it shared. */
export function editedFrom<T>(prev: ChunkedList<T>, next: readonly T[]): ChunkedList<T> {
  const before = [...prev];
  const { head, tail } = commonEnds(before, next);
  const edits: ListEdit<T>[] = [];
  for (let i = head; i < next.length - tail; i++) edits.push({ at: head, insert: true, now: next[i]! });
  for (let i = head; i < before.length - tail; i++) edits.push({ at: i, insert: false, now: undefined });
  return prev.edit(edits);
}
