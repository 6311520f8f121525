// Denied traffic, assembled: the deny counters read into Prometheus counters
// on every scrape, and with --log-denied the NFLOG reader feeding the
// aggregated denial log (log lines, /debug/denied).
import type { Logger } from 'pino';
import type { ClusterState, Direction, Pod } from '../../model/types.ts';
import { isActivePod } from '../../model/types.ts';
import { podId } from '../../ruleset/ids.ts';
import type { Metrics } from '../../observability/metrics.ts';
import type { DenyLogConfig } from '../config.ts';
import { DenyCounterState, denyCountersFromJson, StagedCounterState, stagedCountersFromJson } from './counters.ts';
import { affectedPods } from '../../compile/staged.ts';
import { localPods } from '../../compile/local-endpoints.ts';
import { withStagedEnforced } from '../../model/staged.ts';
import type { PolicyOrigin } from '../../kinds/kind.ts';
import { DeniedLog } from './log-line.ts';
import type { DeniedEntry, DeniedFilter } from './ring.ts';
import { NflogReader } from '../nflog/reader.ts';
import type { Dataplane } from '../ports.ts';

export interface DeniedTrafficParts {
  readonly nodeName: string;
  readonly netns: string | undefined;
  readonly logDenied: DenyLogConfig | undefined;
  readonly dataplane: Dataplane;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly snapshot: () => ClusterState | undefined;
}

export interface DeniedStatus {
  readonly logDenied: boolean;
  readonly group: number | null;
  readonly reader: {
    readonly running: boolean;
    readonly pid: number | null;
    readonly restarts: number;
    readonly received: number;
    readonly queued: number;
  } | null;
  readonly entries: number;
  /** Staged verdict changes held (their own ring, same capacity). */
  readonly stagedEntries: number;
  readonly capacity: number;
  readonly evicted: number;
  readonly suppressedLines: number;
}

// Scrapes closer together than this get the counters of the last read: on a
// node of a 100k-pod cluster one read costs about a full table listing (nft
// fetches every set element even for a terse listing; docs/benchmarks.md).
const MIN_READ_INTERVAL_MS = 10_000;
// Repeats of a denial are summarized in one line per entry this often.
const FLUSH_MS = 30_000;

export class DeniedTraffic {
  readonly #p: DeniedTrafficParts;
  readonly #counters = new DenyCounterState();
  readonly #staged = new StagedCounterState();
  #affected: { state: ClusterState; byKey: Map<string, PolicyOrigin> } | undefined;
  /** label key -> labels of the per-pod series exported so far. */
  #podSeries = new Map<string, { namespace: string; pod: string; direction: Direction }>();
  #reading: Promise<void> | undefined;
  #lastRead = 0;
  readonly #log: DeniedLog | undefined;
  readonly #reader: NflogReader | undefined;
  #flushTimer: NodeJS.Timeout | undefined;

  constructor(p: DeniedTrafficParts) {
    this.#p = p;
    const cfg = p.logDenied;
    if (cfg === undefined) return;
    const m = p.metrics;
    const log = p.log;
    this.#log = new DeniedLog({
      nodeName: p.nodeName,
      log,
      snapshot: p.snapshot,
      onSuppressed: (n) => m.deniedLogDropped.inc({ reason: 'lines' }, n),
      onUnknownPrefix: () => m.deniedLogDropped.inc({ reason: 'malformed' }),
    });
    const deniedLog = this.#log;
    this.#reader = new NflogReader({
      group: cfg.group,
      netns: p.netns,
      tcpdumpPath: cfg.tcpdumpPath,
      onPacket: (pkt) => {
        m.deniedLogPackets.inc();
        deniedLog.onPacket(pkt);
      },
      onDropped: (reason, n) => m.deniedLogDropped.inc({ reason }, n),
      onStart: (pid) => log.info({ event: 'denied-reader', pid, group: cfg.group }, `reading NFLOG group ${cfg.group}`),
      onExit: (detail, wait) => {
        m.deniedLogReaderRestarts.inc();
        log.warn({ event: 'denied-reader', detail, restartInMs: wait }, `the NFLOG reader ${detail}; restarting`);
      },
    });
    m.deniedLogDropped.inc({ reason: 'queue' }, 0);
    m.deniedLogDropped.inc({ reason: 'malformed' }, 0);
    m.deniedLogDropped.inc({ reason: 'lines' }, 0);
  }

  start(): void {
    if (this.#reader === undefined) return;
    this.#reader.start();
    this.#flushTimer = setInterval(() => this.#log?.flush(), FLUSH_MS);
    this.#flushTimer.unref();
  }

  stop(): void {
    this.#reader?.stop();
    if (this.#flushTimer !== undefined) clearInterval(this.#flushTimer);
    this.#log?.flush();
  }

  /** Matching denials (`staged`: staged verdict changes), most recent first (empty without --log-denied). */
  query(f: DeniedFilter, staged = false): DeniedEntry[] {
    return (staged ? this.#log?.staged : this.#log?.ring)?.query(f) ?? [];
  }

  status(): DeniedStatus {
    const r = this.#reader;
    return {
      logDenied: r !== undefined,
      group: this.#p.logDenied?.group ?? null,
      reader:
        r === undefined
          ? null
          : { running: r.running, pid: r.pid ?? null, restarts: r.restarts, received: r.received, queued: r.queued },
      entries: this.#log?.ring.size ?? 0,
      stagedEntries: this.#log?.staged.size ?? 0,
      capacity: this.#log?.ring.capacity ?? 0,
      evicted: this.#log?.ring.evicted ?? 0,
      suppressedLines: this.#log?.suppressed ?? 0,
    };
  }

  /** Brings the deny counters up to date (before a scrape); failures are logged, never thrown. */
  refreshCounters(): Promise<void> {
    if (this.#reading !== undefined) return this.#reading;
    if (Date.now() - this.#lastRead < MIN_READ_INTERVAL_MS) return Promise.resolve();
    this.#reading = this.#read()
      .catch((e: unknown) => this.#p.log.debug({ err: e, event: 'deny-counters' }, 'reading the deny counters failed'))
      .finally(() => {
        this.#lastRead = Date.now();
        this.#reading = undefined;
      });
    return this.#reading;
  }

  async #read(): Promise<void> {
    const list = this.#p.dataplane.listCounters;
    if (list === undefined) return;
    const json = await list.call(this.#p.dataplane);
    if (json === undefined) return;
    const delta = this.#counters.advance(denyCountersFromJson(json));
    this.#countStaged(json);
    const m = this.#p.metrics;
    for (const d of ['ingress', 'egress'] as const) m.deniedPackets.inc({ direction: d }, delta.node[d]);
    const local = new Map<string, Pod>();
    const localKeys = new Set<string>();
    const state = this.#p.snapshot();
    for (const p of state?.pods ?? []) {
      if (p.nodeName !== this.#p.nodeName || !isActivePod(p)) continue;
      local.set(podId(p.namespace, p.name), p);
      localKeys.add(`${p.namespace}/${p.name}`);
    }
    const seen = new Map<string, { namespace: string; pod: string; direction: Direction }>();
    for (const [key, n] of delta.pods) {
      const [id = '', direction = 'ingress'] = key.split(' ') as [string, Direction];
      const pod = local.get(id);
      if (pod === undefined) continue;
      const labels = { namespace: pod.namespace, pod: pod.name, direction };
      m.podDeniedPackets.inc(labels, n);
      seen.set(`${pod.namespace}/${pod.name} ${direction}`, labels);
    }
    // Series of pods that are no longer local (or no longer isolated) go.
    for (const [k, labels] of this.#podSeries) {
      const stillLocal = localKeys.has(`${labels.namespace}/${labels.pod}`);
      if (!seen.has(k) && !stillLocal) m.podDeniedPackets.remove(labels);
      else if (!seen.has(k)) seen.set(k, labels);
    }
    this.#podSeries = seen;
  }

  /**
   * nftnp_staged_verdict_changes_total from the kernel's tallies: a tally is
   * per local pod and direction; its series is that of the first staged
   * policy (evaluation order) selecting the pod there, as the compiler saw them.
   */
  #countStaged(json: string): void {
    const delta = this.#staged.advance(stagedCountersFromJson(json));
    if (delta.size === 0) return;
    const state = this.#p.snapshot();
    if (state === undefined) return;
    if (this.#affected?.state !== state) {
      const byKey = new Map<string, PolicyOrigin>();
      const local = localPods(state, this.#p.nodeName);
      for (const a of affectedPods(state, withStagedEnforced(state), local)) {
        const first = a.policies[0];
        if (first !== undefined) byKey.set(`${podId(a.pod.namespace, a.pod.name)} ${a.direction}`, first);
      }
      this.#affected = { state, byKey };
    }
    for (const [key, n] of delta) {
      const [id = '', direction = '', change = ''] = key.split(' ');
      const origin = this.#affected.byKey.get(`${id} ${direction}`);
      // A pod or staged policy gone since the kernel counted: the counts stay in the node total only.
      const labels = { namespace: origin?.namespace ?? '', policy: origin?.name ?? '(gone)', change };
      this.#p.metrics.stagedVerdictChanges.inc(labels, n);
    }
  }
}
