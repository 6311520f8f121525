// /debug/denied: the most recent denials (aggregated), filtered by pod,
// namespace, direction and time, as JSON or text. Read-only.
import type { Reply } from '../../observability/http-server.ts';
import { parseDuration } from '../config.ts';
import type { DeniedStatus } from './denied-traffic.ts';
import { entryJson, entryText, type DeniedEntry, type DeniedFilter } from './ring.ts';

export interface DeniedView {
  /** `staged`: the staged policies' verdict changes instead of denials. */
  query(f: DeniedFilter, staged?: boolean): DeniedEntry[];
  status(): DeniedStatus;
}

const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

/** `?pod=NS/NAME&namespace=NS&direction=ingress|egress&since=5m|RFC3339&limit=N` (and `staged=1`, read by deniedReply). */
export function parseDeniedQuery(q: URLSearchParams, nowMs: number): DeniedFilter | string {
  const pod = q.get('pod') ?? undefined;
  if (pod !== undefined && !/^[^/\s]+\/[^/\s]+$/.test(pod)) return `pod must be NAMESPACE/NAME, not "${pod}"`;
  const namespace = q.get('namespace') ?? undefined;
  if (namespace !== undefined && !NAME.test(namespace)) return `namespace must be a namespace name, not "${namespace}"`;
  const direction = q.get('direction') ?? undefined;
  if (direction !== undefined && direction !== 'ingress' && direction !== 'egress')
    return `direction must be ingress or egress, not "${direction}"`;
  const sinceText = q.get('since') ?? undefined;
  let sinceMs: number | undefined;
  if (sinceText !== undefined) {
    const d = parseDuration(sinceText);
    const t = Date.parse(sinceText);
    if (d !== undefined) sinceMs = nowMs - d;
    else if (!Number.isNaN(t)) sinceMs = t;
    else return `since must be a duration (30s, 5m, 1h) or a time (RFC 3339), not "${sinceText}"`;
  }
  const limitText = q.get('limit') ?? undefined;
  const limit = limitText === undefined ? undefined : Number(limitText);
  if (limit !== undefined && !(Number.isInteger(limit) && limit > 0)) return `limit must be a positive whole number`;
  return { pod, namespace, direction, sinceMs, limit };
}

export function deniedReply(v: DeniedView | undefined, url: URL, nowMs = Date.now()): Reply {
  const f = parseDeniedQuery(url.searchParams, nowMs);
  if (typeof f === 'string') return { status: 400, body: { error: f }, text: `error: ${f}` };
  const stagedText = url.searchParams.get('staged');
  if (stagedText !== null && !['1', 'true', '0', 'false'].includes(stagedText))
    return { status: 400, body: { error: `staged must be 1 or 0, not "${stagedText}"` }, text: 'error: staged must be 1 or 0' };
  const staged = stagedText === '1' || stagedText === 'true';
  if (v === undefined) return { status: 503, body: { error: 'denied traffic is not tracked here' }, text: 'error: not tracked' };
  const s = v.status();
  const entries = v.query(f, staged);
  const body = { ...s, staged, entries: entries.map((e) => ({ key: e.key, ...entryJson(e) })) };
  const lines: string[] = [];
  if (!s.logDenied) {
    lines.push('denied-traffic logging is off: run the agent with --log-denied (LOG_DENIED=true) to see denied connections');
  } else {
    const r = s.reader;
    lines.push(
      `NFLOG group ${s.group ?? '?'}: reader ${r?.running === true ? `running (pid ${r.pid ?? '?'})` : 'not running'}, ${r?.restarts ?? 0} restarts, ${r?.received ?? 0} packets; ${s.entries}/${s.capacity} entries${s.suppressedLines > 0 ? `, ${s.suppressedLines} log lines suppressed` : ''}`,
    );
    if (staged)
      lines.push(
        entries.length === 0
          ? 'no connection whose verdict a staged policy would change matches'
          : `${entries.length} connections whose verdict staged policies would change (most recent first):`,
      );
    else lines.push(entries.length === 0 ? 'no denied connections match' : `${entries.length} denied (most recent first):`);
    for (const e of entries) lines.push(entryText(e));
  }
  return { status: 200, body, text: lines.join('\n') };
}
