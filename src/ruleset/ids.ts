// Names of chains, sets and maps, and comment text. Kubernetes names never
// appear raw in identifiers: an identifier is a short hash of the object's
// identity (for sets: of their definition), so it is stable across runs,
// bounded in length and always valid nft syntax. Names are only for humans,
// in sanitized comments.
import { hash } from 'node:crypto';
import type { Direction, Family } from '../model/types.ts';

export const DEFAULT_TABLE = 'nft-netpol';

/** First 12 hex digits of sha256: 48 bits, collision-free in practice (checked by the compiler anyway). */
export function shortHash(identity: string): string {
  // One-shot: a third of createHash().update().digest()'s cost (thousands per compile with tiered policies).
  return hash('sha256', identity, 'hex').slice(0, 12);
}

function dirSuffix(d: Direction): 'IN' | 'EG' {
  return d === 'ingress' ? 'IN' : 'EG';
}

export function podChainName(podId: string, d: Direction): string {
  return `KUBE-POD-FW-${podId}-${dirSuffix(d)}`;
}

export function policyChainName(policyId: string, d: Direction): string {
  return `KUBE-NWPLCY-${policyId}-${dirSuffix(d)}`;
}

export function podId(namespace: string, name: string): string {
  return shortHash(`pod\0${namespace}/${name}`);
}

/** Id of a policy by its key (unique among every kind's policies; a NetworkPolicy's is `ns/name`). */
export function policyKeyId(key: string): string {
  return shortHash(`policy\0${key}`);
}

/** Id of a NetworkPolicy. */
export function policyId(namespace: string, name: string): string {
  return policyKeyId(`${namespace}/${name}`);
}

/**
 * Identity of a set by its definition (what decides its content, e.g. the
 * canonical peer expression), not by the rule using it: rules with the same
 * definition share one set, and the name survives changes of its elements,
 * so pod churn is an element update (see nft/update.ts).
 */
export function setId(definition: string): string {
  return shortHash(`set\0${definition}`);
}

/** Addresses of a peer definition (pods by selector, ipBlocks) in one family. */
export function peerSetName(sid: string, f: Family): string {
  return `peer${f}-${sid}`;
}

/** protocol . port intervals of a list of numeric ports. */
export function portSetName(sid: string): string {
  return `port-${sid}`;
}

/** destination address . protocol . port of named ports on a definition's pods. */
export function namedPortSetName(sid: string, f: Family): string {
  return `named${f}-${sid}`;
}

/** What one peer identity (a class of remote addresses that the same rules name) may reach. */
export function peersChainName(cid: string, d: Direction): string {
  return `KUBE-PEERS-${cid}-${dirSuffix(d)}`;
}

/** The decision maps' chain of an Admin tier identity whose Pass continues in the NetworkPolicy tier (compile/pass-fold.ts). */
export function tierDecisionsChainName(peersChain: string): string {
  return `${peersChain}-TIER`;
}

/** local address . protocol . single port allowed to / from a peer identity (hash). */
export function allowSetName(cid: string, f: Family): string {
  return `allow${f}-${cid}`;
}

/** local address . protocol . port range (`endPort`, protocol-only) allowed to / from a peer identity (interval). */
export function allowRangeSetName(cid: string, f: Family): string {
  return `allowrange${f}-${cid}`;
}

/** local addresses a peer identity may reach on every port and protocol. */
export function allowAllSetName(cid: string, f: Family): string {
  return `allowall${f}-${cid}`;
}

/** Remote pod addresses (`ranges`: address ranges) -> jump to their peer identity's chain. */
export function peerMapName(d: Direction, f: Family, ranges: boolean): string {
  return `${d}-${ranges ? 'ranges' : 'peers'}-v${f}`;
}

/**
 * The plain set of the identity of rank `i` split out of a pod peer map
 * (compile/peer-split.ts): `ingress-peers-v4-big`, then `-big2`...; named
 * after the map, never after what it holds.
 */
export function splitSetName(d: Direction, f: Family, i: number): string {
  return `${peerMapName(d, f, false)}-big${i === 0 ? '' : String(i + 1)}`;
}

/**
 * Addresses of a pod peer map's identities that the agent holds out of the
 * map for a while (nft/recent-peers.ts): the set of them all (the gate) and
 * the chain that sends each to its identity; named after the map.
 */
export function recentGateName(d: Direction, f: Family): string {
  return `${peerMapName(d, f, false)}-recent`;
}

/** The chain that sends a held-out address to its identity's chain. */
export function recentChainName(d: Direction, f: Family): string {
  return `${d}-recent-v${f}`;
}

/** The plain set of one identity's held-out addresses, named after its chain (`KUBE-PEERS-<cid>-IN`). */
export function recentSetName(d: Direction, f: Family, identityChain: string): string {
  return `${peerMapName(d, f, false)}-r-${identityChain}`;
}

/** A direction's peer map lookups (one chain, jumped to by each pod chain of the direction). */
export function peerLookupChainName(d: Direction): string {
  return `${d}-peers`;
}

/** The node's pod CIDRs: an address in them that no map knows is an unknown local endpoint. */
export function localPodCidrSetName(f: Family): string {
  return `local-pod-cidrs-v${f}`;
}

/** Verdict map dispatching a direction's traffic to the per-pod chains. */
export function dispatchMapName(d: Direction, f: Family): string {
  return `${d}-v${f}`;
}

export const MAX_COMMENT = 120;

const CLEAN = /^[A-Za-z0-9 ._/:=,+@()[\]-]*$/;

/**
 * nft comments are double-quoted strings with no escape mechanism at all, so
 * anything outside a conservative charset becomes `_`. Kubernetes names fit
 * the charset; hostile text (quotes, backslashes, braces, newlines) cannot
 * break out of the string or the script.
 */
export function sanitizeComment(text: string): string {
  // Most text is clean already (and render sanitizes every comment again): no copy then.
  const safe = CLEAN.test(text) ? text : text.replace(/[^A-Za-z0-9 ._/:=,+@()[\]-]/g, '_');
  return safe.length <= MAX_COMMENT ? safe : `${safe.slice(0, MAX_COMMENT - 3)}...`;
}

/**
 * The `log prefix` of a pod chain's deny path: `nnp:<pod id>:IN|EG`. It names
 * the chain by its hash, never by the raw Kubernetes name; the agent maps it
 * back to the pod through the live state (agent/denied/log-line.ts).
 */
export function denyLogPrefix(podId: string, d: Direction): string {
  return `nnp:${podId}:${dirSuffix(d)}`;
}

export function parseDenyLogPrefix(prefix: string): { readonly podId: string; readonly direction: Direction } | undefined {
  const m = /^nnp:([0-9a-f]{12}):(IN|EG)$/.exec(prefix.trim());
  if (m === null) return undefined;
  return { podId: m[1] as string, direction: m[2] === 'IN' ? 'ingress' : 'egress' };
}

/**
 * The `log prefix` of a tiered Deny rule's chain (a ClusterNetworkPolicy
 * rule): `cnp:<policy id>:IN|EG:<index>`, at most 25 characters (far below
 * the kernel's log prefix limit). Hashes only, like denyLogPrefix; the agent maps it back to the
 * policy, tier, priority and rule through the live state.
 */
export function tierDenyLogPrefix(policyId: string, d: Direction, index: number): string {
  return `cnp:${policyId}:${dirSuffix(d)}:${index}`;
}

export function parseTierDenyLogPrefix(
  prefix: string,
): { readonly policyId: string; readonly direction: Direction; readonly index: number } | undefined {
  const m = /^cnp:([0-9a-f]{12}):(IN|EG):([0-9]{1,6})$/.exec(prefix.trim());
  if (m === null) return undefined;
  return { policyId: m[1] as string, direction: m[2] === 'IN' ? 'ingress' : 'egress', index: Number(m[3]) };
}

/** The policy id, direction and rule index of a tiered rule's chain name (tierRuleChainName's inverse). */
export function parseTierRuleChainName(
  name: string,
): { readonly policyId: string; readonly direction: Direction; readonly index: number } | undefined {
  const m = /^KUBE-NWPLCY-([0-9a-f]{12})-(IN|EG)-([0-9]{1,6})$/.exec(name);
  if (m === null) return undefined;
  return { policyId: m[1] as string, direction: m[2] === 'IN' ? 'ingress' : 'egress', index: Number(m[3]) };
}

/** The shared in-kernel rate limit of every deny-path log rule (one per node). */
export const DENY_LOG_LIMIT = 'denied-log';

/** The pod id and direction of a pod chain's name (podChainName's inverse). */
export function parsePodChainName(name: string): { readonly podId: string; readonly direction: Direction } | undefined {
  const m = /^KUBE-POD-FW-([0-9a-f]{12})-(IN|EG)$/.exec(name);
  if (m === null) return undefined;
  return { podId: m[1] as string, direction: m[2] === 'IN' ? 'ingress' : 'egress' };
}

/** One rule of a policy: its counter and action (tiered rules: tiers.ts; allow-list rules: identities.ts). */
export function policyRuleChainName(policyId: string, d: Direction, index: number): string {
  return `KUBE-NWPLCY-${policyId}-${dirSuffix(d)}-${index}`;
}

/** One rule of a tiered policy (a ClusterNetworkPolicy rule): its counter and action. */
export function tierRuleChainName(policyId: string, d: Direction, index: number): string {
  return `KUBE-NWPLCY-${policyId}-${dirSuffix(d)}-${index}`;
}

/** A tier's lookups of one direction: remote address to the chain of its tier identity. */
export function tierLookupChainName(tier: 'admin' | 'baseline', d: Direction): string {
  return `${tier}-${d}`;
}

/** Remote pod and node addresses (`ranges`: address ranges) -> goto their tier identity's chain. */
export function tierPeerMapName(tier: 'admin' | 'baseline', d: Direction, f: Family, ranges: boolean): string {
  return `${tier}-${d}-${ranges ? 'ranges' : 'peers'}-v${f}`;
}

/** A tier's lookup chain for one class of local pods (the per-class layout of compile/tiers.ts). */
export function tierClassLookupChainName(tier: 'admin' | 'baseline', d: Direction, cid: string): string {
  return `${tier}-${d}-${cid}`;
}

const DECISION_TAGS = { port: 'tdec', range: 'tdecr', proto: 'tdecp', addr: 'tdeca', peers: 'tpeer', ranges: 'tpeerr' } as const;

/**
 * A tier identity's decisions: `port` (hash), `range` (interval), `proto`,
 * `addr`; a class's remote addresses to their identities: `peers` (hash),
 * `ranges` (interval).
 */
export function decisionMapName(cid: string, f: Family, key: keyof typeof DECISION_TAGS): string {
  return `${DECISION_TAGS[key]}${f}-${cid}`;
}

export type StagedChange = 'would-deny' | 'would-allow';

/**
 * The `log prefix` of a staged verdict change (compile/staged.ts):
 * `stg:<pod id>:IN|EG:WD|WA`; the agent maps it back to the pod and asks the
 * evaluator which staged policy and rule change the verdict.
 */
export function stagedLogPrefix(podId: string, d: Direction, change: StagedChange): string {
  return `stg:${podId}:${dirSuffix(d)}:${change === 'would-deny' ? 'WD' : 'WA'}`;
}

export function parseStagedLogPrefix(
  prefix: string,
): { readonly podId: string; readonly direction: Direction; readonly change: StagedChange } | undefined {
  const m = /^stg:([0-9a-f]{12}):(IN|EG):(WD|WA)$/.exec(prefix.trim());
  if (m === null) return undefined;
  return {
    podId: m[1] as string,
    direction: m[2] === 'IN' ? 'ingress' : 'egress',
    change: m[3] === 'WD' ? 'would-deny' : 'would-allow',
  };
}

/** The chain counting one local pod's staged verdict changes of one kind and direction. */
export function stagedTallyChainName(change: StagedChange, podId: string, d: Direction): string {
  return `STG-${change === 'would-deny' ? 'WD' : 'WA'}-${podId}-${dirSuffix(d)}`;
}

export function parseStagedTallyChainName(
  name: string,
): { readonly podId: string; readonly direction: Direction; readonly change: StagedChange } | undefined {
  const m = /^STG-(WD|WA)-([0-9a-f]{12})-(IN|EG)$/.exec(name);
  if (m === null) return undefined;
  return {
    podId: m[2] as string,
    direction: m[3] === 'IN' ? 'ingress' : 'egress',
    change: m[1] === 'WD' ? 'would-deny' : 'would-allow',
  };
}

/** Chains of the shadow path run for packets the enforced ruleset denies: `STG-DEN-` + the shadow ruleset's chain name. */
export const STAGED_DENIED_PREFIX = 'STG-DEN-';
