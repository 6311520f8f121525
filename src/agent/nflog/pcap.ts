// The denied-packet log as it arrives: a pcap stream (`tcpdump -i nflog:N -w -`)
// of link type NFLOG, each record an nfnetlink_log message (TLVs: prefix,
// payload, ...) whose payload is the IP packet. Pure: bytes in, packets out.
// Anything malformed is skipped and counted, never thrown.
import { formatIP } from '../../model/ip.ts';
import type { Family } from '../../model/types.ts';

/** One logged packet, as much of it as the deny path needs. */
export interface LoggedPacket {
  /** Capture time, Unix milliseconds. */
  readonly atMs: number;
  /** The nft log prefix (identifies the pod chain and direction). */
  readonly prefix: string;
  readonly family: Family;
  readonly src: string;
  readonly dst: string;
  /** IP protocol number (6 TCP, 17 UDP, 132 SCTP, 1/58 ICMP, ...). */
  readonly proto: number;
  /** Destination port for TCP/UDP/SCTP, else undefined. */
  readonly dport: number | undefined;
  readonly sport: number | undefined;
}

const LINKTYPE_NFLOG = 239;
const NFULA_PAYLOAD = 9;
const NFULA_PREFIX = 10;
// A record bigger than this is not something nft's `log snaplen` produced.
const MAX_RECORD = 1 << 16;

/**
 * Incremental pcap reader: push() chunks as they come, get the complete
 * records. Holds at most one partial record between chunks.
 */
export class PcapNflogParser {
  #buf: Buffer = Buffer.alloc(0);
  #little: boolean | undefined;
  #nanos = false;
  /** Records that were not NFLOG packets we could read. */
  malformed = 0;
  /** Set when the stream is not a pcap of link type NFLOG: nothing more is parsed. */
  error: string | undefined;

  push(chunk: Buffer): LoggedPacket[] {
    if (this.error !== undefined) return [];
    this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    const out: LoggedPacket[] = [];
    let off = 0;
    if (this.#little === undefined) {
      if (this.#buf.length < 24) return out;
      const magic = this.#buf.readUInt32LE(0);
      if (magic === 0xa1b2c3d4 || magic === 0xa1b23c4d) this.#little = true;
      else if (magic === 0xd4c3b2a1 || magic === 0x4d3cb2a1) this.#little = false;
      else {
        this.error = `not a pcap stream (magic ${magic.toString(16)})`;
        return out;
      }
      this.#nanos = magic === 0xa1b23c4d || magic === 0x4d3cb2a1;
      const link = this.#u32(20) & 0x0fffffff;
      if (link !== LINKTYPE_NFLOG) {
        this.error = `pcap link type ${link}, expected NFLOG (${LINKTYPE_NFLOG})`;
        return out;
      }
      off = 24;
    }
    while (this.#buf.length - off >= 16) {
      const sec = this.#u32(off);
      const frac = this.#u32(off + 4);
      const incl = this.#u32(off + 8);
      if (incl > MAX_RECORD) {
        this.error = `pcap record of ${incl} bytes: stream out of step`;
        return out;
      }
      if (this.#buf.length - off - 16 < incl) break;
      const rec = this.#buf.subarray(off + 16, off + 16 + incl);
      off += 16 + incl;
      const atMs = sec * 1000 + Math.floor(this.#nanos ? frac / 1e6 : frac / 1e3);
      const p = parseNflog(rec, atMs);
      if (p === undefined) this.malformed++;
      else out.push(p);
    }
    // Copy the tail: the big chunk it came from is not kept alive by it.
    this.#buf = off === this.#buf.length ? Buffer.alloc(0) : Buffer.from(this.#buf.subarray(off));
    return out;
  }

  #u32(off: number): number {
    return this.#little === true ? this.#buf.readUInt32LE(off) : this.#buf.readUInt32BE(off);
  }
}

/**
 * One NFLOG pseudo-header record: family (1 byte), version, resource id
 * (group, big-endian), then TLVs whose length and type are in host byte order
 * (little-endian on every platform this runs on), each padded to 4 bytes.
 */
export function parseNflog(rec: Buffer, atMs: number): LoggedPacket | undefined {
  if (rec.length < 4) return undefined;
  const afamily = rec[0];
  let prefix: string | undefined;
  let payload: Buffer | undefined;
  let off = 4;
  while (off + 4 <= rec.length) {
    const len = rec.readUInt16LE(off);
    const type = rec.readUInt16LE(off + 2) & 0x7fff;
    if (len < 4 || off + len > rec.length) return undefined;
    const value = rec.subarray(off + 4, off + len);
    if (type === NFULA_PREFIX) {
      const nul = value.indexOf(0);
      prefix = value.subarray(0, nul < 0 ? value.length : nul).toString('latin1');
    } else if (type === NFULA_PAYLOAD) payload = value;
    off += (len + 3) & ~3;
  }
  if (prefix === undefined || payload === undefined) return undefined;
  const ip = parseIpPacket(payload);
  if (ip === undefined) return undefined;
  // AF_INET 2, AF_INET6 10: must agree with the IP version.
  if ((afamily === 2 && ip.family !== 4) || (afamily === 10 && ip.family !== 6)) return undefined;
  return { atMs, prefix, ...ip };
}

type IpPart = Omit<LoggedPacket, 'atMs' | 'prefix'>;

const PORTED = new Set([6, 17, 132, 136]);
// IPv6 extension headers walked to reach the transport header.
const V6_EXT = new Set([0, 43, 60]);

export function parseIpPacket(p: Buffer): IpPart | undefined {
  if (p.length < 1) return undefined;
  const version = p[0]! >> 4;
  let family: Family;
  let src: string;
  let dst: string;
  let proto: number;
  let l4: number;
  if (version === 4) {
    if (p.length < 20) return undefined;
    family = 4;
    const ihl = (p[0]! & 0x0f) * 4;
    proto = p[9]!;
    src = formatIP({ family: 4, value: BigInt(p.readUInt32BE(12)) });
    dst = formatIP({ family: 4, value: BigInt(p.readUInt32BE(16)) });
    // A non-first fragment has no transport header.
    l4 = (p.readUInt16BE(6) & 0x1fff) !== 0 ? -1 : ihl;
  } else if (version === 6) {
    if (p.length < 40) return undefined;
    family = 6;
    src = formatIP({ family: 6, value: v6(p, 8) });
    dst = formatIP({ family: 6, value: v6(p, 24) });
    proto = p[6]!;
    l4 = 40;
    while (V6_EXT.has(proto) && l4 + 8 <= p.length) {
      proto = p[l4]!;
      l4 += (p[l4 + 1]! + 1) * 8;
    }
    if (proto === 44) {
      // Fragment header: only the first fragment carries the ports.
      if (l4 + 8 > p.length) return undefined;
      const first = (p.readUInt16BE(l4 + 2) & 0xfff8) === 0;
      proto = p[l4]!;
      l4 = first ? l4 + 8 : -1;
    }
  } else return undefined;
  let sport: number | undefined;
  let dport: number | undefined;
  if (PORTED.has(proto) && l4 >= 0 && l4 + 4 <= p.length) {
    sport = p.readUInt16BE(l4);
    dport = p.readUInt16BE(l4 + 2);
  }
  return { family, src, dst, proto, sport, dport };
}

function v6(p: Buffer, off: number): bigint {
  return (p.readBigUInt64BE(off) << 64n) | p.readBigUInt64BE(off + 8);
}

/** `TCP`, `UDP`, `SCTP`, `ICMP`, `ICMPv6`, or the number. */
export function protoName(proto: number): string {
  switch (proto) {
    case 6:
      return 'TCP';
    case 17:
      return 'UDP';
    case 132:
      return 'SCTP';
    case 1:
      return 'ICMP';
    case 58:
      return 'ICMPv6';
    default:
      return String(proto);
  }
}
