// Side reports of the loop, driven by outcome records: metrics and the one
// log line per run, invalid-policy log lines and Events, watch restart
// counts. Nothing here decides what the kernel gets.
import type { Logger } from 'pino';
import type { ClusterState } from '../model/types.ts';
import {
  diffInvalid,
  eventMessage,
  fingerprint,
  invalidEventReason,
  invalidKey,
  reportsEventFor,
  type InvalidIndex,
  type InvalidPolicy,
} from './invalid-policies.ts';
import type { ApplyOutcome, CheckOutcome } from './outcome.ts';
import type { AgentMetrics, EventSink, StateSource } from './ports.ts';

const round1 = (ms: number): number => Math.round(ms * 10) / 10;

/** Metrics and the log line of one run. `pending`: changes are already waiting for the next run. */
export function reportApply(o: ApplyOutcome, pending: boolean, metrics: AgentMetrics, log: Logger): void {
  if (o.state !== undefined) {
    metrics.clusterPolicies(o.state.policies.length);
    const cnps = o.state.clusterPolicies ?? [];
    const admin = cnps.filter((p) => p.tier === 'Admin').length;
    metrics.clusterNetworkPolicies(admin, cnps.length - admin, cnps.filter((p) => p.errors.length > 0).length);
  }
  if (o.stats !== undefined) metrics.rulesetStats(o.stats);
  if (o.result === 'failed') {
    metrics.dataplaneFailure();
    metrics.resyncState(2);
    log.error(
      {
        event: 'apply',
        result: 'failed',
        reasons: o.reasons,
        error: o.error,
        exitCode: o.exitCode,
        attempt: o.retry?.attempt,
        retryInMs: o.retry?.delayMs,
        durationMs: Math.round(o.durationMs),
      },
      'apply failed; the previous ruleset stays in force',
    );
    return;
  }
  if (o.latencyMs !== undefined) metrics.eventToAppliedSeconds(o.latencyMs / 1000);
  metrics.lastSuccess(o.atUnixMs / 1000);
  metrics.resyncState(pending ? 2 : 3);
  if (o.repair !== undefined) {
    metrics.driftRepair();
    log.warn({ event: 'drift-repaired', foundBy: o.repair.foundBy, detail: o.repair.detail }, 'drifted table restored');
  }
  const u = o.update;
  const line = {
    event: 'apply',
    result: o.result,
    ...(o.mode === undefined ? {} : { mode: o.mode }),
    ...(u === undefined
      ? {}
      : {
          update: {
            elementsAdded: u.added,
            elementsRemoved: u.removed,
            chainsAdded: u.chainsAdded,
            chainsChanged: u.chainsChanged,
            chainsDeleted: u.chainsDeleted,
            setsAdded: u.setsAdded,
            setsDeleted: u.setsDeleted,
            // Remote addresses held out of the pod peer maps, or folded back (nft/recent-peers.ts).
            ...(u.heldOut > 0 ? { peersHeldOut: u.heldOut } : {}),
            ...(u.foldedIn > 0 ? { peersFoldedIn: u.foldedIn } : {}),
          },
        }),
    reasons: o.reasons,
    durationMs: round1(o.durationMs),
    // The end on the monotonic clock, to 0.01 ms (with the start line's timeOrigin: a sub-ms end time).
    monoMs: Math.round(o.atMonoMs * 100) / 100,
    // The oldest change this run took, from its arrival to the commit (under load: its wait included).
    ...(o.latencyMs === undefined ? {} : { latencyMs: round1(o.latencyMs) }),
    ...(o.phases === undefined ? {} : { phasesMs: Object.fromEntries(Object.entries(o.phases).map(([k, v]) => [k, round1(v)])) }),
    ...o.stats,
    recovered: o.recovered,
  };
  if (o.result === 'applied') log.info(line, 'ruleset applied');
  else log.debug(line, 'ruleset unchanged and in place');
}

/** The log line of a kernel check (a drift found is logged here; its repair by the apply that follows). */
export function reportCheck(o: CheckOutcome, log: Logger): void {
  if (o.result === 'match') log.debug({ event: 'drift-check' }, 'table matches the last apply');
  else if (o.result === 'drifted') log.warn({ event: 'drift', detail: o.detail }, 'table was changed from outside; re-applying');
  else log.error({ event: 'drift-check', detail: o.detail }, 'could not read the table back');
}

/** Invalid policies: one log line and (from enforcing nodes) one Event per change of a policy's errors. */
export class InvalidPolicyReports {
  readonly #node: string;
  readonly #metrics: AgentMetrics;
  readonly #log: Logger;
  readonly #events: EventSink;
  #index: InvalidIndex = new Map();
  /** key -> errors fingerprint an Event was created for. */
  #evented = new Map<string, string>();
  #all: readonly InvalidPolicy[] = [];

  constructor(node: string, metrics: AgentMetrics, log: Logger, events: EventSink) {
    this.#node = node;
    this.#metrics = metrics;
    this.#log = log;
    this.#events = events;
  }

  get all(): readonly InvalidPolicy[] {
    return this.#all;
  }

  report(state: ClusterState): void {
    const diff = diffInvalid(this.#index, state);
    this.#index = diff.next;
    this.#all = diff.all;
    this.#metrics.invalidPolicies(diff.all.length);
    for (const p of diff.changed) {
      const clusterScoped = p.namespace === '' && p.object !== undefined;
      this.#log.warn(
        {
          event: 'invalid-policy',
          policy: clusterScoped ? p.name : `${p.namespace}/${p.name}`,
          ...(p.object === undefined ? {} : { kind: p.object.kind }),
          errors: p.errors,
        },
        clusterScoped
          ? `invalid ${p.object?.kind ?? ''}: its invalid Accept rules match nothing, its invalid Deny and Pass rules everything (fail closed)`
          : 'invalid NetworkPolicy: its invalid parts allow nothing (fail closed)',
      );
    }
    for (const key of diff.resolved) {
      this.#evented.delete(key);
      this.#log.info({ event: 'invalid-policy-resolved', policy: key }, 'NetworkPolicy is no longer invalid (or was deleted)');
    }
    // An Event once per change of the errors, from the nodes enforcing the policy.
    for (const p of diff.all) {
      const key = invalidKey(p);
      const fp = fingerprint(p);
      if (this.#evented.get(key) === fp || !reportsEventFor(state, this.#node, key)) continue;
      this.#evented.set(key, fp);
      this.#events
        .warnPolicy(
          p.object === undefined
            ? { namespace: p.namespace, name: p.name }
            : { namespace: p.namespace, name: p.name, kind: { apiVersion: p.object.apiVersion, kind: p.object.kind } },
          invalidEventReason(p),
          eventMessage(p),
        )
        .catch((e: unknown) => {
          this.#log.warn({ event: 'k8s-event', policy: key, err: e }, 'could not create the InvalidNetworkPolicy Event');
        });
    }
  }
}

/** Watch restarts: the source keeps per-watch counters; the metric gets their deltas. */
export class WatchRestartCounter {
  readonly #source: StateSource;
  readonly #metrics: AgentMetrics;
  readonly #log: Logger;
  #seen = new Map<string, number>();

  constructor(source: StateSource, metrics: AgentMetrics, log: Logger) {
    this.#source = source;
    this.#metrics = metrics;
    this.#log = log;
  }

  poll(): void {
    let list;
    try {
      list = this.#source.status();
    } catch (e) {
      this.#log.warn({ err: e }, 'reading watch status failed');
      return;
    }
    for (const w of list) {
      for (const [reason, n] of Object.entries(w.restartsByReason ?? { error: w.restarts })) {
        const key = `${w.resource}\0${reason}`;
        // A watch that was replaced starts counting from 0 again.
        const prev = Math.min(this.#seen.get(key) ?? 0, n);
        // Watch names carry selectors ("pods spec.nodeName=n1"); the metric label
        // is the resource alone, to keep its cardinality fixed.
        // The first sight of a series exports it at 0: alerts on increase() need it.
        if (n > prev || !this.#seen.has(key))
          this.#metrics.watchRestarts(w.resource.split(' ')[0] ?? w.resource, n - prev, reason);
        this.#seen.set(key, n);
      }
    }
  }
}
