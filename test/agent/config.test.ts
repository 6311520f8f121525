import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCleanupConfig, parseDuration, parseListenAddr, parseRunConfig } from '../../src/agent/config.ts';
import { backoffDelay, retryDelay } from '../../src/agent/backoff.ts';
import { DEFAULT_TENANCY } from '../../src/model/tenancy-config.ts';

test('durations', () => {
  assert.equal(parseDuration('500ms'), 500);
  assert.equal(parseDuration('10s'), 10_000);
  assert.equal(parseDuration('1m'), 60_000);
  assert.equal(parseDuration('1.5s'), 1500);
  assert.equal(parseDuration('2h'), 7_200_000);
  assert.equal(parseDuration('250'), 250);
  for (const bad of ['', 's', '-1s', '1d', '10 s', '1e3', 'abc']) assert.equal(parseDuration(bad), undefined, bad);
});

test('listen addresses', () => {
  assert.deepEqual(parseListenAddr('127.0.0.1:9743'), { host: '127.0.0.1', port: 9743 });
  assert.deepEqual(parseListenAddr(':9742'), { host: '0.0.0.0', port: 9742 });
  assert.deepEqual(parseListenAddr('[::1]:9743'), { host: '::1', port: 9743 });
  assert.deepEqual(parseListenAddr('localhost:0'), { host: 'localhost', port: 0 });
  for (const bad of ['9743', '127.0.0.1', '1.2.3.4:70000', '[nope]:1', 'a b:1', '::1:9743'])
    assert.equal(parseListenAddr(bad), undefined, bad);
});

test('run: defaults, env, flags over env', () => {
  const r = parseRunConfig(['--node', 'n1'], {});
  assert.ok(r.ok);
  assert.deepEqual(r.config, {
    node: 'n1',
    metricsAddr: { host: '0.0.0.0', port: 9742 },
    debugAddr: { host: '127.0.0.1', port: 9743 },
    table: 'nft-netpol',
    denyAction: 'drop',
    driftIntervalMs: 60_000,
    debounceMs: 50,
    logLevel: 'info',
    fromDir: undefined,
    nftPath: 'nft',
    netns: undefined,
    conntrack: true,
    incremental: true,
    nftSession: true,
    peerHoldMs: 1000,
    unknownLocalEndpoints: 'allow',
    allowPodToNode: false,
    logDenied: undefined,
    statusIntervalMs: 5000,
    heartbeatIntervalMs: 30_000,
    agentNamespace: 'nft-netpol-system',
    tenancy: DEFAULT_TENANCY,
    crdRecheckMs: 30_000,
    watchIdleProbeMs: 150_000,
    ruleMetricsMax: 2000,
    ruleCountersIntervalMs: 30_000,
  });
  const e = parseRunConfig([], {
    NODE_NAME: 'from-env',
    METRICS_ADDR: '127.0.0.1:1',
    DEBUG_ADDR: '',
    DENY_ACTION: 'reject',
    DRIFT_INTERVAL: '10s',
    LOG_LEVEL: 'debug',
  });
  assert.ok(e.ok);
  assert.equal(e.config.node, 'from-env');
  assert.deepEqual(e.config.metricsAddr, { host: '127.0.0.1', port: 1 });
  assert.deepEqual(e.config.debugAddr, { host: '127.0.0.1', port: 9743 }, 'an empty variable counts as unset');
  assert.equal(e.config.denyAction, 'reject');
  assert.equal(e.config.driftIntervalMs, 10_000);
  assert.equal(e.config.logLevel, 'debug');
  const f = parseRunConfig(['--node', 'flag', '--debug-addr', '', '--drift-interval', '0', '--no-conntrack'], {
    NODE_NAME: 'env',
  });
  assert.ok(f.ok);
  assert.equal(f.config.node, 'flag');
  assert.equal(f.config.debugAddr, undefined, 'an explicit empty flag disables');
  assert.equal(f.config.driftIntervalMs, 0);
  assert.equal(f.config.conntrack, false);
  // Per-rule counters: the cap and the read interval, by flag or env; bad values fail with the flag's name.
  const rc = parseRunConfig(['--node', 'n', '--rule-metrics-max', '5'], { RULE_METRICS_MAX: '9', RULE_COUNTERS_INTERVAL: '0' });
  assert.ok(rc.ok);
  assert.deepEqual([rc.config.ruleMetricsMax, rc.config.ruleCountersIntervalMs], [5, 0]);
  const bad = parseRunConfig(['--node', 'n', '--rule-metrics-max', '-1'], {});
  assert.ok(!bad.ok && !bad.help && bad.error.includes('--rule-metrics-max'));
  // Held peer addresses: the quiet time before the fold, by flag or env; 0 turns holding off.
  const ph = parseRunConfig(['--node', 'n', '--peer-hold', '0'], { PEER_HOLD: '5s' });
  assert.ok(ph.ok && ph.config.peerHoldMs === 0);
  const phEnv = parseRunConfig(['--node', 'n'], { PEER_HOLD: '250ms' });
  assert.ok(phEnv.ok && phEnv.config.peerHoldMs === 250);
});

test('run: usage errors say what is wrong', () => {
  const cases: [string[], RegExp][] = [
    [[], /--node \(or NODE_NAME\) is required/],
    [['--node', 'n', '--bogus'], /bogus/],
    [['--node', 'n', '--deny-action', 'maybe'], /--deny-action must be drop or reject/],
    [['--node', 'n', '--drift-interval', '5x'], /--drift-interval must be a duration/],
    [['--node', 'n', '--drift-interval', '5ms'], /at least 100ms/],
    [['--node', 'n', '--debounce', 'soon'], /--debounce/],
    [['--node', 'n', '--peer-hold', 'later'], /--peer-hold must be a duration/],
    [['--node', 'n', '--peer-hold', '5ms'], /--peer-hold must be 0 or at least 10ms/],
    [['--node', 'n', '--metrics-addr', 'nope'], /--metrics-addr must be host:port/],
    [['--node', 'n', '--table', 'bad;name'], /--table/],
    [['--node', 'n', '--log-level', 'loud'], /--log-level/],
    [['--node', 'n', '--netns', '../etc'], /--netns/],
  ];
  for (const [argv, re] of cases) {
    const r = parseRunConfig(argv, {});
    assert.ok(!r.ok && !r.help, argv.join(' '));
    assert.match(r.error, re, argv.join(' '));
  }
  const h = parseRunConfig(['--help'], {});
  assert.ok(!h.ok && h.help);
});

test('cleanup flags', () => {
  const r = parseCleanupConfig(['--table', 't1', '--netns', 'ns1'], {});
  assert.ok(r.ok);
  assert.deepEqual(r.config, { table: 't1', netns: 'ns1', nftPath: 'nft' });
  const bad = parseCleanupConfig(['--table', 'x y'], {});
  assert.ok(!bad.ok && !bad.help);
});

test('backoff doubles from the initial delay up to the cap', () => {
  const p = { initialMs: 100, maxMs: 30_000 };
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((n) => backoffDelay(p, n)),
    [100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000],
  );
  assert.equal(backoffDelay(p, 10_000), 30_000);
  assert.equal(backoffDelay(p, 0), 0);
});

test('--log-denied: off by default; flag or LOG_DENIED turns it on; rate, burst and group validated', () => {
  const on = parseRunConfig(['--node', 'n', '--log-denied'], {});
  assert.ok(on.ok);
  assert.deepEqual(on.config.logDenied, { group: 1742, ratePerSecond: 100, burst: 200, tcpdumpPath: 'tcpdump' });
  const env = parseRunConfig(['--node', 'n'], {
    LOG_DENIED: 'true',
    LOG_DENIED_RATE: '20/s',
    LOG_DENIED_BURST: '5',
    LOG_DENIED_GROUP: '7',
    TCPDUMP: '/usr/sbin/tcpdump',
  });
  assert.ok(env.ok);
  assert.deepEqual(env.config.logDenied, { group: 7, ratePerSecond: 20, burst: 5, tcpdumpPath: '/usr/sbin/tcpdump' });
  const off = parseRunConfig(['--node', 'n', '--log-denied-rate', '10'], { LOG_DENIED: 'false' });
  assert.ok(off.ok);
  assert.equal(off.config.logDenied, undefined);
  for (const [args, env2, re] of [
    [['--log-denied-rate', '0'], {}, /--log-denied-rate must be a whole number from 1/],
    [['--log-denied-burst', 'x'], {}, /--log-denied-burst/],
    [['--log-denied-group', '70000'], {}, /--log-denied-group must be a whole number from 1 to 65535/],
    [[], { LOG_DENIED: 'yes' }, /LOG_DENIED must be true or false/],
  ] as const) {
    const r = parseRunConfig(['--node', 'n', '--log-denied', ...args], env2);
    assert.ok(!r.ok && !r.help);
    assert.match(r.error, re);
  }
});

test('--no-nft-session: the long-lived nft -i is on by default; the flag turns it off', () => {
  const def = parseRunConfig(['--node', 'n'], {});
  assert.ok(def.ok);
  assert.equal(def.config.nftSession, true);
  const off = parseRunConfig(['--node', 'n', '--no-nft-session'], {});
  assert.ok(off.ok);
  assert.equal(off.config.nftSession, false);
});

test('--allow-pod-to-node: off by default; the flag or ALLOW_POD_TO_NODE turns it on', () => {
  const def = parseRunConfig(['--node', 'n'], {});
  assert.ok(def.ok);
  assert.equal(def.config.allowPodToNode, false);
  const flag = parseRunConfig(['--node', 'n', '--allow-pod-to-node'], {});
  assert.ok(flag.ok);
  assert.equal(flag.config.allowPodToNode, true);
  for (const v of ['true', '1']) {
    const env = parseRunConfig(['--node', 'n'], { ALLOW_POD_TO_NODE: v });
    assert.ok(env.ok);
    assert.equal(env.config.allowPodToNode, true, v);
  }
  const off = parseRunConfig(['--node', 'n'], { ALLOW_POD_TO_NODE: 'false' });
  assert.ok(off.ok);
  assert.equal(off.config.allowPodToNode, false);
  const bad = parseRunConfig(['--node', 'n'], { ALLOW_POD_TO_NODE: 'yes' });
  assert.ok(!bad.ok && !bad.help);
  assert.match(bad.error, /ALLOW_POD_TO_NODE must be true or false/);
});

test('run: status and heartbeat intervals, agent namespace', () => {
  const r = parseRunConfig(['--node', 'n1', '--status-interval', '0', '--heartbeat-interval', '10s'], { POD_NAMESPACE: 'sys' });
  assert.ok(r.ok);
  assert.equal(r.config.statusIntervalMs, 0);
  assert.equal(r.config.heartbeatIntervalMs, 10_000);
  assert.equal(r.config.agentNamespace, 'sys');
  const bad = parseRunConfig(['--node', 'n1', '--heartbeat-interval', '10ms'], {});
  assert.ok(!bad.ok && !bad.help && /--heartbeat-interval must be 0 or at least 1000ms/.test(bad.error));
  const ns = parseRunConfig(['--node', 'n1', '--agent-namespace', 'Bad_NS'], {});
  assert.ok(!ns.ok && !ns.help && /--agent-namespace/.test(ns.error));
});

test('retry delay: the backoff, or a multiple of what the failed attempt cost (at most 30 s)', () => {
  const p = { initialMs: 100, maxMs: 3200, costFactor: 4 };
  assert.equal(retryDelay(p, 1, 10), 100);
  assert.equal(retryDelay(p, 6, 10), 3200);
  assert.equal(retryDelay(p, 9, 10), 3200);
  assert.equal(retryDelay(p, 1, 2000), 8000, 'a 2 s transaction is retried after 8 s');
  assert.equal(retryDelay(p, 1, 60_000), 30_000);
  assert.equal(retryDelay({ initialMs: 100, maxMs: 3200 }, 1, 2000), 100, 'no cost floor unless asked');
});

test('tenancy flags: defaults, values, none, off, bad values', () => {
  const run = (argv: string[], env: Record<string, string> = {}) => parseRunConfig(['--node', 'n', ...argv], env);
  const on = run([]);
  assert.ok(on.ok);
  assert.deepEqual(on.config.tenancy, DEFAULT_TENANCY);
  const set = run(['--isolation-dns-service', 'dns/coredns', '--isolation-node-addresses', 'all'], {
    ISOLATION_NODE_LOCAL_DNS: '169.254.20.10, fd00::a',
  });
  assert.ok(set.ok);
  assert.deepEqual(set.config.tenancy, {
    dnsService: { namespace: 'dns', name: 'coredns' },
    nodeLocalDNS: ['169.254.20.10', 'fd00::a'],
    nodeAddresses: 'all',
  });
  const none = run(['--isolation-dns-service', '', '--isolation-node-local-dns', '']);
  assert.ok(none.ok);
  assert.deepEqual(none.config.tenancy, { dnsService: undefined, nodeLocalDNS: [], nodeAddresses: 'internal' });
  const off = run(['--no-tenancy']);
  assert.ok(off.ok);
  assert.equal(off.config.tenancy, undefined);
  const offEnv = run([], { TENANCY: 'false' });
  assert.ok(offEnv.ok);
  assert.equal(offEnv.config.tenancy, undefined);
  for (const [argv, msg] of [
    [['--isolation-dns-service', 'kube-dns'], /--isolation-dns-service: "kube-dns" is not NAMESPACE\/NAME/],
    [['--isolation-node-local-dns', '169.254.25'], /--isolation-node-local-dns: "169.254.25" is not an IP address/],
    [['--isolation-node-addresses', 'external'], /--isolation-node-addresses must be internal or all/],
  ] as const) {
    const r = run([...argv]);
    assert.ok(!r.ok && !r.help && msg.test(r.error), JSON.stringify(r));
  }
});
