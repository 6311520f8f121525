// The Admin tier's Pass folded into the NetworkPolicy tier's lookup
// (compile/pass-fold.ts), with real packets: connections an Admin rule
// passes are decided by the NetworkPolicy tier (allowed where a
// NetworkPolicy allows, denied where the pod is isolated and none does), by
// the Baseline tier for a pod no NetworkPolicy isolates, in both families;
// the oracle is the reference evaluator. The Pass rule's counter still counts
// the connections it passed on. In the shared and the per-class tier layout.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Family } from '../../src/model/types.ts';
import { verdict } from '../../src/policy/verdict.ts';
import { clusterNetworkPolicy } from '../cases/cnp-conformance.ts';
import { ALLOW_FROM_Y, X_A_AND_B } from '../cases/fold-fixtures.ts';
import { UPSTREAM_PODS } from '../cases/upstream-model.ts';
import { Cluster } from '../harness/cluster.ts';
import { applyState, stateOf } from '../harness/enforce.ts';
import { runProbes, type Probe } from '../harness/probe.ts';
import { datapathSkip } from '../harness/requirements.ts';
import { upstreamClusterSpec, upstreamObjects } from '../harness/upstream.ts';
import { podOf } from '../support/state-builder.ts';

const skip = datapathSkip();
// Both tier layouts of compile/tiers.ts fold (the per-class one through its classes' peer maps).
const LAYOUTS = ['shared', 'per-class'] as const;
const TARGETS = ['x/a', 'x/b'];

const ns = (n: string) => ({ namespaces: { matchLabels: { ns: n } } });
const PASS = clusterNetworkPolicy('pass-y-z', {
  tier: 'Admin',
  priority: 5,
  subject: X_A_AND_B,
  ingress: [
    { name: 'pass-y', action: 'Pass', from: [ns('y')] },
    { name: 'pass-z', action: 'Pass', from: [ns('z')] },
  ],
});
const BASELINE_DENY_Y = clusterNetworkPolicy('baseline-no-y', {
  tier: 'Baseline',
  priority: 5,
  subject: { pods: { namespaceSelector: { matchLabels: { ns: 'x' } }, podSelector: { matchLabels: { pod: 'b' } } } },
  ingress: [{ name: 'no-y', action: 'Deny', from: [ns('y')] }],
});

interface NftJson {
  nftables?: { rule?: { chain?: string; expr?: Record<string, unknown>[] } }[];
}

/** Packets counted by the rules of the chains whose name matches. */
async function packets(c: Cluster, node: string, chain: (name: string) => boolean): Promise<number> {
  const doc = JSON.parse((await c.exec(node, 'nft', ['-j', 'list', 'table', 'inet', 'nft-netpol'])).stdout) as NftJson;
  let n = 0;
  for (const item of doc.nftables ?? [])
    if (item.rule?.chain !== undefined && chain(item.rule.chain))
      for (const e of item.rule.expr ?? []) {
        const k = e['counter'] as { packets?: number } | undefined;
        if (typeof k?.packets === 'number') n += k.packets;
      }
  return n;
}

describe('an Admin Pass folded into the NetworkPolicy tier, routed pod network', { skip }, () => {
  let c: Cluster;
  before(async () => {
    c = await Cluster.create(upstreamClusterSpec('routed'));
  });
  after(async () => {
    await c?.destroy();
  });

  for (const tierLayout of LAYOUTS)
    test(`${tierLayout} layout: passed connections get the NetworkPolicy or Baseline verdict, IPv4 and IPv6, and the Pass rules count them`, async () => {
      const state = stateOf([...upstreamObjects(c), ALLOW_FROM_Y, PASS, BASELINE_DENY_Y]);
      const rulesets = new Map(
        (await applyState(c, state, { denyAction: 'reject', tierLayout })).map((a) => [a.node, a.compiled]),
      );
      const node = podOf(state, 'x/a').nodeName as string;
      const rs = rulesets.get(node)!;
      // The fold applied: the identities of ns y and z continue in a NetworkPolicy identity's chain.
      const folded = rs.chains.filter((ch) => ch.rules.some((r) => r.comment?.startsWith('Pass or no Admin rule') === true));
      assert.ok(folded.length >= 2, `folded identity chains: ${folded.map((ch) => ch.name).join(' ')}`);
      const passChains = rs.chains.filter((ch) => ch.role === 'rule' && ch.counts?.action === 'Pass').map((ch) => ch.name);
      assert.equal(passChains.length, 2);
      // x/a and x/b may sit on different nodes: the Pass rules' chains count on both.
      const passedOnNodes = async (): Promise<number> => {
        let n = 0;
        for (const x of c.nodes) n += await packets(c, x.name, (name) => passChains.includes(name));
        return n;
      };
      const passedBefore = await passedOnNodes();

      const probes: Probe[] = [];
      for (const family of [4, 6] as Family[])
        for (const to of TARGETS)
          for (const from of UPSTREAM_PODS.filter((k) => k !== to))
            probes.push({ from, to, protocol: 'TCP', port: 80, family, via: 'pod' });
      const expected = (p: Probe): boolean => {
        const v = verdict(state, { kind: 'pod', pod: podOf(state, p.from) }, { kind: 'pod', pod: podOf(state, p.to) }, 'TCP', 80);
        return v.ingress.allowed && v.egress.allowed;
      };
      const out = await runProbes(c, probes, { expect: (r) => expected(r.probe) });
      const wrong = out
        .filter((o) => o.connected !== expected(o.probe))
        .map((o) => `${o.probe.from}->${o.probe.to} v${o.probe.family}`);
      assert.deepEqual(wrong, []);
      // What the evaluator says, spelled out: y reaches x/a (passed, then allowed), not x/b (passed, then Baseline Deny); z reaches x/b only.
      const connected = (from: string, to: string): boolean =>
        out.some((o) => o.probe.from === from && o.probe.to === to && o.probe.family === 4 && o.connected);
      assert.ok(connected('y/a', 'x/a') && !connected('y/a', 'x/b'));
      assert.ok(!connected('z/a', 'x/a') && connected('z/a', 'x/b'));
      assert.ok(!connected('x/c', 'x/a') && connected('x/c', 'x/b'));
      // Every probe from y and z to x/a or x/b was passed by one of the two rules (retries may add).
      const passed = (await passedOnNodes()) - passedBefore;
      const fromYZ = probes.filter((p) => p.from.startsWith('y/') || p.from.startsWith('z/')).length;
      assert.ok(passed >= fromYZ, `Pass rules counted ${passed} of ${fromYZ}`);
    });
});
