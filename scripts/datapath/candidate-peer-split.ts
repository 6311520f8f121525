// bench-datapath.ts --candidate: the project's ruleset with the split of
// each pod peer map's biggest identity into a plain set (compile/peer-split.ts)
// at any size (peerSplitMin 1, or PEER_SPLIT_MIN): the benchmark's clusters
// are too small to reach the agent's threshold, so this measures what a
// packet pays for the set and its rule after the map's lookup.
import type { ClusterState } from '../../src/model/types.ts';
import { renderNode } from '../../test/support/render-node.ts';

export function render(state: ClusterState, node: string): string {
  return renderNode(state, node, { peerSplitMin: Number(process.env['PEER_SPLIT_MIN'] ?? '1') }).text;
}
