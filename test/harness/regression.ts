// Reproductions of datapath mismatches as self-contained YAML files (the
// manifests, endpoints that are not pods, and the probes with the oracle's
// answer), written by the differential fuzzer and replayed by
// test/datapath/regressions.test.ts.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import type { ClusterState, Family, Protocol } from '../../src/model/types.ts';
import { verdict } from '../../src/policy/verdict.ts';
import type { Endpoint } from '../../src/policy/verdict.ts';
import type { Cluster, NetworkStyle } from './cluster.ts';
import type { Probe } from './probe.ts';
import { OUTSIDE_KEY } from './probe.ts';

export interface RegressionProbe {
  readonly from: string;
  readonly to: string;
  readonly protocol: Protocol;
  readonly port: number;
  readonly family: Family;
  readonly via: 'service' | 'pod';
  /** The oracle's answer when the file was written. */
  readonly expect: 'allowed' | 'blocked';
  /** What the datapath did then (for the reader). */
  readonly observed?: string;
  readonly reason?: string;
}

export interface UnlistedPod {
  readonly key: string;
  readonly node: string;
  readonly ipv4: string;
  readonly ipv6: string;
}

export interface Regression {
  readonly description: string;
  /** Styles the mismatch was seen in; replays run in both anyway. */
  readonly styles?: readonly NetworkStyle[];
  readonly denyAction: 'drop' | 'reject';
  /** Addresses on the network that no pod object has (e.g. a pod deleted from the state). */
  readonly unlistedPods: readonly UnlistedPod[];
  readonly probes: readonly RegressionProbe[];
  /** Namespaces, Pods (with nodeName and podIPs), Nodes and NetworkPolicies. */
  readonly objects: readonly unknown[];
}

export const REGRESSIONS_DIR = new URL('../datapath/regressions/', import.meta.url);

export function regressionToYaml(r: Regression, header: string): string {
  const comment = header
    .split('\n')
    .map((l) => `# ${l}`.trimEnd())
    .join('\n');
  return `${comment}\n${stringify(r, { lineWidth: 0 })}`;
}

export function parseRegression(text: string, source: string): Regression {
  const r = parse(text) as Partial<Regression> | null;
  if (r === null || typeof r !== 'object' || !Array.isArray(r.probes) || !Array.isArray(r.objects)) {
    throw new Error(`${source}: a regression needs probes and objects`);
  }
  return {
    description: r.description ?? source,
    denyAction: r.denyAction ?? 'reject',
    unlistedPods: r.unlistedPods ?? [],
    probes: r.probes,
    objects: r.objects,
    ...(r.styles === undefined ? {} : { styles: r.styles }),
  };
}

export function loadRegressions(dir: URL = REGRESSIONS_DIR): { file: string; regression: Regression }[] {
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'));
  } catch {
    return [];
  }
  return files.sort().map((file) => {
    const path = join(dir.pathname, file);
    return { file, regression: parseRegression(readFileSync(path, 'utf8'), file) };
  });
}

/** How the oracle sees a probe endpoint of a cluster: a pod of the state, or a bare address. */
export function endpointOf(c: Cluster, state: ClusterState, key: string, family: Family): Endpoint {
  const pick = (ips: { v4: string; v6: string }) => (family === 4 ? ips.v4 : ips.v6);
  if (key === OUTSIDE_KEY) return { kind: 'ip', ip: pick(c.outside.ips) };
  if (key.startsWith('node:')) return { kind: 'ip', ip: pick(c.node(key.slice(5)).addresses) };
  const p = c.pod(key);
  const pod = state.pods.find((x) => `${x.namespace}/${x.name}` === key);
  return pod === undefined ? { kind: 'ip', ip: pick(p.ips) } : { kind: 'pod', pod };
}

/** The port policy judges: the target port after the Service's DNAT. */
export function targetPort(c: Cluster, p: Probe): number {
  if ((p.via ?? 'service') !== 'service' || !p.to.includes('/')) return p.port;
  return c.pod(p.to).services.find((s) => s.protocol === p.protocol && s.port === p.port)?.targetPort ?? p.port;
}

/** The oracle's verdict for a probe on a cluster. */
export function oracle(c: Cluster, state: ClusterState, p: Probe): ReturnType<typeof verdict> {
  return verdict(
    state,
    endpointOf(c, state, p.from, p.family),
    endpointOf(c, state, p.to, p.family),
    p.protocol,
    targetPort(c, p),
    { family: p.family },
  );
}

export function toProbe(r: RegressionProbe): Probe {
  return { from: r.from, to: r.to, protocol: r.protocol, port: r.port, family: r.family, via: r.via };
}
