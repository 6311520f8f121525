// The status content as a pure function of the applied snapshot: relevant
// policies only, times that move only with what they describe, minimal patches.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildStatus, relevantPolicies, statusPatch, type StatusInput } from '../../src/status/build.ts';
import type { NetworkPolicy } from '../../src/model/types.ts';
import { pod, policy, sel, state } from '../support/state-builder.ts';

const NODE = 'node-1';
const STATS = { chains: 10, rules: 20, sets: 3, maps: 2, elements: 40, localPods: 2, policies: 1 };

function versioned(p: NetworkPolicy, uid: string, generation: number, resourceVersion: string): NetworkPolicy {
  return { ...p, version: { uid, generation, resourceVersion } };
}

const web = versioned(policy('shop', 'web', { podSelector: sel({ app: 'web' }) }), 'u1', 1, '10');
const elsewhere = versioned(policy('shop', 'db', { podSelector: sel({ app: 'db' }) }), 'u2', 4, '11');
const otherNs = versioned(policy('bank', 'all', {}), 'u3', 1, '12');
const cluster = state({
  pods: [
    pod('shop', 'web-0', { labels: { app: 'web' }, ips: ['10.0.0.1'] }),
    pod('shop', 'web-1', { labels: { app: 'web' }, ips: ['10.0.0.2'] }),
    pod('shop', 'web-2', { labels: { app: 'web' }, ips: ['10.0.0.3'], node: 'node-2' }),
    pod('shop', 'db-0', { labels: { app: 'db' }, ips: ['10.0.1.1'], node: 'node-2' }),
    pod('shop', 'done', { labels: { app: 'web' }, ips: ['10.0.0.9'], phase: 'Succeeded' }),
  ],
  policies: [web, elsewhere, otherNs],
});

function input(over: Partial<StatusInput> = {}): StatusInput {
  return {
    node: NODE,
    applied: { state: cluster, stats: STATS, hash: 'sha256:aa', atUnixMs: Date.UTC(2026, 0, 1, 10) },
    last: { result: 'Applied', atUnixMs: Date.UTC(2026, 0, 1, 10), error: undefined },
    inSync: true,
    agentVersion: '0.1.0',
    nftVersion: 'v1.0.6',
    ...over,
  };
}

test('only policies selecting an active local pod are reported, with version, pod count and time', () => {
  const s = buildStatus(input(), undefined);
  assert.deepEqual(s.policies, [
    {
      kind: 'NetworkPolicy',
      namespace: 'shop',
      name: 'web',
      uid: 'u1',
      generation: 1,
      resourceVersion: '10',
      appliedTime: '2026-01-01T10:00:00.000Z',
      localPods: 2,
    },
  ]);
  assert.deepEqual(s.counts, { localPods: 2, policies: 1, chains: 10, rules: 20, sets: 5, elements: 40 });
  assert.equal(s.inSync, true);
  assert.equal(s.rulesetHash, 'sha256:aa');
  assert.equal(s.lastApplyResult, 'Applied');
  assert.equal(s.lastError, undefined);
});

test('irrelevant policies add nothing: 1000 policies of other namespaces give the same content', () => {
  const many = Array.from({ length: 1000 }, (_, i) =>
    versioned(policy(`ns-${i}`, 'p', { podSelector: sel({ app: 'x' }) }), `x${i}`, 1, String(100 + i)),
  );
  const big = state({ pods: [...cluster.pods], policies: [...cluster.policies, ...many] });
  const a = buildStatus(input(), undefined);
  const b = buildStatus(
    input({ applied: { state: big, stats: STATS, hash: 'sha256:aa', atUnixMs: Date.UTC(2026, 0, 1, 10) } }),
    undefined,
  );
  assert.equal(JSON.stringify(b), JSON.stringify(a));
});

test('appliedTime and lastApplyTime move only when what they describe changes', () => {
  const first = buildStatus(input(), undefined);
  // A later apply of the same ruleset (refresh, unchanged render): same content, no write.
  const later = Date.UTC(2026, 0, 1, 11);
  const same = buildStatus(
    input({
      applied: { state: cluster, stats: STATS, hash: 'sha256:aa', atUnixMs: later },
      last: { result: 'Applied', atUnixMs: later, error: undefined },
    }),
    first,
  );
  assert.deepEqual(same, first);
  assert.equal(statusPatch(first, same), undefined);

  // The policy's generation moves: its appliedTime and the ruleset's time move, nothing else.
  const bumped = state({ pods: [...cluster.pods], policies: [versioned(web, 'u1', 2, '20'), elsewhere, otherNs] });
  const next = buildStatus(
    input({
      applied: { state: bumped, stats: STATS, hash: 'sha256:bb', atUnixMs: later },
      last: { result: 'Applied', atUnixMs: later, error: undefined },
    }),
    first,
  );
  assert.equal(next.policies[0]?.generation, 2);
  assert.equal(next.policies[0]?.appliedTime, '2026-01-01T11:00:00.000Z');
  assert.equal(next.lastApplyTime, '2026-01-01T11:00:00.000Z');
  assert.deepEqual(Object.keys(statusPatch(first, next)?.status ?? {}), ['rulesetHash', 'lastApplyTime', 'policies']);
});

test('a failed apply keeps the versions in force and says why; success clears the error', () => {
  const ok = buildStatus(input(), undefined);
  const failed = buildStatus(
    input({ inSync: false, last: { result: 'Failed', atUnixMs: Date.UTC(2026, 0, 1, 12), error: 'nft failed: boom' } }),
    ok,
  );
  assert.deepEqual(failed.policies, ok.policies, 'the kernel still holds the last applied versions');
  assert.equal(failed.lastApplyResult, 'Failed');
  assert.equal(failed.lastError, 'nft failed: boom');
  assert.equal(failed.inSync, false);
  const patch = statusPatch(ok, failed);
  assert.deepEqual(patch, {
    status: {
      inSync: false,
      lastApplyTime: '2026-01-01T12:00:00.000Z',
      lastApplyResult: 'Failed',
      lastError: 'nft failed: boom',
    },
  });
  const recovered = buildStatus(
    input({ last: { result: 'Applied', atUnixMs: Date.UTC(2026, 0, 1, 13), error: undefined } }),
    failed,
  );
  assert.equal(statusPatch(failed, recovered)?.status.lastError, null, 'merge patch deletes the error');
});

test('the first patch after start sends every field and nulls absent ones', () => {
  const s = buildStatus(input({ applied: undefined, last: undefined, inSync: false, nftVersion: undefined }), undefined);
  const p = statusPatch(undefined, s);
  assert.equal(p?.status.rulesetHash, null);
  assert.equal(p?.status.lastError, null);
  assert.equal(p?.status.nftVersion, null);
  assert.deepEqual(p?.status.policies, []);
});

test('invalid fields are listed per policy without the object name', () => {
  const bad: NetworkPolicy = {
    ...web,
    errors: [
      {
        kind: 'NetworkPolicy',
        namespace: 'shop',
        name: 'web',
        path: 'spec.ingress[0].ports[0].endPort',
        message: 'must be >= port (80)',
      },
    ],
  };
  const r = relevantPolicies(state({ pods: [...cluster.pods], policies: [bad] }), NODE, 0, undefined);
  assert.deepEqual(r[0]?.invalidFields, ['spec.ingress[0].ports[0].endPort: must be >= port (80)']);
});
