// The tenancy kinds (docs/tenancy.md), contributed through the seam
// (kind.ts) like NetworkPolicy: NamespaceNetworkPolicy, project isolation
// (namespace annotation kubesphere.io/network-isolate: enabled) and workspace
// isolation (a Workspace with spec.networkIsolation, for the namespaces
// labelled kubesphere.io/workspace). Every rule says why it exists; peers are
// the model's (pods by namespace and pod selector, ipBlocks), so the compiler
// shares their sets with every other policy (a workspace's pods are one set,
// whichever namespace's rule uses it). Only in force when state.tenancy is set.
import { formatCIDR, intervalCIDRs, mergeIntervals, parseIP } from '../model/ip.ts';
import { NAMESPACE_NAME_LABEL } from '../model/normalize-namespace.ts';
import { WORKSPACE_LABEL } from '../model/normalize-tenancy.ts';
import { EVERYTHING } from '../model/selector.ts';
import type {
  ClusterState,
  Direction,
  LabelSelector,
  Namespace,
  NamespaceNetworkPolicy,
  NamespacePolicyRule,
  Peer,
  PortSpec,
  Service,
  TenancySettings,
  ValidationError,
} from '../model/types.ts';
import type { AllowListKind, ContributedPolicy, ContributedRule, PolicyOrigin } from './kind.ts';

export const NAMESPACE_NETWORK_POLICY = 'NamespaceNetworkPolicy';
export const PROJECT_ISOLATION = 'ProjectIsolation';
export const WORKSPACE_ISOLATION = 'WorkspaceIsolation';

const DNS_PORTS: readonly PortSpec[] = [
  { protocol: 'TCP', port: 53, endPort: undefined },
  { protocol: 'UDP', port: 53, endPort: undefined },
];

/** Something worth saying about tenancy that is not an error (validate prints it). */
export interface TenancyNote {
  readonly namespace: string | undefined;
  readonly message: string;
}

export interface TenancyPolicies {
  readonly namespacePolicies: readonly ContributedPolicy[];
  readonly projects: readonly ContributedPolicy[];
  readonly workspaces: readonly ContributedPolicy[];
  /** Problems found while resolving NamespaceNetworkPolicies (a missing Service...), by policy (ns/name). */
  readonly errors: ReadonlyMap<string, readonly ValidationError[]>;
  readonly notes: readonly TenancyNote[];
}

const NONE: TenancyPolicies = { namespacePolicies: [], projects: [], workspaces: [], errors: new Map(), notes: [] };

function nsSelector(name: string): LabelSelector {
  return { matchLabels: { [NAMESPACE_NAME_LABEL]: name }, matchExpressions: [] };
}

function labelsSelector(labels: Readonly<Record<string, string>>): LabelSelector {
  return { matchLabels: labels, matchExpressions: [] };
}

function hostBlock(ip: string): Peer {
  return { kind: 'ipBlock', cidr: `${ip}/${parseIP(ip)?.family === 6 ? 128 : 32}`, except: [] };
}

/**
 * The nodes' addresses as the fewest ipBlocks covering exactly them: nodes
 * usually sit in one subnet, often numbered in sequence, so a thousand nodes
 * are a handful of CIDRs for every isolated namespace's rules to share.
 */
function addressBlocks(ips: readonly string[]): Peer[] {
  const ivs = ips.flatMap((text) => {
    const ip = parseIP(text);
    return ip === undefined ? [] : [{ family: ip.family, lo: ip.value, hi: ip.value }];
  });
  return mergeIntervals(ivs)
    .flatMap(intervalCIDRs)
    .map((c): Peer => ({ kind: 'ipBlock', cidr: formatCIDR(c), except: [] }));
}

/** How a namespace is isolated: project isolation wins over its workspace's. */
export interface Isolation {
  readonly kind: 'project' | 'workspace';
  /** The namespace's workspace (label), if any. */
  readonly workspace: string | undefined;
  /** Its workspace is isolated too, but project isolation applies. */
  readonly workspaceOverridden: boolean;
}

export function isolationOf(
  state: ClusterState,
  ns: Namespace,
  isolated: ReadonlySet<string> = isolatedWorkspaces(state),
): Isolation | undefined {
  const ws = ns.labels[WORKSPACE_LABEL];
  const wsIsolated = ws !== undefined && isolated.has(ws);
  if (ns.networkIsolate === true) return { kind: 'project', workspace: ws, workspaceOverridden: wsIsolated };
  if (wsIsolated) return { kind: 'workspace', workspace: ws, workspaceOverridden: false };
  return undefined;
}

function isolatedWorkspaces(state: ClusterState): Set<string> {
  return new Set((state.workspaces ?? []).filter((w) => w.networkIsolation).map((w) => w.name));
}

function findService(state: ClusterState, namespace: string, name: string): Service | undefined {
  return (state.services ?? []).find((s) => s.namespace === namespace && s.name === name);
}

function nodeAddresses(state: ClusterState, t: TenancySettings): string[] {
  const out = new Set<string>();
  for (const n of state.nodes) for (const a of t.nodeAddresses === 'all' ? n.addresses : (n.internalIPs ?? [])) out.add(a);
  return [...out].sort();
}

type Allowance = { readonly peers: readonly Peer[]; readonly ports: readonly PortSpec[] | undefined; readonly what: string };

interface Common {
  readonly ingress: Allowance[];
  readonly egress: Allowance[];
  readonly notes: TenancyNote[];
}

// The last common allowances, by their content: snapshots follow each other
// with the same DNS Service and nodes, and reusing the object lets every
// isolated namespace keep its translated policy (see isolationPolicies).
let lastCommon: { key: string; common: Common } | undefined;

function commonKey(c: Common): string {
  const peers = (a: Allowance): string =>
    a.peers
      .map((x) => (x.kind === 'ipBlock' ? x.cidr : `${JSON.stringify(x.podSelector)}@${JSON.stringify(x.namespaceSelector)}`))
      .join(',');
  return JSON.stringify([c.ingress.map((a) => [a.what, peers(a)]), c.egress.map((a) => [a.what, peers(a)]), c.notes]);
}

/** What every isolated namespace may do besides its own scope: DNS (egress) and the nodes (both ways). */
function commonAllowances(state: ClusterState, t: TenancySettings): Common {
  const c = computeCommon(state, t);
  const key = commonKey(c);
  if (lastCommon?.key === key) return lastCommon.common;
  lastCommon = { key, common: c };
  return c;
}

function computeCommon(state: ClusterState, t: TenancySettings): Common {
  const notes: TenancyNote[] = [];
  const egress: Allowance[] = [];
  const ingress: Allowance[] = [];
  const dns = t.dnsService;
  if (dns !== undefined) {
    const svc = findService(state, dns.namespace, dns.name);
    const id = `${dns.namespace}/${dns.name}`;
    if (svc?.selector === undefined) {
      notes.push({
        namespace: undefined,
        message: `cluster DNS Service ${id} ${svc === undefined ? 'not found' : 'has no selector'}: isolated namespaces get no DNS to cluster DNS pods`,
      });
    } else {
      egress.push({
        peers: [{ kind: 'pods', podSelector: labelsSelector(svc.selector), namespaceSelector: nsSelector(svc.namespace) }],
        ports: DNS_PORTS,
        what: `DNS to the cluster DNS (pods of Service ${id})`,
      });
    }
  }
  if (t.nodeLocalDNS.length > 0)
    egress.push({
      peers: t.nodeLocalDNS.map(hostBlock),
      ports: DNS_PORTS,
      what: `DNS to node-local DNS ${t.nodeLocalDNS.join(', ')}`,
    });
  const nodes = nodeAddresses(state, t);
  if (nodes.length > 0) {
    const what = `the nodes' ${t.nodeAddresses === 'all' ? '' : 'internal '}addresses`;
    const peers = addressBlocks(nodes);
    ingress.push({ peers, ports: undefined, what });
    egress.push({ peers, ports: undefined, what });
  }
  return { ingress, egress, notes };
}

function allowanceRules(origin: PolicyOrigin, d: Direction, list: readonly Allowance[]): ContributedRule[] {
  return list.map((a, index) => ({
    origin: { policy: origin, direction: d, index, description: `${origin.label}: ${a.what}` },
    peers: a.peers,
    ports: a.ports,
    invalid: false,
  }));
}

// Per namespace object: its translated policy, while what it was made from is unchanged.
const nsMemo = new WeakMap<Namespace, { readonly sig: string; readonly common: Common; readonly policy: ContributedPolicy }>();

function isolationPolicies(
  state: ClusterState,
  t: TenancySettings,
): { projects: ContributedPolicy[]; workspaces: ContributedPolicy[]; notes: TenancyNote[] } {
  const projects: ContributedPolicy[] = [];
  const workspaces: ContributedPolicy[] = [];
  const notes: TenancyNote[] = [];
  let common: Common | undefined;
  const isolated = isolatedWorkspaces(state);
  for (const ns of state.namespaces) {
    const iso = isolationOf(state, ns, isolated);
    if (iso === undefined) continue;
    if (common === undefined) {
      common = commonAllowances(state, t);
      notes.push(...common.notes);
    }
    const ws = iso.workspace ?? '';
    if (iso.workspaceOverridden) {
      notes.push({
        namespace: ns.name,
        message: `ns ${ns.name} has project isolation and is in isolated workspace ${ws}: project isolation applies (only its own namespace is allowed)`,
      });
    }
    const sig = `${iso.kind}\0${ws}\0${String(iso.workspaceOverridden)}`;
    const hit = nsMemo.get(ns);
    if (hit !== undefined && hit.sig === sig && hit.common === common) {
      (iso.kind === 'project' ? projects : workspaces).push(hit.policy);
      continue;
    }
    const origin: PolicyOrigin =
      iso.kind === 'project'
        ? {
            kind: PROJECT_ISOLATION,
            namespace: ns.name,
            name: ns.name,
            label: `project isolation of ns ${ns.name}${iso.workspaceOverridden ? ` (not that of workspace ${ws})` : ''}`,
          }
        : { kind: WORKSPACE_ISOLATION, namespace: ns.name, name: ws, label: `workspace isolation of ${ws}` };
    const scope: Allowance =
      iso.kind === 'project'
        ? {
            peers: [{ kind: 'pods', podSelector: EVERYTHING, namespaceSelector: undefined }],
            ports: undefined,
            what: 'same namespace',
          }
        : {
            peers: [{ kind: 'pods', podSelector: undefined, namespaceSelector: labelsSelector({ [WORKSPACE_LABEL]: ws }) }],
            ports: undefined,
            what: 'same workspace',
          };
    const p: ContributedPolicy = {
      origin,
      key: `${origin.kind}:${ns.name}`,
      namespace: ns.name,
      podSelector: EVERYTHING,
      types: { ingress: true, egress: true },
      ingress: allowanceRules(origin, 'ingress', [scope, ...common.ingress]),
      egress: allowanceRules(origin, 'egress', [scope, ...common.egress]),
    };
    nsMemo.set(ns, { sig, common, policy: p });
    (iso.kind === 'project' ? projects : workspaces).push(p);
  }
  return { projects, workspaces, notes };
}

function portMatchesServicePort(spec: PortSpec, sp: Service['ports'][number]): boolean {
  if (spec.protocol !== sp.protocol) return false;
  if (spec.port === undefined) return true;
  if (typeof spec.port === 'string') return spec.port === sp.name;
  return spec.endPort === undefined ? sp.port === spec.port : sp.port >= spec.port && sp.port <= spec.endPort;
}

/**
 * Egress to a Service: the target ports of the service ports the rule's
 * ports name (all of them without ports). After kube-proxy's DNAT the packet
 * carries the target port, so that is what the filter sees.
 */
function targetPorts(svc: Service, ruleports: readonly PortSpec[] | undefined): PortSpec[] {
  const seen = new Map<string, PortSpec>();
  for (const sp of svc.ports) {
    if (ruleports !== undefined && !ruleports.some((r) => portMatchesServicePort(r, sp))) continue;
    seen.set(`${sp.protocol}/${String(sp.targetPort)}`, { protocol: sp.protocol, port: sp.targetPort, endPort: undefined });
  }
  return [...seen.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
}

function nsnpRules(
  state: ClusterState,
  p: NamespaceNetworkPolicy,
  origin: PolicyOrigin,
  d: Direction,
  errors: ValidationError[],
  pending: ReadonlySet<string>,
): ContributedRule[] {
  const list = d === 'ingress' ? p.ingress : p.egress;
  const peerField = d === 'ingress' ? 'from' : 'to';
  const out: ContributedRule[] = [];
  list.forEach((r: NamespacePolicyRule, index) => {
    const description = `${origin.label} ${d}[${index}]`;
    const rule = (
      peers: readonly Peer[] | undefined,
      ports: readonly PortSpec[] | undefined,
      invalid: boolean,
      desc = description,
    ) => ({
      origin: { policy: origin, direction: d, index, description: desc },
      peers,
      ports,
      invalid,
    });
    if (r.invalid) {
      out.push(rule([], [], true));
      return;
    }
    if (r.peers === undefined) {
      out.push(rule(undefined, r.ports, false));
      return;
    }
    const plain: Peer[] = [];
    const services: ContributedRule[] = [];
    r.peers.forEach((peer, j) => {
      if (peer.kind === 'namespace') {
        plain.push({ kind: 'pods', podSelector: undefined, namespaceSelector: nsSelector(peer.name) });
        return;
      }
      if (peer.kind === 'ipBlock') {
        plain.push(peer);
        return;
      }
      const svcId = `${peer.namespace}/${peer.name}`;
      const svcDesc = `${description} ${peerField} service ${svcId}`;
      const fail = (message: string): void => {
        errors.push({
          kind: NAMESPACE_NETWORK_POLICY,
          namespace: p.namespace,
          name: p.name,
          path: `spec.${d}[${index}].${peerField}[${j}].service`,
          message: `${message}: this peer allows nothing`,
        });
        services.push(rule([], [], true, svcDesc));
      };
      const svc = findService(state, peer.namespace, peer.name);
      if (svc === undefined && pending.has(svcId)) {
        // Being read (its watch just started): allows nothing meanwhile, but is no error of the policy.
        services.push(rule([], [], true, `${svcDesc} (Service not read yet)`));
        return;
      }
      if (svc === undefined) return fail(`Service ${svcId} not found`);
      if (svc.selector === undefined) return fail(`Service ${svcId} has no selector (it selects no pods)`);
      let ports = r.ports;
      if (d === 'egress') {
        const tp = targetPorts(svc, r.ports);
        if (tp.length === 0)
          return fail(
            svc.ports.length === 0 ? `Service ${svcId} has no ports` : `no port of Service ${svcId} matches the rule's ports`,
          );
        ports = tp;
      }
      services.push(
        rule(
          [{ kind: 'pods', podSelector: labelsSelector(svc.selector), namespaceSelector: nsSelector(svc.namespace) }],
          ports,
          false,
          svcDesc,
        ),
      );
    });
    if (plain.length > 0) out.push(rule(plain, r.ports, false));
    out.push(...services);
  });
  return out;
}

function namespacePolicies(
  state: ClusterState,
  t: TenancySettings,
): { policies: ContributedPolicy[]; errors: Map<string, readonly ValidationError[]> } {
  const policies: ContributedPolicy[] = [];
  const all = new Map<string, readonly ValidationError[]>();
  const pending = new Set(t.pendingServices ?? []);
  for (const p of state.namespacePolicies ?? []) {
    const errors: ValidationError[] = [];
    const origin: PolicyOrigin = {
      kind: NAMESPACE_NETWORK_POLICY,
      namespace: p.namespace,
      name: p.name,
      label: `NamespaceNetworkPolicy ${p.namespace}/${p.name}`,
    };
    const ingress = p.types.ingress ? nsnpRules(state, p, origin, 'ingress', errors, pending) : [];
    const egress = p.types.egress ? nsnpRules(state, p, origin, 'egress', errors, pending) : [];
    if (errors.length > 0) all.set(`${p.namespace}/${p.name}`, errors);
    policies.push({
      origin,
      key: `${NAMESPACE_NETWORK_POLICY}:${p.namespace}/${p.name}`,
      namespace: p.namespace,
      podSelector: EVERYTHING,
      types: p.types,
      ingress,
      egress,
    });
  }
  return { policies, errors: all };
}

// Derived once per state (the kinds are asked on every compile and evaluation).
const memo = new WeakMap<ClusterState, TenancyPolicies>();

/** Everything tenancy contributes to a state (nothing when state.tenancy is absent). */
export function tenancyPolicies(state: ClusterState): TenancyPolicies {
  const t = state.tenancy;
  if (t === undefined) return NONE;
  let r = memo.get(state);
  if (r === undefined) {
    const nsnp = namespacePolicies(state, t);
    const iso = isolationPolicies(state, t);
    r = {
      namespacePolicies: nsnp.policies,
      projects: iso.projects,
      workspaces: iso.workspaces,
      errors: nsnp.errors,
      notes: iso.notes,
    };
    memo.set(state, r);
  }
  return r;
}

/** Every validation error of the NamespaceNetworkPolicies: their own and those found resolving Services. */
export function namespacePolicyErrors(state: ClusterState): ValidationError[] {
  const resolved = tenancyPolicies(state).errors;
  return (state.namespacePolicies ?? []).flatMap((p) => [...p.errors, ...(resolved.get(`${p.namespace}/${p.name}`) ?? [])]);
}

export const namespaceNetworkPolicyKind: AllowListKind = {
  kind: NAMESPACE_NETWORK_POLICY,
  tier: 'allow-list',
  policies: (state) => tenancyPolicies(state).namespacePolicies,
};

export const projectIsolationKind: AllowListKind = {
  kind: PROJECT_ISOLATION,
  tier: 'allow-list',
  policies: (state) => tenancyPolicies(state).projects,
};

export const workspaceIsolationKind: AllowListKind = {
  kind: WORKSPACE_ISOLATION,
  tier: 'allow-list',
  policies: (state) => tenancyPolicies(state).workspaces,
};
