// The Admin tier's Pass folded into the NetworkPolicy tier (compile/pass-fold.ts),
// in the shared and the per-class tier layouts: random ClusterNetworkPolicies
// (Pass, Accept and Deny rules over namespaces and pods, ports or not) and
// NetworkPolicies over the upstream pods, all on one node, every pod pair
// walked through the compiled ruleset (test/support/ir-eval.ts: nftables'
// jump, goto and return) and compared with the reference evaluator. The
// kernel does the same with packets in test/datapath/pass-fold.test.ts and
// the differential fuzzer.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { compileNode } from '../../src/compile/compile.ts';
import type { Family, Protocol } from '../../src/model/types.ts';
import { verdict } from '../../src/policy/verdict.ts';
import type { TierLayout } from '../../src/ruleset/options.ts';
import { clusterNetworkPolicy } from '../cases/cnp-conformance.ts';
import type { RawCnpPeer, RawCnpProtocol, RawCnpRule } from '../cases/cnp-conformance.ts';
import { ALLOW_FROM_Y, X_A_AND_B } from '../cases/fold-fixtures.ts';
import { networkPolicy } from '../cases/raw.ts';
import type { RawObject } from '../cases/raw.ts';
import { UPSTREAM_NAMESPACES, UPSTREAM_POD_NAMES, UPSTREAM_PODS, upstreamModel } from '../cases/upstream-model.ts';
import { stateOf } from '../harness/enforce.ts';
import { walk } from '../support/ir-eval.ts';
import { podOf } from '../support/state-builder.ts';

const NODE = 'node-1';
const MODEL = upstreamModel({
  podIPs: (ns, p) => {
    const n = UPSTREAM_NAMESPACES.indexOf(ns as 'x') + 1;
    const i = UPSTREAM_POD_NAMES.indexOf(p as 'a') + 10;
    return { v4: `10.244.${n}.${i}`, v6: `fd00:10:244:${n}::${i}` };
  },
  nodeName: () => NODE,
});
const PROBES: readonly { protocol: Protocol; port: number }[] = [
  { protocol: 'TCP', port: 80 },
  { protocol: 'TCP', port: 81 },
  { protocol: 'UDP', port: 80 },
];
const LAYOUTS: readonly TierLayout[] = ['per-class', 'shared', 'auto'];
const FOLDED = 'Pass or no Admin rule';

/** Probes whose walk through node-1's ruleset differs from the evaluator's verdict; and how many identity chains were folded. */
function check(objects: readonly RawObject[], tierLayout: TierLayout): { wrong: string[]; folded: number } {
  const state = stateOf([...MODEL.namespaces, ...MODEL.pods, ...objects]);
  const rs = compileNode(state, NODE, { tierLayout, denyAction: 'reject' });
  const folded = rs.chains.filter((c) => c.rules.some((r) => r.comment?.startsWith(FOLDED) === true)).length;
  const wrong: string[] = [];
  for (const family of [4, 6] as Family[])
    for (const from of UPSTREAM_PODS)
      for (const to of UPSTREAM_PODS) {
        if (from === to) continue;
        const src = podOf(state, from);
        const dst = podOf(state, to);
        const addr = (ips: readonly string[]) => ips.find((ip) => ip.includes(':') === (family === 6))!;
        for (const { protocol, port } of PROBES) {
          const v = verdict(state, { kind: 'pod', pod: src }, { kind: 'pod', pod: dst }, protocol, port, { family });
          const expected = v.ingress.allowed && v.egress.allowed;
          const got = walk(rs, {
            family,
            saddr: addr(src.ips),
            daddr: addr(dst.ips),
            proto: protocol === 'TCP' ? 'tcp' : protocol === 'UDP' ? 'udp' : 'sctp',
            dport: port,
          });
          if ((got === 'accept') !== expected)
            wrong.push(`${from}->${to} ${protocol}/${port} v${family}: ${got}, evaluator ${expected}`);
        }
      }
  return { wrong, folded };
}

const nsName = fc.constantFrom(...UPSTREAM_NAMESPACES);
const podName = fc.constantFrom(...UPSTREAM_POD_NAMES);
const peerArb: fc.Arbitrary<RawCnpPeer> = fc.oneof(
  nsName.map((n) => ({ namespaces: { matchLabels: { ns: n } } })),
  fc.tuple(nsName, podName).map(([n, p]) => ({
    pods: { namespaceSelector: { matchLabels: { ns: n } }, podSelector: { matchLabels: { pod: p } } },
  })),
);
const protocolsArb: fc.Arbitrary<RawCnpProtocol[] | undefined> = fc.constantFrom(
  undefined,
  [{ tcp: { destinationPort: { number: 80 } } }],
  [{ tcp: { destinationPort: { range: { start: 80, end: 81 } } } }],
  [{ udp: { destinationPort: { number: 80 } } }, { tcp: { destinationPort: { number: 81 } } }],
);
const ruleArb = (dir: 'from' | 'to'): fc.Arbitrary<RawCnpRule> =>
  fc
    .record({
      action: fc.constantFrom<RawCnpRule['action']>('Pass', 'Pass', 'Accept', 'Deny'),
      peers: fc.array(peerArb, { minLength: 1, maxLength: 2 }),
      protocols: protocolsArb,
    })
    .map(({ action, peers, protocols }) => ({ action, [dir]: peers, ...(protocols === undefined ? {} : { protocols }) }));
const subjectArb = fc.oneof(
  fc.constant(X_A_AND_B),
  nsName.map((n) => ({ namespaces: { matchLabels: { ns: n } } })),
  fc.constant({ namespaces: {} }),
);
const cnpArb = (i: number): fc.Arbitrary<RawObject> =>
  fc
    .record({
      tier: fc.constantFrom<'Admin' | 'Baseline'>('Admin', 'Admin', 'Baseline'),
      priority: fc.integer({ min: 0, max: 3 }),
      subject: subjectArb,
      ingress: fc.array(ruleArb('from'), { maxLength: 3 }),
      egress: fc.array(ruleArb('to'), { maxLength: 2 }),
    })
    .map((spec) => clusterNetworkPolicy(`cnp-${i}`, spec));
const npArb = (i: number): fc.Arbitrary<RawObject> =>
  fc
    .record({
      ns: nsName,
      pod: fc.option(podName, { nil: undefined }),
      from: nsName,
      fromPod: fc.option(podName, { nil: undefined }),
      port: fc.option(fc.constantFrom(80, 81), { nil: undefined }),
    })
    .map(({ ns, pod, from, fromPod, port }) =>
      networkPolicy(ns, `np-${i}`, {
        podSelector: pod === undefined ? {} : { matchLabels: { pod } },
        ingress: [
          {
            from: [
              {
                namespaceSelector: { matchLabels: { ns: from } },
                ...(fromPod === undefined ? {} : { podSelector: { matchLabels: { pod: fromPod } } }),
              },
            ],
            ...(port === undefined ? {} : { ports: [{ protocol: 'TCP' as const, port }] }),
          },
        ],
      }),
    );
const objectsArb = fc
  .tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 0, max: 3 }))
  .chain(([c, n]) =>
    fc
      .tuple(fc.tuple(...[0, 1, 2].map(cnpArb)), fc.tuple(...[0, 1, 2].map(npArb)))
      .map(([cs, ns]) => [...cs.slice(0, c), ...ns.slice(0, n)]),
  );

test('the fixtures: an Admin Pass folded in the per-class layout, decisions as the evaluator says', () => {
  const PASS = clusterNetworkPolicy('pass-y-z', {
    tier: 'Admin',
    priority: 5,
    subject: X_A_AND_B,
    ingress: [
      { name: 'pass-y', action: 'Pass', from: [{ namespaces: { matchLabels: { ns: 'y' } } }] },
      { name: 'pass-z', action: 'Pass', from: [{ namespaces: { matchLabels: { ns: 'z' } } }] },
    ],
  });
  const BASELINE = clusterNetworkPolicy('baseline-no-y', {
    tier: 'Baseline',
    priority: 5,
    subject: { pods: { namespaceSelector: { matchLabels: { ns: 'x' } }, podSelector: { matchLabels: { pod: 'b' } } } },
    ingress: [{ name: 'no-y', action: 'Deny', from: [{ namespaces: { matchLabels: { ns: 'y' } } }] }],
  });
  for (const layout of LAYOUTS) {
    const { wrong, folded } = check([ALLOW_FROM_Y, PASS, BASELINE], layout);
    assert.deepEqual(wrong, [], layout);
    // ns y's identity (IPv4 and IPv6) continues in the NetworkPolicy identity allowing y; z's has none.
    assert.equal(folded, 2, layout);
  }
});

test('random tiers and NetworkPolicies: each layout, folded, decides as the evaluator', () => {
  const folded: Record<string, number> = {};
  fc.assert(
    fc.property(objectsArb, (objects) => {
      for (const layout of LAYOUTS) {
        const r = check(objects, layout);
        assert.deepEqual(r.wrong, [], layout);
        folded[layout] = (folded[layout] ?? 0) + r.folded;
      }
    }),
    { numRuns: 120, seed: 2211 },
  );
  // The fold was exercised in every layout.
  for (const layout of LAYOUTS) assert.ok((folded[layout] ?? 0) > 0, `${layout}: nothing folded`);
});
