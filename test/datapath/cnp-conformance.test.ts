// The ClusterNetworkPolicy conformance suite (test/cases/cnp-conformance.ts)
// with real packets: the conformance model on the simulated cluster (the eight
// pod-network pods alternate between two nodes; the hostNetwork centaurs are
// the nodes themselves, serving the HostNetworkPorts), in both pod-network
// styles, over IPv4 and IPv6. After every step each node's ruleset is
// re-rendered from the updated state and applied, and every probe upstream
// makes (to the server pod's own address, as PokeServer does) must connect or
// not as upstream expects.

import type { TierLayout } from '../../src/ruleset/options.ts';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Family } from '../../src/model/types.ts';
import { applyCnpChanges, cnpConformanceCases, describeCnpProbe } from '../cases/cnp-conformance.ts';
import type { CnpCase, CnpContext, CnpProbe } from '../cases/cnp-conformance.ts';
import {
  CNP_PODS,
  DEFAULT_HOST_NETWORK_PORTS,
  cnpModel,
  defaultPlacement,
  hostNetworkServed,
  isHostNetworkPod,
  podAddress,
} from '../cases/cnp-conformance-model.ts';
import type { CnpModelOptions } from '../cases/cnp-conformance-model.ts';
import { checkProbes } from '../harness/check.ts';
import type { Expectation } from '../harness/check.ts';
import { Cluster, DEFAULT_PORTS, NETWORK_STYLES } from '../harness/cluster.ts';
import type { ClusterSpec, NetworkStyle } from '../harness/cluster.ts';
import { applyState, stateOf } from '../harness/enforce.ts';
import { nodeKey } from '../harness/probe.ts';
import { datapathSkip } from '../harness/requirements.ts';

const HOST_NETWORK_PORTS = DEFAULT_HOST_NETWORK_PORTS;

const skip = datapathSkip();

const CASES = cnpConformanceCases();

function clusterSpec(style: NetworkStyle): ClusterSpec {
  return {
    style,
    nodes: [{ name: 'node-1' }, { name: 'node-2' }],
    // The pod-network pods; the centaurs are their nodes (hostNetwork).
    pods: CNP_PODS.filter((k) => !isHostNetworkPod(k)).map((key) => ({
      key,
      node: defaultPlacement(key),
      tcp: [80, 8080],
      udp: [5353, 53],
      sctp: [9003, 9005],
    })),
  };
}

function modelOptions(c: Cluster): CnpModelOptions {
  return {
    nodes: c.nodes.map((n) => ({ name: n.name, addresses: n.addresses })),
    placement: defaultPlacement,
    podIPs: (key) => c.pod(key).ips,
    hostNetworkPorts: HOST_NETWORK_PORTS,
  };
}

function caseContext(o: CnpModelOptions, family: Family): CnpContext {
  return { family, podIP: (key, f) => podAddress(o, key, f), hostNetworkPorts: HOST_NETWORK_PORTS };
}

/** The harness counts SCTP only at pods and the outside host: SCTP to a node is left to the evaluator's run. */
function probeable(p: CnpProbe): boolean {
  return !(isHostNetworkPod(p.to) && p.protocol === 'SCTP');
}

async function runCase(
  c: Cluster,
  o: CnpModelOptions,
  kase: CnpCase,
  family: Family,
  denyAction: 'drop' | 'reject',
  tierLayout: TierLayout,
): Promise<{ wrong: string[]; probed: number }> {
  let objects = [...cnpModel(o), ...kase.manifests];
  const wrong: string[] = [];
  let probed = 0;
  for (const [i, step] of kase.steps.entries()) {
    objects = applyCnpChanges(objects, step.changes);
    await applyState(c, stateOf(objects), { denyAction, tierLayout });
    const expectations: Expectation[] = step.probes.filter(probeable).map((p) => ({
      probe: {
        from: p.from,
        to: isHostNetworkPod(p.to) ? nodeKey(o.placement(p.to)) : p.to,
        protocol: p.protocol,
        port: p.port,
        family,
        via: 'pod',
      },
      allowed: p.connect,
      why: `${kase.id} "${step.subtest}": ${describeCnpProbe(p)}`,
    }));
    probed += expectations.length;
    const lines = await checkProbes(c, expectations);
    wrong.push(...lines.map((l) => `step ${i + 1}/${kase.steps.length}: ${l}`));
  }
  return { wrong, probed };
}

// Each family meets each layout of the tiers (compile/tiers.ts) in one of the two styles.
const VARIANTS: readonly { family: Family; denyAction: 'drop' | 'reject'; layouts: readonly [TierLayout, TierLayout] }[] = [
  { family: 4, denyAction: 'drop', layouts: ['per-class', 'shared'] },
  { family: 6, denyAction: 'reject', layouts: ['shared', 'per-class'] },
];

test('the placement: every house has a same-node and a cross-node pair, the centaurs are different nodes', () => {
  for (let i = 0; i < CNP_PODS.length; i += 2) {
    assert.notEqual(defaultPlacement(CNP_PODS[i]!), defaultPlacement(CNP_PODS[i + 1]!), `${CNP_PODS[i]}`);
  }
  // Only SCTP to the centaurs is left to the evaluator.
  const all = CASES.flatMap((k) => k.steps.flatMap((s) => s.probes));
  assert.deepEqual(all.filter((p) => !probeable(p)).map(describeCnpProbe), [
    'network-policy-conformance-gryffindor/harry-potter-1 -> network-policy-conformance-forbidden-forrest/centaur-1 SCTP/34351: blocked',
    'network-policy-conformance-gryffindor/harry-potter-1 -> network-policy-conformance-forbidden-forrest/centaur-1 SCTP/34351: blocked',
  ]);
});

for (const [si, style] of NETWORK_STYLES.entries()) {
  describe(`ClusterNetworkPolicy conformance, ${style} pod network`, { skip }, () => {
    let c: Cluster;
    let o: CnpModelOptions;
    before(async () => {
      c = await Cluster.create(clusterSpec(style));
      o = modelOptions(c);
      // The centaurs' servers: the nodes serve the HostNetworkPorts besides their usual ports.
      const served = hostNetworkServed(HOST_NETWORK_PORTS);
      const tcp = [...DEFAULT_PORTS, ...served.filter((s) => s.protocol === 'TCP').map((s) => s.port)];
      const udp = [...DEFAULT_PORTS, ...served.filter((s) => s.protocol === 'UDP').map((s) => s.port)];
      await Promise.all(c.nodes.map((n) => n.agent?.serve(tcp, udp, [n.addresses.v4, n.addresses.v6])));
    });
    after(async () => {
      await c?.destroy();
    });

    for (const v of VARIANTS) {
      for (const k of CASES) {
        const layout = v.layouts[si % 2]!;
        test(`[IPv${v.family}, ${v.denyAction}, ${layout}] ${k.id}${k.source === 'ours' ? ' (ours)' : ''}`, async () => {
          const kase = cnpConformanceCases(caseContext(o, v.family)).find((x) => x.id === k.id)!;
          const { wrong, probed } = await runCase(c, o, kase, v.family, v.denyAction, layout);
          assert.ok(probed > 0, `${k.id}: no probe ran`);
          if (wrong.length > 0) assert.fail(`observed connectivity differs from upstream's expectation\n${wrong.join('\n')}`);
        });
      }
    }
  });
}
