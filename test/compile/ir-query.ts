// Lookups into a CompiledRuleset by Kubernetes identity, so compile tests read
// like the policy they check, plus the text of a chain's rules.
import assert from 'node:assert/strict';
import type { Chain, CompiledRuleset, Match, NamedSet, VerdictMap } from '../../src/ruleset/ir.ts';
import type { Direction, Family } from '../../src/model/types.ts';
import { dispatchMapName, podChainName, podId, policyChainName, policyId } from '../../src/ruleset/ids.ts';
import { ruleText } from '../../src/nft/render.ts';
import { addressText, elementTexts } from '../../src/nft/elements.ts';

export function chain(c: CompiledRuleset, name: string): Chain | undefined {
  return c.chains.find((ch) => ch.name === name);
}

export function policyChain(c: CompiledRuleset, ns: string, name: string, d: Direction): Chain | undefined {
  return chain(c, policyChainName(policyId(ns, name), d));
}

export function podChain(c: CompiledRuleset, ns: string, name: string, d: Direction): Chain | undefined {
  return chain(c, podChainName(podId(ns, name), d));
}

export function mustPolicyChain(c: CompiledRuleset, ns: string, name: string, d: Direction): Chain {
  const ch = policyChain(c, ns, name, d);
  assert.ok(ch, `no ${d} chain for policy ${ns}/${name}; chains: ${c.chains.map((x) => x.name).join(' ')}`);
  return ch;
}

export function set(c: CompiledRuleset, name: string): NamedSet {
  const s = c.sets.find((x) => x.name === name);
  assert.ok(s, `no set ${name}`);
  return s;
}

export function map(c: CompiledRuleset, d: Direction, f: Family): VerdictMap {
  const m = c.maps.find((x) => x.name === dispatchMapName(d, f));
  assert.ok(m, `no map ${d} v${f}`);
  return m;
}

/** Map keys -> goto targets ('accept' for a known pod nothing isolates), for compact assertions. */
export function mapEntries(c: CompiledRuleset, d: Direction, f: Family): Record<string, string> {
  return Object.fromEntries(map(c, d, f).elements.map((e) => [addressText(e.key), e.chain ?? 'accept']));
}

export function rules(ch: Chain): string[] {
  return ch.rules.map(ruleText);
}

function setsOf(m: Match): string[] {
  return m.kind === 'addrSet' || m.kind === 'portSet' || m.kind === 'namedPortSet' ? [m.set] : [];
}

/** For each rule of the chain: the elements of every set it matches on, in match order. */
export function ruleSets(c: CompiledRuleset, ch: Chain): string[][][] {
  return ch.rules.map((r) => r.matches.flatMap(setsOf).map((n) => elementTexts(set(c, n))));
}

/** Elements of the sets of one kind a chain's rules use, e.g. all peer4 sets. */
export function elementsByKind(c: CompiledRuleset, ch: Chain, kind: Match['kind'], family?: Family): string[][] {
  const names = new Set<string>();
  for (const r of ch.rules) {
    for (const m of r.matches) {
      if (m.kind !== kind) continue;
      if (family !== undefined && 'family' in m && m.family !== family) continue;
      for (const n of setsOf(m)) names.add(n);
    }
  }
  return [...names].map((n) => elementTexts(set(c, n)));
}

/**
 * A chain's rules with set names reduced to their kind (`@peer4-*`): set
 * names are hashes of definitions, tested on their own (shared-sets.test.ts).
 */
export function shapes(ch: Chain): string[] {
  return rules(ch).map((r) => r.replace(/@(peer4|peer6|port|named4|named6)-[0-9a-f]{12}\b/g, '@$1-*'));
}

/** The one set of a kind (and family) the chain's rules match on. */
export function setOf(c: CompiledRuleset, ch: Chain, kind: Match['kind'], family?: Family): NamedSet {
  const names = new Set<string>();
  for (const r of ch.rules) {
    for (const m of r.matches) {
      if (m.kind !== kind || (family !== undefined && 'family' in m && m.family !== family)) continue;
      for (const n of setsOf(m)) names.add(n);
    }
  }
  assert.equal(names.size, 1, `${ch.name}: ${kind}${family ?? ''} sets: ${[...names].join(' ')}`);
  return set(c, [...names][0] ?? '');
}
