// The deny path's packet counters as Prometheus counters. The kernel counts
// in each pod chain's deny rule (and in the base chains' drop of unknown
// local endpoints, and in ClusterNetworkPolicy Deny rules' chains); the agent reads them with a terse listing of its table
// (`nft -t -j list table`: chains and rules, no set elements, so the cost
// follows the local pods and policies, not the cluster size) and adds the
// increase since the last read. nft counters restart at 0 when their rule is
// replaced (a full apply, a changed chain): a rule handle not seen before or
// a value that went down counts from 0.
import { BASE_CHAINS } from '../../compile/dispatch.ts';
import {
  parsePodChainName,
  parseStagedTallyChainName,
  parseTierRuleChainName,
  STAGED_DENIED_PREFIX,
  type StagedChange,
} from '../../ruleset/ids.ts';
import type { Direction } from '../../model/types.ts';

/** A denied-packet counter in the kernel: which rule, which pod chain (or base chain) and direction. */
export interface KernelDenyCounter {
  /** chain name + rule handle: stable while the rule exists. */
  readonly rule: string;
  readonly direction: Direction;
  /** The pod chain's pod id, undefined for the base chains' unknown-endpoint drops and tiered Deny rules. */
  readonly podId: string | undefined;
  readonly packets: number;
}

interface NftJsonRule {
  readonly chain?: string;
  readonly handle?: number;
  readonly expr?: readonly Record<string, unknown>[];
}

const BASE_DIRECTION: Readonly<Record<string, Direction>> = {
  [BASE_CHAINS.forwardEgress]: 'egress',
  [BASE_CHAINS.forwardIngress]: 'ingress',
  [BASE_CHAINS.inputEgress]: 'egress',
};

/** The counters of deny rules in an `nft -j` listing of our table. */
export function denyCountersFromJson(json: string): KernelDenyCounter[] {
  const out: KernelDenyCounter[] = [];
  const doc = JSON.parse(json) as { nftables?: readonly { rule?: NftJsonRule }[] };
  for (const item of doc.nftables ?? []) {
    const r = item.rule;
    if (r?.chain === undefined || r.handle === undefined) continue;
    // With staged policies, a packet the enforced ruleset denies is denied in the
    // shadow path's copy of the chains (STG-DEN-<chain>) or in a would-allow
    // tally (compile/staged.ts): counted as that pod's or rule's deny.
    const chain = r.chain.startsWith(STAGED_DENIED_PREFIX) ? r.chain.slice(STAGED_DENIED_PREFIX.length) : r.chain;
    const tally = parseStagedTallyChainName(chain);
    const pod = parsePodChainName(chain) ?? (tally?.change === 'would-allow' ? tally : undefined);
    // A ClusterNetworkPolicy Deny rule's chain: shared by the pods its policy selects, so node totals only.
    const baseDir = BASE_DIRECTION[chain] ?? parseTierRuleChainName(chain)?.direction;
    if (pod === undefined && baseDir === undefined) continue;
    let packets: number | undefined;
    let denies = false;
    for (const e of r.expr ?? []) {
      const c = e['counter'] as { packets?: number } | undefined;
      if (c !== undefined && typeof c.packets === 'number') packets = c.packets;
      if ('drop' in e || 'reject' in e) denies = true;
    }
    // Only counters on rules that deny: a base chain's other rules count nothing of ours.
    if (packets === undefined || !denies) continue;
    out.push({
      rule: `${r.chain}#${r.handle}`,
      direction: pod?.direction ?? (baseDir as Direction),
      podId: pod?.podId,
      packets,
    });
  }
  return out;
}

/** What changed since the last read: per pod id and direction, and per direction for the node. */
export interface DenyDelta {
  readonly node: Readonly<Record<Direction, number>>;
  /** `podId direction` -> packets, for every pod chain listed (0 included: the series exists from the start). */
  readonly pods: ReadonlyMap<string, number>;
}

export class DenyCounterState {
  #last = new Map<string, number>();

  /** The increase since the previous call; the first call reports every counter in full. */
  advance(now: readonly KernelDenyCounter[]): DenyDelta {
    const node: Record<Direction, number> = { ingress: 0, egress: 0 };
    const pods = new Map<string, number>();
    const next = new Map<string, number>();
    for (const c of now) {
      const before = this.#last.get(c.rule);
      const delta = before === undefined || c.packets < before ? c.packets : c.packets - before;
      next.set(c.rule, c.packets);
      node[c.direction] += delta;
      if (c.podId !== undefined) {
        const k = `${c.podId} ${c.direction}`;
        pods.set(k, (pods.get(k) ?? 0) + delta);
      }
    }
    this.#last = next;
    return { node, pods };
  }
}

/** A staged verdict change tally in the kernel (compile/staged.ts): one local pod, direction and change. */
export interface KernelStagedCounter {
  readonly rule: string;
  readonly podId: string;
  readonly direction: Direction;
  readonly change: StagedChange;
  readonly packets: number;
}

/** The counters of the staged tallies in an `nft -j` listing of our table (new connections whose verdict would change). */
export function stagedCountersFromJson(json: string): KernelStagedCounter[] {
  const out: KernelStagedCounter[] = [];
  const doc = JSON.parse(json) as { nftables?: readonly { rule?: NftJsonRule }[] };
  for (const item of doc.nftables ?? []) {
    const r = item.rule;
    if (r?.chain === undefined || r.handle === undefined) continue;
    const tally = parseStagedTallyChainName(r.chain);
    if (tally === undefined) continue;
    for (const e of r.expr ?? []) {
      const c = e['counter'] as { packets?: number } | undefined;
      if (c !== undefined && typeof c.packets === 'number')
        out.push({ rule: `${r.chain}#${r.handle}`, ...tally, packets: c.packets });
    }
  }
  return out;
}

/** The increase per `podId direction change` since the last read (a replaced rule or a value gone down counts from 0). */
export class StagedCounterState {
  #last = new Map<string, number>();

  advance(now: readonly KernelStagedCounter[]): ReadonlyMap<string, number> {
    const out = new Map<string, number>();
    const next = new Map<string, number>();
    for (const c of now) {
      const before = this.#last.get(c.rule);
      const delta = before === undefined || c.packets < before ? c.packets : c.packets - before;
      next.set(c.rule, c.packets);
      const k = `${c.podId} ${c.direction} ${c.change}`;
      out.set(k, (out.get(k) ?? 0) + delta);
    }
    this.#last = next;
    return out;
  }
}
