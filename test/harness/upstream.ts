// The upstream e2e model (namespaces x/y/z, pods a/b/c) on a simulated
// cluster, and a runner for test/cases/upstream-cases.ts: after every step the
// changed objects are rebuilt into a state, each node's ruleset is re-rendered
// and applied, and every probe's observed truth table must equal the expected one.
import type { Family } from '../../src/model/types.ts';
import { applyChanges } from '../cases/upstream-cases.ts';
import type { CaseContext, UpstreamCase } from '../cases/upstream-cases.ts';
import { UPSTREAM_PODS, upstreamModel } from '../cases/upstream-model.ts';
import type { RawObject } from '../cases/raw.ts';
import type { Cluster, ClusterSpec, NetworkStyle } from './cluster.ts';
import { applyState, stateOf } from './enforce.ts';
import { checkTable } from './check.ts';
import type { CheckResult, RunOptions } from './check.ts';

export { failures } from './check.ts';
export type { CheckResult, RunOptions } from './check.ts';

export const NODE_NAMES = ['node-1', 'node-2'] as const;

/**
 * Pods alternate between the two nodes (x/a node-1, x/b node-2, x/c node-1, ...),
 * so every namespace has same-node and cross-node pairs.
 */
export function upstreamPlacement(key: string): string {
  return NODE_NAMES[UPSTREAM_PODS.indexOf(key) % 2]!;
}

export function upstreamClusterSpec(style: NetworkStyle, extra: Partial<ClusterSpec> = {}): ClusterSpec {
  return {
    style,
    nodes: NODE_NAMES.map((name) => ({ name })),
    pods: UPSTREAM_PODS.map((key) => ({ key, node: upstreamPlacement(key) })),
    ...extra,
  };
}

/** The case data's view of the cluster's addresses. */
export function clusterCaseContext(c: Cluster, family: Family): CaseContext {
  return {
    family,
    podIP: (ns, pod, f) => {
      const p = c.pod(`${ns}/${pod}`);
      return f === 4 ? p.ips.v4 : p.ips.v6;
    },
  };
}

/** Namespaces, pods (at the cluster's addresses and nodes) and Node objects. */
export function upstreamObjects(c: Cluster): RawObject[] {
  const m = upstreamModel({
    podIPs: (ns, pod) => c.pod(`${ns}/${pod}`).ips,
    nodeName: (ns, pod) => c.pod(`${ns}/${pod}`).node,
    hostIP: (ns, pod) => c.node(c.pod(`${ns}/${pod}`).node).addresses.v4,
  });
  return [...m.namespaces, ...m.pods, ...c.nodeObjects()];
}

/** Runs a case from the upstream model (no policies) through all its steps. */
export async function runUpstreamCase(c: Cluster, kase: UpstreamCase, opts: RunOptions = {}): Promise<CheckResult[]> {
  const family = opts.family ?? 4;
  const via = opts.via ?? 'service';
  let objects = upstreamObjects(c);
  const results: CheckResult[] = [];
  for (const [i, step] of kase.steps.entries()) {
    objects = applyChanges(objects, step.changes);
    await applyState(c, stateOf(objects), opts);
    for (const p of step.probes) {
      const title = `${kase.id} ${kase.name} [${c.style}, IPv${family}, via ${via}, deny ${opts.denyAction ?? 'reject'}] step ${i + 1}/${kase.steps.length} "${step.description}": ${p.protocol}/${p.port}`;
      results.push(await checkTable(c, title, p.protocol, p.port, p.expected, opts));
    }
  }
  return results;
}
