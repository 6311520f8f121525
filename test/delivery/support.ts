// Helpers shared by the delivery tests (manifests, alerts, dashboard,
// Dockerfile, docs). Not a test file itself.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';
import { parseAllDocuments, parse as parseYaml } from 'yaml';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const DAEMONSET_DIR = join(ROOT, 'daemonset');
export const MONITORING_DIR = join(DAEMONSET_DIR, 'monitoring');
export const RULES_FILE = join(MONITORING_DIR, 'nft-netpol-agent.rules.yaml');
export const PROMETHEUS_RULE_FILE = join(MONITORING_DIR, 'prometheusrule.yaml');
export const RULES_TEST_FILE = join(MONITORING_DIR, 'tests', 'nft-netpol-agent.rules.test.yaml');
export const DASHBOARD_FILE = join(MONITORING_DIR, 'dashboards', 'nft-netpol-agent.json');
export const SCRAPE_CONFIG_FILE = join(MONITORING_DIR, 'scrape-config.yaml');

export const IN_CI = process.env.CI === 'true';

/** Every alert of daemonset/monitoring/nft-netpol-agent.rules.yaml. */
export const ALERTS = [
  'NftNetpolRestoreErrors',
  'NftNetpolDataplaneApplyFailing',
  'NftNetpolOutOfSync',
  'NftNetpolDriftRepairedRepeatedly',
  'NftNetpolWatchRestartsClimbing',
  'NftNetpolApplyLagging',
  'NftNetpolAgentDown',
  'NftNetpolInvalidPolicies',
  'NftNetpolScriptsThroughPipes',
] as const;

/** Absolute path of an executable on PATH, or undefined. */
export function which(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const p = join(dir, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * The path of a tool the test needs. Missing: the test is skipped with a
 * message locally, but FAILS in CI (CI=true), which must never pass by
 * skipping. `how` says how CI gets it.
 */
export function requireTool(t: TestContext, name: string, how: string): string | undefined {
  const p = which(name);
  if (p !== undefined) return p;
  const msg = `${name} not found on PATH (${how})`;
  if (IN_CI) assert.fail(`${msg}: CI must run this test, not skip it`);
  t.skip(msg);
  return undefined;
}

export interface RunResult {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export function run(cmd: string, args: readonly string[], opts: { cwd?: string; input?: string } = {}): RunResult {
  const r = spawnSync(cmd, [...args], {
    cwd: opts.cwd ?? ROOT,
    input: opts.input,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, KUBECONFIG: '/dev/null' },
  });
  if (r.error !== undefined) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

export function readText(path: string): string {
  return readFileSync(path, 'utf8');
}

/** Parses one YAML document strictly (duplicate keys and syntax errors throw). */
export function readYaml(path: string): unknown {
  return parseYaml(readText(path), { uniqueKeys: true, strict: true, prettyErrors: true });
}

/** Every non-empty document of a multi-document YAML stream; errors throw. */
export function parseYamlStream(text: string, what: string): unknown[] {
  const docs = parseAllDocuments(text, { uniqueKeys: true, strict: true, prettyErrors: true });
  if (!Array.isArray(docs)) throw new Error(`${what}: not a YAML stream`);
  const out: unknown[] = [];
  for (const d of docs) {
    if (d.errors.length > 0) throw new Error(`${what}: ${d.errors.map((e) => e.message).join('; ')}`);
    const v: unknown = d.toJS();
    if (v !== null && v !== undefined) out.push(v);
  }
  return out;
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Walks a dotted path through records and arrays (numeric segments index arrays). */
export function at(v: unknown, path: string): unknown {
  let cur: unknown = v;
  for (const seg of path.split('.')) {
    if (Array.isArray(cur) && /^\d+$/.test(seg)) cur = cur[Number(seg)];
    else if (isRecord(cur)) cur = cur[seg];
    else return undefined;
  }
  return cur;
}

export function str(v: unknown, what: string): string {
  assert.equal(typeof v, 'string', `${what} must be a string`);
  return v as string;
}

export function arr(v: unknown, what: string): unknown[] {
  assert.ok(Array.isArray(v), `${what} must be a list`);
  return v as unknown[];
}

export function rec(v: unknown, what: string): Record<string, unknown> {
  assert.ok(isRecord(v), `${what} must be a mapping`);
  return v;
}

export interface AlertRule {
  readonly alert: string;
  readonly expr: string;
  readonly for: string | undefined;
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
}

/** The alerting rules of a Prometheus rule-groups document ({groups: [...]}). */
export function alertRules(groupsDoc: unknown): AlertRule[] {
  const out: AlertRule[] = [];
  for (const g of arr(at(groupsDoc, 'groups'), 'groups')) {
    for (const r of arr(at(g, 'rules'), 'rules')) {
      const rule = rec(r, 'rule');
      if (rule.alert === undefined) continue;
      out.push({
        alert: str(rule.alert, 'alert'),
        expr: str(rule.expr, 'expr'),
        for: rule.for === undefined ? undefined : str(rule.for, 'for'),
        labels: rec(rule.labels ?? {}, 'labels') as Record<string, string>,
        annotations: rec(rule.annotations ?? {}, 'annotations') as Record<string, string>,
      });
    }
  }
  return out;
}

/**
 * Metric names referenced by a PromQL expression: our own (nftnp_*) and the
 * Node.js process ones (process_*, nodejs_*), plus `up`. Histogram series
 * suffixes (_bucket, _sum, _count) are mapped back to the histogram's name
 * when `histograms` lists it.
 */
export function metricNamesIn(expr: string, histograms: ReadonlySet<string>): Set<string> {
  const out = new Set<string>();
  for (const m of expr.matchAll(/(?<![A-Za-z0-9_:$])((?:nftnp|process|nodejs)_[A-Za-z0-9_]+)/g)) {
    const name = m[1] ?? '';
    const base = name.replace(/_(bucket|sum|count)$/, '');
    out.add(base !== name && histograms.has(base) ? base : name);
  }
  return out;
}

/** GitHub's heading anchor: lower case, punctuation removed, spaces to dashes. */
export function githubAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of every Markdown heading of a document. */
export function markdownAnchors(md: string): Set<string> {
  const out = new Set<string>();
  let inFence = false;
  for (const line of md.split('\n')) {
    if (/^\s*```/.test(line)) inFence = !inFence;
    if (inFence) continue;
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (m?.[1] !== undefined) out.add(githubAnchor(m[1]));
  }
  return out;
}
