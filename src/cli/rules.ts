// `nft-netpol-agent rules`: every policy rule of this node with the new
// connections it decided since the agent started and when it last did, most
// hits first (the agent's /debug/rules on loopback). `--unused`: the rules
// never hit. Meant for `kubectl exec -n nft-netpol-system ds/nft-netpol-agent -- nft-netpol-agent rules --unused`.
// Exit codes: 0 ok, 1 the agent cannot be reached or answered an error, 2 usage.
import { parseArgs } from 'node:util';
import { debugEndpointBase } from './debug-endpoint.ts';
import { formatDocument, parseFormat } from './output.ts';

export const RULES_HELP = `Usage: nft-netpol-agent rules [--unused] [--namespace NS] [--limit N]

List the policy rules of this node (NetworkPolicy, ClusterNetworkPolicy and the
tenancy kinds' rules selecting a pod of this node) with the new connections
each decided since the agent started (HITS) and when it last did (LAST HIT),
most hits first. A connection several rules allow is counted for the first of
them in evaluation order (docs/datapath.md, "Per-rule counters").

  --unused               only rules that never matched since the agent started
  --namespace NS         only rules of policies in this namespace
  --limit N              at most N rules
  -o, --output FORMAT    text (default), json or yaml
  --addr H:P             the agent's debug endpoint (env DEBUG_ADDR; default 127.0.0.1:9743)
  -h, --help             show this help`;

export interface RuleRow {
  readonly kind: string;
  readonly namespace: string;
  readonly policy: string;
  readonly rule: string;
  readonly direction: string;
  readonly action: string;
  readonly hits: number;
  readonly lastHit: string | null;
  readonly chain: string;
  readonly exported: boolean;
}

interface RulesJson {
  readonly readAt: string | null;
  readonly since: string;
  readonly dropped: number;
  readonly maxSeries: number;
  readonly total: number;
  readonly rules: readonly RuleRow[];
  readonly error?: string;
}

export interface RulesIo {
  out(s: string): void;
  err(s: string): void;
}

/** The text table: HITS, LAST HIT, KIND, POLICY, DIRECTION, RULE, ACTION. */
export function rulesTable(rows: readonly RuleRow[]): string {
  const head = ['HITS', 'LAST HIT', 'KIND', 'POLICY', 'DIRECTION', 'RULE', 'ACTION'];
  const cells = rows.map((r) => [
    String(r.hits),
    r.lastHit ?? 'never',
    r.kind,
    r.namespace === '' ? r.policy : `${r.namespace}/${r.policy}`,
    r.direction,
    r.rule,
    r.action,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] ?? '').length)));
  return [head, ...cells]
    .map((c) =>
      c
        .map((x, i) => x.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export async function rulesCommand(argv: string[], io: RulesIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let v;
  try {
    v = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        unused: { type: 'boolean', default: false },
        namespace: { type: 'string' },
        limit: { type: 'string' },
        output: { type: 'string', short: 'o', default: 'text' },
        addr: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values;
  } catch (e) {
    return usage(io, e instanceof Error ? e.message : String(e));
  }
  if (v.help) {
    io.out(RULES_HELP);
    return 0;
  }
  const endpoint = debugEndpointBase(v.addr, env);
  if ('error' in endpoint) return usage(io, endpoint.error);
  const format = parseFormat(v.output);
  if (format === undefined) return usage(io, `--output must be text, json or yaml, not "${v.output}"`);
  if (v.limit !== undefined && !/^[1-9][0-9]*$/.test(v.limit)) return usage(io, `--limit must be a positive whole number`);

  const base = `${endpoint.base}/debug/rules`;
  const q = new URLSearchParams();
  if (v.unused) q.set('unused', '1');
  if (v.namespace !== undefined) q.set('namespace', v.namespace);
  if (v.limit !== undefined) q.set('limit', v.limit);
  q.set('format', 'json');
  let body: RulesJson | string;
  try {
    const res = await fetch(`${base}?${q.toString()}`, { signal: AbortSignal.timeout(10_000) });
    const json = (await res.json()) as RulesJson;
    body = res.ok ? json : (json.error ?? `HTTP ${res.status}`);
  } catch (e) {
    body = `cannot reach the agent's debug endpoint at ${base}: ${e instanceof Error ? e.message : String(e)}`;
  }
  if (typeof body === 'string') {
    io.err(`error: ${body}`);
    if (format !== 'text') io.out(formatDocument(format, { errors: [{ object: base, path: '', message: body }] }));
    return 1;
  }
  if (format !== 'text') {
    io.out(formatDocument(format, body.rules));
    return 0;
  }
  const what = v.unused ? 'rules never hit' : 'rules';
  if (body.rules.length === 0) io.out(`no ${what} (since ${body.since})`);
  else io.out(`${rulesTable(body.rules)}\n${body.total} ${what} since ${body.since}, counters read ${body.readAt ?? 'not yet'}`);
  if (body.dropped > 0)
    io.err(`note: ${body.dropped} rules are over --rule-metrics-max ${body.maxSeries}: listed here, not exported as metrics`);
  return 0;
}

function usage(io: RulesIo, message: string): number {
  io.err(`usage error: ${message}\n(see 'nft-netpol-agent rules --help')`);
  return 2;
}
