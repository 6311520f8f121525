// bench-datapath.ts --candidate: the project's ruleset with its pod peer maps
// as a bit tree (peer-lookup-variants.ts), PEER_BITS_DEPTH levels (default 7).
import type { ClusterState } from '../../src/model/types.ts';
import { renderNode } from '../../test/support/render-node.ts';
import { peerMapsAsBits } from './peer-lookup-variants.ts';

export function render(state: ClusterState, node: string): string {
  return peerMapsAsBits(renderNode(state, node).text, Number(process.env['PEER_BITS_DEPTH'] ?? '7'));
}
