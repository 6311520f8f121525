// What staged policies (model/staged.ts) would change: the verdict as
// enforced, the verdict with the staged policies enforced, and per direction
// whether it changes ("would deny", "would allow"), which staged policy and
// rule cause it and the evaluator's reason. `explain --staged` prints it; the
// agent names the cause of each logged change with it (agent/denied/log-line.ts).
import type { PolicyKind } from '../kinds/kind.ts';
import { POLICY_KINDS, tieredPolicies } from '../kinds/registry.ts';
import { withStagedEnforced } from '../model/staged.ts';
import type { ClusterState, Direction, Family, Protocol } from '../model/types.ts';
import { verdict, type DirectionVerdict, type Endpoint, type Verdict } from './verdict.ts';

export type StagedChangeKind = 'would-deny' | 'would-allow';

export interface StagedChange {
  readonly direction: Direction;
  readonly change: StagedChangeKind;
  /** The staged policies causing it, as the evaluator names policies (`ns/name`, `ClusterNetworkPolicy NAME`). */
  readonly policies: readonly string[];
  /** The rule that decides with staged policies, when it is one rule of a staged policy. */
  readonly rule: string | undefined;
  /** The evaluator's reason with staged policies enforced. */
  readonly reason: string;
}

export interface StagedVerdict {
  readonly enforced: Verdict;
  /** With every staged policy enforced. */
  readonly staged: Verdict;
  readonly changes: readonly StagedChange[];
}

/** The names (as the evaluator gives them) of the policies only the staged state has. */
export function stagedPolicyLabels(state: ClusterState, kinds: readonly PolicyKind[] = POLICY_KINDS): ReadonlySet<string> {
  const shadow = withStagedEnforced(state);
  const out = new Set<string>();
  if (shadow === state) return out;
  for (const kind of kinds) {
    if (kind.tier !== 'allow-list') continue;
    const before = new Set(kind.policies(state).map((p) => p.key));
    for (const p of kind.policies(shadow)) if (!before.has(p.key)) out.add(p.origin.label);
  }
  const before = new Set(tieredPolicies(state, kinds).map((t) => t.key));
  for (const t of tieredPolicies(shadow, kinds)) if (!before.has(t.key)) out.add(t.origin.label);
  return out;
}

function cause(
  d: DirectionVerdict,
  change: StagedChangeKind,
  staged: ReadonlySet<string>,
): { policies: string[]; rule: string | undefined } {
  // A tiered rule of a staged policy decided.
  if (d.decidedBy !== undefined && staged.has(d.decidedBy.policy))
    return { policies: [d.decidedBy.policy], rule: d.decidedBy.description };
  // A staged Pass handed it on to a tier that decides otherwise.
  const pass = d.passed.find((p) => staged.has(p.policy));
  if (pass !== undefined) return { policies: [pass.policy], rule: pass.description };
  if (change === 'would-allow') {
    const by = d.allowedBy.filter((r) => staged.has(r.policy));
    if (by.length > 0) return { policies: [...new Set(by.map((r) => r.policy))], rule: by[0]?.description };
  }
  // Isolated (or selected) by staged policies, and nothing allows it.
  const selecting = [...d.policies, ...d.clusterPolicies].filter((p) => staged.has(p));
  return { policies: selecting, rule: undefined };
}

/** The connection as enforced and with staged policies, and what would change (nothing when nothing is staged). */
export function stagedVerdict(
  state: ClusterState,
  from: Endpoint,
  to: Endpoint,
  protocol: Protocol,
  port: number,
  opts?: { family?: Family; kinds?: readonly PolicyKind[]; allowPodToNode?: boolean },
): StagedVerdict {
  const enforced = verdict(state, from, to, protocol, port, opts);
  const shadow = withStagedEnforced(state);
  if (shadow === state) return { enforced, staged: enforced, changes: [] };
  // Endpoints are pods of `state`; the staged state holds the same pod objects.
  const staged = verdict(shadow, from, to, protocol, port, opts);
  const labels = stagedPolicyLabels(state, opts?.kinds);
  const changes: StagedChange[] = [];
  for (const direction of ['egress', 'ingress'] as const) {
    const a = enforced[direction];
    const b = staged[direction];
    if (a.allowed === b.allowed) continue;
    const change: StagedChangeKind = b.allowed ? 'would-allow' : 'would-deny';
    changes.push({ direction, change, ...cause(b, change, labels), reason: b.reason });
  }
  return { enforced, staged, changes };
}

/** `egress at the source: would deny (ns/p: rule): reason`, one line per change, or that nothing changes. */
export function stagedChangesText(v: StagedVerdict, stagedCount: number): string {
  const head =
    stagedCount === 0
      ? 'staged policies: none'
      : `with staged policies: ${v.staged.allowed ? 'ALLOWED' : 'DENIED'} (enforced: ${v.enforced.allowed ? 'ALLOWED' : 'DENIED'})`;
  const lines = [head];
  if (stagedCount > 0 && v.changes.length === 0)
    lines.push('  no change: the staged policies decide this connection as enforced');
  for (const c of v.changes) {
    const at = c.direction === 'egress' ? 'egress at the source' : 'ingress at the destination';
    const by = c.rule ?? (c.policies.length === 0 ? 'staged policies' : c.policies.join(', '));
    lines.push(`  ${at}: ${c.change.replace('-', ' ')} by ${by}`, `    ${c.reason}`);
  }
  return lines.join('\n') + '\n';
}
