// NodeCompiler (compile/node-compiler.ts) advances its index by pod diffs and
// keeps peer results that no changed pod can affect. Whatever the sequence of
// changes, every compile must equal compileNode on the same state: that is the
// whole contract, checked here on random clusters and random change streams.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { compileNode } from '../../src/compile/compile.ts';
import { diffPods, NodeCompiler } from '../../src/compile/node-compiler.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { renderUpdate } from '../../src/nft/update.ts';
import { listChange } from '../../src/model/list-diff.ts';
import type { CompiledRuleset } from '../../src/ruleset/ir.ts';
import type { Namespace, NetworkPolicy, Node, Pod } from '../../src/model/types.ts';
import { cport, ipBlock, ns, pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';
import { plainRuleset } from '../support/plain-ruleset.ts';

const NODES: Node[] = [
  { name: 'node-1', addresses: ['192.168.100.1'], podCIDRs: ['10.0.1.0/24', 'fd00:1::/64'] },
  { name: 'node-2', addresses: ['192.168.100.2'], podCIDRs: ['10.0.2.0/24', 'fd00:2::/64'] },
];
const APPS = ['web', 'db', 'api'];
const NSS = ['a', 'b', 'c'];
const TIERS = ['front', 'back'];

test('diffPods: by identity, a changed pod is old and new object, past the limit undefined', () => {
  const x = pod('a', 'x');
  const y = pod('a', 'y');
  const z = pod('b', 'z');
  const y2 = { ...y, labels: { app: 'web' } };
  assert.deepEqual(diffPods([x, y, z], [x, y, z], 10), { removed: [], added: [] });
  assert.deepEqual(diffPods([x, y, z], [x, y2], 10), { removed: [y, z], added: [y2] });
  assert.deepEqual(diffPods([x], [x, y, z], 10), { removed: [], added: [y, z] });
  assert.equal(diffPods([x, y, z], [], 2), undefined);
});

type Op =
  | {
      readonly op: 'addPod';
      readonly ns: string;
      readonly app: string;
      readonly local: boolean;
      readonly dual: boolean;
      readonly named: boolean;
    }
  | { readonly op: 'deletePod'; readonly at: number }
  | { readonly op: 'restorePod'; readonly at: number }
  | { readonly op: 'relabelPod'; readonly at: number; readonly app: string }
  | { readonly op: 'finishPod'; readonly at: number }
  | { readonly op: 'reuseIP'; readonly at: number; readonly ns: string; readonly app: string }
  | { readonly op: 'renumberPort'; readonly at: number; readonly port: number }
  | { readonly op: 'relabelNs'; readonly ns: string; readonly tier: string }
  | { readonly op: 'addPolicy'; readonly make: (i: number) => NetworkPolicy }
  | { readonly op: 'deletePolicy'; readonly at: number };

const policyArb = fc
  .record({
    ns: fc.constantFrom(...NSS),
    target: fc.constantFrom(...APPS, 'any'),
    peerApp: fc.constantFrom(...APPS, 'any'),
    scope: fc.constantFrom('own', 'all', 'tier'),
    block: fc.boolean(),
    named: fc.boolean(),
    egress: fc.boolean(),
    expr: fc.boolean(),
  })
  .map((r) => (i: number): NetworkPolicy => {
    const podSel =
      r.peerApp === 'any'
        ? sel()
        : r.expr
          ? sel({}, [{ key: 'app', operator: 'NotIn', values: [r.peerApp] }])
          : sel({ app: r.peerApp });
    const nsSel = r.scope === 'own' ? undefined : r.scope === 'all' ? sel() : sel({ tier: 'front' });
    const peers = [podPeer(podSel, nsSel), ...(r.block ? [ipBlock('10.0.2.0/25', ['10.0.2.16/28'])] : [])];
    const ports = r.named ? [port('TCP', 'http'), port('TCP', 80)] : [port('TCP', 80)];
    return policy(r.ns, `pol-${i}`, {
      podSelector: r.target === 'any' ? sel() : sel({ app: r.target }),
      ingress: [rule(peers, ports)],
      ...(r.egress ? { egress: [rule(peers, ports)] } : {}),
    });
  });

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('addPod' as const),
      ns: fc.constantFrom(...NSS),
      app: fc.constantFrom(...APPS),
      local: fc.boolean(),
      dual: fc.boolean(),
      named: fc.boolean(),
    }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('deletePod' as const), at: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('restorePod' as const), at: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('relabelPod' as const), at: fc.nat(), app: fc.constantFrom(...APPS) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('finishPod' as const), at: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('reuseIP' as const),
      at: fc.nat(),
      ns: fc.constantFrom(...NSS),
      app: fc.constantFrom(...APPS),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('renumberPort' as const), at: fc.nat(), port: fc.constantFrom(8080, 8081) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('relabelNs' as const), ns: fc.constantFrom(...NSS), tier: fc.constantFrom(...TIERS) }),
  },
  { weight: 1, arbitrary: policyArb.map((make) => ({ op: 'addPolicy' as const, make })) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('deletePolicy' as const), at: fc.nat() }) },
);

/** A cluster that, like the sources, keeps the object of every pod it does not change. */
class World {
  pods: Pod[] = [];
  policies: NetworkPolicy[] = [];
  namespaces: Namespace[] = NSS.map((n) => ns(n, { tier: 'back' }));
  /** Deleted pod objects: restorePod brings one back as the same object (a compile's pending diffs must compose). */
  #deleted: Pod[] = [];
  #n = 0;
  #p = 0;

  addPod(o: { ns: string; app: string; local: boolean; dual: boolean; named: boolean }, ips?: readonly string[]): void {
    const i = this.#n++;
    const net = o.local ? 1 : 2;
    const own = o.dual
      ? [`10.0.${net}.${(i % 250) + 2}`, `fd00:${net}::${(i + 2).toString(16)}`]
      : [`10.0.${net}.${(i % 250) + 2}`];
    const addrs = ips ?? own;
    const node = (addrs[0] ?? '').startsWith('10.0.1.') ? 'node-1' : 'node-2';
    this.pods.push(
      pod(o.ns, `pod-${i}`, {
        labels: { app: o.app },
        ips: [...addrs],
        node,
        ports: o.named ? [cport('http', 8000 + (i % 3))] : [],
      }),
    );
  }

  addPolicy(make: (i: number) => NetworkPolicy): void {
    this.policies.push(make(this.#p++));
  }

  apply(op: Op): void {
    const at = 'at' in op ? op.at : 0;
    const k = this.pods.length === 0 ? -1 : at % this.pods.length;
    const p = this.pods[k];
    switch (op.op) {
      case 'addPod':
        return this.addPod(op);
      case 'addPolicy':
        return this.addPolicy(op.make);
      case 'deletePolicy':
        if (this.policies.length > 0) this.policies.splice(op.at % this.policies.length, 1);
        return;
      case 'restorePod': {
        const back = this.#deleted.length === 0 ? undefined : this.#deleted[op.at % this.#deleted.length]!;
        if (back !== undefined && !this.pods.some((q) => q.namespace === back.namespace && q.name === back.name)) {
          this.#deleted = this.#deleted.filter((q) => q !== back);
          this.pods.push(back);
        }
        return;
      }
      case 'relabelNs':
        this.namespaces = this.namespaces.map((n) => (n.name === op.ns ? ns(n.name, { tier: op.tier }) : n));
        return;
      default:
        break; // the pod operations below
    }
    if (p === undefined) return;
    if (op.op === 'deletePod') this.#deleted.push(...this.pods.splice(k, 1));
    else if (op.op === 'relabelPod') this.pods[k] = { ...p, labels: { app: op.app } };
    else if (op.op === 'finishPod') this.pods[k] = { ...p, phase: 'Succeeded' };
    else if (op.op === 'renumberPort') this.pods[k] = { ...p, ports: [cport('http', op.port)] };
    else {
      this.pods.splice(k, 1);
      this.addPod({ ns: op.ns, app: op.app, local: false, dual: false, named: true }, p.ips);
    }
  }

  state() {
    return state({ namespaces: this.namespaces, pods: this.pods, policies: this.policies, nodes: NODES });
  }
}

/** The identities split out of the pod peer maps (compile/peer-split.ts): set name -> its chain. */
function splitOf(rs: CompiledRuleset): string {
  return rs.sets
    .filter((x) => x.split !== undefined)
    .map((x) => `${x.name}:${x.split!.chain}:${x.elements.length}`)
    .join(' ');
}

const splitChoice = (rs: CompiledRuleset): string =>
  rs.sets
    .filter((x) => x.split !== undefined)
    .map((x) => `${x.name}:${x.split!.chain}`)
    .join(' ');

test('property: NodeCompiler.compile equals compileNode after every change of a random stream', () => {
  let recorded = 0;
  let splitSeen = 0;
  let choiceChanged = 0;
  let incremental = 0;
  let churn = 0;
  let fresh = 0;
  // Policy chains taken over from the last compile (chain-memo.ts) and compiled again, in incremental compiles.
  let chainsTaken = 0;
  let chainsCompiled = 0;
  // Identity chains of an incremental compile handed on as the same objects (identities.ts, IdentityMemo), of all.
  let identitiesKept = 0;
  let identities = 0;
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          ns: fc.constantFrom(...NSS),
          app: fc.constantFrom(...APPS),
          local: fc.boolean(),
          dual: fc.boolean(),
          named: fc.boolean(),
        }),
        { minLength: 2, maxLength: 25 },
      ),
      fc.array(policyArb, { minLength: 1, maxLength: 5 }),
      fc.array(fc.array(opArb, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 12 }),
      fc.constantFrom('drop' as const, 'allow' as const),
      fc.constantFrom(undefined, 0),
      // A low split threshold (peer-split.ts): identities of a few addresses leave the pod maps, and churn crosses its powers of two.
      fc.constantFrom(undefined, 1, 2, 3),
      (pods, pols, steps, unknown, scanLimit, splitMin) => {
        const w = new World();
        for (const p of pods) w.addPod(p);
        for (const f of pols) w.addPolicy(f);
        const opts = { unknownLocalEndpoints: unknown, ...(splitMin === undefined ? {} : { peerSplitMin: splitMin }) };
        // scanLimit 0: selectors go through the label postings, which advance() must keep right.
        const nc = new NodeCompiler('node-1', opts, scanLimit);
        let last: CompiledRuleset | undefined;
        let before = nc.chains;
        const check = (label: string): void => {
          const s = w.state();
          const got = nc.compile(s);
          if (nc.lastMode === 'incremental') {
            chainsTaken += nc.chains.taken - before.taken;
            chainsCompiled += nc.chains.compiled - before.compiled;
            const lastChains = new Map(last?.chains.map((c) => [c.name, c]));
            for (const c of got.chains.filter((x) => x.role === 'peers')) {
              identities++;
              if (lastChains.get(c.name) === c) identitiesKept++;
            }
          }
          before = nc.chains;
          const want = compileNode(s, 'node-1', opts);
          // The update from the compiler's recorded map patches is the one a walk of the maps finds.
          if (last !== undefined) {
            const copied = {
              ...got,
              maps: got.maps.map((m) => ({ ...m, elements: [...m.elements] })),
              sets: got.sets.map((x) => ({ ...x, elements: [...x.elements] })),
            };
            const a = renderUpdate(last, got);
            assert.equal(a.text, renderUpdate(last, copied).text, `${label}: update`);
            if (got.maps.some((m, i) => listChange(last!.maps[i]?.elements ?? [], m.elements) !== undefined)) recorded++;
            if (splitChoice(last) !== splitChoice(got) && splitChoice(last) !== '' && splitChoice(got) !== '') choiceChanged++;
          }
          if (splitOf(got) !== '') splitSeen++;
          last = got;
          if (nc.lastMode === 'incremental') incremental++;
          else if (nc.lastMode === 'churn') churn++;
          else fresh++;
          // Text first (readable diff), then every field.
          assert.equal(renderRuleset(got), renderRuleset(want), label);
          assert.deepEqual(plainRuleset(got), want, label);
          // The caches follow the policies in force: at most one peer result per pod peer of a policy.
          const podPeers = [...s.policies].flatMap((p) =>
            [...p.ingress, ...p.egress].flatMap((r) => (r.peers ?? []).filter((x) => x.kind === 'pods')),
          );
          assert.ok(nc.kept.peers <= podPeers.length, `${label}: ${JSON.stringify(nc.kept)} for ${podPeers.length} pod peers`);
        };
        check('initial');
        steps.forEach((ops, i) => {
          for (const op of ops) w.apply(op);
          check(`after step ${i}: ${JSON.stringify(ops.map((o) => o.op))}`);
        });
      },
    ),
    { numRuns: 250, seed: 20261122 },
  );
  // The stream must mostly take the incremental paths (namespace relabels and first compiles are fresh).
  assert.ok(incremental + churn > 3 * fresh, `incremental ${incremental}, churn ${churn}, fresh ${fresh}`);
  assert.ok(recorded > 0.2 * (incremental + churn), `recorded map patches ${recorded} of ${incremental + churn}`);
  assert.ok(churn > 0.1 * incremental, `incremental ${incremental}, churn ${churn}`);
  // Incremental compiles both take chains over and compile them again (their policy, targets or peers changed):
  // in these small random clusters a change touches many peer sets, so about a third are taken over.
  assert.ok(
    chainsTaken > 0.3 * chainsCompiled && chainsCompiled > 0.3 * chainsTaken,
    `taken ${chainsTaken}, compiled ${chainsCompiled}`,
  );
  assert.ok(identitiesKept > 0.1 * identities && identitiesKept < identities, `kept ${identitiesKept} of ${identities}`);
  // The split was exercised, and its choice moved from one identity to another between compiles.
  assert.ok(
    splitSeen > 0.2 * (incremental + churn + fresh) && choiceChanged > 10,
    `split ${splitSeen}, changed ${choiceChanged}`,
  );
});

// Remote churn (peer-churn.ts) carries state from change to change (counts per
// address, identity keys, the pod map): long streams of pod changes only,
// mostly elsewhere, over policies with every kind of peer source.
test('property: long streams of remote pod churn equal compileNode after every change', () => {
  const podOp: fc.Arbitrary<Op> = fc.oneof(
    {
      weight: 4,
      arbitrary: fc.record({
        op: fc.constant('addPod' as const),
        ns: fc.constantFrom(...NSS),
        app: fc.constantFrom(...APPS),
        local: fc.constantFrom(false, false, false, true),
        dual: fc.boolean(),
        named: fc.boolean(),
      }),
    },
    { weight: 3, arbitrary: fc.record({ op: fc.constant('deletePod' as const), at: fc.nat() }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('restorePod' as const), at: fc.nat() }) },
    { weight: 3, arbitrary: fc.record({ op: fc.constant('relabelPod' as const), at: fc.nat(), app: fc.constantFrom(...APPS) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('finishPod' as const), at: fc.nat() }) },
    {
      weight: 2,
      arbitrary: fc.record({
        op: fc.constant('reuseIP' as const),
        at: fc.nat(),
        ns: fc.constantFrom(...NSS),
        app: fc.constantFrom(...APPS),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({ op: fc.constant('renumberPort' as const), at: fc.nat(), port: fc.constantFrom(8080, 8081) }),
    },
  );
  let churn = 0;
  let other = 0;
  let splitChurn = 0;
  let choiceChurn = 0;
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          ns: fc.constantFrom(...NSS),
          app: fc.constantFrom(...APPS),
          local: fc.boolean(),
          dual: fc.boolean(),
          named: fc.boolean(),
        }),
        { minLength: 4, maxLength: 30 },
      ),
      fc.array(policyArb, { minLength: 1, maxLength: 6 }),
      fc.array(fc.array(podOp, { minLength: 1, maxLength: 2 }), { minLength: 5, maxLength: 40 }),
      fc.constantFrom('drop' as const, 'allow' as const),
      fc.constantFrom(undefined, 1, 2, 3),
      (pods, pols, steps, unknown, splitMin) => {
        const w = new World();
        for (const p of pods) w.addPod(p);
        for (const f of pols) w.addPolicy(f);
        const opts = { unknownLocalEndpoints: unknown, ...(splitMin === undefined ? {} : { peerSplitMin: splitMin }) };
        const nc = new NodeCompiler('node-1', opts);
        let last = nc.compile(w.state());
        steps.forEach((ops, i) => {
          for (const op of ops) w.apply(op);
          const s = w.state();
          const got = nc.compile(s);
          if (nc.lastMode === 'churn') {
            churn++;
            if (splitOf(got) !== '' || splitOf(last) !== '') splitChurn++;
            if (splitChoice(got) !== splitChoice(last)) choiceChurn++;
          } else other++;
          const label = `after step ${i}: ${JSON.stringify(ops)}`;
          assert.equal(renderRuleset(got), renderRuleset(compileNode(s, 'node-1', opts)), label);
          // The update PeerChurn's recorded patches print is the one a walk of the lists finds.
          const copied = {
            ...got,
            maps: got.maps.map((m) => ({ ...m, elements: [...m.elements] })),
            sets: got.sets.map((x) => ({ ...x, elements: [...x.elements] })),
          };
          assert.equal(renderUpdate(last, got).text, renderUpdate(last, copied).text, `${label}: update`);
          last = got;
        });
      },
    ),
    { numRuns: 200, seed: 20261127 },
  );
  // Many streams have range or named egress sources (fresh compiles when they select the pod) or local pods.
  assert.ok(3 * churn > other, `churn ${churn}, other ${other}`);
  // Remote churn moved addresses into and out of split sets, and changed which identity is split.
  assert.ok(
    splitChurn > 0.1 * churn && choiceChurn >= 5,
    `churn ${churn}: with a split ${splitChurn}, choice changed ${choiceChurn}`,
  );
});

test('a namespace relabel or a large change compiles afresh; a pod change advances', () => {
  const w = new World();
  for (let i = 0; i < 5; i++) w.addPod({ ns: 'a', app: 'web', local: i < 2, dual: false, named: false });
  w.addPolicy((i) =>
    policy('a', `pol-${i}`, {
      podSelector: sel({ app: 'web' }),
      ingress: [rule([podPeer(sel({ app: 'web' }), sel({ tier: 'front' }))])],
    }),
  );
  const nc = new NodeCompiler('node-1');
  nc.compile(w.state());
  assert.equal(nc.lastMode, 'fresh');
  // A remote pod's change is applied to the last result; a local one advances the compile.
  w.apply({ op: 'relabelPod', at: 3, app: 'db' });
  nc.compile(w.state());
  assert.equal(nc.lastMode, 'churn');
  w.apply({ op: 'relabelPod', at: 0, app: 'db' });
  nc.compile(w.state());
  assert.equal(nc.lastMode, 'incremental');
  w.apply({ op: 'relabelNs', ns: 'a', tier: 'front' });
  const s = w.state();
  assert.deepEqual(plainRuleset(nc.compile(s)), compileNode(s, 'node-1'));
  assert.equal(nc.lastMode, 'fresh');
  // Every pod replaced by a new object (a file source re-reading everything): within the limit, still exact.
  const copied = { ...s, pods: s.pods.map((p) => ({ ...p })) };
  assert.deepEqual(plainRuleset(nc.compile(copied)), compileNode(copied, 'node-1'));
});

test('the caches kept between compiles follow the policies: none left once the policies are gone', () => {
  const w = new World();
  for (let i = 0; i < 6; i++)
    w.addPod({ ns: NSS[i % 3] ?? 'a', app: APPS[i % 3] ?? 'web', local: i < 3, dual: true, named: true });
  w.addPolicy((i) => policy('a', `pol-${i}`, { ingress: [rule([podPeer(sel({ app: 'web' }), sel({ tier: 'back' }))])] }));
  w.addPolicy((i) => policy('b', `pol-${i}`, { ingress: [rule([podPeer(sel({ app: 'db' }))], [port('TCP', 'http')])] }));
  const nc = new NodeCompiler('node-1', {}, 0);
  nc.compile(w.state());
  assert.deepEqual(nc.kept, { nsSelectors: 1, labelKeys: 1, peers: 2, rules: 2 });
  w.apply({ op: 'deletePolicy', at: 0 });
  nc.compile(w.state());
  assert.equal(nc.lastMode, 'incremental');
  assert.deepEqual(nc.kept, { nsSelectors: 0, labelKeys: 1, peers: 1, rules: 1 });
  w.apply({ op: 'deletePolicy', at: 0 });
  const s = w.state();
  assert.deepEqual(plainRuleset(nc.compile(s)), compileNode(s, 'node-1'));
  assert.deepEqual(nc.kept, { nsSelectors: 0, labelKeys: 0, peers: 0, rules: 0 });
});

test('a peer set counted by remote churn between compiles is not kept once its policy is gone', () => {
  const w = new World();
  for (let i = 0; i < 6; i++) w.addPod({ ns: 'a', app: i % 2 === 0 ? 'web' : 'db', local: i < 2, dual: false, named: false });
  w.addPolicy((i) =>
    policy('a', `pol-${i}`, { podSelector: sel({ app: 'web' }), ingress: [rule([podPeer(sel({ app: 'db' }))])] }),
  );
  const nc = new NodeCompiler('node-1', {}, 0);
  nc.compile(w.state());
  // A remote peer: the churn path counts the set's pods (a lookup between compiles).
  w.apply({ op: 'addPod', ns: 'a', app: 'db', local: false, dual: false, named: false });
  nc.compile(w.state());
  assert.equal(nc.lastMode, 'churn');
  w.apply({ op: 'deletePolicy', at: 0 });
  const s = w.state();
  assert.deepEqual(plainRuleset(nc.compile(s)), compileNode(s, 'node-1'));
  assert.deepEqual(nc.kept, { nsSelectors: 0, labelKeys: 0, peers: 0, rules: 0 });
});

test('localPods: the active pods of the node in the last compiled state, after every kind of compile', () => {
  const w = new World();
  for (let i = 0; i < 8; i++)
    w.addPod({ ns: NSS[i % 3] ?? 'a', app: APPS[i % 3] ?? 'web', local: i % 2 === 0, dual: false, named: false });
  w.addPolicy((i) => policy('a', `pol-${i}`, { podSelector: sel(), ingress: [rule([podPeer(sel(), sel())])] }));
  const nc = new NodeCompiler('node-1');
  const want = (): string[] =>
    w
      .state()
      .pods.filter((p) => p.nodeName === 'node-1' && p.phase !== 'Succeeded')
      .map((p) => p.name);
  nc.compile(w.state());
  assert.deepEqual(
    nc.localPods.map((p) => p.name),
    want(),
  );
  for (const op of [
    { op: 'deletePod', at: 0 },
    { op: 'deletePod', at: 1 },
    { op: 'finishPod', at: 2 },
    { op: 'relabelPod', at: 3, app: 'db' },
  ] as const) {
    w.apply(op);
    nc.compile(w.state());
    assert.deepEqual(
      nc.localPods.map((p) => p.name),
      want(),
      `${op.op} (${nc.lastMode})`,
    );
  }
});

test('a remote peer gone and back as the same object between two compiles that read its peer set stays enforced', () => {
  // The remote-only changes take the churn path, which leaves the diffs
  // pending in the big peer result; the policy change then reads it.
  const w = new World();
  for (let i = 0; i < 6; i++) w.addPod({ ns: 'a', app: 'web', local: i < 2, dual: false, named: false });
  w.addPolicy((i) =>
    policy('a', `pol-${i}`, { podSelector: sel({ app: 'web' }), ingress: [rule([podPeer(sel({ app: 'web' }), sel())])] }),
  );
  const nc = new NodeCompiler('node-1', {}, 0);
  const check = (label: string): void => {
    const s = w.state();
    assert.equal(renderRuleset(nc.compile(s)), renderRuleset(compileNode(s, 'node-1')), `${label} (${nc.lastMode})`);
  };
  check('initial');
  const remote = w.pods.find((p) => p.nodeName === 'node-2')!;
  const others = w.pods.filter((p) => p !== remote);
  w.pods = others;
  check('remote deleted');
  w.addPod({ ns: 'a', app: 'web', local: false, dual: false, named: false });
  check('another remote created');
  w.pods = [...others, remote];
  check('the deleted remote back (the same object), the other gone');
  w.addPolicy((i) =>
    policy('a', `pol-${i}`, {
      podSelector: sel({ app: 'web' }),
      ingress: [rule([podPeer(sel({ app: 'web' }), sel())], [port('TCP', 8080)])],
    }),
  );
  check('a policy change reads the peer set');
});

test('a policy chain is compiled again when the address families of the node change, kept otherwise', () => {
  // No podCIDRs: the node's families are those of its pods' addresses.
  const nodes: Node[] = [
    { name: 'node-1', addresses: ['192.168.100.1'], podCIDRs: [] },
    { name: 'node-2', addresses: ['192.168.100.2'], podCIDRs: [] },
  ];
  const web = pod('a', 'web', { labels: { app: 'web' }, ips: ['10.0.1.5'] });
  const clients = [
    pod('a', 'client-4', { labels: { app: 'client' }, node: 'node-2', ips: ['10.0.2.7'] }),
    pod('a', 'client-6', { labels: { app: 'client' }, node: 'node-2', ips: ['fd00:2::7'] }),
  ];
  const pols = [
    policy('a', 'web-from-clients', { podSelector: sel({ app: 'web' }), ingress: [rule([podPeer(sel({ app: 'client' }))])] }),
    policy('a', 'web-from-web', { podSelector: sel({ app: 'web' }), ingress: [rule([podPeer(sel({ app: 'web' }))])] }),
  ];
  const nc = new NodeCompiler('node-1');
  const s1 = state({ pods: [web, ...clients], policies: pols, nodes });
  assert.deepEqual(plainRuleset(nc.compile(s1)), compileNode(s1, 'node-1'));
  // A local pod with an IPv6 address only, in no policy's targets or peers: the chains' reads are the same.
  const other = pod('a', 'other', { labels: { app: 'other' }, ips: ['fd00:1::9'] });
  const s2 = { ...s1, pods: [...s1.pods, other].sort((x, y) => x.name.localeCompare(y.name)) };
  const before = nc.chains;
  const got = nc.compile(s2);
  assert.equal(nc.lastMode, 'incremental');
  // Its rules per family follow the families (chain-memo.ts): none of the kept chains may be taken over.
  assert.equal(nc.chains.taken, before.taken, 'no chain is taken over when the families changed');
  assert.equal(nc.chains.compiled, before.compiled + 2);
  assert.deepEqual(plainRuleset(got), compileNode(s2, 'node-1'));
  // A local pod in no policy's targets or peers changes again, the families stay: both chains are taken over.
  const relabeled = { ...other, labels: { app: 'other', v: '2' } };
  const s3 = { ...s2, pods: s2.pods.map((p) => (p === other ? relabeled : p)) };
  assert.deepEqual(plainRuleset(nc.compile(s3)), compileNode(s3, 'node-1'));
  assert.equal(nc.lastMode, 'incremental');
  assert.equal(nc.chains.taken, before.taken + 2);
});

test('an identity is built again when another policy with the same peers, ports and targets takes a term place', () => {
  const web = pod('a', 'web', { labels: { app: 'web' }, ips: ['10.0.1.5'] });
  const client = pod('a', 'client', { labels: { app: 'client' }, node: 'node-2', ips: ['10.0.2.7'] });
  const same = (name: string): NetworkPolicy =>
    policy('a', name, {
      podSelector: sel({ app: 'web' }),
      ingress: [rule([podPeer(sel({ app: 'client' }))], [port('TCP', 80)])],
    });
  const nc = new NodeCompiler('node-1');
  const s1 = state({ pods: [web, client], policies: [same('p1'), same('p2')], nodes: NODES });
  assert.deepEqual(plainRuleset(nc.compile(s1)), compileNode(s1, 'node-1'));
  // p1 goes, p3 comes: the client's source lists two terms again, equal but for their rule (the first allowing one changes).
  const s2 = { ...s1, policies: [s1.policies.at(1)!, same('p3')] };
  const got = nc.compile(s2);
  assert.equal(nc.lastMode, 'incremental');
  assert.deepEqual(plainRuleset(got), compileNode(s2, 'node-1'));
  assert.doesNotMatch(renderRuleset(got), /a\/p1/);
});
