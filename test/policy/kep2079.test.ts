// KEP-2079 port ranges: the user stories and range edges through the evaluator.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildState } from '../../src/model/normalize.ts';
import type { Family } from '../../src/model/types.ts';
import { verdict } from '../../src/policy/verdict.ts';
import { kep2079Cases, servedPorts } from '../cases/kep2079.ts';
import { defaultCaseContext } from '../cases/upstream-cases.ts';
import { upstreamModel } from '../cases/upstream-model.ts';

for (const family of [4, 6] as Family[]) {
  for (const c of kep2079Cases(defaultCaseContext(family))) {
    test(`${c.id} (IPv${family}): ${c.name}`, () => {
      const m = upstreamModel();
      const { state, errors } = buildState([...m.namespaces, ...m.pods, ...c.policies]);
      assert.deepEqual(errors, []);
      const pod = (key: string) => {
        const p = state.pods.find((q) => `${q.namespace}/${q.name}` === key);
        assert.ok(p, key);
        return { kind: 'pod' as const, pod: p };
      };
      const wrong = c.probes.filter(
        (p) => verdict(state, pod(p.from), pod(p.to), p.protocol, p.port, { family }).allowed !== p.allowed,
      );
      assert.deepEqual(wrong, [], 'probes whose verdict differs from the expectation');
    });
  }
}

test('every KEP case probes both an allowed and a denied connection', () => {
  for (const c of kep2079Cases()) {
    assert.ok(c.probes.some((p) => p.allowed) && c.probes.some((p) => !p.allowed), c.id);
  }
});

test('servedPorts lists each destination port once', () => {
  const story3 = kep2079Cases().find((c) => c.id === 'kep2079-story3-passive-ftp');
  assert.ok(story3);
  const served = servedPorts(story3);
  assert.deepEqual([...served.keys()].sort(), ['x/a', 'x/b']);
  assert.deepEqual(served.get('x/b'), [
    { port: 21, protocol: 'TCP' },
    { port: 50000, protocol: 'TCP' },
  ]);
  assert.equal(served.get('x/a')?.filter((s) => s.port === 50000).length, 2, 'TCP and UDP 50000 are distinct');
});
