// The benchmark cluster generator: seeded, node 0 full, and its raw objects
// normalize back to exactly its ClusterState (so benchmarks may start from either).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clusterObjects, generateCluster } from '../../scripts/gen-cluster.ts';
import { buildState } from '../../src/model/normalize.ts';
import { isActivePod } from '../../src/model/types.ts';
import { compileNode } from '../../src/compile/compile.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { renderLog } from '../nft/nft-support.ts';

const log = renderLog();
const opts = { pods: 600, policies: 80, namespaces: 30, podsPerNode: 50, seed: 42, dualStack: true };

test('same seed, same cluster; another seed, another cluster', () => {
  assert.deepEqual(generateCluster(opts).state, generateCluster(opts).state);
  assert.notDeepEqual(generateCluster({ ...opts, seed: 43 }).state, generateCluster(opts).state);
});

test('shape: counts, a full first node, unique pod IPs, a mix of policy kinds', () => {
  const c = generateCluster(opts);
  assert.equal(c.state.pods.length, 600);
  assert.equal(c.state.policies.length, 80);
  assert.equal(c.state.namespaces.length, 30);
  assert.equal(c.nodes.length, 12);
  assert.equal(c.state.pods.filter((p) => p.nodeName === c.nodes[0]).length, 50);
  const ips = [...c.state.pods].flatMap((p) => p.ips);
  assert.equal(new Set(ips).size, ips.length);
  const kinds = new Set(c.state.policies.map((p) => p.name.replace(/-\d+$/, '')));
  assert.ok(kinds.size >= 7, [...kinds].join(' '));
  assert.ok(c.state.pods.some((p) => !isActivePod(p)));
});

test('raw objects normalize back to the same state, and it compiles to an accepted ruleset', () => {
  const c = generateCluster(opts);
  const { state, errors } = buildState(clusterObjects(c));
  assert.deepEqual(errors, []);
  assert.deepEqual(state, c.state);
  const compiled = compileNode(c.state, c.nodes[0] ?? '');
  assert.ok(compiled.stats.policies > 5 && compiled.stats.localPods > 40, JSON.stringify(compiled.stats));
  log.add('generated', renderRuleset(compiled));
});

log.registerCheck();
