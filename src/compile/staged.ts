// Staged policies (model/staged.ts): the shadow path that finds, per new
// connection, what the verdict would be with the staged policies enforced,
// and counts (and with --log-denied logs) the connections whose verdict would
// change, without changing any verdict. See docs/datapath.md ("Staged policies").
//
// It is the same compiler run twice: the enforced ruleset E (staged policies
// skipped by the kinds) and the shadow ruleset S (compileWith on
// withStagedEnforced(state)). Only S's chains reachable from the pod chains of
// the local pods a staged policy selects ("affected", per direction) are kept,
// in two renamed copies whose terminal verdicts are rewritten:
//
//   ACC (STG-ACC-*): run for packets E accepted, from base chains at a later
//   priority on the same hooks (an `accept` ends only its own base chain;
//   E's `drop` is final, so only E's accepts get here). S's accept stays an
//   accept; S's deny becomes a jump to a tally chain that counts and logs
//   "would deny" and accepts.
//
//   DEN (STG-DEN-*): run for packets E denies, from E's pod chain right
//   before its deny verdict (affected pods only). S's deny stays a deny (the
//   enforced verdict, counted like E's deny path); S's accept, and falling off
//   the end of S's pod chain, become a jump to a tally chain that counts and
//   logs "would allow" and then denies. Every exit of DEN is final: no
//   verdict of it can reach past E's pod chain.
//
// Nothing is added when no staged policy selects a local pod: the ruleset is
// then E, byte for byte.
import type { ContributedPolicy, PolicyKind, PolicyOrigin, TieredPolicy } from '../kinds/kind.ts';
import { POLICY_KINDS, tieredPolicies } from '../kinds/registry.ts';
import { selectorMatches } from '../model/selector.ts';
import { DIRECTIONS, FAMILIES, objectKey } from '../model/types.ts';
import type { ClusterState, Direction, Family, Pod, PortSpec } from '../model/types.ts';
import {
  parseTierRuleChainName,
  podChainName,
  podId,
  portSetName,
  setId,
  sanitizeComment,
  STAGED_DENIED_PREFIX,
  DENY_LOG_LIMIT,
  stagedLogPrefix,
  stagedTallyChainName,
} from '../ruleset/ids.ts';
import { countObjects } from '../ruleset/ir.ts';
import type { Chain, CompiledRuleset, DecisionMap, Match, NamedSet, Rule, Verdict, VerdictMap } from '../ruleset/ir.ts';
import type { RenderOptions } from '../ruleset/options.ts';
import { DENY_LOG_SNAPLEN } from './deny-path.ts';
import { namedPorts, numericPortElements, numericPortRanges, portRangeText } from './ports.ts';
import type { PortRange } from './ports.ts';
import { ND_TYPES } from './dispatch.ts';

export type ShadowMode = 'acc' | 'den';

/** Priorities of the shadow path's base chains: after the enforced ones (0 and 1) on the same hooks. */
export const STAGED_PRIORITY = 10;

export const STAGED_BASE_CHAINS = {
  forwardEgress: 'staged-forward-egress',
  forwardIngress: 'staged-forward-ingress',
  inputEgress: 'staged-input-egress',
} as const;

const CHAIN_PREFIX: Record<ShadowMode, string> = { acc: 'STG-ACC-', den: STAGED_DENIED_PREFIX };
const CHANGE: Record<ShadowMode, 'would-deny' | 'would-allow'> = { acc: 'would-deny', den: 'would-allow' };

/** A local pod a staged policy selects in a direction, with the staged policies doing so (evaluation order). */
export interface Affected {
  readonly pod: Pod;
  readonly direction: Direction;
  /** In evaluation order (Admin tier, allow-list, Baseline tier). */
  readonly policies: readonly PolicyOrigin[];
  /**
   * Whether a connection the enforced rules accept can be denied with the
   * staged ones. False when enforced allow-list policies already isolate the
   * pod in this direction and only staged allow-list policies select it there:
   * allow-lists only add allowances, and the ordered tiers are the same in E
   * and S, so E's accept is S's. Then the after-accept (ACC) path leaves the
   * pod out.
   */
  readonly mayDeny: boolean;
  /**
   * The protocols and ports the staged policies' rules in this direction
   * match, when they all name numeric ports (undefined: any port or protocol
   * may be matched, e.g. a rule without ports, a named port, a staged
   * ClusterNetworkPolicy). A staged policy changes only the verdict of
   * packets its own rules match, so a denied packet outside these cannot be
   * a "would allow": the denied path then skips the shadow copy.
   */
  readonly ports: readonly PortRange[] | undefined;
}

/** What the staged allow-list rules of a pod and direction can match (see Affected.ports). */
function stagedPorts(policies: readonly ContributedPolicy[], d: Direction): PortRange[] | undefined {
  const specs: PortSpec[] = [];
  for (const p of policies) {
    for (const r of p[d]) {
      if (r.ports === undefined || r.ports.length === 0 || namedPorts(r.ports).length > 0) return undefined;
      specs.push(...r.ports);
    }
  }
  return numericPortRanges(specs);
}

function subjectSelects(t: TieredPolicy, pod: Pod, nsLabels: ReadonlyMap<string, Readonly<Record<string, string>>>): boolean {
  const labels = nsLabels.get(pod.namespace);
  return (
    labels !== undefined &&
    selectorMatches(t.subject.namespaceSelector, labels) &&
    selectorMatches(t.subject.podSelector, pod.labels)
  );
}

/**
 * The local pods each staged policy selects, per direction: the policies the
 * kinds contribute with staged policies enforced that they do not contribute
 * without (so any kind's staged objects count, by key).
 */
export function affectedPods(
  enforced: ClusterState,
  shadow: ClusterState,
  local: readonly Pod[],
  kinds: readonly PolicyKind[] = POLICY_KINDS,
): Affected[] {
  const allowList: ContributedPolicy[] = [];
  const enforcedAllowList: ContributedPolicy[] = [];
  for (const kind of kinds) {
    if (kind.tier !== 'allow-list') continue;
    const mine = kind.policies(enforced);
    enforcedAllowList.push(...mine);
    const before = new Set(mine.map((p) => p.key));
    for (const p of kind.policies(shadow)) if (!before.has(p.key)) allowList.push(p);
  }
  const beforeTiered = new Set(tieredPolicies(enforced, kinds).map((t) => t.key));
  const tiered = tieredPolicies(shadow, kinds).filter((t) => !beforeTiered.has(t.key));
  if (allowList.length === 0 && tiered.length === 0) return [];
  const nsLabels = new Map(shadow.namespaces.map((n) => [n.name, n.labels]));
  const out: Affected[] = [];
  const isolates = (p: ContributedPolicy, pod: Pod, d: Direction): boolean =>
    p.types[d] && p.namespace === pod.namespace && selectorMatches(p.podSelector, pod.labels);
  for (const pod of local) {
    for (const d of DIRECTIONS) {
      const admin = tiered.filter((t) => t.tier === 'admin' && t[d].length > 0 && subjectSelects(t, pod, nsLabels));
      const baseline = tiered.filter((t) => t.tier === 'baseline' && t[d].length > 0 && subjectSelects(t, pod, nsLabels));
      const staged = allowList.filter((p) => isolates(p, pod, d));
      const names = [...admin.map((t) => t.origin), ...staged.map((p) => p.origin), ...baseline.map((t) => t.origin)];
      if (names.length === 0) continue;
      const mayDeny = admin.length > 0 || baseline.length > 0 || !enforcedAllowList.some((p) => isolates(p, pod, d));
      const ports = admin.length > 0 || baseline.length > 0 ? undefined : stagedPorts(staged, d);
      out.push({ pod, direction: d, policies: names, mayDeny, ports });
    }
  }
  return out;
}

const isDeny = (v: Verdict): boolean => v.kind === 'drop' || v.kind === 'reject';

function jump(chain: string, matches: readonly Match[] = [], comment?: string): Rule {
  return { matches, counter: false, verdict: { kind: 'jump', chain }, comment };
}

/** What S holds, by name. */
interface Shadow {
  readonly chains: ReadonlyMap<string, Chain>;
  readonly maps: ReadonlyMap<string, VerdictMap>;
  readonly decisions: ReadonlyMap<string, DecisionMap>;
  readonly sets: ReadonlyMap<string, NamedSet>;
}

/** S's objects reachable from these chains, with the direction each is reached in. */
function reachable(s: Shadow, start: readonly { chain: string; direction: Direction }[]) {
  const chains = new Map<string, Direction>();
  const maps = new Set<string>();
  const decisions = new Set<string>();
  const sets = new Set<string>();
  const todo = [...start];
  const visit = (name: string, d: Direction): void => {
    if (!chains.has(name) && s.chains.has(name)) todo.push({ chain: name, direction: d });
  };
  while (todo.length > 0) {
    const { chain, direction } = todo.pop() as { chain: string; direction: Direction };
    if (chains.has(chain)) continue;
    const c = s.chains.get(chain);
    if (c === undefined) continue;
    chains.set(chain, direction);
    for (const r of c.rules) {
      for (const m of r.matches) if ('set' in m) sets.add(m.set);
      const v = r.verdict;
      if (v.kind === 'jump' || v.kind === 'goto') visit(v.chain, direction);
      else if (v.kind === 'vmap') {
        maps.add(v.map);
        for (const e of s.maps.get(v.map)?.elements ?? []) if (e.chain !== undefined) visit(e.chain, direction);
      } else if (v.kind === 'decisionVmap') {
        decisions.add(v.map);
        for (const e of s.decisions.get(v.map)?.elements ?? []) if (e.verdict.kind === 'goto') visit(e.verdict.chain, direction);
      }
    }
  }
  return { chains, maps, decisions, sets };
}

const bigintSafe = (_k: string, v: unknown): unknown => (typeof v === 'bigint' ? v.toString() : v);

function sameSet(a: NamedSet, b: NamedSet): boolean {
  return (
    a.type === b.type &&
    a.interval === b.interval &&
    a.comment === b.comment &&
    JSON.stringify(a.elements, bigintSafe) === JSON.stringify(b.elements, bigintSafe)
  );
}

/** The enforced deny action, counted (a would-allow tally ends in it). */
function denyAction(o: RenderOptions, comment: string | undefined): Rule[] {
  if (o.denyAction === 'drop') return [{ matches: [], counter: true, verdict: { kind: 'drop' }, comment }];
  return [
    { matches: [{ kind: 'l4proto', proto: 'tcp' }], counter: true, verdict: { kind: 'reject', with: 'tcp reset' }, comment },
    { matches: [], counter: true, verdict: { kind: 'reject', with: 'icmpx port-unreachable' }, comment },
  ];
}

function stagedLog(prefix: string, o: RenderOptions): Rule[] {
  return o.logDenied === undefined
    ? []
    : [
        {
          // The deny path's limit: one log budget per node (a table object, fixed while logging is on).
          matches: [{ kind: 'limit', name: DENY_LOG_LIMIT }],
          counter: false,
          verdict: { kind: 'log', group: o.logDenied.group, prefix, snaplen: DENY_LOG_SNAPLEN },
          comment: undefined,
        },
      ];
}

function tallyLookupName(mode: ShadowMode, d: Direction): string {
  return `STG-${mode === 'acc' ? 'WD' : 'WA'}-${d === 'ingress' ? 'IN' : 'EG'}`;
}

function tallyMapName(mode: ShadowMode, d: Direction, f: Family): string {
  return `stg-${mode === 'acc' ? 'wd' : 'wa'}-${d}-v${f}`;
}

function localField(d: Direction): 'saddr' | 'daddr' {
  return d === 'ingress' ? 'daddr' : 'saddr';
}

/**
 * E with the shadow path of S added for the affected pods. `affected` empty:
 * E itself (no staged policy selects a local pod).
 */
export function withShadowPath(
  e: CompiledRuleset,
  s: CompiledRuleset,
  affected: readonly Affected[],
  o: RenderOptions,
  familyOf: (ip: string) => Family | undefined,
): CompiledRuleset {
  if (affected.length === 0) return e;
  const shadow: Shadow = {
    chains: new Map(s.chains.map((c) => [c.name, c])),
    maps: new Map(s.maps.map((m) => [m.name, m])),
    decisions: new Map(s.decisions.map((m) => [m.name, m])),
    sets: new Map(s.sets.map((x) => [x.name, x])),
  };
  // ACC only for the pods whose accepted connections a staged policy may deny (Affected.mayDeny).
  const inMode: Record<ShadowMode, readonly Affected[]> = { acc: affected.filter((a) => a.mayDeny), den: affected };
  const reachOf = (list: readonly Affected[]) =>
    reachable(
      shadow,
      list
        .map((a) => ({ chain: podChainName(podId(a.pod.namespace, a.pod.name), a.direction), direction: a.direction }))
        .filter((x) => shadow.chains.has(x.chain)),
    );
  const reachIn: Record<ShadowMode, ReturnType<typeof reachable>> = { acc: reachOf(inMode.acc), den: reachOf(inMode.den) };
  const reach = reachIn.den; // every affected pod: a superset of ACC's

  // Sets carry no verdicts: one copy for both modes, shared with E when E holds the same set.
  const eSets = new Map(e.sets.map((x) => [x.name, x]));
  const setName = new Map<string, string>();
  const newSets: NamedSet[] = [];
  for (const x of s.sets) {
    if (!reach.sets.has(x.name)) continue;
    const mine = eSets.get(x.name);
    if (mine !== undefined && sameSet(mine, x)) {
      setName.set(x.name, x.name);
    } else {
      const name = `stg-${x.name}`;
      setName.set(x.name, name);
      newSets.push({ ...x, name });
    }
  }

  const tallies: Chain[] = [];
  const tallyMaps: VerdictMap[] = [];
  const tallyLookups: Chain[] = [];
  const copies: Chain[] = [];
  const copyMaps: VerdictMap[] = [];
  const copyDecisions: DecisionMap[] = [];
  const dirs = new Set(affected.map((a) => a.direction));

  for (const mode of ['acc', 'den'] as const) {
    const mine = inMode[mode];
    const modeDirs = new Set(mine.map((a) => a.direction));
    const chainName = (n: string): string => `${CHAIN_PREFIX[mode]}${n}`;
    const mapName = (n: string): string => `stg-${mode}-${n}`;
    const tallyOf = (id: string, d: Direction): string => stagedTallyChainName(CHANGE[mode], id, d);
    const podOfChain = new Map<string, { id: string; d: Direction }>();
    for (const a of mine) {
      const id = podId(a.pod.namespace, a.pod.name);
      podOfChain.set(podChainName(id, a.direction), { id, d: a.direction });
    }

    // Tallies: per affected pod and direction, and a lookup per direction for the shared chains.
    const elems = new Map<string, { key: string; chain: string }[]>();
    for (const a of mine) {
      const id = podId(a.pod.namespace, a.pod.name);
      const what = `staged: ${CHANGE[mode].replace('-', ' ')} ${a.direction} ${a.direction === 'ingress' ? 'to' : 'from'} ${objectKey(a.pod)}`;
      const comment = sanitizeComment(what);
      const tally = tallyOf(id, a.direction);
      tallies.push({
        name: tally,
        role: 'tally',
        base: undefined,
        comment,
        rules: [
          ...stagedLog(stagedLogPrefix(id, a.direction, CHANGE[mode]), o),
          ...(mode === 'acc'
            ? [{ matches: [], counter: true, verdict: { kind: 'accept' }, comment } satisfies Rule]
            : denyAction(o, comment)),
        ],
      });
      for (const ip of a.pod.ips) {
        const f = familyOf(ip);
        if (f === undefined) continue;
        const m = tallyMapName(mode, a.direction, f);
        let l = elems.get(m);
        if (l === undefined) elems.set(m, (l = []));
        if (!l.some((x) => x.key === ip)) l.push({ key: ip, chain: tally });
      }
    }
    for (const d of DIRECTIONS) {
      if (!modeDirs.has(d)) continue;
      for (const f of FAMILIES) {
        const name = tallyMapName(mode, d, f);
        const list = (elems.get(name) ?? []).sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
        tallyMaps.push({ name, kind: 'tally', family: f, direction: d, interval: false, elements: list, shadow: true });
      }
      tallyLookups.push({
        name: tallyLookupName(mode, d),
        role: 'tally-lookup',
        base: undefined,
        comment: `staged: ${CHANGE[mode].replace('-', ' ')} ${d}, by local pod`,
        rules: [
          ...FAMILIES.map((f): Rule => ({
            matches: [],
            counter: false,
            verdict: { kind: 'vmap', family: f, field: localField(d), map: tallyMapName(mode, d, f) },
            comment: undefined,
          })),
          // Not a known local pod (cannot happen: the maps list every affected pod): the enforced verdict.
          ...(mode === 'acc'
            ? [{ matches: [], counter: false, verdict: { kind: 'accept' }, comment: undefined } satisfies Rule]
            : denyAction(o, undefined).map((r) => ({ ...r, counter: false }))),
        ],
      });
    }

    // The copy of S's reachable chains, with the terminal verdicts of this mode.
    const rewrite = (c: Chain, d: Direction): Chain => {
      const pod = c.role === 'pod' ? podOfChain.get(c.name) : undefined;
      const tally = pod === undefined ? tallyLookupName(mode, d) : tallyOf(pod.id, pod.d);
      const rules: Rule[] = [];
      for (const r of c.rules) {
        const v = r.verdict;
        switch (v.kind) {
          case 'log':
            break; // E's deny path logs the enforced denials; the tallies log the changes
          case 'drop':
          case 'reject':
            if (mode === 'acc') rules.push(jump(tally, r.matches, r.comment));
            else rules.push(r); // denied in S too: the enforced deny, counted here instead of in E's tail
            break;
          case 'accept':
            rules.push(mode === 'acc' ? { ...r, counter: false } : jump(tally, r.matches, r.comment));
            break;
          case 'jump':
          case 'goto':
            rules.push({ ...r, counter: false, verdict: { kind: v.kind, chain: chainName(v.chain) } });
            break;
          case 'vmap':
            rules.push({ ...r, counter: false, verdict: { ...v, map: mapName(v.map) } });
            break;
          case 'decisionVmap':
            rules.push({ ...r, counter: false, verdict: { ...v, map: mapName(v.map) } });
            break;
          case 'return':
            rules.push({ ...r, counter: false });
            break;
        }
      }
      // Falling off the end of S's pod chain is S's accept.
      if (mode === 'den' && pod !== undefined && !(rules.length > 0 && isDeny(rules[rules.length - 1]!.verdict)))
        rules.push(jump(tally));
      return {
        name: chainName(c.name),
        role: c.role,
        base: undefined,
        comment: sanitizeComment(`staged ${mode === 'acc' ? 'after accept' : 'after deny'}: ${c.comment ?? c.name}`),
        rules: rules.map((r) => ({
          ...r,
          matches: r.matches.map((m) => ('set' in m ? { ...m, set: setName.get(m.set) ?? m.set } : m)),
        })),
      };
    };
    for (const c of s.chains) {
      const d = reachIn[mode].chains.get(c.name);
      if (d !== undefined) copies.push(rewrite(c, d));
    }
    for (const m of s.maps) {
      if (!reachIn[mode].maps.has(m.name)) continue;
      copyMaps.push({
        ...m,
        name: mapName(m.name),
        elements: m.elements.map((x) => (x.chain === undefined ? x : { ...x, chain: chainName(x.chain) })),
        shadow: true,
      });
    }
    for (const m of s.decisions) {
      if (!reachIn[mode].decisions.has(m.name)) continue;
      copyDecisions.push({
        ...m,
        name: mapName(m.name),
        elements: m.elements.map((x) =>
          x.verdict.kind === 'goto' ? { ...x, verdict: { kind: 'goto', chain: chainName(x.verdict.chain) } } : x,
        ),
      });
    }
  }

  // ACC's entry: base chains after E's, dispatching the affected pods' addresses to their ACC pod chains.
  const dispatchElems = new Map<string, { key: string; chain: string }[]>();
  for (const a of inMode.acc) {
    const pc = podChainName(podId(a.pod.namespace, a.pod.name), a.direction);
    if (!shadow.chains.has(pc)) continue; // S accepts it like E: nothing can change
    for (const ip of a.pod.ips) {
      const f = familyOf(ip);
      if (f === undefined) continue;
      const name = `stg-acc-${a.direction}-v${f}`;
      let l = dispatchElems.get(name);
      if (l === undefined) dispatchElems.set(name, (l = []));
      if (!l.some((x) => x.key === ip)) l.push({ key: ip, chain: `${CHAIN_PREFIX.acc}${pc}` });
    }
  }
  const dispatchMaps: VerdictMap[] = [];
  const bases: Chain[] = [];
  const entries: { name: string; hook: 'forward' | 'input'; priority: number; d: Direction; comment: string }[] = [
    {
      name: STAGED_BASE_CHAINS.forwardEgress,
      hook: 'forward',
      priority: STAGED_PRIORITY,
      d: 'egress',
      comment: 'staged policies: egress of local pods (after enforcement)',
    },
    {
      name: STAGED_BASE_CHAINS.forwardIngress,
      hook: 'forward',
      priority: STAGED_PRIORITY + 1,
      d: 'ingress',
      comment: 'staged policies: ingress of local pods (after enforcement)',
    },
    {
      name: STAGED_BASE_CHAINS.inputEgress,
      hook: 'input',
      priority: STAGED_PRIORITY,
      d: 'egress',
      comment: 'staged policies: egress of local pods to this node (after enforcement)',
    },
  ];
  for (const d of DIRECTIONS) {
    if (!FAMILIES.some((f) => dispatchElems.has(`stg-acc-${d}-v${f}`))) continue;
    for (const f of FAMILIES) {
      const name = `stg-acc-${d}-v${f}`;
      const list = (dispatchElems.get(name) ?? []).sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
      dispatchMaps.push({ name, kind: 'dispatch', family: f, direction: d, interval: false, elements: list, shadow: true });
    }
  }
  for (const b of entries) {
    if (!dispatchMaps.some((m) => m.direction === b.d)) continue;
    const rules: Rule[] = [
      {
        matches: [{ kind: 'ctState', states: ['established', 'related'] }],
        counter: false,
        verdict: { kind: 'accept' },
        comment: undefined,
      },
      { matches: [{ kind: 'icmpv6Types', types: ND_TYPES }], counter: false, verdict: { kind: 'accept' }, comment: undefined },
      ...(b.hook === 'input' && o.allowPodToNode
        ? [
            {
              matches: [{ kind: 'fibLocal', field: 'daddr', local: true }],
              counter: false,
              verdict: { kind: 'accept' },
              comment: undefined,
            } satisfies Rule,
          ]
        : []),
      ...FAMILIES.map((f): Rule => ({
        matches: [],
        counter: false,
        verdict: { kind: 'vmap', family: f, field: localField(b.d), map: `stg-acc-${b.d}-v${f}` },
        comment: undefined,
      })),
    ];
    bases.push({
      name: b.name,
      role: 'base',
      base: { hook: b.hook, priority: b.priority },
      comment: b.comment,
      rules,
      shadow: true,
    });
  }

  // DEN's entry: E's pod chains of affected pods jump to it right before
  // their deny verdict; only for the protocols and ports the staged rules
  // match, when those are bounded (Affected.ports).
  const denEntry = new Map<string, string>();
  const denFilter = new Map<string, Match[]>();
  for (const a of affected) {
    const id = podId(a.pod.namespace, a.pod.name);
    const pc = podChainName(id, a.direction);
    denEntry.set(pc, shadow.chains.has(pc) ? `${CHAIN_PREFIX.den}${pc}` : stagedTallyChainName('would-allow', id, a.direction));
    if (a.ports === undefined) continue;
    // Staged rules matching nothing (a staged default-deny): no jump at all.
    if (a.ports.length === 0) {
      denFilter.set(pc, []);
      continue;
    }
    const texts = a.ports.map(portRangeText);
    const name = portSetName(setId(`staged-ports\0${texts.join(',')}`));
    if (!newSets.some((x) => x.name === name) && !e.sets.some((x) => x.name === name))
      newSets.push({
        name,
        type: 'inet_proto . inet_service',
        interval: true,
        elements: numericPortElements(a.ports),
        comment: sanitizeComment(`staged policies' ports: ${texts.join(', ')}`),
      });
    denFilter.set(pc, [{ kind: 'portSet', set: name }]);
  }
  // A tiered Deny rule's chain is shared by the pods its policy selects: it
  // asks a lookup by local address, which knows the affected pods (others fall
  // through to the deny).
  const ruleEntryMaps: VerdictMap[] = [];
  const ruleEntries: Chain[] = [];
  const ruleEntryOf = new Map<Direction, string>();
  for (const d of DIRECTIONS) {
    if (!dirs.has(d)) continue;
    const byFamily = new Map<Family, { key: string; chain: string }[]>();
    for (const a of affected) {
      if (a.direction !== d) continue;
      const target = denEntry.get(podChainName(podId(a.pod.namespace, a.pod.name), d));
      if (target === undefined) continue;
      for (const ip of a.pod.ips) {
        const f = familyOf(ip);
        if (f === undefined) continue;
        let l = byFamily.get(f);
        if (l === undefined) byFamily.set(f, (l = []));
        if (!l.some((x) => x.key === ip)) l.push({ key: ip, chain: target });
      }
    }
    const name = `STG-DENR-${d === 'ingress' ? 'IN' : 'EG'}`;
    ruleEntryOf.set(d, name);
    for (const f of FAMILIES) {
      const list = (byFamily.get(f) ?? []).sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
      ruleEntryMaps.push({
        name: `stg-denr-${d}-v${f}`,
        kind: 'tally',
        family: f,
        direction: d,
        interval: false,
        elements: list,
        shadow: true,
      });
    }
    ruleEntries.push({
      name,
      role: 'tally-lookup',
      base: undefined,
      comment: `staged: ${d} denied by a shared rule, to the staged verdict of affected pods`,
      rules: FAMILIES.map((f): Rule => ({
        matches: [],
        counter: false,
        verdict: { kind: 'vmap', family: f, field: localField(d), map: `stg-denr-${d}-v${f}` },
        comment: undefined,
      })),
    });
  }
  const chains = e.chains.map((c): Chain => {
    const tier = c.role === 'rule' ? parseTierRuleChainName(c.name) : undefined;
    const target = c.role === 'pod' ? denEntry.get(c.name) : tier === undefined ? undefined : ruleEntryOf.get(tier.direction);
    const at = c.rules.findIndex((r) => isDeny(r.verdict));
    if (target === undefined || at < 0) return c;
    const filter = c.role === 'pod' ? denFilter.get(c.name) : undefined;
    // Staged rules matching no port at all: nothing to ask.
    if (filter !== undefined && filter.length === 0) return c;
    return {
      ...c,
      rules: [
        ...c.rules.slice(0, at),
        jump(target, filter ?? [], 'staged policies: what they would decide'),
        ...c.rules.slice(at),
      ],
    };
  });

  const sets = [...e.sets, ...newSets];
  const maps = [...tallyMaps, ...ruleEntryMaps, ...copyMaps, ...e.maps, ...dispatchMaps];
  const decisions = [...copyDecisions, ...e.decisions];
  // Shadow chains first: within a role, what is referenced comes first (E's pod chains jump to DEN's).
  const allChains = [...tallies, ...tallyLookups, ...ruleEntries, ...copies, ...chains, ...bases];
  return {
    ...e,
    sets,
    maps,
    decisions,
    chains: allChains,
    stats: { ...e.stats, ...countObjects(sets, maps, allChains, decisions) },
  };
}
