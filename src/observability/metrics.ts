// Prometheus metrics of the agent. Every agent metric is prefixed `nftnp_`
// and carries its unit in its name; the names follow Calico Felix's where
// there is an equivalent (felix_iptables_restore_errors ->
// nftnp_nft_restore_errors_total, ...) so that Felix dashboards and alerts
// translate one to one. Node.js process metrics (process_*, nodejs_*) keep
// prom-client's standard unprefixed names.
//
// The node a series belongs to is NOT an agent label (except on
// nftnp_build_info): Prometheus attaches it from service discovery
// (`__meta_kubernetes_pod_node_name` -> `node`, see daemonset/monitoring/).
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export type MetricType = 'counter' | 'gauge' | 'histogram';

export interface MetricDefinition {
  readonly name: string;
  readonly type: MetricType;
  readonly help: string;
  readonly labelNames: readonly string[];
  /** The Calico Felix metric this one corresponds to, if any (documentation). */
  readonly felix: string | undefined;
  /** Histograms only: upper bounds in seconds. */
  readonly buckets?: readonly number[];
}

/** nftnp_resync_state values (same numbering as felix_resync_state). */
export const ResyncState = {
  /** Started, the initial list of every watched resource is not complete yet. */
  WaitingForInitialSync: 1,
  /** A change is known and not yet in the kernel (or the last apply failed). */
  Applying: 2,
  /** The kernel holds the ruleset for everything seen so far. */
  InSync: 3,
} as const;
export type ResyncStateValue = (typeof ResyncState)[keyof typeof ResyncState];

/** Time to apply one ruleset transaction (render + nft -f). 1 ms .. 30 s. */
export const APPLY_TIME_BUCKETS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** From the API event (watch delivery) to the kernel enforcing it. 5 ms .. 30 s. */
export const EVENT_TO_APPLIED_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

const DEFINITIONS = [
  {
    name: 'nftnp_nft_restore_calls_total',
    type: 'counter',
    help: 'Number of nft -f transactions (ruleset loads) attempted.',
    labelNames: [],
    felix: 'felix_iptables_restore_calls',
  },
  {
    name: 'nftnp_nft_restore_errors_total',
    type: 'counter',
    help: 'Number of nft -f transactions the kernel or nft rejected; the previous ruleset stayed in force.',
    labelNames: [],
    felix: 'felix_iptables_restore_errors',
  },
  {
    name: 'nftnp_dataplane_apply_time_seconds',
    type: 'histogram',
    help: 'Time to bring the dataplane in line with the desired state (render and nft transaction), in seconds.',
    labelNames: [],
    felix: 'felix_int_dataplane_apply_time_seconds',
    buckets: APPLY_TIME_BUCKETS,
  },
  {
    name: 'nftnp_dataplane_failures_total',
    type: 'counter',
    help: 'Number of dataplane updates that failed (after which the agent retries with backoff).',
    labelNames: [],
    felix: 'felix_int_dataplane_failures',
  },
  {
    name: 'nftnp_resync_state',
    type: 'gauge',
    help: 'Sync state: 1 = waiting for the initial sync, 2 = applying / out of sync, 3 = in sync.',
    labelNames: [],
    felix: 'felix_resync_state',
  },
  {
    name: 'nftnp_in_sync',
    type: 'gauge',
    help: '1 when the kernel ruleset matches the desired state, else 0.',
    labelNames: [],
    felix: undefined,
  },
  {
    name: 'nftnp_active_local_endpoints',
    type: 'gauge',
    help: 'Number of pods on this node (not host-network) whose traffic the agent filters.',
    labelNames: [],
    felix: 'felix_active_local_endpoints',
  },
  {
    name: 'nftnp_active_local_policies',
    type: 'gauge',
    help: 'Number of policies of every kind (NetworkPolicies, the tenancy kinds, ClusterNetworkPolicies) that select at least one pod on this node.',
    labelNames: [],
    felix: 'felix_active_local_policies',
  },
  {
    name: 'nftnp_cluster_num_policies',
    type: 'gauge',
    help: 'Number of NetworkPolicies in the cluster, as seen by this agent.',
    labelNames: [],
    felix: 'felix_cluster_num_policies',
  },
  {
    name: 'nftnp_cluster_num_cluster_network_policies',
    type: 'gauge',
    help: 'Number of ClusterNetworkPolicies (with the legacy AdminNetworkPolicy and BaselineAdminNetworkPolicy) in the cluster, as seen by this agent, by tier (Admin, Baseline).',
    labelNames: ['tier'],
    felix: undefined,
  },
  {
    name: 'nftnp_nft_chains',
    type: 'gauge',
    help: 'Number of chains in the agent table.',
    labelNames: [],
    felix: 'felix_iptables_chains',
  },
  {
    name: 'nftnp_nft_rules',
    type: 'gauge',
    help: 'Number of rules in the agent table.',
    labelNames: [],
    felix: 'felix_iptables_rules',
  },
  {
    name: 'nftnp_nft_sets',
    type: 'gauge',
    help: 'Number of sets and verdict maps in the agent table.',
    labelNames: [],
    felix: 'felix_ipsets_total',
  },
  {
    name: 'nftnp_nft_set_elements',
    type: 'gauge',
    help: 'Number of elements in all sets and maps of the agent table.',
    labelNames: [],
    felix: undefined,
  },
  {
    name: 'nftnp_peer_addresses_held',
    type: 'gauge',
    help: 'Number of remote pod addresses the kernel holds in the small held-address sets instead of the pod peer maps until the next fold (1 s by default; see docs/datapath.md, Held peer addresses).',
    labelNames: [],
    felix: undefined,
  },
  {
    name: 'nftnp_drift_repairs_total',
    type: 'counter',
    help: 'Number of times the kernel table differed from the last applied ruleset (edited or deleted by someone else) and was rewritten.',
    labelNames: [],
    felix: undefined,
  },
  {
    name: 'nftnp_drift_checks_given_way_total',
    type: 'counter',
    help: 'Number of periodic drift checks given up (their table listing stopped) for a change that came meanwhile.',
    labelNames: [],
    felix: undefined,
  },
  {
    name: 'nftnp_private_file_failures_total',
    type: 'counter',
    help: 'Number of scripts (nft transactions, conntrack batches) that could not be written whole to a private file in /dev/shm first. An nft transaction then goes through a pipe, which an agent killed while writing can leave nft cut short; see the log for why.',
    labelNames: [],
    felix: undefined,
  },
  {
    name: 'nftnp_refreshes_total',
    type: 'counter',
    help: 'Number of full re-applies of the table after increments, which bound how long an edit made before an increment can pass as ours: taken_by="check" by a drift check in a quiet moment, "change" by a change\'s apply when no quiet moment came in twice the refresh interval.',
    labelNames: ['taken_by'],
    felix: undefined,
  },
  {
    name: 'nftnp_table_monitor_restarts_total',
    type: 'counter',
    help: 'Number of times the nft monitor process that follows changes of the agent table ended and was restarted.',
    labelNames: [],
    felix: undefined,
  },
  {
    name: 'nftnp_watch_restarts_total',
    type: 'counter',
    help: 'Number of times a Kubernetes watch was restarted, by resource and reason: error (a request or stream failed), stalled (the open stream had missed events), gone (410: relisted), closed (the server ended the stream; resumed). Only error and stalled are trouble.',
    labelNames: ['resource', 'reason'],
    felix: undefined,
  },
  {
    name: 'nftnp_invalid_policies',
    type: 'gauge',
    help: 'Number of invalid NetworkPolicies (and NamespaceNetworkPolicies, ClusterNetworkPolicies), enforced fail-closed (selected pods isolated, nothing allowed by them); see their Events.',
    labelNames: [],
    felix: undefined,
  },
  {
    name: 'nftnp_invalid_cluster_network_policies',
    type: 'gauge',
    help: 'Number of invalid ClusterNetworkPolicies (and legacy kinds; also counted in nftnp_invalid_policies), enforced fail-closed (an invalid Accept rule matches nothing, an invalid Deny or Pass rule denies all).',
    labelNames: [],
    felix: undefined,
  },
  {
    name: 'nftnp_event_to_applied_seconds',
    type: 'histogram',
    help: 'Time from a Kubernetes watch event to the kernel enforcing its effect, in seconds.',
    labelNames: [],
    felix: undefined,
    buckets: EVENT_TO_APPLIED_BUCKETS,
  },
  {
    name: 'nftnp_last_successful_apply_timestamp_seconds',
    type: 'gauge',
    help: 'Unix time of the last successful nft transaction, in seconds.',
    labelNames: [],
    felix: undefined,
  },
  {
    name: 'nftnp_denied_packets_total',
    type: 'counter',
    help: 'Packets the deny path dropped or rejected on this node, by direction (pod chains, unknown local endpoints and ClusterNetworkPolicy Deny rules).',
    labelNames: ['direction'],
    felix: undefined,
  },
  {
    name: 'nftnp_pod_denied_packets_total',
    type: 'counter',
    help: 'Packets denied to (ingress) or from (egress) one local pod; series go with the pod.',
    labelNames: ['namespace', 'pod', 'direction'],
    felix: undefined,
  },
  {
    name: 'nftnp_staged_verdict_changes_total',
    type: 'counter',
    help: 'New connections whose verdict a staged policy would change (change would-deny or would-allow), counted in the kernel, by the staged policy selecting the local pod (the first in evaluation order).',
    labelNames: ['namespace', 'policy', 'change'],
    felix: undefined,
  },
  {
    name: 'nftnp_denied_log_packets_total',
    type: 'counter',
    help: 'Deny-path log packets (--log-denied) received from the kernel NFLOG group.',
    labelNames: [],
    felix: undefined,
  },
  {
    name: 'nftnp_denied_log_dropped_total',
    type: 'counter',
    help: 'Deny-path log packets or lines dropped by the agent: reason queue (backlog full), malformed or lines (log budget).',
    labelNames: ['reason'],
    felix: undefined,
  },
  {
    name: 'nftnp_policy_rule_connections_total',
    type: 'counter',
    help: 'New connections one policy rule decided on this node (packets its rule chain counted), for rules selecting a local pod; series go with the rule.',
    labelNames: ['kind', 'namespace', 'policy', 'rule', 'direction', 'action'],
    felix: undefined,
  },
  {
    name: 'nftnp_policy_rule_series_dropped',
    type: 'gauge',
    help: 'Policy rules of this node without an nftnp_policy_rule_connections_total series: over --rule-metrics-max.',
    labelNames: [],
    felix: undefined,
  },
  {
    name: 'nftnp_denied_log_reader_restarts_total',
    type: 'counter',
    help: 'Times the NFLOG reader (tcpdump) exited unexpectedly and was restarted.',
    labelNames: [],
    felix: undefined,
  },
  {
    name: 'nftnp_last_change_timestamp_seconds',
    type: 'gauge',
    help: 'Unix time of the last cluster change the agent received that can alter its ruleset, in seconds.',
    labelNames: [],
    felix: undefined,
  },
  {
    name: 'nftnp_status_writes_total',
    type: 'counter',
    help: "Writes of the node's NodePolicyStatus (only when its content changed) and renewals of its Lease, by object and result.",
    labelNames: ['object', 'result'],
    felix: undefined,
  },
  {
    name: 'nftnp_build_info',
    type: 'gauge',
    help: 'Always 1; the labels tell the agent version, the git commit it was built from, its Node.js version and the node it runs on.',
    labelNames: ['version', 'commit', 'nodejs', 'node'],
    felix: undefined,
  },
] as const satisfies readonly MetricDefinition[];

/** Every agent metric, in a stable order (documentation and tests). */
export const METRIC_DEFINITIONS: readonly MetricDefinition[] = DEFINITIONS;

export type MetricName = (typeof DEFINITIONS)[number]['name'];

/** Every metric name createMetrics() registers (without process_* / nodejs_*). */
export const METRIC_NAMES: readonly MetricName[] = DEFINITIONS.map((d) => d.name);

export interface MetricsOptions {
  /** Register prom-client's process_* and nodejs_* metrics (default true). */
  readonly defaultMetrics?: boolean;
}

export interface Metrics {
  readonly registry: Registry;
  readonly nftRestoreCalls: Counter;
  readonly nftRestoreErrors: Counter;
  readonly dataplaneApplyTime: Histogram;
  readonly dataplaneFailures: Counter;
  readonly resyncState: Gauge;
  readonly inSync: Gauge;
  readonly activeLocalEndpoints: Gauge;
  readonly activeLocalPolicies: Gauge;
  readonly clusterNumPolicies: Gauge;
  readonly clusterNumClusterPolicies: Gauge<'tier'>;
  readonly nftChains: Gauge;
  readonly nftRules: Gauge;
  readonly nftSets: Gauge;
  readonly nftSetElements: Gauge;
  readonly peerAddressesHeld: Gauge;
  readonly driftRepairs: Counter;
  readonly driftChecksGivenWay: Counter;
  readonly privateFileFailures: Counter;
  readonly refreshes: Counter<'taken_by'>;
  readonly tableMonitorRestarts: Counter;
  readonly watchRestarts: Counter<'resource' | 'reason'>;
  readonly invalidPolicies: Gauge;
  readonly invalidClusterPolicies: Gauge;
  readonly eventToApplied: Histogram;
  readonly lastSuccessfulApply: Gauge;
  readonly lastChange: Gauge;
  readonly statusWrites: Counter<'object' | 'result'>;
  readonly buildInfo: Gauge<'version' | 'commit' | 'nodejs' | 'node'>;
  readonly deniedPackets: Counter<'direction'>;
  readonly podDeniedPackets: Counter<'namespace' | 'pod' | 'direction'>;
  readonly stagedVerdictChanges: Counter<'namespace' | 'policy' | 'change'>;
  readonly deniedLogPackets: Counter;
  readonly deniedLogDropped: Counter<'reason'>;
  readonly deniedLogReaderRestarts: Counter;
  readonly policyRuleConnections: Counter<'kind' | 'namespace' | 'policy' | 'rule' | 'direction' | 'action'>;
  readonly policyRuleSeriesDropped: Gauge;
  /** Sets nftnp_resync_state and keeps nftnp_in_sync consistent with it. */
  setResyncState(state: ResyncStateValue): void;
  /** Sets nftnp_build_info{version,commit,nodejs,node} to 1 (replacing any earlier labels). */
  setBuildInfo(build: { readonly version: string; readonly commit: string; readonly nodejs: string }, node: string): void;
}

function def(name: MetricName): MetricDefinition {
  const d = METRIC_DEFINITIONS.find((x) => x.name === name);
  if (d === undefined) throw new Error(`no metric definition ${name}`);
  return d;
}

/**
 * Registers every agent metric in `registry` and returns typed handles.
 * Call once per registry: prom-client refuses to register a name twice.
 */
export function createMetrics(registry: Registry = new Registry(), options: MetricsOptions = {}): Metrics {
  const counter = (name: MetricName): Counter => {
    const d = def(name);
    return new Counter({ name: d.name, help: d.help, registers: [registry] });
  };
  const gauge = (name: MetricName): Gauge => {
    const d = def(name);
    return new Gauge({ name: d.name, help: d.help, registers: [registry] });
  };
  const histogram = (name: MetricName): Histogram => {
    const d = def(name);
    return new Histogram({ name: d.name, help: d.help, buckets: [...(d.buckets ?? [])], registers: [registry] });
  };

  const watchRestartsDef = def('nftnp_watch_restarts_total');
  const buildInfoDef = def('nftnp_build_info');
  const statusWritesDef = def('nftnp_status_writes_total');

  const resyncState = gauge('nftnp_resync_state');
  const inSync = gauge('nftnp_in_sync');
  resyncState.set(ResyncState.WaitingForInitialSync);
  inSync.set(0);

  const buildInfo = new Gauge<'version' | 'commit' | 'nodejs' | 'node'>({
    name: buildInfoDef.name,
    help: buildInfoDef.help,
    labelNames: ['version', 'commit', 'nodejs', 'node'],
    registers: [registry],
  });

  const labelled = <L extends string>(name: MetricName, labelNames: readonly L[]): Counter<L> => {
    const d = def(name);
    return new Counter<L>({ name: d.name, help: d.help, labelNames: [...labelNames], registers: [registry] });
  };

  const metrics: Metrics = {
    registry,
    nftRestoreCalls: counter('nftnp_nft_restore_calls_total'),
    nftRestoreErrors: counter('nftnp_nft_restore_errors_total'),
    dataplaneApplyTime: histogram('nftnp_dataplane_apply_time_seconds'),
    dataplaneFailures: counter('nftnp_dataplane_failures_total'),
    resyncState,
    inSync,
    activeLocalEndpoints: gauge('nftnp_active_local_endpoints'),
    activeLocalPolicies: gauge('nftnp_active_local_policies'),
    clusterNumPolicies: gauge('nftnp_cluster_num_policies'),
    clusterNumClusterPolicies: new Gauge<'tier'>({
      name: 'nftnp_cluster_num_cluster_network_policies',
      help: def('nftnp_cluster_num_cluster_network_policies').help,
      labelNames: ['tier'],
      registers: [registry],
    }),
    nftChains: gauge('nftnp_nft_chains'),
    nftRules: gauge('nftnp_nft_rules'),
    nftSets: gauge('nftnp_nft_sets'),
    nftSetElements: gauge('nftnp_nft_set_elements'),
    peerAddressesHeld: gauge('nftnp_peer_addresses_held'),
    driftRepairs: counter('nftnp_drift_repairs_total'),
    driftChecksGivenWay: counter('nftnp_drift_checks_given_way_total'),
    privateFileFailures: counter('nftnp_private_file_failures_total'),
    refreshes: new Counter<'taken_by'>({
      name: 'nftnp_refreshes_total',
      help: def('nftnp_refreshes_total').help,
      labelNames: ['taken_by'],
      registers: [registry],
    }),
    tableMonitorRestarts: counter('nftnp_table_monitor_restarts_total'),
    watchRestarts: new Counter<'resource' | 'reason'>({
      name: watchRestartsDef.name,
      help: watchRestartsDef.help,
      labelNames: ['resource', 'reason'],
      registers: [registry],
    }),
    invalidPolicies: gauge('nftnp_invalid_policies'),
    invalidClusterPolicies: gauge('nftnp_invalid_cluster_network_policies'),
    eventToApplied: histogram('nftnp_event_to_applied_seconds'),
    lastSuccessfulApply: gauge('nftnp_last_successful_apply_timestamp_seconds'),
    lastChange: gauge('nftnp_last_change_timestamp_seconds'),
    statusWrites: new Counter<'object' | 'result'>({
      name: statusWritesDef.name,
      help: statusWritesDef.help,
      labelNames: ['object', 'result'],
      registers: [registry],
    }),
    buildInfo,
    deniedPackets: labelled('nftnp_denied_packets_total', ['direction']),
    podDeniedPackets: labelled('nftnp_pod_denied_packets_total', ['namespace', 'pod', 'direction']),
    stagedVerdictChanges: labelled('nftnp_staged_verdict_changes_total', ['namespace', 'policy', 'change']),
    deniedLogPackets: counter('nftnp_denied_log_packets_total'),
    deniedLogDropped: labelled('nftnp_denied_log_dropped_total', ['reason']),
    deniedLogReaderRestarts: counter('nftnp_denied_log_reader_restarts_total'),
    policyRuleConnections: labelled('nftnp_policy_rule_connections_total', [
      'kind',
      'namespace',
      'policy',
      'rule',
      'direction',
      'action',
    ]),
    policyRuleSeriesDropped: gauge('nftnp_policy_rule_series_dropped'),
    setResyncState(state: ResyncStateValue): void {
      resyncState.set(state);
      inSync.set(state === ResyncState.InSync ? 1 : 0);
    },
    setBuildInfo(build, node): void {
      buildInfo.reset();
      buildInfo.set({ version: build.version, commit: build.commit, nodejs: build.nodejs, node }, 1);
    },
  };

  if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
  return metrics;
}
