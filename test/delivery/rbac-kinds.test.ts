// The ClusterRole against the API kind descriptors (src/kinds/api-kinds.ts):
// every kind the agent watches is granted exactly the verbs its descriptor
// needs on its resource, and no object kind is read that no descriptor names.
// The YAML stays hand-written (it is what an operator reviews); this test keeps
// it and the descriptors equal.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { API_KINDS } from '../../src/kinds/api-kinds.ts';
import { DAEMONSET_DIR, arr, at, readYaml, str } from './support.ts';

/** group/resource -> verbs of daemonset/clusterrole.yaml. */
function grants(): Map<string, Set<string>> {
  const role = readYaml(join(DAEMONSET_DIR, 'clusterrole.yaml'));
  const out = new Map<string, Set<string>>();
  for (const r of arr(at(role, 'rules'), 'rules'))
    for (const g of arr(at(r, 'apiGroups'), 'apiGroups'))
      for (const res of arr(at(r, 'resources'), 'resources')) {
        const key = `${str(g, 'group')}/${str(res, 'resource')}`;
        const verbs = out.get(key) ?? new Set<string>();
        for (const v of arr(at(r, 'verbs'), 'verbs')) verbs.add(str(v, 'verb'));
        out.set(key, verbs);
      }
  return out;
}

// What the agent writes, not reads: no object kind of the policy pipeline.
const WRITES = new Set([
  '/events',
  'events.k8s.io/events',
  'nft-netpol.io/nodepolicystatuses',
  'nft-netpol.io/nodepolicystatuses/status',
]);

describe('ClusterRole and the API kind descriptors', () => {
  test('every watched kind is granted exactly its verbs on its resource', () => {
    const g = grants();
    for (const d of API_KINDS) {
      const key = `${d.group}/${d.plural}`;
      if (d.watched === 'never') {
        assert.deepEqual(d.verbs, [], `${d.kind} is not watched: it needs no verbs`);
        assert.equal(g.has(key), false, `${key} is granted but ${d.kind} is never read from the API`);
        continue;
      }
      assert.deepEqual([...(g.get(key) ?? [])].sort(), [...d.verbs].sort(), `verbs on ${key} (${d.kind})`);
    }
  });

  test('nothing is read that no descriptor needs', () => {
    const read = new Set(API_KINDS.filter((d) => d.verbs.length > 0).map((d) => `${d.group}/${d.plural}`));
    const extra = [...grants().keys()].filter((k) => !WRITES.has(k) && !read.has(k));
    assert.deepEqual(extra, []);
  });
});
