// The status's ruleset hash, computed in slices between other work: the
// same sha256 as the script renderRuleset writes (what `render | sha256sum`
// gives), and given up when the applied ruleset changes meanwhile.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { hashInSlices } from '../../src/agent/applied-status.ts';
import { compileNode } from '../../src/compile/compile.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { withClusterPolicies } from '../../scripts/bench-render.ts';
import { generateCluster } from '../../scripts/gen-cluster.ts';

const g = generateCluster({ pods: 400, policies: 40, namespaces: 10, podsPerNode: 50, seed: 11 });
const st = withClusterPolicies(g.state, 'narrow');
const node = st.pods.at(0)?.nodeName ?? 'node-00000';

test('hashInSlices: the sha256 of the rendered script, however small the slices', async () => {
  const c = compileNode(st, node);
  const want = `sha256:${createHash('sha256').update(renderRuleset(c)).digest('hex')}`;
  let pauses = 0;
  const sliced = await hashInSlices(c, 0, () => {
    pauses++;
    return true;
  });
  assert.equal(sliced, want);
  assert.ok(pauses > 20, `it paused between pieces (${pauses})`);
  assert.equal(await hashInSlices(c, 1e9, () => true), want);
});

test('hashInSlices: undefined once no longer wanted (a newer ruleset was applied)', async () => {
  const c = compileNode(st, node);
  let pauses = 0;
  assert.equal(await hashInSlices(c, 0, () => ++pauses < 3), undefined);
  assert.equal(pauses, 3);
});

test('hashInSlices: waits while an apply runs or waits, then hashes the same; a steady stream only delays it so long', async () => {
  const c = compileNode(st, node);
  const want = `sha256:${createHash('sha256').update(renderRuleset(c)).digest('hex')}`;
  // Busy for the first 5 looks: no piece is hashed before the 5th look says idle.
  let looks = 0;
  let pausesWhileBusy = 0;
  const hashed = await hashInSlices(
    c,
    0,
    () => {
      if (looks <= 5) pausesWhileBusy++;
      return true;
    },
    { busy: () => ++looks <= 5 },
  );
  assert.equal(hashed, want);
  assert.equal(pausesWhileBusy, 0, 'nothing went on while busy');
  assert.ok(looks > 20, `it looked before every slice (${looks})`);
  // Always busy: given up waiting after maxWaitMs, the hash is still made.
  assert.equal(await hashInSlices(c, 0, () => true, { busy: () => true, maxWaitMs: 30 }), want);
});
