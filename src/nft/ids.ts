// Names of chains, sets and maps, and comment text. Kubernetes names never
// appear raw in identifiers: an identifier is a short hash of the object's
// identity, so it is stable across runs, bounded in length and always valid
// nft syntax. Names are only for humans, in sanitized comments.
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

export function policyId(namespace: string, name: string): string {
  return shortHash(`policy\0${namespace}/${name}`);
}

/** Identity of one rule of a policy: the prefix of every set that rule owns. */
export function ruleId(namespace: string, name: string, d: Direction, index: number): string {
  return shortHash(`rule\0${namespace}/${name}\0${d}\0${index}`);
}

/** Source/destination addresses of a rule's peers. */
export function peerSetName(rid: string, f: Family): string {
  return `peer${f}-${rid}`;
}

/** protocol . port intervals of a rule's numeric ports. */
export function portSetName(rid: string): string {
  return `port-${rid}`;
}

/** destination address . protocol . port of a rule's named ports. */
export function namedPortSetName(rid: string, f: Family): string {
  return `named${f}-${rid}`;
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
