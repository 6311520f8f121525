// The 48 upstream e2e cases, every step and every probe, through the
// reference evaluator, on both address families of a dual-stack model.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { buildState } from '../../src/model/normalize.ts';
import type { Family } from '../../src/model/types.ts';
import { verdict } from '../../src/policy/verdict.ts';
import { applyChanges, defaultCaseContext, upstreamCases } from '../cases/upstream-cases.ts';
import { upstreamModel, UPSTREAM_PODS } from '../cases/upstream-model.ts';
import type { RawObject } from '../cases/raw.ts';
import { diffTables, formatReport, observeTable } from '../support/truth-table.ts';
import { podOf } from '../support/state-builder.ts';

test('the suite has all 42 TCP, 3 UDP and 3 SCTP cases with unique ids', () => {
  const cases = upstreamCases();
  const count = (prefix: string) => cases.filter((c) => c.id.startsWith(prefix)).length;
  assert.deepEqual([count('tcp-'), count('udp-'), count('sctp-')], [42, 3, 3]);
  assert.equal(new Set(cases.map((c) => c.id)).size, 48);
  for (const c of cases) {
    assert.ok(c.steps.length > 0 && c.steps.every((s) => s.probes.length > 0), `${c.id} has a step without probes`);
    for (const s of c.steps)
      for (const p of s.probes) assert.ok(c.protocols.includes(p.protocol), `${c.id} probes ${p.protocol} it does not serve`);
  }
});

for (const family of [4, 6] as Family[]) {
  describe(`upstream e2e cases through the evaluator (IPv${family})`, () => {
    const base: RawObject[] = [...upstreamModel().namespaces, ...upstreamModel().pods];
    for (const c of upstreamCases(defaultCaseContext(family))) {
      test(`${c.id} ${c.name}`, () => {
        let objects = base;
        c.steps.forEach((step, si) => {
          objects = applyChanges(objects, step.changes);
          const { state, errors } = buildState(objects);
          assert.deepEqual(errors, [], `step ${si + 1}: the case's objects must be valid`);
          for (const p of step.probes) {
            const observed = observeTable(
              UPSTREAM_PODS,
              (f, t) =>
                verdict(state, { kind: 'pod', pod: podOf(state, f) }, { kind: 'pod', pod: podOf(state, t) }, p.protocol, p.port, {
                  family,
                }).allowed,
            );
            const wrong = diffTables(p.expected, observed);
            if (wrong.length > 0) {
              assert.fail(
                formatReport(p.expected, observed, {
                  title: `${c.id} step ${si + 1} (${step.description}) ${p.port}/${p.protocol} IPv${family}`,
                }),
              );
            }
          }
        });
      });
    }
  });
}
