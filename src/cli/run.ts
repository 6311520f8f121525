// `nft-netpol-agent run` and `nft-netpol-agent cleanup`: process concerns only
// (flags, logger, signals, exit codes). The agent itself is src/agent/.
// Exit codes: 0 stopped by a signal / cleaned up, 1 cannot start (bind
// failure, bad kubeconfig) or cleanup failed, 2 usage.
import { readFileSync } from 'node:fs';
import { getHeapStatistics } from 'node:v8';
import type { CoreV1Api } from '@kubernetes/client-node';
import { Agent } from '../agent/agent.ts';
import { CLEANUP_HELP, parseCleanupConfig, parseRunConfig, RUN_HELP, type AgentConfig } from '../agent/config.ts';
import { nftDataplane } from '../agent/dataplane.ts';
import { kubeEventSink, logEventSink } from '../agent/event-sink.ts';
import { kubeStatusApi, type LeaseApi, type StatusApi } from '../kube/status-client.ts';
import { loadLeanAccess } from '../kube/kube-access.ts';
import { kubeRequest, type KubeAccess } from '../kube/kube-http.ts';
import type { EventSink } from '../agent/ports.ts';
import { FileClusterSource } from '../kube/file-source.ts';
import { KubeClusterSource } from '../kube/kube-source.ts';
import type { ClusterSource } from '../kube/source.ts';
import { probeNft, runNft } from '../nft/exec.ts';
import { onPrivateFiles, privateFileFailures, privateFilesProblem, sweepPrivateFiles } from '../nft/private-file.ts';
import { renderCleanup } from '../nft/render.ts';
import { ListenError } from '../observability/http-server.ts';
import { errorMessage } from '../observability/errors.ts';
import { createLogger, type Logger } from '../observability/logger.ts';
import { createMetrics, type Metrics } from '../observability/metrics.ts';
import { buildInfo } from '../observability/build-info.ts';

function usage(cmd: string, message: string): number {
  process.stderr.write(`usage error: ${message}\n(see 'nft-netpol-agent ${cmd} --help')\n`);
  return 2;
}

/**
 * The client configuration: the lean loader's for what it covers (no
 * @kubernetes/client-node in memory, kube-http.ts), else client-node's
 * loadFromDefault, imported only then.
 */
async function loadAccess(log: Logger): Promise<{ access: KubeAccess; context: string } | { error: string }> {
  const lean = loadLeanAccess(process.env);
  if (lean !== undefined) return { access: lean, context: lean.getCurrentCluster().name };
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  try {
    kc.loadFromDefault();
  } catch (e) {
    return {
      error: `cannot load the Kubernetes client configuration (KUBECONFIG, ~/.kube/config or in-cluster): ${errorMessage(e)}`,
    };
  }
  log.debug({ event: 'apiserver' }, 'client configuration beyond the lean loader: using @kubernetes/client-node');
  return { access: kc, context: kc.getCurrentContext() };
}

/** createNamespacedEvent (all the event sink calls) as one POST. */
function eventApi(access: KubeAccess): Pick<CoreV1Api, 'createNamespacedEvent'> {
  return {
    createNamespacedEvent: async ({ namespace, body }) =>
      (await kubeRequest(access, 'POST', `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`, {
        body,
      })) as Awaited<ReturnType<CoreV1Api['createNamespacedEvent']>>,
  };
}

async function makeSource(
  c: AgentConfig,
  log: Logger,
): Promise<{ source: ClusterSource; events: EventSink; statusApi?: StatusApi & LeaseApi } | { error: string }> {
  if (c.fromDir !== undefined) {
    return {
      source: new FileClusterSource({
        dir: c.fromDir,
        log: log.child({ source: 'files' }),
        ...(c.tenancy === undefined ? {} : { tenancy: c.tenancy }),
      }),
      events: logEventSink(log),
    };
  }
  const loaded = await loadAccess(log);
  if ('error' in loaded) return loaded;
  const kc = loaded.access;
  const cluster = kc.getCurrentCluster();
  if (cluster === null) return { error: 'the Kubernetes client configuration has no current cluster' };
  log.info({ event: 'apiserver', server: cluster.server, context: loaded.context }, 'watching the API server');
  return {
    source: new KubeClusterSource({
      kubeConfig: kc,
      nodeName: c.node,
      timing: { idleTimeoutMs: c.watchIdleProbeMs },
      log: log.child({ source: 'kube' }),
      ...(c.tenancy === undefined ? {} : { tenancy: c.tenancy }),
      crdProbeMs: c.crdRecheckMs,
    }),
    // Events about cluster-scoped objects (ClusterNetworkPolicies) go to the agent's own namespace.
    events: kubeEventSink(eventApi(kc), c.node, c.agentNamespace),
    statusApi: kubeStatusApi(kc),
  };
}

/** Bridged pod traffic only reaches nftables' inet hooks with br_netfilter on. */
function checkBridgeNetfilter(c: AgentConfig, log: Logger): void {
  if (c.netns !== undefined) return;
  try {
    const v = readFileSync('/proc/sys/net/bridge/bridge-nf-call-iptables', 'utf8').trim();
    if (v === '0')
      log.warn(
        { event: 'preflight' },
        'net.bridge.bridge-nf-call-iptables is 0: traffic between pods on the same bridge bypasses the ruleset',
      );
  } catch {
    log.debug({ event: 'preflight' }, 'br_netfilter is not loaded (fine for routed CNIs)');
  }
}

export async function runCommand(argv: string[]): Promise<number> {
  const parsed = parseRunConfig(argv, process.env);
  if (!parsed.ok) {
    if (parsed.help) {
      process.stdout.write(`${RUN_HELP}\n`);
      return 0;
    }
    return usage('run', parsed.error);
  }
  const c = parsed.config;
  const log = createLogger({ level: c.logLevel, base: { node: c.node } });
  const build = await buildInfo();
  log.info(
    {
      event: 'start',
      version: build.version,
      commit: build.commit,
      nodejs: build.nodejs,
      table: c.table,
      denyAction: c.denyAction,
      driftIntervalMs: c.driftIntervalMs,
      debounceMs: c.debounceMs,
      netns: c.netns,
      fromDir: c.fromDir,
      heapLimitMiB: Math.round(getHeapStatistics().heap_size_limit / 2 ** 20),
      // Unix ms when the process started (sub-ms): apply lines' monoMs count from it.
      timeOrigin: Math.round(performance.timeOrigin * 1000) / 1000,
    },
    'nft-netpol-agent starting',
  );
  // Without them V8 sizes the heap from the machine's memory and, under churn,
  // keeps hundreds of MiB of garbage (docs/benchmarks.md, "Reliability soak").
  const v8Flags = `${process.env['NODE_OPTIONS'] ?? ''} ${process.execArgv.join(' ')}`;
  if (!v8Flags.includes('--max-semi-space-size') || !v8Flags.includes('--max-old-space-size'))
    log.warn(
      { event: 'memory', nodeOptions: process.env['NODE_OPTIONS'] ?? null },
      'no --max-old-space-size/--max-semi-space-size: memory follows V8 defaults; set NODE_OPTIONS as the DaemonSet does',
    );

  const metrics = createMetrics();
  metrics.setBuildInfo(build, c.node);
  const made = await makeSource(c, log);
  if ('error' in made) {
    log.error({ event: 'start' }, made.error);
    process.stderr.write(`error: ${made.error}\n`);
    return 1;
  }
  let nftVersion: string | undefined;
  const agent = new Agent({
    config: c,
    source: made.source,
    events: made.events,
    dataplane: nftDataplane(c, {
      session: c.nftSession,
      onSession: (e) => {
        const fields = { event: 'nft-session', state: e.kind, pid: e.pid, detail: e.detail };
        // Started, or ended by us (a new one after its history grew): routine. Anything else is not.
        if (e.kind === 'started' || e.detail === 'stopped') log.debug(fields, `long-lived nft -i ${e.kind}`);
        else if (e.kind === 'unusable')
          log.warn(fields, 'nft -i never answered (built without its CLI?): every transaction now starts nft -f');
        else log.warn(fields, 'long-lived nft -i ended; the next transaction starts another');
      },
    }),
    metrics,
    log,
    ...(made.statusApi === undefined ? {} : { statusApi: made.statusApi }),
    agentVersion: build.version,
    nftVersion: () => nftVersion,
  });
  try {
    await agent.listen();
  } catch (e) {
    const msg = e instanceof ListenError ? e.message : `cannot start the HTTP listeners: ${errorMessage(e)}`;
    log.error({ event: 'start' }, msg);
    process.stderr.write(`error: ${msg}\n`);
    return 1;
  }

  // Never crash: a bug in a callback is logged and enforcement goes on (the
  // liveness probe restarts the agent if the loop is really stuck).
  const onRejection = (reason: unknown): void =>
    log.error({ err: reason, event: 'unhandled-rejection' }, 'unhandled promise rejection; continuing');
  const onException = (err: Error): void => log.error({ err, event: 'uncaught-exception' }, 'uncaught exception; continuing');
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);

  let signalled: (s: string) => void = () => {};
  const stopSignal = new Promise<string>((resolve) => {
    signalled = resolve;
  });
  let signals = 0;
  const onSignal = (s: NodeJS.Signals): void => {
    signals++;
    if (signals === 1) {
      signalled(s);
      return;
    }
    // A second signal while stopping: leave at once; the ruleset stays in force.
    log.warn({ event: 'stop', signal: s }, 'second signal: exiting now');
    process.exit(1);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // Keeps the process alive when nothing else would (e.g. --from-dir without listeners).
  const keepAlive = setInterval(() => {}, 1 << 30);

  try {
    const probe = await probeNft({ nftPath: c.nftPath });
    if (!probe.ok && c.netns === undefined)
      log.error({ event: 'preflight' }, `${probe.reason}; applies will fail and be retried`);
    else if (probe.ok) log.info({ event: 'preflight', nft: probe.version }, 'nft is usable');
    if (probe.ok) nftVersion = probe.version;
    const swept = sweepPrivateFiles();
    if (swept > 0) log.info({ event: 'preflight', files: swept }, 'removed private script files an earlier agent left');
    // The probe's script went through a private file, or found why it cannot (nft/private-file.ts).
    const files = privateFilesProblem();
    if (files !== undefined) log.warn({ event: 'preflight', detail: files }, THROUGH_PIPES);
    watchPrivateFiles(metrics, log, files !== undefined);
    checkBridgeNetfilter(c, log);

    await agent.start();
    const sig = await stopSignal;
    log.info({ event: 'stop', signal: sig }, 'stopping: watches stop, the ruleset stays in force');
    await agent.stop();
    log.info({ event: 'stop' }, 'stopped');
    return 0;
  } catch (e) {
    log.fatal({ err: e, event: 'fatal' }, 'the agent cannot continue; the ruleset stays in force');
    await agent.stop().catch(() => {});
    return 1;
  } finally {
    clearInterval(keepAlive);
    onPrivateFiles(undefined);
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
    // Lingering sockets (HTTP keep-alive to the API server) must not delay the exit.
    setTimeout(() => process.exit(process.exitCode ?? 0), 2000).unref();
  }
}

const THROUGH_PIPES =
  'nft scripts go through pipes (no private file can be written): an agent killed while writing one can leave nft a partial transaction';

/**
 * Private script files failing mid-run (/dev/shm full, unmounted): each
 * script counted, a warning when they start failing, a line when they work again.
 */
export function watchPrivateFiles(metrics: Metrics, log: Logger, failing: boolean): void {
  metrics.privateFileFailures.inc(privateFileFailures());
  let warned = failing;
  onPrivateFiles({
    failed: (problem) => {
      metrics.privateFileFailures.inc();
      if (warned) return;
      warned = true;
      log.warn({ event: 'private-files', detail: problem }, THROUGH_PIPES);
    },
    recovered: () => {
      if (!warned) return;
      warned = false;
      log.info({ event: 'private-files' }, 'nft scripts go through private files again');
    },
  });
}

export async function cleanupCommand(argv: string[]): Promise<number> {
  const parsed = parseCleanupConfig(argv, process.env);
  if (!parsed.ok) {
    if (parsed.help) {
      process.stdout.write(`${CLEANUP_HELP}\n`);
      return 0;
    }
    return usage('cleanup', parsed.error);
  }
  const c = parsed.config;
  const r = await runNft(renderCleanup(c.table), { nftPath: c.nftPath, ...(c.netns === undefined ? {} : { netns: c.netns }) });
  if (!r.ok) {
    process.stderr.write(`error: could not delete table inet ${c.table}: ${r.error}\n`);
    return 1;
  }
  process.stdout.write(`table inet ${c.table} deleted (or was not there)\n`);
  return 0;
}
