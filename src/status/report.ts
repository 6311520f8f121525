// "Is my policy in force, everywhere it must be?": pure, from what the
// `status` command read (NodePolicyStatus objects, Leases, policies, pods,
// Nodes, with tenancy NamespaceNetworkPolicies, Namespaces, Workspaces, and
// ClusterNetworkPolicies with every Namespace).
// A policy must be in force on every node hosting an active pod it selects;
// it is in force there when that node's live agent reports the policy's uid
// at its current generation (or later). A namespace's isolation has no
// generation (a Namespace has none; a Workspace's counts): reported with the
// same uid is in force.
import { isolationOf } from '../kinds/tenancy.ts';
import { tierPlace } from '../kinds/cluster-network-policy.ts';
import { EVERYTHING, selectorMatches } from '../model/selector.ts';
import { isActivePod } from '../model/types.ts';
import type {
  ClusterNetworkPolicy,
  LabelSelector,
  Namespace,
  NamespaceNetworkPolicy,
  NetworkPolicy,
  ObjectVersion,
  Pod,
  ValidationError,
  Workspace,
} from '../model/types.ts';
import { invalidField } from './build.ts';
import { clusterPolicyKind, entryKind } from './types.ts';
import type { AppliedPolicy, LeaseObject, NodePolicyStatusObject, PolicyKind } from './types.ts';

export interface ReportInput {
  readonly now: number;
  /** Names of the cluster's Nodes. */
  readonly nodes: readonly string[];
  readonly statuses: readonly NodePolicyStatusObject[];
  /** Leases of the agent namespace (named after nodes). */
  readonly leases: readonly LeaseObject[];
  /** Normalized policies (with version) of the namespaces asked about. */
  readonly policies: readonly NetworkPolicy[];
  /** Normalized pods of those namespaces. */
  readonly pods: readonly Pod[];
  /**
   * Tenancy (docs/tenancy.md), when the agents enforce it: the
   * NamespaceNetworkPolicies and the Namespaces whose isolation is asked
   * about, and every Workspace (a namespace's workspace decides its isolation).
   */
  readonly tenancy?: {
    readonly namespacePolicies: readonly NamespaceNetworkPolicy[];
    readonly namespaces: readonly Namespace[];
    readonly workspaces: readonly Workspace[];
  };
  /**
   * ClusterNetworkPolicies asked about (cluster-scoped: their subjects select
   * pods of any namespace, so `pods` are then every pod) and every Namespace
   * (their labels decide the subjects).
   */
  readonly clusterPolicies?: {
    readonly policies: readonly ClusterNetworkPolicy[];
    readonly namespaces: readonly Namespace[];
  };
}

export type AgentState = 'alive' | 'expired' | 'no-lease';

export interface NodeReport {
  readonly name: string;
  readonly agent: AgentState;
  /** renewTime + leaseDurationSeconds. */
  readonly leaseExpires: string | undefined;
  readonly hasStatus: boolean;
  readonly inSync: boolean | undefined;
  readonly policies: number | undefined;
  readonly lastApplyTime: string | undefined;
  readonly lastApplyResult: string | undefined;
  readonly lastError: string | undefined;
}

export interface Lagging {
  readonly node: string;
  /** The generation the node reports; undefined when it reports none of this policy. */
  readonly generation: number | undefined;
  /** Since when it has held that generation. */
  readonly since: string | undefined;
  /** The node's last apply error, if its last apply failed. */
  readonly lastError: string | undefined;
}

export interface PolicyReport {
  readonly kind: PolicyKind;
  readonly namespace: string;
  readonly name: string;
  readonly generation: number | undefined;
  /** Nodes hosting active pods it selects, sorted. */
  readonly nodes: readonly string[];
  readonly inForce: readonly string[];
  readonly lagging: readonly Lagging[];
  /** Nodes among `nodes` whose agent does not report (Lease expired or missing). */
  readonly notReporting: readonly string[];
  readonly invalidFields: readonly string[];
  /** Annotated nft-netpol.io/staged: "true": not enforced, evaluated in the nodes' shadow path only. */
  readonly staged?: true;
  /** A ClusterNetworkPolicy's tier and priority, `Admin tier, priority 10` (absent for the namespaced kinds). */
  readonly place?: string;
}

export interface ClusterReport {
  readonly nodes: readonly NodeReport[];
  readonly policies: readonly PolicyReport[];
  readonly summary: {
    readonly nodes: number;
    readonly inSync: number;
    readonly lagging: readonly string[];
    readonly notReporting: readonly string[];
    readonly policies: number;
    readonly policiesInForce: number;
    readonly policiesLagging: number;
    readonly invalidPolicies: number;
  };
  /** Everything is in force (exit 0); else exit 3. */
  readonly ok: boolean;
}

function ms(t: string | Date | undefined): number | undefined {
  if (t === undefined) return undefined;
  const v = t instanceof Date ? t.getTime() : Date.parse(t);
  return Number.isFinite(v) ? v : undefined;
}

export function leaseState(lease: LeaseObject | undefined, now: number): { state: AgentState; expires: string | undefined } {
  if (lease === undefined) return { state: 'no-lease', expires: undefined };
  const renew = ms(lease.spec?.renewTime);
  const dur = lease.spec?.leaseDurationSeconds;
  if (renew === undefined || dur === undefined) return { state: 'expired', expires: undefined };
  const expires = renew + dur * 1000;
  return { state: expires >= now ? 'alive' : 'expired', expires: new Date(expires).toISOString() };
}

function entryOf(s: NodePolicyStatusObject | undefined, kind: string, ns: string, name: string): AppliedPolicy | undefined {
  const list = s?.status?.policies;
  if (!Array.isArray(list)) return undefined;
  return list.find((e) => entryKind(e) === kind && e.namespace === ns && e.name === name);
}

/** The node reports this version (same object, current generation or newer) in force. */
function reportsCurrent(e: AppliedPolicy | undefined, v: ObjectVersion | undefined): boolean {
  if (e === undefined) return false;
  if (v?.uid !== undefined && e.uid !== undefined && e.uid !== v.uid) return false;
  if (v?.generation === undefined) return true;
  return e.generation !== undefined && e.generation >= v.generation;
}

/** What must be in force: one object (or one namespace's isolation) on the nodes of the pods it selects. */
interface Expected {
  readonly kind: PolicyKind;
  readonly namespace: string;
  readonly name: string;
  readonly version: ObjectVersion | undefined;
  /** Pods of `namespace` it selects (namespaced kinds). */
  readonly podSelector: LabelSelector;
  /** A cluster-scoped kind: pods of any namespace it selects (`namespace` and `podSelector` unused). */
  readonly subject?: (pod: Pod) => boolean;
  readonly place?: string;
  readonly errors: readonly ValidationError[];
  /** Its invalid fields are also those the agents find (a NamespaceNetworkPolicy's missing Service). */
  readonly reportedErrors: boolean;
  /** Annotated nft-netpol.io/staged: "true" (not enforced). */
  readonly staged?: boolean;
}

function expected(input: ReportInput): Expected[] {
  const out: Expected[] = input.policies.map((p) => ({
    kind: 'NetworkPolicy',
    namespace: p.namespace,
    name: p.name,
    version: p.version,
    podSelector: p.podSelector,
    errors: p.errors,
    reportedErrors: false,
    staged: p.staged === true,
  }));
  const c = input.clusterPolicies;
  if (c !== undefined) {
    const nsLabels = new Map(c.namespaces.map((n) => [n.name, n.labels]));
    for (const p of c.policies)
      out.push({
        kind: clusterPolicyKind(p),
        namespace: '',
        name: p.name,
        version: p.version,
        podSelector: EVERYTHING,
        subject: (pod) => {
          const labels = nsLabels.get(pod.namespace);
          return (
            labels !== undefined &&
            selectorMatches(p.subject.namespaceSelector, labels) &&
            selectorMatches(p.subject.podSelector, pod.labels)
          );
        },
        errors: p.errors,
        reportedErrors: false,
        staged: p.staged === true,
        place: tierPlace(p.tier === 'Admin' ? 'admin' : 'baseline', p.priority),
      });
  }
  const t = input.tenancy;
  if (t === undefined) return out;
  for (const p of t.namespacePolicies)
    out.push({
      kind: 'NamespaceNetworkPolicy',
      namespace: p.namespace,
      name: p.name,
      version: p.version,
      podSelector: EVERYTHING,
      errors: p.errors,
      reportedErrors: true,
    });
  const workspaces = new Map(t.workspaces.map((w) => [w.name, w]));
  const isolated = new Set(t.workspaces.filter((w) => w.networkIsolation).map((w) => w.name));
  const state = { namespaces: t.namespaces, pods: [], policies: [], nodes: [], workspaces: t.workspaces };
  for (const ns of t.namespaces) {
    const iso = isolationOf(state, ns, isolated);
    if (iso === undefined) continue;
    const common = { namespace: ns.name, podSelector: EVERYTHING, reportedErrors: false };
    if (iso.kind === 'project') out.push({ ...common, kind: 'ProjectIsolation', name: ns.name, version: ns.version, errors: [] });
    else if (iso.workspace !== undefined) {
      const w = workspaces.get(iso.workspace);
      out.push({ ...common, kind: 'WorkspaceIsolation', name: iso.workspace, version: w?.version, errors: w?.errors ?? [] });
    }
  }
  return out;
}

/** How a person names a policy entry: `shop/web`, `NamespaceNetworkPolicy shop/p`, `project isolation of ns shop`. */
export function policyLabel(p: { readonly kind: string; readonly namespace: string; readonly name: string }): string {
  switch (p.kind) {
    case 'ProjectIsolation':
      return `project isolation of ns ${p.namespace}`;
    case 'WorkspaceIsolation':
      return `workspace isolation of ${p.name} (ns ${p.namespace})`;
    case 'NetworkPolicy':
      return `${p.namespace}/${p.name}`;
    case 'ClusterNetworkPolicy':
    case 'AdminNetworkPolicy':
    case 'BaselineAdminNetworkPolicy':
      return `${p.kind} ${p.name}`;
    default:
      return `${p.kind} ${p.namespace}/${p.name}`;
  }
}

export function buildReport(input: ReportInput): ClusterReport {
  const statusByNode = new Map(input.statuses.map((s) => [s.metadata.name, s]));
  const leaseByNode = new Map(input.leases.map((l) => [l.metadata.name, l]));
  const podsByNs = new Map<string, Pod[]>();
  for (const p of input.pods) {
    if (p.nodeName === undefined || !isActivePod(p)) continue;
    const l = podsByNs.get(p.namespace);
    if (l === undefined) podsByNs.set(p.namespace, [p]);
    else l.push(p);
  }
  const agent = (n: string): AgentState => leaseState(leaseByNode.get(n), input.now).state;

  const policies: PolicyReport[] = [];
  const selectedNodes = new Set<string>();
  for (const p of expected(input)) {
    const nodes = new Set<string>();
    const subject = p.subject;
    if (subject !== undefined) {
      for (const pods of podsByNs.values())
        for (const pod of pods) if (pod.nodeName !== undefined && subject(pod)) nodes.add(pod.nodeName);
    } else {
      for (const pod of podsByNs.get(p.namespace) ?? []) {
        if (pod.nodeName !== undefined && selectorMatches(p.podSelector, pod.labels)) nodes.add(pod.nodeName);
      }
    }
    const sorted = [...nodes].sort();
    const inForce: string[] = [];
    const lagging: Lagging[] = [];
    const notReporting: string[] = [];
    const invalid = new Set(p.errors.map(invalidField));
    for (const n of sorted) {
      selectedNodes.add(n);
      if (agent(n) !== 'alive') {
        notReporting.push(n);
        continue;
      }
      const s = statusByNode.get(n);
      const e = entryOf(s, p.kind, p.namespace, p.name);
      if (p.reportedErrors && reportsCurrent(e, p.version)) for (const f of e?.invalidFields ?? []) invalid.add(f);
      if (reportsCurrent(e, p.version)) inForce.push(n);
      else
        lagging.push({
          node: n,
          generation: e?.generation,
          since: e?.appliedTime,
          lastError: s?.status?.lastApplyResult === 'Failed' ? s.status.lastError : undefined,
        });
    }
    policies.push({
      kind: p.kind,
      namespace: p.namespace,
      name: p.name,
      generation: p.version?.generation,
      nodes: sorted,
      inForce,
      lagging,
      notReporting,
      invalidFields: [...invalid],
      ...(p.staged === true ? { staged: true as const } : {}),
      ...(p.place === undefined ? {} : { place: p.place }),
    });
  }

  // Nodes: every Node, and any node that has a status object or a Lease.
  const names = new Set([...input.nodes, ...statusByNode.keys(), ...leaseByNode.keys()]);
  const nodes: NodeReport[] = [...names].sort().map((name) => {
    const s = statusByNode.get(name)?.status;
    const l = leaseState(leaseByNode.get(name), input.now);
    return {
      name,
      agent: l.state,
      leaseExpires: l.expires,
      hasStatus: statusByNode.has(name),
      inSync: s?.inSync,
      policies: s?.counts?.policies ?? (Array.isArray(s?.policies) ? s.policies.length : undefined),
      lastApplyTime: s?.lastApplyTime,
      lastApplyResult: s?.lastApplyResult,
      lastError: s?.lastError,
    };
  });
  // An agent that never reported is only a problem where policies need it;
  // a node without a Lease and without selected pods may simply run no agent.
  const notReporting = nodes
    .filter((n) => n.agent === 'expired' || (n.agent === 'no-lease' && selectedNodes.has(n.name)))
    .map((n) => n.name);
  const lagging = new Set<string>();
  for (const p of policies) for (const l of p.lagging) lagging.add(l.node);
  for (const n of nodes) if (n.agent === 'alive' && n.inSync === false) lagging.add(n.name);
  const laggingList = [...lagging].sort();
  const inSync = nodes.filter((n) => n.agent === 'alive' && n.inSync === true && !lagging.has(n.name)).length;
  const policiesInForce = policies.filter((p) => p.lagging.length === 0 && p.notReporting.length === 0).length;
  return {
    nodes,
    policies,
    summary: {
      nodes: nodes.length,
      inSync,
      lagging: laggingList,
      notReporting,
      policies: policies.length,
      policiesInForce,
      policiesLagging: policies.length - policiesInForce,
      invalidPolicies: policies.filter((p) => p.invalidFields.length > 0).length,
    },
    ok: laggingList.length === 0 && notReporting.length === 0 && policiesInForce === policies.length,
  };
}

// ---------------------------------------------------------------- text

function ago(now: number, t: string | undefined): string {
  const v = ms(t);
  if (v === undefined) return '';
  const s = Math.max(0, Math.round((now - v) / 1000));
  return s < 120 ? `${s}s ago` : s < 7200 ? `${Math.round(s / 60)}m ago` : `${Math.round(s / 3600)}h ago`;
}

function table(rows: readonly (readonly string[])[]): string[] {
  const widths: number[] = [];
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  '));
}

function lagText(now: number, l: Lagging): string {
  const has =
    l.generation === undefined
      ? 'reports no version'
      : `has generation ${l.generation} since ${l.since ?? '?'} (${ago(now, l.since)})`;
  return `${l.node} ${has}${l.lastError === undefined ? '' : `; last apply failed: ${l.lastError}`}`;
}

function nodeReason(now: number, n: NodeReport | undefined, name: string): string {
  if (n === undefined || n.agent === 'no-lease') return `${name} (no agent lease)`;
  return `${name} (lease expired ${n.leaseExpires ?? '?'}, ${ago(now, n.leaseExpires)})`;
}

/** One policy, in detail. */
export function policyText(r: ClusterReport, p: PolicyReport, now: number): string {
  const nodes = new Map(r.nodes.map((n) => [n.name, n]));
  const head =
    (p.kind === 'NetworkPolicy' ? `NetworkPolicy ${p.namespace}/${p.name}` : policyLabel(p)) +
    (p.place === undefined ? '' : ` (${p.place})`);
  const lines = [`${head}${p.generation === undefined ? '' : ` (generation ${p.generation})`}`];
  if (p.staged === true)
    lines.push(
      '  STAGED: not enforced; the nodes count what it would change (`denied --staged` on a node, nftnp_staged_verdict_changes_total)',
    );
  if (p.nodes.length === 0) lines.push('  selects no running pod: nothing to enforce');
  else lines.push(`  in force on ${p.inForce.length} of ${p.nodes.length} nodes that host pods it selects`);
  for (const l of p.lagging) lines.push(`  lagging: ${lagText(now, l)}`);
  for (const n of p.notReporting) lines.push(`  agent not reporting: ${nodeReason(now, nodes.get(n), n)}`);
  for (const f of p.invalidFields) lines.push(`  invalid (enforced fail-closed): ${f}`);
  return lines.join('\n');
}

/** The one-screen summary; `wide` adds every policy and node. */
export function summaryText(r: ClusterReport, now: number, wide: boolean): string {
  const s = r.summary;
  const out = [
    `Nodes: ${s.nodes}: ${s.inSync} in sync, ${s.lagging.length} lagging, ${s.notReporting.length} agents not reporting`,
    `Policies: ${s.policies}: ${s.policiesInForce} in force everywhere, ${s.policiesLagging} not, ${s.invalidPolicies} invalid (enforced fail-closed)`,
  ];
  const nodes = new Map(r.nodes.map((n) => [n.name, n]));
  const bad = r.policies.filter((p) => p.lagging.length > 0 || p.notReporting.length > 0);
  if (bad.length > 0) {
    out.push('', 'NOT IN FORCE EVERYWHERE');
    for (const p of bad.slice(0, wide ? bad.length : 10)) {
      out.push(
        `  ${policyLabel(p)}: ${p.inForce.length}/${p.nodes.length} nodes; lagging: ${p.lagging.map((l) => `${l.node} (gen ${l.generation ?? 'none'})`).join(', ') || '-'}; not reporting: ${p.notReporting.join(', ') || '-'}`,
      );
    }
    if (!wide && bad.length > 10) out.push(`  ... and ${bad.length - 10} more (-o wide)`);
  }
  if (s.notReporting.length > 0) {
    out.push('', 'AGENTS NOT REPORTING');
    for (const n of s.notReporting) out.push(`  ${nodeReason(now, nodes.get(n), n)}`);
  }
  const laggingNodes = r.nodes.filter((n) => s.lagging.includes(n.name));
  if (laggingNodes.length > 0) {
    out.push('', 'LAGGING NODES');
    for (const n of laggingNodes)
      out.push(
        `  ${n.name}: in sync ${String(n.inSync ?? 'unknown')}, last apply ${n.lastApplyResult ?? '-'} ${n.lastApplyTime ?? ''}${n.lastError === undefined ? '' : `: ${n.lastError}`}`,
      );
  }
  const staged = r.policies.filter((p) => p.staged === true);
  if (staged.length > 0) {
    out.push('', 'STAGED POLICIES (not enforced; see `denied --staged` on a node)');
    for (const p of staged.slice(0, wide ? staged.length : 10)) out.push(`  ${policyLabel(p)}`);
    if (!wide && staged.length > 10) out.push(`  ... and ${staged.length - 10} more (-o wide)`);
  }
  const invalid = r.policies.filter((p) => p.invalidFields.length > 0);
  if (invalid.length > 0) {
    out.push('', 'INVALID POLICIES (enforced fail-closed)');
    for (const p of invalid.slice(0, wide ? invalid.length : 10)) out.push(`  ${policyLabel(p)}: ${p.invalidFields.join('; ')}`);
    if (!wide && invalid.length > 10) out.push(`  ... and ${invalid.length - 10} more (-o wide)`);
  }
  if (wide) {
    out.push(
      '',
      ...table([
        ['NODE', 'AGENT', 'IN-SYNC', 'POLICIES', 'LAST-APPLY', 'RESULT'],
        ...r.nodes.map((n) => [
          n.name,
          n.agent,
          n.inSync === undefined ? '-' : String(n.inSync),
          n.policies === undefined ? '-' : String(n.policies),
          n.lastApplyTime ?? '-',
          n.lastApplyResult ?? '-',
        ]),
      ]),
    );
    out.push(
      '',
      ...table([
        ['POLICY', 'GENERATION', 'IN-FORCE', 'LAGGING', 'NOT-REPORTING', 'INVALID'],
        ...r.policies.map((p) => [
          policyLabel(p),
          p.generation === undefined ? '-' : String(p.generation),
          `${p.inForce.length}/${p.nodes.length}`,
          p.lagging.map((l) => l.node).join(',') || '-',
          p.notReporting.join(',') || '-',
          String(p.invalidFields.length),
        ]),
      ]),
    );
  }
  out.push('', r.ok ? 'Everything is in force.' : 'Not everything is in force (exit code 3).');
  return out.join('\n');
}
