// A simulated Kubernetes cluster made of Linux network namespaces: one per
// node, one per pod, an outside host behind the first node, and (with more
// than two nodes) an underlay switch. Pods are dual-stack and reach each other
// across an underlay link with per-node routes, in one of two pod-network
// styles:
//   routed  - Calico-like: each pod's veth is routed by /32 and /128 from its
//             node; the pod's default gateway is link-local (169.254.1.1,
//             fe80::1) resolved to the node veth's ee:ee:ee:ee:ee:ee.
//   bridged - CNI-bridge-like: the pods of a node share a Linux bridge that
//             holds the gateway address; bridge-nf-call-ip(6)tables = 1 in the
//             node namespace, so same-node traffic crosses the forward hook.
// Every pod has a Service ClusterIP, DNATed in every node like kube-proxy's
// nftables mode (table `inet harness-kube-proxy`, prerouting and output), so
// probes can go through ClusterIPs as upstream's e2e suite does.
// Nothing here touches the root namespace's network: every link is created
// directly inside namespaces of ours.
import type { Protocol } from '../../src/model/types.ts';
import type { RawObject } from '../cases/raw.ts';
import {
  OUTSIDE,
  OUTSIDE_GATEWAY,
  OUTSIDE_PREFIX,
  ROUTED_GATEWAY,
  ROUTED_GATEWAY_MAC,
  canonical,
  clusterIPs,
  defaultNodeAddresses,
  defaultPodCIDRs,
  inCIDR,
  nthAddress,
  prefixLength,
} from './addressing.ts';
import type { DualStack } from './addressing.ts';
import { Agent } from './agent-client.ts';
import { createNetns, deleteNetns, ipBatch, runIn, sweepStale, uniquePrefix } from './netns.ts';
import type { CommandResult } from './netns.ts';
import { renderKubeProxy } from './kube-proxy.ts';

export type NetworkStyle = 'routed' | 'bridged';
export const NETWORK_STYLES: readonly NetworkStyle[] = ['routed', 'bridged'];

/** Ports every pod serves on TCP and UDP (and counts on SCTP), as upstream's model. */
export const DEFAULT_PORTS: readonly number[] = [80, 81];

export interface NodeSpec {
  readonly name: string;
  /** Underlay addresses (the Node's InternalIPs). Default 172.18.0.<11+i>, fd00:172:18::<11+i>. */
  readonly addresses?: DualStack;
  /** Default 10.244.<i+1>.0/24 and fd00:10:244:<i+1>::/64. */
  readonly podCIDRs?: DualStack;
}

export interface ServicePort {
  readonly protocol: Protocol;
  /** The port dialled on the ClusterIP. */
  readonly port: number;
  /** The pod port it is DNATed to. */
  readonly targetPort: number;
}

export interface PodSpec {
  /** `ns/name`: the pod's name on the axes of truth tables. */
  readonly key: string;
  readonly node: string;
  /** Default: the next free address of the node's pod CIDRs (from .10); a missing family is allocated too. */
  readonly ips?: Partial<DualStack>;
  /** Served ports besides DEFAULT_PORTS. */
  readonly tcp?: readonly number[];
  readonly udp?: readonly number[];
  /** SCTP ports the Service exposes besides DEFAULT_PORTS (SCTP is counted on every port anyway). */
  readonly sctp?: readonly number[];
  /** Default: port -> same port for every served TCP/UDP port and every SCTP port above. */
  readonly services?: readonly ServicePort[];
}

export interface ClusterSpec {
  readonly style: NetworkStyle;
  readonly nodes: readonly NodeSpec[];
  readonly pods: readonly PodSpec[];
  /** Ports the outside host serves besides DEFAULT_PORTS. */
  readonly outsidePorts?: readonly number[];
  /** Start an agent in each node namespace (node -> pod probes). Default true. */
  readonly nodeAgents?: boolean;
}

export interface ClusterNode {
  readonly name: string;
  /** The node's network namespace: run the node agent here (`ip netns exec <netns> ...`). */
  readonly netns: string;
  readonly addresses: DualStack;
  readonly podCIDRs: DualStack;
  readonly agent: Agent | undefined;
}

export interface ClusterPod {
  readonly key: string;
  readonly namespace: string;
  readonly name: string;
  readonly node: string;
  readonly netns: string;
  readonly ips: DualStack;
  readonly clusterIPs: DualStack;
  readonly tcp: readonly number[];
  readonly udp: readonly number[];
  readonly services: readonly ServicePort[];
  readonly agent: Agent;
}

export interface ClusterOutside {
  readonly netns: string;
  readonly ips: DualStack;
  readonly agent: Agent;
}

function uniq(xs: readonly number[]): number[] {
  return [...new Set(xs)].sort((a, b) => a - b);
}

function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf('/');
  if (i <= 0) throw new Error(`pod key ${key}: expected ns/name`);
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

/** Writes sysctls of a namespace through /proc (no procps needed). */
async function sysctls(netns: string, values: Readonly<Record<string, string>>): Promise<void> {
  const script = Object.entries(values)
    .map(([k, v]) => `echo ${v} > /proc/sys/${k.replaceAll('.', '/')}`)
    .join(' && ');
  await runIn(netns, 'sh', ['-c', script]);
}

export class Cluster {
  readonly style: NetworkStyle;
  readonly prefix: string;
  readonly nodes: readonly ClusterNode[];
  #pods: ClusterPod[];
  readonly outside: ClusterOutside;
  /** Every namespace of this cluster (deleted by destroy()). */
  readonly namespaces: readonly string[];
  #destroyed = false;
  #sctpPort = 10000;

  private constructor(init: {
    style: NetworkStyle;
    prefix: string;
    nodes: ClusterNode[];
    pods: ClusterPod[];
    outside: ClusterOutside;
    namespaces: string[];
  }) {
    this.style = init.style;
    this.prefix = init.prefix;
    this.nodes = init.nodes;
    this.#pods = init.pods;
    this.outside = init.outside;
    this.namespaces = init.namespaces;
  }

  /**
   * Brings the cluster up. On any failure everything created so far is removed
   * before the error is rethrown. Stale namespaces of dead earlier runs are swept first.
   */
  static async create(spec: ClusterSpec): Promise<Cluster> {
    sweepStale();
    const prefix = uniquePrefix();
    if (spec.nodes.length < 1) throw new Error('a cluster needs at least one node');
    const nodeNames = new Set(spec.nodes.map((n) => n.name));
    const keys = new Set<string>();
    for (const p of spec.pods) {
      if (!nodeNames.has(p.node)) throw new Error(`pod ${p.key}: unknown node ${p.node}`);
      if (keys.has(p.key)) throw new Error(`pod ${p.key} given twice`);
      keys.add(p.key);
    }

    const nodes = spec.nodes.map((n, i) => ({
      name: n.name,
      netns: `${prefix}n${i}`,
      addresses: {
        v4: canonical((n.addresses ?? defaultNodeAddresses(i)).v4),
        v6: canonical((n.addresses ?? defaultNodeAddresses(i)).v6),
      },
      podCIDRs: n.podCIDRs ?? defaultPodCIDRs(i),
    }));
    const nodeByName = new Map(nodes.map((n) => [n.name, n]));

    // Addresses: given ones are kept, the others are allocated from .10 of the node's pod CIDRs.
    const used = new Set(
      spec.pods.flatMap((p) => [p.ips?.v4, p.ips?.v6].flatMap((ip) => (ip === undefined ? [] : [canonical(ip)]))),
    );
    const nextHost = new Map<string, number>();
    const allocate = (node: string, given: Partial<DualStack> | undefined): DualStack => {
      if (given?.v4 !== undefined && given.v6 !== undefined) return { v4: canonical(given.v4), v6: canonical(given.v6) };
      const n = nodeByName.get(node)!;
      let k = nextHost.get(node) ?? 10;
      for (;;) {
        const ips = {
          v4: given?.v4 === undefined ? nthAddress(n.podCIDRs.v4, k) : canonical(given.v4),
          v6: given?.v6 === undefined ? nthAddress(n.podCIDRs.v6, k) : canonical(given.v6),
        };
        k += 1;
        if ((given?.v4 !== undefined || !used.has(ips.v4)) && (given?.v6 !== undefined || !used.has(ips.v6))) {
          nextHost.set(node, k);
          used.add(ips.v4);
          used.add(ips.v6);
          return ips;
        }
      }
    };
    const pods = spec.pods.map((p, i) => {
      const ips = allocate(p.node, p.ips);
      const tcp = uniq([...DEFAULT_PORTS, ...(p.tcp ?? [])]);
      const udp = uniq([...DEFAULT_PORTS, ...(p.udp ?? [])]);
      const sctp = uniq([...DEFAULT_PORTS, ...(p.sctp ?? [])]);
      const identity = (protocol: Protocol, ports: readonly number[]) =>
        ports.map((port) => ({ protocol, port, targetPort: port }));
      const services = p.services ?? [...identity('TCP', tcp), ...identity('UDP', udp), ...identity('SCTP', sctp)];
      return {
        ...splitKey(p.key),
        key: p.key,
        node: p.node,
        netns: `${prefix}p${i}`,
        ips,
        clusterIPs: clusterIPs(i),
        tcp,
        udp,
        services,
        index: i,
      };
    });

    const bridged = spec.style === 'bridged';
    const gateways = new Map<string, DualStack>();
    if (bridged) {
      for (const n of nodes) {
        const mine = pods.filter((p) => p.node === n.name);
        for (const p of mine) {
          if (!inCIDR(p.ips.v4, n.podCIDRs.v4) || !inCIDR(p.ips.v6, n.podCIDRs.v6)) {
            throw new Error(
              `bridged style: pod ${p.key} (${p.ips.v4}, ${p.ips.v6}) must be inside its node's pod CIDRs ${n.podCIDRs.v4}, ${n.podCIDRs.v6}`,
            );
          }
        }
        // The bridge holds the first host address not taken by a pod (like the bridge plugin's gateway).
        let k = 1;
        while (mine.some((p) => p.ips.v4 === nthAddress(n.podCIDRs.v4, k) || p.ips.v6 === nthAddress(n.podCIDRs.v6, k))) k += 1;
        gateways.set(n.name, { v4: nthAddress(n.podCIDRs.v4, k), v6: nthAddress(n.podCIDRs.v6, k) });
      }
    }

    const extNs = `${prefix}ext`;
    const switchNs = nodes.length > 2 ? `${prefix}sw` : undefined;
    const namespaces = [
      ...nodes.map((n) => n.netns),
      ...pods.map((p) => p.netns),
      extNs,
      ...(switchNs === undefined ? [] : [switchNs]),
    ];
    const agents: Agent[] = [];
    try {
      await createNetns(namespaces);

      // Sysctls first: DAD off before any interface exists, so IPv6 addresses are usable at once.
      const base = { 'net.ipv6.conf.all.accept_dad': '0', 'net.ipv6.conf.default.accept_dad': '0' };
      const nodeSys = {
        ...base,
        'net.ipv4.ip_forward': '1',
        'net.ipv6.conf.all.forwarding': '1',
        ...(bridged ? { 'net.bridge.bridge-nf-call-iptables': '1', 'net.bridge.bridge-nf-call-ip6tables': '1' } : {}),
      };
      await Promise.all([
        ...nodes.map((n) => sysctls(n.netns, nodeSys)),
        ...pods.map((p) => sysctls(p.netns, base)),
        sysctls(extNs, base),
        ...(switchNs === undefined ? [] : [sysctls(switchNs, base)]),
      ]);

      // Links, each created directly inside its namespaces.
      const links: string[] = [];
      const first = nodes[0]!;
      if (nodes.length === 2) {
        links.push(`link add name ul0 netns ${nodes[0]!.netns} type veth peer name ul0 netns ${nodes[1]!.netns}`);
      } else if (switchNs !== undefined) {
        links.push(`link add name br0 netns ${switchNs} type bridge forward_delay 0`);
        nodes.forEach((n, i) => links.push(`link add name ul0 netns ${n.netns} type veth peer name n${i} netns ${switchNs}`));
      }
      links.push(`link add name ext0 netns ${first.netns} type veth peer name eth0 netns ${extNs}`);
      if (bridged)
        for (const n of nodes) links.push(`link add name cni0 netns ${n.netns} type bridge forward_delay 0 mcast_snooping 0`);
      for (const p of pods) {
        const node = nodeByName.get(p.node)!;
        const mac = bridged ? '' : ` address ${ROUTED_GATEWAY_MAC}`;
        links.push(`link add name vp${p.index} netns ${node.netns}${mac} type veth peer name eth0 netns ${p.netns}`);
      }
      await ipBatch(links);

      // Per-namespace addressing and routes.
      const batches: Promise<void>[] = [];
      nodes.forEach((n, i) => {
        const l = ['link set lo up'];
        const hasUnderlay = nodes.length > 1;
        if (hasUnderlay) {
          l.push('link set ul0 up', `addr add ${n.addresses.v4}/32 dev ul0`, `addr add ${n.addresses.v6}/128 dev ul0 nodad`);
        } else {
          l.push(`addr add ${n.addresses.v4}/32 dev lo`, `addr add ${n.addresses.v6}/128 dev lo`);
        }
        for (const o of nodes) {
          if (o === n) continue;
          l.push(`route add ${o.addresses.v4}/32 dev ul0`, `route add ${o.addresses.v6}/128 dev ul0`);
          l.push(
            `route add ${o.podCIDRs.v4} via ${o.addresses.v4} dev ul0`,
            `route add ${o.podCIDRs.v6} via ${o.addresses.v6} dev ul0`,
          );
          for (const p of pods) {
            if (p.node !== o.name) continue;
            if (!inCIDR(p.ips.v4, o.podCIDRs.v4)) l.push(`route add ${p.ips.v4}/32 via ${o.addresses.v4} dev ul0`);
            if (!inCIDR(p.ips.v6, o.podCIDRs.v6)) l.push(`route add ${p.ips.v6}/128 via ${o.addresses.v6} dev ul0`);
          }
        }
        // Default routes (to the outside host, through the first node) also give ClusterIPs a route before DNAT.
        if (i === 0) {
          l.push(
            'link set ext0 up',
            `addr add ${OUTSIDE_GATEWAY.v4}/${OUTSIDE_PREFIX.v4} dev ext0`,
            `addr add ${OUTSIDE_GATEWAY.v6}/${OUTSIDE_PREFIX.v6} dev ext0 nodad`,
            `route add default via ${OUTSIDE.v4} dev ext0 src ${n.addresses.v4}`,
            `route add ::/0 via ${OUTSIDE.v6} dev ext0 src ${n.addresses.v6}`,
          );
        } else {
          l.push(
            `route add default via ${first.addresses.v4} dev ul0 src ${n.addresses.v4}`,
            `route add ::/0 via ${first.addresses.v6} dev ul0 src ${n.addresses.v6}`,
          );
        }
        const gw = gateways.get(n.name);
        if (gw !== undefined) {
          l.push(
            'link set cni0 up',
            `addr add ${gw.v4}/${prefixLength(n.podCIDRs.v4)} dev cni0`,
            `addr add ${gw.v6}/${prefixLength(n.podCIDRs.v6)} dev cni0 nodad`,
          );
        }
        for (const p of pods) {
          if (p.node !== n.name) continue;
          const dev = `vp${p.index}`;
          if (bridged) {
            l.push(`link set ${dev} master cni0`, `link set ${dev} up`);
          } else {
            l.push(
              `link set ${dev} up`,
              `route add ${p.ips.v4}/32 dev ${dev} src ${n.addresses.v4}`,
              `route add ${p.ips.v6}/128 dev ${dev} src ${n.addresses.v6}`,
            );
          }
        }
        batches.push(ipBatch(l, n.netns));
      });
      if (switchNs !== undefined) {
        batches.push(
          ipBatch(
            [
              'link set lo up',
              'link set br0 up',
              ...nodes.map((_, i) => `link set n${i} master br0`),
              ...nodes.map((_, i) => `link set n${i} up`),
            ],
            switchNs,
          ),
        );
      }
      for (const p of pods) {
        const l = ['link set lo up', 'link set eth0 up'];
        if (bridged) {
          const n = nodeByName.get(p.node)!;
          const gw = gateways.get(p.node)!;
          l.push(
            `addr add ${p.ips.v4}/${prefixLength(n.podCIDRs.v4)} dev eth0`,
            `addr add ${p.ips.v6}/${prefixLength(n.podCIDRs.v6)} dev eth0 nodad`,
            `route add default via ${gw.v4} dev eth0`,
            `route add ::/0 via ${gw.v6} dev eth0`,
          );
        } else {
          l.push(
            `addr add ${p.ips.v4}/32 dev eth0`,
            `addr add ${p.ips.v6}/128 dev eth0 nodad`,
            `neigh add ${ROUTED_GATEWAY.v4} lladdr ${ROUTED_GATEWAY_MAC} dev eth0 nud permanent`,
            `neigh add ${ROUTED_GATEWAY.v6} lladdr ${ROUTED_GATEWAY_MAC} dev eth0 nud permanent`,
            `route add ${ROUTED_GATEWAY.v4} dev eth0 scope link`,
            `route add default via ${ROUTED_GATEWAY.v4} dev eth0`,
            `route add ::/0 via ${ROUTED_GATEWAY.v6} dev eth0`,
          );
        }
        batches.push(ipBatch(l, p.netns));
      }
      batches.push(
        ipBatch(
          [
            'link set lo up',
            'link set eth0 up',
            `addr add ${OUTSIDE.v4}/${OUTSIDE_PREFIX.v4} dev eth0`,
            `addr add ${OUTSIDE.v6}/${OUTSIDE_PREFIX.v6} dev eth0 nodad`,
            `route add default via ${OUTSIDE_GATEWAY.v4} dev eth0`,
            `route add ::/0 via ${OUTSIDE_GATEWAY.v6} dev eth0`,
          ],
          extNs,
        ),
      );
      await Promise.all(batches);

      // Services: the same DNAT table in every node.
      const kubeProxy = renderKubeProxy(pods.map((p) => ({ clusterIPs: p.clusterIPs, podIPs: p.ips, ports: p.services })));
      await Promise.all(nodes.map((n) => runIn(n.netns, 'nft', ['-f', '-'], { input: kubeProxy })));

      // Agents: serve, count SCTP.
      const start = async (netns: string): Promise<Agent> => {
        const a = await Agent.start(netns);
        agents.push(a);
        return a;
      };
      const outsidePorts = uniq([...DEFAULT_PORTS, ...(spec.outsidePorts ?? [])]);
      const [podAgents, nodeAgents, extAgent] = await Promise.all([
        Promise.all(
          pods.map(async (p) => {
            const a = await start(p.netns);
            await a.serve(p.tcp, p.udp);
            await a.installSctpCounter();
            return a;
          }),
        ),
        Promise.all(
          nodes.map(async (n) => {
            if (spec.nodeAgents === false) return undefined;
            const a = await start(n.netns);
            // Pods probe their node too (the input hook).
            // UDP answers must come from the InternalIP, not the bridge gateway address.
            await a.serve(DEFAULT_PORTS, DEFAULT_PORTS, [n.addresses.v4, n.addresses.v6]);
            return a;
          }),
        ),
        (async () => {
          const a = await start(extNs);
          await a.serve(outsidePorts, outsidePorts);
          await a.installSctpCounter();
          return a;
        })(),
      ]);

      return new Cluster({
        style: spec.style,
        prefix,
        nodes: nodes.map((n, i) => ({ ...n, agent: nodeAgents[i] })),
        pods: pods.map(({ index, ...p }) => ({ ...p, agent: podAgents[index]! })),
        outside: { netns: extNs, ips: OUTSIDE, agent: extAgent },
        namespaces,
      });
    } catch (e) {
      for (const a of agents) a.stop();
      await deleteNetns(namespaces).catch(() => {});
      throw e;
    }
  }

  get pods(): readonly ClusterPod[] {
    return this.#pods;
  }

  /**
   * Serves more ports on a pod (TCP/UDP servers; SCTP is counted on every
   * port) and exposes them on its Service as port -> same port, unless the
   * Service already has that port. Updates the DNAT table of every node.
   */
  async serve(key: string, ports: { tcp?: readonly number[]; udp?: readonly number[]; sctp?: readonly number[] }): Promise<void> {
    const i = this.#pods.findIndex((p) => p.key === key);
    const p = this.#pods[i];
    if (p === undefined) throw new Error(`no pod ${key} in the cluster`);
    const tcp = uniq([...p.tcp, ...(ports.tcp ?? [])]);
    const udp = uniq([...p.udp, ...(ports.udp ?? [])]);
    await p.agent.serve(tcp, udp);
    const services = [...p.services];
    const add = (protocol: Protocol, list: readonly number[] | undefined) => {
      for (const port of list ?? [])
        if (!services.some((s) => s.protocol === protocol && s.port === port))
          services.push({ protocol, port, targetPort: port });
    };
    add('TCP', ports.tcp);
    add('UDP', ports.udp);
    add('SCTP', ports.sctp);
    this.#pods[i] = { ...p, tcp, udp, services };
    if (services.length !== p.services.length) await this.#applyKubeProxy();
  }

  /** Replaces a pod's Service ports (e.g. a named targetPort that resolves differently per pod). */
  async setServicePorts(key: string, services: readonly ServicePort[]): Promise<void> {
    const i = this.#pods.findIndex((p) => p.key === key);
    const p = this.#pods[i];
    if (p === undefined) throw new Error(`no pod ${key} in the cluster`);
    this.#pods[i] = { ...p, services: [...services] };
    await this.#applyKubeProxy();
  }

  async #applyKubeProxy(): Promise<void> {
    const text = renderKubeProxy(this.#pods.map((p) => ({ clusterIPs: p.clusterIPs, podIPs: p.ips, ports: p.services })));
    await Promise.all(this.nodes.map((n) => runIn(n.netns, 'nft', ['-f', '-'], { input: text })));
  }

  node(name: string): ClusterNode {
    const n = this.nodes.find((x) => x.name === name);
    if (n === undefined) throw new Error(`no node ${name} in the cluster`);
    return n;
  }

  pod(key: string): ClusterPod {
    const p = this.pods.find((x) => x.key === key);
    if (p === undefined) throw new Error(`no pod ${key} in the cluster`);
    return p;
  }

  /** Node objects with the underlay addresses as InternalIPs and the pod CIDRs, for the cluster state. */
  nodeObjects(): RawObject[] {
    return this.nodes.map((n) => ({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: n.name, labels: { 'kubernetes.io/hostname': n.name } },
      spec: { podCIDR: n.podCIDRs.v4, podCIDRs: [n.podCIDRs.v4, n.podCIDRs.v6] },
      status: {
        addresses: [
          { type: 'InternalIP', address: n.addresses.v4 },
          { type: 'InternalIP', address: n.addresses.v6 },
          { type: 'Hostname', address: n.name },
        ],
      },
    }));
  }

  /** Runs a command inside a node's namespace (by node name) or any namespace of the cluster. */
  exec(
    where: string,
    cmd: string,
    args: readonly string[],
    opts: { input?: string; reject?: boolean } = {},
  ): Promise<CommandResult> {
    const ns = this.nodes.find((n) => n.name === where)?.netns ?? this.pods.find((p) => p.key === where)?.netns ?? where;
    if (!this.namespaces.includes(ns)) throw new Error(`${where} is neither a node, a pod nor a namespace of this cluster`);
    return runIn(ns, cmd, args, opts);
  }

  /** A fresh SCTP source port: the destination recognises each probe by it. */
  nextSctpPort(): number {
    this.#sctpPort = this.#sctpPort >= 59999 ? 10000 : this.#sctpPort + 1;
    return this.#sctpPort;
  }

  /** Removes every namespace and process of the cluster. Idempotent. */
  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    for (const a of [...this.pods.map((p) => p.agent), ...this.nodes.map((n) => n.agent), this.outside.agent]) a?.stop();
    await deleteNetns(this.namespaces);
  }

  /** The underlay and pod addresses as text, for reports and the demo. */
  describe(): string {
    const lines = [`cluster ${this.prefix}* (${this.style})`];
    const w = Math.max(0, ...this.pods.map((p) => p.key.length));
    for (const n of this.nodes) {
      lines.push(
        `  node ${n.name}  netns ${n.netns}  ${n.addresses.v4} ${n.addresses.v6}  pods ${n.podCIDRs.v4} ${n.podCIDRs.v6}`,
      );
      for (const p of this.pods.filter((x) => x.node === n.name)) {
        lines.push(
          `    pod ${p.key.padEnd(w)}  ${p.ips.v4.padEnd(15)} ${p.ips.v6.padEnd(22)} svc ${p.clusterIPs.v4.padEnd(12)} ${p.clusterIPs.v6}  netns ${p.netns}`,
        );
      }
    }
    lines.push(`  outside netns ${this.outside.netns}  ${this.outside.ips.v4} ${this.outside.ips.v6}`);
    return lines.join('\n');
  }
}
