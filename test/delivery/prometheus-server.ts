// A real Prometheus server (Debian's `prometheus` package) for the end-to-end
// alert test (prometheus-e2e.test.ts): a generated configuration that
// scrapes one agent like daemonset/monitoring/scrape-config.yaml would, the
// alert rules rewritten for speed, and a small client of Prometheus' HTTP
// API. Loopback only, temporary storage; stop() kills and waits. Not a test
// file itself.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { trackPid, untrackPid } from '../harness/netns.ts';
import { SCRAPE_CONFIG_FILE, arr, at, isRecord, readYaml, rec, str } from './support.ts';

// ---------------------------------------------------------------- ports

/** A TCP port free on 127.0.0.1 right now (the caller retries if it is taken meanwhile). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      const port = typeof a === 'object' && a !== null ? a.port : 0;
      srv.close(() => (port > 0 ? resolve(port) : reject(new Error('no port'))));
    });
  });
}

// ---------------------------------------------------------------- polling

/**
 * Polls `probe` until it returns something other than undefined; throws after
 * timeoutMs with `what` and the last value seen (or the last error). Bounds a
 * wait, never measures it.
 */
export async function pollUntil<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
  everyMs = 250,
): Promise<T> {
  const deadline = Date.now() + Math.max(0, timeoutMs);
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
      last = 'condition not met';
    } catch (e) {
      if (e instanceof FatalPollError) throw e;
      last = e instanceof Error ? e.message : String(e);
    }
    if (Date.now() >= deadline)
      throw new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what} (last: ${String(last)})`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Thrown from a pollUntil probe: stops polling at once (e.g. a process died). */
export class FatalPollError extends Error {}

// ---------------------------------------------------------------- configuration

export interface ScrapeTarget {
  /** host:port of the agent's --metrics-addr. */
  readonly address: string;
  /** The labels Kubernetes discovery + relabelling would attach (node, namespace, pod). */
  readonly labels: Readonly<Record<string, string>>;
}

/**
 * prometheus.yml scraping one agent with the job of scrape-config.yaml
 * (job_name, honor_labels, metrics path), a static target in place of
 * Kubernetes discovery (Debian's Prometheus is built without it), and
 * `intervalSeconds` for scrapes and rule evaluation.
 */
export function prometheusConfig(target: ScrapeTarget, ruleFile: string, intervalSeconds: number): string {
  const real = rec(readYaml(SCRAPE_CONFIG_FILE), 'scrape config');
  const job = rec(arr(real.scrape_configs, 'scrape_configs')[0], 'scrape job');
  const interval = `${intervalSeconds}s`;
  const cfg = {
    global: { scrape_interval: interval, evaluation_interval: interval },
    scrape_configs: [
      {
        job_name: str(job.job_name, 'job_name'),
        honor_labels: job.honor_labels,
        scrape_interval: interval,
        scrape_timeout: interval,
        metrics_path: typeof job.metrics_path === 'string' ? job.metrics_path : '/metrics',
        static_configs: [{ targets: [target.address], labels: { ...target.labels } }],
      },
    ],
    rule_files: [ruleFile],
  };
  return stringify(cfg);
}

/** How to speed up one alert: its new `for:` and text replacements in its expr. */
export interface RuleRewrite {
  readonly for: string;
  /** [pattern, replacement]; a string pattern must occur exactly once, a regex (global) at least once. */
  readonly expr: readonly (readonly [string | RegExp, string])[];
}

export interface RewrittenRule {
  readonly alert: string;
  readonly before: { readonly expr: string; readonly for: string | undefined };
  readonly after: { readonly expr: string; readonly for: string | undefined };
}

/**
 * A copy of a rule-groups document with the named alerts' `for:` and expr
 * rewritten; everything else untouched. Throws when a pattern does not match
 * as required or an alert is missing, so a change of the real rules cannot
 * silently turn the rewrite into a no-op.
 */
export function rewriteRules(
  doc: unknown,
  rewrites: Readonly<Record<string, RuleRewrite>>,
): { doc: unknown; changed: RewrittenRule[] } {
  const copy: unknown = structuredClone(doc);
  const changed: RewrittenRule[] = [];
  for (const g of arr(at(copy, 'groups'), 'groups')) {
    for (const r of arr(at(g, 'rules'), 'rules')) {
      if (!isRecord(r) || typeof r.alert !== 'string') continue;
      const rw = rewrites[r.alert];
      if (rw === undefined) continue;
      const before = { expr: str(r.expr, `${r.alert} expr`), for: typeof r.for === 'string' ? r.for : undefined };
      let expr = before.expr;
      for (const [pattern, replacement] of rw.expr) {
        if (typeof pattern === 'string') {
          assert.equal(
            expr.split(pattern).length,
            2,
            `${r.alert}: "${pattern}" must occur exactly once in ${JSON.stringify(expr)}`,
          );
          expr = expr.replace(pattern, replacement);
        } else {
          assert.ok(pattern.global, 'regex patterns must be global');
          assert.match(expr, pattern, `${r.alert}: ${String(pattern)} must occur in ${JSON.stringify(expr)}`);
          expr = expr.replace(pattern, replacement);
        }
      }
      r.expr = expr;
      r.for = rw.for;
      changed.push({ alert: r.alert, before, after: { expr, for: rw.for } });
    }
  }
  for (const name of Object.keys(rewrites))
    assert.ok(
      changed.some((c) => c.alert === name),
      `no alert ${name} in the rules file`,
    );
  return { doc: copy, changed };
}

// ---------------------------------------------------------------- the server

export interface PromAlert {
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  readonly state: string;
  readonly activeAt?: string;
  readonly value?: string;
}

export interface PromRule {
  readonly name: string;
  readonly query: string;
  readonly type: string;
  readonly state?: string;
  readonly health: string;
  readonly lastError?: string;
  readonly duration?: number;
  readonly lastEvaluation?: string;
  readonly alerts?: readonly PromAlert[];
}

export interface PromSample {
  readonly metric: Record<string, string>;
  readonly value: number;
  /** Evaluation time, Unix seconds. */
  readonly at: number;
}

export interface StartOptions {
  readonly binary: string;
  /** A fresh directory of the caller's: prometheus.yml goes here, the TSDB below it. */
  readonly dir: string;
  /** prometheus.yml text. */
  readonly config: string;
  readonly readyTimeoutMs: number;
}

export class PrometheusServer {
  readonly port: number;
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  #log = '';

  private constructor(port: number, child: ChildProcess) {
    this.port = port;
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const keep = (d: string): void => {
      // Enough for diagnostics, bounded for long runs.
      this.#log = (this.#log + d).slice(-200_000);
    };
    child.stdout?.setEncoding('utf8').on('data', keep);
    child.stderr?.setEncoding('utf8').on('data', keep);
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The last lines of Prometheus' log, for failure messages. */
  logTail(n = 30): string {
    return this.#log.trimEnd().split('\n').slice(-n).join('\n');
  }

  /**
   * Starts Prometheus on 127.0.0.1:<free port> with storage under dir/data and
   * waits for /-/ready. A port taken between choosing and binding is retried
   * with another one.
   */
  static async start(o: StartOptions): Promise<PrometheusServer> {
    const configFile = join(o.dir, 'prometheus.yml');
    await writeFile(configFile, o.config);
    let lastError = '';
    for (let attempt = 1; attempt <= 3; attempt++) {
      const port = await freePort();
      const data = join(o.dir, `data-${attempt}`);
      await mkdir(data);
      const child = spawn(
        o.binary,
        [
          `--config.file=${configFile}`,
          `--storage.tsdb.path=${data}`,
          `--web.listen-address=127.0.0.1:${port}`,
          '--storage.tsdb.retention.time=1h',
          '--log.level=info',
        ],
        { cwd: o.dir, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      if (child.pid !== undefined) trackPid(child.pid);
      const p = new PrometheusServer(port, child);
      try {
        await pollUntil(
          `Prometheus /-/ready on 127.0.0.1:${port}`,
          async () => {
            if (!p.alive()) throw new FatalPollError(`prometheus exited before it was ready:\n${p.logTail()}`);
            const res = await fetch(`${p.url}/-/ready`, { signal: AbortSignal.timeout(2_000) });
            return res.status === 200 ? true : undefined;
          },
          o.readyTimeoutMs,
        );
        return p;
      } catch (e) {
        lastError = e instanceof Error ? e.message : String(e);
        await p.stop();
        if (!/address already in use/i.test(p.logTail(200))) throw e;
      }
    }
    throw new Error(`could not start Prometheus on a free port: ${lastError}`);
  }

  /** SIGTERM, then SIGKILL if it is still running after a few seconds; waits for the exit. */
  async stop(): Promise<void> {
    if (this.alive()) {
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => {
        if (this.alive()) this.child.kill('SIGKILL');
      }, 5_000);
      await this.exited;
      clearTimeout(timer);
    }
    if (this.child.pid !== undefined) untrackPid(this.child.pid);
  }

  async #api(path: string): Promise<unknown> {
    const res = await fetch(`${this.url}${path}`, { signal: AbortSignal.timeout(5_000) });
    const body: unknown = await res.json();
    if (!isRecord(body) || body.status !== 'success')
      throw new Error(`GET ${path}: HTTP ${res.status} ${JSON.stringify(body).slice(0, 500)}`);
    return body.data;
  }

  /** An instant query (/api/v1/query); vector results only. */
  async query(expr: string): Promise<PromSample[]> {
    const data = rec(await this.#api(`/api/v1/query?query=${encodeURIComponent(expr)}`), 'query data');
    assert.equal(data.resultType, 'vector', `${expr}: expected a vector`);
    return arr(data.result, 'result').map((s) => {
      const metric = rec(at(s, 'metric'), 'metric') as Record<string, string>;
      const v = arr(at(s, 'value'), 'value');
      return { metric, at: Number(v[0]), value: Number(v[1]) };
    });
  }

  /** The single sample of `expr`, or undefined when the result is empty. */
  async scalar(expr: string): Promise<number | undefined> {
    const r = await this.query(expr);
    if (r.length === 0) return undefined;
    assert.equal(r.length, 1, `${expr}: expected one series, got ${JSON.stringify(r)}`);
    return r[0]?.value;
  }

  /** Every rule of every group (/api/v1/rules). */
  async rules(): Promise<PromRule[]> {
    const data = rec(await this.#api('/api/v1/rules'), 'rules data');
    return arr(data.groups, 'groups').flatMap((g) => arr(at(g, 'rules'), 'rules') as PromRule[]);
  }

  /** Pending and firing alerts (/api/v1/alerts). */
  async alerts(): Promise<PromAlert[]> {
    const data = rec(await this.#api('/api/v1/alerts'), 'alerts data');
    return arr(data.alerts, 'alerts') as PromAlert[];
  }
}
