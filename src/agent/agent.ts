// The node agent assembled: a cluster source feeding the reconciler, the
// nft dataplane, metrics, Events and the two HTTP listeners. This is the
// imperative shell; decisions live in reconciler.ts and the pure modules.
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { ClusterSource, WatchStatus } from '../kube/source.ts';
import type { ClusterState } from '../model/types.ts';
import { NodeCompiler } from '../compile/node-compiler.ts';
import type { RenderOptions } from '../ruleset/options.ts';
import { localPodCidrSetName } from '../ruleset/ids.ts';
import { renderRuleset } from '../nft/render.ts';
import type { Metrics } from '../observability/metrics.ts';
import { debugHandler, metricsHandler, type AgentView } from './debug-server.ts';
import { closeServer, listen } from '../observability/http-server.ts';
import { formatListenAddr, type AgentConfig } from './config.ts';
import { conntrackAvailable, deleteConntrack } from './dataplane.ts';
import { SerialBatches } from './serial-batches.ts';
import { agentMetrics } from './metrics-adapter.ts';
import type { Dataplane, EventSink, RenderFn } from './ports.ts';
import { Reconciler } from './reconciler.ts';
import { DeniedTraffic } from './denied/denied-traffic.ts';
import { RuleCounters } from './rules/rule-counters.ts';
import { sharedListing } from './rules/shared-listing.ts';
import { AppliedStatus } from './applied-status.ts';
import type { LeaseApi, StatusApi } from '../kube/status-client.ts';
import { TableMonitor } from './table-monitor.ts';
import { collectGarbage } from '../observability/memory.ts';

/**
 * The node's ruleset: compiled form (for incremental updates) and full script.
 * Compiles advance from the previous snapshot (NodeCompiler: same result as
 * compileNode, at the cost of the change). The script is rendered on first
 * use: an incremental apply never needs it.
 */
export function nodeRenderer(node: string, opts: RenderOptions, log?: Logger): RenderFn {
  const compiler = new NodeCompiler(node, opts);
  // --unknown-local-endpoints drop only acts when the Node has podCIDRs: say
  // so whenever that changes (first render included), as kube-router does.
  let guarding: boolean | undefined;
  return (state) => {
    const compiled = compiler.compile(state);
    if (opts.unknownLocalEndpoints === 'drop' && log !== undefined) {
      const now = compiled.sets.some((s) => s.name === localPodCidrSetName(4) || s.name === localPodCidrSetName(6));
      if (now !== guarding) {
        if (now)
          log.info(
            { event: 'unknown-local-endpoints', active: true },
            "addresses of the node's pod CIDRs that are no known pod are dropped",
          );
        else
          log.warn(
            { event: 'unknown-local-endpoints', active: false },
            `--unknown-local-endpoints drop has no effect: node ${node} has no spec.podCIDRs; pods the agent does not know yet pass unfiltered`,
          );
      }
      guarding = now;
    }
    // Rendered on each read, not kept: the full script is ~2 MB at 100k pods,
    // and this object stays the kernel's "applied" until the next apply; its
    // readers (a full apply, the debug endpoint, a rejected script) read it once.
    return {
      get text(): string {
        return renderRuleset(compiled);
      },
      stats: compiled.stats,
      compiled,
      localPods: compiler.localPods,
    };
  };
}

export interface AgentParts {
  readonly config: AgentConfig;
  readonly source: ClusterSource;
  readonly dataplane: Dataplane;
  readonly events: EventSink;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** The API for the node's NodePolicyStatus and Lease (absent with --from-dir: no status, no heartbeat). */
  readonly statusApi?: StatusApi & LeaseApi;
  readonly agentVersion?: string;
  /** The nft version, once the preflight found it. */
  readonly nftVersion?: () => string | undefined;
}

export interface Listening {
  readonly metrics: number | undefined;
  readonly debug: number | undefined;
}

// How long SIGTERM waits for an apply in flight before leaving it (the
// kernel then holds the old or the new ruleset, never a mix).
const STOP_GRACE_MS = 10_000;

export class Agent {
  readonly #p: AgentParts;
  readonly #reconciler: Reconciler;
  readonly #servers: Server[] = [];
  readonly #denied: DeniedTraffic;
  readonly #rules: RuleCounters;
  readonly #status: AppliedStatus | undefined;
  readonly #monitor: TableMonitor | undefined;
  #stopping: Promise<void> | undefined;
  #lastCollect = -Infinity;

  constructor(parts: AgentParts) {
    this.#p = parts;
    const c = parts.config;
    this.#reconciler = new Reconciler(
      {
        source: parts.source,
        render: nodeRenderer(
          c.node,
          {
            table: c.table,
            denyAction: c.denyAction,
            unknownLocalEndpoints: c.unknownLocalEndpoints,
            allowPodToNode: c.allowPodToNode,
            logDenied: c.logDenied,
          },
          parts.log,
        ),
        dataplane: parts.dataplane,
        metrics: agentMetrics(parts.metrics),
        log: parts.log,
        events: parts.events,
        onReleasedIPs: c.conntrack ? (ips) => this.#conntrack(ips) : undefined,
        afterFullApply: () => this.#releaseMemory(),
      },
      {
        nodeName: c.node,
        debounceMs: c.debounceMs,
        driftIntervalMs: c.driftIntervalMs,
        incremental: c.incremental,
        peerHoldMs: c.peerHoldMs,
      },
    );
    // The source's background walks wait for the applies (the event loop is theirs).
    const rec = this.#reconciler;
    parts.source.deferWhile?.(() => rec.busy());
    // One counters listing serves the deny and the per-rule counters when both read at once (a scrape).
    const dp = parts.dataplane;
    const listCounters = dp.listCounters === undefined ? undefined : sharedListing(() => dp.listCounters!.call(dp));
    this.#denied = new DeniedTraffic({
      nodeName: c.node,
      netns: c.netns,
      logDenied: c.logDenied,
      dataplane: {
        apply: (script) => dp.apply(script),
        list: (signal) => dp.list(signal),
        ...(listCounters === undefined ? {} : { listCounters }),
      },
      metrics: parts.metrics,
      log: parts.log,
      snapshot: () => this.#snapshot(),
    });
    const r0 = this.#reconciler;
    this.#rules = new RuleCounters({
      list: listCounters,
      ruleset: () => r0.lastAppliedRuleset(),
      metrics: parts.metrics,
      log: parts.log,
      maxSeries: c.ruleMetricsMax,
      intervalMs: c.ruleCountersIntervalMs,
    });
    // After applies the new rule chains' handles are learnt (a full apply restarts every counter).
    r0.onOutcome((o) => {
      if (o.kind === 'apply' && o.result === 'applied') this.#rules.refreshWhenQuiet();
    });
    const m = parts.metrics;
    if (parts.statusApi !== undefined && (c.statusIntervalMs > 0 || c.heartbeatIntervalMs > 0)) {
      const r = this.#reconciler;
      this.#status = new AppliedStatus(parts.statusApi, parts.log, {
        node: c.node,
        agentNamespace: c.agentNamespace,
        statusIntervalMs: c.statusIntervalMs,
        heartbeatIntervalMs: c.heartbeatIntervalMs,
        agentVersion: parts.agentVersion ?? 'unknown',
        nftVersion: parts.nftVersion ?? (() => undefined),
        appliedRuleset: () => r.lastApplied(),
        onWrite: (object, ok) => m.statusWrites.inc({ object, result: ok ? 'ok' : 'error' }),
        busy: () => r.busy(),
      });
      r.onOutcome(this.#status.onOutcome);
    }
    // Repair at once what someone else does to the table (the drift timer is the backstop).
    this.#monitor =
      parts.dataplane.marked !== true
        ? undefined
        : new TableMonitor({
            target: { table: c.table, nftPath: c.nftPath, netns: c.netns },
            log: parts.log,
            onForeignChange: (detail) => this.#reconciler.kernelChanged(detail),
            onRestart: () => m.tableMonitorRestarts.inc(),
          });
  }

  // A full GC holds the event loop ~0.2 s at 100k pods: at most one every 10
  // minutes. The drift check's periodic full apply (every minute while
  // increments go in) leaves a script and a listing, not the initial lists.
  #releaseMemory(): void {
    const now = Date.now();
    if (now - this.#lastCollect < 600_000) return;
    this.#lastCollect = now;
    const ms = collectGarbage();
    this.#p.log.info({ event: 'gc', ms: Math.round(ms) }, 'garbage of the full apply collected');
  }

  #snapshot(): ClusterState | undefined {
    const src = this.#p.source;
    return src.synced() ? src.snapshot() : this.#reconciler.lastState();
  }

  /** Applied status and heartbeat (undefined with --from-dir or both disabled). */
  get appliedStatus(): AppliedStatus | undefined {
    return this.#status;
  }

  get reconciler(): Reconciler {
    return this.#reconciler;
  }

  view(): AgentView {
    const r = this.#reconciler;
    const src = this.#p.source;
    return {
      nodeName: this.#p.config.node,
      table: this.#p.config.table,
      allowPodToNode: this.#p.config.allowPodToNode,
      health: () => r.health(),
      ready: () => r.ready(),
      status: () => r.status(),
      snapshot: (): ClusterState | undefined => this.#snapshot(),
      watches: (): readonly WatchStatus[] => src.status(),
      lastAppliedText: () => r.lastAppliedText(),
      lastFailedText: () => r.lastFailedText(),
      kernelMatches: () => r.kernelMatches(),
      heldPeers: () => r.heldPeers(),
      denied: this.#denied,
      rules: this.#rules,
    };
  }

  /** Binds the listeners (a bind failure rejects before anything else starts). */
  async listen(): Promise<Listening> {
    const c = this.#p.config;
    const onError = (err: unknown, path: string): void => this.#p.log.error({ err, path }, 'HTTP handler failed');
    let metricsPort: number | undefined;
    let debugPort: number | undefined;
    try {
      if (c.metricsAddr !== undefined) {
        const l = await listen(
          metricsHandler(this.view(), this.#p.metrics.registry, onError),
          c.metricsAddr.host,
          c.metricsAddr.port,
          'metrics (--metrics-addr)',
        );
        this.#servers.push(l.server);
        metricsPort = l.port;
        this.#p.log.info(
          { event: 'listen', addr: formatListenAddr({ host: c.metricsAddr.host, port: l.port }) },
          'serving /metrics, /healthz, /readyz',
        );
      }
      if (c.debugAddr !== undefined) {
        const l = await listen(debugHandler(this.view(), onError), c.debugAddr.host, c.debugAddr.port, 'debug (--debug-addr)');
        this.#servers.push(l.server);
        debugPort = l.port;
        this.#p.log.info(
          { event: 'listen', addr: formatListenAddr({ host: c.debugAddr.host, port: l.port }) },
          'serving /debug/state, /debug/ruleset, /debug/explain, /debug/denied, /debug/rules',
        );
      }
    } catch (e) {
      await this.#closeServers();
      throw e;
    }
    return { metrics: metricsPort, debug: debugPort };
  }

  /** Starts watching; the first apply follows the initial sync. */
  async start(): Promise<void> {
    const c = this.#p.config;
    if (c.conntrack) {
      this.#conntrackOk = await conntrackAvailable(c.netns).catch(() => false);
      this.#p.log.info(
        { event: 'conntrack', available: this.#conntrackOk },
        this.#conntrackOk
          ? 'conntrack entries of removed pod IPs will be deleted'
          : 'conntrack tool not found: established flows of removed pods are not cut (install the conntrack package)',
      );
    }
    this.#p.source.onChange((reason) => {
      this.#p.metrics.lastChange.set(Date.now() / 1000);
      this.#reconciler.notify(reason);
    });
    this.#monitor?.start();
    this.#reconciler.start();
    this.#denied.start();
    this.#rules.start();
    this.#status?.start();
    await this.#p.source.start();
  }

  /** Stops watches, lets (or abandons) the apply in flight, closes listeners. The table stays. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const log = this.#p.log;
    await this.#p.source.stop().catch((e: unknown) => log.warn({ err: e }, 'stopping the watches failed'));
    this.#denied.stop();
    this.#rules.stop();
    await this.#monitor?.stop();
    const finished = await this.#reconciler.stop(STOP_GRACE_MS);
    this.#conntrackBatches.close();
    this.#p.dataplane.close?.();
    await this.#status?.stop();
    if (!finished)
      log.warn(
        { event: 'stop' },
        'an apply was still running and was abandoned; the kernel holds the previous or the new ruleset',
      );
    await this.#closeServers();
  }

  async #closeServers(): Promise<void> {
    await Promise.all(this.#servers.splice(0).map((s) => closeServer(s)));
  }

  #conntrackOk = false;
  // One conntrack process at a time: IPs released while one runs go to the
  // next together (under load, applies come faster than a fork of the agent).
  readonly #conntrackBatches = new SerialBatches<string>(async (ips) => {
    const r = await deleteConntrack(this.#p.config.netns, ips);
    this.#p.log.debug(
      { event: 'conntrack', ips: ips.length, commands: r.commands, batched: r.batched },
      'conntrack entries of released pod IPs deleted',
    );
    if (r.failed.length > 0)
      this.#p.log.warn({ event: 'conntrack', failed: r.failed.slice(0, 5) }, 'deleting conntrack entries failed');
  });

  async #conntrack(ips: readonly string[]): Promise<void> {
    if (this.#conntrackOk) await this.#conntrackBatches.add(ips);
  }
}
