// The tenancy cluster: two workspaces of two namespaces each, on two nodes,
// dual-stack, plus the cluster DNS. Used by the evaluator's truth tables, the
// CLI tests, the datapath tests and the fuzzer (with the same pod layout as
// the harness: pod i of a namespace on node-(i)).
//
//   workspace acme: shop, cart        workspace beta: lab, ml
//   each namespace: pods a (node-1) and b (node-2), app=<ns>, port http
//     (8080 on a, 9090 on b: a named port that resolves per pod), 5432/TCP
//   kube-system/coredns-0 (node-2), k8s-app=kube-dns, Service kube-dns
//   Services: cart/api (80 -> targetPort http), lab/db (5432 -> 15432 numeric,
//     pods listen on 15432 too), cart/manual (no selector)
//   nodes node-1 192.168.56.11 fd00:56::11, node-2 192.168.56.12 fd00:56::12
import { buildState } from '../../src/model/normalize.ts';
import type { ClusterState } from '../../src/model/types.ts';
import { DEFAULT_TENANCY } from '../../src/model/tenancy-config.ts';
import type { TenancyConfig } from '../../src/model/tenancy-config.ts';
import { tenancyPolicies } from '../../src/kinds/tenancy.ts';

export type Raw = Record<string, unknown>;

export const WORKSPACES = { acme: ['shop', 'cart'], beta: ['lab', 'ml'] } as const;
export const TENANT_NAMESPACES = ['shop', 'cart', 'lab', 'ml'] as const;
export type TenantNs = (typeof TENANT_NAMESPACES)[number];

export interface TenancyOptions {
  /** Workspaces with spec.networkIsolation: true. */
  readonly isolatedWorkspaces?: readonly string[];
  /** Namespaces with kubesphere.io/network-isolate: enabled. */
  readonly isolatedProjects?: readonly string[];
  /** Namespace -> workspace label (overrides the default layout; null = no label). */
  readonly workspaceOf?: Readonly<Record<string, string | null>>;
  /** Selector of Service cart/api (default app=cart). */
  readonly apiSelector?: Record<string, string> | null;
  /** Workspace apiVersion to write (v1alpha1 Workspace, or v1alpha2 WorkspaceTemplate). */
  readonly workspaceVersion?: 'v1alpha1' | 'v1alpha2';
  readonly extra?: readonly Raw[];
}

export const NODES = [
  { name: 'node-1', v4: '192.168.56.11', v6: 'fd00:56::11' },
  { name: 'node-2', v4: '192.168.56.12', v6: 'fd00:56::12' },
] as const;

/** Address of pod `a` (node-1) or `b` (node-2) of tenant namespace index k. */
export function podIPs(nsIndex: number, which: 'a' | 'b'): [string, string] {
  const n = which === 'a' ? 1 : 2;
  return [`10.244.${n}.${10 + nsIndex}`, `fd00:10:244:${n}::${(10 + nsIndex).toString(16)}`];
}

export const DNS_POD_IPS = ['10.244.2.53', 'fd00:10:244:2::53'];

function pod(
  namespace: string,
  name: string,
  labels: Record<string, string>,
  node: string,
  ips: readonly string[],
  ports: Raw[],
): Raw {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels },
    spec: { nodeName: node, containers: [{ name: 'main', image: 'x', ports }] },
    status: { phase: 'Running', podIPs: ips.map((ip) => ({ ip })) },
  };
}

export function workspaceObject(name: string, isolated: boolean, version: 'v1alpha1' | 'v1alpha2' = 'v1alpha1'): Raw {
  return version === 'v1alpha1'
    ? {
        apiVersion: 'tenant.kubesphere.io/v1alpha1',
        kind: 'Workspace',
        metadata: { name },
        spec: { manager: 'admin', networkIsolation: isolated },
      }
    : {
        apiVersion: 'tenant.kubesphere.io/v1alpha2',
        kind: 'WorkspaceTemplate',
        metadata: { name },
        spec: { template: { spec: { manager: 'admin', networkIsolation: isolated } } },
      };
}

export function namespaceObject(name: string, workspace: string | undefined, isolate: boolean): Raw {
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name,
      labels: workspace === undefined ? {} : { 'kubesphere.io/workspace': workspace },
      ...(isolate ? { annotations: { 'kubesphere.io/network-isolate': 'enabled' } } : {}),
    },
  };
}

export function serviceObject(namespace: string, name: string, selector: Record<string, string> | null, ports: Raw[]): Raw {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { namespace, name },
    spec: { ...(selector === null ? {} : { selector }), ports },
  };
}

export function nsnpObject(namespace: string, name: string, spec: Raw): Raw {
  return { apiVersion: 'network.kubesphere.io/v1alpha1', kind: 'NamespaceNetworkPolicy', metadata: { namespace, name }, spec };
}

function defaultWorkspace(ns: string): string {
  return (WORKSPACES.acme as readonly string[]).includes(ns) ? 'acme' : 'beta';
}

export function tenancyObjects(o: TenancyOptions = {}): Raw[] {
  const out: Raw[] = [];
  for (const n of NODES) {
    out.push({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: n.name },
      spec: { podCIDRs: [`10.244.${n.name === 'node-1' ? 1 : 2}.0/24`, `fd00:10:244:${n.name === 'node-1' ? 1 : 2}::/64`] },
      status: {
        addresses: [
          { type: 'InternalIP', address: n.v4 },
          { type: 'InternalIP', address: n.v6 },
          { type: 'Hostname', address: n.name },
        ],
      },
    });
  }
  for (const ws of Object.keys(WORKSPACES))
    out.push(workspaceObject(ws, o.isolatedWorkspaces?.includes(ws) === true, o.workspaceVersion));
  out.push(namespaceObject('kube-system', undefined, false));
  out.push(
    pod('kube-system', 'coredns-0', { 'k8s-app': 'kube-dns' }, 'node-2', DNS_POD_IPS, [
      { name: 'dns', containerPort: 53, protocol: 'UDP' },
      { name: 'dns-tcp', containerPort: 53, protocol: 'TCP' },
    ]),
  );
  out.push(
    serviceObject('kube-system', 'kube-dns', { 'k8s-app': 'kube-dns' }, [
      { name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 },
      { name: 'dns-tcp', port: 53, protocol: 'TCP', targetPort: 53 },
    ]),
  );
  TENANT_NAMESPACES.forEach((ns, k) => {
    const label = o.workspaceOf !== undefined && ns in o.workspaceOf ? o.workspaceOf[ns] : defaultWorkspace(ns);
    out.push(namespaceObject(ns, label ?? undefined, o.isolatedProjects?.includes(ns) === true));
    for (const which of ['a', 'b'] as const) {
      out.push(
        pod(ns, which, { app: ns }, which === 'a' ? 'node-1' : 'node-2', podIPs(k, which), [
          { name: 'http', containerPort: which === 'a' ? 8080 : 9090, protocol: 'TCP' },
          { name: 'db', containerPort: 15432, protocol: 'TCP' },
        ]),
      );
    }
  });
  out.push(
    serviceObject('cart', 'api', o.apiSelector === undefined ? { app: 'cart' } : o.apiSelector, [
      { name: 'web', port: 80, protocol: 'TCP', targetPort: 'http' },
    ]),
  );
  out.push(serviceObject('lab', 'db', { app: 'lab' }, [{ name: 'pg', port: 5432, protocol: 'TCP', targetPort: 15432 }]));
  out.push(serviceObject('cart', 'manual', null, [{ name: 'web', port: 80, protocol: 'TCP' }]));
  out.push(...(o.extra ?? []));
  return out;
}

/** The tenancy state (tenancy derived); throws on unexpected validation errors. */
export function tenancyState(o: TenancyOptions = {}, config: TenancyConfig = DEFAULT_TENANCY, allowErrors = false): ClusterState {
  return tenancyStateOf(tenancyObjects(o), config, allowErrors);
}

/** Objects -> a state with tenancy on; throws on unexpected validation errors (resolution ones included). */
export function tenancyStateOf(
  objects: readonly unknown[],
  config: TenancyConfig = DEFAULT_TENANCY,
  allowErrors = false,
): ClusterState {
  const built = buildState(objects);
  const state: ClusterState = { ...built.state, tenancy: config };
  const errors = [...built.errors, ...[...tenancyPolicies(state).errors.values()].flat()];
  if (errors.length > 0 && !allowErrors) throw new Error(`unexpected errors: ${JSON.stringify(errors)}`);
  return state;
}
