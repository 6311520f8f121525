// `nft-netpol-agent status [-n NS] [POLICY] [-o json|wide]`: reads the
// NodePolicyStatus objects, the agents' Leases, policies, pods and Nodes with
// the user's kubeconfig and answers whether policies are in force on every
// node that must enforce them (src/status/report.ts decides).
// Exit codes: 0 everything in force, 3 something lags or an agent is not
// reporting, 1 the API cannot be read, 2 usage.
import { parseArgs } from 'node:util';
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, NetworkingV1Api } from '@kubernetes/client-node';
import { apiCode } from '../kube/status-client.ts';
import { normalizePod, normalizePolicy } from '../model/normalize.ts';
import type { NetworkPolicy, Pod } from '../model/types.ts';
import { errorMessage } from '../observability/errors.ts';
import { buildReport, policyText, summaryText, type ReportInput } from '../status/report.ts';
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

export const STATUS_HELP = `Usage: nft-netpol-agent status [-n NAMESPACE] [POLICY] [-o json|wide]

Is a NetworkPolicy in force on every node that hosts pods it selects? Reads the
per-node ${STATUS_KIND} objects (written by each node's agent after it applied a
ruleset), the agents' Leases (heartbeats), the policies, pods and Nodes.

  POLICY                  a NetworkPolicy name (in -n NAMESPACE, default
                          "default") or NAMESPACE/NAME: that policy in detail
  -n, --namespace NS      only policies of NS
  -A, --all-namespaces    all namespaces (the default without POLICY)
  -o, --output FORMAT     text (default), wide (every node and policy) or json
  --agent-namespace NS    where the agents' Leases live (default ${DEFAULT_AGENT_NAMESPACE})
  -h, --help              show this help

Without POLICY: a cluster summary (nodes in sync, lagging, agents not
reporting, invalid policies). A node lags when its agent is alive but reports
an older generation of a policy (or none), or its kernel is not in sync; an
agent is not reporting when its Lease expired. A change shows as lagging for a
few seconds while the agents apply it and write their status (coalesced, at
most once per 5 s by default).

Exit codes: 0 everything is in force, 3 something lags or an agent is not
reporting, 1 the API server could not be read, 2 usage.
The API server is found through KUBECONFIG or ~/.kube/config.`;

interface Io {
  out(s: string): void;
  err(s: string): void;
}

class StatusUsageError extends Error {}

export interface StatusArgs {
  readonly namespace: string | undefined;
  readonly policy: { readonly namespace: string; readonly name: string } | undefined;
  readonly output: 'text' | 'wide' | 'json';
  readonly agentNamespace: string;
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
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (e) {
    throw new StatusUsageError(errorMessage(e));
  }
  const v = parsed.values;
  if (v.help) return 'help';
  const output = v.output;
  if (output !== 'text' && output !== 'wide' && output !== 'json')
    throw new StatusUsageError(`--output must be text, wide or json, not "${output}"`);
  if (parsed.positionals.length > 1) throw new StatusUsageError('at most one POLICY');
  if (v['all-namespaces'] && v.namespace !== undefined) throw new StatusUsageError('-n and -A exclude each other');
  const pos = parsed.positionals[0];
  let policy: StatusArgs['policy'];
  if (pos !== undefined) {
    const parts = pos.split('/');
    if (parts.length > 2 || parts.some((p) => p === ''))
      throw new StatusUsageError(`POLICY must be NAME or NAMESPACE/NAME, not "${pos}"`);
    policy =
      parts.length === 2
        ? { namespace: parts[0] ?? '', name: parts[1] ?? '' }
        : { namespace: v.namespace ?? 'default', name: pos };
  }
  return {
    namespace: policy?.namespace ?? v.namespace,
    policy,
    output,
    agentNamespace: v['agent-namespace'],
  };
}

function normalized<T>(items: readonly unknown[], f: (o: unknown) => { ok: true; value: T } | { ok: false }): T[] {
  const out: T[] = [];
  for (const o of items) {
    const n = f(o);
    if (n.ok) out.push(n.value);
  }
  return out;
}

/** Reads everything the report needs. */
export async function readStatusInput(kc: KubeConfig, a: StatusArgs, now: number): Promise<ReportInput> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const coord = kc.makeApiClient(CoordinationV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const net = kc.makeApiClient(NetworkingV1Api);
  const ns = a.namespace;
  const [statuses, leases, policies, pods, nodes] = await Promise.all([
    custom
      .listClusterCustomObject({ group: STATUS_GROUP, version: STATUS_VERSION, plural: STATUS_PLURAL })
      .then((l: { items?: NodePolicyStatusObject[] }) => l.items ?? [])
      .catch((e: unknown) => {
        if (apiCode(e) === 404)
          throw new Error(`the ${STATUS_KIND} resource is not served: install its CRD (kubectl apply -k daemonset/)`, {
            cause: e,
          });
        throw e;
      }),
    coord.listNamespacedLease({ namespace: a.agentNamespace }).then((l) =>
      l.items.map((x): LeaseObject => ({
        metadata: { name: x.metadata?.name ?? '' },
        spec: {
          ...(x.spec?.renewTime === undefined ? {} : { renewTime: x.spec.renewTime }),
          ...(x.spec?.leaseDurationSeconds === undefined ? {} : { leaseDurationSeconds: x.spec.leaseDurationSeconds }),
          ...(x.spec?.holderIdentity === undefined ? {} : { holderIdentity: x.spec.holderIdentity }),
        },
      })),
    ),
    (ns === undefined ? net.listNetworkPolicyForAllNamespaces() : net.listNamespacedNetworkPolicy({ namespace: ns })).then((l) =>
      normalized<NetworkPolicy>(l.items, normalizePolicy),
    ),
    (ns === undefined ? core.listPodForAllNamespaces() : core.listNamespacedPod({ namespace: ns })).then((l) =>
      normalized<Pod>(l.items, normalizePod),
    ),
    core.listNode().then((l) => l.items.map((n) => n.metadata?.name ?? '').filter((n) => n !== '')),
  ]);
  const only = a.policy;
  return {
    now,
    nodes,
    statuses,
    leases,
    policies: only === undefined ? policies : policies.filter((p) => p.namespace === only.namespace && p.name === only.name),
    pods,
  };
}

export async function statusCommand(argv: string[], io: Io, kubeConfig?: KubeConfig): Promise<number> {
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
  let kc = kubeConfig;
  if (kc === undefined) {
    kc = new KubeConfig();
    try {
      kc.loadFromDefault();
    } catch (e) {
      io.err(`error: cannot load the Kubernetes client configuration: ${errorMessage(e)}`);
      return 1;
    }
  }
  const now = Date.now();
  let input: ReportInput;
  try {
    input = await readStatusInput(kc, a, now);
  } catch (e) {
    io.err(`error: ${errorMessage(e)}`);
    return 1;
  }
  if (a.policy !== undefined && input.policies.length === 0) {
    io.err(`error: NetworkPolicy ${a.policy.namespace}/${a.policy.name} not found`);
    return 1;
  }
  const r = buildReport(input);
  if (a.output === 'json') io.out(JSON.stringify(a.policy === undefined ? r : { ...r, policy: r.policies[0] }, null, 2));
  else if (a.policy !== undefined && r.policies[0] !== undefined) io.out(policyText(r, r.policies[0], now));
  else io.out(summaryText(r, now, a.output === 'wide'));
  if (a.policy !== undefined) {
    const p = r.policies[0];
    return p !== undefined && p.lagging.length === 0 && p.notReporting.length === 0 ? 0 : EXIT_LAGGING;
  }
  return r.ok ? 0 : EXIT_LAGGING;
}
