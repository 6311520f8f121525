// The walks over many pods go by chunks, each warmed first (compile/pod-walk.ts).
// Whatever the chunking, they must give what a plain walk gives: namespaces
// and selections longer than a chunk, inactive pods at chunk edges, labels
// inherited from Object.prototype never read as a pod's own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClusterIndex } from '../../src/compile/cluster-index.ts';
import { CHUNK, warmIPs, warmLabels } from '../../src/compile/pod-walk.ts';
import { PeerResolver } from '../../src/compile/peers.ts';
import { mergeIntervals, parseIP } from '../../src/model/ip.ts';
import type { Interval } from '../../src/model/ip.ts';
import { selectorMatches } from '../../src/model/selector.ts';
import { isActivePod } from '../../src/model/types.ts';
import type { LabelSelector, Pod } from '../../src/model/types.ts';
import { ns, pod, podPeer, sel, state } from '../support/state-builder.ts';

/** 2.5 chunks of pods in `big`, a few in `small`; every 7th pod without an address, every 11th finished. */
function cluster(): { pods: Pod[]; s: ReturnType<typeof state> } {
  const pods: Pod[] = [];
  const n = Math.floor(CHUNK * 2.5);
  for (let i = 0; i < n; i++)
    pods.push(
      pod('big', `p-${String(i).padStart(4, '0')}`, {
        labels: i % 5 === 0 ? {} : { app: `app-${i % 3}`, tier: i % 2 === 0 ? 'web' : 'db' },
        ips: i % 7 === 3 ? [] : [`10.1.${i >> 8}.${i & 255}`, `fd00::${i.toString(16)}`],
        phase: i % 11 === 4 ? 'Succeeded' : 'Running',
        node: i % 2 === 0 ? 'node-1' : 'node-2',
      }),
    );
  for (let i = 0; i < 5; i++) pods.push(pod('small', `q-${i}`, { labels: { app: 'app-1' }, ips: [`10.2.0.${i}`] }));
  return { pods, s: state({ namespaces: [ns('big', { team: 'a' }), ns('small', { team: 'a' })], pods }) };
}

const plain = (pods: readonly Pod[], namespaces: readonly string[], s: LabelSelector | undefined): Pod[] =>
  pods.filter((p) => isActivePod(p) && namespaces.includes(p.namespace) && (s === undefined || selectorMatches(s, p.labels)));

test('warmIPs and warmLabels hand over the chunk: its ips arrays, labels objects and values, in order', () => {
  const { pods } = cluster();
  const ips: (readonly string[])[] = [];
  const labels: Pod['labels'][] = [];
  const values: (string | undefined)[] = [];
  warmIPs(pods, CHUNK, CHUNK + 10, ips);
  warmLabels(pods, CHUNK, CHUNK + 10, 'app', labels, values);
  assert.deepEqual(
    values,
    pods.slice(CHUNK, CHUNK + 10).map((p) => p.labels['app']),
  );
  assert.deepEqual(
    ips,
    pods.slice(CHUNK, CHUNK + 10).map((p) => p.ips),
  );
  for (let k = 0; k < 10; k++) assert.equal(labels[k], pods[CHUNK + k]!.labels);
});

test('podsMatching by scan and by postings equals a plain filter, across chunk edges', () => {
  const { pods, s } = cluster();
  const selectors: (LabelSelector | undefined)[] = [
    undefined,
    sel(),
    sel({ app: 'app-1' }),
    sel({ app: 'app-1', tier: 'db' }),
    sel({}, [{ key: 'tier', operator: 'NotIn', values: ['web'] }]),
    sel({}, [{ key: 'app', operator: 'DoesNotExist', values: [] }]),
    // Inherited from Object.prototype: never a pod's own label.
    sel({ toString: 'x' }),
    sel({}, [{ key: 'constructor', operator: 'Exists', values: [] }]),
  ];
  for (const scanLimit of [0, 1_000_000]) {
    const idx = new ClusterIndex(s, scanLimit, 'node-1');
    for (const namespaces of [['big'], ['big', 'small'], ['small']])
      for (const sl of selectors)
        assert.deepEqual(
          idx
            .podsMatching(namespaces, sl)
            .map((p) => p.name)
            .sort(),
          plain(pods, namespaces, sl)
            .map((p) => p.name)
            .sort(),
          `scanLimit ${scanLimit}, ${namespaces.join(',')}, ${JSON.stringify(sl)}`,
        );
    assert.deepEqual(
      idx.podsOnNode('node-1').map((p) => p.name),
      pods.filter((p) => isActivePod(p) && p.nodeName === 'node-1').map((p) => p.name),
    );
    assert.deepEqual(
      idx.podsIn('big').map((p) => p.name),
      pods.filter((p) => isActivePod(p) && p.namespace === 'big').map((p) => p.name),
    );
  }
});

test("a pod peer's addresses, read by chunks, are every selected pod's addresses merged", () => {
  const { pods, s } = cluster();
  const peers = new PeerResolver(new ClusterIndex(s));
  const peer = podPeer(sel({ tier: 'db' }), sel({ team: 'a' }));
  const want: Interval[] = [];
  for (const p of plain(pods, ['big', 'small'], sel({ tier: 'db' })))
    for (const t of p.ips) {
      const ip = parseIP(t)!;
      want.push({ family: ip.family, lo: ip.value, hi: ip.value });
    }
  assert.ok(want.length > CHUNK);
  assert.deepEqual(peers.peerIntervals(peer, 'big'), mergeIntervals(want));
});
