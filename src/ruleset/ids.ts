// Names of chains, sets and maps, and comment text. Kubernetes names never
// appear raw in identifiers: an identifier is a short hash of the object's
// identity (for sets: of their definition), so it is stable across runs,
// bounded in length and always valid nft syntax. Names are only for humans,
// in sanitized comments.
import { createHash } from 'node:crypto';
import type { Direction, Family } from '../model/types.ts';

export const DEFAULT_TABLE = 'nft-netpol';

/** First 12 hex digits of sha256: 48 bits, collision-free in practice (checked by the compiler anyway). */
export function shortHash(identity: string): string {
  return createHash('sha256').update(identity).digest('hex').slice(0, 12);
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

/** The node's pod CIDRs: an address in them that no map knows is an unknown local endpoint. */
export function localPodCidrSetName(f: Family): string {
  return `local-pod-cidrs-v${f}`;
}

/** Verdict map dispatching a direction's traffic to the per-pod chains. */
export function dispatchMapName(d: Direction, f: Family): string {
  return `${d}-v${f}`;
}

export const MAX_COMMENT = 120;

/**
 * nft comments are double-quoted strings with no escape mechanism at all, so
 * anything outside a conservative charset becomes `_`. Kubernetes names fit
 * the charset; hostile text (quotes, backslashes, braces, newlines) cannot
 * break out of the string or the script.
 */
export function sanitizeComment(text: string): string {
  const safe = text.replace(/[^A-Za-z0-9 ._/:=,+@()[\]-]/g, '_');
  return safe.length <= MAX_COMMENT ? safe : `${safe.slice(0, MAX_COMMENT - 3)}...`;
}
