// The biggest pod identity out of its pod peer map (compile/peer-split.ts),
// with real packets, through the agent's incremental path: NodeCompiler (a
// remote pod's relabel is PeerChurn on the target's node) and renderUpdate,
// one `nft` transaction per node per step. With a threshold of 2 addresses,
// remote pods move into the split identity, out of it, the choice moves to
// another identity (its addresses and the old one's swap places in one
// transaction), and the split goes when every identity is below it; after
// each step every probe to the target ends as the reference evaluator says.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { NodeCompiler } from '../../src/compile/node-compiler.ts';
import type { ClusterState, Family } from '../../src/model/types.ts';
import { runNft } from '../../src/nft/exec.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { renderUpdate } from '../../src/nft/update.ts';
import { verdict } from '../../src/policy/verdict.ts';
import type { CompiledRuleset } from '../../src/ruleset/ir.ts';
import { GROUPS_POLICY as POLICY, withGroups } from '../cases/group-peers.ts';
import { UPSTREAM_PODS } from '../cases/upstream-model.ts';
import { Cluster } from '../harness/cluster.ts';
import { stateOf } from '../harness/enforce.ts';
import { runProbes, type Probe } from '../harness/probe.ts';
import { datapathSkip } from '../harness/requirements.ts';
import { upstreamClusterSpec, upstreamObjects } from '../harness/upstream.ts';
import { podOf } from '../support/state-builder.ts';

const skip = datapathSkip();
const TARGET = 'x/a';
const OPTS = { denyAction: 'reject', peerSplitMin: 2 } as const;

const splitChain = (rs: CompiledRuleset, f: Family): string | undefined =>
  rs.sets.find((x) => x.split !== undefined && x.split.direction === 'ingress' && x.split.family === f)?.split?.chain;

describe('the biggest peer identity in a plain set, routed pod network', { skip }, () => {
  let c: Cluster;
  before(async () => {
    c = await Cluster.create(upstreamClusterSpec('routed'));
  });
  after(async () => {
    await c?.destroy();
  });

  test('remote pods moving into and out of the split identity, the choice moving, the split going: every probe as the evaluator says', async () => {
    const base = stateOf([...upstreamObjects(c), POLICY]);
    const targetNode = podOf(base, TARGET).nodeName as string;
    const compilers = new Map(c.nodes.map((n) => [n.name, new NodeCompiler(n.name, OPTS)]));
    const applied = new Map<string, CompiledRuleset>();
    const probes: Probe[] = [];
    for (const family of [4, 6] as Family[])
      for (const from of UPSTREAM_PODS.filter((k) => k !== TARGET))
        for (const port of [80, 81]) probes.push({ from, to: TARGET, protocol: 'TCP', port, family, via: 'pod' });

    /** Compiles and applies `state` on every node (the first time in full, then incrementally); probes; returns the target node's ruleset. */
    const step = async (label: string, state: ClusterState, mode?: string): Promise<CompiledRuleset> => {
      for (const n of c.nodes) {
        const nc = compilers.get(n.name)!;
        const next = nc.compile(state);
        if (mode !== undefined && n.name === targetNode) assert.equal(nc.lastMode, mode, `${label}: compile mode`);
        const prev = applied.get(n.name);
        let text = renderRuleset(next);
        if (prev !== undefined) {
          const u = renderUpdate(prev, next);
          assert.equal(u.kind, 'incremental', `${label}: ${u.kind === 'full' ? u.reason : ''}`);
          text = u.text;
        }
        const r = await runNft(text, { netns: n.netns });
        assert.ok(r.ok, r.ok ? '' : `${label}: ${r.error}\n${text}`);
        applied.set(n.name, next);
      }
      const expected = (p: Probe): boolean =>
        verdict(state, { kind: 'pod', pod: podOf(state, p.from) }, { kind: 'pod', pod: podOf(state, p.to) }, 'TCP', p.port, {
          family: p.family,
        }).ingress.allowed;
      const out = await runProbes(c, probes, { expect: (r) => expected(r.probe) });
      const wrong = out
        .filter((o) => o.connected !== expected(o.probe))
        .map((o) => `${o.probe.from}->${o.probe.to}:${o.probe.port} v${o.probe.family} (${o.detail})`);
      assert.deepEqual(wrong, [], label);
      // Both identities had allowed probes somewhere in the run (checked by the caller per step).
      return applied.get(targetNode)!;
    };
    const allowedFrom = (state: ClusterState, port: number): string[] =>
      UPSTREAM_PODS.filter(
        (k) =>
          k !== TARGET &&
          verdict(state, { kind: 'pod', pod: podOf(state, k) }, { kind: 'pod', pod: podOf(state, TARGET) }, 'TCP', port).ingress
            .allowed,
      );

    // g1: 4 addresses per family (2^2), g2: 2 (2^1): g1 is split.
    const s0 = withGroups(base, base, { 'x/b': 'g1', 'y/a': 'g1', 'y/b': 'g1', 'z/c': 'g1', 'x/c': 'g2', 'z/a': 'g2' });
    const rs0 = await step('g1 split', s0);
    const g1 = splitChain(rs0, 4);
    assert.ok(g1 !== undefined && splitChain(rs0, 6) !== undefined, 'an identity is split in both families');
    assert.equal(allowedFrom(s0, 80).length, 4);

    // A remote pod (node-2) joins g1: its address goes into the set, by PeerChurn.
    const s1 = withGroups(base, s0, {
      'x/b': 'g1',
      'y/a': 'g1',
      'y/b': 'g1',
      'z/c': 'g1',
      'y/c': 'g1',
      'x/c': 'g2',
      'z/a': 'g2',
    });
    const rs1 = await step('a remote pod into the split identity', s1, 'churn');
    assert.equal(splitChain(rs1, 4), g1);
    assert.equal(rs1.sets.find((x) => x.split?.family === 4)!.elements.length, 5);

    // A remote pod leaves g1 for g2: from the set into the map (g1 stays 2^2, g2 is 3).
    const s2 = withGroups(base, s1, {
      'x/b': 'g1',
      'y/b': 'g1',
      'z/c': 'g1',
      'y/c': 'g1',
      'y/a': 'g2',
      'x/c': 'g2',
      'z/a': 'g2',
    });
    const rs2 = await step('a remote pod out of the split identity', s2, 'churn');
    assert.equal(splitChain(rs2, 4), g1);
    assert.equal(allowedFrom(s2, 81).length, 3);

    // Two remote pods go to g2: g2 has 5 (2^2), g1 3 (2^1): g2 takes the set, g1's addresses go back to the map.
    const s3 = withGroups(base, s2, {
      'y/b': 'g1',
      'z/c': 'g1',
      'y/c': 'g1',
      'x/b': 'g2',
      'z/b': 'g2',
      'y/a': 'g2',
      'x/c': 'g2',
      'z/a': 'g2',
    });
    const rs3 = await step('the choice moves to another identity', s3, 'churn');
    const g2 = splitChain(rs3, 4);
    assert.ok(g2 !== undefined && g2 !== g1, `split ${g2}, was ${g1}`);
    assert.equal(allowedFrom(s3, 81).length, 5);

    // Every identity below the threshold: no set, every address in the map again.
    const s4 = withGroups(base, s3, { 'y/b': 'g1', 'x/c': 'g2' });
    const rs4 = await step('nothing split', s4);
    assert.equal(splitChain(rs4, 4), undefined);
    assert.equal(splitChain(rs4, 6), undefined);
    const listed = (await c.exec(targetNode, 'nft', ['list', 'table', 'inet', 'nft-netpol'])).stdout;
    assert.doesNotMatch(listed, /-big/);
  });
});
