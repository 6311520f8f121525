// bench-datapath.ts --candidate: the project's ruleset without the lookups of
// held peer addresses (nft/recent-peers.ts): no gate rule after the pod peer
// map's lookup, no `<dir>-recent-v4|v6` chain, no held-address sets. The
// ruleset as it was before them, to measure what a packet pays for the gate
// (one lookup of a set that is empty nearly always).
import type { ClusterState } from '../../src/model/types.ts';
import { renderNode } from '../../test/support/render-node.ts';

export function withoutHeldLookups(text: string): string {
  return text
    .replace(/\t\tip6? [sd]addr @(ingress|egress)-peers-v[46]-recent jump (ingress|egress)-recent-v[46]\n/g, '')
    .replace(/\tchain (ingress|egress)-recent-v[46] \{\n(\t\t[^\n]*\n)*\t\}\n\n/g, '')
    .replace(/\tset (ingress|egress)-peers-v[46]-(recent|r-KUBE-PEERS-[0-9a-f]{12}-(IN|EG)) \{\n(\t\t[^\n]*\n)*\t\}\n\n/g, '');
}

export function render(state: ClusterState, node: string): string {
  return withoutHeldLookups(renderNode(state, node).text);
}
