// The most recent denials, aggregated: identical denials (same direction,
// pod chain or ClusterNetworkPolicy rule, source, destination, protocol and
// port; any source port) are one entry with a count and first/last seen. Bounded: at most `capacity`
// entries, the least recently seen evicted first. Pure data and formatting;
// the agent feeds it (agent/denied/log-line.ts) and /debug/denied reads it.
import type { Direction, Family } from '../../model/types.ts';

/** One side of a denied connection: a pod when the live state knows the address. */
export interface DeniedPeer {
  readonly ip: string;
  /** `namespace/name`, or undefined for an address that is no known pod. */
  readonly pod: string | undefined;
}

/** The tiered rule (a ClusterNetworkPolicy Deny rule) whose chain logged a denial, as the live state names it. */
export interface DeniedRule {
  /** The policy id of the log prefix (ruleset/ids.ts policyKeyId). */
  readonly policyId: string;
  readonly index: number;
  /** The policy's kind and name; undefined when the live state has no such policy any more. */
  readonly kind: string | undefined;
  readonly name: string | undefined;
  readonly tier: 'Admin' | 'Baseline' | undefined;
  readonly priority: number | undefined;
  /** The rule's `name` ('' when not given). */
  readonly ruleName: string | undefined;
}

export interface DeniedAttempt {
  readonly atMs: number;
  readonly direction: Direction;
  /** The local pod whose chain denied it (`namespace/name`). */
  readonly pod: string;
  readonly family: Family;
  readonly src: DeniedPeer;
  readonly dst: DeniedPeer;
  /** TCP, UDP, SCTP, ICMP, ICMPv6 or the protocol number. */
  readonly protocol: string;
  readonly port: number | undefined;
  /** Set when a ClusterNetworkPolicy Deny rule denied it (its chain logged), not a pod chain's deny path. */
  readonly rule?: DeniedRule | undefined;
  /** Set for a staged verdict change (compile/staged.ts): the connection was not denied, or was denied and would be allowed. */
  readonly staged?: StagedCause | undefined;
}

/** What staged policies would change about a connection, and which of them (policy/staged.ts on the live state). */
export interface StagedCause {
  readonly change: 'would-deny' | 'would-allow';
  /** The staged policies causing it, as the evaluator names them. */
  readonly policies: readonly string[];
  /** The deciding rule, when it is one rule of a staged policy. */
  readonly rule: string | undefined;
}

export interface DeniedEntry extends DeniedAttempt {
  readonly key: string;
  readonly reason: string;
  count: number;
  readonly firstSeenMs: number;
  lastSeenMs: number;
  /** Count already reported in a log line. */
  logged: number;
}

export function attemptKey(a: Omit<DeniedAttempt, 'atMs'>): string {
  const by = [
    ...(a.rule === undefined ? [] : [`cnp:${a.rule.policyId}:${a.rule.index}`]),
    ...(a.staged === undefined ? [] : [a.staged.change]),
  ];
  return [a.direction, a.pod, a.src.ip, a.dst.ip, a.protocol, a.port ?? '-', ...by].join(' ');
}

export interface DeniedFilter {
  /** `namespace/name`: denials where this pod is the chain's pod, the source or the destination. */
  readonly pod?: string | undefined;
  readonly namespace?: string | undefined;
  readonly direction?: Direction | undefined;
  /** Only entries last seen at or after this time (Unix ms). */
  readonly sinceMs?: number | undefined;
  readonly limit?: number | undefined;
}

export class DeniedRing {
  readonly capacity: number;
  // Insertion order = order of last sight: an update moves the entry to the end.
  readonly #entries = new Map<string, DeniedEntry>();
  evicted = 0;

  constructor(capacity = 1000) {
    this.capacity = Math.max(1, capacity);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The entry for this attempt's key, if there is one (to count a repeat without evaluating its reason). */
  get(key: string): DeniedEntry | undefined {
    return this.#entries.get(key);
  }

  /** Counts a repeat of an existing entry. */
  repeat(e: DeniedEntry, atMs: number): void {
    e.count++;
    if (atMs > e.lastSeenMs) e.lastSeenMs = atMs;
    this.#entries.delete(e.key);
    this.#entries.set(e.key, e);
  }

  /** A new entry (count 1); the least recently seen one goes when the ring is full. */
  add(key: string, a: DeniedAttempt, reason: string): DeniedEntry {
    const e: DeniedEntry = { ...a, key, reason, count: 1, firstSeenMs: a.atMs, lastSeenMs: a.atMs, logged: 0 };
    this.#entries.delete(key);
    this.#entries.set(key, e);
    while (this.#entries.size > this.capacity) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
      this.evicted++;
    }
    return e;
  }

  /** Entries with repeats not yet logged. */
  unlogged(): DeniedEntry[] {
    return [...this.#entries.values()].filter((e) => e.count > e.logged);
  }

  /** Matching entries, most recently seen first. */
  query(f: DeniedFilter = {}): DeniedEntry[] {
    const out: DeniedEntry[] = [];
    const all = [...this.#entries.values()];
    for (let i = all.length - 1; i >= 0; i--) {
      const e = all[i] as DeniedEntry;
      if (f.direction !== undefined && e.direction !== f.direction) continue;
      if (f.sinceMs !== undefined && e.lastSeenMs < f.sinceMs) continue;
      if (f.pod !== undefined && e.pod !== f.pod && e.src.pod !== f.pod && e.dst.pod !== f.pod) continue;
      if (f.namespace !== undefined && ![e.pod, e.src.pod, e.dst.pod].some((p) => p?.startsWith(`${f.namespace}/`))) continue;
      out.push(e);
      if (f.limit !== undefined && out.length >= f.limit) break;
    }
    return out;
  }
}

export function peerLabel(p: DeniedPeer): string {
  return p.pod === undefined ? p.ip : `${p.pod} (${p.ip})`;
}

/** The JSON shape of an entry (the log line's fields and /debug/denied's elements). */
export function entryJson(e: DeniedEntry): Record<string, unknown> {
  return {
    direction: e.direction,
    pod: e.pod,
    src: e.src.pod ?? e.src.ip,
    srcIP: e.src.ip,
    dst: e.dst.pod ?? e.dst.ip,
    dstIP: e.dst.ip,
    protocol: e.protocol,
    port: e.port ?? null,
    family: e.family,
    count: e.count,
    firstSeen: new Date(e.firstSeenMs).toISOString(),
    lastSeen: new Date(e.lastSeenMs).toISOString(),
    reason: e.reason,
    rule: e.rule === undefined ? null : ruleJson(e.rule),
    ...(e.staged === undefined
      ? {}
      : { change: e.staged.change, stagedPolicies: [...e.staged.policies], stagedRule: e.staged.rule ?? null }),
  };
}

function ruleJson(r: DeniedRule): Record<string, unknown> {
  return {
    kind: r.kind ?? null,
    name: r.name ?? null,
    tier: r.tier ?? null,
    priority: r.priority ?? null,
    index: r.index,
    ruleName: r.ruleName ?? null,
    policyId: r.policyId,
  };
}

/** One line: `TIME DIRECTION SRC -> DST PROTO/PORT xCOUNT (first ...): REASON`. */
export function entryText(e: DeniedEntry): string {
  const port = e.port === undefined ? e.protocol : `${e.port}/${e.protocol}`;
  const times = e.count > 1 ? ` x${e.count} (first ${new Date(e.firstSeenMs).toISOString()})` : '';
  const change = e.staged === undefined ? '' : `${e.staged.change.replace('-', ' ')} `;
  return `${new Date(e.lastSeenMs).toISOString()} ${change}${e.direction.padEnd(7)} ${peerLabel(e.src)} -> ${peerLabel(e.dst)} ${port}${times}\n    ${e.reason}`;
}
