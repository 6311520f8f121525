// Pure helpers of the agent: listing normalization, invalid-policy diffs,
// local pod views, released IPs, the Event body, content negotiation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  PackedListing,
  checkDrift,
  compiledObjects,
  normalizeListing,
  sameObjects,
  tableObjects,
} from '../../src/agent/drift.ts';
import { compileNode } from '../../src/compile/compile.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { diffInvalid, eventMessage, reportsEventFor } from '../../src/agent/invalid-policies.ts';
import { localPodViews, podIPOwners, releasedIPs, releasedPodIPs } from '../../src/agent/local-view.ts';
import { policyEvent } from '../../src/agent/event-sink.ts';
import { wantsText } from '../../src/observability/http-server.ts';
import { node, ns, pod, policy, sel, state } from '../support/state-builder.ts';
import type { ClusterNetworkPolicy, ClusterState } from '../../src/model/types.ts';
import { metricValue, withErrors } from './fakes.ts';
import { createMetrics } from '../../src/observability/metrics.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { agentMetrics } from '../../src/agent/metrics-adapter.ts';
import { reportApply } from '../../src/agent/reports.ts';

const LISTING = `table inet nft-netpol {
\tchain forward {
\t\ttype filter hook forward priority filter; policy accept;
\t\tip daddr @pods counter packets 12 bytes 3400 jump KUBE-POD-FW
\t}
}
`;

test('counters and whitespace do not count as drift; anything else does', () => {
  const canonical = normalizeListing(LISTING);
  assert.deepEqual(checkDrift(canonical, LISTING.replace('packets 12 bytes 3400', 'packets 99999 bytes 1')), { drifted: false });
  assert.deepEqual(checkDrift(canonical, `${LISTING}\n\n`), { drifted: false });
  const missing = checkDrift(canonical, undefined);
  assert.ok(missing.drifted && missing.why === 'table missing');
  const edited = checkDrift(canonical, LISTING.replace('jump KUBE-POD-FW', 'accept'));
  assert.ok(edited.drifted && edited.why === 'table changed');
  assert.match(String(edited.firstDifference), /line 4: expected .*jump KUBE-POD-FW.*, found .*accept/);
  const flushed = checkDrift(canonical, 'table inet nft-netpol {\n}\n');
  assert.ok(flushed.drifted);
});

test("the read-back must hold exactly the script's chains, sets and maps", () => {
  const script =
    'table inet t {}\ndelete table inet t\ntable inet t {\n\tset peer4-a {\n\t\ttype ipv4_addr\n\t}\n\tmap m {\n\t}\n\tchain forward {\n\t}\n}\n';
  assert.deepEqual(tableObjects(script), ['chain forward', 'map m', 'set peer4-a']);
  assert.equal(
    sameObjects(
      tableObjects(script),
      LISTING.replace('chain forward {', 'set peer4-a {\n\t}\n\tmap m {\n\t}\n\tchain forward {'),
    ),
    true,
  );
  assert.equal(sameObjects(tableObjects(script), `${LISTING}\n\tchain intruder {\n\t}`), false);
  // A compiled ruleset names its objects the way its rendered script does.
  const c = compileNode(
    state({
      pods: [pod('default', 'web', { labels: { app: 'web' }, ips: ['10.0.1.2'] })],
      policies: [policy('default', 'deny')],
    }),
    'node-1',
  );
  assert.deepEqual(compiledObjects(c), tableObjects(renderRuleset(c)));
});

test('invalid policies: changed, resolved, same errors unchanged', () => {
  const a = withErrors(policy('default', 'a'), 'x');
  const b = withErrors(policy('default', 'b'), 'y');
  const d1 = diffInvalid(new Map(), state({ policies: [a, b, policy('default', 'ok')] }));
  assert.deepEqual(
    d1.changed.map((p) => p.name),
    ['a', 'b'],
  );
  const d2 = diffInvalid(d1.next, state({ policies: [a, withErrors(policy('default', 'b'), 'z')] }));
  assert.deepEqual(
    d2.changed.map((p) => p.name),
    ['b'],
  );
  const d3 = diffInvalid(d2.next, state({ policies: [a] }));
  assert.deepEqual(d3.changed, []);
  assert.deepEqual(d3.resolved, ['default/b']);
  assert.equal(d3.all.length, 1);
});

test('Event message carries the formatted errors and is bounded', () => {
  const p = { namespace: 'ns', name: 'p', errors: ['ns/p spec.ingress[0].ports[0].endPort: must be >= port (80)'] };
  assert.match(eventMessage(p), /fail-closed.*ns\/p spec\.ingress\[0\]\.ports\[0\]\.endPort: must be >= port \(80\)/);
  assert.equal(eventMessage({ ...p, errors: Array.from({ length: 100 }, () => 'x'.repeat(50)) }).length, 1024);
  const ev = policyEvent({ namespace: 'ns', name: 'p' }, 'InvalidNetworkPolicy', 'm', 'node-1', new Date(0));
  assert.equal(ev.type, 'Warning');
  assert.equal(ev.reason, 'InvalidNetworkPolicy');
  assert.deepEqual(ev.involvedObject, { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', namespace: 'ns', name: 'p' });
  assert.equal(ev.metadata?.namespace, 'ns');
  assert.match(String(ev.metadata?.name), /^p\.[0-9a-f]+$/);
  assert.equal(ev.source?.host, 'node-1');
});

test('an invalid policy is reported by the nodes whose active pods it selects', () => {
  const s = state({
    pods: [
      pod('default', 'a', { labels: { app: 'a' }, ips: ['10.0.0.1'] }),
      pod('default', 'done', { labels: { app: 'b' }, ips: ['10.0.0.2'], phase: 'Failed' }),
    ],
    policies: [
      withErrors(policy('default', 'pa', { podSelector: sel({ app: 'a' }) }), 'x'),
      withErrors(policy('default', 'pb', { podSelector: sel({ app: 'b' }) }), 'y'),
    ],
    nodes: [node('node-1'), node('node-2')],
  });
  assert.equal(reportsEventFor(s, 'node-1', 'default/pa'), true);
  assert.equal(reportsEventFor(s, 'node-2', 'default/pa'), false);
  assert.equal(reportsEventFor(s, 'node-1', 'default/pb'), false, 'a finished pod is not enforced');
  assert.equal(reportsEventFor(s, 'node-1', 'default/gone'), false);
});

test('local pod views list the policies selecting each pod per direction', () => {
  const s = state({
    pods: [
      pod('shop', 'web', { labels: { app: 'web' }, ips: ['10.0.0.1'] }),
      pod('shop', 'remote', { labels: { app: 'web' }, ips: ['10.0.1.1'], node: 'node-2' }),
      pod('shop', 'host', { hostNetwork: true, ips: ['192.168.0.1'] }),
    ],
    policies: [
      policy('shop', 'deny-in'),
      policy('shop', 'web-out', { podSelector: sel({ app: 'web' }), types: { ingress: false, egress: true } }),
      policy('other', 'x'),
    ],
  });
  assert.deepEqual(localPodViews(s, 'node-1'), [
    {
      pod: 'shop/web',
      ips: ['10.0.0.1'],
      phase: 'Running',
      labels: { app: 'web' },
      ingress: ['shop/deny-in'],
      egress: ['shop/web-out'],
      clusterPolicies: [],
    },
  ]);
});

test('local pod views: the ClusterNetworkPolicies whose subject selects each pod, in evaluation order with tier and priority', () => {
  const cnp = (name: string, tier: 'Admin' | 'Baseline', priority: number, team: string): ClusterNetworkPolicy => ({
    name,
    sourceKind: 'ClusterNetworkPolicy',
    tier,
    priority,
    subject: { namespaceSelector: sel({ team }), podSelector: sel() },
    ingress: [
      { name: 'r', action: 'Deny', peers: [{ kind: 'networks', cidrs: ['0.0.0.0/0'] }], protocols: undefined, invalid: false },
    ],
    egress: [],
    errors: [],
  });
  const s: ClusterState = {
    ...state({
      namespaces: [ns('shop', { team: 'a' }), ns('lab', { team: 'b' })],
      pods: [
        pod('shop', 'web', { labels: { app: 'web' }, ips: ['10.0.0.1'] }),
        pod('lab', 'job', { labels: { app: 'job' }, ips: ['10.0.0.2'] }),
      ],
    }),
    clusterPolicies: [
      cnp('z-base', 'Baseline', 1, 'a'),
      cnp('guard', 'Admin', 20, 'a'),
      cnp('first', 'Admin', 3, 'a'),
      cnp('lab', 'Admin', 1, 'b'),
    ],
  };
  const views = new Map(localPodViews(s, 'node-1').map((v) => [v.pod, v.clusterPolicies]));
  assert.deepEqual(views.get('shop/web'), [
    {
      policy: 'ClusterNetworkPolicy first',
      tier: 'Admin',
      priority: 3,
      place: 'Admin tier, priority 3',
      ingressRules: 1,
      egressRules: 0,
    },
    {
      policy: 'ClusterNetworkPolicy guard',
      tier: 'Admin',
      priority: 20,
      place: 'Admin tier, priority 20',
      ingressRules: 1,
      egressRules: 0,
    },
    {
      policy: 'ClusterNetworkPolicy z-base',
      tier: 'Baseline',
      priority: 1,
      place: 'Baseline tier, priority 1',
      ingressRules: 1,
      egressRules: 0,
    },
  ]);
  assert.deepEqual(
    views.get('lab/job')?.map((c) => c.policy),
    ['ClusterNetworkPolicy lab'],
  );
});

test('released IPs: deleted, finished and reused addresses', () => {
  const before = podIPOwners(
    state({
      pods: [
        pod('a', 'x', { ips: ['10.0.0.1'] }),
        pod('a', 'y', { ips: ['10.0.0.2', 'fd00::2'] }),
        pod('a', 'z', { ips: ['10.0.0.3'] }),
      ],
    }),
  );
  const after = podIPOwners(
    state({
      pods: [pod('a', 'y2', { ips: ['10.0.0.2'] }), pod('a', 'z', { ips: ['10.0.0.3'] }), pod('a', 'new', { ips: ['10.0.0.4'] })],
    }),
  );
  assert.deepEqual(releasedIPs(before, after), ['10.0.0.1', '10.0.0.2', 'fd00::2']);
  assert.deepEqual(releasedIPs(after, after), []);
});

test('released IPs from the pod diff agree with the map version', () => {
  const x = pod('a', 'x', { ips: ['10.0.0.1'] });
  const y = pod('a', 'y', { ips: ['10.0.0.2', 'fd00::2'] });
  const z = pod('a', 'z', { ips: ['10.0.0.3'] });
  const w = pod('b', 'w', { ips: ['10.0.0.5'] });
  const before = state({ pods: [x, y, z, w] });
  const cases = [
    state({ pods: [pod('a', 'y2', { ips: ['10.0.0.2'] }), z, pod('a', 'new', { ips: ['10.0.0.4'] }), w] }),
    state({ pods: [x, { ...y, ips: ['10.0.0.9'] }, { ...z, phase: 'Failed' }] }),
    state({ pods: [] }),
    before,
  ];
  for (const after of cases) {
    assert.deepEqual(releasedPodIPs(before, after), releasedIPs(podIPOwners(before), podIPOwners(after)));
  }
  assert.deepEqual(releasedPodIPs(before, cases[1] as ReturnType<typeof state>), ['10.0.0.2', '10.0.0.3', '10.0.0.5', 'fd00::2']);
  // Unsorted input: the pods are paired by key, still the map version's answer.
  const unsorted = { ...before, pods: [...before.pods].reverse() };
  assert.deepEqual(releasedPodIPs(unsorted, cases[2] as ReturnType<typeof state>), [
    '10.0.0.1',
    '10.0.0.2',
    '10.0.0.3',
    '10.0.0.5',
    'fd00::2',
  ]);
});

test('content negotiation: JSON unless text is asked for', () => {
  const u = (q = '') => new URL(`http://x/debug/state${q}`);
  assert.equal(wantsText(u(), undefined), false);
  assert.equal(wantsText(u(), '*/*'), false, 'curl default');
  assert.equal(wantsText(u(), 'application/json'), false);
  assert.equal(wantsText(u(), 'text/plain'), true);
  assert.equal(wantsText(u(), 'text/plain, application/json;q=0.5'), true);
  assert.equal(wantsText(u(), 'application/json, text/plain;q=0.9'), false);
  assert.equal(wantsText(u(), 'text/html,application/xhtml+xml,*/*;q=0.8'), false, 'browsers get JSON');
  assert.equal(wantsText(u('?format=text'), 'application/json'), true);
  assert.equal(wantsText(u('?format=json'), 'text/plain'), false);
});

test('metrics: ClusterNetworkPolicies by tier and the invalid ones, beside the NetworkPolicy count', async () => {
  const m = createMetrics(undefined, { defaultMetrics: false });
  const cnp = (name: string, tier: 'Admin' | 'Baseline', invalid: boolean): ClusterNetworkPolicy => ({
    name,
    sourceKind: 'ClusterNetworkPolicy',
    tier,
    priority: 1,
    subject: { namespaceSelector: sel(), podSelector: sel() },
    ingress: [],
    egress: [],
    errors: invalid ? [{ kind: 'ClusterNetworkPolicy', namespace: undefined, name, path: 'spec.priority', message: 'x' }] : [],
  });
  const s: ClusterState = {
    ...state({ policies: [policy('shop', 'np')] }),
    clusterPolicies: [cnp('a', 'Admin', false), cnp('b', 'Admin', true), cnp('c', 'Baseline', false)],
  };
  const outcome = {
    kind: 'apply',
    result: 'failed',
    mode: 'full',
    reasons: [],
    atUnixMs: 0,
    atMonoMs: 1,
    durationMs: 1,
    latencyMs: undefined,
    stats: undefined,
    update: undefined,
    phases: undefined,
    repair: undefined,
    recovered: false,
    error: 'x',
    exitCode: 1,
    retry: undefined,
    state: s,
    enforced: undefined,
  } as const;
  reportApply(outcome, false, agentMetrics(m), createLogger({ level: 'silent' }));
  assert.equal(await metricValue(m, 'nftnp_cluster_num_policies'), 1);
  assert.equal(await metricValue(m, 'nftnp_cluster_num_cluster_network_policies', { tier: 'Admin' }), 2);
  assert.equal(await metricValue(m, 'nftnp_cluster_num_cluster_network_policies', { tier: 'Baseline' }), 1);
  assert.equal(await metricValue(m, 'nftnp_invalid_cluster_network_policies'), 1);
});

test('a packed canonical listing unpacks to the same text, smaller than it', async () => {
  // Below and above the size packed on the thread pool.
  for (const n of [5000, 20000]) {
    const lines = Array.from({ length: n }, (_, i) => `\t\telements = { 10.${i >> 16}.${(i >> 8) & 255}.${i & 255} }`);
    const text = normalizeListing(['table inet nft-netpol {', ...lines, '}'].join('\n'));
    const packed = await PackedListing.of(text);
    assert.equal(packed.text(), text);
    assert.ok(packed.size < text.length / 4, `packed ${packed.size} of ${text.length}`);
    assert.equal(checkDrift(packed.text(), text).drifted, false);
  }
  assert.equal((await PackedListing.of('')).text(), '');
});

test('normalizeListing trims every line and drops empty ones, as line-by-line trimming would', () => {
  const byLine = (l: string): string =>
    l
      .replace(/packets \d+ bytes \d+/g, 'packets 0 bytes 0')
      .replace(/ expires [0-9dhms.]+/g, '')
      .split('\n')
      .map((x) => x.trimEnd())
      .filter((x) => x !== '')
      .join('\n');
  const cases = [
    '',
    '\n',
    '\n\n\n',
    '   \n\t\n',
    'a',
    'a\n',
    '\na',
    'a  \n\n\tb \t\n\n\n  c\u00a0\n',
    'x\r\ny\r\n',
    'x \u2028y  \n',
    `${LISTING}\n\n`,
    '  counter packets 12 bytes 3400 \n\telements = { 10.0.0.1 expires 4m59s }  \n',
  ];
  for (const c of cases) assert.equal(normalizeListing(c), byLine(c), JSON.stringify(c));
});
