// The agent's HTTP endpoints. Two listeners:
// - metrics (default 0.0.0.0:9742): /metrics, /healthz, /readyz, for
//   Prometheus and the kubelet;
// - debug (default 127.0.0.1:9743, loopback on purpose: it shows pod names,
//   labels and the ruleset): /healthz, /readyz, /debug/state,
//   /debug/ruleset, /debug/explain, /debug/denied, /debug/rules.
// Handlers only read the agent's state; nothing here changes the dataplane.
import type { Registry } from 'prom-client';
import type { ClusterState } from '../model/types.ts';
import type { WatchStatus } from '../kube/source.ts';
import type { KernelCheck, ReconcilerStatus } from './reconciler.ts';
import { NO_HELD_PEERS, type HeldPeers } from '../nft/recent-peers.ts';
import { localPodViews } from './local-view.ts';
import { answerExplain, explainJson, explainText, parseExplainParams } from '../policy/explain.ts';
import { routes, type Handler, type Reply } from '../observability/http-server.ts';
import { deniedReply, type DeniedView } from './denied/endpoint.ts';
import { rulesReply, type RulesView } from './rules/endpoint.ts';
import { contributedPolicies } from '../kinds/registry.ts';
import { NETWORK_POLICY } from '../kinds/network-policy.ts';

/** What the endpoints read; the agent provides it. */
export interface AgentView {
  readonly nodeName: string;
  readonly table: string;
  /** --allow-pod-to-node: /debug/explain judges as the ruleset does (default false). */
  readonly allowPodToNode?: boolean;
  health(): { readonly ok: boolean; readonly detail: string };
  ready(): boolean;
  status(): ReconcilerStatus;
  /** The live snapshot; undefined before the source has synced. */
  snapshot(): ClusterState | undefined;
  watches(): readonly WatchStatus[];
  lastAppliedText(): string | undefined;
  /** The script of the last failed transaction, while failing. */
  lastFailedText(): string | undefined;
  kernelMatches(): Promise<KernelCheck>;
  /** Remote addresses the kernel holds out of the pod peer maps until the next fold (nft/recent-peers.ts). */
  heldPeers?(): HeldPeers;
  /** Denied traffic (agent/denied/denied-traffic.ts); absent in tests that do not need it. */
  readonly denied?: DeniedView & { refreshCounters(): Promise<void> };
  /** Per-rule counters (agent/rules/rule-counters.ts); absent in tests that do not need them. */
  readonly rules?: RulesView;
}

function healthz(v: AgentView): Reply {
  const h = v.health();
  return h.ok
    ? { status: 200, body: { status: 'ok' }, text: 'ok' }
    : { status: 503, body: { status: 'unhealthy', detail: h.detail }, text: `unhealthy: ${h.detail}` };
}

function readyz(v: AgentView): Reply {
  const s = v.status();
  if (v.ready()) return { status: 200, body: { status: 'ready', phase: s.phase }, text: 'ready' };
  const detail =
    s.phase === 'waiting-for-sync'
      ? 'waiting for the initial sync of the cluster state'
      : `no ruleset applied yet${s.lastApply?.error === undefined ? '' : `: ${s.lastApply.error}`}`;
  return { status: 503, body: { status: 'not ready', phase: s.phase, detail }, text: `not ready: ${detail}` };
}

function iso(ms: number | undefined): string | undefined {
  return ms === undefined ? undefined : new Date(ms).toISOString();
}

function stateReply(v: AgentView): Reply {
  const s = v.status();
  const snap = v.snapshot();
  const pods = snap === undefined ? [] : localPodViews(snap, v.nodeName);
  const watches = v.watches();
  // Tenancy policies of the namespaces this node hosts pods of: every implicit allowance by its cause.
  const localNs = new Set(pods.map((p) => p.pod.slice(0, p.pod.indexOf('/'))));
  const derived = (snap === undefined ? [] : contributedPolicies(snap)).filter(
    (p) => p.origin.kind !== NETWORK_POLICY && localNs.has(p.namespace),
  );
  const apply = (a: ReconcilerStatus['lastApply']) =>
    a === undefined
      ? null
      : {
          result: a.result,
          mode: a.mode ?? null,
          at: iso(a.atUnixMs),
          durationMs: Math.round(a.durationMs * 10) / 10,
          reasons: a.reasons,
          stats: a.stats ?? null,
          error: a.error ?? null,
          exitCode: a.exitCode ?? null,
        };
  const body = {
    node: v.nodeName,
    table: v.table,
    phase: s.phase,
    ready: s.ready,
    synced: s.synced,
    applying: s.applying,
    pending: s.pending,
    consecutiveFailures: s.consecutiveFailures,
    nextRetryInMs: s.nextRetryInMs ?? null,
    lastApply: apply(s.lastApply),
    lastSuccess: apply(s.lastSuccess),
    lastDriftCheck:
      s.lastDriftCheck === undefined
        ? null
        : { at: iso(s.lastDriftCheck.atUnixMs), result: s.lastDriftCheck.result, detail: s.lastDriftCheck.detail ?? null },
    driftRepairs: s.driftRepairs,
    localPods: pods,
    invalidPolicies: s.invalidPolicies.map((p) => ({
      // Cluster-scoped objects (ClusterNetworkPolicy) by kind and name.
      policy: p.namespace === '' && p.object !== undefined ? `${p.object.kind}/${p.name}` : `${p.namespace}/${p.name}`,
      errors: p.errors,
    })),
    tenancy: derived.map((p) => ({
      kind: p.origin.kind,
      policy: p.origin.label,
      namespace: p.namespace,
      rules: (['ingress', 'egress'] as const).flatMap((d) =>
        p[d].map((r) => ({ direction: d, rule: r.origin.index, cause: r.origin.description, invalid: r.invalid })),
      ),
    })),
    watches: watches.map((w) => ({ ...w, lastEventAt: iso(w.lastEventAt) ?? null, lastError: w.lastError ?? null })),
  };

  const lines: string[] = [];
  lines.push(
    `node ${v.nodeName}  table inet ${v.table}  phase ${s.phase}  ready ${s.ready ? 'yes' : 'no'}${s.pending ? '  (changes pending)' : ''}`,
  );
  const la = s.lastApply;
  if (la === undefined) lines.push('last apply: none yet');
  else {
    lines.push(
      `last apply: ${la.result}${la.mode === undefined ? '' : ` (${la.mode})`} at ${iso(la.atUnixMs)} in ${la.durationMs.toFixed(1)} ms (${la.reasons.join(', ') || '-'})`,
    );
    if (la.error !== undefined) lines.push(`  error: ${la.error}`);
    if (la.stats !== undefined) {
      const t = la.stats;
      lines.push(
        `  chains ${t.chains}  rules ${t.rules}  sets ${t.sets}  maps ${t.maps}  elements ${t.elements}  local pods ${t.localPods}  local policies ${t.policies}`,
      );
    }
  }
  if (s.consecutiveFailures > 0)
    lines.push(`failing: ${s.consecutiveFailures} in a row, next retry in ${s.nextRetryInMs ?? 0} ms`);
  if (s.lastDriftCheck !== undefined)
    lines.push(
      `last drift check: ${s.lastDriftCheck.result} at ${iso(s.lastDriftCheck.atUnixMs)}${s.lastDriftCheck.detail === undefined ? '' : ` (${s.lastDriftCheck.detail})`}; repairs ${s.driftRepairs}`,
    );
  lines.push('', `local pods (${pods.length}):`);
  for (const p of pods) {
    lines.push(`  ${p.pod}  ${p.ips.join(' ')}`);
    lines.push(`    ingress: ${p.ingress.length === 0 ? 'not isolated' : p.ingress.join(', ')}`);
    lines.push(`    egress:  ${p.egress.length === 0 ? 'not isolated' : p.egress.join(', ')}`);
    if (p.clusterPolicies.length > 0)
      lines.push(`    cluster: ${p.clusterPolicies.map((c) => `${c.policy} (${c.place})`).join(', ')}`);
  }
  lines.push('', `invalid policies (${s.invalidPolicies.length}):`);
  for (const p of s.invalidPolicies) for (const e of p.errors) lines.push(`  ${e}`);
  lines.push('', `tenancy policies of local namespaces (${derived.length}):`);
  for (const p of derived) {
    lines.push(`  ${p.origin.label} (${p.origin.kind}, ns ${p.namespace})`);
    for (const d of ['ingress', 'egress'] as const)
      for (const r of p[d]) lines.push(`    ${d}: ${r.origin.description}${r.invalid ? ' (allows nothing)' : ''}`);
  }
  lines.push('', 'watches:');
  for (const w of watches) {
    // By reason when there are any: "3 restarts (closed 2, gone 1)".
    const by = Object.entries(w.restartsByReason ?? {}).filter(([, n]) => n > 0);
    const reasons = w.restarts === 0 || by.length === 0 ? '' : ` (${by.map(([r, n]) => `${r} ${n}`).join(', ')})`;
    lines.push(
      `  ${w.resource}: ${w.synced ? 'synced' : 'not synced'}, ${w.objects} objects, ${w.restarts} restarts${reasons}${w.lastError === undefined ? '' : `, last error: ${w.lastError}`}`,
    );
  }
  return { status: 200, body, text: lines.join('\n') };
}

async function rulesetReply(v: AgentView): Promise<Reply> {
  const text = v.lastAppliedText();
  const failed = v.lastFailedText();
  const err = v.status().lastApply?.error;
  const failedPart =
    failed === undefined ? '' : `\n# ---- the last transaction nft rejected (${err ?? 'error'}); not in force ----\n${failed}`;
  if (text === undefined) {
    return {
      status: 503,
      body: {
        error: 'no ruleset applied yet',
        failedRuleset: failed ?? null,
        failedError: failed === undefined ? null : (err ?? null),
      },
      text: `no ruleset applied yet${failedPart}`,
    };
  }
  const k = await v.kernelMatches();
  const matches = k.kind === 'match' ? true : k.kind === 'drifted' ? false : null;
  const detail = k.kind === 'match' ? null : k.detail;
  // Held addresses are in the ruleset's pod peer maps but, in the kernel, in
  // the held-address sets until the next fold: say so, or `nft get element`
  // on the map contradicts this page.
  const held = [...(v.heldPeers?.() ?? NO_HELD_PEERS)].flatMap(([map, addrs]) =>
    [...addrs].map(([addr, chain]) => ({ map, address: addr, chain })),
  );
  const head = [
    `# kernel matches the last apply: ${matches === null ? `unknown (${detail})` : matches ? 'yes' : `no (${detail})`}`,
    ...(held.length === 0
      ? []
      : [
          `# held out of the pod peer maps until the next fold (in <map>-recent and <map>-r-<chain>): ${held.length}`,
          ...held.map((h) => `#   ${h.map} ${h.address} -> ${h.chain}`),
        ]),
  ].join('\n');
  return {
    status: 200,
    body: {
      table: v.table,
      kernelMatches: matches,
      detail,
      heldPeers: held,
      ruleset: text,
      failedRuleset: failed ?? null,
      failedError: failed === undefined ? null : (err ?? null),
    },
    text: `${head}\n${text}${failedPart}`,
  };
}

function bad(message: string): Reply {
  return { status: 400, body: { error: message }, text: `error: ${message}` };
}

function explainReply(v: AgentView, url: URL): Reply {
  const q = url.searchParams;
  const from = q.get('from');
  const to = q.get('to');
  const port = q.get('port');
  if (from === null || to === null || port === null || from === '' || to === '' || port === '') {
    return bad('from, to and port are required, e.g. /debug/explain?from=shop/web-0&to=10.0.0.7&port=80/TCP');
  }
  const fam = q.get('family');
  const query = parseExplainParams({ from, to, port, family: fam === null || fam === '' ? undefined : fam });
  if (!query.ok) return bad(query.problems.map((p) => `${p.param}: ${p.message}`).join('; '));
  const state = v.snapshot();
  if (state === undefined)
    return {
      status: 503,
      body: { error: 'the cluster state has not synced yet' },
      text: 'error: the cluster state has not synced yet',
    };
  const a = answerExplain(state, query.value, { allowPodToNode: v.allowPodToNode === true });
  if (!a.ok) return bad(a.problems.map((p) => `${p.param}: ${p.message}`).join('; '));
  const { verdict: result, from: src, to: dst } = a.value;
  return { status: 200, body: explainJson(result, src, dst), text: explainText(result, src, dst) };
}

export type ErrorLog = (err: unknown, path: string) => void;

export function debugHandler(v: AgentView, onError: ErrorLog): ReturnType<typeof routes> {
  const table: Record<string, Handler> = {
    '/healthz': () => healthz(v),
    '/readyz': () => readyz(v),
    '/debug/state': () => stateReply(v),
    '/debug/ruleset': () => rulesetReply(v),
    '/debug/explain': (url) => explainReply(v, url),
    '/debug/denied': (url) => deniedReply(v.denied, url),
    '/debug/rules': (url) => rulesReply(v.rules, url),
  };
  return routes(table, onError);
}

/**
 * How long a scrape waits for the counters listing: it runs at low priority
 * (dataplane.ts), so on a saturated node it may be slow; the scrape then
 * serves the last read's counters, well within Prometheus' timeout (10 s in
 * daemonset/monitoring), and the listing goes on for the next one.
 */
export const SCRAPE_COUNTERS_WAIT_MS = 4_000;

export function metricsHandler(
  v: AgentView,
  registry: Registry,
  onError: ErrorLog,
  countersWaitMs = SCRAPE_COUNTERS_WAIT_MS,
): ReturnType<typeof routes> {
  const table: Record<string, Handler> = {
    '/metrics': async () => {
      // The deny and per-rule counters are read from the kernel per scrape (one listing shared, see agent.ts).
      await atMost(Promise.all([v.denied?.refreshCounters(), v.rules?.refresh()]), countersWaitMs);
      return { status: 200, body: await registry.metrics(), contentType: registry.contentType };
    },
    '/healthz': () => healthz(v),
    '/readyz': () => readyz(v),
  };
  return routes(table, onError);
}

/** Waits for `p` (whose failures its owner reports) or `ms`, whichever comes first. */
async function atMost(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  try {
    await Promise.race([p.then(() => undefined), late]);
  } finally {
    clearTimeout(timer);
  }
}
