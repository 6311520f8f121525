// Agent configuration from command-line flags and environment variables.
// Pure: argv and env in, a validated config or a usage message out. Flags win
// over environment variables, which win over defaults.
import { parseArgs } from 'node:util';
import { isIP } from 'node:net';
import { isLogLevel, type LogLevel } from '../observability/logger.ts';
import { tenancyConfig, type TenancyConfig } from '../model/tenancy-config.ts';

export interface ListenAddr {
  readonly host: string;
  readonly port: number;
}

export interface AgentConfig {
  readonly node: string;
  /** undefined = disabled (--metrics-addr ""). */
  readonly metricsAddr: ListenAddr | undefined;
  readonly debugAddr: ListenAddr | undefined;
  readonly table: string;
  readonly denyAction: 'drop' | 'reject';
  readonly driftIntervalMs: number;
  readonly debounceMs: number;
  readonly logLevel: LogLevel;
  /** Read manifests from this directory instead of the API server. */
  readonly fromDir: string | undefined;
  readonly nftPath: string;
  /** Testing aid: program the table inside this named network namespace. */
  readonly netns: string | undefined;
  /** Delete conntrack entries of removed pod IPs when `conntrack` is installed. */
  readonly conntrack: boolean;
  /** Element-only changes as add/delete element transactions (else always the full table). */
  readonly incremental: boolean;
  /** Small transactions through one long-lived `nft -i` (else an nft per transaction). */
  readonly nftSession: boolean;
  /**
   * Remote addresses joining a pod identity are held out of the pod peer map
   * (nft/recent-peers.ts) and folded back after this long without an apply; 0: never held.
   */
  readonly peerHoldMs: number;
  /** Renderer option (docs/datapath.md "Unknown local endpoints"). */
  readonly unknownLocalEndpoints: 'allow' | 'drop';
  /** Renderer and evaluator option: egress of local pods to this node itself always passes. */
  readonly allowPodToNode: boolean;
  /** --log-denied: log the deny path to an NFLOG group and read it (undefined: off). */
  readonly logDenied: DenyLogConfig | undefined;
  /** Minimum time between two writes of the node's NodePolicyStatus; 0 disables it. */
  readonly statusIntervalMs: number;
  /** Renewal period of the node's Lease (heartbeat); 0 disables it. */
  readonly heartbeatIntervalMs: number;
  /** The agent's namespace: its Leases live there. */
  readonly agentNamespace: string;
  /** Tenancy (docs/tenancy.md); undefined with --no-tenancy. */
  readonly tenancy: TenancyConfig | undefined;
  /** While a tenancy CRD is not installed, how often to look again. */
  readonly crdRecheckMs: number;
  /** A watch stream silent this long gets a liveness probe (0 = never). */
  readonly watchIdleProbeMs: number;
  /** At most this many nftnp_policy_rule_connections_total series (0: none). */
  readonly ruleMetricsMax: number;
  /** How often the per-rule counters are read besides scrapes, /debug/rules and applies (0: only then). */
  readonly ruleCountersIntervalMs: number;
}

export interface DenyLogConfig {
  readonly group: number;
  /** In-kernel rate limit shared by every pod chain of the node. */
  readonly ratePerSecond: number;
  readonly burst: number;
  /** tcpdump binary reading the group. */
  readonly tcpdumpPath: string;
}

export type ConfigResult =
  | { readonly ok: true; readonly config: AgentConfig }
  | { readonly ok: false; readonly help: true }
  | { readonly ok: false; readonly help: false; readonly error: string };

export const RUN_HELP = `Usage: nft-netpol-agent run --node NAME [options]

Watch the cluster and keep this node's nftables table in line with the
NetworkPolicies. Nothing is written before the first full sync; a ruleset left
by a previous run stays in force until then and on exit.

  --node NAME             this node (env NODE_NAME; required)
  --metrics-addr H:P      /metrics, /healthz, /readyz (env METRICS_ADDR;
                          default 0.0.0.0:9742; "" disables)
  --debug-addr H:P        /healthz, /readyz, /debug/state, /debug/ruleset,
                          /debug/explain (env DEBUG_ADDR; default 127.0.0.1:9743;
                          "" disables)
  --table NAME            nftables table, inet family (env TABLE; default nft-netpol)
  --deny-action A         drop (default) or reject (env DENY_ACTION)
  --drift-interval D      how often the table is read back and repaired
                          (env DRIFT_INTERVAL; default 60s; 0 disables)
  --debounce D            minimum time between two applies; changes within it
                          coalesce, a change to an idle agent applies at once
                          (env DEBOUNCE; default 50ms)
  --log-level L           fatal|error|warn|info|debug|trace|silent (env LOG_LEVEL; default info)
  --from-dir DIR          read manifests from DIR instead of the API server
                          (env FROM_DIR)
  --nft PATH              nft binary (env NFT; default nft on PATH)
  --netns NAME            apply inside network namespace NAME via 'ip netns exec'
                          (testing aid; env NETNS)
  --no-conntrack          do not delete conntrack entries of removed pod IPs
  --no-incremental        always send the full table, never incremental updates
  --no-nft-session        start nft for every transaction instead of sending
                          small ones to one long-lived 'nft -i'
  --peer-hold D           a remote pod that joins a peer identity goes into a
                          plain set for a while (no jump-graph validation in
                          its commit) and into the peer map with the next
                          commit that validates anyway, or after D without an
                          apply (env PEER_HOLD; default 1s; 0 disables)
  --unknown-local-endpoints A
                          allow (default) or drop: drop addresses of the node's
                          podCIDRs that are no known active local pod (opt-in;
                          only for CNIs that allocate from the node's podCIDRs)
                          (env UNKNOWN_LOCAL_ENDPOINTS)
  --allow-pod-to-node     egress from local pods to this node itself (kubelet,
                          host services) always passes, as the Kubernetes docs
                          say (env ALLOW_POD_TO_NODE=true; off by default: an
                          egress-isolated pod reaches its node only where a
                          policy allows it)
  --log-denied            log denied connection attempts with the policy reason
                          (env LOG_DENIED=true; off by default): an nftables
                          'log group' in every pod chain's deny path, read with
                          tcpdump; see /debug/denied and 'nft-netpol-agent denied'
  --log-denied-rate N     in-kernel limit of logged packets per second for the
                          whole node (env LOG_DENIED_RATE; default 100)
  --log-denied-burst N    packets above the rate allowed in a burst
                          (env LOG_DENIED_BURST; default 200)
  --log-denied-group N    NFLOG group, 1-65535 (env LOG_DENIED_GROUP; default 1742)
  --tcpdump PATH          tcpdump binary (env TCPDUMP; default tcpdump on PATH)
  --status-interval D     at most one write of this node's NodePolicyStatus per D
                          (only when its content changed; env STATUS_INTERVAL;
                          default 5s; 0 disables)
  --heartbeat-interval D  renewal period of this node's Lease in the agent
                          namespace (env HEARTBEAT_INTERVAL; default 30s; 0 disables)
  --agent-namespace NS    where the Lease lives (env POD_NAMESPACE; default
                          nft-netpol-system)
  --no-tenancy            do not enforce tenancy (project and workspace isolation,
                          NamespaceNetworkPolicy) nor watch its objects (env TENANCY=false)
  --isolation-dns-service NS/NAME
                          the cluster DNS Service isolated namespaces may use
                          (env ISOLATION_DNS_SERVICE; default kube-system/kube-dns;
                          "" for none)
  --isolation-node-local-dns IP[,IP]
                          node-local DNS caches allowed on port 53
                          (env ISOLATION_NODE_LOCAL_DNS; default 169.254.25.10; "" for none)
  --isolation-node-addresses internal|all
                          Node addresses isolated namespaces may reach and be reached
                          from (env ISOLATION_NODE_ADDRESSES; default internal = InternalIP)
  --rule-metrics-max N    at most N series of nftnp_policy_rule_connections_total
                          (one per policy rule selecting a local pod; env
                          RULE_METRICS_MAX; default 2000; 0 exports none);
                          /debug/rules lists every rule regardless
  --rule-counters-interval D
                          how often the per-rule counters are read (for 'last
                          hit'), besides scrapes and applies (env
                          RULE_COUNTERS_INTERVAL; default 30s; 0: only then)
  --crd-recheck D         while a tenancy or network-policy-api CRD is not installed,
                          look again every D
                          (env CRD_RECHECK; default 30s)
  --watch-idle-probe D    a watch stream silent for D is probed: is its
                          resource just quiet (left alone) or has the stream
                          missed events (restarted)? (env WATCH_IDLE_PROBE;
                          default 150s; 0 disables)
  -h, --help              show this help

Durations: 500ms, 10s, 1m, 1h (a bare number is milliseconds).
The API server is found through KUBECONFIG, ~/.kube/config or the in-cluster
service account.`;

export const CLEANUP_HELP = `Usage: nft-netpol-agent cleanup [--table NAME] [--netns NAME] [--nft PATH]

Delete the agent's nftables table (inet family). Exits 0 also when the table
does not exist.

  --table NAME   default nft-netpol (env TABLE)
  --netns NAME   inside network namespace NAME (env NETNS)
  --nft PATH     nft binary (env NFT; default nft on PATH)
  -h, --help     show this help`;

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** "500ms", "10s", "1.5m", "1h" or a bare number of milliseconds. */
export function parseDuration(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (m === null) return undefined;
  const v = Number(m[1]) * (UNITS[m[2] ?? 'ms'] ?? 1);
  return Number.isFinite(v) ? Math.round(v) : undefined;
}

/** "host:port", "[v6]:port" or ":port" (every address). */
export function parseListenAddr(text: string): ListenAddr | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(text.trim());
  if (m === null) return undefined;
  const host = m[1] ?? m[2] ?? '';
  const port = Number(m[3]);
  if (port > 65535) return undefined;
  if (m[1] !== undefined && isIP(host) !== 6) return undefined;
  if (host !== '' && m[1] === undefined && isIP(host) === 0 && !/^[A-Za-z0-9.-]+$/.test(host)) return undefined;
  return { host: host === '' ? '0.0.0.0' : host, port };
}

export function formatListenAddr(a: ListenAddr): string {
  return a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`;
}

const TABLE_RE = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;
// Network namespace names become file names under /run/netns.
const NETNS_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

type Env = Readonly<Record<string, string | undefined>>;

function fail(error: string): ConfigResult {
  return { ok: false, help: false, error };
}

export function parseRunConfig(argv: readonly string[], env: Env): ConfigResult {
  let values;
  try {
    values = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        node: { type: 'string' },
        'metrics-addr': { type: 'string' },
        'debug-addr': { type: 'string' },
        table: { type: 'string' },
        'deny-action': { type: 'string' },
        'drift-interval': { type: 'string' },
        'rule-metrics-max': { type: 'string' },
        'rule-counters-interval': { type: 'string' },
        debounce: { type: 'string' },
        'log-level': { type: 'string' },
        'from-dir': { type: 'string' },
        nft: { type: 'string' },
        netns: { type: 'string' },
        'no-conntrack': { type: 'boolean', default: false },
        'no-incremental': { type: 'boolean', default: false },
        'no-nft-session': { type: 'boolean', default: false },
        'peer-hold': { type: 'string' },
        'unknown-local-endpoints': { type: 'string' },
        'allow-pod-to-node': { type: 'boolean', default: false },
        'log-denied': { type: 'boolean', default: false },
        'log-denied-rate': { type: 'string' },
        'log-denied-burst': { type: 'string' },
        'log-denied-group': { type: 'string' },
        tcpdump: { type: 'string' },
        'status-interval': { type: 'string' },
        'heartbeat-interval': { type: 'string' },
        'agent-namespace': { type: 'string' },
        'no-tenancy': { type: 'boolean', default: false },
        'isolation-dns-service': { type: 'string' },
        'isolation-node-local-dns': { type: 'string' },
        'isolation-node-addresses': { type: 'string' },
        'crd-recheck': { type: 'string' },
        'watch-idle-probe': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values;
  } catch (e) {
    return fail(e instanceof Error ? e.message : String(e));
  }
  if (values.help) return { ok: false, help: true };
  const pick = (flag: string | undefined, envName: string): string | undefined =>
    flag ?? (env[envName] === '' ? undefined : env[envName]);

  const node = pick(values.node, 'NODE_NAME');
  if (node === undefined || node === '') return fail('--node (or NODE_NAME) is required');

  // An explicit empty flag disables the server; an empty variable counts as unset.
  const addr = (flag: string | undefined, envName: string, def: string, name: string): ListenAddr | undefined | string => {
    const text = flag ?? pick(undefined, envName) ?? def;
    if (text === '') return undefined;
    return parseListenAddr(text) ?? `--${name} must be host:port (e.g. 127.0.0.1:9743 or [::1]:9743), not "${text}"`;
  };
  const metricsAddr = addr(values['metrics-addr'], 'METRICS_ADDR', '0.0.0.0:9742', 'metrics-addr');
  if (typeof metricsAddr === 'string') return fail(metricsAddr);
  const debugAddr = addr(values['debug-addr'], 'DEBUG_ADDR', '127.0.0.1:9743', 'debug-addr');
  if (typeof debugAddr === 'string') return fail(debugAddr);

  const table = pick(values.table, 'TABLE') ?? 'nft-netpol';
  if (!TABLE_RE.test(table))
    return fail(`--table must be a plain identifier (letters, digits, - and _, starting with a letter), not "${table}"`);
  const denyAction = pick(values['deny-action'], 'DENY_ACTION') ?? 'drop';
  if (denyAction !== 'drop' && denyAction !== 'reject') return fail(`--deny-action must be drop or reject, not "${denyAction}"`);

  const duration = (text: string, name: string, min: number): number | string => {
    const v = parseDuration(text);
    if (v === undefined) return `--${name} must be a duration like 500ms, 10s or 1m, not "${text}"`;
    if (v !== 0 && v < min) return `--${name} must be 0 or at least ${min}ms, not "${text}"`;
    return v;
  };
  const driftIntervalMs = duration(pick(values['drift-interval'], 'DRIFT_INTERVAL') ?? '60s', 'drift-interval', 100);
  if (typeof driftIntervalMs === 'string') return fail(driftIntervalMs);
  const debounceMs = duration(pick(values.debounce, 'DEBOUNCE') ?? '50ms', 'debounce', 0);
  if (typeof debounceMs === 'string') return fail(debounceMs);
  const peerHoldMs = duration(pick(values['peer-hold'], 'PEER_HOLD') ?? '1s', 'peer-hold', 10);
  if (typeof peerHoldMs === 'string') return fail(peerHoldMs);
  const watchIdleProbeMs = duration(pick(values['watch-idle-probe'], 'WATCH_IDLE_PROBE') ?? '150s', 'watch-idle-probe', 100);
  if (typeof watchIdleProbeMs === 'string') return fail(watchIdleProbeMs);

  const logLevel = pick(values['log-level'], 'LOG_LEVEL') ?? 'info';
  if (!isLogLevel(logLevel))
    return fail(`--log-level must be one of fatal, error, warn, info, debug, trace, silent, not "${logLevel}"`);

  const netns = pick(values.netns, 'NETNS');
  if (netns !== undefined && !NETNS_RE.test(netns)) return fail(`--netns must be a network namespace name, not "${netns}"`);
  const nftPath = pick(values.nft, 'NFT') ?? 'nft';
  const fromDir = pick(values['from-dir'], 'FROM_DIR');
  const unknownLocalEndpoints = pick(values['unknown-local-endpoints'], 'UNKNOWN_LOCAL_ENDPOINTS') ?? 'allow';
  if (unknownLocalEndpoints !== 'allow' && unknownLocalEndpoints !== 'drop') {
    return fail(`--unknown-local-endpoints must be allow or drop, not "${unknownLocalEndpoints}"`);
  }
  const podToNodeEnv = env['ALLOW_POD_TO_NODE'];
  if (podToNodeEnv !== undefined && podToNodeEnv !== '' && !['true', 'false', '1', '0'].includes(podToNodeEnv))
    return fail(`ALLOW_POD_TO_NODE must be true or false, not "${podToNodeEnv}"`);
  const allowPodToNode = values['allow-pod-to-node'] === true || podToNodeEnv === 'true' || podToNodeEnv === '1';
  const statusIntervalMs = duration(pick(values['status-interval'], 'STATUS_INTERVAL') ?? '5s', 'status-interval', 100);
  if (typeof statusIntervalMs === 'string') return fail(statusIntervalMs);
  const heartbeatIntervalMs = duration(
    pick(values['heartbeat-interval'], 'HEARTBEAT_INTERVAL') ?? '30s',
    'heartbeat-interval',
    1000,
  );
  if (typeof heartbeatIntervalMs === 'string') return fail(heartbeatIntervalMs);
  const agentNamespace = pick(values['agent-namespace'], 'POD_NAMESPACE') ?? 'nft-netpol-system';
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(agentNamespace))
    return fail(`--agent-namespace must be a namespace name, not "${agentNamespace}"`);

  const logDenied = parseDenyLog(values, pick, env);
  if (typeof logDenied === 'string') return fail(logDenied);
  // "" is a meaningful value here (none), so the environment is read as given when set.
  const pickEmpty = (flag: string | undefined, envName: string): string | undefined => flag ?? env[envName];
  const tenancy = tenancyConfig({
    dnsService: pickEmpty(values['isolation-dns-service'], 'ISOLATION_DNS_SERVICE'),
    nodeLocalDNS: pickEmpty(values['isolation-node-local-dns'], 'ISOLATION_NODE_LOCAL_DNS'),
    nodeAddresses: pick(values['isolation-node-addresses'], 'ISOLATION_NODE_ADDRESSES'),
  });
  if (tenancy instanceof Error) return fail(tenancy.message);
  const tenancyOff = values['no-tenancy'] || env['TENANCY'] === 'false';
  const crdRecheckMs = duration(pick(values['crd-recheck'], 'CRD_RECHECK') ?? '30s', 'crd-recheck', 100);
  if (typeof crdRecheckMs === 'string') return fail(crdRecheckMs);
  if (crdRecheckMs === 0) return fail('--crd-recheck must be at least 100ms');
  const maxText = pick(values['rule-metrics-max'], 'RULE_METRICS_MAX') ?? '2000';
  const ruleMetricsMax = /^\d+$/.test(maxText.trim()) ? Number(maxText) : NaN;
  if (!Number.isInteger(ruleMetricsMax) || ruleMetricsMax > 1_000_000)
    return fail(`--rule-metrics-max must be a whole number from 0 to 1000000, not "${maxText}"`);
  const ruleCountersIntervalMs = duration(
    pick(values['rule-counters-interval'], 'RULE_COUNTERS_INTERVAL') ?? '30s',
    'rule-counters-interval',
    1000,
  );
  if (typeof ruleCountersIntervalMs === 'string') return fail(ruleCountersIntervalMs);

  return {
    ok: true,
    config: {
      node,
      metricsAddr,
      debugAddr,
      table,
      denyAction,
      driftIntervalMs,
      debounceMs,
      logLevel,
      fromDir,
      nftPath,
      netns,
      conntrack: !values['no-conntrack'],
      incremental: !values['no-incremental'],
      nftSession: !values['no-nft-session'],
      peerHoldMs,
      unknownLocalEndpoints,
      allowPodToNode,
      logDenied,
      statusIntervalMs,
      heartbeatIntervalMs,
      agentNamespace,
      tenancy: tenancyOff ? undefined : tenancy,
      crdRecheckMs,
      watchIdleProbeMs,
      ruleMetricsMax,
      ruleCountersIntervalMs,
    },
  };
}

function parseDenyLog(
  values: {
    readonly 'log-denied'?: boolean | undefined;
    readonly 'log-denied-rate'?: string | undefined;
    readonly 'log-denied-burst'?: string | undefined;
    readonly 'log-denied-group'?: string | undefined;
    readonly tcpdump?: string | undefined;
  },
  pick: (flag: string | undefined, envName: string) => string | undefined,
  env: Env,
): DenyLogConfig | undefined | string {
  const envOn = env['LOG_DENIED'];
  if (envOn !== undefined && envOn !== '' && !['true', 'false', '1', '0'].includes(envOn))
    return `LOG_DENIED must be true or false, not "${envOn}"`;
  const on = values['log-denied'] === true || envOn === 'true' || envOn === '1';
  const int = (text: string, name: string, min: number, max: number): number | string => {
    const v = /^\d+$/.test(text.trim()) ? Number(text) : NaN;
    return Number.isInteger(v) && v >= min && v <= max
      ? v
      : `--${name} must be a whole number from ${min} to ${max}, not "${text}"`;
  };
  // "100", "100/s" or "100/second": packets per second.
  const rateText = (pick(values['log-denied-rate'], 'LOG_DENIED_RATE') ?? '100').replace(/\/s(econd)?$/, '');
  const ratePerSecond = int(rateText, 'log-denied-rate', 1, 100_000);
  if (typeof ratePerSecond === 'string') return ratePerSecond;
  const burst = int(pick(values['log-denied-burst'], 'LOG_DENIED_BURST') ?? '200', 'log-denied-burst', 0, 1_000_000);
  if (typeof burst === 'string') return burst;
  const group = int(pick(values['log-denied-group'], 'LOG_DENIED_GROUP') ?? '1742', 'log-denied-group', 1, 65535);
  if (typeof group === 'string') return group;
  const tcpdumpPath = pick(values.tcpdump, 'TCPDUMP') ?? 'tcpdump';
  return on ? { group, ratePerSecond, burst, tcpdumpPath } : undefined;
}

export interface CleanupConfig {
  readonly table: string;
  readonly netns: string | undefined;
  readonly nftPath: string;
}

export type CleanupConfigResult =
  | { readonly ok: true; readonly config: CleanupConfig }
  | { readonly ok: false; readonly help: true }
  | { readonly ok: false; readonly help: false; readonly error: string };

export function parseCleanupConfig(argv: readonly string[], env: Env): CleanupConfigResult {
  let values;
  try {
    values = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        table: { type: 'string' },
        netns: { type: 'string' },
        nft: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values;
  } catch (e) {
    return { ok: false, help: false, error: e instanceof Error ? e.message : String(e) };
  }
  if (values.help) return { ok: false, help: true };
  const table = values.table ?? env['TABLE'] ?? 'nft-netpol';
  if (!TABLE_RE.test(table)) return { ok: false, help: false, error: `--table must be a plain identifier, not "${table}"` };
  const netns = values.netns ?? (env['NETNS'] === '' ? undefined : env['NETNS']);
  if (netns !== undefined && !NETNS_RE.test(netns))
    return { ok: false, help: false, error: `--netns must be a network namespace name, not "${netns}"` };
  return { ok: true, config: { table, netns, nftPath: values.nft ?? env['NFT'] ?? 'nft' } };
}
