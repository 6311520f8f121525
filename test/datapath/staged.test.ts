// Staged policies with real packets (compile/staged.ts): real TCP connections
// between pods of a simulated two-node cluster (routed), the rendered
// ruleset applied with real nft, and the kernel's own tally counters read
// after each probe, so each probe's "would deny" / "would allow" is known
// exactly. The oracle is the reference evaluator on the state with the
// staged policies enforced (policy/staged.ts). Then the annotation is removed
// and the update path's incremental script enforces the policy.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { compileNode } from '../../src/compile/compile.ts';
import { withStagedEnforced } from '../../src/model/staged.ts';
import type { ClusterState } from '../../src/model/types.ts';
import { runNft } from '../../src/nft/exec.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { renderUpdate } from '../../src/nft/update.ts';
import { verdict } from '../../src/policy/verdict.ts';
import { podId, stagedTallyChainName } from '../../src/ruleset/ids.ts';
import type { CompiledRuleset } from '../../src/ruleset/ir.ts';
import { networkPolicy, type RawObject } from '../cases/raw.ts';
import { clusterNetworkPolicy } from '../cases/cnp-conformance.ts';
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

function staged(o: RawObject): RawObject {
  return { ...o, metadata: { ...o.metadata, annotations: { 'nft-netpol.io/staged': 'true' } } };
}

const DENY_ALL_INGRESS = networkPolicy('x', 'deny-all', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Ingress'] });
const ALLOW_FROM_Y = networkPolicy('x', 'allow-from-y', {
  podSelector: { matchLabels: { pod: 'a' } },
  ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }],
});

const ALLOW_FROM_X = networkPolicy('x', 'allow-from-x', {
  podSelector: { matchLabels: { pod: 'a' } },
  ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'x' } } }] }],
});

const Y_PEER = { namespaces: { matchLabels: { ns: 'y' } } };
const X_A_SUBJECT = { pods: { namespaceSelector: { matchLabels: { ns: 'x' } }, podSelector: { matchLabels: { pod: 'a' } } } };
const DENY_Y = clusterNetworkPolicy('deny-y', {
  tier: 'Admin',
  priority: 20,
  subject: X_A_SUBJECT,
  ingress: [{ name: 'no-y', action: 'Deny', from: [Y_PEER] }],
});
const ACCEPT_Y = clusterNetworkPolicy('accept-y', {
  tier: 'Admin',
  priority: 10,
  subject: X_A_SUBJECT,
  ingress: [{ name: 'y-ok', action: 'Accept', from: [Y_PEER] }],
});

interface NftJson {
  nftables?: { rule?: { chain?: string; expr?: Record<string, unknown>[] } }[];
}

/** Packets counted by the rules of one chain of the node's table. */
async function chainPackets(c: Cluster, node: string, chain: string): Promise<number> {
  const r = await c.exec(node, 'nft', ['-j', 'list', 'table', 'inet', 'nft-netpol']);
  const doc = JSON.parse(r.stdout) as NftJson;
  let n = 0;
  for (const item of doc.nftables ?? []) {
    if (item.rule?.chain !== chain) continue;
    for (const e of item.rule.expr ?? []) {
      const k = e['counter'] as { packets?: number } | undefined;
      if (typeof k?.packets === 'number') n += k.packets;
    }
  }
  return n;
}

async function apply(c: Cluster, rulesets: ReadonlyMap<string, CompiledRuleset>): Promise<void> {
  for (const [node, rs] of rulesets) {
    const r = await runNft(renderRuleset(rs), { netns: c.node(node).netns });
    assert.ok(r.ok, r.ok ? '' : r.error);
  }
}

function compileAll(c: Cluster, state: ClusterState): Map<string, CompiledRuleset> {
  return new Map(c.nodes.map((n) => [n.name, compileNode(state, n.name, OPTS)]));
}

/** Each probe alone: connected or not, and by how much the target's tally chain counted it. */
async function probeEach(
  c: Cluster,
  state: ClusterState,
  tally: string,
): Promise<{ from: string; connected: boolean; counted: boolean }[]> {
  const node = podOf(state, TARGET).nodeName as string;
  const out: { from: string; connected: boolean; counted: boolean }[] = [];
  for (const from of UPSTREAM_PODS.filter((k) => k !== TARGET)) {
    const probe: Probe = { from, to: TARGET, protocol: 'TCP', port: 80, family: 4, via: 'pod' };
    out.push({ from, ...(await probeCounted(c, node, tally, probe)) });
  }
  return out;
}

/** One probe alone: connected or not, and whether the tally chain counted it. */
async function probeCounted(
  c: Cluster,
  node: string,
  tally: string,
  probe: Probe,
): Promise<{ connected: boolean; counted: boolean }> {
  const before = await chainPackets(c, node, tally);
  const [o] = await runProbes(c, [probe], { retries: 0 });
  return { connected: o!.connected, counted: (await chainPackets(c, node, tally)) > before };
}

/** Sources whose ingress verdict at TARGET the staged policies change, by the evaluator. */
function changedBy(state: ClusterState): string[] {
  const shadow = withStagedEnforced(state);
  const to = podOf(state, TARGET);
  return UPSTREAM_PODS.filter((k) => k !== TARGET).filter((from) => {
    const a = verdict(state, { kind: 'pod', pod: podOf(state, from) }, { kind: 'pod', pod: to }, 'TCP', 80);
    const b = verdict(shadow, { kind: 'pod', pod: podOf(shadow, from) }, { kind: 'pod', pod: to }, 'TCP', 80);
    return a.ingress.allowed !== b.ingress.allowed;
  });
}

describe('staged policies, routed pod network', { skip }, () => {
  let c: Cluster;
  before(async () => {
    c = await Cluster.create(upstreamClusterSpec('routed'));
  });
  after(async () => {
    await c?.destroy();
  });

  test('a staged default-deny counts exactly the probes it would deny, and all of them connect', async () => {
    const state = stateOf([...upstreamObjects(c), staged(ALLOW_FROM_Y)]);
    await apply(c, compileAll(c, state));
    const t = podOf(state, TARGET);
    const results = await probeEach(c, state, stagedTallyChainName('would-deny', podId(t.namespace, t.name), 'ingress'));
    const wouldDeny = changedBy(state);
    assert.ok(wouldDeny.length > 0 && wouldDeny.some((k) => k.startsWith('y/')) === false, wouldDeny.join(' '));
    assert.deepEqual(
      results.filter((r) => !r.connected).map((r) => r.from),
      [],
      'a staged policy must not block anything',
    );
    assert.deepEqual(
      results.filter((r) => r.counted).map((r) => r.from),
      wouldDeny,
    );
  });

  test('a staged allow under an enforced deny counts the probes it would allow, which stay blocked; unstaging enforces it incrementally', async () => {
    const stagedState = stateOf([...upstreamObjects(c), DENY_ALL_INGRESS, staged(ALLOW_FROM_Y)]);
    const prev = compileAll(c, stagedState);
    await apply(c, prev);
    const t = podOf(stagedState, TARGET);
    const results = await probeEach(c, stagedState, stagedTallyChainName('would-allow', podId(t.namespace, t.name), 'ingress'));
    const wouldAllow = changedBy(stagedState);
    assert.deepEqual(
      wouldAllow,
      UPSTREAM_PODS.filter((k) => k.startsWith('y/')),
    );
    assert.deepEqual(
      results.filter((r) => r.connected).map((r) => r.from),
      [],
      'the enforced deny stays in force',
    );
    assert.deepEqual(
      results.filter((r) => r.counted).map((r) => r.from),
      wouldAllow,
    );

    // Unstaged: one incremental transaction per node, then the policy is enforced.
    const enforcedState = stateOf([...upstreamObjects(c), DENY_ALL_INGRESS, ALLOW_FROM_Y]);
    for (const n of c.nodes) {
      const next = compileNode(enforcedState, n.name, OPTS);
      const u = renderUpdate(prev.get(n.name), next);
      assert.equal(u.kind, 'incremental', u.kind === 'full' ? u.reason : '');
      const r = await runNft(u.text, { netns: n.netns });
      assert.ok(r.ok, r.ok ? '' : `${r.error}\n${u.text}`);
      // The kernel now holds exactly the enforced ruleset: no shadow path is left.
      const listed = (await c.exec(n.name, 'nft', ['list', 'table', 'inet', 'nft-netpol'])).stdout;
      assert.doesNotMatch(listed, /STG-|staged-/);
    }
    const after = await runProbes(
      c,
      UPSTREAM_PODS.filter((k) => k !== TARGET).map((from) => ({
        from,
        to: TARGET,
        protocol: 'TCP',
        port: 80,
        family: 4,
        via: 'pod',
      })),
      { expect: (r) => r.probe.from.startsWith('y/') },
    );
    assert.deepEqual(
      after.filter((o) => o.connected).map((o) => o.probe.from),
      wouldAllow,
    );
  });

  test('a staged allow naming ports: a denied packet to another port or protocol skips the shadow copy and is not counted', async () => {
    const allowY80 = networkPolicy('x', 'allow-from-y-80', {
      podSelector: { matchLabels: { pod: 'a' } },
      ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }], ports: [{ protocol: 'TCP', port: 80 }] }],
    });
    const state = stateOf([...upstreamObjects(c), DENY_ALL_INGRESS, staged(allowY80)]);
    const rulesets = compileAll(c, state);
    await apply(c, rulesets);
    const t = podOf(state, TARGET);
    const node = t.nodeName as string;
    // The pod chain asks the shadow copy only for the staged rules' protocol and port.
    const text = renderRuleset(rulesets.get(node) as CompiledRuleset);
    assert.match(text, /meta l4proto \. th dport @port-[0-9a-f]+ jump (STG-DEN-|STG-WA-)/);
    const tally = stagedTallyChainName('would-allow', podId(t.namespace, t.name), 'ingress');
    const counted = (probe: Probe): Promise<{ connected: boolean; counted: boolean }> => probeCounted(c, node, tally, probe);
    const from = UPSTREAM_PODS.find((k) => k.startsWith('y/')) as string;
    const base = { from, to: TARGET, family: 4, via: 'pod' } as const;
    assert.deepEqual(
      await counted({ ...base, protocol: 'TCP', port: 80 }),
      { connected: false, counted: true },
      'TCP 80: would allow',
    );
    assert.deepEqual(
      await counted({ ...base, protocol: 'TCP', port: 81 }),
      { connected: false, counted: false },
      'TCP 81: no staged rule',
    );
    assert.deepEqual(
      await counted({ ...base, protocol: 'UDP', port: 80 }),
      { connected: false, counted: false },
      'UDP 80: no staged rule',
    );
    // The evaluator agrees: only TCP 80 changes.
    const shadow = withStagedEnforced(state);
    for (const [proto, port, changes] of [
      ['TCP', 80, true],
      ['TCP', 81, false],
      ['UDP', 80, false],
    ] as const) {
      const a = verdict(state, { kind: 'pod', pod: podOf(state, from) }, { kind: 'pod', pod: t }, proto, port);
      const b = verdict(
        shadow,
        { kind: 'pod', pod: podOf(shadow, from) },
        { kind: 'pod', pod: podOf(shadow, TARGET) },
        proto,
        port,
      );
      assert.equal(a.ingress.allowed !== b.ingress.allowed, changes, `${proto} ${port}`);
    }
  });

  test('a staged allow-list on a pod enforced policies isolate: no after-accept path, what it would allow counted; a staged Deny rule there still counts', async () => {
    const stagedState = stateOf([...upstreamObjects(c), ALLOW_FROM_Y, staged(ALLOW_FROM_X)]);
    await apply(c, compileAll(c, stagedState));
    const node = podOf(stagedState, TARGET).nodeName as string;
    const listed = (await c.exec(node, 'nft', ['list', 'table', 'inet', 'nft-netpol'])).stdout;
    assert.doesNotMatch(listed, /staged-forward|STG-ACC-/, 'allow-lists only add: no would-deny path');
    const t = podOf(stagedState, TARGET);
    const results = await probeEach(c, stagedState, stagedTallyChainName('would-allow', podId(t.namespace, t.name), 'ingress'));
    const wouldAllow = changedBy(stagedState);
    assert.deepEqual(
      wouldAllow,
      UPSTREAM_PODS.filter((k) => k !== TARGET && k.startsWith('x/')),
    );
    assert.deepEqual(
      results.filter((r) => r.connected).map((r) => r.from),
      UPSTREAM_PODS.filter((k) => k.startsWith('y/')),
    );
    assert.deepEqual(
      results.filter((r) => r.counted).map((r) => r.from),
      wouldAllow,
    );

    // A staged ClusterNetworkPolicy on the same pod decides before the allow-lists: its would-deny is counted.
    const cnpState = stateOf([...upstreamObjects(c), ALLOW_FROM_Y, staged(DENY_Y)]);
    await apply(c, compileAll(c, cnpState));
    const denied = await probeEach(c, cnpState, stagedTallyChainName('would-deny', podId(t.namespace, t.name), 'ingress'));
    const wouldDeny = changedBy(cnpState);
    assert.deepEqual(
      wouldDeny,
      UPSTREAM_PODS.filter((k) => k.startsWith('y/')),
    );
    assert.deepEqual(
      denied.filter((r) => r.connected).map((r) => r.from),
      wouldDeny,
      'a staged policy must not block anything',
    );
    assert.deepEqual(
      denied.filter((r) => r.counted).map((r) => r.from),
      wouldDeny,
    );
  });

  test('a staged ClusterNetworkPolicy Accept over an enforced Deny rule: would allow, counted from the shared Deny rule', async () => {
    const stagedState = stateOf([...upstreamObjects(c), DENY_Y, staged(ACCEPT_Y)]);
    const prev = compileAll(c, stagedState);
    await apply(c, prev);
    const t = podOf(stagedState, TARGET);
    const results = await probeEach(c, stagedState, stagedTallyChainName('would-allow', podId(t.namespace, t.name), 'ingress'));
    const wouldAllow = changedBy(stagedState);
    assert.deepEqual(
      wouldAllow,
      UPSTREAM_PODS.filter((k) => k.startsWith('y/')),
    );
    assert.deepEqual(
      results.filter((r) => r.connected).map((r) => r.from),
      UPSTREAM_PODS.filter((k) => k !== TARGET && !k.startsWith('y/')),
      'the Deny rule stays in force',
    );
    assert.deepEqual(
      results.filter((r) => r.counted).map((r) => r.from),
      wouldAllow,
    );
    const enforcedState = stateOf([...upstreamObjects(c), DENY_Y, ACCEPT_Y]);
    for (const n of c.nodes) {
      const u = renderUpdate(prev.get(n.name), compileNode(enforcedState, n.name, OPTS));
      assert.equal(u.kind, 'incremental', u.kind === 'full' ? u.reason : '');
      const r = await runNft(u.text, { netns: n.netns });
      assert.ok(r.ok, r.ok ? '' : `${r.error}\n${u.text}`);
    }
    const after = await runProbes(
      c,
      UPSTREAM_PODS.filter((k) => k !== TARGET).map((from) => ({
        from,
        to: TARGET,
        protocol: 'TCP',
        port: 80,
        family: 4,
        via: 'pod',
      })),
      { expect: () => true },
    );
    assert.deepEqual(
      after.filter((o) => !o.connected).map((o) => o.probe.from),
      [],
    );
  });
});
