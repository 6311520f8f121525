// bench-datapath.ts --candidate: the project's ruleset with the PEER_SPLIT_K
// (default 2) biggest identities of each pod peer map as plain sets
// (peer-lookup-variants.ts), whatever their size.
import type { ClusterState } from '../../src/model/types.ts';
import { renderNode } from '../../test/support/render-node.ts';
import { peerMapsSplit } from './peer-lookup-variants.ts';

export function render(state: ClusterState, node: string): string {
  return peerMapsSplit(renderNode(state, node).text, Number(process.env['PEER_SPLIT_K'] ?? '2'));
}
