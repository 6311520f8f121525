// The demo's ClusterNetworkPolicy scene (scripts/demo-scenes/cluster-network-policy.yaml):
// an Admin Deny of a namespace that the NetworkPolicy would allow, an Admin
// Pass handed to the NetworkPolicy, and a Baseline default deny where no
// NetworkPolicy decides. Its own small cluster of network namespaces: the
// rulesets applied as the agent does, a truth table per port (expected =
// verdict(), observed = real packets) and explain for three connections.
import { fileURLToPath } from 'node:url';
import { loadManifests } from '../src/model/load.ts';
import { buildState } from '../src/model/normalize.ts';
import { formatValidationError } from '../src/model/types.ts';
import type { Family, Protocol } from '../src/model/types.ts';
import { explainText, parseEndpoint } from '../src/policy/explain.ts';
import { verdict } from '../src/policy/verdict.ts';
import { formatReport, observeTable } from '../test/support/truth-table.ts';
import { Cluster } from '../test/harness/cluster.ts';
import type { NetworkStyle } from '../test/harness/cluster.ts';
import { applyState } from '../test/harness/enforce.ts';
import { clusterSpecFromState } from '../test/harness/from-state.ts';
import { describeOutcome, probeMatrix } from '../test/harness/probe.ts';
import { oracle } from '../test/harness/regression.ts';

const SCENE = fileURLToPath(new URL('demo-scenes/cluster-network-policy.yaml', import.meta.url));
const PORTS: readonly { protocol: Protocol; port: number }[] = [
  { protocol: 'TCP', port: 5432 },
  { protocol: 'TCP', port: 8080 },
];
/** from, to, port: the three tiers at work. */
const QUESTIONS: readonly [string, string, number][] = [
  ['lab/scanner', 'shop/db', 5432],
  ['monitoring/prom', 'shop/db', 5432],
  ['monitoring/prom', 'shop/web', 8080],
];

/** Runs the scene; the number of probes that differ from the evaluator. */
export async function cnpScene(o: { style: NetworkStyle; denyAction: 'drop' | 'reject'; family: Family }): Promise<number> {
  console.log('\n#### ClusterNetworkPolicy scene (scripts/demo-scenes/cluster-network-policy.yaml)');
  console.log('#### Admin tier -> NetworkPolicy -> Baseline tier: isolate-lab denies lab and passes monitoring to');
  console.log("#### shop's NetworkPolicy (db takes 5432 from every namespace); shop-default closes shop otherwise.");
  const loaded = await loadManifests([SCENE]);
  for (const e of loaded.errors) console.error(`${e.source}: ${e.message}`);
  const { state, errors } = buildState(loaded.objects);
  for (const e of errors) console.error(`warning: ${formatValidationError(e)}`);
  const c = await Cluster.create(clusterSpecFromState(state, o.style, { extraPorts: PORTS.map((p) => p.port) }));
  let wrong = 0;
  try {
    await applyState(c, state, { denyAction: o.denyAction });
    const keys = c.pods.map((p) => p.key);
    for (const { protocol, port } of PORTS) {
      const { observed, outcomes } = await probeMatrix(c, { protocol, port, family: o.family, via: 'pod' });
      const byPair = new Map(outcomes.map((r) => [`${r.probe.from}\0${r.probe.to}`, r]));
      const expected = observeTable(keys, (from, to) =>
        from === to ? undefined : oracle(c, state, byPair.get(`${from}\0${to}`)!.probe).allowed,
      );
      console.log(
        formatReport(expected, observed, {
          layout: 'aligned',
          title: `\n==== ${protocol}/${port} IPv${o.family} to the pod (${o.style}, deny ${o.denyAction}); expected = verdict(), observed = packets ====`,
        }),
      );
      const bad = outcomes.filter((r) => r.connected !== expected.values[r.probe.from]?.[r.probe.to]);
      wrong += bad.length;
      for (const r of bad) console.log(`  MISMATCH ${describeOutcome(r)}`);
    }
    for (const [fromText, toText, port] of QUESTIONS) {
      const from = parseEndpoint(state, fromText);
      const to = parseEndpoint(state, toText);
      if (!from.ok || !to.ok) throw new Error(`scene endpoints ${fromText} ${toText} are not in the scene`);
      console.log(`\n$ nft-netpol-agent explain --from ${fromText} --to ${toText} --port ${port}/tcp`);
      console.log(explainText(verdict(state, from.value, to.value, 'TCP', port, { family: o.family }), from.value, to.value));
    }
  } finally {
    await c.destroy();
  }
  console.log(wrong === 0 ? '\nevery probe of the scene matched the evaluator' : `\n${wrong} probe(s) of the scene differ`);
  return wrong;
}
