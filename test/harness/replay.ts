// Replaying a regression (test/harness/regression.ts) on a fresh simulated
// cluster: the state as the fuzzer judged it (tenancy on), its pods at their
// addresses, the addresses no pod object has as unlisted endpoints; the
// oracle must still give the recorded answers, and the packets must agree.
import type { ClusterState } from '../../src/model/types.ts';
import { checkProbes } from './check.ts';
import { Cluster } from './cluster.ts';
import type { NetworkStyle } from './cluster.ts';
import { applyState } from './enforce.ts';
import type { EnforceOptions } from './enforce.ts';
import { clusterSpecFromState } from './from-state.ts';
import { fuzzState } from './fuzz.ts';
import { oracle, toProbe } from './regression.ts';
import type { Regression } from './regression.ts';

export interface ReplayResult {
  readonly state: ClusterState;
  /** Probes whose oracle answer is no longer the recorded one. */
  readonly oracleChanged: readonly string[];
  /** Probes whose packets disagree with the recorded answer. */
  readonly wrong: readonly string[];
}

export async function replayRegression(
  regression: Regression,
  style: NetworkStyle,
  mutate?: EnforceOptions['mutate'],
): Promise<ReplayResult> {
  // As the fuzzer judged it: tenancy on (it changes nothing for files without tenancy objects).
  const state = fuzzState(regression.objects);
  const ports = [...new Set(regression.probes.map((p) => p.port))];
  const extraPods = regression.unlistedPods.map((u) => ({
    key: u.key,
    node: u.node,
    ips: { v4: u.ipv4, v6: u.ipv6 },
    tcp: ports,
    udp: ports,
  }));
  const c = await Cluster.create(clusterSpecFromState(state, style, { extraPods, extraPorts: ports }));
  try {
    await applyState(c, state, { denyAction: regression.denyAction, ...(mutate === undefined ? {} : { mutate }) });
    const probes = regression.probes.map(toProbe);
    const oracleChanged = regression.probes.flatMap((r, i) => {
      const v = oracle(c, state, probes[i]!);
      return (v.allowed ? 'allowed' : 'blocked') === r.expect
        ? []
        : [
            `probe ${i} (${r.from} -> ${r.to}): the oracle now says ${v.allowed ? 'allowed' : 'blocked'}: ${v.egress.reason} ${v.ingress.reason}`,
          ];
    });
    const wrong = await checkProbes(
      c,
      probes.map((probe, i) => ({ probe, allowed: regression.probes[i]!.expect === 'allowed' })),
    );
    return { state, oracleChanged, wrong };
  } finally {
    await c.destroy();
  }
}
