#!/usr/bin/env python3
# SYN sender of scripts/bench-datapath.ts, run inside a pod's network namespace:
#   syn.py SRC DST DPORT SECONDS
# sends TCP SYNs from SRC to DST:DPORT (source ports cycling over 50k values,
# valid checksums, so conntrack sees each as a new connection) as fast as one
# raw socket allows for SECONDS, then prints the number sent. IPv4 only.
import socket, struct, sys, time

src, dst, dport, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])

def csum(data):
    if len(data) % 2:
        data += b'\0'
    s = sum(struct.unpack('!%dH' % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff

def syn(sport):
    hdr = struct.pack('!HHIIBBHHH', sport, dport, sport * 7919, 0, 5 << 4, 0x02, 64240, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack('!BBH', 0, socket.IPPROTO_TCP, len(hdr))
    c = csum(pseudo + hdr)
    return hdr[:16] + struct.pack('!H', c) + hdr[18:]

packets = [syn(10000 + i) for i in range(50000)]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
s.bind((src, 0))
addr = (dst, 0)
send = s.sendto
sent = 0
start = time.monotonic()
end = start + seconds
n = len(packets)
while True:
    for i in range(0, n, 100):
        for p in packets[i:i + 100]:
            send(p, addr)
        sent += 100
        now = time.monotonic()
        if now >= end:
            print(sent, now - start)
            sys.exit(0)
