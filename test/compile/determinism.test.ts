// Same state => byte-identical ruleset, whatever the order of the input
// arrays and of label keys; and every random ruleset is one nft accepts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { compileNode } from '../../src/compile/compile.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import { elementText, elementTexts } from '../../src/nft/elements.ts';
import { decisionKeyType, keyKindOf } from '../../src/ruleset/ir.ts';
import type { PortKey } from '../../src/ruleset/ir.ts';
import type { ClusterState, LabelSelector, NetworkPolicy, Peer, Pod, PortSpec, Rule } from '../../src/model/types.ts';
import { cport, ipBlock, ns, pod, podPeer, policy, port, rule, sel } from '../support/state-builder.ts';
import { renderLog } from '../nft/nft-support.ts';

const log = renderLog();

const NAMESPACES = ['a', 'b', 'c'];
const APPS = ['web', 'db', 'api'];

const selector: fc.Arbitrary<LabelSelector> = fc.oneof(
  fc.constant(sel()),
  fc.constantFrom(...APPS).map((app) => sel({ app })),
  fc.subarray(APPS, { minLength: 1 }).map((values) => sel({}, [{ key: 'app', operator: 'In', values }])),
  fc.constantFrom(...APPS).map((app) => sel({}, [{ key: 'app', operator: 'NotIn', values: [app] }])),
);
const nsSelector: fc.Arbitrary<LabelSelector> = fc.oneof(
  fc.constant(sel()),
  fc.constantFrom('prod', 'dev').map((env) => sel({ env })),
);

const peer: fc.Arbitrary<Peer> = fc.oneof(
  fc
    .tuple(fc.option(selector, { nil: undefined }), fc.option(nsSelector, { nil: undefined }))
    .map(([p, n]) => podPeer(p ?? (n === undefined ? sel() : undefined), n)),
  fc.constantFrom(
    ipBlock('10.0.0.0/16', ['10.0.1.0/24']),
    ipBlock('10.0.0.0/8'),
    ipBlock('192.168.0.0/16', ['192.168.3.0/24', '192.168.4.128/25']),
    ipBlock('fd00::/64', ['fd00::8/125']),
    ipBlock('0.0.0.0/0'),
  ),
);

const portSpec: fc.Arbitrary<PortSpec> = fc.oneof(
  fc.tuple(fc.constantFrom('TCP', 'UDP', 'SCTP' as const), fc.integer({ min: 1, max: 65535 })).map(([p, n]) => port(p, n)),
  fc
    .tuple(fc.integer({ min: 1, max: 65535 }), fc.integer({ min: 0, max: 3000 }))
    .map(([n, w]) => port('TCP', n, Math.min(65535, n + w))),
  fc.constantFrom('http', 'metrics', 'dns').map((name) => port(name === 'dns' ? 'UDP' : 'TCP', name)),
  fc.constantFrom('TCP', 'UDP' as const).map((p) => port(p)),
);

// About one rule in ten is invalid.
const policyRule: fc.Arbitrary<Rule> = fc
  .tuple(
    fc.option(fc.array(peer, { minLength: 1, maxLength: 3 }), { nil: undefined }),
    fc.option(fc.array(portSpec, { minLength: 1, maxLength: 4 }), { nil: undefined }),
    fc.integer({ min: 0, max: 9 }),
  )
  .map(([peers, ports, d]) => rule(peers, ports, d === 0));

const policyArb: fc.Arbitrary<(i: number) => NetworkPolicy> = fc
  .tuple(
    fc.constantFrom(...NAMESPACES),
    selector,
    fc.array(policyRule, { maxLength: 3 }),
    fc.option(fc.array(policyRule, { maxLength: 3 }), { nil: undefined }),
  )
  .map(
    ([namespace, podSelector, ingress, egress]) =>
      (i: number) =>
        policy(namespace, `pol-${i}`, { podSelector, ingress, ...(egress === undefined ? {} : { egress }) }),
  );

const podArb: fc.Arbitrary<(i: number) => Pod> = fc
  .record({
    namespace: fc.constantFrom(...NAMESPACES),
    app: fc.constantFrom(...APPS),
    node: fc.constantFrom('node-1', 'node-1', 'node-2'),
    dual: fc.boolean(),
    phase: fc.constantFrom('Running', 'Running', 'Pending', 'Succeeded'),
    ports: fc.subarray([cport('http', 8080), cport('metrics', 9090), cport('dns', 53, 'UDP'), cport(undefined, 22)]),
  })
  .map(
    (r) => (i: number) =>
      pod(r.namespace, `pod-${i}`, {
        labels: { app: r.app, idx: String(i) },
        node: r.node,
        ips: r.dual ? [`10.0.${i >> 4}.${(i & 15) * 2 + 1}`, `fd00::${i.toString(16)}`] : [`10.0.${i >> 4}.${(i & 15) * 2 + 1}`],
        phase: r.phase,
        ports: r.ports,
      }),
  );

const stateArb: fc.Arbitrary<ClusterState> = fc
  .tuple(fc.array(podArb, { maxLength: 14 }), fc.array(policyArb, { maxLength: 6 }))
  .map(([pods, pols]) => ({
    namespaces: [ns('a', { env: 'prod' }), ns('b', { env: 'dev' }), ns('c', { env: 'prod' })],
    pods: pods.map((f, i) => f(i)),
    policies: pols.map((f, i) => f(i)),
    nodes: [
      { name: 'node-1', addresses: ['192.168.100.1'] },
      { name: 'node-2', addresses: ['192.168.100.2'] },
    ],
  }));

function shuffle<T>(xs: readonly T[], seed: number): T[] {
  const out = [...xs];
  let s = seed >>> 0;
  for (let i = out.length - 1; i > 0; i--) {
    s = (Math.imul(s ^ (s >>> 15), 2246822507) + 0x9e3779b9) >>> 0;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

function reverseKeys<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).reverse()) as T;
}

function scramble(s: ClusterState, seed: number): ClusterState {
  return {
    namespaces: shuffle(s.namespaces, seed).map((n) => ({ ...n, labels: reverseKeys(n.labels) })),
    pods: shuffle([...s.pods], seed + 1).map((p) => ({ ...p, labels: reverseKeys(p.labels), ports: [...p.ports].reverse() })),
    policies: shuffle([...s.policies], seed + 2),
    nodes: shuffle(s.nodes, seed + 3),
  };
}

test('same state, any input order: byte-identical ruleset', () => {
  let withPolicies = 0;
  fc.assert(
    fc.property(stateArb, fc.integer(), fc.constantFrom('drop', 'reject' as const), (s, seed, denyAction) => {
      const compiled = compileNode(s, 'node-1', { denyAction });
      const a = renderRuleset(compiled);
      const b = renderRuleset(compileNode(scramble(s, seed), 'node-1', { denyAction }));
      assert.equal(b, a);
      log.add('random', a);
      if (compiled.chains.some((ch) => ch.role === 'peers' && ch.rules.length > 0)) withPolicies++;
      // Hashed identifiers only: no pod or policy name outside comments.
      assert.doesNotMatch(a.replace(/comment "[^"]*"/g, ''), /pod-\d|pol-\d/);
    }),
    { numRuns: 60, seed: 20251122 },
  );
  // The property is only worth something if most samples compile real rules.
  assert.ok(withPolicies >= 20, `only ${withPolicies} of 60 samples had policy rules`);
});

test('interval sets never hold overlapping elements', () => {
  fc.assert(
    fc.property(stateArb, (s) => {
      const c = compileNode(s, 'node-1');
      for (const st of c.sets) {
        const texts = elementTexts(st);
        assert.equal(new Set(texts).size, texts.length, `${st.name} has duplicates`);
        // Every element has the key form of its set's declared type.
        for (const e of st.elements) assert.equal(e.kind, keyKindOf(st.type), `${st.name} ${elementText(e)}`);
      }
      for (const m of c.decisions)
        for (const e of m.elements) assert.equal(e.key.kind, keyKindOf(decisionKeyType(m.family, m.key)), m.name);
      const range = (p: PortKey): [number, number] => (typeof p === 'number' ? [p, p] : [p.lo, p.hi]);
      for (const st of c.sets.filter((x) => x.type === 'inet_proto . inet_service')) {
        const byProto = new Map<string, [number, number][]>();
        for (const e of st.elements) {
          assert.ok(e.kind === 'proto-port');
          byProto.set(e.proto, [...(byProto.get(e.proto) ?? []), range(e.port)]);
        }
        for (const [proto, rs] of byProto)
          for (let i = 1; i < rs.length; i++)
            assert.ok((rs[i]?.[0] ?? 0) > (rs[i - 1]?.[1] ?? 0) + 1, `${st.name} ${proto} overlap`);
      }
      // Allow sets of peer identities (local . proto . port): no two ranges of one pod and protocol overlap.
      for (const st of c.sets.filter((x) => x.interval && x.type.endsWith('. inet_proto . inet_service'))) {
        const byKey = new Map<string, [number, number][]>();
        for (const e of st.elements) {
          assert.ok(e.kind === 'addr-proto-port' && typeof e.addr === 'string');
          const key = `${e.addr} ${e.proto}`;
          byKey.set(key, [...(byKey.get(key) ?? []), range(e.port)]);
        }
        for (const [key, rs] of byKey) {
          rs.sort((a, b) => a[0] - b[0]);
          for (let i = 1; i < rs.length; i++) assert.ok((rs[i]?.[0] ?? 0) > (rs[i - 1]?.[1] ?? 0), `${st.name} ${key} overlap`);
        }
      }
    }),
    { numRuns: 100, seed: 7 },
  );
});

log.registerCheck();
