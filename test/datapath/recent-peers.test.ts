// Remote addresses held out of the pod peer map (nft/recent-peers.ts), with
// real packets, through the agent's incremental path: NodeCompiler and
// renderUpdate with the kernel's held addresses, one `nft` transaction per
// node per step. A remote pod joins an identity (held: its commit adds no
// jump), moves to another identity while held, leaves, and the held
// addresses are folded into the map; after each step every probe to the
// target ends as the reference evaluator says.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { NodeCompiler } from '../../src/compile/node-compiler.ts';
import type { ClusterState, Family } from '../../src/model/types.ts';
import { runNft } from '../../src/nft/exec.ts';
import { heldCount, NO_HELD_PEERS, type HeldPeers } from '../../src/nft/recent-peers.ts';
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
const OPTS = { denyAction: 'reject' } as const;

describe('remote addresses held out of the pod peer map, routed pod network', { skip }, () => {
  let c: Cluster;
  before(async () => {
    c = await Cluster.create(upstreamClusterSpec('routed'));
  });
  after(async () => {
    await c?.destroy();
  });

  test('held on joining, moved and dropped while held, folded: every probe as the evaluator says', async () => {
    const base = stateOf([...upstreamObjects(c), POLICY]);
    const targetNode = podOf(base, TARGET).nodeName as string;
    const compilers = new Map(c.nodes.map((n) => [n.name, new NodeCompiler(n.name, OPTS)]));
    const applied = new Map<string, { rs: CompiledRuleset; held: HeldPeers }>();
    const probes: Probe[] = [];
    for (const family of [4, 6] as Family[])
      for (const from of UPSTREAM_PODS.filter((k) => k !== TARGET))
        for (const port of [80, 81]) probes.push({ from, to: TARGET, protocol: 'TCP', port, family, via: 'pod' });

    /** Applies `state` on every node (first in full, then incrementally, holding or folding); probes; returns the target's held addresses and update. */
    const step = async (label: string, state: ClusterState, fold = false): Promise<{ held: HeldPeers; text: string }> => {
      let out = { held: NO_HELD_PEERS as HeldPeers, text: '' };
      for (const n of c.nodes) {
        const next = compilers.get(n.name)!.compile(state);
        const prev = applied.get(n.name);
        let text = renderRuleset(next);
        let held: HeldPeers = NO_HELD_PEERS;
        if (prev !== undefined) {
          const u = renderUpdate(prev.rs, next, { held: prev.held, fold });
          assert.equal(u.kind, 'incremental', `${label}: ${u.kind === 'full' ? u.reason : ''}`);
          if (u.kind !== 'incremental') throw new Error('unreachable');
          text = u.text;
          held = u.held;
        }
        const r = await runNft(text, { netns: n.netns });
        assert.ok(r.ok, r.ok ? '' : `${label}: ${r.error}\n${text}`);
        applied.set(n.name, { rs: next, held });
        if (n.name === targetNode) out = { held, text };
      }
      const expected = (p: Probe): boolean =>
        verdict(state, { kind: 'pod', pod: podOf(state, p.from) }, { kind: 'pod', pod: podOf(state, p.to) }, 'TCP', p.port, {
          family: p.family,
        }).ingress.allowed;
      const res = await runProbes(c, probes, { expect: (r) => expected(r.probe) });
      const wrong = res
        .filter((o) => o.connected !== expected(o.probe))
        .map((o) => `${o.probe.from}->${o.probe.to}:${o.probe.port} v${o.probe.family} (${o.detail})`);
      assert.deepEqual(wrong, [], label);
      return out;
    };
    const remote = UPSTREAM_PODS.find((k) => !['x/a', 'x/b', 'x/c'].includes(k) && podOf(base, k).nodeName !== targetNode);
    assert.ok(remote !== undefined, 'a pod on another node');

    const s0 = withGroups(base, base, { 'x/b': 'g1', 'x/c': 'g2' });
    await step('both identities', s0);

    // A remote pod joins g1: held, its commit adds no jump and no rule.
    const s1 = withGroups(base, s0, { 'x/b': 'g1', 'x/c': 'g2', [remote]: 'g1' });
    const h1 = await step('a remote pod joins g1 (held)', s1);
    assert.equal(heldCount(h1.held), 2, `both of its addresses held\n${h1.text}`);
    assert.doesNotMatch(h1.text, /: (jump|goto) |^add rule /m, h1.text);

    // While held, it moves to g2, then leaves both.
    const s2 = withGroups(base, s1, { 'x/b': 'g1', 'x/c': 'g2', [remote]: 'g2' });
    const h2 = await step('the held pod moves to g2', s2);
    assert.equal(heldCount(h2.held), 2);
    assert.doesNotMatch(h2.text, /: (jump|goto) /m, h2.text);
    const s3 = withGroups(base, s2, { 'x/b': 'g1', 'x/c': 'g2' });
    const h3 = await step('the held pod leaves', s3);
    assert.equal(heldCount(h3.held), 0);

    // Held again, then folded into the map.
    const s4 = withGroups(base, s3, { 'x/b': 'g1', 'x/c': 'g2', [remote]: 'g1' });
    assert.equal(heldCount((await step('held again', s4)).held), 2);
    const h5 = await step('folded', s4, true);
    assert.equal(heldCount(h5.held), 0);
    assert.match(h5.text, /^add element inet nft-netpol ingress-peers-v4 \{ [0-9.]+ : jump KUBE-PEERS-/m);
    const listed = (await c.exec(targetNode, 'nft', ['list', 'set', 'inet', 'nft-netpol', 'ingress-peers-v4-recent'])).stdout;
    assert.doesNotMatch(listed, /elements/);
  });
});
