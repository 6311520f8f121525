// The Admin tier's Pass (and its "no rule matches"), folded into the
// NetworkPolicy tier's lookup of the same source or destination.
//
// Unfolded, a connection the Admin tier passes on pays both tiers' address
// lookups: the pod chain jumps to `admin-ingress` (remote address -> tier
// identity chain KUBE-PEERS-<cid>, whose decision maps goto the Pass rule's
// chain, `counter return`), then back in the pod chain to `ingress-peers`
// (remote address -> NetworkPolicy identity chain KUBE-PEERS-<nid>, whose
// allow maps goto the allowing rule's chain). When every pod address that
// leads to <cid> leads to the same <nid> (the common case: rules naming the
// same pods), the second address lookup is known once the first is done. The
// tier identity's chain then becomes
//
//   KUBE-PEERS-<cid>-IN:        jump KUBE-PEERS-<cid>-IN-TIER    (its decision maps, as before)
//                               jump KUBE-PEERS-<nid>-IN         (reached on Pass or no Admin decision)
//
// so the Pass rule's `counter return` (its chain and counter unchanged) and a
// `return` in a decision map come back into KUBE-PEERS-<cid>-IN and go on
// with the NetworkPolicy identity's allow maps: one address lookup less per
// passed connection (as many jumps). Nothing else changes: when the allow maps do
// not decide (a pod they do not isolate, a port they do not allow), the chain
// ends, the pod chain goes on as before (its own NetworkPolicy lookup, now a
// second miss, then the deny tail or the Baseline tier). An identity reached
// from a range (the range maps), or whose addresses have several or no
// NetworkPolicy identity, or whose decisions pass nothing on explicitly (no
// Pass rule, no `return` piece), stays as it is. Typed data in, typed data out.
import { countObjects, decisionBlocks } from '../ruleset/ir.ts';
import type { Chain, CompiledRuleset, DecisionMap, DecisionVerdict, Rule } from '../ruleset/ir.ts';
import { tierDecisionsChainName } from '../ruleset/ids.ts';

/**
 * Whether some element of `m` has a verdict `pred` holds for. A block map's
 * (ruleset/ir.ts) verdicts are read from its blocks' tails: listing its
 * elements would build one object per local address and tail (~70k at 100k
 * pods), only to read the same few verdicts again.
 */
function someVerdict(m: DecisionMap, pred: (v: DecisionVerdict) => boolean): boolean {
  const blocks = decisionBlocks(m);
  if (blocks === undefined) return m.elements.some((e) => pred(e.verdict));
  return blocks.some((b) => b.addrs.length > 0 && b.tails.some((t) => pred(t.verdict)));
}

/** Chains referenced from anywhere but an Admin tier's (non-range) peer map. */
function otherwiseReferenced(rs: CompiledRuleset): Set<string> {
  const out = new Set<string>();
  for (const m of rs.maps) {
    if (m.kind === 'tier-peers' && m.tier === 'admin' && !m.interval) continue;
    for (const e of m.elements) if (e.chain !== undefined) out.add(e.chain);
  }
  const add = (v: DecisionVerdict): boolean => {
    if (v.kind === 'goto') out.add(v.chain);
    return false;
  };
  for (const m of rs.decisions) someVerdict(m, add);
  for (const c of rs.chains)
    for (const r of c.rules) if (r.verdict.kind === 'jump' || r.verdict.kind === 'goto') out.add(r.verdict.chain);
  return out;
}

/**
 * Whether an identity's decisions pass anything on explicitly: a Pass rule or
 * a `return` piece. Only those are folded, so the ruleset grows with the
 * Pass rules in use, not with every identity (a miss in all decision maps
 * goes on to the NetworkPolicy tier unfolded, as before).
 */
function passes(decisions: ReadonlyMap<string, DecisionMap>, chains: ReadonlyMap<string, Chain>, cid: string): boolean {
  const passed = (v: DecisionVerdict): boolean => v.kind === 'return' || chains.get(v.chain)?.counts?.action === 'Pass';
  for (const r of chains.get(cid)?.rules ?? []) {
    if (r.verdict.kind !== 'decisionVmap') continue;
    const m = decisions.get(r.verdict.map);
    if (m !== undefined && someVerdict(m, passed)) return true;
  }
  return false;
}

/** Admin tier identity chain -> the NetworkPolicy identity chain of all its addresses (where there is one). */
function passTargets(rs: CompiledRuleset): Map<string, string> {
  // The Admin tier's (non-range) peer elements by direction and family, then
  // the NetworkPolicy peer maps' chains of those addresses only (the peer
  // maps hold every remote address the node's policies name).
  const admin = new Map<string, Map<string, string | undefined>>();
  for (const m of rs.maps) {
    if (m.kind !== 'tier-peers' || m.tier !== 'admin' || m.interval || m.shadow === true) continue;
    let wanted = admin.get(`${m.direction} ${m.family}`);
    if (wanted === undefined) admin.set(`${m.direction} ${m.family}`, (wanted = new Map()));
    for (const e of m.elements) if (e.chain !== undefined && typeof e.key === 'string') wanted.set(e.key, undefined);
  }
  if (admin.size === 0) return new Map();
  for (const m of rs.maps) {
    if (m.kind !== 'peers' || m.interval || m.shadow === true) continue;
    const wanted = admin.get(`${m.direction} ${m.family}`);
    if (wanted === undefined) continue;
    for (const e of m.elements)
      if (typeof e.key === 'string' && e.chain !== undefined && wanted.has(e.key)) wanted.set(e.key, e.chain);
  }
  const target = new Map<string, string | null>();
  for (const m of rs.maps) {
    if (m.kind !== 'tier-peers' || m.tier !== 'admin' || m.interval || m.shadow === true) continue;
    const np = admin.get(`${m.direction} ${m.family}`);
    for (const e of m.elements) {
      if (e.chain === undefined || typeof e.key !== 'string') continue;
      const n = np?.get(e.key) ?? null;
      const before = target.get(e.chain);
      target.set(e.chain, before === undefined || before === n ? n : null);
    }
  }
  const chains = new Map(rs.chains.map((c) => [c.name, c]));
  const decisions = new Map(rs.decisions.map((m) => [m.name, m]));
  const out = new Map<string, string>();
  for (const [cid, nid] of target)
    if (nid !== null && chains.get(cid)?.role === 'peers' && chains.get(nid)?.role === 'peers' && passes(decisions, chains, cid))
      out.set(cid, nid);
  // Last, as it reads every map element: often nothing is left to fold.
  if (out.size === 0) return out;
  const other = otherwiseReferenced(rs);
  for (const cid of [...out.keys()]) if (other.has(cid)) out.delete(cid);
  return out;
}

const jump = (chain: string, comment: string | undefined): Rule => ({
  matches: [],
  counter: false,
  verdict: { kind: 'jump', chain },
  comment,
});

/** `rs` with the Admin tier's passed connections continuing in the NetworkPolicy identity's chain (see above). */
export function foldPass(rs: CompiledRuleset): CompiledRuleset {
  if (rs.decisions.length === 0) return rs;
  const targets = passTargets(rs);
  if (targets.size === 0) return rs;
  const chains: Chain[] = [];
  // The entries go last among the peers chains: the chains they jump to are rendered before them.
  const entries: Chain[] = [];
  for (const c of rs.chains) {
    const nid = targets.get(c.name);
    if (nid === undefined) {
      chains.push(c);
      continue;
    }
    const decisions = tierDecisionsChainName(c.name);
    chains.push({ ...c, name: decisions });
    entries.push({
      ...c,
      rules: [jump(decisions, undefined), jump(nid, 'Pass or no Admin rule: the NetworkPolicy tier of the same peers')],
    });
  }
  const all = [...chains, ...entries];
  return { ...rs, chains: all, stats: { ...rs.stats, ...countObjects(rs.sets, rs.maps, all, rs.decisions) } };
}
