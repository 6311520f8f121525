// Maps the reconciler's narrow metrics port onto the prom-client handles of
// observability/metrics.ts.
import type { Metrics, ResyncStateValue } from '../observability/metrics.ts';
import type { AgentMetrics } from './ports.ts';

export function agentMetrics(m: Metrics): AgentMetrics {
  return {
    restoreCall: () => m.nftRestoreCalls.inc(),
    restoreError: () => m.nftRestoreErrors.inc(),
    applySeconds: (s) => m.dataplaneApplyTime.observe(s),
    dataplaneFailure: () => m.dataplaneFailures.inc(),
    resyncState: (s) => m.setResyncState(s as ResyncStateValue),
    rulesetStats: (s) => {
      m.activeLocalEndpoints.set(s.localPods);
      m.activeLocalPolicies.set(s.policies);
      m.nftChains.set(s.chains);
      m.nftRules.set(s.rules);
      m.nftSets.set(s.sets + s.maps);
      m.nftSetElements.set(s.elements);
    },
    clusterPolicies: (n) => m.clusterNumPolicies.set(n),
    clusterNetworkPolicies: (admin, baseline, invalid) => {
      m.clusterNumClusterPolicies.set({ tier: 'Admin' }, admin);
      m.clusterNumClusterPolicies.set({ tier: 'Baseline' }, baseline);
      m.invalidClusterPolicies.set(invalid);
    },
    driftRepair: () => m.driftRepairs.inc(),
    driftCheckGaveWay: () => m.driftChecksGivenWay.inc(),
    refresh: (takenBy) => m.refreshes.inc({ taken_by: takenBy }),
    watchRestarts: (resource, delta, reason) => m.watchRestarts.inc({ resource, reason }, delta),
    invalidPolicies: (n) => m.invalidPolicies.set(n),
    eventToAppliedSeconds: (s) => m.eventToApplied.observe(s),
    lastSuccess: (t) => m.lastSuccessfulApply.set(t),
    heldPeers: (n) => m.peerAddressesHeld.set(n),
  };
}
