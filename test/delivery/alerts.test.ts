// The alerting rules: one source (daemonset/monitoring/nft-netpol-agent.rules.yaml,
// a plain Prometheus rules file) and the PrometheusRule generated from it,
// which must hold the same groups. `promtool check rules` and
// `promtool test rules` (inactive, pending and firing case of every alert)
// run on them; promtool comes from Debian's `prometheus` package
// (.ci/apt-packages).
//
// After editing the rules file, regenerate the PrometheusRule with
//   UPDATE_DELIVERY_FILES=1 node --test test/delivery/alerts.test.ts
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { stringify } from 'yaml';
import {
  ALERTS,
  MONITORING_DIR,
  PROMETHEUS_RULE_FILE,
  ROOT,
  RULES_FILE,
  RULES_TEST_FILE,
  SCRAPE_CONFIG_FILE,
  alertRules,
  arr,
  at,
  markdownAnchors,
  readText,
  readYaml,
  rec,
  requireTool,
  run,
  str,
} from './support.ts';

const RUNBOOK_BASE = 'https://github.com/nft-netpol-agent/nft-netpol-agent/blob/main/docs/runbooks.md#';

/** The PrometheusRule text for the rule groups of the plain rules file. */
export function prometheusRuleText(groupsDoc: unknown): string {
  const obj = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: {
      name: 'nft-netpol-agent',
      namespace: 'nft-netpol-system',
      labels: { 'app.kubernetes.io/name': 'nft-netpol-agent', 'app.kubernetes.io/part-of': 'nft-netpol-agent' },
    },
    spec: { groups: at(groupsDoc, 'groups') },
  };
  const header = [
    '# GENERATED from nft-netpol-agent.rules.yaml (the single source of the alerts).',
    '# Do not edit: edit that file, then run',
    '#   UPDATE_DELIVERY_FILES=1 node --test test/delivery/alerts.test.ts',
    '# test/delivery/alerts.test.ts fails while the two differ.',
    '# If your Prometheus selects rules by label (ruleSelector, e.g.',
    '# release: kube-prometheus-stack), add that label in an overlay.',
  ].join('\n');
  return `${header}\n${stringify(obj, { lineWidth: 0 })}`;
}

const rulesDoc = readYaml(RULES_FILE);
const rules = alertRules(rulesDoc);

if (process.env.UPDATE_DELIVERY_FILES === '1') writeFileSync(PROMETHEUS_RULE_FILE, prometheusRuleText(rulesDoc));

describe('alert definitions', () => {
  test('the PrometheusRule holds exactly the groups of the plain rules file', () => {
    const pr = rec(readYaml(PROMETHEUS_RULE_FILE), 'PrometheusRule');
    assert.equal(pr.kind, 'PrometheusRule');
    assert.deepEqual(
      at(pr, 'spec.groups'),
      at(rulesDoc, 'groups'),
      'prometheusrule.yaml is out of date: UPDATE_DELIVERY_FILES=1 node --test test/delivery/alerts.test.ts',
    );
    assert.equal(readText(PROMETHEUS_RULE_FILE), prometheusRuleText(rulesDoc), 'prometheusrule.yaml was edited by hand');
  });

  test('every alert exists once', () => {
    assert.deepEqual(rules.map((r) => r.alert).sort(), [...ALERTS].sort());
  });

  const anchors = markdownAnchors(readText(join(ROOT, 'docs', 'runbooks.md')));
  for (const r of rules) {
    test(`${r.alert}: severity, summary, description, runbook_url into docs/runbooks.md, job selector, for`, () => {
      assert.ok(['critical', 'warning', 'info'].includes(r.labels.severity ?? ''), `severity ${r.labels.severity}`);
      assert.ok((r.annotations.summary ?? '').length > 10, 'summary');
      assert.ok((r.annotations.description ?? '').length > 20, 'description');
      const url = r.annotations.runbook_url ?? '';
      assert.ok(url.startsWith(RUNBOOK_BASE), `runbook_url ${url}`);
      const anchor = url.slice(RUNBOOK_BASE.length);
      assert.equal(anchor, r.alert.toLowerCase());
      assert.ok(anchors.has(anchor), `docs/runbooks.md has no heading for #${anchor}`);
      assert.match(r.expr, /job="nft-netpol-agent"/);
      for (const sel of r.expr.matchAll(/\b(nftnp_[a-z0-9_]+|up)\{([^}]*)\}/g)) {
        assert.match(sel[2] ?? '', /job="nft-netpol-agent"/, `every selector in ${r.alert} names the job: ${sel[0]}`);
      }
      assert.match(r.for ?? '', /^\d+m$/, 'a for: duration (gives the alert a pending state)');
    });
  }

  test('the headline alert is on nft restore errors', () => {
    const r = rules.find((x) => x.alert === 'NftNetpolRestoreErrors');
    assert.equal(r?.expr, 'increase(nftnp_nft_restore_errors_total{job="nft-netpol-agent"}[5m]) > 0');
    assert.equal(rules.find((x) => x.alert === 'NftNetpolInvalidPolicies')?.labels.severity, 'info');
  });
});

describe('promtool', () => {
  test('promtool check rules: the rules file and the PrometheusRule groups', (t) => {
    const promtool = requireTool(t, 'promtool', "Debian package 'prometheus', listed in .ci/apt-packages");
    if (promtool === undefined) return;
    const r = run(promtool, ['check', 'rules', RULES_FILE]);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, new RegExp(`SUCCESS: ${ALERTS.length} rules found`));
    const dir = mkdtempSync(join(tmpdir(), 'nftnp-rules-'));
    try {
      const f = join(dir, 'from-prometheusrule.yaml');
      writeFileSync(f, stringify({ groups: at(readYaml(PROMETHEUS_RULE_FILE), 'spec.groups') }));
      const r2 = run(promtool, ['check', 'rules', f]);
      assert.equal(r2.status, 0, r2.stdout + r2.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('promtool test rules: every alert has an inactive, a pending and a firing case, and all pass', (t) => {
    const tests = arr(at(readYaml(RULES_TEST_FILE), 'tests'), 'tests');
    const inactive = new Set<string>();
    const firing = new Set<string>();
    const pending = new Set<string>();
    for (const group of tests) {
      for (const c of arr(at(group, 'alert_rule_test') ?? [], 'alert_rule_test')) {
        const name = str(at(c, 'alertname'), 'alertname');
        if (arr(at(c, 'exp_alerts'), 'exp_alerts').length === 0) inactive.add(name);
        else firing.add(name);
      }
      for (const c of arr(at(group, 'promql_expr_test') ?? [], 'promql_expr_test')) {
        for (const s of arr(at(c, 'exp_samples'), 'exp_samples')) {
          const labels = str(at(s, 'labels'), 'labels');
          const m = /^ALERTS\{alertname="([^"]+)", alertstate="pending"/.exec(labels);
          if (m?.[1] !== undefined) pending.add(m[1]);
        }
      }
    }
    for (const a of ALERTS) {
      assert.ok(inactive.has(a), `${a}: no inactive case`);
      assert.ok(pending.has(a), `${a}: no pending case`);
      assert.ok(firing.has(a), `${a}: no firing case`);
    }
    const promtool = requireTool(t, 'promtool', "Debian package 'prometheus', listed in .ci/apt-packages");
    if (promtool === undefined) return;
    const r = run(promtool, ['test', 'rules', 'nft-netpol-agent.rules.test.yaml'], { cwd: join(MONITORING_DIR, 'tests') });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout + r.stderr, /SUCCESS/);
  });

  test('promtool test rules fails when a rule is wrong (the tests have teeth)', (t) => {
    const promtool = requireTool(t, 'promtool', "Debian package 'prometheus', listed in .ci/apt-packages");
    if (promtool === undefined) return;
    const mutants: [string, string][] = [
      ['for: 10m', 'for: 9m'],
      ['[1h]) > 2', '[1h]) > 1'],
      ['[10m])) > 2', '[10m])) > 3'],
      ['[10m])) > 2', '[20m])) > 2'],
      ['reason!~"closed|gone"', 'reason!~"closed"'],
      ['sum without (reason) (increase(nftnp_watch_restarts_total', '(increase(nftnp_watch_restarts_total'],
      ['max by (job)', 'max by (job, node)'],
      ['> 600', '> 540'],
      ['severity: info', 'severity: warning'],
      ['apply_timestamp_seconds{job="nft-netpol-agent"}) > 120', 'apply_timestamp_seconds{job="nft-netpol-agent"}) > 60'],
    ];
    const original = readText(RULES_FILE);
    for (const [from, to] of mutants) {
      assert.ok(original.includes(from), `mutant source ${from}`);
      // Same layout as daemonset/monitoring: tests/ next to the rules file.
      const dir = mkdtempSync(join(tmpdir(), 'nftnp-mutant-'));
      try {
        const testsDir = join(dir, 'tests');
        mkdirSync(testsDir);
        writeFileSync(join(dir, 'nft-netpol-agent.rules.yaml'), original.replace(from, to));
        writeFileSync(join(testsDir, 'nft-netpol-agent.rules.test.yaml'), readText(RULES_TEST_FILE));
        const r = run(promtool, ['test', 'rules', 'nft-netpol-agent.rules.test.yaml'], { cwd: testsDir });
        assert.notEqual(r.status, 0, `the unit tests did not notice "${from}" -> "${to}"`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  test('promtool check config: the plain scrape job (with static targets in place of Kubernetes discovery)', (t) => {
    const promtool = requireTool(t, 'promtool', "Debian package 'prometheus', listed in .ci/apt-packages");
    if (promtool === undefined) return;
    // Debian's Prometheus is built without Kubernetes service discovery, so
    // kubernetes_sd_configs is swapped for static_configs; everything else
    // (relabel rules and their regexes, honor_labels, rule_files) is checked.
    const cfg = rec(readYaml(SCRAPE_CONFIG_FILE), 'scrape config');
    const job = rec(arr(cfg.scrape_configs, 'scrape_configs')[0], 'job');
    assert.equal(job.job_name, 'nft-netpol-agent');
    assert.deepEqual(at(job, 'kubernetes_sd_configs.0.role'), 'pod');
    delete job.kubernetes_sd_configs;
    job.static_configs = [{ targets: ['127.0.0.1:9742'] }];
    const dir = mkdtempSync(join(tmpdir(), 'nftnp-config-'));
    try {
      writeFileSync(join(dir, 'prometheus.yml'), stringify(cfg));
      writeFileSync(join(dir, 'nft-netpol-agent.rules.yaml'), readText(RULES_FILE));
      const r = run(promtool, ['check', 'config', join(dir, 'prometheus.yml')]);
      assert.equal(r.status, 0, r.stdout + r.stderr);
      assert.match(r.stdout, /SUCCESS: 1 rule files found/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
