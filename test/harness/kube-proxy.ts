// Services the way kube-proxy's nftables mode implements them, reduced to what
// the probes need: ClusterIP:port DNATed to the pod's address and target port,
// in prerouting (traffic from pods) and output (traffic from the node itself).
// It lives in a table of the harness's own so the policy ruleset under test
// never sees or touches it, and the policy hooks judge traffic after DNAT.
import type { Protocol } from '../../src/model/types.ts';
import type { DualStack } from './addressing.ts';

export const KUBE_PROXY_TABLE = 'harness-kube-proxy';

export interface ServiceBackend {
  readonly clusterIPs: DualStack;
  readonly podIPs: DualStack;
  readonly ports: readonly { readonly protocol: Protocol; readonly port: number; readonly targetPort: number }[];
}

export function renderKubeProxy(services: readonly ServiceBackend[]): string {
  const el4: string[] = [];
  const el6: string[] = [];
  for (const s of services) {
    for (const p of s.ports) {
      const proto = p.protocol.toLowerCase();
      el4.push(`${s.clusterIPs.v4} . ${proto} . ${p.port} : ${s.podIPs.v4} . ${p.targetPort}`);
      el6.push(`${s.clusterIPs.v6} . ${proto} . ${p.port} : ${s.podIPs.v6} . ${p.targetPort}`);
    }
  }
  const elements = (xs: string[]) => (xs.length === 0 ? '' : ` elements = { ${xs.join(', ')} };`);
  const dnat = [
    'meta nfproto ipv4 dnat ip to ip daddr . meta l4proto . th dport map @svc4',
    'meta nfproto ipv6 dnat ip6 to ip6 daddr . meta l4proto . th dport map @svc6',
  ];
  return [
    `table inet ${KUBE_PROXY_TABLE}`,
    `delete table inet ${KUBE_PROXY_TABLE}`,
    `table inet ${KUBE_PROXY_TABLE} {`,
    `  map svc4 { type ipv4_addr . inet_proto . inet_service : ipv4_addr . inet_service;${elements(el4)} }`,
    `  map svc6 { type ipv6_addr . inet_proto . inet_service : ipv6_addr . inet_service;${elements(el6)} }`,
    '  chain prerouting {',
    '    type nat hook prerouting priority dstnat; policy accept;',
    ...dnat.map((r) => `    ${r}`),
    '  }',
    '  chain output {',
    // nft 1.0.6 knows the name dstnat only for prerouting; -100 is the same priority.
    '    type nat hook output priority -100; policy accept;',
    ...dnat.map((r) => `    ${r}`),
    '  }',
    '}',
    '',
  ].join('\n');
}
