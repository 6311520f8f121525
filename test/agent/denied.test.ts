// The pure parts of denied-traffic visibility: the NFLOG pcap parser, the
// aggregation ring, the deny log's reasons and budget, the deny counters, the
// deny path in the rendered ruleset, the /debug/denied query and the
// `denied` command (against a stub endpoint). Real packets:
// denied-datapath.test.ts.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/observability/logger.ts';
import { PcapNflogParser, parseIpPacket } from '../../src/agent/nflog/pcap.ts';
import { DeniedRing, attemptKey, type DeniedAttempt } from '../../src/agent/denied/ring.ts';
import { DeniedLog } from '../../src/agent/denied/log-line.ts';
import { DenyCounterState, denyCountersFromJson } from '../../src/agent/denied/counters.ts';
import { deniedReply, parseDeniedQuery } from '../../src/agent/denied/endpoint.ts';
import { deniedCommand } from '../../src/cli/denied.ts';
import {
  denyLogPrefix,
  parseDenyLogPrefix,
  parsePodChainName,
  parseTierDenyLogPrefix,
  podChainName,
  podId,
  policyKeyId,
  tierDenyLogPrefix,
  tierRuleChainName,
} from '../../src/ruleset/ids.ts';
import type { ClusterNetworkPolicy, ClusterPolicyRule } from '../../src/model/types.ts';
import { compileNode } from '../../src/compile/compile.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { renderUpdate } from '../../src/nft/update.ts';
import { pod, policy, port, podPeer, rule, sel, state } from '../support/state-builder.ts';

// ---- building pcap bytes ----

function tlv(type: number, value: Buffer): Buffer {
  const len = 4 + value.length;
  const b = Buffer.alloc((len + 3) & ~3);
  b.writeUInt16LE(len, 0);
  b.writeUInt16LE(type, 2);
  value.copy(b, 4);
  return b;
}

function nflogRecord(family: 2 | 10, prefix: string, payload: Buffer): Buffer {
  const hdr = Buffer.from([family, 0, 0x06, 0xce]);
  const pktHdr = tlv(1, Buffer.from([0x08, 0x00, 1, 0]));
  return Buffer.concat([hdr, pktHdr, tlv(10, Buffer.from(`${prefix}\0`, 'latin1')), tlv(9, payload)]);
}

function ipv4(proto: number, src: number[], dst: number[], sport: number, dport: number, fragOffset = 0): Buffer {
  const b = Buffer.alloc(28);
  b[0] = 0x45;
  b.writeUInt16BE(28, 2);
  b.writeUInt16BE(fragOffset, 6);
  b[8] = 64;
  b[9] = proto;
  Buffer.from(src).copy(b, 12);
  Buffer.from(dst).copy(b, 16);
  b.writeUInt16BE(sport, 20);
  b.writeUInt16BE(dport, 22);
  return b;
}

function ipv6(nextHeader: number, src: string, dst: string, l4: Buffer): Buffer {
  const b = Buffer.alloc(40);
  b[0] = 0x60;
  b.writeUInt16BE(l4.length, 4);
  b[6] = nextHeader;
  b[7] = 64;
  const addr = (text: string): Buffer => {
    const [head = '', tail = ''] = text.split('::');
    const h = head === '' ? [] : head.split(':');
    const t = tail === '' ? [] : tail.split(':');
    const groups = [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
    const out = Buffer.alloc(16);
    groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
    return out;
  };
  addr(src).copy(b, 8);
  addr(dst).copy(b, 24);
  return Buffer.concat([b, l4]);
}

function ports(sport: number, dport: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeUInt16BE(sport, 0);
  b.writeUInt16BE(dport, 2);
  return b;
}

function pcap(records: readonly Buffer[], tsSec = 1_700_000_000): Buffer {
  const g = Buffer.alloc(24);
  g.writeUInt32LE(0xa1b2c3d4, 0);
  g.writeUInt16LE(2, 4);
  g.writeUInt16LE(4, 6);
  g.writeUInt32LE(262144, 16);
  g.writeUInt32LE(239, 20);
  const parts: Buffer[] = [g];
  records.forEach((r, i) => {
    const h = Buffer.alloc(16);
    h.writeUInt32LE(tsSec + i, 0);
    h.writeUInt32LE(500_000, 4);
    h.writeUInt32LE(r.length, 8);
    h.writeUInt32LE(r.length, 12);
    parts.push(h, r);
  });
  return Buffer.concat(parts);
}

const PREFIX = denyLogPrefix(podId('shop', 'db'), 'ingress');

describe('NFLOG pcap parser', () => {
  test('TCP/IPv4, UDP/IPv6 and SCTP records, split at every byte boundary, parse the same', () => {
    const stream = pcap([
      nflogRecord(2, PREFIX, ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 40000, 81)),
      nflogRecord(10, PREFIX, ipv6(17, 'fd00::1', 'fd00::2', ports(40001, 53))),
      nflogRecord(2, PREFIX, ipv4(132, [10, 0, 0, 1], [10, 0, 0, 2], 40002, 9000)),
    ]);
    const whole = new PcapNflogParser().push(stream);
    assert.deepEqual(
      whole.map((p) => [p.family, p.src, p.dst, p.proto, p.sport, p.dport, p.prefix, p.atMs]),
      [
        [4, '10.0.0.1', '10.0.0.2', 6, 40000, 81, PREFIX, 1_700_000_000_500],
        [6, 'fd00::1', 'fd00::2', 17, 40001, 53, PREFIX, 1_700_000_001_500],
        [4, '10.0.0.1', '10.0.0.2', 132, 40002, 9000, PREFIX, 1_700_000_002_500],
      ],
    );
    for (let cut = 1; cut < stream.length; cut += 7) {
      const p = new PcapNflogParser();
      assert.deepEqual([...p.push(stream.subarray(0, cut)), ...p.push(stream.subarray(cut))], whole, `cut at ${cut}`);
    }
  });

  test('a non-first fragment has no ports; ICMP has none; IPv6 extension headers are walked', () => {
    assert.equal(parseIpPacket(ipv4(17, [1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 100))?.dport, undefined);
    assert.equal(parseIpPacket(ipv4(1, [1, 1, 1, 1], [2, 2, 2, 2], 1, 2))?.dport, undefined);
    // hop-by-hop (0) then TCP
    const hbh = Buffer.concat([Buffer.from([6, 0, 0, 0, 0, 0, 0, 0]), ports(5, 443)]);
    const p = parseIpPacket(ipv6(0, '::1', '::2', hbh));
    assert.deepEqual([p?.proto, p?.dport], [6, 443]);
  });

  test('malformed records are counted and skipped; a stream that is not NFLOG pcap stops the parser', () => {
    const bad = Buffer.from([2, 0, 0, 1, 0xff, 0xff, 9, 0]); // a TLV longer than the record
    const p = new PcapNflogParser();
    const out = p.push(pcap([bad, nflogRecord(2, PREFIX, ipv4(6, [1, 1, 1, 1], [2, 2, 2, 2], 1, 80))]));
    assert.equal(out.length, 1);
    assert.equal(p.malformed, 1);
    const ether = pcap([]);
    ether.writeUInt32LE(1, 20);
    const q = new PcapNflogParser();
    assert.deepEqual(q.push(ether), []);
    assert.match(q.error ?? '', /link type 1, expected NFLOG/);
    const r = new PcapNflogParser();
    r.push(Buffer.alloc(24, 0x41));
    assert.match(r.error ?? '', /not a pcap stream/);
  });
});

describe('log prefix and chain names', () => {
  test('the prefix names the pod chain by hash and direction, never by the Kubernetes name', () => {
    const id = podId('payments', 'api-0');
    assert.equal(denyLogPrefix(id, 'egress'), `nnp:${id}:EG`);
    assert.ok(!denyLogPrefix(id, 'ingress').includes('payments'));
    assert.deepEqual(parseDenyLogPrefix(`nnp:${id}:IN`), { podId: id, direction: 'ingress' });
    assert.equal(parseDenyLogPrefix('other:thing'), undefined);
    const pid = policyKeyId('ClusterNetworkPolicy/deny-payments');
    const cnpPrefix = tierDenyLogPrefix(pid, 'egress', 12);
    assert.equal(cnpPrefix, `cnp:${pid}:EG:12`);
    assert.ok(!cnpPrefix.includes('payments') && cnpPrefix.length <= 31);
    assert.deepEqual(parseTierDenyLogPrefix(cnpPrefix), { policyId: pid, direction: 'egress', index: 12 });
    assert.equal(parseTierDenyLogPrefix(`nnp:${id}:IN`), undefined);
    assert.equal(parseDenyLogPrefix(cnpPrefix), undefined);
    assert.deepEqual(parsePodChainName(podChainName(id, 'egress')), { podId: id, direction: 'egress' });
    assert.equal(parsePodChainName('forward-egress'), undefined);
  });
});

const attempt = (over: Partial<DeniedAttempt> = {}): DeniedAttempt => ({
  atMs: 1000,
  direction: 'ingress',
  pod: 'shop/db',
  family: 4,
  src: { ip: '10.0.0.1', pod: 'shop/web' },
  dst: { ip: '10.0.0.2', pod: 'shop/db' },
  protocol: 'TCP',
  port: 81,
  ...over,
});

describe('DeniedRing', () => {
  test('identical attempts aggregate; the least recently seen entry is evicted at capacity', () => {
    const r = new DeniedRing(2);
    const a = r.add(attemptKey(attempt()), attempt(), 'why');
    r.repeat(a, 2000);
    assert.equal(a.count, 2);
    assert.equal(a.firstSeenMs, 1000);
    assert.equal(a.lastSeenMs, 2000);
    const b = attempt({ port: 82, atMs: 1500 });
    r.add(attemptKey(b), b, 'why');
    r.repeat(a, 2500); // a is now the most recent
    const c = attempt({ port: 83, atMs: 3000 });
    r.add(attemptKey(c), c, 'why');
    assert.equal(r.size, 2);
    assert.equal(r.evicted, 1);
    assert.deepEqual(
      r.query().map((e) => e.port),
      [83, 81],
    );
  });

  test('filters: pod (either side), namespace, direction, since, limit', () => {
    const r = new DeniedRing();
    for (const x of [
      attempt(),
      attempt({
        direction: 'egress',
        pod: 'ops/job',
        src: { ip: '10.0.0.9', pod: 'ops/job' },
        dst: { ip: '10.0.0.50', pod: undefined },
        atMs: 5000,
      }),
      attempt({ src: { ip: '192.0.2.1', pod: undefined }, atMs: 7000 }),
    ])
      r.add(attemptKey(x), x, 'why');
    assert.equal(r.query({ pod: 'shop/web' }).length, 1);
    assert.equal(r.query({ pod: 'shop/db' }).length, 3 - 1);
    assert.equal(r.query({ namespace: 'ops' }).length, 1);
    assert.equal(r.query({ direction: 'egress' }).length, 1);
    assert.equal(r.query({ sinceMs: 4000 }).length, 2);
    assert.equal(r.query({ limit: 1 })[0]?.src.ip, '192.0.2.1');
  });
});

function capture(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const dest = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      cb();
    },
  });
  return { log: createLogger({ level: 'info', destination: dest }), lines };
}

const live = state({
  pods: [
    pod('shop', 'db', { labels: { app: 'db' }, node: 'node-1', ips: ['10.0.0.2', 'fd00::2'] }),
    pod('shop', 'web', { labels: { app: 'web' }, node: 'node-2', ips: ['10.0.0.1', 'fd00::1'] }),
  ],
  policies: [
    policy('shop', 'db-from-web', {
      podSelector: sel({ app: 'db' }),
      ingress: [rule([podPeer(sel({ app: 'web' }))], [port('TCP', 80)])],
    }),
  ],
});

describe('DeniedLog', () => {
  const packet = (dport: number, sport: number, atMs = 1000, proto = 6) => ({
    atMs,
    prefix: PREFIX,
    family: 4 as const,
    src: '10.0.0.1',
    dst: '10.0.0.2',
    proto,
    sport,
    dport,
  });

  test('one line per new denial with pods and the evaluator reason; repeats aggregate into one flush line', async () => {
    const { log, lines } = capture();
    const d = new DeniedLog({ nodeName: 'node-1', log, snapshot: () => live, now: () => 0 });
    d.onPacket(packet(81, 40000));
    d.onPacket(packet(81, 40001, 1200)); // another source port: the same denial
    d.onPacket(packet(81, 40002, 1300));
    await new Promise((r) => setImmediate(r));
    assert.equal(lines.length, 1);
    const l = lines[0] ?? {};
    assert.equal(l['event'], 'denied');
    assert.equal(l['src'], 'shop/web');
    assert.equal(l['dst'], 'shop/db');
    assert.equal(l['pod'], 'shop/db');
    assert.equal(l['port'], 81);
    assert.equal(l['protocol'], 'TCP');
    assert.equal(
      l['reason'],
      "ingress at shop/db: shop/db is isolated for ingress by shop/db-from-web; no ingress rule matched: port 81/TCP is outside every rule's ports.",
    );
    d.flush();
    d.flush(); // nothing new: no second line
    await new Promise((r) => setImmediate(r));
    assert.equal(lines.length, 2);
    assert.equal(lines[1]?.['event'], 'denied-repeated');
    assert.equal(lines[1]?.['count'], 3);
    assert.equal(lines[1]?.['repeats'], 2);
    assert.equal(lines[1]?.['lastSeen'], new Date(1300).toISOString());
  });

  test('ICMP: the reason says only a rule without ports could allow it; unknown prefixes are counted', () => {
    const { log } = capture();
    let unknown = 0;
    const d = new DeniedLog({ nodeName: 'node-1', log, snapshot: () => live, onUnknownPrefix: () => unknown++ });
    d.onPacket({ ...packet(0, 0), proto: 1, dport: undefined, sport: undefined });
    d.onPacket({ ...packet(81, 1), prefix: 'IPTABLES-DROP' });
    const e = d.ring.query()[0];
    assert.equal(e?.protocol, 'ICMP');
    assert.match(
      e?.reason ?? '',
      /^ingress at shop\/db: isolated for ingress by shop\/db-from-web; no rule without ports admits shop\/web/,
    );
    assert.equal(unknown, 1);
    assert.equal(d.ring.size, 1);
  });

  test('ICMP denied by a ClusterNetworkPolicy rule without protocols: the reason names that rule', () => {
    const { log } = capture();
    const withCnp = {
      ...live,
      clusterPolicies: [
        {
          name: 'no-web',
          sourceKind: 'ClusterNetworkPolicy',
          tier: 'Admin' as const,
          priority: 3,
          subject: { namespaceSelector: sel(), podSelector: sel({ app: 'db' }) },
          ingress: [
            {
              name: 'web',
              action: 'Deny' as const,
              peers: [{ kind: 'pods' as const, namespaceSelector: sel(), podSelector: sel({ app: 'web' }) }],
              protocols: undefined,
              invalid: false,
            },
          ],
          egress: [],
          errors: [],
        },
      ],
    };
    const d = new DeniedLog({ nodeName: 'node-1', log, snapshot: () => withCnp });
    d.onPacket({ ...packet(0, 0), proto: 1, dport: undefined, sport: undefined });
    assert.equal(
      d.ring.query()[0]?.reason,
      'ingress at shop/db: ICMP denied by ClusterNetworkPolicy no-web (Admin tier, priority 3) ingress rule 0 "web": Deny',
    );
  });

  const cnp = (
    name: string,
    tier: 'Admin' | 'Baseline',
    priority: number,
    ingress: ClusterPolicyRule[],
  ): ClusterNetworkPolicy => ({
    name,
    sourceKind: 'ClusterNetworkPolicy',
    tier,
    priority,
    subject: { namespaceSelector: sel(), podSelector: sel({ app: 'db' }) },
    ingress,
    egress: [],
    errors: [],
  });
  const denyWeb = (name: string, invalid = false): ClusterPolicyRule => ({
    name,
    action: 'Deny',
    peers: [{ kind: 'pods', namespaceSelector: sel(), podSelector: sel({ app: 'web' }) }],
    protocols: [{ kind: 'port', protocol: 'TCP', port: 81, endPort: undefined }],
    invalid,
  });

  test('a ClusterNetworkPolicy Deny rule chain logged it: the entry and line name the policy, tier, priority and rule', () => {
    const { log, lines } = capture();
    const withCnp = {
      ...live,
      clusterPolicies: [cnp('no-web', 'Admin', 7, [{ ...denyWeb('other'), action: 'Accept' }, denyWeb('block-web')])],
    };
    const d = new DeniedLog({ nodeName: 'node-1', log, snapshot: () => withCnp });
    const id = policyKeyId('ClusterNetworkPolicy/no-web');
    d.onPacket({ ...packet(81, 1), prefix: tierDenyLogPrefix(id, 'ingress', 1) });
    d.onPacket({ ...packet(81, 2), prefix: tierDenyLogPrefix(id, 'ingress', 1) });
    // The same packet through the pod chain's deny path is another entry.
    d.onPacket(packet(81, 3));
    const [byPod, byRule] = d.ring.query();
    assert.equal(d.ring.size, 2);
    assert.equal(byPod?.rule, undefined);
    assert.equal(byRule?.pod, 'shop/db');
    assert.equal(byRule?.src.pod, 'shop/web');
    assert.equal(byRule?.count, 2);
    assert.equal(
      byRule?.reason,
      'ingress at shop/db: denied by ClusterNetworkPolicy no-web (Admin tier, priority 7) ingress rule 1 "block-web"',
    );
    assert.deepEqual(byRule?.rule, {
      policyId: id,
      index: 1,
      kind: 'ClusterNetworkPolicy',
      name: 'no-web',
      tier: 'Admin',
      priority: 7,
      ruleName: 'block-web',
    });
    const line = lines.find((l) => l['event'] === 'denied' && typeof l['rule'] === 'object' && l['rule'] !== null);
    assert.deepEqual(line?.['rule'], {
      kind: 'ClusterNetworkPolicy',
      name: 'no-web',
      tier: 'Admin',
      priority: 7,
      index: 1,
      ruleName: 'block-web',
      policyId: id,
    });
    assert.equal(line?.['msg'], `denied ingress: ${byRule?.reason}`);
  });

  test('a rule denied as fail closed says why; a rule gone or changed since, and a policy gone, are said as such', () => {
    const { log } = capture();
    let current = {
      ...live,
      clusterPolicies: [cnp('base', 'Baseline', 0, [denyWeb('', true)])],
    };
    const d = new DeniedLog({ nodeName: 'node-1', log, snapshot: () => current });
    const id = policyKeyId('ClusterNetworkPolicy/base');
    const send = (port: number, prefix: string) => d.onPacket({ ...packet(port, 1), prefix });
    send(81, tierDenyLogPrefix(id, 'ingress', 0));
    assert.equal(
      d.ring.query()[0]?.reason,
      'ingress at shop/db: denied by ClusterNetworkPolicy base (Baseline tier, priority 0) ingress rule 0 (the rule is invalid: the rule is read as Deny all (fail closed))',
    );
    send(82, tierDenyLogPrefix(id, 'ingress', 4));
    assert.match(d.ring.query()[0]?.reason ?? '', /ingress rule 4, a rule ClusterNetworkPolicy base no longer has/);
    current = { ...live, clusterPolicies: [cnp('base', 'Baseline', 0, [{ ...denyWeb('w'), action: 'Accept' }])] };
    send(83, tierDenyLogPrefix(id, 'ingress', 0));
    assert.match(d.ring.query()[0]?.reason ?? '', /ingress rule 0 "w", which is now Accept \(the ruleset in force at the time\)/);
    send(84, tierDenyLogPrefix(policyKeyId('ClusterNetworkPolicy/gone'), 'egress', 2));
    const gone = d.ring.query()[0];
    assert.equal(
      gone?.reason,
      `egress at (10.0.0.1, no local pod): denied by a ClusterNetworkPolicy rule no longer in the cluster state (chain ${tierRuleChainName(policyKeyId('ClusterNetworkPolicy/gone'), 'egress', 2)})`,
    );
    assert.deepEqual([gone?.rule?.name, gone?.rule?.tier], [undefined, undefined]);
  });

  test('a flood of distinct denials: lines capped per second (the rest counted), the ring at capacity', () => {
    const { log, lines } = capture();
    let suppressed = 0;
    const d = new DeniedLog({
      nodeName: 'node-1',
      log,
      snapshot: () => live,
      capacity: 100,
      linesPerSecond: 10,
      onSuppressed: (n) => (suppressed += n),
      now: () => 5000,
    });
    for (let i = 0; i < 5000; i++) d.onPacket(packet(1000 + i, 1));
    assert.equal(d.ring.size, 100);
    assert.equal(d.ring.evicted, 4900);
    assert.equal(lines.length, 10);
    assert.equal(suppressed, 4990);
  });

  test('a chain of a pod that is gone and an address no pod owns are shown as such', () => {
    const { log } = capture();
    const d = new DeniedLog({ nodeName: 'node-1', log, snapshot: () => live });
    d.onPacket({ ...packet(81, 1), prefix: denyLogPrefix(podId('shop', 'gone'), 'egress'), src: '192.0.2.7' });
    const e = d.ring.query()[0];
    assert.match(e?.pod ?? '', /no longer a local pod/);
    assert.deepEqual(e?.src, { ip: '192.0.2.7', pod: undefined });
  });
});

describe('deny counters', () => {
  const listing = (packets: Record<string, [number, number]>) =>
    JSON.stringify({
      nftables: [
        { metainfo: { version: '1.0.6' } },
        ...Object.entries(packets).map(([chain, [handle, n]]) => ({
          rule: { family: 'inet', table: 't', chain, handle, expr: [{ counter: { packets: n, bytes: n * 60 } }, { drop: null }] },
        })),
        // A jump with a counter is not a denial.
        {
          rule: {
            chain: podChainName('aaaaaaaaaaaa', 'ingress'),
            handle: 99,
            expr: [{ counter: { packets: 7, bytes: 1 } }, { jump: { target: 'x' } }],
          },
        },
      ],
    });
  const inId = podChainName('aaaaaaaaaaaa', 'ingress');
  const egId = podChainName('bbbbbbbbbbbb', 'egress');

  test('the increase since the last read, per pod and per direction; replaced rules count from 0', () => {
    const s = new DenyCounterState();
    const first = s.advance(denyCountersFromJson(listing({ [inId]: [1, 5], [egId]: [2, 0], 'forward-ingress': [3, 2] })));
    assert.deepEqual(first.node, { ingress: 7, egress: 0 });
    assert.deepEqual(
      [...first.pods],
      [
        ['aaaaaaaaaaaa ingress', 5],
        ['bbbbbbbbbbbb egress', 0],
      ],
    );
    // ingress rule replaced (new handle), egress counter went down (table recreated): both count from 0.
    const next = s.advance(denyCountersFromJson(listing({ [inId]: [10, 3], [egId]: [2, 0], 'forward-ingress': [3, 4] })));
    assert.deepEqual(next.node, { ingress: 5, egress: 0 });
    assert.equal(next.pods.get('aaaaaaaaaaaa ingress'), 3);
  });

  test('a ClusterNetworkPolicy Deny rule chain counts for the node (it is shared by pods: no pod series)', () => {
    const s = new DenyCounterState();
    const rule = tierRuleChainName('cccccccccccc', 'egress', 3);
    const d = s.advance(denyCountersFromJson(listing({ [rule]: [1, 4], [inId]: [2, 1] })));
    assert.deepEqual(d.node, { ingress: 1, egress: 4 });
    assert.deepEqual([...d.pods.keys()], ['aaaaaaaaaaaa ingress']);
  });
});

describe('the deny path in the ruleset', () => {
  const s = live;
  const logDenied = { group: 1742, ratePerSecond: 100, burst: 200 };

  test('--log-denied: one named limit for the node and a log rule before the counted verdict of every pod chain', () => {
    const text = renderRuleset(compileNode(s, 'node-1', { logDenied }));
    assert.match(text, /\tlimit denied-log \{\n\t\trate 100\/second burst 200 packets\n\t\}/);
    const id = podId('shop', 'db');
    assert.ok(
      text.includes(
        `\t\tlimit name "denied-log" log prefix "nnp:${id}:IN" group 1742 snaplen 128\n\t\tcounter drop comment "deny ingress to shop/db"`,
      ),
      text,
    );
    const reject = renderRuleset(compileNode(s, 'node-1', { logDenied, denyAction: 'reject' }));
    assert.match(
      reject,
      /log prefix "nnp:[0-9a-f]{12}:IN" group 1742 snaplen 128\n\t\tmeta l4proto tcp counter reject with tcp reset/,
    );
  });

  test('--log-denied: a ClusterNetworkPolicy Deny rule chain logs under the same limit and group, with its own prefix; Accept and Pass do not', () => {
    const cs = {
      ...s,
      clusterPolicies: [
        {
          name: 'admin',
          sourceKind: 'ClusterNetworkPolicy',
          tier: 'Admin' as const,
          priority: 1,
          subject: { namespaceSelector: sel(), podSelector: sel({ app: 'db' }) },
          ingress: (['Accept', 'Pass', 'Deny'] as const).map((action) => ({
            name: action.toLowerCase(),
            action,
            peers: [{ kind: 'pods' as const, namespaceSelector: sel(), podSelector: sel({ app: 'web' }) }],
            protocols: [{ kind: 'port' as const, protocol: 'TCP' as const, port: 80 + action.length, endPort: undefined }],
            invalid: false,
          })),
          egress: [],
          errors: [],
        },
      ],
    };
    const pid = policyKeyId('ClusterNetworkPolicy/admin');
    const chain = (text: string, index: number): string => {
      const at = text.indexOf(`chain ${tierRuleChainName(pid, 'ingress', index)} {`);
      assert.ok(at >= 0, text);
      return text.slice(at, text.indexOf('\n\t}', at));
    };
    const text = renderRuleset(compileNode(cs, 'node-1', { logDenied }));
    assert.ok(
      chain(text, 2).includes(
        `\t\tlimit name "denied-log" log prefix "cnp:${pid}:IN:2" group 1742 snaplen 128\n\t\tcounter drop comment "ClusterNetworkPolicy admin (Admin tier, priority 1) ingress rule 2`,
      ),
      chain(text, 2),
    );
    for (const i of [0, 1]) assert.ok(!chain(text, i).includes('log'), chain(text, i));
    assert.equal(text.match(/\tlimit denied-log \{/g)?.length, 1);
    const reject = renderRuleset(compileNode(cs, 'node-1', { logDenied, denyAction: 'reject' }));
    assert.match(
      chain(reject, 2),
      /log prefix "cnp:[0-9a-f]{12}:IN:2" group 1742 snaplen 128\n\t\tmeta l4proto tcp counter reject/,
    );
    assert.ok(!chain(renderRuleset(compileNode(cs, 'node-1')), 2).includes('log'));
  });

  test('off by default: no limit, no log rule; switching it is a full replacement, never an increment', () => {
    const off = compileNode(s, 'node-1');
    const text = renderRuleset(off);
    assert.ok(!text.includes('log ') && !text.includes('limit'), text);
    const on = compileNode(s, 'node-1', { logDenied });
    assert.equal(renderUpdate(off, on).kind, 'full');
    assert.equal(renderUpdate(on, off).kind, 'full');
    assert.equal(renderUpdate(on, compileNode(s, 'node-1', { logDenied })).kind, 'incremental');
  });

  test('invalid log options are refused', () => {
    assert.throws(
      () => compileNode(s, 'node-1', { logDenied: { group: 70000, ratePerSecond: 1, burst: 0 } }),
      /invalid logDenied/,
    );
  });
});

describe('/debug/denied and the denied command', () => {
  test('query parsing: pod, namespace, direction, since (duration or time), limit; errors are 400', () => {
    const q = (s: string) => parseDeniedQuery(new URLSearchParams(s), 100_000);
    assert.deepEqual(q('pod=shop/db&direction=ingress&since=30s&limit=5'), {
      pod: 'shop/db',
      namespace: undefined,
      direction: 'ingress',
      sinceMs: 70_000,
      limit: 5,
    });
    assert.equal((q('since=1970-01-01T00:00:01Z') as { sinceMs: number }).sinceMs, 1000);
    for (const bad of ['pod=db', 'direction=up', 'since=soon', 'limit=0', 'namespace=A_B'])
      assert.equal(typeof q(bad), 'string', bad);
    const r = deniedReply(undefined, new URL('http://x/debug/denied?direction=up'));
    assert.equal(r.status, 400);
  });

  test('the command prints the entries; -f prints new entries and new repeats, then stops', async () => {
    let round = 0;
    const entry = (count: number, port: number) => ({
      key: `k${port}`,
      direction: 'ingress',
      pod: 'shop/db',
      src: 'shop/web',
      srcIP: '10.0.0.1',
      dst: 'shop/db',
      dstIP: '10.0.0.2',
      protocol: 'TCP',
      port,
      family: 4,
      count,
      firstSeen: '2026-01-01T00:00:00.000Z',
      lastSeen: '2026-01-01T00:00:01.000Z',
      reason: 'ingress at shop/db: because',
    });
    const queries: string[] = [];
    const server = createServer((req, res) => {
      queries.push(req.url ?? '');
      round++;
      const entries = round === 1 ? [entry(1, 81)] : round === 2 ? [entry(1, 81)] : [entry(1, 82), entry(4, 81)];
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ logDenied: true, entries }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const addr = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const out: string[] = [];
      const code = await deniedCommand(['--addr', addr, '--pod', 'shop/db', '--since', '5m'], {
        out: (s) => out.push(s),
        err: (s) => out.push(`ERR ${s}`),
      });
      assert.equal(code, 0);
      assert.equal(
        out.join('\n'),
        '2026-01-01T00:00:01.000Z ingress shop/web (10.0.0.1) -> shop/db (10.0.0.2) 81/TCP\n    ingress at shop/db: because',
      );
      assert.match(queries[0] ?? '', /pod=shop%2Fdb&since=5m&format=json/);

      let stop: () => void = () => {};
      const stopped = new Promise<void>((r) => (stop = r));
      const follow: string[] = [];
      const running = deniedCommand(['--addr', addr, '-f', '--interval', '100ms'], {
        out: (s) => {
          follow.push(s);
          if (follow.length === 3) stop();
        },
        err: (s) => follow.push(`ERR ${s}`),
        stopped,
      });
      assert.equal(await running, 0);
      assert.equal(follow.length, 3);
      assert.match(follow[1] ?? '', /81\/TCP x4/);
      assert.match(follow[2] ?? '', /82\/TCP/);
    } finally {
      server.close();
    }
  });

  test('an unreachable agent is exit code 1 with the address; bad flags are usage errors', async () => {
    const err: string[] = [];
    const io = { out: () => {}, err: (s: string) => err.push(s) };
    assert.equal(await deniedCommand(['--addr', '127.0.0.1:1'], io), 1);
    assert.match(err.join(''), /cannot reach the agent's debug endpoint at http:\/\/127\.0\.0\.1:1\/debug\/denied/);
    assert.equal(await deniedCommand(['--since', 'soon'], io), 2);
    assert.equal(await deniedCommand(['--bogus'], io), 2);
  });
});
