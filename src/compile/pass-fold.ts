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
//
// Both tier layouts of tiers.ts fold alike: in the per-class layout the
// identity chain is a class's own, reached from that class's peer map (a
// decision map of remote address -> goto, looked up from its lookup chain
// `admin-<direction>-<class>`), and its decisions may be rules of the chain
// (`meta l4proto tcp th dport 80 goto KUBE-NWPLCY-...`, `return`) and a
// `jump` for protocols without ports: a Pass rule reached from them, or a
// `return`, passes on explicitly, as a map's element does.
import { countObjects, decisionBlocks, decisionColumns } from '../ruleset/ir.ts';
import type { Chain, CompiledRuleset, DecisionMap, DecisionVerdict, Rule } from '../ruleset/ir.ts';
import { tierDecisionsChainName } from '../ruleset/ids.ts';
import type { Direction } from '../model/types.ts';

/**
 * Whether some element of `m` has a verdict `pred` holds for. A block map's
 * (ruleset/ir.ts) verdicts are read from its blocks' tails: listing its
 * elements would build one object per local address and tail (~70k at 100k
 * pods), only to read the same few verdicts again.
 */
function someVerdict(m: DecisionMap, pred: (v: DecisionVerdict) => boolean): boolean {
  const columns = decisionColumns(m);
  if (columns !== undefined) return columns.verdicts.some(pred);
  const blocks = decisionBlocks(m);
  if (blocks === undefined) return m.elements.some((e) => pred(e.verdict));
  return blocks.some((b) => b.addrs.length > 0 && b.tails.some((t) => pred(t.verdict)));
}

/**
 * The per-class layout's Admin peer maps (compile/tiers.ts): remote address
 * -> a class's identity chain, looked up from the class's lookup chain
 * `admin-<direction>-<class>`; by map name, their direction (hash maps only:
 * a range's identity is not folded, as in the shared layout).
 */
function classPeerMaps(rs: CompiledRuleset): Map<string, Direction> {
  const out = new Map<string, Direction>();
  for (const c of rs.chains) {
    if (c.role !== 'lookup') continue;
    const d: Direction | undefined = c.name.startsWith('admin-ingress-')
      ? 'ingress'
      : c.name.startsWith('admin-egress-')
        ? 'egress'
        : undefined;
    if (d === undefined) continue;
    for (const r of c.rules) if (r.verdict.kind === 'decisionVmap' && r.verdict.key === 'peer') out.set(r.verdict.map, d);
  }
  for (const m of rs.decisions) if (m.interval) out.delete(m.name);
  return out;
}

/** Chains referenced from anywhere but an Admin tier's (non-range) peer map, shared or per class. */
function otherwiseReferenced(rs: CompiledRuleset, classMaps: ReadonlyMap<string, Direction>): Set<string> {
  const out = new Set<string>();
  for (const m of rs.maps) {
    if (m.kind === 'tier-peers' && m.tier === 'admin' && !m.interval) continue;
    for (const e of m.elements) if (e.chain !== undefined) out.add(e.chain);
  }
  const add = (v: DecisionVerdict): boolean => {
    if (v.kind === 'goto') out.add(v.chain);
    return false;
  };
  for (const m of rs.decisions) if (!classMaps.has(m.name)) someVerdict(m, add);
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
    const v = r.verdict;
    if (v.kind === 'decisionVmap') {
      const m = decisions.get(v.map);
      if (m !== undefined && someVerdict(m, passed)) return true;
    } else if (v.kind === 'return' || v.kind === 'goto' || v.kind === 'jump') {
      // The per-class layout's folded decisions (`... th dport 80 goto KUBE-NWPLCY-...`), and its jump for protocols without ports.
      if (passed(v.kind === 'return' ? v : { kind: 'goto', chain: v.chain })) return true;
    }
  }
  return false;
}

/** Admin tier identity chain -> the NetworkPolicy identity chain of all its addresses (where there is one). */
function passTargets(rs: CompiledRuleset): Map<string, string> {
  // The Admin tier's (non-range) peer elements by direction and family (the
  // shared peer maps and the per-class ones alike: address -> identity
  // chain) whose identity passes something on, then the NetworkPolicy peer
  // maps' chains of those addresses only (the peer maps hold every remote
  // address the node's policies name).
  const classMaps = classPeerMaps(rs);
  /** Every (non-range) Admin peer element: its direction and family, address and identity chain. */
  const eachAdmin = (visit: (at: string, key: string, chain: string) => void): void => {
    for (const m of rs.maps) {
      if (m.kind !== 'tier-peers' || m.tier !== 'admin' || m.interval || m.shadow === true) continue;
      const at = `${m.direction} ${m.family}`;
      for (const e of m.elements) if (e.chain !== undefined && typeof e.key === 'string') visit(at, e.key, e.chain);
    }
    for (const m of rs.decisions) {
      const d = classMaps.get(m.name);
      if (d === undefined) continue;
      const at = `${d} ${m.family}`;
      const columns = decisionColumns(m);
      if (columns !== undefined) {
        columns.addrs.forEach((addr, i) => {
          const v = columns.verdicts[i]!;
          if (v.kind === 'goto') visit(at, addr, v.chain);
        });
        continue;
      }
      for (const e of m.elements)
        if (e.key.kind === 'addr' && typeof e.key.addr === 'string' && e.verdict.kind === 'goto')
          visit(at, e.key.addr, e.verdict.chain);
    }
  };
  const chains = new Map(rs.chains.map((c) => [c.name, c]));
  const decisions = new Map(rs.decisions.map((m) => [m.name, m]));
  // Only identities that pass something on are folded: known from their chains alone, so
  // asked first, and the addresses read only for those (often none: nothing more to read).
  const passing = new Map<string, boolean>();
  const passesOn = (cid: string): boolean => {
    let p = passing.get(cid);
    if (p === undefined) passing.set(cid, (p = chains.get(cid)?.role === 'peers' && passes(decisions, chains, cid)));
    return p;
  };
  const admin = new Map<string, Map<string, string | undefined>>();
  let current: Map<string, string | undefined> | undefined;
  let currentAt = '';
  eachAdmin((at, key, chain) => {
    if (!passesOn(chain)) return;
    if (at !== currentAt || current === undefined) {
      currentAt = at;
      current = admin.get(at);
      if (current === undefined) admin.set(at, (current = new Map()));
    }
    current.set(key, undefined);
  });
  if (admin.size === 0) return new Map();
  for (const m of rs.maps) {
    if (m.kind !== 'peers' || m.interval || m.shadow === true) continue;
    const wanted = admin.get(`${m.direction} ${m.family}`);
    if (wanted === undefined) continue;
    for (const e of m.elements)
      if (typeof e.key === 'string' && e.chain !== undefined && wanted.has(e.key)) wanted.set(e.key, e.chain);
  }
  // The identities split out of the pod maps (peer-split.ts): their addresses in plain sets.
  for (const x of rs.sets) {
    if (x.split === undefined) continue;
    const wanted = admin.get(`${x.split.direction} ${x.split.family}`);
    if (wanted === undefined) continue;
    for (const e of x.elements)
      if (e.kind === 'addr' && typeof e.addr === 'string' && wanted.has(e.addr)) wanted.set(e.addr, x.split.chain);
  }
  const target = new Map<string, string | null>();
  eachAdmin((at, key, chain) => {
    if (!passesOn(chain)) return;
    const n = admin.get(at)?.get(key) ?? null;
    const before = target.get(chain);
    if (before === undefined || before !== n) target.set(chain, before === undefined ? n : null);
  });
  const out = new Map<string, string>();
  for (const [cid, nid] of target) if (nid !== null && chains.get(nid)?.role === 'peers') out.set(cid, nid);
  // Last, as it reads every map element: often nothing is left to fold.
  if (out.size === 0) return out;
  const other = otherwiseReferenced(rs, classMaps);
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
