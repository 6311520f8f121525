// /debug/rules: every policy rule of this node with the new connections it
// decided since the agent started and when it last did, most hits first;
// `?unused=1` only the rules never hit. Read-only.
import type { Reply } from '../../observability/http-server.ts';
import type { RuleTotal } from './counters.ts';
import type { RulesSnapshot } from './rule-counters.ts';

export interface RulesView {
  refresh(): Promise<void>;
  snapshot(): RulesSnapshot;
}

export interface RulesQuery {
  readonly unused: boolean;
  readonly namespace: string | undefined;
  readonly limit: number | undefined;
}

const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

/** `?unused=1&namespace=NS&limit=N`. */
export function parseRulesQuery(q: URLSearchParams): RulesQuery | string {
  const u = q.get('unused');
  if (u !== null && !['', '1', 'true', '0', 'false'].includes(u)) return `unused must be true or false, not "${u}"`;
  const namespace = q.get('namespace') ?? undefined;
  if (namespace !== undefined && !NAME.test(namespace)) return `namespace must be a namespace name, not "${namespace}"`;
  const limitText = q.get('limit') ?? undefined;
  const limit = limitText === undefined ? undefined : Number(limitText);
  if (limit !== undefined && !(Number.isInteger(limit) && limit > 0)) return 'limit must be a positive whole number';
  return { unused: u === '' || u === '1' || u === 'true', namespace, limit };
}

/** One rule as JSON (also the `rules` command's rows). */
export function ruleJson(r: RuleTotal): Record<string, unknown> {
  const c = r.counts;
  return {
    kind: c.kind,
    namespace: c.namespace,
    policy: c.policy,
    rule: c.rule,
    direction: c.direction,
    action: c.action,
    hits: r.hits,
    lastHit: r.lastHitMs === undefined ? null : new Date(r.lastHitMs).toISOString(),
    chain: r.chain,
    exported: r.exported,
  };
}

function iso(ms: number | undefined): string | null {
  return ms === undefined ? null : new Date(ms).toISOString();
}

export async function rulesReply(v: RulesView | undefined, url: URL): Promise<Reply> {
  const q = parseRulesQuery(url.searchParams);
  if (typeof q === 'string') return { status: 400, body: { error: q }, text: `error: ${q}` };
  if (v === undefined) return { status: 503, body: { error: 'rule counters are not kept here' }, text: 'error: not kept' };
  await v.refresh();
  const s = v.snapshot();
  let rules = s.rules.filter(
    (r) => (!q.unused || r.hits === 0) && (q.namespace === undefined || r.counts.namespace === q.namespace),
  );
  const total = rules.length;
  if (q.limit !== undefined) rules = rules.slice(0, q.limit);
  const body = {
    readAt: iso(s.readAtMs),
    since: iso(s.startedAtMs),
    maxSeries: s.maxSeries,
    dropped: s.dropped,
    total,
    rules: rules.map(ruleJson),
  };
  const lines = [
    `${total} ${q.unused ? 'rules never hit' : 'rules'} since ${iso(s.startedAtMs) ?? '?'} (read ${iso(s.readAtMs) ?? 'not yet'})${s.dropped > 0 ? `; ${s.dropped} over --rule-metrics-max ${s.maxSeries}: not exported` : ''}`,
    ...rules.map((r) => {
      const c = r.counts;
      const where = c.namespace === '' ? c.policy : `${c.namespace}/${c.policy}`;
      return `${String(r.hits).padStart(10)}  ${iso(r.lastHitMs) ?? 'never'.padEnd(24)}  ${c.kind} ${where} ${c.direction} rule ${c.rule} (${c.action})`;
    }),
  ];
  return { status: 200, body, text: lines.join('\n') };
}
