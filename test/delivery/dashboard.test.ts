// The Grafana dashboard and the alerts only use metrics the agent exports:
// every metric name in a dashboard query or an alert expression must be
// registered by createMetrics() (agent metrics and Node.js defaults), or be
// Prometheus' own `up`. Every dashboard query is valid PromQL (promtool
// checks them as recording rules once Grafana's variables are substituted).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { stringify } from 'yaml';
import { METRIC_DEFINITIONS, createMetrics } from '../../src/observability/metrics.ts';
import { DASHBOARD_FILE, RULES_FILE, alertRules, metricNamesIn, readText, readYaml, requireTool, run } from './support.ts';

interface Panel {
  readonly id: number;
  readonly type: string;
  readonly title: string;
  readonly description?: string;
  readonly datasource?: { type: string; uid: string };
  readonly gridPos: { h: number; w: number; x: number; y: number };
  readonly targets?: { refId: string; expr: string; datasource?: { uid: string } }[];
}

const dashboard = JSON.parse(readText(DASHBOARD_FILE)) as {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: Panel[];
  templating: {
    list: { name: string; type: string; query?: unknown; definition?: string; multi?: boolean; includeAll?: boolean }[];
  };
};

const queries = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
const histograms = new Set(METRIC_DEFINITIONS.filter((d) => d.type === 'histogram').map((d) => d.name));

/** Grafana variables replaced by values PromQL accepts. */
function substitute(expr: string): string {
  return expr.replaceAll('$__rate_interval', '5m').replaceAll('$__interval', '1m').replaceAll('$node', '.*');
}

async function exportedNames(): Promise<Set<string>> {
  const m = createMetrics(new Registry());
  return new Set((await m.registry.getMetricsAsJSON()).map((x) => x.name));
}

describe('dashboard', () => {
  test('structure: unique panel ids, no overlapping panels, Prometheus datasource variable', () => {
    assert.equal(dashboard.uid, 'nft-netpol-agent');
    const ids = dashboard.panels.map((p) => p.id);
    assert.equal(new Set(ids).size, ids.length, 'unique panel ids');
    const cells = new Set<string>();
    for (const p of dashboard.panels) {
      const { h, w, x, y } = p.gridPos;
      assert.ok(x >= 0 && w > 0 && x + w <= 24, `${p.title}: within the 24-column grid`);
      for (let r = y; r < y + h; r++)
        for (let c = x; c < x + w; c++) {
          const k = `${r},${c}`;
          assert.ok(!cells.has(k), `${p.title} overlaps another panel at row ${r} column ${c}`);
          cells.add(k);
        }
      if (p.type !== 'row') {
        assert.deepEqual(p.datasource, { type: 'prometheus', uid: '${datasource}' }, `${p.title}: datasource variable`);
        assert.ok((p.targets ?? []).length > 0, `${p.title}: has queries`);
        assert.ok((p.description ?? '').length > 10, `${p.title}: has a description`);
      }
    }
    const ds = dashboard.templating.list.find((v) => v.name === 'datasource');
    assert.equal(ds?.type, 'datasource');
  });

  test('a multi-value `node` variable from nftnp_build_info, used by every agent query', () => {
    const node = dashboard.templating.list.find((v) => v.name === 'node');
    assert.equal(node?.type, 'query');
    assert.equal(node.multi, true);
    assert.equal(node.includeAll, true);
    assert.equal(node.definition, 'label_values(nftnp_build_info{job="nft-netpol-agent"}, node)');
    for (const q of queries) {
      for (const sel of q.expr.matchAll(/\b([a-z_]+)\{([^}]*)\}/g)) {
        assert.match(sel[2] ?? '', /job="nft-netpol-agent", node=~"\$node"/, `${q.panel}: ${sel[0]} filters by job and $node`);
      }
    }
  });

  test('panels for everything the brief lists', () => {
    const used = new Set(queries.flatMap((q) => [...metricNamesIn(q.expr, histograms)]));
    for (const n of [
      'nftnp_dataplane_apply_time_seconds',
      'nftnp_nft_restore_errors_total',
      'nftnp_event_to_applied_seconds',
      'nftnp_nft_rules',
      'nftnp_nft_sets',
      'nftnp_nft_set_elements',
      'nftnp_active_local_endpoints',
      'nftnp_active_local_policies',
      'nftnp_drift_repairs_total',
      'nftnp_watch_restarts_total',
    ]) {
      assert.ok(used.has(n), `a panel shows ${n}`);
    }
    assert.ok(
      queries.some((q) =>
        /histogram_quantile\(0\.99, sum by \(node, le\) \(rate\(nftnp_dataplane_apply_time_seconds_bucket/.test(q.expr),
      ),
    );
  });

  test('every dashboard query is valid PromQL (promtool check rules)', (t) => {
    const promtool = requireTool(t, 'promtool', "Debian package 'prometheus', listed in .ci/apt-packages");
    if (promtool === undefined) return;
    const rules = queries.map((q, i) => ({ record: `dashboard:query_${i}`, expr: substitute(q.expr) }));
    const dir = mkdtempSync(join(tmpdir(), 'nftnp-dashboard-'));
    try {
      const f = join(dir, 'dashboard-queries.yaml');
      writeFileSync(f, stringify({ groups: [{ name: 'dashboard', rules }] }));
      const r = run(promtool, ['check', 'rules', f]);
      assert.equal(r.status, 0, r.stdout + r.stderr);
      assert.match(r.stdout, new RegExp(`SUCCESS: ${rules.length} rules found`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('metric names used by the dashboard and the alerts', () => {
  test('are all exported by createMetrics()', async () => {
    const exported = await exportedNames();
    const used = new Map<string, string>();
    for (const q of queries) for (const n of metricNamesIn(q.expr, histograms)) used.set(n, `dashboard panel "${q.panel}"`);
    for (const r of alertRules(readYaml(RULES_FILE)))
      for (const n of metricNamesIn(r.expr, histograms)) used.set(n, `alert ${r.alert}`);
    assert.ok(used.size >= 15, 'found the metric names');
    for (const [n, where] of used) assert.ok(exported.has(n), `${where} uses ${n}, which createMetrics() does not export`);
  });

  test('the extraction finds names in every position (self-test)', () => {
    const got = metricNamesIn(
      'histogram_quantile(0.9, sum by (le) (rate(nftnp_dataplane_apply_time_seconds_bucket{a="b"}[5m]))) / nftnp_nft_rules + on() process_cpu_seconds_total and nodejs_x_count',
      histograms,
    );
    assert.deepEqual([...got].sort(), [
      'nftnp_dataplane_apply_time_seconds',
      'nftnp_nft_rules',
      'nodejs_x_count',
      'process_cpu_seconds_total',
    ]);
  });
});
