// Fakes for the reconciler's ports: a source whose state the test sets, an
// atomic in-memory "kernel", an Event recorder, and a bounded poll helper.
import { Registry } from 'prom-client';
import { pino, type Logger } from 'pino';
import { Writable } from 'node:stream';
import type { ClusterState, NetworkPolicy } from '../../src/model/types.ts';
import type { Dataplane, EventSink, NftResult, ObjectRef, StateSource, WatchInfo } from '../../src/agent/ports.ts';
import { createMetrics, type Metrics } from '../../src/observability/metrics.ts';
import { agentMetrics } from '../../src/agent/metrics-adapter.ts';
import { state as buildState } from '../support/state-builder.ts';

export class FakeSource implements StateSource {
  isSynced = true;
  current: ClusterState;
  watches: WatchInfo[] = [];
  constructor(s: ClusterState = buildState({})) {
    this.current = s;
  }
  synced(): boolean {
    return this.isSynced;
  }
  snapshot(): ClusterState {
    return this.current;
  }
  status(): readonly WatchInfo[] {
    return this.watches;
  }
}

/**
 * An atomic in-memory table. `list()` returns what a kernel listing would:
 * the applied script re-formatted (here: prefixed) with counters that change
 * between listings, as real traffic does.
 */
export class FakeDataplane implements Dataplane {
  kernel: string | undefined;
  applies: string[] = [];
  attempts = 0;
  lists = 0;
  /** Fail this many upcoming applies. */
  failNext = 0;
  /** When set, apply waits for it (to hold a transaction in flight). */
  gate: Promise<void> | undefined;
  #traffic = 0;

  /** Incremental transactions received (this fake does not model their effect on `kernel`). */
  increments: string[] = [];
  failIncrements = false;

  apply(script: string): Promise<NftResult> {
    this.attempts++;
    const go = async (): Promise<NftResult> => {
      if (this.gate !== undefined) await this.gate;
      if (!script.includes('table inet')) {
        if (this.failIncrements)
          return {
            ok: false,
            error: 'Error: Could not process rule: No such file or directory\ndelete element ...',
            exitCode: 1,
          };
        this.increments.push(script);
        return { ok: true };
      }
      if (this.failNext > 0) {
        this.failNext--;
        return { ok: false, error: 'Error: Could not process rule: No such file or directory', exitCode: 1 };
      }
      this.kernel = script;
      this.applies.push(script);
      return { ok: true };
    };
    return go();
  }

  /** When set, list waits for it (or for its signal to abort). */
  listGate: Promise<void> | undefined;
  aborted = 0;

  /** Make listings fail (nft error). */
  listFails = false;
  /** Every listing takes this long (real time): a big table. */
  listDelayMs = 0;

  async list(signal?: AbortSignal): Promise<string | undefined> {
    this.lists++;
    if (this.listFails) throw new Error('nft list: injected failure');
    if (this.listDelayMs > 0) await new Promise((r) => setTimeout(r, this.listDelayMs));
    if (this.listGate !== undefined) {
      const gate = this.listGate;
      await new Promise<void>((resolve, reject) => {
        const onAbort = (): void => {
          this.aborted++;
          reject(new DOMException('aborted', 'AbortError'));
        };
        if (signal?.aborted === true) onAbort();
        signal?.addEventListener('abort', onAbort, { once: true });
        void gate.then(() => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        });
      });
    }
    this.#traffic += 7;
    if (this.kernel === undefined) return undefined;
    return `# listed by the kernel\n${this.kernel}\n\t\tcounter packets ${this.#traffic} bytes ${this.#traffic * 60}\n`;
  }
}

export interface RecordedEvent {
  readonly ref: ObjectRef;
  readonly reason: string;
  readonly message: string;
}

export class FakeEvents implements EventSink {
  events: RecordedEvent[] = [];
  fail = false;
  warnPolicy(ref: ObjectRef, reason: string, message: string): Promise<void> {
    if (this.fail) return Promise.reject(new Error('apiserver unavailable'));
    this.events.push({ ref, reason, message });
    return Promise.resolve();
  }
}

export function testMetrics(): { metrics: Metrics; port: ReturnType<typeof agentMetrics> } {
  const metrics = createMetrics(new Registry(), { defaultMetrics: false });
  return { metrics, port: agentMetrics(metrics) };
}

export async function metricValue(m: Metrics, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = m.registry.getSingleMetric(name);
  if (metric === undefined) throw new Error(`no metric ${name}`);
  const got = await metric.get();
  const want = Object.entries(labels);
  const v = got.values.find((x) => want.every(([k, val]) => x.labels[k] === val));
  return v?.value ?? 0;
}

export async function histogramCount(m: Metrics, name: string): Promise<number> {
  const metric = m.registry.getSingleMetric(name);
  if (metric === undefined) throw new Error(`no metric ${name}`);
  const got = await metric.get();
  return got.values.find((x) => (x as { metricName?: string }).metricName === `${name}_count`)?.value ?? 0;
}

/** A logger that keeps its JSON lines for assertions. */
export function captureLogger(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n'))
        if (l.trim() !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { log: pino({ level: 'debug' }, stream), lines };
}

/** Polls `cond` every 5 ms until it holds; throws after `timeoutMs` with `what`. */
export async function waitFor(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export function withErrors(p: NetworkPolicy, ...messages: string[]): NetworkPolicy {
  return {
    ...p,
    errors: messages.map((message, i) => ({
      kind: 'NetworkPolicy',
      namespace: p.namespace,
      name: p.name,
      path: `spec.ingress[${i}].ports[0].endPort`,
      message,
    })),
  };
}

export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
