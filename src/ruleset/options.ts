// The choices a node's ruleset is compiled with (flags of the agent and the
// CLI), their defaults and their validation. Beneath compile and nft: both read them.
import { DEFAULT_TABLE } from './ids.ts';

export interface RenderOptions {
  /** nft table name (inet family). */
  readonly table: string;
  /** Verdict for traffic no policy allows. */
  readonly denyAction: 'drop' | 'reject';
  /**
   * Only when the node has podCIDRs: an address in them that is not a known
   * active local pod is dropped in the forward chains ('drop', the default:
   * fail closed for pods created a moment ago) or passes unfiltered ('allow',
   * as without podCIDRs).
   */
  readonly unknownLocalEndpoints: 'drop' | 'allow';
  /**
   * --allow-pod-to-node: egress from a local pod to this node itself (any
   * address the node holds) is always allowed, as the Kubernetes docs say.
   * Off by default: an egress-isolated pod cannot reach its kubelet or other
   * host services unless a policy allows it (docs/operations.md, "Pod to its own node").
   */
  readonly allowPodToNode: boolean;
  /** --log-denied: the deny path also logs to an NFLOG group (compile/deny-path.ts); undefined = off. */
  readonly logDenied: DenyLogOptions | undefined;
  /**
   * How the ordered tiers reach their decisions (compile/tiers.ts): a lookup
   * per class of local pods ('per-class', the default), one shared lookup
   * keyed by the local address ('shared'), or chosen per class by element
   * counts ('auto'). Tests and benchmarks exercise each. Not a flag.
   */
  readonly tierLayout?: TierLayout;
  /**
   * The fewest addresses a pod identity needs to leave its pod peer map for a
   * plain set (compile/peer-split.ts; default SPLIT_MIN there, 1024). Tests
   * lower it to exercise the split on small clusters. Not a flag.
   */
  readonly peerSplitMin?: number;
}

export type TierLayout = 'auto' | 'shared' | 'per-class';

/**
 * The layout when RenderOptions.tierLayout is not given: the agent's (it
 * passes none). Per class: at 100k pods with 100 ClusterNetworkPolicies its
 * compile + render costs no more than the shared layout's, with half the text,
 * which `nft -f` loads in about a third of the time (docs/benchmarks.md).
 */
export const DEFAULT_TIER_LAYOUT: TierLayout = 'per-class';

/** A `--tier-layout` value of the benchmarks; undefined = the default. */
export function parseTierLayout(value: string | undefined): TierLayout | undefined {
  if (value === undefined) return undefined;
  if (value === 'auto' || value === 'shared' || value === 'per-class') return value;
  throw new Error(`--tier-layout: auto, shared or per-class, not ${value}`);
}

export interface DenyLogOptions {
  readonly group: number;
  /** One in-kernel limit for the whole node, shared by every pod chain. */
  readonly ratePerSecond: number;
  readonly burst: number;
}

export const DEFAULT_OPTIONS: RenderOptions = {
  table: DEFAULT_TABLE,
  denyAction: 'drop',
  unknownLocalEndpoints: 'allow',
  allowPodToNode: false,
  logDenied: undefined,
};

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,62}$/;

export function resolveOptions(opts?: Partial<RenderOptions>): RenderOptions {
  const o: RenderOptions = {
    table: opts?.table ?? DEFAULT_OPTIONS.table,
    denyAction: opts?.denyAction ?? DEFAULT_OPTIONS.denyAction,
    unknownLocalEndpoints: opts?.unknownLocalEndpoints ?? DEFAULT_OPTIONS.unknownLocalEndpoints,
    allowPodToNode: opts?.allowPodToNode ?? DEFAULT_OPTIONS.allowPodToNode,
    logDenied: opts?.logDenied ?? DEFAULT_OPTIONS.logDenied,
    ...(opts?.tierLayout === undefined ? {} : { tierLayout: opts.tierLayout }),
    ...(opts?.peerSplitMin === undefined ? {} : { peerSplitMin: opts.peerSplitMin }),
  };
  if (!TABLE_NAME.test(o.table)) throw new Error(`invalid nft table name "${o.table}": use letters, digits, '_' and '-'`);
  if (o.denyAction !== 'drop' && o.denyAction !== 'reject')
    throw new Error(`invalid denyAction "${String(o.denyAction)}": drop or reject`);
  if (o.unknownLocalEndpoints !== 'drop' && o.unknownLocalEndpoints !== 'allow') {
    throw new Error(`invalid unknownLocalEndpoints "${String(o.unknownLocalEndpoints)}": drop or allow`);
  }
  if (typeof o.allowPodToNode !== 'boolean')
    throw new Error(`invalid allowPodToNode "${String(o.allowPodToNode)}": true or false`);
  if (o.peerSplitMin !== undefined && !(Number.isInteger(o.peerSplitMin) && o.peerSplitMin >= 1))
    throw new Error(`invalid peerSplitMin "${String(o.peerSplitMin)}": a whole number, at least 1`);
  const l = o.logDenied;
  if (l !== undefined && !(Number.isInteger(l.group) && l.group >= 0 && l.group <= 65535 && l.ratePerSecond >= 1 && l.burst >= 0))
    throw new Error('invalid logDenied: group 0-65535, rate at least 1/second, burst at least 0');
  return o;
}
