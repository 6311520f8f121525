// Remote addresses held out of the pod peer maps (nft/recent-peers.ts):
// which updates hold, which fold, and against the kernel that prev + each
// update is the compiled ruleset with exactly the held addresses moved from
// the map into their plain sets (a model built here, not by the planner).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { compileNode } from '../../src/compile/compile.ts';
import { listTable, runNft } from '../../src/nft/exec.ts';
import { addressText } from '../../src/nft/elements.ts';
import {
  heldCount,
  isLingering,
  NO_HELD_PEERS,
  NO_LINGERING,
  type HeldPeers,
  type Lingering,
} from '../../src/nft/recent-peers.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { renderUpdate } from '../../src/nft/update.ts';
import { listArray } from '../../src/model/list.ts';
import type { ClusterState, Pod } from '../../src/model/types.ts';
import { peerMapName } from '../../src/ruleset/ids.ts';
import type { Chain, CompiledRuleset, NamedSet, Rule, SetElement } from '../../src/ruleset/ir.ts';
import { ns, pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';
import { canonicalListing, withNetns } from './netns-support.ts';
import { sortedObjects } from './listing-objects.ts';
import { haveNft } from './nft-support.ts';

const NODES = [
  { name: 'node-1', addresses: ['192.168.100.1'], podCIDRs: ['10.0.1.0/24', 'fd00:1::/64'] },
  { name: 'node-2', addresses: ['192.168.100.2'], podCIDRs: ['10.0.2.0/24', 'fd00:2::/64'] },
];
const APPS = ['api', 'db', 'other'] as const;

function web(): Pod {
  return pod('a', 'web', { labels: { app: 'web' }, ips: ['10.0.1.2', 'fd00:1::2'] });
}

function remote(i: number, app: string): Pod {
  return pod('a', `r${i}`, { labels: { app }, ips: [`10.0.2.${10 + i}`, `fd00:2::${(10 + i).toString(16)}`], node: 'node-2' });
}

/** web in a isolated: api may reach 80, db 81 (two identities), web may reach api on 90; `extra` adds a rule (a policy change). */
function cluster(remotes: readonly Pod[], extra = false): ClusterState {
  const policies = [
    policy('a', 'web', {
      podSelector: sel({ app: 'web' }),
      ingress: [
        rule([podPeer(sel({ app: 'api' }))], [port('TCP', 80)]),
        rule([podPeer(sel({ app: 'db' }))], [port('TCP', 81)]),
        ...(extra ? [rule([podPeer(sel({ app: 'api' }))], [port('TCP', 8080)])] : []),
      ],
      egress: [rule([podPeer(sel({ app: 'api' }))], [port('TCP', 90)])],
    }),
  ];
  return state({ namespaces: [ns('a')], pods: [web(), ...remotes], policies, nodes: NODES });
}

const compile = (s: ClusterState): CompiledRuleset => compileNode(s, 'node-1');
const jumpsOrRules = /: (jump|goto) |^add rule /m;

test('a remote pod joining an identity, nothing else: its address in plain sets, no jump; a policy change folds it', () => {
  const prev = compile(cluster([remote(0, 'api')]));
  const next = compile(cluster([remote(0, 'api'), remote(1, 'api')]));
  const u = renderUpdate(prev, next, { held: NO_HELD_PEERS, fold: false });
  assert.equal(u.kind, 'incremental');
  if (u.kind !== 'incremental') return;
  assert.doesNotMatch(u.text, jumpsOrRules, u.text);
  assert.match(u.text, /^add element inet nft-netpol ingress-peers-v4-r-KUBE-PEERS-[0-9a-f]{12}-IN \{ 10\.0\.2\.11 \}$/m);
  assert.match(u.text, /^add element inet nft-netpol ingress-peers-v6-recent \{ fd00:2::b \}$/m);
  // v4 and v6, ingress (api's identity) and egress (web may reach api).
  assert.equal(u.heldOut, 4);
  assert.equal(heldCount(u.held), 4);
  assert.match(u.text, /^add element inet nft-netpol egress-peers-v4-r-KUBE-PEERS-[0-9a-f]{12}-EG \{ 10\.0\.2\.11 \}$/m);
  // Without the hold (no input): the map's jump element, as before.
  assert.match(renderUpdate(prev, next).text, /^add element inet nft-netpol ingress-peers-v4 \{ 10\.0\.2\.11 : jump /m);

  // A policy change adds a rule: the kernel validates anyway, so the held addresses go into the maps now.
  const later = compile(cluster([remote(0, 'api'), remote(1, 'api')], true));
  const f = renderUpdate(next, later, { held: u.held, fold: false });
  assert.ok(f.kind === 'incremental');
  assert.match(f.text, /^add element inet nft-netpol ingress-peers-v4 \{ 10\.0\.2\.11 : jump KUBE-PEERS-/m);
  assert.match(f.text, /^delete element inet nft-netpol ingress-peers-v4-recent \{ 10\.0\.2\.11 \}$/m);
  assert.equal(f.foldedIn, 4);
  assert.equal(heldCount(f.held), 0);
});

test('held addresses: leaving while held, moving between identities while held, the fold, the cap, a new identity', () => {
  const s0 = compile(cluster([remote(0, 'api'), remote(1, 'db')]));
  const s1 = compile(cluster([remote(0, 'api'), remote(1, 'db'), remote(2, 'api')]));
  const u1 = renderUpdate(s0, s1, { held: NO_HELD_PEERS, fold: false });
  assert.ok(u1.kind === 'incremental' && u1.heldOut === 4);
  // r2 goes from api to db while held: out of one identity's set, into the other's (egress: out of it); still no jump.
  const s2 = compile(cluster([remote(0, 'api'), remote(1, 'db'), remote(2, 'db')]));
  const u2 = renderUpdate(s1, s2, { held: u1.held, fold: false });
  assert.ok(u2.kind === 'incremental');
  assert.doesNotMatch(u2.text, jumpsOrRules, u2.text);
  assert.match(u2.text, /^delete element inet nft-netpol ingress-peers-v4-r-KUBE-PEERS-[0-9a-f]{12}-IN \{ 10\.0\.2\.12 \}$/m);
  assert.match(u2.text, /^add element inet nft-netpol ingress-peers-v4-r-KUBE-PEERS-[0-9a-f]{12}-IN \{ 10\.0\.2\.12 \}$/m);
  assert.doesNotMatch(u2.text, /element inet nft-netpol ingress-peers-v4 /);
  assert.equal(heldCount(u2.held), 2);
  // r2 deleted while held: out of its sets, not out of the map (it is not there).
  const u3 = renderUpdate(s2, compile(cluster([remote(0, 'api'), remote(1, 'db')])), { held: u2.held, fold: false });
  assert.ok(u3.kind === 'incremental');
  assert.doesNotMatch(u3.text, /element inet nft-netpol ingress-peers-v[46] /);
  assert.match(u3.text, /^delete element inet nft-netpol ingress-peers-v4-recent \{ 10\.0\.2\.12 \}$/m);
  assert.equal(heldCount(u3.held), 0);
  // Asked to fold: held addresses go into the maps though nothing else changed.
  const u4 = renderUpdate(s2, s2, { held: u2.held, fold: true });
  assert.ok(u4.kind === 'incremental' && u4.foldedIn === 2 && heldCount(u4.held) === 0);
  assert.match(u4.text, /^add element inet nft-netpol ingress-peers-v4 \{ 10\.0\.2\.12 : jump KUBE-PEERS-/m);
  // More than the cap would be held: everything is folded instead.
  const u5 = renderUpdate(s0, s1, { held: NO_HELD_PEERS, fold: false, max: 1 });
  assert.ok(u5.kind === 'incremental' && u5.heldOut === 0 && heldCount(u5.held) === 0);
  assert.match(u5.text, /^add element inet nft-netpol ingress-peers-v4 \{ 10\.0\.2\.12 : jump /m);
  // An identity that is new (its chain comes in this commit): no set of it in the kernel yet, not held.
  const s6 = compile(cluster([remote(0, 'api')]));
  const s7 = compile(cluster([remote(0, 'api'), remote(1, 'db')]));
  const u7 = renderUpdate(s6, s7, { held: NO_HELD_PEERS, fold: false });
  assert.ok(u7.kind === 'incremental' && u7.heldOut === 0 && u7.chainsAdded > 0);
  // A record the kernel cannot have (a set that does not exist): the full script.
  const bogus: HeldPeers = new Map([['ingress-peers-v4', new Map([['10.0.2.99', 'KUBE-PEERS-000000000000-IN']])]]);
  assert.equal(renderUpdate(s0, s1, { held: bogus, fold: false }).kind, 'full');
});

test('an identity dropped: its dispatch rule, flushed chain and set linger (no rule added, nothing to validate) until a fold', () => {
  const s0 = compile(cluster([remote(0, 'api'), remote(1, 'db')]));
  const s1 = compile(cluster([remote(0, 'api')]));
  const u = renderUpdate(s0, s1, { held: NO_HELD_PEERS, fold: false });
  assert.ok(u.kind === 'incremental');
  assert.doesNotMatch(u.text, jumpsOrRules, u.text);
  assert.match(u.text, /^flush chain inet nft-netpol KUBE-PEERS-[0-9a-f]{12}-IN$/m);
  assert.doesNotMatch(u.text, /^delete chain /m);
  assert.equal(u.lingering.chains.size, 2, 'the v4 and v6 identity chains');
  assert.equal(u.lingering.sets.size, 2, 'v4 and v6 held-address sets');
  // Without holding (as before): the dispatch chain rewritten, the identity's chain deleted.
  assert.match(renderUpdate(s0, s1).text, /^delete chain inet nft-netpol KUBE-PEERS-/m);
  // The fold: the dispatch chain as compiled, then the lingering chain and sets deleted.
  const f = renderUpdate(s1, s1, { held: u.held, lingering: u.lingering, fold: true });
  assert.ok(f.kind === 'incremental' && !isLingering(f.lingering));
  assert.match(f.text, /^flush chain inet nft-netpol ingress-recent-v4$/m);
  assert.match(f.text, /^delete chain inet nft-netpol KUBE-PEERS-[0-9a-f]{12}-IN$/m);
  assert.match(f.text, /^delete set inet nft-netpol ingress-peers-v4-r-KUBE-PEERS-[0-9a-f]{12}-IN$/m);
  // The identity comes back while lingering: its chain is compiled again, its dispatch rule is still there.
  const b = renderUpdate(s1, s0, { held: u.held, lingering: u.lingering, fold: false });
  assert.ok(
    b.kind === 'incremental' && !isLingering(b.lingering),
    JSON.stringify(b.kind === 'incremental' ? [...b.lingering.chains] : b),
  );
  assert.doesNotMatch(b.text, /^add rule inet nft-netpol ingress-recent-v4 /m);
});

/** Every chain and set by name, and every dispatch rule by chain and identity, as last compiled. */
class Seen {
  readonly chains = new Map<string, Chain>();
  readonly sets = new Map<string, NamedSet>();
  readonly rules = new Map<string, Rule>();
  add(rs: CompiledRuleset): void {
    for (const c of rs.chains) {
      this.chains.set(c.name, c);
      for (const r of c.rules)
        if (r.verdict.kind === 'goto' && /-recent-v[46]$/.test(c.name)) this.rules.set(`${c.name} ${r.verdict.chain}`, r);
    }
    for (const x of rs.sets) this.sets.set(x.name, x);
  }
}

/**
 * What the kernel should hold: the compiled ruleset with the held addresses
 * out of their pod peer maps (in their identity's and the gate's sets), the
 * dispatch chains in the kernel's order, and the lingering chains (flushed)
 * and sets (empty) of dropped identities.
 */
function kernelModel(rs: CompiledRuleset, held: HeldPeers, lingering: Lingering, seen: Seen): CompiledRuleset {
  const h = withHeld(rs, held);
  const chains = h.chains.map((c) => {
    const ids = lingering.dispatch.get(c.name);
    if (ids === undefined) return c;
    return { ...c, rules: ids.map((id) => seen.rules.get(`${c.name} ${id}`)!) };
  });
  for (const name of lingering.chains) chains.push({ ...seen.chains.get(name)!, rules: [] });
  const sets = [...h.sets];
  for (const name of lingering.sets) sets.push({ ...seen.sets.get(name)!, elements: [] });
  return { ...h, chains, sets };
}

/** The compiled ruleset with the held addresses out of their pod peer maps, in their identity's and the gate's sets. */
function withHeld(rs: CompiledRuleset, held: HeldPeers): CompiledRuleset {
  const keys = new Map<string, SetElement[]>();
  const maps = rs.maps.map((m) => {
    const h = held.get(m.name);
    if (h === undefined || m.kind !== 'peers' || m.interval) return m;
    const elements = listArray(m.elements);
    for (const e of elements) {
      const chain = h.get(addressText(e.key));
      if (chain === undefined) continue;
      for (const k of [`${m.name} ${chain}`, `${m.name} gate`]) {
        const xs = keys.get(k) ?? [];
        xs.push({ kind: 'addr', addr: e.key });
        keys.set(k, xs);
      }
    }
    return { ...m, elements: elements.filter((e) => !h.has(addressText(e.key))) };
  });
  const sets = rs.sets.map((s) => {
    if (s.recent === undefined) return s;
    const map = peerMapName(s.recent.direction, s.recent.family, false);
    return { ...s, elements: keys.get(`${map} ${s.recent.chain ?? 'gate'}`) ?? [] };
  });
  return { ...rs, maps, sets };
}

async function listing(netns: string): Promise<string> {
  const l = await listTable('nft-netpol', { netns });
  assert.ok(l !== undefined, `no table in ${netns}`);
  return sortedObjects(canonicalListing(l));
}

type Step =
  | { readonly op: 'add'; readonly app: (typeof APPS)[number] }
  | { readonly op: 'delete'; readonly at: number }
  | { readonly op: 'relabel'; readonly at: number; readonly app: (typeof APPS)[number] }
  | { readonly op: 'policy' }
  | { readonly op: 'fold' };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...APPS).map((app) => ({ op: 'add' as const, app })) },
  { weight: 2, arbitrary: fc.nat().map((at) => ({ op: 'delete' as const, at })) },
  {
    weight: 3,
    arbitrary: fc.tuple(fc.nat(), fc.constantFrom(...APPS)).map(([at, app]) => ({ op: 'relabel' as const, at, app })),
  },
  { weight: 1, arbitrary: fc.constant({ op: 'policy' as const }) },
  { weight: 1, arbitrary: fc.constant({ op: 'fold' as const }) },
);

test('kernel, property: prev + each update holds exactly the held addresses out of the maps; a held commit adds no jump, no rule', async (t) => {
  if (!(await haveNft(t))) return;
  let heldSteps = 0;
  let foldSteps = 0;
  let lingeringSteps = 0;
  await withNetns(2, async ([a, b]) => {
    if (a === undefined || b === undefined) throw new Error('two namespaces needed');
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...APPS), { minLength: 1, maxLength: 4 }),
        fc.array(stepArb, { minLength: 1, maxLength: 8 }),
        async (start, steps) => {
          let next = 0;
          let remotes = start.map((app) => remote(next++, app));
          let extra = false;
          let prev = compile(cluster(remotes, extra));
          let held: HeldPeers = NO_HELD_PEERS;
          let lingering: Lingering = NO_LINGERING;
          const seen = new Seen();
          seen.add(prev);
          const ok = await runNft(renderRuleset(prev), { netns: a });
          assert.ok(ok.ok, ok.ok ? '' : ok.error);
          for (const s of steps) {
            if (s.op === 'add') remotes = [...remotes, remote(next++, s.app)];
            else if (s.op === 'delete' && remotes.length > 0) remotes = remotes.filter((_, i) => i !== s.at % remotes.length);
            else if (s.op === 'relabel' && remotes.length > 0) {
              const at = s.at % remotes.length;
              remotes = remotes.map((p, i) => (i === at ? { ...p, labels: { app: s.app } } : p));
            } else if (s.op === 'policy') extra = !extra;
            const cur = compile(cluster(remotes, extra));
            seen.add(cur);
            const u = renderUpdate(prev, cur, { held, lingering, fold: s.op === 'fold' });
            assert.equal(u.kind, 'incremental', u.kind === 'full' ? u.reason : '');
            if (u.kind !== 'incremental') return;
            if (u.heldOut > 0) {
              heldSteps++;
              assert.doesNotMatch(u.text, jumpsOrRules, u.text);
            }
            if (u.foldedIn > 0) foldSteps++;
            if (s.op === 'fold' || s.op === 'policy') assert.equal(heldCount(u.held), 0, `${s.op} folds`);
            if (s.op === 'fold') assert.equal(isLingering(u.lingering), false, 'a fold leaves nothing lingering');
            if (isLingering(u.lingering)) lingeringSteps++;
            const r = await runNft(u.text, { netns: a });
            assert.ok(r.ok, `${s.op}: ${r.ok ? '' : r.error}\n${u.text}`);
            const full = await runNft(renderRuleset(kernelModel(cur, u.held, u.lingering, seen)), { netns: b });
            assert.ok(full.ok, full.ok ? '' : full.error);
            assert.equal(await listing(a), await listing(b), `${s.op}\n${u.text}`);
            prev = cur;
            held = u.held;
            lingering = u.lingering;
          }
        },
      ),
      { numRuns: 40, seed: 2411 },
    );
  });
  t.diagnostic(
    `steps that held addresses ${heldSteps}, that folded ${foldSteps}, after which something lingered ${lingeringSteps}`,
  );
  assert.ok(
    heldSteps >= 20 && foldSteps >= 5 && lingeringSteps >= 5,
    `held ${heldSteps}, folded ${foldSteps}, lingering ${lingeringSteps}`,
  );
});
