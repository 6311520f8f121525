// The cluster state and baseline ruleset of scripts/bench-datapath.ts (and
// of its profile mode): a client and a server pod on node-1, `n` policies
// selecting the server, optionally `n` more isolating the client for egress.
import type {
  ClusterNetworkPolicy,
  ClusterPolicyAction,
  ClusterPolicyRule,
  ClusterState,
  LabelSelector,
  Pod,
} from '../../src/model/types.ts';
import { node, pod, podPeer, policy, port, rule, sel, state } from '../../test/support/state-builder.ts';

export const TABLE = 'nft-netpol';
export const ALLOWED_PORT = 8080;
export const DENIED_PORT = 9090;
/** Allowed like ALLOWED_PORT, served by nobody. */
export const SYN_ALLOWED_PORT = 8081;
export const NS = 'bench';

/** Filler peers: each selector matches two pods elsewhere, so every peer set has elements. */
function fillerPods(n: number): Pod[] {
  const pods: Pod[] = [];
  for (let i = 0; i < n; i++)
    for (const k of [0, 1])
      pods.push(
        pod(NS, `peer-${i}-${k}`, {
          labels: { app: `peer-${i}` },
          node: 'node-2',
          ips: [`10.250.${i >> 7}.${((i & 127) << 1) + k}`],
        }),
      );
  return pods;
}

/**
 * `n` policies select the server for ingress (p-0000 ... allow filler peers on
 * TCP 8080, zz-client allows the client); with `egress`, `n` more select the
 * client for egress the same way (zz-server allows the server).
 */
export function benchState(n: number, egress: boolean, client: string, server: string): ClusterState {
  const tcp = [port('TCP', ALLOWED_PORT), port('TCP', SYN_ALLOWED_PORT)];
  const ingress = Array.from({ length: n }, (_, i) =>
    i === n - 1
      ? policy(NS, 'zz-client', { podSelector: sel({ app: 'server' }), ingress: [rule([podPeer(sel({ app: 'client' }))], tcp)] })
      : policy(NS, `p-${String(i).padStart(4, '0')}`, {
          podSelector: sel({ app: 'server' }),
          ingress: [rule([podPeer(sel({ app: `peer-${i}` }))], tcp)],
        }),
  );
  const egressPolicies = egress
    ? Array.from({ length: n }, (_, i) =>
        i === n - 1
          ? policy(NS, 'zz-server', {
              podSelector: sel({ app: 'client' }),
              types: { ingress: false, egress: true },
              egress: [rule([podPeer(sel({ app: 'server' }))], tcp)],
            })
          : policy(NS, `q-${String(i).padStart(4, '0')}`, {
              podSelector: sel({ app: 'client' }),
              types: { ingress: false, egress: true },
              egress: [rule([podPeer(sel({ app: `peer-${i}` }))], tcp)],
            }),
      )
    : [];
  return state({
    pods: [
      pod(NS, 'client', { labels: { app: 'client' }, ips: [client] }),
      pod(NS, 'server', { labels: { app: 'server' }, ips: [server] }),
      ...fillerPods(n),
    ],
    policies: [...ingress, ...egressPolicies],
    nodes: [node('node-1'), node('node-2')],
  });
}

export function baseline(drop: boolean): string {
  return [
    `table inet ${TABLE} {}`,
    `delete table inet ${TABLE}`,
    `table inet ${TABLE} {`,
    '\tchain forward {',
    '\t\ttype filter hook forward priority filter; policy accept;',
    '\t\tct state established,related accept',
    ...(drop ? [`\t\tmeta l4proto tcp th dport ${DENIED_PORT} counter drop`] : []),
    '\t}',
    '}',
    '',
  ].join('\n');
}

/** How the client's connections to the server are decided with --cnp. */
export type CnpPath = 'accept' | 'pass';

function cnpRule(
  name: string,
  action: ClusterPolicyAction,
  podSelector: LabelSelector,
  ports: readonly [number, number][],
): ClusterPolicyRule {
  return {
    name,
    action,
    peers: [{ kind: 'pods', namespaceSelector: sel(), podSelector }],
    protocols: ports.map(([lo, hi]) => ({ kind: 'port', protocol: 'TCP', port: lo, endPort: lo === hi ? undefined : hi })),
    invalid: false,
  };
}

/**
 * benchState(1000, egress) plus 100 Admin ClusterNetworkPolicies of 25
 * ingress rules each; the first 50 select the server, the others a label no
 * pod has. Filler rules name the filler peers (Accept, Deny and Pass on
 * various ports and ranges); the last rules of the last policy selecting the
 * server decide the client: Deny on DENIED_PORT, then `path` (Accept, or
 * Pass to the NetworkPolicy tier, which allows) on the allowed ports.
 */
export function cnpBenchState(egress: boolean, path: CnpPath, client: string, server: string): ClusterState {
  const s = benchState(1000, egress, client, server);
  const actions: ClusterPolicyAction[] = ['Accept', 'Deny', 'Pass'];
  const policies: ClusterNetworkPolicy[] = Array.from({ length: 100 }, (_, i) => {
    const selectsServer = i < 50;
    const rules: ClusterPolicyRule[] = Array.from({ length: 25 }, (_, j) => {
      const k = (i * 25 + j) % 999;
      return cnpRule(`r${j}`, actions[(i + j) % 3]!, sel({ app: `peer-${k}` }), [
        [1000 + j, 1000 + j],
        [20000 + 100 * j, 20000 + 100 * j + 50],
      ]);
    });
    if (i === 49) {
      const c = sel({ app: 'client' });
      rules[23] = cnpRule('deny-client', 'Deny', c, [[DENIED_PORT, DENIED_PORT]]);
      rules[24] = cnpRule('client', path === 'accept' ? 'Accept' : 'Pass', c, [[ALLOWED_PORT, SYN_ALLOWED_PORT]]);
    }
    return {
      name: `cnp-${String(i).padStart(3, '0')}`,
      sourceKind: 'ClusterNetworkPolicy',
      tier: 'Admin',
      priority: i,
      subject: { namespaceSelector: sel(), podSelector: sel({ app: selectsServer ? 'server' : 'nobody' }) },
      ingress: rules,
      egress: [],
      errors: [],
    };
  });
  return { ...s, clusterPolicies: policies };
}

/**
 * --staged: benchState(1) enforced (the client allowed to the server, and with
 * `egress` from the client), plus benchState(n)'s n policies (and as many for
 * egress) annotated staged, renamed `staged-*`: every new connection to or
 * from the selected pods is also judged in the shadow path (compile/staged.ts);
 * the staged policies allow the client too, so no verdict changes (the common
 * case, and the dearest: an allowed packet walks the whole shadow path).
 */
export function stagedBenchState(n: number, egress: boolean, client: string, server: string): ClusterState {
  const enforced = benchState(1, egress, client, server);
  const extra = benchState(n, egress, client, server);
  const staged = extra.policies.map((p) => ({ ...p, name: `staged-${p.name}`, staged: true as const }));
  return {
    ...extra,
    policies: [...enforced.policies, ...staged].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
  };
}
