// Denied traffic made visible, with real packets: real agent processes with
// --log-denied in the node namespaces of a simulated two-node cluster (routed
// and bridged), real connection attempts (TCP, UDP, SCTP; IPv4 and IPv6;
// denied at ingress and at egress; and allowed ones), then what a person
// sees: /debug/denied, the log lines, the deny counters in /metrics and the
// `denied` command. On the routed cluster also: a flood of denied packets
// against the in-kernel rate limit, the NFLOG reader killed and restarted,
// and the log rule gone when the agent runs without --log-denied.
// Needs root, nft, ip, python3 and tcpdump: skipped locally without them,
// failing in CI.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execa } from 'execa';
import { FakeApiServer, namespace, networkPolicy, pod, type KubeObject } from '../support/fake-apiserver.ts';
import { Cluster, type NetworkStyle } from '../harness/cluster.ts';
import { runProbes, type Probe } from '../harness/probe.ts';
import { requireDatapath, IN_CI } from '../harness/requirements.ts';
import { processGone, runIn } from '../harness/netns.ts';
import { AgentProcess, eventually, listTableIn, scratch, type LogLine } from './agent-process.ts';
import type { Family, Protocol } from '../../src/model/types.ts';

const PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];
const FAMILIES: readonly Family[] = [4, 6];
// Rate limit of these agents: low, so that the flood below overruns it quickly.
const RATE = 50;
const BURST = 100;

interface EntryJson {
  readonly key: string;
  readonly direction: string;
  readonly pod: string;
  readonly src: string;
  readonly srcIP: string;
  readonly dst: string;
  readonly dstIP: string;
  readonly protocol: string;
  readonly port: number | null;
  readonly count: number;
  readonly reason: string;
}

interface DeniedJson {
  readonly logDenied: boolean;
  readonly reader: { running: boolean; pid: number | null; restarts: number; received: number; queued: number } | null;
  readonly entries: EntryJson[];
  readonly capacity: number;
}

async function hasTcpdump(): Promise<boolean> {
  const r = await execa('tcpdump', ['--version'], { reject: false });
  return r.exitCode === 0;
}

async function denied(a: AgentProcess, query = ''): Promise<DeniedJson> {
  const r = await a.get(`/debug/denied${query}`);
  assert.equal(r.status, 200, r.body);
  return JSON.parse(r.body) as DeniedJson;
}

function sameAttempt(e: Readonly<Record<string, unknown>> | EntryJson, want: Want): boolean {
  const x = e as Readonly<Record<string, unknown>>;
  return (
    x['srcIP'] === want.srcIP &&
    x['dstIP'] === want.dstIP &&
    x['protocol'] === want.protocol &&
    x['port'] === want.port &&
    x['direction'] === want.direction
  );
}

interface Want {
  readonly what: string;
  readonly direction: 'ingress' | 'egress';
  readonly pod: string;
  readonly src: string;
  readonly dst: string;
  readonly srcIP: string;
  readonly dstIP: string;
  readonly protocol: Protocol;
  readonly port: number;
  readonly policy: string;
}

async function scenario(t: TestContext, style: NetworkStyle, extras: boolean): Promise<void> {
  const c = await Cluster.create({
    style,
    nodes: [{ name: 'node-1' }, { name: 'node-2' }],
    pods: [
      { key: 'shop/db', node: 'node-1', tcp: [82] },
      { key: 'shop/web', node: 'node-2' },
      { key: 'shop/client', node: 'node-2' },
    ],
  });
  const api = await FakeApiServer.start();
  const s = await scratch(api);
  const agents = new Map<string, AgentProcess>();
  t.after(async () => {
    // SIGTERM: an agent stops its tcpdump; SIGKILL would leave it holding the NFLOG group.
    for (const a of agents.values()) await a.terminate();
    await c.destroy();
    await api.close();
    await s.cleanup();
  });
  const podObj = (key: string, labels: Record<string, string>): KubeObject => {
    const p = c.pod(key);
    return pod(p.namespace, p.name, labels, p.node, p.ips.v4, { ips: [p.ips.v4, p.ips.v6] });
  };
  api.create('namespaces', namespace('shop'));
  for (const n of c.nodeObjects()) api.create('nodes', structuredClone(n) as KubeObject);
  api.create('pods', podObj('shop/db', { app: 'db' }));
  api.create('pods', podObj('shop/web', { app: 'web' }));
  api.create('pods', podObj('shop/client', { app: 'client' }));
  // db admits web on port 80 only (every protocol); client may send nothing.
  api.create(
    'networkpolicies',
    networkPolicy('shop', 'db-from-web', {
      podSelector: { matchLabels: { app: 'db' } },
      ingress: [
        {
          from: [{ podSelector: { matchLabels: { app: 'web' } } }],
          ports: PROTOCOLS.map((protocol) => ({ protocol, port: 80 })),
        },
      ],
    }),
  );
  api.create(
    'networkpolicies',
    networkPolicy('shop', 'client-no-egress', { podSelector: { matchLabels: { app: 'client' } }, policyTypes: ['Egress'] }),
  );
  const start = (node: string, args: readonly string[]): AgentProcess => {
    const n = c.nodes.find((x) => x.name === node);
    assert.ok(n !== undefined);
    const a = AgentProcess.start({ node, netns: n.netns, kubeconfig: s.kubeconfig, args });
    agents.set(node, a);
    return a;
  };
  const logArgs = ['--log-denied', '--log-denied-rate', String(RATE), '--log-denied-burst', String(BURST)];
  for (const n of c.nodes) start(n.name, logArgs);
  for (const a of agents.values()) await a.waitReady(30_000);
  const node1 = agents.get('node-1') as AgentProcess;
  const node2 = agents.get('node-2') as AgentProcess;
  // The reader is up before the first probe (it is started with the agent; wait for its pid).
  for (const a of [node1, node2])
    await eventually('NFLOG reader running', async () => (await denied(a)).reader?.running === true);

  const web = c.pod('shop/web');
  const db = c.pod('shop/db');
  const client = c.pod('shop/client');
  const ip = (p: typeof web, f: Family): string => (f === 4 ? p.ips.v4 : p.ips.v6);
  const probes: Probe[] = [];
  const wants: Want[] = [];
  const allowed: Probe[] = [];
  for (const family of FAMILIES) {
    for (const protocol of PROTOCOLS) {
      probes.push({ from: 'shop/web', to: 'shop/db', protocol, port: 81, family, via: 'pod' });
      wants.push({
        what: `ingress ${protocol} IPv${family}`,
        direction: 'ingress',
        pod: 'shop/db',
        src: 'shop/web',
        dst: 'shop/db',
        srcIP: ip(web, family),
        dstIP: ip(db, family),
        protocol,
        port: 81,
        policy: 'shop/db-from-web',
      });
      probes.push({ from: 'shop/client', to: 'shop/db', protocol, port: 80, family, via: 'pod' });
      wants.push({
        what: `egress ${protocol} IPv${family}`,
        direction: 'egress',
        pod: 'shop/client',
        src: 'shop/client',
        // node-2 watches only the pods its policies need: db is an address there.
        dst: ip(db, family),
        srcIP: ip(client, family),
        dstIP: ip(db, family),
        protocol,
        port: 80,
        policy: 'shop/client-no-egress',
      });
      allowed.push({ from: 'shop/web', to: 'shop/db', protocol, port: 80, family, via: 'pod' });
    }
  }
  const isAllowed = (p: Probe): boolean => p.from === 'shop/web' && p.port === 80;
  const outcomes = await runProbes(c, [...probes, ...allowed], { expect: (r) => isAllowed(r.probe) });
  for (const o of outcomes)
    assert.equal(
      o.connected,
      isAllowed(o.probe),
      `${o.probe.from} -> ${o.probe.to} ${o.probe.protocol}/${o.probe.port}: ${o.detail}`,
    );

  const agentOf = (w: Want): AgentProcess => (w.direction === 'ingress' ? node1 : node2);
  // Every denied attempt: one aggregated entry with the right pods and reason.
  for (const w of wants) {
    const a = agentOf(w);
    let found: EntryJson[] = [];
    let all: EntryJson[] = [];
    await eventually(`${style}: ${w.what} in /debug/denied`, async () => {
      all = (await denied(a)).entries;
      found = all.filter((e) => sameAttempt(e, w));
      return found.length > 0;
    }).catch((e: unknown) => assert.fail(`${String(e)}\nentries: ${JSON.stringify(all, null, 1)}\n${a.tail(20)}`));
    assert.equal(found.length, 1, `${w.what}: one entry`);
    const e = found[0] as EntryJson;
    assert.equal(e.pod, w.pod, w.what);
    assert.equal(e.src, w.src, w.what);
    assert.equal(e.dst, w.dst, w.what);
    assert.ok(e.count >= 1, w.what);
    assert.ok(e.reason.startsWith(`${w.direction} at ${w.pod}: `), `${w.what}: ${e.reason}`);
    assert.ok(e.reason.includes(w.policy), `${w.what}: ${e.reason}`);
    assert.match(e.reason, /isolated for (ingress|egress)/, w.what);
    const lines = a.lines.filter((l: LogLine) => l['event'] === 'denied' && sameAttempt(l, w));
    assert.equal(lines.length, 1, `${w.what}: one log line (repeats are aggregated)`);
    assert.equal(lines[0]?.['reason'], e.reason);
    assert.equal(lines[0]?.['src'], w.src);
  }
  // Allowed traffic appears nowhere.
  for (const a of [node1, node2]) {
    const all = (await denied(a)).entries;
    assert.deepEqual(
      all.filter((e) => e.src === 'shop/web' && e.port === 80),
      [],
      'allowed connections are not in /debug/denied',
    );
    assert.deepEqual(
      a.lines.filter((l) => String(l['event']).startsWith('denied') && l['src'] === 'shop/web' && l['port'] === 80),
      [],
      'allowed connections are not logged',
    );
    assert.equal(all.length, wants.filter((w) => agentOf(w) === a).length, 'nothing else was denied');
  }
  // Counters: per pod and direction, and the node totals.
  const perPod = async (a: AgentProcess, podName: string, direction: string): Promise<number> =>
    a.metric('nftnp_pod_denied_packets_total', { namespace: 'shop', pod: podName, direction });
  assert.ok((await perPod(node1, 'db', 'ingress')) >= 6, 'db: every denied ingress packet counted');
  assert.ok((await perPod(node2, 'client', 'egress')) >= 6, 'client: every denied egress packet counted');
  assert.equal(await perPod(node2, 'web', 'egress'), 0, 'web is not isolated: no series');
  assert.ok((await node1.metric('nftnp_denied_packets_total', { direction: 'ingress' })) >= 6);
  assert.ok((await node2.metric('nftnp_denied_packets_total', { direction: 'egress' })) >= 6);

  // The `denied` command reads the same endpoint.
  const debugPort = (await node1.ports()).debug;
  const cli = await execa(
    process.execPath,
    ['src/cli/main.ts', 'denied', '--addr', `127.0.0.1:${debugPort}`, '--pod', 'shop/db', '--since', '10m'],
    { reject: false },
  );
  assert.equal(cli.exitCode, 0, cli.stderr);
  assert.match(cli.stdout, /ingress shop\/web \(10\.[0-9.]+\) -> shop\/db \([0-9.]+\) 81\/TCP/);
  assert.match(cli.stdout, /ingress at shop\/db: .*shop\/db-from-web/);

  if (!extras) return;

  // Flood: denied UDP to many ports (each a distinct denial) as fast as one process can send.
  const FLOOD = 20_000;
  const beforeLogged = await node1.metric('nftnp_denied_log_packets_total');
  const beforeCounted = await perPod(node1, 'db', 'ingress');
  const linesBefore = node1.lines.length;
  const t0 = Date.now();
  await runIn(web.netns, 'python3', [
    '-c',
    `import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nfor i in range(${FLOOD}):\n  s.sendto(b'x',('${db.ips.v4}',1000+i%50000))`,
  ]);
  const elapsedS = (Date.now() - t0) / 1000;
  await eventually('flood counted', async () => (await perPod(node1, 'db', 'ingress')) - beforeCounted >= FLOOD);
  // Whatever the kernel logged has arrived once the reader's queue is empty.
  await eventually('flood logged', async () => (await denied(node1)).reader?.queued === 0);
  await new Promise((r) => setTimeout(r, 500));
  const logged = (await node1.metric('nftnp_denied_log_packets_total')) - beforeLogged;
  const d = await denied(node1);
  // The rate limit held: at most the burst plus the rate over the flood's
  // duration (plus the second the test waited) reached the agent.
  assert.ok(logged <= BURST + RATE * (elapsedS + 2) + 5, `logged ${logged} of ${FLOOD} in ${elapsedS}s`);
  assert.ok(logged > 0, 'some of the flood was logged');
  // Memory and log volume bounded: the ring at most its capacity, at most one line per logged packet.
  assert.ok(d.entries.length <= d.capacity, `${d.entries.length} entries`);
  const floodLines = node1.lines.slice(linesBefore).filter((l) => String(l['event']).startsWith('denied'));
  assert.ok(floodLines.length <= logged + 1, `${floodLines.length} lines for ${logged} logged packets`);
  assert.ok(node1.alive());

  // The reader killed: restarted and counted, and denials are logged again.
  const pid = d.reader?.pid;
  assert.ok(typeof pid === 'number');
  // The pid is `ip netns exec`, which execs tcpdump in place: the same process.
  process.kill(pid, 'SIGKILL');
  await eventually('reader restarted', async () => {
    const r = (await denied(node1)).reader;
    return r !== null && r.restarts === 1 && r.running && r.pid !== pid;
  });
  assert.equal(await node1.metric('nftnp_denied_log_reader_restarts_total'), 1);
  await eventually('a denial after the restart is logged', async () => {
    await runProbes(c, [{ from: 'shop/web', to: 'shop/db', protocol: 'TCP', port: 82, family: 4, via: 'pod' }], {
      timeoutMs: 200,
    });
    return (await denied(node1, '?pod=shop/db&direction=ingress')).entries.some((e) => e.port === 82);
  });

  // --log-denied off: the log rule and its limit are gone from the table.
  const withLog = await listTableIn(c.nodes[0]!.netns);
  assert.match(withLog ?? '', /limit name "denied-log" log prefix "nnp:[0-9a-f]{12}:IN" group 1742 snaplen 128/);
  const readerPid = (await denied(node1)).reader?.pid;
  assert.ok(typeof readerPid === 'number');
  await node1.terminate();
  await eventually('the stopped agent took its reader along', () => processGone(readerPid));
  const plain = start('node-1', []);
  await plain.waitReady(30_000);
  await eventually('log rule removed', async () => {
    const text = (await listTableIn(c.nodes[0]!.netns)) ?? '';
    return text.includes('KUBE-POD-FW-') && !text.includes('log prefix') && !text.includes('denied-log');
  });
  const off = await denied(plain);
  assert.equal(off.logDenied, false);
  assert.equal(off.reader, null);
}

test(
  'denied traffic: /debug/denied, logs, counters and the denied command with real packets',
  { timeout: 600_000 },
  async (t) => {
    if (!requireDatapath(t)) return;
    if (!(await hasTcpdump())) {
      if (IN_CI) assert.fail('tcpdump is required (Debian package tcpdump, in .ci/apt-packages)');
      t.skip('tcpdump is not installed');
      return;
    }
    await t.test('routed, with flood, reader restart and --log-denied off', (tt) => scenario(tt, 'routed', true));
    await t.test('bridged', (tt) => scenario(tt, 'bridged', false));
  },
);
