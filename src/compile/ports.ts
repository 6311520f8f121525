// A rule's ports as set elements. Numeric ports, endPort ranges and
// protocol-only entries become one `protocol . port-interval` set (nft rejects
// overlapping intervals, so ranges are merged first). Named ports only mean
// something on a concrete destination pod, so they become
// `address . protocol . port` triples of the pods that serve them.
import { PROTOCOLS } from '../model/types.ts';
import type { Family, Pod, PortSpec, Protocol } from '../model/types.ts';
import type { Proto, SetElement } from '../ruleset/ir.ts';
import type { ClusterIndex } from './cluster-index.ts';
import { intervalsContain } from './peers.ts';
import type { PeerDestinations } from './peers.ts';

const MAX_PORT = 65535;

export function nftProto(p: Protocol): NftProto {
  return p === 'TCP' ? 'tcp' : p === 'UDP' ? 'udp' : 'sctp';
}

/** One protocol's port interval (both ends included). */
export interface PortRange {
  readonly proto: NftProto;
  readonly lo: number;
  readonly hi: number;
}

export type NftProto = Proto;

/** Numeric ports, endPort ranges and protocol-only entries (every port) as merged intervals, per protocol in order. */
export function numericPortRanges(specs: readonly PortSpec[]): PortRange[] {
  const out: PortRange[] = [];
  for (const proto of PROTOCOLS) {
    const ranges: [number, number][] = [];
    for (const s of specs) {
      if (s.protocol !== proto || typeof s.port === 'string') continue;
      if (s.port === undefined) ranges.push([0, MAX_PORT]);
      else ranges.push([s.port, s.endPort ?? s.port]);
    }
    ranges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const merged: [number, number][] = [];
    for (const [lo, hi] of ranges) {
      const last = merged[merged.length - 1];
      if (last !== undefined && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
      else merged.push([lo, hi]);
    }
    for (const [lo, hi] of merged) out.push({ proto: nftProto(proto), lo, hi });
  }
  return out;
}

/** Port set elements of merged ranges: `tcp . 80`, `tcp . 30000-32767`, `udp . 0-65535` (every port). */
export function numericPortElements(ranges: readonly PortRange[]): SetElement[] {
  return ranges.map((r) => ({ kind: 'proto-port', proto: r.proto, port: r.lo === r.hi ? r.lo : { lo: r.lo, hi: r.hi } }));
}

/** `tcp . 80`, `tcp . 1000-2000`: a range in a set's name definition and comment (not nft syntax: src/nft prints elements). */
export function portRangeText(r: PortRange): string {
  return `${r.proto} . ${r.lo === r.hi ? r.lo : `${r.lo}-${r.hi}`}`;
}

export function hasNumericPorts(specs: readonly PortSpec[]): boolean {
  return specs.some((s) => typeof s.port !== 'string');
}

export interface NamedPortRef {
  readonly name: string;
  readonly protocol: Protocol;
}

export function namedPorts(specs: readonly PortSpec[]): NamedPortRef[] {
  const out: NamedPortRef[] = [];
  for (const s of specs) if (typeof s.port === 'string') out.push({ name: s.port, protocol: s.protocol });
  return out;
}

/** A named port resolved on one pod address: `address . protocol . port`. */
export interface PortTriple {
  /** Canonical address text. */
  readonly addr: string;
  readonly proto: NftProto;
  readonly port: number;
  /** address, protocol rank, port packed into one number: sorts numerically. */
  readonly key: bigint;
}

/** A triple as a named-port set element. */
export function tripleElement(t: PortTriple): SetElement {
  return { kind: 'addr-proto-port', addr: t.addr, proto: t.proto, port: t.port };
}

function triple(ipText: string, ip: bigint, proto: Protocol, port: number): PortTriple {
  const rank = PROTOCOLS.indexOf(proto);
  return { key: (ip << 18n) | BigInt((rank << 16) | port), addr: ipText, proto: nftProto(proto), port };
}

function sortedTriples(list: PortTriple[]): PortTriple[] {
  list.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const out: PortTriple[] = [];
  for (const t of list) if (out[out.length - 1]?.key !== t.key) out.push(t);
  return out;
}

function podTriples(idx: ClusterIndex, pod: Pod, family: Family, refs: readonly NamedPortRef[], into: PortTriple[]): void {
  for (const text of pod.ips) {
    const ip = idx.ip(text);
    if (ip === undefined || ip.family !== family) continue;
    for (const cp of pod.ports) {
      for (const r of refs) {
        if (cp.name === r.name && cp.protocol === r.protocol) {
          into.push(triple(text, ip.value, cp.protocol, cp.port));
        }
      }
    }
  }
}

/** Ingress: named ports resolve on the policy's selected local pods (the destinations). */
export function ingressNamedPorts(
  idx: ClusterIndex,
  targets: readonly Pod[],
  family: Family,
  refs: readonly NamedPortRef[],
): PortTriple[] {
  const list: PortTriple[] = [];
  for (const pod of targets) podTriples(idx, pod, family, refs, list);
  return sortedTriples(list);
}

/**
 * Egress: named ports resolve on the destination pods: those the pod peers
 * select, plus active pods whose address lies in an ipBlock peer; every
 * active pod when the rule has no peers.
 */
export function egressNamedPorts(
  idx: ClusterIndex,
  dest: PeerDestinations | undefined,
  family: Family,
  refs: readonly NamedPortRef[],
): PortTriple[] {
  const list: PortTriple[] = [];
  if (dest !== undefined) for (const pod of dest.pods) podTriples(idx, pod, family, refs, list);
  const blocks = dest?.blocks[family];
  // Only address blocks (or no peers at all) need the cluster-wide named-port index.
  if (dest === undefined || (blocks !== undefined && blocks.length > 0)) {
    for (const r of refs) {
      for (const h of idx.namedPortHolders(r.name)) {
        if (h.port.protocol !== r.protocol) continue;
        for (const text of h.pod.ips) {
          const ip = idx.ip(text);
          if (ip === undefined || ip.family !== family) continue;
          if (blocks !== undefined && !intervalsContain(blocks, family, ip.value)) continue;
          list.push(triple(text, ip.value, r.protocol, h.port.port));
        }
      }
    }
  }
  return sortedTriples(list);
}
