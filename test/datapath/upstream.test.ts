// All 48 upstream NetworkPolicy e2e cases (42 TCP, 3 UDP, 3 SCTP) with real
// packets, in both pod-network styles: after every step each node's ruleset is
// re-rendered from the updated state and applied in the node's namespace, and
// the observed truth table must equal upstream's expected one. Probes go
// through the Service ClusterIP like upstream, and through pod IPs; over IPv4
// and IPv6 (the ipBlock cases 34-36 are then written with IPv6 CIDRs).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Family } from '../../src/model/types.ts';
import { upstreamCases } from '../cases/upstream-cases.ts';
import { Cluster, NETWORK_STYLES } from '../harness/cluster.ts';
import { datapathSkip } from '../harness/requirements.ts';
import { clusterCaseContext, failures, runUpstreamCase, upstreamClusterSpec, upstreamPlacement } from '../harness/upstream.ts';

const skip = datapathSkip();

interface Variant {
  readonly family: Family;
  readonly via: 'service' | 'pod';
  readonly denyAction: 'drop' | 'reject';
}

// The first is upstream's own setup (ClusterIP, IPv4) with the agent's default
// deny action; drop makes every blocked probe wait for its timeout, so the
// others use reject and stay fast.
const VARIANTS: readonly Variant[] = [
  { family: 4, via: 'service', denyAction: 'drop' },
  { family: 6, via: 'service', denyAction: 'reject' },
  { family: 4, via: 'pod', denyAction: 'reject' },
  { family: 6, via: 'pod', denyAction: 'drop' },
];

// Names and ids do not depend on addresses: register the tests from the default context.
const CASES = upstreamCases();

test('the upstream case list is complete: 42 TCP, 3 UDP, 3 SCTP', () => {
  const count = (p: string) => CASES.filter((k) => k.id.startsWith(p)).length;
  assert.deepEqual([count('tcp-'), count('udp-'), count('sctp-')], [42, 3, 3]);
});

test('the placement gives every namespace same-node and cross-node pairs', () => {
  for (const ns of ['x', 'y', 'z']) {
    const nodes = ['a', 'b', 'c'].map((p) => upstreamPlacement(`${ns}/${p}`));
    assert.equal(new Set(nodes).size, 2, `${ns}: ${nodes.join(', ')}`);
  }
});

for (const style of NETWORK_STYLES) {
  describe(`upstream e2e cases, ${style} pod network`, { skip }, () => {
    let c: Cluster;
    before(async () => {
      c = await Cluster.create(upstreamClusterSpec(style));
    });
    after(async () => {
      await c?.destroy();
    });

    for (const v of VARIANTS) {
      const label = `[IPv${v.family} via ${v.via === 'service' ? 'ClusterIP' : 'pod IP'}, ${v.denyAction}]`;
      for (const k of CASES) {
        test(`${label} ${k.id} ${k.name}`, async () => {
          const kase = upstreamCases(clusterCaseContext(c, v.family)).find((x) => x.id === k.id)!;
          const results = await runUpstreamCase(c, kase, v);
          assert.ok(results.length >= 1);
          const wrong = failures(results);
          if (wrong !== '') assert.fail(`observed connectivity differs from upstream's expectation\n\n${wrong}`);
        });
      }
    }
  });
}
