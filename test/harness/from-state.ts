// A simulated cluster for given manifests: nodes at their InternalIPs, every
// active pod at its own IPs on its own node, serving its container ports.
// Used by the demo, by regression replays and by anyone with a manifest directory.
import { parseIP } from '../../src/model/ip.ts';
import type { ClusterState, Pod } from '../../src/model/types.ts';
import { isActivePod } from '../../src/model/types.ts';
import { defaultNodeAddresses, defaultPodCIDRs, inCIDR } from './addressing.ts';
import type { DualStack } from './addressing.ts';
import type { ClusterSpec, NetworkStyle, NodeSpec, PodSpec } from './cluster.ts';

const fam = (ip: string) => parseIP(ip)?.family;

/** The /24 (or /64) holding every given address, if there is one. */
function commonCIDR(ips: readonly string[], f: 4 | 6): string | undefined {
  const first = ips[0];
  if (first === undefined) return undefined;
  const p = parseIP(first)!;
  const bits = f === 4 ? 24 : 64;
  const shift = BigInt((f === 4 ? 32 : 128) - bits);
  const base = (p.value >> shift) << shift;
  const v = f === 4 ? [24, 16, 8, 0].map((s) => Number((base >> BigInt(s)) & 255n)).join('.') : undefined;
  const cidr = f === 4 ? `${v}/24` : `${formatV6Prefix(base)}/64`;
  return ips.every((ip) => inCIDR(ip, cidr)) ? cidr : undefined;
}

function formatV6Prefix(base: bigint): string {
  const groups = [112, 96, 80, 64].map((s) => ((base >> BigInt(s)) & 0xffffn).toString(16));
  return `${groups.join(':')}::`;
}

/** Pods the harness can place: active, not hostNetwork, scheduled, with an address. */
export function placeablePods(state: ClusterState): Pod[] {
  return state.pods.filter((p) => isActivePod(p) && p.nodeName !== undefined);
}

export interface FromStateOptions {
  /** Endpoints that are on the network but not in the manifests (an address no pod object has). */
  readonly extraPods?: readonly PodSpec[];
  /** More ports to serve on every pod (TCP and UDP). */
  readonly extraPorts?: readonly number[];
}

export function clusterSpecFromState(state: ClusterState, style: NetworkStyle, opts: FromStateOptions = {}): ClusterSpec {
  const pods = placeablePods(state);
  const nodeNames = [
    ...new Set([
      ...state.nodes.map((n) => n.name),
      ...pods.map((p) => p.nodeName!),
      ...(opts.extraPods ?? []).map((p) => p.node),
    ]),
  ].sort();
  const nodes: NodeSpec[] = nodeNames.map((name, i) => {
    const addrs = state.nodes.find((n) => n.name === name)?.addresses ?? [];
    const def = defaultNodeAddresses(i);
    const addresses: DualStack = { v4: addrs.find((a) => fam(a) === 4) ?? def.v4, v6: addrs.find((a) => fam(a) === 6) ?? def.v6 };
    const mine = [
      ...pods.filter((p) => p.nodeName === name).flatMap((p) => p.ips),
      ...(opts.extraPods ?? [])
        .filter((p) => p.node === name)
        .flatMap((p) => [p.ips?.v4, p.ips?.v6].filter((x) => x !== undefined)),
    ];
    const cidrs = defaultPodCIDRs(i);
    const podCIDRs: DualStack = {
      v4:
        commonCIDR(
          mine.filter((ip) => fam(ip) === 4),
          4,
        ) ?? cidrs.v4,
      v6:
        commonCIDR(
          mine.filter((ip) => fam(ip) === 6),
          6,
        ) ?? cidrs.v6,
    };
    return { name, addresses, podCIDRs };
  });
  const extra = opts.extraPorts ?? [];
  const podSpecs: PodSpec[] = pods.map((p) => {
    const v4 = p.ips.find((ip) => fam(ip) === 4);
    const v6 = p.ips.find((ip) => fam(ip) === 6);
    return {
      key: `${p.namespace}/${p.name}`,
      node: p.nodeName!,
      ips: { ...(v4 === undefined ? {} : { v4 }), ...(v6 === undefined ? {} : { v6 }) },
      tcp: [...p.ports.filter((c) => c.protocol === 'TCP').map((c) => c.port), ...extra],
      udp: [...p.ports.filter((c) => c.protocol === 'UDP').map((c) => c.port), ...extra],
      sctp: p.ports.filter((c) => c.protocol === 'SCTP').map((c) => c.port),
    };
  });
  return { style, nodes, pods: [...podSpecs, ...(opts.extraPods ?? [])], outsidePorts: extra };
}
