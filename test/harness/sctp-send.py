#!/usr/bin/env python3
# Sends crafted SCTP INIT packets from a raw socket: the kernel has no SCTP
# sockets (CONFIG_IP_SCTP off) but conntrack and nftables still see SCTP, so an
# INIT is enough for a probe that the receiver counts in its input hook.
# Protocol: one JSON object per line on stdin
#   {"id": 1, "dst": "10.96.0.10", "dport": 80, "sport": 40001}
# answered by {"id": 1, "ok": true} or {"id": 1, "ok": false, "error": "..."}.
import json
import random
import socket
import struct
import sys

IPPROTO_SCTP = 132


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def init_packet(sport, dport):
    tag = random.randint(1, 0xFFFFFFFF)
    # INIT: type 1, flags 0, length 20, initiate tag, a_rwnd, out/in streams, initial TSN.
    chunk = struct.pack('!BBHIIHHI', 1, 0, 20, tag, 65535, 10, 10, tag)
    header = struct.pack('!HHII', sport, dport, 0, 0)
    packet = header + chunk
    # The checksum goes into the header in little-endian byte order (RFC 9260 appendix A, as Linux does it).
    return packet[:8] + struct.pack('<I', crc32c(packet)) + packet[12:]


sockets = {}


def send(dst, sport, dport):
    family = socket.AF_INET6 if ':' in dst else socket.AF_INET
    s = sockets.get(family)
    if s is None:
        s = sockets[family] = socket.socket(family, socket.SOCK_RAW, IPPROTO_SCTP)
    s.sendto(init_packet(sport, dport), (dst, 0))


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        try:
            send(req['dst'], int(req['sport']), int(req['dport']))
            out = {'id': req.get('id'), 'ok': True}
        except OSError as e:
            out = {'id': req.get('id'), 'ok': False, 'error': str(e)}
        sys.stdout.write(json.dumps(out) + '\n')
        sys.stdout.flush()


if __name__ == '__main__':
    main()
