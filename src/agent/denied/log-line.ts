// Turns logged deny-path packets into what a person reads: the pods on both
// sides (from the live state), the reason from the reference evaluator
// (policy/verdict.ts), one log line per new denial and aggregated repeats.
// A packet a ClusterNetworkPolicy Deny rule logged (prefix `cnp:...`) names
// that rule: its policy, tier, priority and name from the live state.
// Bounded everywhere: the ring has a fixed capacity, log lines have a
// per-second budget (the rest is counted), and a repeat costs a map lookup,
// not an evaluation.
import type { Logger } from 'pino';
import {
  parseDenyLogPrefix,
  parseStagedLogPrefix,
  parseTierDenyLogPrefix,
  podId,
  policyKeyId,
  tierRuleChainName,
  type StagedChange,
} from '../../ruleset/ids.ts';
import { isActivePod, objectKey, type ClusterState, type Direction, type Pod, type Protocol } from '../../model/types.ts';
import type { TieredPolicy } from '../../kinds/kind.ts';
import { tieredPolicies } from '../../kinds/registry.ts';
import { tieredRuleName } from '../../kinds/cluster-network-policy.ts';
import { verdict, type Endpoint } from '../../policy/verdict.ts';
import { stagedVerdict } from '../../policy/staged.ts';
import { protoName, type LoggedPacket } from '../nflog/pcap.ts';
import {
  attemptKey,
  DeniedRing,
  entryJson,
  type DeniedAttempt,
  type DeniedEntry,
  type DeniedPeer,
  type DeniedRule,
  type StagedCause,
} from './ring.ts';

export interface DeniedLogOptions {
  readonly nodeName: string;
  readonly log: Logger;
  /** The live cluster state (undefined before the first sync). */
  readonly snapshot: () => ClusterState | undefined;
  readonly capacity?: number;
  /** New-denial log lines per second; beyond that they are only counted (and kept in the ring). */
  readonly linesPerSecond?: number;
  readonly onSuppressed?: (n: number) => void;
  readonly onUnknownPrefix?: () => void;
  readonly now?: () => number;
}

interface Index {
  /** pod id (nft/ids.ts) -> local pod */
  readonly local: Map<string, Pod>;
  /** address -> the pod owning it (an active one first) */
  readonly owners: Map<string, Pod>;
  /** policy id (ruleset/ids.ts policyKeyId) -> tiered policy (a ClusterNetworkPolicy), built on first use */
  tiered: Map<string, TieredPolicy> | undefined;
}

/** Where a logged packet was denied: a pod chain's deny path or a tiered Deny rule's chain. */
type Tag =
  | { readonly kind: 'pod'; readonly podId: string; readonly direction: Direction }
  | { readonly kind: 'staged'; readonly podId: string; readonly direction: Direction; readonly change: StagedChange }
  | { readonly kind: 'rule'; readonly policyId: string; readonly direction: Direction; readonly index: number };

function parseTag(prefix: string): Tag | undefined {
  const pod = parseDenyLogPrefix(prefix);
  if (pod !== undefined) return { kind: 'pod', ...pod };
  const staged = parseStagedLogPrefix(prefix);
  if (staged !== undefined) return { kind: 'staged', ...staged };
  const rule = parseTierDenyLogPrefix(prefix);
  return rule === undefined ? undefined : { kind: 'rule', ...rule };
}

export class DeniedLog {
  readonly ring: DeniedRing;
  /** Staged verdict changes (`denied --staged`, /debug/denied?staged=1): a ring of their own, so they never evict denials. */
  readonly staged: DeniedRing;
  readonly #o: DeniedLogOptions;
  #index: { state: ClusterState; index: Index } | undefined;
  #second = 0;
  #linesThisSecond = 0;
  suppressed = 0;

  constructor(o: DeniedLogOptions) {
    this.#o = o;
    this.ring = new DeniedRing(o.capacity ?? 1000);
    this.staged = new DeniedRing(o.capacity ?? 1000);
  }

  /** One packet from the NFLOG group. */
  onPacket(p: LoggedPacket): void {
    const tag = parseTag(p.prefix);
    if (tag === undefined) {
      this.#o.onUnknownPrefix?.(); // another program logging to our group
      return;
    }
    const state = this.#o.snapshot();
    const idx = state === undefined ? undefined : this.#indexOf(state);
    const peer = (ip: string): DeniedPeer => {
      const owner = idx?.owners.get(ip);
      return { ip, pod: owner === undefined ? undefined : objectKey(owner) };
    };
    const src = peer(p.src);
    const dst = peer(p.dst);
    let pod: string;
    let rule: DeniedRule | undefined;
    let policy: TieredPolicy | undefined;
    if (tag.kind === 'pod' || tag.kind === 'staged') {
      const localPod = idx?.local.get(tag.podId);
      pod = localPod === undefined ? `(pod chain ${tag.podId}, no longer a local pod)` : objectKey(localPod);
    } else {
      // A rule chain is shared by every local pod its policy selects: the
      // local side of the packet names the pod.
      const local = tag.direction === 'ingress' ? p.dst : p.src;
      const owner = idx?.owners.get(local);
      pod = owner !== undefined && owner.nodeName === this.#o.nodeName ? objectKey(owner) : `(${local}, no local pod)`;
      policy = state === undefined || idx === undefined ? undefined : tieredOf(state, idx).get(tag.policyId);
      const r = policy === undefined ? undefined : (tag.direction === 'ingress' ? policy.ingress : policy.egress)[tag.index];
      rule = {
        policyId: tag.policyId,
        index: tag.index,
        kind: policy?.origin.kind,
        name: policy?.origin.name,
        tier: policy === undefined ? undefined : policy.tier === 'admin' ? 'Admin' : 'Baseline',
        priority: policy?.priority,
        ruleName: r?.origin.name,
      };
    }
    const attempt: DeniedAttempt = {
      atMs: p.atMs,
      direction: tag.direction,
      pod,
      family: p.family,
      src,
      dst,
      protocol: protoName(p.proto),
      port: p.dport,
      rule,
    };
    if (tag.kind === 'staged') {
      this.#onStaged(tag, attempt, state, idx);
      return;
    }
    const key = attemptKey(attempt);
    const seen = this.ring.get(key);
    if (seen !== undefined) {
      this.ring.repeat(seen, p.atMs);
      return;
    }
    const reason =
      state === undefined
        ? 'the cluster state is not synced yet'
        : tag.kind === 'rule'
          ? ruleReason(attempt, tag, policy)
          : reasonFor(state, attempt, idx);
    const e = this.ring.add(key, attempt, reason);
    if (this.#budget()) {
      e.logged = e.count;
      this.#o.log.info({ event: 'denied', ...entryJson(e) }, `denied ${e.direction}: ${reason}`);
    }
  }

  /** A staged verdict change: its own ring and log event, the cause named by the evaluator on the live state. */
  #onStaged(
    tag: Extract<Tag, { kind: 'staged' }>,
    base: DeniedAttempt,
    state: ClusterState | undefined,
    idx: Index | undefined,
  ): void {
    const probe: DeniedAttempt = { ...base, staged: { change: tag.change, policies: [], rule: undefined } };
    const key = attemptKey(probe);
    const seen = this.staged.get(key);
    if (seen !== undefined) {
      this.staged.repeat(seen, base.atMs);
      return;
    }
    const found = state === undefined ? undefined : stagedCauseFor(state, base, tag.change, idx);
    const attempt: DeniedAttempt = { ...base, staged: found?.cause ?? probe.staged };
    const reason = found?.reason ?? 'the cluster state is not synced yet';
    const e = this.staged.add(key, attempt, reason);
    if (this.#budget()) {
      e.logged = e.count;
      this.#o.log.info({ event: 'staged', ...entryJson(e) }, `staged: ${tag.change.replace('-', ' ')} ${e.direction}: ${reason}`);
    }
  }

  /**
   * One line per entry with repeats (or suppressed lines) since its last
   * line: count so far, first and last seen. Called periodically.
   */
  flush(): void {
    for (const e of this.ring.unlogged()) {
      if (!this.#budget()) break;
      const repeats = e.count - e.logged;
      e.logged = e.count;
      this.#o.log.info(
        { event: 'denied-repeated', repeats, ...entryJson(e) },
        `denied ${e.direction} again (${repeats} more, ${e.count} since ${new Date(e.firstSeenMs).toISOString()}): ${e.reason}`,
      );
    }
    for (const e of this.staged.unlogged()) {
      if (!this.#budget()) break;
      const repeats = e.count - e.logged;
      e.logged = e.count;
      this.#o.log.info(
        { event: 'staged-repeated', repeats, ...entryJson(e) },
        `staged: ${e.staged?.change.replace('-', ' ') ?? 'change'} ${e.direction} again (${repeats} more, ${e.count} since ${new Date(e.firstSeenMs).toISOString()}): ${e.reason}`,
      );
    }
  }

  #budget(): boolean {
    const sec = Math.floor((this.#o.now?.() ?? Date.now()) / 1000);
    if (sec !== this.#second) {
      this.#second = sec;
      this.#linesThisSecond = 0;
    }
    if (this.#linesThisSecond >= (this.#o.linesPerSecond ?? 50)) {
      this.suppressed++;
      this.#o.onSuppressed?.(1);
      return false;
    }
    this.#linesThisSecond++;
    return true;
  }

  #indexOf(state: ClusterState): Index {
    if (this.#index?.state === state) return this.#index.index;
    const local = new Map<string, Pod>();
    const owners = new Map<string, Pod>();
    for (const p of state.pods) {
      if (p.nodeName === this.#o.nodeName && isActivePod(p)) local.set(podId(p.namespace, p.name), p);
      for (const ip of p.ips) {
        const prev = owners.get(ip);
        if (prev === undefined || (!isActivePod(prev) && isActivePod(p))) owners.set(ip, p);
      }
    }
    const index: Index = { local, owners, tiered: undefined };
    this.#index = { state, index };
    return index;
  }

  /** Matching entries as JSON (for /debug/denied). */
  entries(filter: Parameters<DeniedRing['query']>[0]): DeniedEntry[] {
    return this.ring.query(filter);
  }
}

function tieredOf(state: ClusterState, idx: Index): Map<string, TieredPolicy> {
  if (idx.tiered === undefined) {
    idx.tiered = new Map();
    for (const t of tieredPolicies(state)) idx.tiered.set(policyKeyId(t.key), t);
  }
  return idx.tiered;
}

/**
 * `ingress at shop/db-0: denied by ClusterNetworkPolicy deny-monitoring (Admin
 * tier, priority 10) ingress rule 0 "no-monitoring"`: the rule whose chain
 * logged the packet (the kernel's decision), named through the live state.
 */
export function ruleReason(
  a: DeniedAttempt,
  tag: { readonly policyId: string; readonly direction: Direction; readonly index: number },
  policy: TieredPolicy | undefined,
): string {
  const at = `${a.direction} at ${a.pod}`;
  const chain = tierRuleChainName(tag.policyId, tag.direction, tag.index);
  if (policy === undefined) return `${at}: denied by a ClusterNetworkPolicy rule no longer in the cluster state (chain ${chain})`;
  const r = (tag.direction === 'ingress' ? policy.ingress : policy.egress)[tag.index];
  const place = (name: string): string =>
    tieredRuleName(policy.origin.label, policy.tier, policy.priority, tag.direction, tag.index, name);
  if (r === undefined)
    return `${at}: denied by ${place('')}, a rule ${policy.origin.label} no longer has (chain ${chain}, the ruleset in force at the time)`;
  if (r.action !== 'Deny')
    return `${at}: denied by ${place(r.origin.name)}, which is now ${r.origin.action} (the ruleset in force at the time)`;
  // A rule read as Deny all (fail closed) says why.
  const note = r.notEnforced === undefined ? '' : ` (${r.notEnforced})`;
  return `${at}: denied by ${place(r.origin.name)}${note}`;
}

const PORT_PROTOCOLS: Readonly<Record<string, Protocol>> = { TCP: 'TCP', UDP: 'UDP', SCTP: 'SCTP' };

/**
 * `ingress at payments/api-0: payments/api-0 is isolated for ingress by ...;
 * no rule allows ...`: the evaluator's reason for the direction whose pod
 * chain dropped the packet, on the live state.
 */
export function reasonFor(state: ClusterState, a: DeniedAttempt, idx: Index | undefined): string {
  const at = `${a.direction} at ${a.pod}`;
  const endpoint = (p: DeniedPeer): Endpoint => {
    const pod = idx?.owners.get(p.ip);
    return pod === undefined ? { kind: 'ip', ip: p.ip } : { kind: 'pod', pod };
  };
  const proto = PORT_PROTOCOLS[a.protocol];
  // NetworkPolicy ports name TCP, UDP and SCTP only: any other protocol
  // passes an isolated pod only through a rule without ports. Port 0 matches
  // no numeric port, so the evaluator answers exactly that question.
  const v = verdict(state, endpoint(a.src), endpoint(a.dst), proto ?? 'TCP', proto === undefined ? 0 : (a.port ?? 0), {
    family: a.family,
  });
  const d = v[a.direction as Direction];
  if (proto === undefined) {
    // A ClusterNetworkPolicy rule without protocols matches any protocol: it names itself.
    if (!d.allowed && d.decidedBy !== undefined) return `${at}: ${a.protocol} denied by ${d.decidedBy.description}`;
    if (!d.allowed) {
      const policies = d.policies.length === 0 ? '' : ` by ${d.policies.join(', ')}`;
      return `${at}: isolated for ${a.direction}${policies}; no rule without ports admits ${a.direction === 'ingress' ? peerText(a.src) : peerText(a.dst)}, the only kind that allows ${a.protocol}`;
    }
    return `${at}: dropped by the ruleset in force at the time; the live state now allows ${a.protocol} (${d.reason})`;
  }
  if (!d.allowed) return `${at}: ${d.reason}`;
  return `${at}: dropped by the ruleset in force at the time; the live state now allows it (${d.reason})`;
}

/**
 * `ingress at shop/db-0: would deny by shop/db-only-api: shop/db-0 is isolated
 * ...`: which staged policy and rule change the verdict of this connection in
 * this direction, on the live state (policy/staged.ts).
 */
export function stagedCauseFor(
  state: ClusterState,
  a: DeniedAttempt,
  change: StagedChange,
  idx: Index | undefined,
): { cause: StagedCause; reason: string } {
  const at = `${a.direction} at ${a.pod}`;
  const endpoint = (p: DeniedPeer): Endpoint => {
    const pod = idx?.owners.get(p.ip);
    return pod === undefined ? { kind: 'ip', ip: p.ip } : { kind: 'pod', pod };
  };
  const proto = PORT_PROTOCOLS[a.protocol];
  const v = stagedVerdict(state, endpoint(a.src), endpoint(a.dst), proto ?? 'TCP', proto === undefined ? 0 : (a.port ?? 0), {
    family: a.family,
  });
  const c = v.changes.find((x) => x.direction === a.direction);
  const what = change.replace('-', ' ');
  if (c === undefined || c.change !== change)
    return {
      cause: { change, policies: [], rule: undefined },
      reason: `${at}: ${what} by the staged policies in force at the time; the live state's staged policies no longer change it (${v.staged[a.direction].reason})`,
    };
  const by = c.rule ?? (c.policies.length === 0 ? 'staged policies' : c.policies.join(', '));
  return { cause: { change, policies: c.policies, rule: c.rule }, reason: `${at}: ${what} by ${by}: ${c.reason}` };
}

function peerText(p: DeniedPeer): string {
  return p.pod ?? p.ip;
}
