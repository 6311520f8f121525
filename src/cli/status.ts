// `nft-netpol-agent status [-n NS] [[TYPE/]NAME | TYPE NAME] [-o wide|json|yaml]`:
// reads the NodePolicyStatus objects, the agents' Leases, policies (with
// tenancy NamespaceNetworkPolicies, Namespaces and Workspaces too; for the
// whole cluster or `cnp/NAME` ClusterNetworkPolicies and Namespaces), pods and
// Nodes with the user's kubeconfig and answers whether policies are in force
// on every node that must enforce them (src/status/report.ts decides).
// Exit codes: 0 everything in force, 3 something lags or an agent is not
// reporting, 1 no usable kubeconfig, the API cannot be read or the policy is
// not found, 2 usage. Every request is retried on 429/503 as kubectl does
// (kube/api-retry.ts); every failure is one line on stderr.
import { homedir } from 'node:os';
import { parseArgs } from 'node:util';
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, NetworkingV1Api } from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import {
  ApiNotReadyError,
  DEFAULT_RETRY,
  apiErrorText,
  isConnectionError,
  withRetry,
  type RetryPolicy,
} from '../kube/api-retry.ts';
import { KubeConfigError, loadKubeConfig } from '../kube/kubeconfig.ts';
import { apiCode } from '../kube/status-client.ts';
import {
  CLUSTER_POLICY_APIS,
  NAMESPACE_NETWORK_POLICY_API,
  WORKSPACE_API,
  apiVersionOf,
  statusTypeNames,
} from '../kinds/api-kinds.ts';
import { normalizeNamespace, normalizePod, normalizePolicy } from '../model/normalize.ts';
import { WORKSPACE_LABEL } from '../model/normalize-tenancy.ts';
import { type ClusterPolicyKind } from '../model/normalize-cluster-policy.ts';
import type { ClusterNetworkPolicy, Namespace, NamespaceNetworkPolicy, NetworkPolicy, Pod, Workspace } from '../model/types.ts';
import { errorMessage } from '../observability/errors.ts';
import { buildReport, policyText, summaryText, type ClusterReport, type ReportInput } from '../status/report.ts';
import { formatDocument, type ErrorObject } from './output.ts';
import {
  DEFAULT_AGENT_NAMESPACE,
  STATUS_GROUP,
  STATUS_KIND,
  STATUS_PLURAL,
  STATUS_VERSION,
  type LeaseObject,
  type NodePolicyStatusObject,
} from '../status/types.ts';

export const EXIT_LAGGING = 3;

export const STATUS_HELP = `Usage: nft-netpol-agent status [-n NAMESPACE] [[TYPE/]NAME | TYPE NAME] [-o wide|json|yaml]

Is a policy in force on every node that hosts pods it selects? Reads the
per-node ${STATUS_KIND} objects (written by each node's agent after it applied a
ruleset), the agents' Leases (heartbeats), the policies, pods and Nodes, and
with tenancy the NamespaceNetworkPolicies, Namespaces and Workspaces.

  NAME, NAMESPACE/NAME    a NetworkPolicy (in -n NAMESPACE, default "default"):
                          that policy in detail
  TYPE/NAME, TYPE NAME    as kubectl names objects (TYPE is case-insensitive):
                            networkpolicy, netpol             a NetworkPolicy in -n
                            namespacenetworkpolicy, nsnp      a NamespaceNetworkPolicy in -n
                            namespace, ns                     the isolation of namespace NAME
                                                              (project or workspace isolation)
                            workspace                         workspace NAME's isolation of
                                                              each of its namespaces
                            clusternetworkpolicy, cnp         a ClusterNetworkPolicy (cluster-scoped;
                                                              anp, banp: the legacy kinds)
                          (X/Y is TYPE/NAME when X is one of these types,
                          else NAMESPACE/NAME of a NetworkPolicy)
  -n, --namespace NS      only policies of NS
  -A, --all-namespaces    all namespaces (the default without a policy)
  -o, --output FORMAT     text (default), wide (every node and policy), json or
                          yaml (errors, e.g. invalid fields, as {object, path, message})
  --agent-namespace NS    where the agents' Leases live (default ${DEFAULT_AGENT_NAMESPACE})
  --no-tenancy            the agents run with --no-tenancy: check NetworkPolicies only
  --kubeconfig FILE       the client configuration (default: KUBECONFIG, else
                          ~/.kube/config, else the pod's service account)
  -h, --help              show this help

Without a policy: a cluster summary (nodes in sync, lagging, agents not
reporting, invalid policies). A node lags when its agent is alive but reports
an older generation of a policy (or none), or its kernel is not in sync; an
agent is not reporting when its Lease expired. A change shows as lagging for a
few seconds while the agents apply it and write their status (coalesced, at
most once per 5 s by default).

Answers 429 and 503 (an API server starting or overloaded) are retried after
their Retry-After, as kubectl does (at most 10 attempts, 30 s of waiting).

Exit codes: 0 everything is in force, 3 something lags or an agent is not
reporting, 1 no usable kubeconfig, the API server could not be read or the
policy was not found, 2 usage.`;

interface Io {
  out(s: string): void;
  err(s: string): void;
}

class StatusUsageError extends Error {}

/** What `status` is asked about: one object, a namespace's isolation, or a workspace's. */
export type StatusTarget =
  | { readonly kind: 'NetworkPolicy' | 'NamespaceNetworkPolicy'; readonly namespace: string; readonly name: string }
  | { readonly kind: 'namespace' | 'workspace' | ClusterPolicyKind; readonly name: string };

export interface StatusArgs {
  readonly namespace: string | undefined;
  readonly policy: StatusTarget | undefined;
  readonly output: 'text' | 'wide' | 'json' | 'yaml';
  readonly agentNamespace: string;
  readonly tenancy: boolean;
  /** --kubeconfig. */
  readonly kubeconfig?: string | undefined;
}

// kubectl's names of the types (plural, singular, short, also with their group), lower case: the API kind descriptors'.
const TYPES: ReadonlyMap<string, StatusTarget['kind']> = statusTypeNames();

/** The cluster-scoped kinds: a name, no namespace. */
function isClusterKind(k: StatusTarget['kind']): k is ClusterPolicyKind {
  return CLUSTER_POLICY_APIS.some((d) => d.kind === k);
}

function target(type: string, name: string, namespace: string | undefined): StatusTarget {
  const kind = TYPES.get(type.toLowerCase());
  if (kind === undefined) throw new StatusUsageError(`unknown TYPE "${type}" (see --help)`);
  if (name === '' || name.includes('/')) throw new StatusUsageError(`NAME must be a name, not "${name}"`);
  return kind === 'namespace' || kind === 'workspace' || isClusterKind(kind)
    ? { kind, name }
    : { kind, namespace: namespace ?? 'default', name };
}

export function parseStatusArgs(argv: string[]): StatusArgs | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        namespace: { type: 'string', short: 'n' },
        'all-namespaces': { type: 'boolean', short: 'A', default: false },
        output: { type: 'string', short: 'o', default: 'text' },
        'agent-namespace': { type: 'string', default: DEFAULT_AGENT_NAMESPACE },
        'no-tenancy': { type: 'boolean', default: false },
        kubeconfig: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (e) {
    throw new StatusUsageError(errorMessage(e));
  }
  const v = parsed.values;
  if (v.help) return 'help';
  const output = v.output;
  if (output !== 'text' && output !== 'wide' && output !== 'json' && output !== 'yaml')
    throw new StatusUsageError(`--output must be text, wide, json or yaml, not "${output}"`);
  if (parsed.positionals.length > 2) throw new StatusUsageError('at most one policy: [TYPE/]NAME or TYPE NAME');
  if (v['all-namespaces'] && v.namespace !== undefined) throw new StatusUsageError('-n and -A exclude each other');
  const [first, second] = parsed.positionals;
  let policy: StatusTarget | undefined;
  if (second !== undefined) policy = target(first ?? '', second, v.namespace);
  else if (first !== undefined) {
    const parts = first.split('/');
    if (parts.length > 2 || parts.some((p) => p === ''))
      throw new StatusUsageError(`the policy must be NAME, NAMESPACE/NAME or TYPE/NAME, not "${first}"`);
    const [a = '', b] = parts;
    if (b === undefined) policy = { kind: 'NetworkPolicy', namespace: v.namespace ?? 'default', name: a };
    else if (TYPES.has(a.toLowerCase())) policy = target(a, b, v.namespace);
    else policy = { kind: 'NetworkPolicy', namespace: a, name: b };
  }
  const tenancy = !v['no-tenancy'];
  if (policy !== undefined && isClusterKind(policy.kind) && v.namespace !== undefined)
    throw new StatusUsageError(`a ${policy.kind} is cluster-scoped: no -n`);
  if (!tenancy && policy !== undefined && policy.kind !== 'NetworkPolicy' && !isClusterKind(policy.kind))
    throw new StatusUsageError(`--no-tenancy checks NetworkPolicies only (and the cluster-scoped kinds), not a ${policy.kind}`);
  // What to read: the policy's namespace, the namespace whose isolation is asked, or -n.
  let namespace = v.namespace;
  if (policy?.kind === 'namespace') namespace = policy.name;
  else if (policy?.kind === 'NetworkPolicy' || policy?.kind === 'NamespaceNetworkPolicy') namespace = policy.namespace;
  if (v.kubeconfig === '') throw new StatusUsageError('--kubeconfig needs a file');
  const base: StatusArgs = { namespace, policy, output, agentNamespace: v['agent-namespace'], tenancy };
  return v.kubeconfig === undefined ? base : { ...base, kubeconfig: v.kubeconfig };
}

function normalized<T>(items: readonly unknown[], f: (o: unknown) => { ok: true; value: T } | { ok: false }): T[] {
  const out: T[] = [];
  for (const o of items) {
    const n = f(o);
    if (n.ok) out.push(n.value);
  }
  return out;
}

/** Every request of the command, retried on 429/503. */
type Retry = <T>(call: () => Promise<T>) => Promise<T>;

/** A custom resource's items; none when its CRD is not installed (404). */
async function customItems(
  custom: CustomObjectsApi,
  retry: Retry,
  apiVersion: string,
  plural: string,
  namespace: string | undefined,
): Promise<unknown[]> {
  const [group = '', version = ''] = apiVersion.split('/');
  try {
    const l: { items?: unknown[] } = await retry(() =>
      namespace === undefined
        ? custom.listClusterCustomObject({ group, version, plural })
        : custom.listNamespacedCustomObject({ group, version, namespace, plural }),
    );
    return l.items ?? [];
  } catch (e) {
    if (apiCode(e) === 404) return [];
    if (e instanceof ApiNotReadyError) throw e;
    throw new Error(`cannot list ${plural}.${group}: ${apiErrorText(e)} (--no-tenancy skips the tenancy kinds)`, { cause: e });
  }
}

/** The tenancy objects the report needs: NamespaceNetworkPolicies and Namespaces of the scope, every Workspace. */
async function readTenancy(kc: KubeConfig, retry: Retry, ns: string | undefined): Promise<NonNullable<ReportInput['tenancy']>> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  const [nsnps, workspaces, namespaces] = await Promise.all([
    customItems(custom, retry, apiVersionOf(NAMESPACE_NETWORK_POLICY_API), NAMESPACE_NETWORK_POLICY_API.plural, ns),
    customItems(custom, retry, apiVersionOf(WORKSPACE_API), WORKSPACE_API.plural, undefined),
    ns === undefined
      ? retry(() => core.listNamespace()).then((l) => l.items)
      : retry(() => core.readNamespace({ name: ns })).then(
          (n) => [n],
          (e: unknown) => {
            if (apiCode(e) === 404) return [];
            throw e;
          },
        ),
  ]);
  return {
    namespacePolicies: normalized<NamespaceNetworkPolicy>(nsnps, NAMESPACE_NETWORK_POLICY_API.normalize),
    workspaces: normalized<Workspace>(workspaces, WORKSPACE_API.normalize),
    namespaces: normalized<Namespace>(namespaces, normalizeNamespace),
  };
}

/**
 * ClusterNetworkPolicies (and the legacy kinds) with every Namespace. A kind
 * whose CRD is not installed has none; one the user may not list is an error
 * when asked about, else skipped (the summary of a user without access to them).
 */
async function readClusterPolicies(
  kc: KubeConfig,
  retry: Retry,
  asked: ClusterPolicyKind | undefined,
): Promise<NonNullable<ReportInput['clusterPolicies']>> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  const lists = await Promise.all(
    CLUSTER_POLICY_APIS.filter((d) => asked === undefined || d.kind === asked).map(async (d) => {
      const { group, version, plural } = d;
      try {
        const l: { items?: unknown[] } = await retry(() => custom.listClusterCustomObject({ group, version, plural }));
        return normalized<ClusterNetworkPolicy>(l.items ?? [], d.normalize);
      } catch (e) {
        const code = apiCode(e);
        if (code === 404 || (asked === undefined && code === 403)) return [];
        throw new Error(`cannot list ${plural}.${group}: ${errorMessage(e)}`, { cause: e });
      }
    }),
  );
  const namespaces = normalized<Namespace>((await retry(() => core.listNamespace())).items, normalizeNamespace);
  return { policies: lists.flat(), namespaces };
}

/** The input narrowed to what a target asks about. */
function narrow(input: ReportInput, t: StatusTarget): ReportInput {
  const tenancy = input.tenancy ?? { namespacePolicies: [], namespaces: [], workspaces: [] };
  const { clusterPolicies: _c, ...namespaced } = input;
  if (isClusterKind(t.kind)) {
    const { tenancy: _t, ...rest } = input;
    const c = input.clusterPolicies ?? { policies: [], namespaces: [] };
    return {
      ...rest,
      policies: [],
      clusterPolicies: { ...c, policies: c.policies.filter((p) => p.sourceKind === t.kind && p.name === t.name) },
    };
  }
  switch (t.kind) {
    case 'NetworkPolicy': {
      const { tenancy: _, ...rest } = namespaced;
      return { ...rest, policies: input.policies.filter((p) => p.namespace === t.namespace && p.name === t.name) };
    }
    case 'NamespaceNetworkPolicy':
      return {
        ...namespaced,
        policies: [],
        tenancy: {
          ...tenancy,
          namespaces: [],
          namespacePolicies: tenancy.namespacePolicies.filter((p) => p.namespace === t.namespace && p.name === t.name),
        },
      };
    case 'namespace':
      return {
        ...namespaced,
        policies: [],
        tenancy: { ...tenancy, namespacePolicies: [], namespaces: tenancy.namespaces.filter((n) => n.name === t.name) },
      };
    case 'workspace':
      return {
        ...namespaced,
        policies: [],
        tenancy: {
          ...tenancy,
          namespacePolicies: [],
          namespaces: tenancy.namespaces.filter((n) => n.labels[WORKSPACE_LABEL] === t.name),
        },
      };
  }
}

function notFound(t: StatusTarget): string {
  switch (t.kind) {
    case 'NetworkPolicy':
    case 'NamespaceNetworkPolicy':
      return `${t.kind} ${t.namespace}/${t.name} not found`;
    case 'namespace':
      return `namespace ${t.name} not found or not isolated (neither project nor workspace isolation)`;
    case 'workspace':
      return `workspace ${t.name} isolates no namespace (not found, spec.networkIsolation not true, or no namespace labelled ${WORKSPACE_LABEL}=${t.name})`;
    default:
      return `${t.kind} ${t.name} not found`;
  }
}

/** Reads everything the report needs; every request is retried on 429/503 as `policy` allows. */
export async function readStatusInput(
  kc: KubeConfig,
  a: StatusArgs,
  now: number,
  policy: RetryPolicy = DEFAULT_RETRY,
): Promise<ReportInput> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const coord = kc.makeApiClient(CoordinationV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const net = kc.makeApiClient(NetworkingV1Api);
  const retry: Retry = (call) => withRetry(call, policy);
  const ns = a.namespace;
  const asked = a.policy !== undefined && isClusterKind(a.policy.kind) ? a.policy.kind : undefined;
  // Cluster-scoped policies are read for the whole cluster (no -n) or when asked about.
  const withCluster = ns === undefined && (a.policy === undefined || asked !== undefined);
  const [statuses, leases, policies, pods, nodes, tenancy, clusterPolicies] = await Promise.all([
    retry(() => custom.listClusterCustomObject({ group: STATUS_GROUP, version: STATUS_VERSION, plural: STATUS_PLURAL }))
      .then((l: { items?: NodePolicyStatusObject[] }) => l.items ?? [])
      .catch((e: unknown) => {
        if (apiCode(e) === 404)
          throw new Error(`the ${STATUS_KIND} resource is not served: install its CRD (kubectl apply -k daemonset/)`, {
            cause: e,
          });
        throw e;
      }),
    retry(() => coord.listNamespacedLease({ namespace: a.agentNamespace })).then((l) =>
      l.items.map((x): LeaseObject => ({
        metadata: { name: x.metadata?.name ?? '' },
        spec: {
          ...(x.spec?.renewTime === undefined ? {} : { renewTime: x.spec.renewTime }),
          ...(x.spec?.leaseDurationSeconds === undefined ? {} : { leaseDurationSeconds: x.spec.leaseDurationSeconds }),
          ...(x.spec?.holderIdentity === undefined ? {} : { holderIdentity: x.spec.holderIdentity }),
        },
      })),
    ),
    retry(() =>
      ns === undefined ? net.listNetworkPolicyForAllNamespaces() : net.listNamespacedNetworkPolicy({ namespace: ns }),
    ).then((l) => normalized<NetworkPolicy>(l.items, normalizePolicy)),
    retry(() => (ns === undefined ? core.listPodForAllNamespaces() : core.listNamespacedPod({ namespace: ns }))).then((l) =>
      normalized<Pod>(l.items, normalizePod),
    ),
    retry(() => core.listNode()).then((l) => l.items.map((n) => n.metadata?.name ?? '').filter((n) => n !== '')),
    a.tenancy && asked === undefined ? readTenancy(kc, retry, ns) : undefined,
    withCluster ? readClusterPolicies(kc, retry, asked) : undefined,
  ]);
  const input: ReportInput = {
    now,
    nodes,
    statuses,
    leases,
    policies,
    pods,
    ...(tenancy === undefined ? {} : { tenancy }),
    ...(clusterPolicies === undefined ? {} : { clusterPolicies }),
  };
  return a.policy === undefined ? input : narrow(input, a.policy);
}

/** What a test may replace: the retry timing, and where a kubeconfig is looked for. */
export interface StatusOptions {
  readonly retry?: RetryPolicy;
  readonly env?: Readonly<Record<string, string | undefined>>;
}

export async function statusCommand(argv: string[], io: Io, kubeConfig?: KubeConfig, opts: StatusOptions = {}): Promise<number> {
  let a;
  try {
    a = parseStatusArgs(argv);
  } catch (e) {
    if (!(e instanceof StatusUsageError)) throw e;
    io.err(`usage error: ${e.message}\n(see 'nft-netpol-agent status --help')`);
    return 2;
  }
  if (a === 'help') {
    io.out(STATUS_HELP);
    return 0;
  }
  const format = a.output === 'json' || a.output === 'yaml' ? a.output : undefined;
  // A failure is a document too under -o json/yaml, with the error in the shape of every command's.
  const fail = (e: ErrorObject): number => {
    io.err(`error: ${e.message}`);
    if (format !== undefined) io.out(formatDocument(format, { errors: [e] }));
    return 1;
  };
  let kc = kubeConfig;
  if (kc === undefined) {
    const env = opts.env ?? process.env;
    try {
      kc = loadKubeConfig({
        explicit: a.kubeconfig,
        kubeconfigEnv: env.KUBECONFIG,
        home: env.HOME ?? homedir(),
        serviceHost: env.KUBERNETES_SERVICE_HOST,
      });
    } catch (e) {
      return fail({
        object: 'kubeconfig',
        path: '',
        message: e instanceof KubeConfigError ? e.message : apiErrorText(e),
      });
    }
  }
  const now = Date.now();
  let input: ReportInput;
  try {
    input = await readStatusInput(kc, a, now, opts.retry ?? DEFAULT_RETRY);
  } catch (e) {
    const server = kc.getCurrentCluster()?.server ?? '';
    return fail({
      object: 'API server',
      path: '',
      message: `${isConnectionError(e) ? `cannot reach the API server ${server}: ` : ''}${apiErrorText(e)}`,
    });
  }
  const r = buildReport(input);
  if (a.policy !== undefined && r.policies.length === 0) {
    return fail({ object: targetLabel(a.policy), path: '', message: notFound(a.policy) });
  }
  if (format !== undefined) {
    const doc = { ...r, errors: reportErrors(r), ...(a.policy === undefined ? {} : { policy: r.policies[0] }) };
    io.out(formatDocument(format, doc));
  } else if (a.policy !== undefined) io.out(r.policies.map((p) => policyText(r, p, now)).join('\n'));
  else io.out(summaryText(r, now, a.output === 'wide'));
  if (a.policy !== undefined)
    return r.policies.every((p) => p.lagging.length === 0 && p.notReporting.length === 0) ? 0 : EXIT_LAGGING;
  return r.ok ? 0 : EXIT_LAGGING;
}

function targetLabel(t: StatusTarget): string {
  return 'namespace' in t ? `${t.kind} ${t.namespace}/${t.name}` : `${t.kind} ${t.name}`;
}

/** The invalid fields of the report's policies ("path: message", as the agents report them) as error objects. */
export function reportErrors(r: ClusterReport): ErrorObject[] {
  return r.policies.flatMap((p) =>
    p.invalidFields.map((f) => {
      const i = f.indexOf(': ');
      const object = `${p.kind} ${p.namespace}/${p.name}`;
      return i < 0 ? { object, path: '', message: f } : { object, path: f.slice(0, i), message: f.slice(i + 2) };
    }),
  );
}
