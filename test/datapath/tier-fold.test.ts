// The per-class tier layout with an identity's few decisions folded into its
// chain as rules (compile/tiers.ts foldedDecisions), with real packets: a Pass
// on one port before a Deny of every TCP port from the same peers. The folded
// rules `goto` the rule chains like the maps did, so the Pass rule's `return`
// goes back past the identity chain (to the NetworkPolicy tier) instead of on
// to the protocol's Deny. Both families; the oracle is the reference evaluator.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Family } from '../../src/model/types.ts';
import { verdict } from '../../src/policy/verdict.ts';
import { clusterNetworkPolicy } from '../cases/cnp-conformance.ts';
import { ALLOW_FROM_Y, X_A_AND_B } from '../cases/fold-fixtures.ts';
import { UPSTREAM_PODS, UPSTREAM_PORTS } from '../cases/upstream-model.ts';
import { Cluster } from '../harness/cluster.ts';
import { applyState, stateOf } from '../harness/enforce.ts';
import { runProbes, type Probe } from '../harness/probe.ts';
import { datapathSkip } from '../harness/requirements.ts';
import { upstreamClusterSpec, upstreamObjects } from '../harness/upstream.ts';
import { podOf } from '../support/state-builder.ts';

const skip = datapathSkip();
const OPTS = { denyAction: 'reject', tierLayout: 'per-class' } as const;
const TARGETS = ['x/a', 'x/b'];

const PASS_80_DENY_TCP = clusterNetworkPolicy('y-80-passed-rest-denied', {
  tier: 'Admin',
  priority: 5,
  subject: X_A_AND_B,
  ingress: [
    {
      name: 'pass-80',
      action: 'Pass',
      from: [{ namespaces: { matchLabels: { ns: 'y' } } }],
      protocols: [{ tcp: { destinationPort: { number: 80 } } }],
    },
    {
      name: 'deny-tcp',
      action: 'Deny',
      from: [{ namespaces: { matchLabels: { ns: 'y' } } }],
      protocols: [{ tcp: { destinationPort: { range: { start: 1, end: 65535 } } } }],
    },
  ],
});

describe('per-class tier layout, decisions folded into the identity chain, routed pod network', { skip }, () => {
  let c: Cluster;
  before(async () => {
    c = await Cluster.create(upstreamClusterSpec('routed'));
  });
  after(async () => {
    await c?.destroy();
  });

  test('a folded Pass goes on to the NetworkPolicy tier, the protocol default after it denies, IPv4 and IPv6', async () => {
    const state = stateOf([...upstreamObjects(c), ALLOW_FROM_Y, PASS_80_DENY_TCP]);
    const rulesets = new Map((await applyState(c, state, OPTS)).map((a) => [a.node, a.compiled]));
    // Folded: ns y's identity chain decides with rules (port 0 and 80, then TCP's default, the Deny), and no decision map is left for it.
    const rs = rulesets.get(podOf(state, 'x/a').nodeName as string)!;
    const folded = rs.chains.filter(
      (ch) => ch.role === 'peers' && ch.rules.some((r) => r.matches.some((m) => m.kind === 'l4port')),
    );
    assert.ok(folded.length >= 1, 'a folded identity chain');
    for (const ch of folded) {
      const kinds = ch.rules.map((r) => `${r.matches.map((m) => m.kind).join(' ')} ${r.verdict.kind}`);
      assert.ok(kinds.includes('l4port goto') && kinds.at(-1) === 'l4proto goto', `${ch.name}: ${kinds.join(', ')}`);
      assert.ok(!ch.rules.some((r) => r.verdict.kind === 'decisionVmap'), ch.name);
    }

    const probes: Probe[] = [];
    for (const family of [4, 6] as Family[])
      for (const to of TARGETS)
        for (const from of UPSTREAM_PODS.filter((k) => k !== to))
          for (const port of UPSTREAM_PORTS) probes.push({ from, to, protocol: 'TCP', port, family, via: 'pod' });
    const expected = (p: Probe): boolean => {
      const v = verdict(
        state,
        { kind: 'pod', pod: podOf(state, p.from) },
        { kind: 'pod', pod: podOf(state, p.to) },
        'TCP',
        p.port,
      );
      return v.ingress.allowed && v.egress.allowed;
    };
    const out = await runProbes(c, probes, { expect: (r) => expected(r.probe) });
    const wrong = out
      .filter((o) => o.connected !== expected(o.probe))
      .map((o) => `${o.probe.from}->${o.probe.to} ${o.probe.port} v${o.probe.family}`);
    assert.deepEqual(wrong, []);
    // Spelled out: y reaches both on 80 (passed: x/a's NetworkPolicy allows y, nothing isolates x/b), neither on 81.
    const connected = (from: string, to: string, port: number): boolean =>
      out.some((o) => o.probe.from === from && o.probe.to === to && o.probe.port === port && o.probe.family === 4 && o.connected);
    assert.ok(connected('y/a', 'x/a', 80) && connected('y/a', 'x/b', 80));
    assert.ok(!connected('y/a', 'x/a', 81) && !connected('y/a', 'x/b', 81));
    assert.ok(!connected('z/a', 'x/a', 80) && connected('z/a', 'x/b', 81));
  });
});
