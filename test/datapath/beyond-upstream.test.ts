// Connectivity cases upstream's e2e suite does not have, with real packets in
// both pod-network styles: endPort (KEP-2079), ipBlock/except towards and from
// a host outside the cluster (IPv4 and IPv6), named ports that resolve to
// different numbers on different pods, the node -> local pod allowance, and
// pod -> own node traffic (the input hook). Expectations are written by hand.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Family, Protocol } from '../../src/model/types.ts';
import { verdict } from '../../src/policy/verdict.ts';
import { kep2079Cases, servedPorts } from '../cases/kep2079.ts';
import { networkPolicy } from '../cases/raw.ts';
import type { RawObject } from '../cases/raw.ts';
import { NAMESPACE_NAME_LABEL, UPSTREAM_PODS } from '../cases/upstream-model.ts';
import { OUTSIDE } from '../harness/addressing.ts';
import { checkProbes } from '../harness/check.ts';
import type { Expectation } from '../harness/check.ts';
import { Cluster, NETWORK_STYLES } from '../harness/cluster.ts';
import { applyState, stateOf } from '../harness/enforce.ts';
import { nodeKey, OUTSIDE_KEY } from '../harness/probe.ts';
import type { Probe } from '../harness/probe.ts';
import { datapathSkip } from '../harness/requirements.ts';
import { clusterCaseContext, upstreamClusterSpec, upstreamObjects } from '../harness/upstream.ts';

const skip = datapathSkip();
const FAMILIES: readonly Family[] = [4, 6];

const expectation = (probe: Probe, allowed: boolean, why?: string): Expectation => ({
  probe,
  allowed,
  ...(why === undefined ? {} : { why }),
});

function failIfAny(wrong: readonly string[], what: string): void {
  if (wrong.length > 0)
    assert.fail(`${what}: ${wrong.length} probe(s) differ from the expectation\n${wrong.map((w) => `  ${w}`).join('\n')}`);
}

/** A copy of a raw pod whose container `container` declares `port` instead. */
function withContainerPort(pod: RawObject, container: string, port: number): RawObject {
  const spec = structuredClone(pod.spec) as { containers: { name: string; ports: { containerPort: number }[] }[] };
  const c = spec.containers.find((x) => x.name === container);
  if (c === undefined || c.ports[0] === undefined) throw new Error(`no container ${container} in ${pod.metadata.name}`);
  c.ports[0].containerPort = port;
  return { ...pod, spec };
}

const isPod = (o: RawObject, key: string) => o.kind === 'Pod' && `${o.metadata.namespace}/${o.metadata.name}` === key;

for (const style of NETWORK_STYLES) {
  describe(`beyond upstream, ${style} pod network`, { skip }, () => {
    let c: Cluster;
    before(async () => {
      c = await Cluster.create(upstreamClusterSpec(style));
    });
    after(async () => {
      await c?.destroy();
    });

    // ---- KEP-2079 endPort ----
    for (const family of FAMILIES) {
      const via = family === 4 ? 'service' : 'pod';
      for (const k of kep2079Cases()) {
        test(`[IPv${family} via ${via}] ${k.id}: ${k.name}`, async () => {
          const kase = kep2079Cases(clusterCaseContext(c, family)).find((x) => x.id === k.id)!;
          for (const [to, ports] of servedPorts(kase)) {
            const of = (p: Protocol) => ports.filter((x) => x.protocol === p).map((x) => x.port);
            await c.serve(to, { tcp: of('TCP'), udp: of('UDP'), sctp: of('SCTP') });
          }
          await applyState(c, stateOf([...upstreamObjects(c), ...kase.policies]));
          const wrong = await checkProbes(
            c,
            kase.probes.map((p) =>
              expectation({ from: p.from, to: p.to, protocol: p.protocol, port: p.port, family, via }, p.allowed),
            ),
          );
          failIfAny(wrong, kase.id);
        });
      }
    }

    // ---- ipBlock and the outside host ----
    test('egress ipBlock to the outside host, with and without except, IPv4 and IPv6', async () => {
      const egress = (name: string, pod: string, to: object[]) =>
        networkPolicy('x', name, { podSelector: { matchLabels: { pod } }, policyTypes: ['Egress'], egress: [{ to }] });
      const policies = [
        // x/a: only the outside network.
        egress('a-outside', 'a', [{ ipBlock: { cidr: '203.0.113.0/24' } }, { ipBlock: { cidr: '2001:db8::/64' } }]),
        // x/b: everything except the outside host.
        egress('b-not-outside-host', 'b', [
          { ipBlock: { cidr: '0.0.0.0/0', except: ['203.0.113.10/32'] } },
          { ipBlock: { cidr: '::/0', except: ['2001:db8::10/128'] } },
        ]),
        // x/c: the outside network except its host (nothing reachable there).
        egress('c-outside-except-host', 'c', [
          { ipBlock: { cidr: '203.0.113.0/24', except: ['203.0.113.8/29'] } },
          { ipBlock: { cidr: '2001:db8::/64', except: ['2001:db8::/120'] } },
        ]),
      ];
      await applyState(c, stateOf([...upstreamObjects(c), ...policies]), { denyAction: 'drop' });
      const exps: Expectation[] = [];
      for (const family of FAMILIES) {
        for (const protocol of ['TCP', 'UDP'] as const) {
          const p = (from: string, to: string): Probe => ({ from, to, protocol, port: 80, family, via: 'service' });
          exps.push(
            expectation(p('x/a', OUTSIDE_KEY), true, 'inside the ipBlock'),
            expectation(p('x/a', 'y/a'), false, 'pods are outside 203.0.113.0/24'),
            expectation(p('x/b', OUTSIDE_KEY), false, 'the outside host is excepted'),
            expectation(p('x/b', 'z/c'), true, 'pods are inside 0.0.0.0/0 and ::/0'),
            expectation(p('x/c', OUTSIDE_KEY), false, 'the host is inside the except'),
            expectation(p('y/a', OUTSIDE_KEY), true, 'y/a is not selected'),
          );
        }
      }
      failIfAny(await checkProbes(c, exps), 'egress ipBlock');
    });

    test('ingress ipBlock from the outside host, with except, IPv4 and IPv6', async () => {
      const policies = [
        networkPolicy('x', 'from-outside', {
          podSelector: {},
          policyTypes: ['Ingress'],
          ingress: [
            {
              from: [
                { ipBlock: { cidr: '203.0.113.0/25' } },
                { ipBlock: { cidr: '2001:db8::/64', except: ['2001:db8::10/128'] } },
              ],
            },
            // Pods of y may reach x/b only, on 81 only.
            { from: [{ namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: 'y' } } }], ports: [{ port: 81 }] },
          ],
        }),
      ];
      await applyState(c, stateOf([...upstreamObjects(c), ...policies]));
      const p = (from: string, to: string, family: Family, port = 80): Probe => ({
        from,
        to,
        protocol: 'TCP',
        port,
        family,
        via: 'pod',
      });
      const exps = [
        expectation(p(OUTSIDE_KEY, 'x/a', 4), true, '203.0.113.10 is in 203.0.113.0/25'),
        expectation(p(OUTSIDE_KEY, 'x/b', 4), true, '203.0.113.10 is in 203.0.113.0/25'),
        expectation(p(OUTSIDE_KEY, 'x/a', 6), false, '2001:db8::10 is excepted'),
        expectation(p(OUTSIDE_KEY, 'x/c', 6), false, '2001:db8::10 is excepted'),
        expectation(p(OUTSIDE_KEY, 'y/a', 6), true, 'y is not isolated'),
        expectation(p('y/a', 'x/b', 4), false, 'y only on 81'),
        expectation(p('y/a', 'x/b', 6, 81), true, 'y on 81'),
        expectation(p('z/a', 'x/b', 4, 81), false, 'z is not allowed'),
      ];
      failIfAny(await checkProbes(c, exps), 'ingress ipBlock');
    });

    // ---- named ports ----
    test('a named port that is 80 on some pods and 8080 on others, ingress and egress, ClusterIP and pod IP', async () => {
      // x/b and z/b serve `serve-80-tcp` on 8080 instead of 80; the Service port 80 targets the name.
      const moved = ['x/b', 'z/b'];
      let objects = upstreamObjects(c).map((o) =>
        moved.some((k) => isPod(o, k)) ? withContainerPort(o, 'cont-80-tcp', 8080) : o,
      );
      for (const k of moved) {
        await c.serve(k, { tcp: [8080] });
        await c.setServicePorts(
          k,
          c.pod(k).services.map((s) => (s.protocol === 'TCP' && s.port === 80 ? { ...s, targetPort: 8080 } : s)),
        );
      }
      objects = [
        ...objects,
        networkPolicy('x', 'ingress-named', {
          podSelector: {},
          policyTypes: ['Ingress'],
          ingress: [{ ports: [{ port: 'serve-80-tcp' }] }],
        }),
        networkPolicy('y', 'egress-named', {
          podSelector: { matchLabels: { pod: 'c' } },
          policyTypes: ['Egress'],
          egress: [{ ports: [{ protocol: 'TCP', port: 'serve-80-tcp' }] }],
        }),
      ];
      await applyState(c, stateOf(objects));
      try {
        const p = (from: string, to: string, port: number, via: 'service' | 'pod', family: Family = 4): Probe => ({
          from,
          to,
          protocol: 'TCP',
          port,
          family,
          via,
        });
        const exps: Expectation[] = [];
        for (const family of FAMILIES) {
          exps.push(
            expectation(p('y/a', 'x/a', 80, 'pod', family), true, 'x/a names 80 serve-80-tcp'),
            expectation(p('y/a', 'x/b', 8080, 'pod', family), true, 'x/b names 8080 serve-80-tcp'),
            expectation(p('y/a', 'x/b', 80, 'pod', family), false, 'port 80 of x/b has no name'),
            expectation(p('y/a', 'x/b', 80, 'service', family), true, 'the Service sends 80 to x/b:8080'),
            expectation(p('y/a', 'x/a', 81, 'service', family), false, 'serve-81-tcp is not allowed'),
            expectation(p('y/c', 'z/a', 80, 'pod', family), true, 'egress to z/a serve-80-tcp (80)'),
            expectation(p('y/c', 'z/b', 8080, 'pod', family), true, 'egress to z/b serve-80-tcp (8080)'),
            expectation(p('y/c', 'z/b', 80, 'pod', family), false, 'z/b has no name on 80'),
            expectation(p('y/c', 'z/b', 80, 'service', family), true, 'ClusterIP 80 -> z/b:8080'),
            expectation(p('y/c', 'z/a', 81, 'service', family), false, 'serve-81-tcp is not allowed for egress'),
            expectation(p('y/c', 'x/b', 80, 'service', family), true, 'egress and ingress both allow x/b:8080'),
          );
        }
        failIfAny(await checkProbes(c, exps), 'named ports');
      } finally {
        for (const k of moved) {
          await c.setServicePorts(
            k,
            c.pod(k).services.map((s) => (s.protocol === 'TCP' && s.port === 80 ? { ...s, targetPort: 80 } : s)),
          );
        }
      }
    });

    // ---- the node ----
    test('a node always reaches its own pods (pod IP and ClusterIP, TCP and UDP) under default-deny-all; other nodes do not', async () => {
      const denyAll = ['x', 'y', 'z'].map((ns) =>
        networkPolicy(ns, 'deny-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'], ingress: [], egress: [] }),
      );
      const objects = [...upstreamObjects(c), ...denyAll];
      const state = stateOf(objects);
      await applyState(c, state, { denyAction: 'drop' });
      const exps: Expectation[] = [];
      for (const pod of UPSTREAM_PODS) {
        const own = c.pod(pod).node;
        for (const node of c.nodes) {
          for (const family of FAMILIES) {
            for (const protocol of ['TCP', 'UDP'] as const) {
              for (const via of ['pod', 'service'] as const) {
                const local = node.name === own;
                exps.push(
                  expectation(
                    { from: nodeKey(node.name), to: pod, protocol, port: 80, family, via },
                    local,
                    local ? 'own node' : `${pod} is on ${own}`,
                  ),
                );
              }
            }
          }
        }
      }
      exps.push(expectation({ from: 'x/a', to: 'x/c', protocol: 'TCP', port: 80, family: 4, via: 'pod' }, false, 'deny-all'));
      // The oracle agrees with every expectation above (the node's InternalIPs are in the state).
      for (const e of exps) {
        const from = e.probe.from.startsWith('node:')
          ? {
              kind: 'ip' as const,
              ip: e.probe.family === 4 ? c.node(e.probe.from.slice(5)).addresses.v4 : c.node(e.probe.from.slice(5)).addresses.v6,
            }
          : { kind: 'pod' as const, pod: state.pods.find((p) => `${p.namespace}/${p.name}` === e.probe.from)! };
        const to = state.pods.find((p) => `${p.namespace}/${p.name}` === e.probe.to)!;
        assert.equal(
          verdict(state, from, { kind: 'pod', pod: to }, e.probe.protocol, 80, { family: e.probe.family }).allowed,
          e.allowed,
          `oracle: ${e.probe.from} -> ${e.probe.to}`,
        );
      }
      failIfAny(await checkProbes(c, exps), 'node -> pod');
    });

    test('pod -> its own node goes through the input hook: egress policy applies, an ipBlock of the node address allows it', async () => {
      const n1 = c.node('node-1');
      const policies = [
        // x/a (node-1): egress only to node-1's addresses.
        networkPolicy('x', 'a-to-node', {
          podSelector: { matchLabels: { pod: 'a' } },
          policyTypes: ['Egress'],
          egress: [{ to: [{ ipBlock: { cidr: `${n1.addresses.v4}/32` } }, { ipBlock: { cidr: `${n1.addresses.v6}/128` } }] }],
        }),
        // z/a (node-1): no egress at all.
        networkPolicy('z', 'a-deny-egress', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Egress'], egress: [] }),
      ];
      await applyState(c, stateOf([...upstreamObjects(c), ...policies]));
      assert.equal(c.pod('x/a').node, 'node-1');
      assert.equal(c.pod('z/a').node, 'node-1');
      const exps: Expectation[] = [];
      for (const family of FAMILIES) {
        const p = (from: string, to: string): Probe => ({ from, to, protocol: 'TCP', port: 80, family });
        exps.push(
          expectation(p('x/a', nodeKey('node-1')), true, 'ipBlock of the node address'),
          expectation(p('x/a', nodeKey('node-2')), false, 'not in the ipBlock'),
          expectation(p('x/a', OUTSIDE_KEY), false, 'not in the ipBlock'),
          expectation(p('z/a', nodeKey('node-1')), false, 'egress: []'),
          expectation(p('x/c', nodeKey('node-1')), true, 'x/c is not selected'),
        );
      }
      failIfAny(await checkProbes(c, exps), 'pod -> node');
    });

    test('--allow-pod-to-node: an egress-isolated pod reaches its own node, and nothing else; off, it does not (the oracle agrees)', async () => {
      const policies = [
        // z/a (node-1): no egress at all; x/b (node-2): egress only to x/a.
        networkPolicy('z', 'a-deny-egress', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Egress'], egress: [] }),
        networkPolicy('x', 'b-to-a', {
          podSelector: { matchLabels: { pod: 'b' } },
          policyTypes: ['Egress'],
          egress: [{ to: [{ podSelector: { matchLabels: { pod: 'a' } } }] }],
        }),
      ];
      const state = stateOf([...upstreamObjects(c), ...policies]);
      const own = (pod: string) => c.pod(pod).node;
      assert.equal(own('z/a'), 'node-1');
      assert.equal(own('x/b'), 'node-2');
      for (const allowPodToNode of [false, true]) {
        await applyState(c, state, { allowPodToNode });
        const exps: Expectation[] = [];
        for (const family of FAMILIES) {
          for (const protocol of ['TCP', 'UDP'] as const) {
            const p = (from: string, to: string): Probe => ({ from, to, protocol, port: 80, family });
            const tag = allowPodToNode ? 'on' : 'off';
            exps.push(
              expectation(p('z/a', nodeKey('node-1')), allowPodToNode, `own node, flag ${tag}`),
              expectation(p('x/b', nodeKey('node-2')), allowPodToNode, `own node, flag ${tag}`),
              expectation(p('z/a', nodeKey('node-2')), false, 'another node: egress: []'),
              expectation(p('x/b', nodeKey('node-1')), false, 'another node: only x/a allowed'),
              expectation(p('z/a', OUTSIDE_KEY), false, 'egress: []'),
              expectation(p('z/a', 'x/c'), false, 'egress: []'),
              expectation(p('x/b', 'x/a'), true, 'allowed by x/b-to-a'),
            );
          }
        }
        // The oracle, told the same setting, agrees with every expectation.
        const endpoint = (key: string, family: Family) =>
          key.startsWith('node:')
            ? { kind: 'ip' as const, ip: family === 4 ? c.node(key.slice(5)).addresses.v4 : c.node(key.slice(5)).addresses.v6 }
            : key === OUTSIDE_KEY
              ? { kind: 'ip' as const, ip: family === 4 ? OUTSIDE.v4 : OUTSIDE.v6 }
              : { kind: 'pod' as const, pod: state.pods.find((x) => `${x.namespace}/${x.name}` === key)! };
        for (const e of exps) {
          const f = e.probe.family;
          const v = verdict(state, endpoint(e.probe.from, f), endpoint(e.probe.to, f), e.probe.protocol, 80, {
            family: f,
            allowPodToNode,
          });
          assert.equal(v.allowed, e.allowed, `oracle (allowPodToNode ${allowPodToNode}): ${e.probe.from} -> ${e.probe.to}`);
        }
        failIfAny(await checkProbes(c, exps), `pod -> node, --allow-pod-to-node ${allowPodToNode ? 'on' : 'off'}`);
      }
    });

    test('the outside host is what the truth tables call outside: TEST-NET addresses', () => {
      assert.deepEqual(c.outside.ips, OUTSIDE);
    });
  });
}
