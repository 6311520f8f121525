// A policy with two peer identities by label, for the datapath tests of the
// pod peer map's plain sets (peer-split.test.ts, recent-peers.test.ts):
// `grp: g1` pods may reach x/a on port 80, `grp: g2` pods on port 81.
import type { ClusterState } from '../../src/model/types.ts';
import { networkPolicy } from './raw.ts';

export const GROUPS_POLICY = networkPolicy('x', 'groups', {
  podSelector: { matchLabels: { pod: 'a' } },
  policyTypes: ['Ingress'],
  ingress: [
    { from: [{ namespaceSelector: {}, podSelector: { matchLabels: { grp: 'g1' } } }], ports: [{ protocol: 'TCP', port: 80 }] },
    { from: [{ namespaceSelector: {}, podSelector: { matchLabels: { grp: 'g2' } } }], ports: [{ protocol: 'TCP', port: 81 }] },
  ],
});

/** `base` with these pods' `grp` labels (others unlabelled); unchanged pods keep their objects (the sources do). */
export function withGroups(base: ClusterState, prev: ClusterState, groups: Record<string, 'g1' | 'g2'>): ClusterState {
  const pods = prev.pods.map((p) => {
    const want = groups[`${p.namespace}/${p.name}`];
    if (p.labels['grp'] === want) return p;
    const labels = { ...p.labels };
    if (want === undefined) delete labels['grp'];
    else labels['grp'] = want;
    return { ...p, labels };
  });
  return { ...base, pods };
}
