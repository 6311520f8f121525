import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import {
  APPLY_TIME_BUCKETS,
  EVENT_TO_APPLIED_BUCKETS,
  METRIC_DEFINITIONS,
  METRIC_NAMES,
  ResyncState,
  createMetrics,
  type MetricType,
} from '../../src/observability/metrics.ts';
import { requireTool, run } from '../delivery/support.ts';

/** The metrics the brief asks for: name -> type (and labels). */
const EXPECTED: Record<string, { type: MetricType; labels?: string[] }> = {
  nftnp_nft_restore_calls_total: { type: 'counter' },
  nftnp_nft_restore_errors_total: { type: 'counter' },
  nftnp_dataplane_apply_time_seconds: { type: 'histogram' },
  nftnp_dataplane_failures_total: { type: 'counter' },
  nftnp_resync_state: { type: 'gauge' },
  nftnp_in_sync: { type: 'gauge' },
  nftnp_active_local_endpoints: { type: 'gauge' },
  nftnp_active_local_policies: { type: 'gauge' },
  nftnp_cluster_num_policies: { type: 'gauge' },
  nftnp_cluster_num_cluster_network_policies: { type: 'gauge', labels: ['tier'] },
  nftnp_nft_chains: { type: 'gauge' },
  nftnp_nft_rules: { type: 'gauge' },
  nftnp_nft_sets: { type: 'gauge' },
  nftnp_nft_set_elements: { type: 'gauge' },
  nftnp_peer_addresses_held: { type: 'gauge' },
  nftnp_drift_repairs_total: { type: 'counter' },
  nftnp_drift_checks_given_way_total: { type: 'counter' },
  nftnp_private_file_failures_total: { type: 'counter' },
  nftnp_refreshes_total: { type: 'counter', labels: ['taken_by'] },
  nftnp_table_monitor_restarts_total: { type: 'counter' },
  nftnp_watch_restarts_total: { type: 'counter', labels: ['resource', 'reason'] },
  nftnp_invalid_policies: { type: 'gauge' },
  nftnp_invalid_cluster_network_policies: { type: 'gauge' },
  nftnp_event_to_applied_seconds: { type: 'histogram' },
  nftnp_last_successful_apply_timestamp_seconds: { type: 'gauge' },
  nftnp_denied_packets_total: { type: 'counter', labels: ['direction'] },
  nftnp_pod_denied_packets_total: { type: 'counter', labels: ['namespace', 'pod', 'direction'] },
  nftnp_policy_rule_connections_total: {
    type: 'counter',
    labels: ['kind', 'namespace', 'policy', 'rule', 'direction', 'action'],
  },
  nftnp_policy_rule_series_dropped: { type: 'gauge', labels: [] },
  nftnp_staged_verdict_changes_total: { type: 'counter', labels: ['namespace', 'policy', 'change'] },
  nftnp_denied_log_packets_total: { type: 'counter' },
  nftnp_denied_log_dropped_total: { type: 'counter', labels: ['reason'] },
  nftnp_denied_log_reader_restarts_total: { type: 'counter' },
  nftnp_last_change_timestamp_seconds: { type: 'gauge' },
  nftnp_status_writes_total: { type: 'counter', labels: ['object', 'result'] },
  nftnp_build_info: { type: 'gauge', labels: ['version', 'commit', 'nodejs', 'node'] },
};

interface Family {
  readonly help: string | undefined;
  readonly type: string | undefined;
  readonly samples: { name: string; labels: Record<string, string>; value: number }[];
}

/**
 * A strict parser of the Prometheus text exposition format (0.0.4), enough
 * to check what prom-client writes: HELP/TYPE lines, then samples
 * `name{l="v",...} value`. Throws on any line it does not understand.
 */
function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const family = (name: string): Family => {
    let f = families.get(name);
    if (f === undefined) {
      f = { help: undefined, type: undefined, samples: [] };
      families.set(name, f);
    }
    return f;
  };
  const baseOf = (sample: string): string => {
    for (const suffix of ['_bucket', '_sum', '_count']) {
      const b = sample.slice(0, -suffix.length);
      if (sample.endsWith(suffix) && families.get(b)?.type === 'histogram') return b;
    }
    return sample;
  };
  for (const [i, line] of text.split('\n').entries()) {
    if (line === '') continue;
    let m = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (m !== null) {
      const f = family(m[1] ?? '');
      assert.equal(f.help, undefined, `line ${i + 1}: second HELP for ${m[1]}`);
      families.set(m[1] ?? '', { ...f, help: m[2] });
      continue;
    }
    m = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (m !== null) {
      const f = family(m[1] ?? '');
      assert.equal(f.type, undefined, `line ${i + 1}: second TYPE for ${m[1]}`);
      families.set(m[1] ?? '', { ...f, type: m[2] });
      continue;
    }
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: -?\d+)?$/.exec(line);
    assert.ok(m !== null, `line ${i + 1} is not valid exposition format: ${line}`);
    const labels: Record<string, string> = {};
    const body = m[2] ?? '';
    const labelRe = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/gy;
    let consumed = 0;
    for (let lm = labelRe.exec(body); lm !== null; lm = labelRe.exec(body)) {
      labels[lm[1] ?? ''] = (lm[2] ?? '').replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
      consumed = labelRe.lastIndex;
    }
    assert.equal(consumed, body.length, `line ${i + 1}: bad label set {${body}}`);
    // Values as Prometheus reads them (Go's ParseFloat: NaN and Inf in any case;
    // prom-client writes "Nan" for an empty event-loop histogram).
    const raw = m[3] ?? '';
    const special = /^([+-]?)(inf|infinity)$/i.exec(raw);
    const value = special !== null ? (special[1] === '-' ? -Infinity : Infinity) : /^nan$/i.test(raw) ? NaN : Number(raw);
    assert.ok(/^nan$/i.test(raw) || (raw !== '' && !Number.isNaN(value)), `line ${i + 1}: bad value ${raw}`);
    const name = m[1] ?? '';
    family(baseOf(name)).samples.push({ name, labels, value });
  }
  return families;
}

describe('createMetrics', () => {
  test('registers every listed metric exactly once, with its type, labels and help', async () => {
    const m = createMetrics(new Registry(), { defaultMetrics: false });
    const json = await m.registry.getMetricsAsJSON();
    assert.deepEqual(json.map((x) => x.name).sort(), Object.keys(EXPECTED).sort());
    assert.deepEqual([...METRIC_NAMES].sort(), Object.keys(EXPECTED).sort());
    assert.equal(new Set(METRIC_NAMES).size, METRIC_NAMES.length);
    for (const def of METRIC_DEFINITIONS) {
      const want = EXPECTED[def.name];
      assert.ok(want !== undefined, def.name);
      assert.equal(def.type, want.type, def.name);
      assert.deepEqual([...def.labelNames], want.labels ?? [], def.name);
      const got = m.registry.getSingleMetric(def.name);
      assert.ok(got !== undefined, `${def.name} registered`);
      const j = json.find((x) => x.name === def.name);
      assert.equal(j?.type, def.type, `${def.name} type`);
      assert.equal(j?.help, def.help, `${def.name} help`);
      assert.ok(def.help.length > 15 && /[.)]$/.test(def.help), `${def.name}: a sentence of help`);
    }
  });

  test('names: nftnp_ prefix, unit in the name, _total exactly on counters', () => {
    for (const def of METRIC_DEFINITIONS) {
      assert.match(def.name, /^nftnp_[a-z0-9_]+$/);
      assert.equal(def.name.endsWith('_total'), def.type === 'counter', def.name);
      if (def.type === 'histogram') assert.ok(def.name.endsWith('_seconds'), `${def.name}: durations in seconds`);
      if (/time|timestamp|latency|duration/.test(def.name)) assert.match(def.name, /_seconds$/, def.name);
    }
  });

  test('a second createMetrics on the same registry is refused (no silent double registration)', () => {
    const r = new Registry();
    createMetrics(r, { defaultMetrics: false });
    assert.throws(() => createMetrics(r, { defaultMetrics: false }), /already been registered/);
  });

  test('default process_* and nodejs_* metrics are registered, unprefixed', async () => {
    const m = createMetrics();
    const names = (await m.registry.getMetricsAsJSON()).map((x) => x.name);
    for (const n of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_heap_size_used_bytes',
      'nodejs_eventloop_lag_p99_seconds',
    ]) {
      assert.ok(names.includes(n), n);
    }
    assert.ok(!names.some((n) => n.startsWith('nftnp_process') || n.startsWith('nftnp_nodejs')));
  });

  test('histogram buckets: apply time 1 ms..30 s, event-to-applied 5 ms..30 s, ascending', () => {
    for (const b of [APPLY_TIME_BUCKETS, EVENT_TO_APPLIED_BUCKETS]) {
      assert.deepEqual(
        [...b],
        [...b].sort((x, y) => x - y),
      );
      assert.equal(b.at(-1), 30);
    }
    assert.equal(APPLY_TIME_BUCKETS[0], 0.001);
    assert.equal(EVENT_TO_APPLIED_BUCKETS[0], 0.005);
  });

  test('the text output parses, and carries what the handles recorded', async () => {
    const m = createMetrics();
    m.nftRestoreCalls.inc(3);
    m.nftRestoreErrors.inc();
    m.dataplaneApplyTime.observe(0.02);
    m.eventToApplied.observe(0.3);
    m.watchRestarts.inc({ resource: 'pods', reason: 'error' }, 2);
    m.watchRestarts.inc({ resource: 'pods', reason: 'closed' });
    m.nftSetElements.set(1234);
    m.lastSuccessfulApply.set(1_700_000_000);
    m.setBuildInfo({ version: '0.1.0', commit: 'unknown', nodejs: 'v24.0.0' }, 'node-1');
    m.setBuildInfo({ version: '0.1.1', commit: '0123456789abcdef0123456789abcdef01234567', nodejs: 'v24.0.0' }, 'node-1');
    const families = parseExposition(await m.registry.metrics());
    for (const def of METRIC_DEFINITIONS) {
      const f = families.get(def.name);
      assert.ok(f !== undefined, `${def.name} in the output`);
      assert.equal(f.type, def.type, def.name);
      assert.equal(f.help, def.help, def.name);
    }
    const value = (name: string, sample = name, labels: Record<string, string> = {}): number | undefined =>
      families.get(name)?.samples.find((s) => s.name === sample && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
        ?.value;
    assert.equal(value('nftnp_nft_restore_calls_total'), 3);
    assert.equal(value('nftnp_nft_restore_errors_total'), 1);
    assert.equal(value('nftnp_dataplane_failures_total'), 0, 'counters are exposed at 0 before the first increment');
    assert.equal(value('nftnp_watch_restarts_total', 'nftnp_watch_restarts_total', { resource: 'pods', reason: 'error' }), 2);
    assert.equal(value('nftnp_watch_restarts_total', 'nftnp_watch_restarts_total', { resource: 'pods', reason: 'closed' }), 1);
    assert.equal(value('nftnp_nft_set_elements'), 1234);
    assert.equal(value('nftnp_last_successful_apply_timestamp_seconds'), 1_700_000_000);
    assert.equal(value('nftnp_dataplane_apply_time_seconds', 'nftnp_dataplane_apply_time_seconds_bucket', { le: '0.025' }), 1);
    assert.equal(value('nftnp_dataplane_apply_time_seconds', 'nftnp_dataplane_apply_time_seconds_bucket', { le: '0.01' }), 0);
    assert.equal(value('nftnp_event_to_applied_seconds', 'nftnp_event_to_applied_seconds_count'), 1);
    assert.equal(value('nftnp_event_to_applied_seconds', 'nftnp_event_to_applied_seconds_bucket', { le: '+Inf' }), 1);
    const build = families.get('nftnp_build_info')?.samples ?? [];
    assert.deepEqual(
      build,
      [
        {
          name: 'nftnp_build_info',
          labels: { version: '0.1.1', commit: '0123456789abcdef0123456789abcdef01234567', nodejs: 'v24.0.0', node: 'node-1' },
          value: 1,
        },
      ],
      'one build_info series, the latest',
    );
    assert.ok(families.has('process_cpu_seconds_total'));
  });

  test('resync state starts at "waiting for initial sync" and keeps nftnp_in_sync consistent', async () => {
    const m = createMetrics(new Registry(), { defaultMetrics: false });
    const read = async (): Promise<[number | undefined, number | undefined]> => [
      (await m.resyncState.get()).values[0]?.value,
      (await m.inSync.get()).values[0]?.value,
    ];
    assert.deepEqual(await read(), [1, 0]);
    m.setResyncState(ResyncState.InSync);
    assert.deepEqual(await read(), [3, 1]);
    m.setResyncState(ResyncState.Applying);
    assert.deepEqual(await read(), [2, 0]);
  });

  test('the parser rejects malformed exposition (self-test)', () => {
    assert.throws(() => parseExposition('nftnp_x{a="b} 1\n'));
    assert.throws(() => parseExposition('nftnp x 1\n'));
    assert.throws(() => parseExposition('nftnp_x 1 2 3\n'));
  });

  test("promtool check metrics parses the whole output (Prometheus' own parser)", async (t) => {
    const promtool = requireTool(t, 'promtool', "Debian package 'prometheus', listed in .ci/apt-packages");
    if (promtool === undefined) return;
    const m = createMetrics();
    m.setBuildInfo({ version: '0.1.0', commit: 'unknown', nodejs: 'v24.0.0' }, 'node-1');
    const r = run(promtool, ['check', 'metrics'], { input: await m.registry.metrics() });
    // Exit 1 = unparsable; 3 = parsed, with lint findings. The only findings
    // allowed are on prom-client's own default metrics (nodejs_*_total gauges).
    assert.notEqual(r.status, 1, r.stdout + r.stderr);
    const findings = (r.stdout + r.stderr).split('\n').filter((l) => l.trim() !== '');
    for (const f of findings) assert.match(f, /^nodejs_active_[a-z]+_total non-counter metrics should not have "_total" suffix$/);
  });

  test('promtool check metrics: no lint finding on the agent metrics', async (t) => {
    const promtool = requireTool(t, 'promtool', "Debian package 'prometheus', listed in .ci/apt-packages");
    if (promtool === undefined) return;
    const m = createMetrics(new Registry(), { defaultMetrics: false });
    m.setBuildInfo({ version: '0.1.0', commit: 'unknown', nodejs: 'v24.0.0' }, 'node-1');
    m.watchRestarts.inc({ resource: 'pods', reason: 'stalled' });
    const r = run(promtool, ['check', 'metrics'], { input: await m.registry.metrics() });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.equal((r.stdout + r.stderr).trim(), '', 'no lint findings');
    // The lint does find problems (self-test): a counter without _total.
    const bad = run(promtool, ['check', 'metrics'], {
      input: '# HELP nftnp_bad a counter\n# TYPE nftnp_bad counter\nnftnp_bad 1\n',
    });
    assert.notEqual(bad.status, 0);
  });
});
