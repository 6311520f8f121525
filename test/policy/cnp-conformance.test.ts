// The ClusterNetworkPolicy conformance suite (test/cases/cnp-conformance.ts):
// every upstream test, step by step, through the normalizer and the reference
// evaluator, over IPv4 and IPv6. The policies are raw objects; buildState
// reads them into ClusterState.clusterPolicies and verdict() decides each
// probe through the tiers (Admin, NetworkPolicy, Baseline).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { buildState } from '../../src/model/normalize.ts';
import { formatValidationError } from '../../src/model/types.ts';
import type { Family } from '../../src/model/types.ts';
import { verdict } from '../../src/policy/verdict.ts';
import { applyCnpChanges, cnpConformanceCases, defaultCnpContext, describeCnpProbe } from '../cases/cnp-conformance.ts';
import type { RawObject } from '../cases/raw.ts';
import { CNP_PODS, cnpModel, isHostNetworkPod } from '../cases/cnp-conformance-model.ts';
import { podOf } from '../support/state-builder.ts';

function countOf(objects: readonly RawObject[], kind: string): number {
  return objects.filter((o) => o.kind === kind).length;
}

test('the suite has every upstream ClusterNetworkPolicy test and subtest', () => {
  const cases = cnpConformanceCases();
  const upstream = cases.filter((c) => c.source === 'upstream');
  assert.equal(new Set(cases.map((c) => c.id)).size, cases.length, 'ids are unique');
  // 12 per-protocol, 2 combined, 2 inline CIDR, integration, priority, 4 named port, 2 node peers.
  assert.equal(upstream.length, 24);
  const subtests = new Set(upstream.flatMap((c) => c.steps.map((s) => `${c.id}: ${s.subtest.replace(/ \[part .*\]$/, '')}`)));
  // Admin: 6x6 per protocol, 6 combined, 2 inline CIDR, 6 integration, 3 priority, 2 named ports, 3 node peers;
  // Baseline: 6x4, 4, 2, 2 named ports, 2 node peers.
  assert.equal(subtests.size, 36 + 6 + 2 + 6 + 3 + 2 + 3 + 24 + 4 + 2 + 2 + 2);
  for (const c of cases) {
    assert.ok(c.manifests.length > 0, `${c.id} creates no objects`);
    for (const s of c.steps) assert.ok(s.probes.length > 0, `${c.id} "${s.subtest}" has no probe`);
  }
  const experimental = upstream.filter((c) => c.feature !== 'standard').map((c) => c.id);
  assert.deepEqual(experimental.sort(), [
    'CNPAdminTierEgressNamedPort',
    'CNPAdminTierEgressNodePeers',
    'CNPAdminTierIngressNamedPort',
    'CNPBaselineTierEgressNamedPort',
    'CNPBaselineTierEgressNodePeers',
    'CNPBaselineTierIngressNamedPort',
  ]);
});

test('the model: five houses of two pods, the centaurs on the host network of different nodes', () => {
  const objects = cnpModel();
  assert.deepEqual([countOf(objects, 'Namespace'), countOf(objects, 'Pod'), countOf(objects, 'Node')], [5, 10, 2]);
  const { state, errors } = buildState(objects);
  assert.deepEqual(errors.map(formatValidationError), []);
  assert.deepEqual(state.pods.map((p) => `${p.namespace}/${p.name}`).sort(), [...CNP_PODS].sort());
  const centaurs = state.pods.filter((p) => isHostNetworkPod(`${p.namespace}/${p.name}`));
  assert.deepEqual(
    centaurs.map((p) => p.hostNetwork),
    [true, true],
  );
  assert.notEqual(centaurs[0]?.nodeName, centaurs[1]?.nodeName);
  const hp0 = podOf(state, 'network-policy-conformance-gryffindor/harry-potter-0');
  assert.deepEqual(hp0.ports.map((p) => `${p.name}=${p.protocol}/${p.port}`).sort(), ['dns=UDP/53', 'web=TCP/80']);
});

for (const family of [4, 6] as Family[]) {
  describe(`ClusterNetworkPolicy conformance through the evaluator (IPv${family})`, () => {
    for (const c of cnpConformanceCases(defaultCnpContext(family))) {
      test(`${c.id}${c.source === 'ours' ? ' (ours)' : ''}`, () => {
        let objects: RawObject[] = [...cnpModel(), ...c.manifests];
        c.steps.forEach((step, si) => {
          objects = applyCnpChanges(objects, step.changes);
          const { state, errors } = buildState(objects);
          assert.deepEqual(errors.map(formatValidationError), [], `step ${si + 1}: the case's objects must be valid`);
          const want = countOf(objects, 'ClusterNetworkPolicy');
          assert.equal(
            state.clusterPolicies?.length ?? 0,
            want,
            `step ${si + 1}: the normalizer must read the ${want} ClusterNetworkPolicies into state.clusterPolicies`,
          );
          const wrong = step.probes.flatMap((p) => {
            const from = podOf(state, p.from);
            const to = podOf(state, p.to);
            const v = verdict(state, { kind: 'pod', pod: from }, { kind: 'pod', pod: to }, p.protocol, p.port, { family });
            return v.allowed === p.connect
              ? []
              : [
                  `  ${describeCnpProbe(p)} but the evaluator says ${v.allowed ? 'allowed' : 'denied'}: ${v.egress.reason} / ${v.ingress.reason}`,
                ];
          });
          if (wrong.length > 0)
            assert.fail(
              `${c.id} step ${si + 1} "${step.subtest}" (IPv${family}): expectations upstream states do not hold\n${wrong.join('\n')}`,
            );
        });
      });
    }
  });
}
