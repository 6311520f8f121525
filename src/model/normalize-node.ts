// Node (v1) -> normalized Node: its InternalIP/ExternalIP addresses and its pod CIDRs.
import { ANY, listOf, object, objectFields, openObject } from './field-tree.ts';
import { formatCIDR, formatIP, parseCIDR, parseIP } from './ip.ts';
import type { CIDR, IP } from './ip.ts';
import { field, isRecord, listField, normalizeLabels, readHead, show, subObject } from './normalize-common.ts';
import type { Normalized, Raw, Report } from './normalize-common.ts';
import type { Node } from './types.ts';

/** v1 Node fields checked strictly (field-tree.ts): top level, metadata and status.addresses; the rest is open. */
export const NODE_FIELDS = objectFields({
  spec: ANY,
  status: openObject({ addresses: listOf(object({ type: ANY, address: ANY })) }),
});

const ADDRESS_TYPES = new Set(['InternalIP', 'ExternalIP']);

function compare(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * spec.podCIDRs, or spec.podCIDR when the list is absent or empty (older
 * clusters set only that); canonical, deduplicated, v4 first. Bad entries are
 * reported and left out.
 */
function podCIDRs(spec: Raw, report: Report): string[] {
  const list = listField(spec, ['podCIDRs'], 'spec.podCIDRs', report) ?? [];
  const raw: [string, unknown][] = list.map((v, i) => [`spec.podCIDRs[${i}]`, v]);
  if (raw.length === 0) {
    const single = field(spec, 'podCIDR');
    if (single !== undefined && single !== '') raw.push(['spec.podCIDR', single]);
  }
  const cidrs = new Map<string, CIDR>();
  for (const [path, v] of raw) {
    if (typeof v !== 'string') {
      report(path, `must be a string, not ${show(v)}`);
      continue;
    }
    const c = parseCIDR(v);
    if (!c.ok) report(path, c.error);
    else cidrs.set(formatCIDR(c.cidr), c.cidr);
  }
  return [...cidrs.values()]
    .sort((a, b) => a.family - b.family || compare(a.base, b.base) || a.prefix - b.prefix)
    .map(formatCIDR);
}

export function normalizeNode(obj: unknown): Normalized<Node> {
  const h = readHead(obj, 'Node', false, 'v1');
  if (!h.ok) return h;
  const { name, sink } = h.head;
  const { report, errors } = sink;
  const status = subObject(h.head.obj, 'status', 'status', report);
  const list = listField(status, ['addresses'], 'status.addresses', report) ?? [];
  const ips = new Map<string, IP>();
  const internal = new Map<string, IP>();
  list.forEach((a, i) => {
    if (!isRecord(a) || !ADDRESS_TYPES.has(String(field(a, 'type')))) return;
    const raw = field(a, 'address');
    const ip = typeof raw === 'string' ? parseIP(raw) : undefined;
    if (ip === undefined) report(`status.addresses[${i}].address`, `must be a valid IP address, not ${show(raw)}`);
    else {
      ips.set(formatIP(ip), ip);
      if (field(a, 'type') === 'InternalIP') internal.set(formatIP(ip), ip);
    }
  });
  const sorted = (m: Map<string, IP>): string[] =>
    [...m.values()].sort((a, b) => a.family - b.family || compare(a.value, b.value)).map(formatIP);
  const addresses = sorted(ips);
  const internalIPs = sorted(internal);
  const cidrs = podCIDRs(subObject(h.head.obj, 'spec', 'spec', report), report);
  // Only present when known: absent and empty mean the same (no protection for unknown local addresses).
  const base: Node = cidrs.length === 0 ? { name, addresses } : { name, addresses, podCIDRs: cidrs };
  // Labels only matter to ClusterNetworkPolicy `nodes` peers: kept only when there are any.
  const { labels } = normalizeLabels(field(h.head.metadata, 'labels'), 'metadata.labels', report);
  const node: Node = Object.keys(labels).length === 0 ? base : { ...base, labels };
  return { ok: true, value: internalIPs.length === 0 ? node : { ...node, internalIPs }, errors };
}
