// Tenancy as policy-level data: project isolation, workspace isolation and
// NamespaceNetworkPolicies become NetworkPolicy-shaped policies (with a
// `source`, and a `cause` per rule), so the compiler, the reference evaluator,
// explain and the debug endpoint enforce and explain them like any other
// policy, and their peer sets are shared with everything else (a workspace's
// pods are one set, whichever namespace's rule uses it). See docs/tenancy.md.
import { parseIP } from '../model/ip.ts';
import { NAMESPACE_NAME_LABEL } from '../model/normalize-namespace.ts';
import { WORKSPACE_LABEL } from '../model/normalize-tenancy.ts';
import { EVERYTHING } from '../model/selector.ts';
import { byObjectKey } from '../model/state.ts';
import type {
  ClusterState,
  Direction,
  LabelSelector,
  NamespaceNetworkPolicy,
  NamespacePolicyRule,
  Namespace,
  NetworkPolicy,
  Peer,
  PortSpec,
  Rule,
  Service,
  ValidationError,
} from '../model/types.ts';
import type { TenancyConfig } from './config.ts';

/** Names of derived policies: ':' cannot occur in a Kubernetes name, so they never meet a NetworkPolicy's. */
export const PROJECT_ISOLATION = 'isolation:project';
export const WORKSPACE_ISOLATION = 'isolation:workspace';
export const NSNP_PREFIX = 'nsnp:';

const DNS_PORTS: readonly PortSpec[] = [
  { protocol: 'TCP', port: 53, endPort: undefined },
  { protocol: 'UDP', port: 53, endPort: undefined },
];

/** Something worth saying about tenancy that is not an error (validate prints it, explain uses it). */
export interface TenancyNote {
  readonly namespace: string | undefined;
  readonly message: string;
}

export interface Derived {
  readonly policies: readonly NetworkPolicy[];
  /** Validation errors found while resolving (missing services...), also on their policies. */
  readonly errors: readonly ValidationError[];
  readonly notes: readonly TenancyNote[];
}

function nsSelector(name: string): LabelSelector {
  return { matchLabels: { [NAMESPACE_NAME_LABEL]: name }, matchExpressions: [] };
}

function labelsSelector(labels: Readonly<Record<string, string>>): LabelSelector {
  return { matchLabels: labels, matchExpressions: [] };
}

function hostBlock(ip: string): Peer {
  return { kind: 'ipBlock', cidr: `${ip}/${parseIP(ip)?.family === 6 ? 128 : 32}`, except: [] };
}

/** Which namespaces are isolated, and how: project wins over workspace. */
export interface Isolation {
  readonly kind: 'project' | 'workspace';
  /** The namespace's workspace (label), if any. */
  readonly workspace: string | undefined;
  /** The namespace's workspace is isolated too, but project isolation applies. */
  readonly workspaceOverridden: boolean;
}

export function isolationOf(state: ClusterState, ns: Namespace): Isolation | undefined {
  const ws = ns.labels[WORKSPACE_LABEL];
  const wsIsolated = ws !== undefined && (state.workspaces ?? []).some((w) => w.name === ws && w.networkIsolation);
  if (ns.networkIsolate === true) return { kind: 'project', workspace: ws, workspaceOverridden: wsIsolated };
  if (wsIsolated) return { kind: 'workspace', workspace: ws, workspaceOverridden: false };
  return undefined;
}

function findService(state: ClusterState, namespace: string, name: string): Service | undefined {
  return (state.services ?? []).find((s) => s.namespace === namespace && s.name === name);
}

function nodeAddresses(state: ClusterState, config: TenancyConfig): string[] {
  const out = new Set<string>();
  for (const n of state.nodes) for (const a of config.nodeAddresses === 'all' ? n.addresses : (n.internalIPs ?? [])) out.add(a);
  return [...out].sort();
}

/** The allowances every isolated namespace gets besides its own scope: DNS and the nodes. */
function commonAllowances(
  state: ClusterState,
  config: TenancyConfig,
  what: string,
): { ingress: Rule[]; egress: Rule[]; notes: TenancyNote[] } {
  const notes: TenancyNote[] = [];
  const egress: Rule[] = [];
  const ingress: Rule[] = [];
  const dns = config.dnsService;
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
        invalid: false,
        cause: `${what}: DNS to the cluster DNS (pods of Service ${id})`,
      });
    }
  }
  if (config.nodeLocalDNS.length > 0) {
    egress.push({
      peers: config.nodeLocalDNS.map(hostBlock),
      ports: DNS_PORTS,
      invalid: false,
      cause: `${what}: DNS to node-local DNS ${config.nodeLocalDNS.join(', ')}`,
    });
  }
  const nodes = nodeAddresses(state, config);
  if (nodes.length > 0) {
    const cause = `${what}: the nodes' ${config.nodeAddresses === 'all' ? '' : 'internal '}addresses`;
    ingress.push({ peers: nodes.map(hostBlock), ports: undefined, invalid: false, cause });
    egress.push({ peers: nodes.map(hostBlock), ports: undefined, invalid: false, cause });
  }
  return { ingress, egress, notes };
}

function isolationPolicies(state: ClusterState, config: TenancyConfig): { policies: NetworkPolicy[]; notes: TenancyNote[] } {
  const policies: NetworkPolicy[] = [];
  const notes: TenancyNote[] = [];
  let dnsNoted = false;
  for (const ns of state.namespaces) {
    const iso = isolationOf(state, ns);
    if (iso === undefined) continue;
    const over = iso.workspaceOverridden ? ` (not that of workspace \`${iso.workspace ?? ''}\`)` : '';
    const what =
      iso.kind === 'project'
        ? `project isolation of ns \`${ns.name}\`${over}`
        : `workspace isolation of \`${iso.workspace ?? ''}\``;
    const common = commonAllowances(state, config, what);
    if (!dnsNoted) notes.push(...common.notes);
    dnsNoted = true;
    if (iso.workspaceOverridden) {
      notes.push({
        namespace: ns.name,
        message: `ns ${ns.name} has project isolation and is in isolated workspace ${iso.workspace ?? ''}: project isolation applies (only its own namespace is allowed)`,
      });
    }
    const scope: Rule =
      iso.kind === 'project'
        ? {
            peers: [{ kind: 'pods', podSelector: EVERYTHING, namespaceSelector: undefined }],
            ports: undefined,
            invalid: false,
            cause: `${what}: same namespace`,
          }
        : {
            peers: [
              {
                kind: 'pods',
                podSelector: undefined,
                namespaceSelector: labelsSelector({ [WORKSPACE_LABEL]: iso.workspace ?? '' }),
              },
            ],
            ports: undefined,
            invalid: false,
            cause: `${what}: same workspace`,
          };
    policies.push({
      namespace: ns.name,
      name: iso.kind === 'project' ? PROJECT_ISOLATION : WORKSPACE_ISOLATION,
      podSelector: EVERYTHING,
      types: { ingress: true, egress: true },
      ingress: [scope, ...common.ingress],
      egress: [scope, ...common.egress],
      errors: [],
      source:
        iso.kind === 'project'
          ? { kind: 'ProjectIsolation', overrides: iso.workspaceOverridden ? iso.workspace : undefined }
          : { kind: 'WorkspaceIsolation', workspace: iso.workspace ?? '' },
    });
  }
  return { policies, notes };
}

function portMatchesServicePort(spec: PortSpec, sp: Service['ports'][number]): boolean {
  if (spec.protocol !== sp.protocol) return false;
  if (spec.port === undefined) return true;
  if (typeof spec.port === 'string') return spec.port === sp.name;
  return spec.endPort === undefined ? sp.port === spec.port : sp.port >= spec.port && sp.port <= spec.endPort;
}

/**
 * Egress to a service: the target ports of the service ports the rule's ports
 * name (all of them without ports). After kube-proxy's DNAT the packet
 * carries the target port, so that is what the filter sees.
 */
function targetPorts(svc: Service, ruleports: readonly PortSpec[] | undefined): PortSpec[] {
  const seen = new Map<string, PortSpec>();
  for (const sp of svc.ports) {
    if (ruleports !== undefined && !ruleports.some((r) => portMatchesServicePort(r, sp))) continue;
    seen.set(`${sp.protocol}/${String(sp.targetPort)}`, { protocol: sp.protocol, port: sp.targetPort, endPort: undefined });
  }
  return [...seen.values()].sort((a, b) => `${a.protocol}/${String(a.port)}`.localeCompare(`${b.protocol}/${String(b.port)}`));
}

function nsnpRules(
  state: ClusterState,
  p: NamespaceNetworkPolicy,
  d: Direction,
  errors: ValidationError[],
  pending: ReadonlySet<string>,
): Rule[] {
  const list = d === 'ingress' ? p.ingress : p.egress;
  const peerField = d === 'ingress' ? 'from' : 'to';
  const id = `NamespaceNetworkPolicy \`${p.namespace}/${p.name}\``;
  const out: Rule[] = [];
  list.forEach((r: NamespacePolicyRule, i) => {
    const cause = `${id} ${d}[${i}]`;
    if (r.invalid) {
      out.push({ peers: [], ports: [], invalid: true, cause });
      return;
    }
    if (r.peers === undefined) {
      out.push({ peers: undefined, ports: r.ports, invalid: false, cause });
      return;
    }
    const plain: Peer[] = [];
    const services: Rule[] = [];
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
      const svcCause = `${cause} ${peerField} service \`${svcId}\``;
      const fail = (message: string): void => {
        errors.push({
          kind: 'NamespaceNetworkPolicy',
          namespace: p.namespace,
          name: p.name,
          path: `spec.${d}[${i}].${peerField}[${j}].service`,
          message: `${message}: this peer allows nothing`,
        });
        services.push({ peers: [], ports: [], invalid: true, cause: svcCause });
      };
      const svc = findService(state, peer.namespace, peer.name);
      if (svc === undefined && pending.has(svcId)) {
        // Being read (a watch just started): allows nothing meanwhile, but is no error of the policy.
        services.push({ peers: [], ports: [], invalid: true, cause: `${svcCause} (Service not read yet)` });
        return;
      }
      if (svc === undefined) return fail(`Service ${svcId} not found`);
      if (svc.selector === undefined) return fail(`Service ${svcId} has no selector (it selects no pods)`);
      let ports = r.ports;
      if (d === 'egress') {
        const t = targetPorts(svc, r.ports);
        if (t.length === 0)
          return fail(
            svc.ports.length === 0 ? `Service ${svcId} has no ports` : `no port of Service ${svcId} matches the rule's ports`,
          );
        ports = t;
      }
      services.push({
        peers: [{ kind: 'pods', podSelector: labelsSelector(svc.selector), namespaceSelector: nsSelector(svc.namespace) }],
        ports,
        invalid: false,
        cause: svcCause,
      });
    });
    if (plain.length > 0) out.push({ peers: plain, ports: r.ports, invalid: false, cause });
    out.push(...services);
  });
  return out;
}

function nsnpPolicies(
  state: ClusterState,
  pending: ReadonlySet<string>,
): { policies: NetworkPolicy[]; errors: ValidationError[] } {
  const policies: NetworkPolicy[] = [];
  const all: ValidationError[] = [];
  for (const p of state.namespacePolicies ?? []) {
    const errors: ValidationError[] = [];
    const ingress = p.types.ingress ? nsnpRules(state, p, 'ingress', errors, pending) : [];
    const egress = p.types.egress ? nsnpRules(state, p, 'egress', errors, pending) : [];
    all.push(...errors);
    policies.push({
      namespace: p.namespace,
      name: `${NSNP_PREFIX}${p.name}`,
      podSelector: EVERYTHING,
      types: p.types,
      ingress,
      egress,
      errors: [...p.errors, ...errors],
      source: { kind: 'NamespaceNetworkPolicy', name: p.name },
    });
  }
  return { policies, errors: all };
}

const NONE: ReadonlySet<string> = new Set();

/**
 * The policies the tenancy kinds contribute, in a fixed order (the small seam
 * of this module): NamespaceNetworkPolicies, then isolation.
 */
export function deriveTenancy(state: ClusterState, config: TenancyConfig, pending: ReadonlySet<string> = NONE): Derived {
  const nsnp = nsnpPolicies(state, pending);
  const iso = isolationPolicies(state, config);
  return { policies: [...nsnp.policies, ...iso.policies], errors: nsnp.errors, notes: iso.notes };
}

/**
 * The state with the tenancy policies in `policies` (sorted with the others).
 * Idempotent: policies derived earlier are replaced. With no tenancy input
 * the state is returned as is. `pending`: Services (ns/name) a watch is still
 * reading: their peers allow nothing, without an error.
 */
export function withTenancy(
  state: ClusterState,
  config: TenancyConfig,
  pending: ReadonlySet<string> = NONE,
): { state: ClusterState; derived: Derived } {
  const own = state.policies.filter((p) => p.source === undefined);
  const derived = deriveTenancy(state, config, pending);
  if (derived.policies.length === 0 && own.length === state.policies.length) return { state, derived };
  return { state: { ...state, policies: [...own, ...derived.policies].sort(byObjectKey) }, derived };
}
