// End to end: the alert rules of daemonset/monitoring/nft-netpol-agent.rules.yaml
// (sped up in a copy), evaluated by a real Prometheus server (Debian package
// `prometheus`) that scrapes a real agent process applying its ruleset inside
// a simulated node's network namespace. The agent watches the in-repo API
// server (real list/watch protocol, bookmarks only when a resource moves)
// while other pods keep changing: its quiet watches are probed every 300 ms
// of silence (--watch-idle-probe, 150 s by default), never restarted, and
// NftNetpolWatchRestartsClimbing stays inactive over the whole run (a
// probe per quiet watch every ~1.3 s: about as many as two hours bring at
// the default). An nft
// wrapper makes the agent's transactions fail while a flag file exists:
//   1. the agent applies: the scrape works, NftNetpolRestoreErrors is inactive;
//   2. nft fails: NftNetpolRestoreErrors goes pending, then firing (and so does
//      NftNetpolDataplaneApplyFailing);
//   3. nft works again: the agent recovers (in sync, a newer successful apply)
//      and both alerts resolve.
// Everything is observed through Prometheus' own HTTP API. Needs root, ip,
// nft and prometheus: skipped locally without them, failing in CI (CI=true).
import { nftWrapperScript } from '../support/nft-wrapper.ts';
import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { AgentProcess, listTableIn } from '../agent/agent-process.ts';
import { createNetns, deleteNetns, sweepStale, uniquePrefix } from '../harness/netns.ts';
import { requireDatapath } from '../harness/requirements.ts';
import { FakeApiServer, namespace, networkPolicy, node, pod } from '../support/fake-apiserver.ts';
import type { KubeObject } from '../support/fake-apiserver.ts';
import {
  FatalPollError,
  PrometheusServer,
  pollUntil,
  prometheusConfig,
  rewriteRules,
  type PromRule,
} from './prometheus-server.ts';
import { RULES_FILE, alertRules, readYaml, requireTool, run, which } from './support.ts';

const NODE = 'node-1';
const JOB = 'nft-netpol-agent';
const SEL = `job="${JOB}",node="${NODE}"`;
const LOCAL_POD_IP = '10.244.1.10';
const PEER_POD_IP = '10.244.2.10';
const TEST_TIMEOUT_MS = 180_000;
/** Kept back from the test timeout for the cleanup in finally. */
const CLEANUP_RESERVE_MS = 15_000;

const RESTORE = 'NftNetpolRestoreErrors';
const APPLY = 'NftNetpolDataplaneApplyFailing';
const WATCH = 'NftNetpolWatchRestartsClimbing';

/** Seconds of the sped-up windows (and of the apply alert's no-success threshold). */
const WINDOW_S = 20;
/**
 * The speed-up: windows, thresholds and `for:` of the two alerts under test
 * shortened; the expressions are otherwise the real ones. The error window
 * (20 s) is longer than the gaps between the agent's first failed retries
 * (100 ms doubling). NftNetpolDataplaneApplyFailing keeps its window equal
 * to its no-success threshold (10m and 600 s in the real rule): with a
 * longer window it would fire again after a recovery.
 */
const REWRITES = {
  [RESTORE]: { for: '5s', expr: [[/\[\d+m\]/g, `[${WINDOW_S}s]`]] },
  [APPLY]: {
    for: '5s',
    expr: [
      [/\[\d+m\]/g, `[${WINDOW_S}s]`],
      [') > 600', `) > ${WINDOW_S}`],
    ],
  },
  [WATCH]: { for: '5s', expr: [[/\[\d+m\]/g, `[${WINDOW_S}s]`]] },
} as const;

/** "20s", "10m", "1h" in seconds. */
function seconds(d: string): number {
  const m = /^(\d+)([smh])$/.exec(d);
  assert.ok(m !== null, `duration ${d}`);
  return Number(m[1]) * (m[2] === 'h' ? 3600 : m[2] === 'm' ? 60 : 1);
}

function manifests(policyPort: number): { cluster: KubeObject[]; policy: KubeObject } {
  const cluster = [
    namespace('shop', { team: 'shop' }),
    node(NODE, ['172.18.0.11']),
    node('node-2', ['172.18.0.12']),
    pod('shop', 'db', { app: 'db' }, NODE, LOCAL_POD_IP),
    pod('shop', 'web', { app: 'web' }, 'node-2', PEER_POD_IP),
  ];
  const policy = networkPolicy('shop', 'db-allow-web', {
    podSelector: { matchLabels: { app: 'db' } },
    policyTypes: ['Ingress'],
    ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ protocol: 'TCP', port: policyPort }] }],
  });
  return { cluster, policy };
}

/** nft, except that transactions (-f, also --check -f, and each line of nft -i) fail like nft does while `flag` exists. */
function nftWrapper(realNft: string, flag: string): string {
  return nftWrapperScript({
    nft: realNft,
    fail: flag,
    message: '/dev/stdin:1:1-30: Error: Could not process rule: Operation not permitted (injected by prometheus-e2e)',
  });
}

test(
  'Prometheus end to end: NftNetpolRestoreErrors inactive -> pending -> firing -> resolved, NftNetpolWatchRestartsClimbing inactive on quiet watches, on a real agent and a real Prometheus',
  { timeout: TEST_TIMEOUT_MS },
  async (t) => {
    if (!requireDatapath(t)) return;
    const promBin = requireTool(t, 'prometheus', "Debian package 'prometheus', listed in .ci/apt-packages");
    if (promBin === undefined) return;
    const promtool = requireTool(t, 'promtool', "Debian package 'prometheus', listed in .ci/apt-packages");
    if (promtool === undefined) return;
    const realNft = which('nft');
    assert.ok(realNft !== undefined, 'nft on PATH (checked by requireDatapath)');

    const t0 = Date.now();
    const deadline = t0 + TEST_TIMEOUT_MS - CLEANUP_RESERVE_MS;
    /** A wait bound: at most `ms`, never beyond the test's own deadline. */
    const budget = (ms: number): number => Math.max(1_000, Math.min(ms, deadline - Date.now()));
    const elapsed = (): string => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
    const say = (msg: string): void => {
      const line = `[prometheus-e2e +${elapsed()}] ${msg}`;
      console.log(line);
      t.diagnostic(line);
    };

    sweepStale();
    const dir = await mkdtemp(join(tmpdir(), 'nftnp-prom-e2e-'));
    const netns = `${uniquePrefix()}node1`;
    let agent: AgentProcess | undefined;
    let prom: PrometheusServer | undefined;
    let api: FakeApiServer | undefined;
    let churn: NodeJS.Timeout | undefined;
    try {
      // ---- the rules, sped up in a copy (and checked to be changed as intended)
      const original = readYaml(RULES_FILE);
      const { doc: fastDoc, changed } = rewriteRules(original, REWRITES);
      const originalRules = alertRules(original);
      const fastRules = alertRules(fastDoc);
      assert.deepEqual(
        fastRules.map((r) => r.alert),
        originalRules.map((r) => r.alert),
        'same alerts, same order',
      );
      for (const [i, orig] of originalRules.entries()) {
        const fast = fastRules[i];
        assert.ok(fast !== undefined);
        assert.deepEqual(
          { ...fast, expr: '', for: '' },
          { ...orig, expr: '', for: '' },
          `${orig.alert}: labels and annotations unchanged`,
        );
        if (!(orig.alert in REWRITES)) assert.deepEqual(fast, orig, `${orig.alert}: not rewritten`);
      }
      const restore = changed.find((c) => c.alert === RESTORE);
      assert.equal(
        restore?.before.expr,
        `increase(nftnp_nft_restore_errors_total{job="${JOB}"}[5m]) > 0`,
        'the headline expression the rewrite starts from',
      );
      assert.equal(restore?.after.expr, `increase(nftnp_nft_restore_errors_total{job="${JOB}"}[${WINDOW_S}s]) > 0`);
      assert.equal(restore?.before.for, '1m');
      assert.equal(restore?.after.for, '5s');
      const apply = changed.find((c) => c.alert === APPLY);
      assert.ok(apply !== undefined);
      assert.notEqual(apply.after.expr, apply.before.expr);
      assert.equal(
        apply.after.expr,
        apply.before.expr.replace(/\[10m\]/, `[${WINDOW_S}s]`).replace(') > 600', `) > ${WINDOW_S}`),
        'only the window and the age threshold change',
      );
      for (const [which, expr] of [
        ['real', apply.before.expr],
        ['sped-up', apply.after.expr],
      ] as const) {
        const window = /\[(\d+[smh])\]/.exec(expr)?.[1] ?? '';
        const threshold = /\) > (\d+)$/.exec(expr)?.[1];
        assert.equal(seconds(window), Number(threshold), `${APPLY} (${which}): failure window == no-success threshold`);
      }
      assert.equal(apply.after.for, '5s');
      for (const c of changed) {
        assert.doesNotMatch(c.after.expr, /\[\d+[mh]\]/, `${c.alert}: no minute/hour window left`);
        assert.notEqual(c.after.for, c.before.for, `${c.alert}: for: changed`);
      }
      const rulesFile = join(dir, 'nft-netpol-agent.fast.rules.yaml');
      await writeFile(rulesFile, stringify(fastDoc, { lineWidth: 0 }));
      const check = run(promtool, ['check', 'rules', rulesFile]);
      assert.equal(check.status, 0, check.stdout + check.stderr);
      for (const c of changed)
        say(
          `rules rewritten for speed: ${c.alert}: "${c.before.expr.replace(/\s+/g, ' ')}" for ${c.before.for} -> "${c.after.expr.replace(/\s+/g, ' ')}" for ${c.after.for}`,
        );

      // ---- a simulated node (network namespace), the API server, the failing-nft wrapper
      await createNetns([netns]);
      api = await FakeApiServer.start();
      const k8s = api;
      let policyPort = 5432;
      const m0 = manifests(policyPort);
      k8s.load([...m0.cluster, m0.policy, namespace('churn')]);
      const kubeconfig = join(dir, 'kubeconfig');
      await writeFile(kubeconfig, k8s.kubeConfig().exportConfig());
      // Pods of another node come and go all along: the server's resourceVersion
      // moves, while the namespaces, policies and nodes the agent watches are quiet.
      let churned = 0;
      churn = setInterval(() => {
        const name = `churn-${churned++}`;
        k8s.create('pods', pod('churn', name, { app: 'churn' }, 'node-2', `10.244.9.${(churned % 250) + 1}`));
        if (churned > 3) k8s.delete('pods', 'churn', `churn-${churned - 4}`);
      }, 250);
      const failFlag = join(dir, 'nft-fail');
      const wrapper = join(dir, 'nft-wrapper');
      await writeFile(wrapper, nftWrapper(realNft, failFlag));
      await chmod(wrapper, 0o755);

      // ---- the agent
      // --metrics-addr 127.0.0.1:0 (AgentProcess' default): the kernel picks a
      // free port and the agent logs it, which no other process can take between
      // choosing and binding.
      agent = AgentProcess.start({
        node: NODE,
        netns,
        kubeconfig,
        nft: wrapper,
        args: ['--drift-interval', '0', '--watch-idle-probe', '300ms'],
      });
      const a = agent;
      const metricsPort = (await a.ports()).metrics;
      assert.ok(metricsPort > 0, a.tail());
      await a.waitForLog(
        'the first successful apply',
        (l) => l['event'] === 'apply' && l['result'] === 'applied',
        budget(30_000),
      );
      const table0 = (await listTableIn(netns)) ?? '';
      assert.match(table0, new RegExp(LOCAL_POD_IP.replaceAll('.', '\\.')), 'the ruleset is in the node namespace');
      assert.match(table0, /tcp \. 5432/, 'with the policy port');
      say(`agent pid ${a.pid} applied its ruleset in netns ${netns}; metrics on 127.0.0.1:${metricsPort}`);
      const agentAlive = (): void => {
        if (!a.alive()) throw new FatalPollError(`the agent exited:\n${a.tail()}`);
      };

      // ---- Prometheus
      const config = prometheusConfig(
        {
          address: `127.0.0.1:${metricsPort}`,
          labels: { node: NODE, namespace: 'nft-netpol-system', pod: `nft-netpol-agent-${NODE}` },
        },
        rulesFile,
        1,
      );
      prom = await PrometheusServer.start({ binary: promBin, dir, config, readyTimeoutMs: budget(30_000) });
      const p = prom;
      say(`prometheus pid ${p.child.pid} ready on ${p.url}`);
      const promAlive = (): void => {
        if (!p.alive()) throw new FatalPollError(`prometheus exited:\n${p.logTail()}`);
      };

      // Alert states as Prometheus' rules API reports them, printed when they change.
      let lastPrinted = '';
      /** Every state of the watch restart alert seen, in order (changes only). */
      const watchStates: string[] = [];
      const states = async (): Promise<Map<string, PromRule>> => {
        agentAlive();
        promAlive();
        const rules = new Map((await p.rules()).filter((r) => r.type === 'alerting').map((r) => [r.name, r]));
        const ws = rules.get(WATCH)?.state ?? '?';
        if (watchStates.at(-1) !== ws) watchStates.push(ws);
        const line = [RESTORE, APPLY, 'NftNetpolOutOfSync', WATCH].map((n) => `${n}=${rules.get(n)?.state ?? '?'}`).join(' ');
        if (line !== lastPrinted) {
          lastPrinted = line;
          say(`alert states: ${line}`);
        }
        return rules;
      };
      const waitState = async (alert: string, want: readonly string[], what: string, ms: number): Promise<PromRule> =>
        pollUntil(
          `${alert} ${what}`,
          async () => {
            const r = (await states()).get(alert);
            return r !== undefined && want.includes(r.state ?? '') ? r : undefined;
          },
          budget(ms),
        );

      // ================= phase 1: applied, scraped, inactive
      say('phase 1: the agent applies fine');
      const up = await pollUntil(
        'up == 1',
        async () => ((await p.scalar(`up{${SEL}}`)) === 1 ? true : undefined),
        budget(30_000),
      );
      assert.equal(up, true);
      const calls = await pollUntil(
        'nftnp_nft_restore_calls_total > 0 through Prometheus',
        () => p.scalar(`nftnp_nft_restore_calls_total{${SEL}} > 0`),
        budget(30_000),
      );
      assert.ok(calls >= 1);
      // The alert's own input has data (two scrapes in the window), and is 0.
      const noErrors = await pollUntil(
        'increase(errors[window]) has samples',
        () => p.query(`increase(nftnp_nft_restore_errors_total{${SEL}}[${WINDOW_S}s])`).then((r) => r[0]),
        budget(30_000),
      );
      assert.equal(noErrors.value, 0, 'no restore errors yet');
      assert.equal(await p.scalar(`nftnp_in_sync{${SEL}}`), 1);
      const lastSuccess1 = await p.scalar(`nftnp_last_successful_apply_timestamp_seconds{${SEL}}`);
      assert.ok(lastSuccess1 !== undefined && lastSuccess1 > 0, 'last successful apply timestamp scraped');
      // Rules evaluated after that data existed: inactive, healthy.
      const evaluatedAfter = noErrors.at + 1;
      const rules1 = await pollUntil(
        'a rule evaluation after the first data',
        async () => {
          const rs = await states();
          const r = rs.get(RESTORE);
          return r?.lastEvaluation !== undefined && Date.parse(r.lastEvaluation) / 1000 > evaluatedAfter ? rs : undefined;
        },
        budget(30_000),
      );
      for (const name of [RESTORE, APPLY]) {
        const r = rules1.get(name);
        assert.ok(r !== undefined, `${name} loaded`);
        assert.equal(r.health, 'ok', `${name}: ${r.lastError ?? ''}`);
        assert.equal(r.state, 'inactive', `${name} while the agent applies fine`);
        assert.equal(r.duration, 5, `${name}: the sped-up for: is what Prometheus loaded`);
      }
      assert.ok((rules1.get(RESTORE)?.query ?? '').includes(`[${WINDOW_S}s]`), 'Prometheus evaluates the rewritten window');
      assert.ok(!(await p.alerts()).some((x) => x.labels['alertname'] === RESTORE), 'not in /api/v1/alerts');

      // ================= phase 2: nft fails
      say('phase 2: nft transactions fail (flag file created, policy changed)');
      await writeFile(failFlag, '');
      const failuresBefore = a.lines.filter((l) => l['event'] === 'apply' && l['result'] === 'failed').length;
      assert.equal(failuresBefore, 0);
      // Change the policy so the agent has a new ruleset to apply; the agent
      // retries failed applies with backoff; change it again while nothing failed.
      let lastChange = 0;
      await pollUntil(
        'restore errors seen by Prometheus',
        async () => {
          agentAlive();
          if (Date.now() - lastChange > 5_000 && !a.lines.some((l) => l['event'] === 'apply' && l['result'] === 'failed')) {
            policyPort += 1;
            k8s.apply('networkpolicies', manifests(policyPort).policy);
            lastChange = Date.now();
            say(`policy port changed to ${policyPort}`);
          }
          return p.scalar(`nftnp_nft_restore_errors_total{${SEL}} > 0`);
        },
        budget(45_000),
      );
      const failedLine = a.lines.find((l) => l['event'] === 'apply' && l['result'] === 'failed');
      assert.match(
        String(failedLine?.['error']),
        /Could not process rule: Operation not permitted \(injected/,
        'the agent reports nft stderr',
      );
      const seen: string[] = [];
      const firing = await pollUntil(
        `${RESTORE} firing`,
        async () => {
          const r = (await states()).get(RESTORE);
          const s = r?.state ?? '?';
          if (seen.at(-1) !== s) seen.push(s);
          return s === 'firing' ? r : undefined;
        },
        budget(60_000),
      );
      // Pending before firing: seen by polling, and in any case in Prometheus' own ALERTS series.
      const pendingRecorded = await p.scalar(`max_over_time(ALERTS{alertname="${RESTORE}",alertstate="pending",${SEL}}[3m])`);
      say(`${RESTORE} states seen while failing: ${seen.join(' -> ')}; ALERTS pending recorded: ${String(pendingRecorded)}`);
      assert.equal(pendingRecorded, 1, `${RESTORE} went through pending (ALERTS series)`);
      const alert = firing.alerts?.find((x) => x.state === 'firing');
      assert.ok(alert !== undefined, JSON.stringify(firing));
      assert.equal(alert.labels['severity'], 'warning');
      assert.equal(alert.labels['node'], NODE);
      assert.equal(alert.labels['job'], JOB);
      assert.equal(alert.annotations['summary'], `nftables rejected the agent's ruleset on ${NODE}`);
      assert.ok(Number(alert.value) > 0, `alert value ${alert.value}`);
      const listed = await p.alerts();
      assert.ok(
        listed.some((x) => x.labels['alertname'] === RESTORE && x.state === 'firing'),
        '/api/v1/alerts lists it firing',
      );
      assert.equal(await p.scalar(`ALERTS{alertname="${RESTORE}",alertstate="firing",${SEL}}`), 1, 'ALERTS firing series');
      // The dataplane alert too (no successful apply for > WINDOW_S in the sped-up rule).
      await waitState(APPLY, ['firing'], 'firing', 45_000);
      assert.equal(await p.scalar(`nftnp_in_sync{${SEL}}`), 0, 'out of sync while failing');
      assert.ok(((await p.scalar(`nftnp_dataplane_failures_total{${SEL}}`)) ?? 0) >= 1);
      assert.match((await listTableIn(netns)) ?? '', /tcp \. 5432/, 'the previous ruleset stays in force');
      const lastSuccess2 = await p.scalar(`nftnp_last_successful_apply_timestamp_seconds{${SEL}}`);
      assert.equal(lastSuccess2, lastSuccess1, 'no successful apply while nft fails');

      // ================= phase 3: nft works again
      say("phase 3: nft works again (flag file removed); waiting for the agent's retry");
      await rm(failFlag, { force: true });
      await pollUntil('nftnp_in_sync == 1 again', () => p.scalar(`nftnp_in_sync{${SEL}} == 1`), budget(60_000));
      const lastSuccess3 = await p.scalar(`nftnp_last_successful_apply_timestamp_seconds{${SEL}}`);
      assert.ok(
        lastSuccess3 !== undefined && lastSuccess1 !== undefined && lastSuccess3 > lastSuccess1,
        `last successful apply advanced (${lastSuccess1} -> ${lastSuccess3})`,
      );
      assert.ok(
        a.lines.some((l) => l['event'] === 'apply' && l['result'] === 'applied' && l['recovered'] === true),
        'the agent logged its recovery',
      );
      assert.match((await listTableIn(netns)) ?? '', new RegExp(`tcp \\. ${policyPort}\\b`), 'the new ruleset is in force');
      say(`agent recovered: in sync, last successful apply ${lastSuccess1} -> ${lastSuccess3}`);
      await waitState(APPLY, ['inactive'], 'resolved after a successful apply', 30_000);
      // Watch both until the error alert has resolved and Prometheus has
      // evaluated past one whole window after the recovery: the apply alert
      // must not come back (it would if its window outlasted its threshold).
      const applyStates: string[] = [];
      const resolved = await pollUntil(
        `${RESTORE} resolved and a window past the recovery evaluated`,
        async () => {
          const rs = await states();
          const ap = rs.get(APPLY);
          if (applyStates.at(-1) !== ap?.state) applyStates.push(ap?.state ?? '?');
          const re = rs.get(RESTORE);
          const evaluatedAt = Date.parse(ap?.lastEvaluation ?? '') / 1000;
          return re?.state === 'inactive' && evaluatedAt > (lastSuccess3 ?? 0) + WINDOW_S + 2 ? re : undefined;
        },
        budget(60_000),
      );
      assert.deepEqual(applyStates, ['inactive'], `${APPLY} stays resolved after the recovery`);
      assert.equal(resolved.health, 'ok');
      assert.equal((resolved.alerts ?? []).length, 0);
      assert.equal(
        await p.scalar(`increase(nftnp_nft_restore_errors_total{${SEL}}[${WINDOW_S}s])`),
        0,
        'no errors left in the window',
      );
      assert.ok(!(await p.alerts()).some((x) => x.labels['alertname'] === RESTORE), 'gone from /api/v1/alerts');
      assert.equal(await p.scalar(`ALERTS{alertname="${RESTORE}",${SEL}}`), undefined, 'no ALERTS series any more');
      assert.ok(a.alive(), 'the agent kept running throughout');
      say('done: inactive -> pending -> firing -> resolved');

      // ================= all along: quiet watches probed, never restarted; their alert inactive
      const watchRule = (await states()).get(WATCH);
      assert.ok(watchRule !== undefined, `${WATCH} loaded`);
      assert.equal(watchRule.health, 'ok', watchRule.lastError ?? '');
      assert.equal(watchRule.duration, 5, `${WATCH}: the sped-up for: is what Prometheus loaded`);
      assert.ok((watchRule.query ?? '').includes(`[${WINDOW_S}s]`), `${WATCH}: the rewritten window`);
      assert.deepEqual(watchStates, ['inactive'], `${WATCH} was inactive at every look, over the whole run`);
      // Not vacuous: its input exists (a series per watched resource, at 0) ...
      const errors = await p.query(`nftnp_watch_restarts_total{${SEL},reason="error"}`);
      assert.deepEqual(
        errors.map((x) => x.metric['resource']).sort(),
        // Tenancy (on by default) adds its watches: Services, Workspaces, NamespaceNetworkPolicies.
        [
          'adminnetworkpolicies',
          'baselineadminnetworkpolicies',
          'clusternetworkpolicies',
          'namespacenetworkpolicies',
          'namespaces',
          'networkpolicies',
          'nodes',
          'pods',
          'services',
          'workspaces',
        ],
        'restart counters exported from the start',
      );
      assert.ok(
        errors.every((x) => x.value === 0),
        JSON.stringify(errors),
      );
      assert.equal(await p.scalar(`sum(nftnp_watch_restarts_total{${SEL},reason!~"closed|gone"})`), 0, 'no restart that counts');
      // ... while the quiet watches were probed many times (the old watchdog restarted them).
      const probeWatches = k8s.requests.filter((r) => r.watch && r.query.timeoutSeconds !== undefined).length;
      const quietLines = a.lines.filter((l) => l['msg'] === 'silent watch stream is quiet').length;
      assert.ok(probeWatches >= 3 * 5, `probe watches of the quiet streams: ${probeWatches}`);
      assert.ok(quietLines >= 3 * 5, `quiet verdicts logged: ${quietLines}`);
      assert.ok(!a.lines.some((l) => l['msg'] === 'watch stream missed events; restarting'), 'no stream judged dead');
      say(`watches: ${probeWatches} probe watches and ${quietLines} quiet verdicts, no restart; ${WATCH} inactive throughout`);
    } catch (e) {
      // What humans need from a CI log when this fails.
      console.log(
        `[prometheus-e2e] FAILED at +${elapsed()}; agent log tail:\n${agent?.tail(30) ?? '(no agent)'}\n[prometheus-e2e] prometheus log tail:\n${prom?.logTail(30) ?? '(no prometheus)'}`,
      );
      throw e;
    } finally {
      const errors: unknown[] = [];
      const step = async (fn: () => Promise<unknown>): Promise<void> => {
        try {
          await fn();
        } catch (e) {
          errors.push(e);
        }
      };
      clearInterval(churn);
      await step(async () => prom?.stop());
      await step(async () => agent?.stop());
      await step(async () => api?.close());
      await step(() => deleteNetns([netns]));
      await step(() => rm(dir, { recursive: true, force: true }));
      if (errors.length > 0) console.log(`[prometheus-e2e] cleanup errors: ${errors.map(String).join('; ')}`);
    }
  },
);
