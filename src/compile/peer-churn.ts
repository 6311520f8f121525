// A remote pod's churn applied to the last flattened ruleset instead of
// compiling again. When only pods of other nodes changed (and nothing else of
// the state), the per-policy ruleset is the same except for what its peer
// sets hold, and the flat one differs only in the identity (identities.ts)
// of the changed pods' addresses: each such address gets its new identity
// key from the pod peer sets that select the changed pods (a count of
// selected pods per address, so a reused IP stays while another pod holds
// it), its pod map element moves, an identity that gains its first address
// gets its chain and sets, one that loses its last loses them. The cost
// follows the changed pods and the peer sets on this node, not the cluster.
// What this cannot express (the pod is in a range or egress named-port
// source, the state has tiered policies) returns undefined: compile afresh.
// The result is always exactly compileNode's (property-tested).
import { formatIP, parseIP } from '../model/ip.ts';
import { selectorMatches } from '../model/selector.ts';
import { isActivePod } from '../model/types.ts';
import type { Family, LabelSelector, Pod } from '../model/types.ts';
import type { Chain, CompiledRuleset, MapElement, NamedSet } from '../ruleset/ir.ts';
import type { ReadonlyList } from '../model/list.ts';
import { assembleFlat, buildPodIdentity } from './identities.ts';
import { byTokenSource, moveCount, tokenSource } from './identity-patch.ts';
import { chooseSplit, placeAddresses, sameChoice } from './peer-split.ts';
import type { SplitPart } from './peer-split.ts';
import type { PodIdentityPart } from './identities.ts';
import type { PodFollow } from './terms.ts';
import { parseV4 } from './v4.ts';

interface Source {
  readonly key: string;
  readonly follows: PodFollow;
  /** Selected active pods per address; built on first use (from the resolver of the compile it came from). */
  counts: Map<string, number> | undefined;
  /** How many addresses the compile put in the set: the counts must agree. */
  readonly size: number;
}

interface Part {
  readonly base: PodIdentityPart;
  /** Pod-address sources of this family, by key. */
  readonly sources: readonly Source[];
  /** Sources whose content this does not follow (ranges, egress named ports): a pod they select means a fresh compile. */
  readonly guards: readonly PodFollow[];
  readonly keys: Map<string, string>;
  readonly built: PodIdentityPart['built'];
  /** Addresses per identity key (the compile's, moved along with `keys`). */
  readonly counts: Map<string, number>;
  elements: ReadonlyList<MapElement>;
  /** The identities out of the pod map (peer-split.ts). */
  split: readonly SplitPart[];
  /** Addresses whose key changed here (the next compile's patch looks at them again). */
  dirty: Set<string> | undefined;
}

/** A pod address in the compiler's text (peers.ts: IPv4 via numbers, the rest via parseIP), if it is of family `f`. */
function canonical(text: string, f: Family): string | undefined {
  // parseV4 takes canonical dotted quads only: the text is the compiler's already.
  if (parseV4(text) !== undefined) return f === 4 ? text : undefined;
  const ip = parseIP(text);
  return ip === undefined || ip.family !== f ? undefined : formatIP(ip);
}

export interface ChurnLookups {
  /** Names of the namespaces a namespaceSelector matches (unchanged while this is used). */
  readonly namespacesMatching: (sel: LabelSelector) => readonly string[];
  /** The active pods a pod-peer source holds, in the state of the compile the parts came from. */
  readonly podsOf: (f: PodFollow) => readonly Pod[];
}

/**
 * A namespace list (the index's memoized result for a selector) as a set, for
 * as long as the list lives: one per list, not one per PeerChurn (a compile
 * makes one; up to 5,000 namespaces each: ~0.2 MiB of garbage per apply under
 * load at 100k pods, issue 24, memory).
 */
const nsSets = new WeakMap<readonly string[], ReadonlySet<string>>();

export class PeerChurn {
  readonly #base: CompiledRuleset;
  readonly #otherSets: readonly NamedSet[];
  readonly #rest: readonly Chain[];
  readonly #parts: Part[];
  readonly #lookups: ChurnLookups;

  /** `flat`: what flattenRulesetParts returned for the last compile. */
  constructor(
    flat: {
      readonly base: CompiledRuleset;
      readonly otherSets: readonly NamedSet[];
      readonly parts: readonly PodIdentityPart[];
      readonly rest: readonly Chain[];
    },
    lookups: ChurnLookups,
    inherited?: ReadonlyMap<string, Map<string, number>>,
  ) {
    this.#base = flat.base;
    this.#otherSets = flat.otherSets;
    this.#rest = flat.rest;
    this.#lookups = lookups;
    this.#parts = flat.parts.map((p): Part => {
      const sources = new Map<string, Source>();
      const guards: PodFollow[] = [];
      for (const t of p.terms) {
        if (t.follows === undefined) continue;
        if (t.source.kind === 'pods' && t.family === p.family) {
          if (!sources.has(t.source.key)) {
            const size = t.source.addrs.length;
            // Counts the last PeerChurn kept for the same set (same peers, same family), advanced by advance().
            const kept = inherited?.get(countsKey(p, t.source.key));
            sources.set(t.source.key, {
              key: t.source.key,
              follows: t.follows,
              counts: kept?.size === size ? kept : undefined,
              size,
            });
          }
        } else if (t.source.kind === 'named' || t.source.kind === 'ranges') guards.push(t.follows);
      }
      return {
        base: p,
        sources: [...sources.values()],
        guards,
        keys: p.keys,
        built: p.built,
        counts: p.counts,
        elements: p.elements,
        split: p.split,
        dirty: undefined,
      };
    });
  }

  /** The parts as they are now (with every churn applied): what the next compile may reuse (flattenRulesetParts). */
  parts(): readonly PodIdentityPart[] {
    return this.#parts.map((p) => ({
      ...p.base,
      keys: p.keys,
      built: p.built,
      counts: p.counts,
      elements: p.elements,
      split: p.split,
      ...(p.dirty === undefined ? {} : { dirty: p.dirty }),
    }));
  }

  /**
   * The counts taken so far, to hand on to the PeerChurn of the next compile
   * (after advance() by the same pod diff): a set's pods change only with pods.
   */
  counts(): Map<string, Map<string, number>> {
    const out = new Map<string, Map<string, number>>();
    for (const part of this.#parts)
      for (const s of part.sources) if (s.counts !== undefined) out.set(countsKey(part.base, s.key), s.counts);
    return out;
  }

  /**
   * Moves the counts taken so far by a pod diff that a compile (not apply())
   * handles: the identities are that compile's business, the counts stay right.
   */
  advance(removed: readonly Pod[], added: readonly Pod[]): void {
    for (const part of this.#parts) {
      const f = part.base.family;
      for (const s of part.sources) {
        const counts = s.counts;
        if (counts === undefined) continue;
        for (const [pods, delta] of [
          [removed, -1],
          [added, 1],
        ] as const) {
          for (const p of pods) {
            if (!this.#selects(s.follows, p)) continue;
            for (const text of p.ips) {
              const a = canonical(text, f);
              if (a === undefined) continue;
              const n = (counts.get(a) ?? 0) + delta;
              if (n > 0) counts.set(a, n);
              else counts.delete(a);
            }
          }
        }
      }
    }
  }

  #selects(f: PodFollow, pod: Pod): boolean {
    if (!isActivePod(pod)) return false;
    if (f.peers === undefined) return true;
    for (const peer of f.peers) {
      if (peer.kind !== 'pods') continue;
      if (peer.namespaceSelector === undefined) {
        if (pod.namespace !== f.namespace) continue;
      } else {
        const names = this.#lookups.namespacesMatching(peer.namespaceSelector);
        let set = nsSets.get(names);
        if (set === undefined) nsSets.set(names, (set = new Set(names)));
        if (!set.has(pod.namespace)) continue;
      }
      if (peer.podSelector === undefined || selectorMatches(peer.podSelector, pod.labels)) return true;
    }
    return false;
  }

  #counts(s: Source, f: Family): Map<string, number> {
    if (s.counts !== undefined) return s.counts;
    const counts = new Map<string, number>();
    for (const pod of this.#lookups.podsOf(s.follows)) {
      for (const text of pod.ips) {
        const a = canonical(text, f);
        if (a !== undefined) counts.set(a, (counts.get(a) ?? 0) + 1);
      }
    }
    if (counts.size !== s.size) throw new Error(`peer churn: set ${s.key} holds ${s.size} addresses, its pods ${counts.size}`);
    s.counts = counts;
    return counts;
  }

  /**
   * The ruleset after these pods (none of this node) changed: `removed` old
   * objects, `added` new ones. Call before the index moves on (the counts
   * are first taken from the state the last compile saw). undefined: this
   * change needs a compile; nothing was changed then.
   */
  apply(removed: readonly Pod[], added: readonly Pod[]): CompiledRuleset | undefined {
    const changed = [...removed, ...added];
    for (const part of this.#parts) for (const g of part.guards) if (changed.some((p) => this.#selects(g, p))) return undefined;
    // Every count is taken (and checked) before anything changes.
    const work = this.#parts.map((part) => {
      const affected = part.sources.filter((s) => changed.some((p) => this.#selects(s.follows, p)));
      for (const s of affected) this.#counts(s, part.base.family);
      return { part, affected };
    });
    for (const { part, affected } of work) {
      const f = part.base.family;
      if (affected.length === 0) continue;
      const touched = new Set<string>();
      const count = (pods: readonly Pod[], delta: number): void => {
        for (const s of affected) {
          const counts = this.#counts(s, f);
          for (const p of pods) {
            if (!this.#selects(s.follows, p)) continue;
            for (const text of p.ips) {
              const a = canonical(text, f);
              if (a === undefined) continue;
              const n = (counts.get(a) ?? 0) + delta;
              if (n > 0) counts.set(a, n);
              else counts.delete(a);
              touched.add(a);
            }
          }
        }
      };
      count(removed, -1);
      count(added, 1);
      const mine = new Set(affected.map((s) => s.key));
      const counts = part.counts;
      // The addresses whose chain changed: placed anew in one copy of the
      // map (and of a split set) by placeAddresses (peer-split.ts).
      const moved = new Set<string>();
      for (const a of touched) {
        const ko = part.keys.get(a);
        const tokens = (ko === undefined ? [] : ko.split('|')).filter((t) => !mine.has(tokenSource(t)));
        for (const s of affected) if (s.counts!.has(a)) tokens.push(s.key);
        tokens.sort(byTokenSource);
        const kn = tokens.length === 0 ? undefined : tokens.join('|');
        if (kn === ko) continue;
        (part.dirty ??= new Set()).add(a);
        const before = ko === undefined ? undefined : part.built.get(ko)?.chain.name;
        moveCount(counts, ko, kn);
        if (ko !== undefined && !counts.has(ko)) part.built.delete(ko);
        let after: string | undefined;
        if (kn !== undefined) {
          part.keys.set(a, kn);
          let b = part.built.get(kn);
          if (b === undefined) part.built.set(kn, (b = buildPodIdentity(part.base, kn)));
          after = b?.chain.name;
        } else part.keys.delete(a);
        if (before !== after) moved.add(a);
      }
      // The choice follows the counts: it changes only when one crosses a power of two.
      const next = chooseSplit(counts, (key) => part.built.get(key)?.chain.name, part.base.splitMin);
      if (moved.size === 0 && sameChoice(part.split, next)) continue;
      const placed = placeAddresses(
        { map: part.elements, split: part.split },
        next,
        moved,
        (addr) => {
          const key = part.keys.get(addr);
          return key === undefined ? undefined : part.built.get(key)?.chain.name;
        },
        f,
      );
      part.elements = placed.map;
      part.split = placed.split;
    }
    return assembleFlat(this.#base, this.#otherSets, this.parts(), this.#rest);
  }
}

function countsKey(p: PodIdentityPart, key: string): string {
  return `${p.direction}|${p.family}|${key}`;
}
