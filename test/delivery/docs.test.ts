// docs/operations.md and docs/runbooks.md stay in line with the code and the
// manifests: the metrics table is generated from src/observability/metrics.ts
// (UPDATE_DELIVERY_FILES=1 node --test test/delivery/docs.test.ts rewrites
// it), the configuration table covers every flag and variable of
// `nft-netpol-agent run --help`, every alert has a runbook section, and every
// relative link resolves.
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { RUN_HELP } from '../../src/agent/config.ts';
import { METRIC_DEFINITIONS } from '../../src/observability/metrics.ts';
import { ALERTS, ROOT, RULES_FILE, alertRules, markdownAnchors, readText, readYaml } from './support.ts';

const OPERATIONS = join(ROOT, 'docs', 'operations.md');
const RUNBOOKS = join(ROOT, 'docs', 'runbooks.md');
const BEGIN = /<!-- metrics-table:begin[^\n]*-->\n/;
const END = '<!-- metrics-table:end -->';

export function metricsTable(): string {
  const cell = (s: string): string => s.replaceAll('|', '\\|');
  const rows = METRIC_DEFINITIONS.map((d) => {
    const labels = d.labelNames.length === 0 ? '' : d.labelNames.map((l) => `\`${l}\``).join(', ');
    const felix = d.felix === undefined ? '' : `\`${d.felix}\``;
    return `| \`${d.name}\` | ${d.type} | ${labels} | ${felix} | ${cell(d.help)} |`;
  });
  return ['| Metric | Type | Labels | Felix equivalent | Meaning |', '| --- | --- | --- | --- | --- |', ...rows, ''].join('\n');
}

function withTable(doc: string): string {
  const b = BEGIN.exec(doc);
  const e = doc.indexOf(END);
  assert.ok(b !== null && e > b.index, 'docs/operations.md has the metrics-table markers');
  return doc.slice(0, b.index + b[0].length) + metricsTable() + doc.slice(e);
}

if (process.env.UPDATE_DELIVERY_FILES === '1') writeFileSync(OPERATIONS, withTable(readText(OPERATIONS)));

const operations = readText(OPERATIONS);
const runbooks = readText(RUNBOOKS);

/** Relative Markdown links [text](target) of a document, outside code blocks. */
function links(md: string): string[] {
  const out: string[] = [];
  let inFence = false;
  for (const line of md.split('\n')) {
    if (/^\s*```/.test(line)) inFence = !inFence;
    if (inFence) continue;
    for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) if (!/^[a-z]+:/.test(m[1] ?? '')) out.push(m[1] ?? '');
  }
  return out;
}

describe('docs/operations.md', () => {
  test('the metrics table is the one generated from the metric definitions', () => {
    assert.equal(
      operations,
      withTable(operations),
      'out of date: UPDATE_DELIVERY_FILES=1 node --test test/delivery/docs.test.ts',
    );
    for (const d of METRIC_DEFINITIONS) assert.ok(operations.includes(`| \`${d.name}\` | ${d.type} |`), d.name);
  });

  test('the configuration table has every flag and environment variable of `run --help`', () => {
    const flags = new Set([...RUN_HELP.matchAll(/^\s+(--[a-z][a-z-]*)/gm)].map((m) => m[1] ?? ''));
    const envs = new Set([...RUN_HELP.matchAll(/env ([A-Z][A-Z_]+)/g)].map((m) => m[1] ?? ''));
    flags.delete('--help');
    assert.ok(flags.size >= 10 && envs.size >= 9, 'parsed the help text');
    const table = operations.split('\n').filter((l) => l.startsWith('| `--') || l.startsWith('| |'));
    for (const f of flags)
      assert.ok(
        table.some((l) => l.startsWith(`| \`${f}\` |`)),
        `flag ${f} in the configuration table`,
      );
    for (const e of envs)
      assert.ok(
        table.some((l) => l.includes(`| \`${e}\` |`)),
        `variable ${e} in the configuration table`,
      );
    for (const e of ['KUBECONFIG', 'NODE_NAME', 'METRICS_ADDR', 'DEBUG_ADDR'])
      assert.ok(
        table.some((l) => l.includes(`\`${e}\``)),
        e,
      );
  });

  test('lists every alert with its severity and a runbook link', () => {
    for (const r of alertRules(readYaml(RULES_FILE))) {
      const row = operations.split('\n').find((l) => l.startsWith(`| ${r.alert} |`));
      assert.ok(row !== undefined, `${r.alert} in the alerts table`);
      assert.ok(row.includes(`| ${r.labels.severity} |`), `${r.alert}: severity ${r.labels.severity}`);
      assert.ok(row.includes(`(runbooks.md#${r.alert.toLowerCase()})`), `${r.alert}: runbook link`);
    }
  });

  test('the install commands name kustomizations that exist', () => {
    for (const m of operations.matchAll(/kubectl apply -k ([\w./-]+)/g)) {
      const dir = (m[1] ?? '').replace(/\/$/, '');
      assert.ok(existsSync(join(ROOT, dir, 'kustomization.yaml')), `${dir}/kustomization.yaml`);
    }
  });
});

describe('docs/runbooks.md', () => {
  const anchors = markdownAnchors(runbooks);

  test('a section per alert, each with meaning, confirmation and action', () => {
    for (const a of ALERTS) {
      assert.ok(anchors.has(a.toLowerCase()), `## ${a}`);
      const start = runbooks.indexOf(`\n## ${a}\n`);
      const end = runbooks.indexOf('\n## ', start + 1);
      const section = runbooks.slice(start, end === -1 ? undefined : end);
      for (const part of ['**Meaning.**', '**Confirm.**', '**What to do.**']) assert.ok(section.includes(part), `${a}: ${part}`);
    }
  });

  test('shows the debug endpoint from the node and through kubectl debug', () => {
    assert.match(runbooks, /curl -s http:\/\/127\.0\.0\.1:9743\/debug\/state/);
    assert.match(runbooks, /kubectl debug -n \$NS node\/\$NODE/);
  });
});

describe('links', () => {
  for (const [name, text, file] of [
    ['operations.md', operations, OPERATIONS],
    ['runbooks.md', runbooks, RUNBOOKS],
  ] as const) {
    test(`every relative link of ${name} resolves (file and anchor)`, () => {
      const found = links(text);
      assert.ok(found.length > 5);
      for (const l of found) {
        const [path = '', anchor] = l.split('#');
        const target = path === '' ? file : resolve(dirname(file), path);
        assert.ok(existsSync(target), `${name}: ${l} (no such file)`);
        if (anchor !== undefined && target.endsWith('.md')) {
          assert.ok(markdownAnchors(readText(target)).has(anchor), `${name}: ${l} (no such heading)`);
        }
      }
    });
  }
});
