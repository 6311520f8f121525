// Node (v1) -> normalized Node: its InternalIP/ExternalIP addresses.
import { formatIP, parseIP } from './ip.ts';
import type { IP } from './ip.ts';
import { field, isRecord, listField, readHead, show, subObject } from './normalize-common.ts';
import type { Normalized } from './normalize-common.ts';
import type { Node } from './types.ts';

const ADDRESS_TYPES = new Set(['InternalIP', 'ExternalIP']);

export function normalizeNode(obj: unknown): Normalized<Node> {
  const h = readHead(obj, 'Node', false, 'v1');
  if (!h.ok) return h;
  const { name, sink } = h.head;
  const { report, errors } = sink;
  const status = subObject(h.head.obj, 'status', 'status', report);
  const list = listField(status, ['addresses'], 'status.addresses', report) ?? [];
  const ips = new Map<string, IP>();
  list.forEach((a, i) => {
    if (!isRecord(a) || !ADDRESS_TYPES.has(String(field(a, 'type')))) return;
    const raw = field(a, 'address');
    const ip = typeof raw === 'string' ? parseIP(raw) : undefined;
    if (ip === undefined) report(`status.addresses[${i}].address`, `must be a valid IP address, not ${show(raw)}`);
    else ips.set(formatIP(ip), ip);
  });
  const addresses = [...ips.values()]
    .sort((a, b) => a.family - b.family || (a.value < b.value ? -1 : a.value > b.value ? 1 : 0))
    .map(formatIP);
  return { ok: true, value: { name, addresses }, errors };
}
