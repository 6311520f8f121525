// The scheduler alone, on a hand-driven clock: sync gate, leading-edge
// throttle, coalescing, backoff (new work waits for the announced retry),
// periodic checks. No real time passes: timers fire when the test says.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApplyScheduler, type Batch, type SchedulerHooks } from '../../src/agent/apply-scheduler.ts';
import type { Clock, TimerHandle, Timers } from '../../src/agent/ports.ts';
import { deferred } from './fakes.ts';

class ManualTime implements Clock, Timers {
  now = 1000;
  #timers: { at: number; fn: () => void; id: object }[] = [];
  mono(): number {
    return this.now;
  }
  wall(): number {
    return 1_700_000_000_000 + this.now;
  }
  set(fn: () => void, ms: number): TimerHandle {
    const id = {};
    this.#timers.push({ at: this.now + Math.max(0, ms), fn, id });
    return { id };
  }
  clear(h: TimerHandle): void {
    this.#timers = this.#timers.filter((t) => t.id !== h.id);
  }
  /** Moves time forward by ms, firing due timers in order (and letting jobs run between them). */
  async advance(ms: number): Promise<void> {
    const end = this.now + ms;
    for (;;) {
      await settle();
      const due = this.#timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (due === undefined) break;
      this.#timers = this.#timers.filter((t) => t !== due);
      this.now = Math.max(this.now, due.at);
      due.fn();
    }
    this.now = end;
    await settle();
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
}

interface Run {
  readonly batch: Batch;
  readonly at: number;
}

function setup(opts: { debounceMs?: number; checkIntervalMs?: number } = {}) {
  const time = new ManualTime();
  const runs: Run[] = [];
  const checks: number[] = [];
  let synced = true;
  let outcome: 'ok' | 'fail' = 'ok';
  let gate: Promise<void> | undefined;
  const errors: unknown[] = [];
  const self: { sched?: ApplyScheduler } = {};
  const hooks: SchedulerHooks = {
    synced: () => synced,
    onFirstSync: () => {},
    onWaitingForSync: () => {},
    onApplyQueued: () => {},
    apply: async (batch) => {
      runs.push({ batch, at: time.now });
      if (gate !== undefined) await gate;
      if (outcome === 'ok') self.sched?.succeeded();
      else self.sched?.failed(batch);
    },
    check: async () => {
      checks.push(time.now);
      await Promise.resolve();
    },
    onError: (_what, e) => errors.push(e),
  };
  const sched = new ApplyScheduler(
    hooks,
    {
      debounceMs: opts.debounceMs ?? 50,
      checkIntervalMs: opts.checkIntervalMs ?? 0,
      syncPollMs: 100,
      backoff: { initialMs: 800, maxMs: 3200 },
    },
    time,
    time,
  );
  self.sched = sched;
  return {
    s: sched,
    time,
    runs,
    checks,
    errors,
    setSynced: (v: boolean): void => {
      synced = v;
    },
    setOutcome: (v: 'ok' | 'fail'): void => {
      outcome = v;
    },
    setGate: (g: Promise<void> | undefined): void => {
      gate = g;
    },
  };
}

test('scheduler: nothing runs before the source syncs; the first run follows the sync poll', async () => {
  const t = setup();
  t.setSynced(false);
  t.s.start();
  t.s.notify('pod added');
  await t.time.advance(1000);
  assert.equal(t.runs.length, 0);
  assert.equal(t.s.synced, false);
  t.setSynced(true);
  await t.time.advance(100);
  assert.equal(t.runs.length, 1);
  assert.equal(t.s.synced, true);
  // The initial sync is not a change: no latency start.
  assert.equal(t.runs[0]?.batch.since, undefined);
  assert.deepEqual(t.runs[0]?.batch.reasons, ['start', 'pod added']);
  assert.equal(t.s.pending, false);
});

test('scheduler: an idle loop runs at once; changes during a run coalesce into one run debounceMs after the last start', async () => {
  const t = setup({ debounceMs: 50 });
  t.s.start();
  await t.time.advance(0);
  assert.equal(t.runs.length, 1);
  const g = deferred();
  t.setGate(g.promise);
  await t.time.advance(500);
  t.s.notify('a');
  await t.time.advance(0);
  assert.equal(t.runs.length, 2, 'idle: at once');
  assert.equal(t.runs[1]?.at, 1500);
  for (const r of ['b', 'c', 'd']) t.s.notify(r);
  await t.time.advance(200);
  assert.equal(t.runs.length, 2, 'one in flight; the next one waits for it');
  t.setGate(undefined);
  g.resolve();
  await t.time.advance(0);
  assert.equal(t.runs.length, 3);
  assert.deepEqual(t.runs[2]?.batch.reasons, ['b', 'c', 'd']);
  assert.equal(t.runs[2]?.batch.since, 1500);
  // Right after a run, the next change waits for the debounce window.
  t.s.notify('e');
  await t.time.advance(49);
  assert.equal(t.runs.length, 3);
  await t.time.advance(1);
  assert.equal(t.runs.length, 4);
  assert.equal(t.runs[3]?.at, (t.runs[2]?.at ?? 0) + 50);
});

test('scheduler: after a failure nothing starts before the announced retry, not even a job queued before it failed', async () => {
  const t = setup({ debounceMs: 50 });
  t.s.start();
  await t.time.advance(0);
  const g = deferred();
  t.setGate(g.promise);
  t.setOutcome('fail');
  await t.time.advance(100);
  t.s.notify('first');
  await t.time.advance(0);
  assert.equal(t.runs.length, 2);
  // A change while that run is in flight queues a job behind it...
  t.s.notify('second');
  await t.time.advance(50);
  // ...then the run fails: retry announced in 800 ms.
  g.resolve();
  t.setGate(undefined);
  await t.time.advance(0);
  assert.equal(t.s.consecutiveFailures, 1);
  assert.equal(t.s.retryInMs(), 800);
  const failedAt = t.time.now;
  for (const r of ['third', 'fourth']) {
    t.s.notify(r);
    await t.time.advance(100);
  }
  await t.time.advance(599);
  assert.equal(t.runs.length, 2, 'the queued job and new changes wait for the retry');
  await t.time.advance(1);
  assert.equal(t.runs.length, 3);
  assert.equal(t.runs[2]?.at, failedAt + 800, 'the retry comes when announced');
  assert.deepEqual(new Set(t.runs[2]?.batch.reasons), new Set(['first', 'retry', 'second', 'third', 'fourth']));
  // Second failure: 1600 ms.
  await t.time.advance(0);
  assert.equal(t.s.consecutiveFailures, 2);
  t.s.notify('fifth');
  await t.time.advance(1599);
  assert.equal(t.runs.length, 3);
  t.setOutcome('ok');
  await t.time.advance(1);
  assert.equal(t.runs.length, 4);
  assert.equal(t.s.consecutiveFailures, 0);
  assert.equal(t.s.retryInMs(), undefined);
  assert.equal(t.s.pending, false);
  assert.deepEqual(t.errors, []);
});

test('scheduler: the periodic check runs on its interval and coalesces requests; stop ends it', async () => {
  const t = setup({ checkIntervalMs: 1000 });
  t.s.start();
  await t.time.advance(3000);
  assert.deepEqual(t.checks, [2000, 3000, 4000]);
  // One check runs, one waits; a third request joins the waiting one.
  await Promise.all([t.s.requestCheck(), t.s.requestCheck(), t.s.requestCheck()]);
  assert.equal(t.checks.length, 5);
  assert.equal(await t.s.stop(100), true);
  await t.time.advance(5000);
  assert.equal(t.checks.length, 5);
  t.s.notify('after stop');
  await t.time.advance(100);
  assert.equal(t.runs.length, 1);
});
