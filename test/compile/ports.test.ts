// Ports -> set elements: numeric ports and endPort ranges in one interval set
// (merged: nft rejects overlaps), protocol-only entries as 0-65535, named
// ports as address . protocol . port triples of the pods serving them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileRules } from '../../src/compile/compile.ts';
import { numericPortElements, numericPortRanges } from '../../src/compile/ports.ts';
import { buildState } from '../../src/model/normalize.ts';
import { renderRuleset } from '../../src/nft/render.ts';
import type { Peer, Pod, PortSpec } from '../../src/model/types.ts';
import { cport, ipBlock, pod, podPeer, policy, port, rule, sel, state } from '../support/state-builder.ts';
import { renderLog } from '../nft/nft-support.ts';
import { elementsByKind, mustPolicyChain, setOf, shapes } from './ir-query.ts';
import { elementTexts } from '../../src/nft/elements.ts';

const log = renderLog();

function compileIngress(
  label: string,
  ports: PortSpec[] | undefined,
  pods: Pod[] = [pod('a', 'srv', { labels: { app: 'srv' }, ips: ['10.0.0.1'] })],
) {
  const s = state({
    pods,
    policies: [policy('a', 'p', { podSelector: sel({ app: 'srv' }), ingress: [rule(undefined, ports)] })],
  });
  const c = compileRules(s, 'node-1');
  log.add(label, renderRuleset(c));
  return { c, ch: mustPolicyChain(c, 'a', 'p', 'ingress') };
}

test('numeric ports: single ports, endPort ranges, merging, protocol-only', () => {
  const cases: { name: string; ports: PortSpec[]; want: string[] }[] = [
    { name: 'one port', ports: [port('TCP', 80)], want: ['tcp . 80'] },
    { name: 'range', ports: [port('TCP', 30000, 32767)], want: ['tcp . 30000-32767'] },
    { name: 'endPort == port', ports: [port('UDP', 53, 53)], want: ['udp . 53'] },
    { name: 'whole range 1-65535', ports: [port('TCP', 1, 65535)], want: ['tcp . 1-65535'] },
    { name: 'protocol only: every port', ports: [port('SCTP')], want: ['sctp . 0-65535'] },
    {
      name: 'overlaps and containment merge',
      ports: [
        port('TCP', 8000, 8100),
        port('TCP', 8050, 8200),
        port('TCP', 8080),
        port('TCP', 9000, 9000),
        port('TCP', 100, 65535),
      ],
      want: ['tcp . 100-65535'],
    },
    {
      name: 'adjacent ranges merge',
      ports: [port('TCP', 10, 19), port('TCP', 20, 29), port('TCP', 31)],
      want: ['tcp . 10-29', 'tcp . 31'],
    },
    { name: 'duplicates', ports: [port('UDP', 53), port('UDP', 53)], want: ['udp . 53'] },
    {
      name: 'protocols kept apart, tcp udp sctp order',
      ports: [port('SCTP', 5), port('UDP', 53), port('TCP', 443), port('UDP', 60000, 61000), port('TCP', 80)],
      want: ['tcp . 80', 'tcp . 443', 'udp . 53', 'udp . 60000-61000', 'sctp . 5'],
    },
    {
      name: 'protocol-only swallows ranges of that protocol',
      ports: [port('TCP', 22), port('TCP'), port('UDP', 53)],
      want: ['tcp . 0-65535', 'udp . 53'],
    },
  ];
  for (const k of cases) {
    assert.deepEqual(elementTexts({ elements: numericPortElements(numericPortRanges(k.ports)) }), k.want, k.name);
    const { c, ch } = compileIngress(k.name, k.ports);
    const ps = setOf(c, ch, 'portSet');
    assert.deepEqual(elementTexts(ps), k.want, k.name);
    assert.equal(ps.type, 'inet_proto . inet_service');
    assert.ok(ps.interval);
    assert.deepEqual(shapes(ch), ['meta l4proto . th dport @port-* accept comment "ingress[0]"'], k.name);
  }
});

test('default protocol: a port without protocol (raw manifest) is TCP', () => {
  const { state: s, errors } = buildState([
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'a', labels: { 'kubernetes.io/metadata.name': 'a' } } },
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { namespace: 'a', name: 'srv', labels: { app: 'srv' } },
      spec: { nodeName: 'node-1', containers: [{ name: 'c', ports: [{ name: 'http', containerPort: 8080 }] }] },
      status: { phase: 'Running', podIP: '10.0.0.1' },
    },
    {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { namespace: 'a', name: 'p' },
      spec: {
        podSelector: { matchLabels: { app: 'srv' } },
        ingress: [{ ports: [{ port: 443 }, { port: 'http' }, { port: 8000, endPort: 8010 }] }],
      },
    },
  ]);
  assert.deepEqual(errors, []);
  const c = compileRules(s, 'node-1');
  log.add('default protocol', renderRuleset(c));
  const ch = mustPolicyChain(c, 'a', 'p', 'ingress');
  assert.deepEqual(elementTexts(setOf(c, ch, 'portSet')), ['tcp . 443', 'tcp . 8000-8010']);
  assert.deepEqual(elementTexts(setOf(c, ch, 'namedPortSet', 4)), ['10.0.0.1 . tcp . 8080']);
});

test('ports undefined: every port and protocol (no port match)', () => {
  const { c, ch } = compileIngress('all ports', undefined);
  assert.deepEqual(shapes(ch), ['accept comment "ingress[0]"']);
  assert.equal(c.sets.length, 0);
});

const servers = [
  pod('a', 'srv-1', {
    labels: { app: 'srv' },
    ips: ['10.0.0.1', 'fd00::1'],
    ports: [cport('http', 8080), cport('metrics', 9090), cport('dns', 53, 'UDP')],
  }),
  pod('a', 'srv-2', { labels: { app: 'srv' }, ips: ['10.0.0.2'], ports: [cport('http', 80), cport('dns', 5353, 'TCP')] }),
  pod('a', 'other', { labels: { app: 'other' }, ips: ['10.0.0.3'], ports: [cport('http', 7070)] }),
  pod('a', 'remote-srv', { labels: { app: 'srv' }, ips: ['10.0.9.1'], node: 'node-2', ports: [cport('http', 6060)] }),
];

test('named ports, ingress: resolved on the selected local pods, protocol must match', () => {
  const { c, ch } = compileIngress('named ingress', [port('TCP', 'http'), port('UDP', 'dns')], servers);
  const named4 = setOf(c, ch, 'namedPortSet', 4);
  assert.deepEqual(elementTexts(named4), ['10.0.0.1 . tcp . 8080', '10.0.0.1 . udp . 53', '10.0.0.2 . tcp . 80']);
  assert.deepEqual(elementTexts(setOf(c, ch, 'namedPortSet', 6)), ['fd00::1 . tcp . 8080', 'fd00::1 . udp . 53']);
  assert.equal(named4.type, 'ipv4_addr . inet_proto . inet_service');
  assert.equal(named4.interval, false);
  assert.deepEqual(shapes(ch), [
    'ip daddr . meta l4proto . th dport @named4-* accept comment "ingress[0]"',
    'ip6 daddr . meta l4proto . th dport @named6-* accept comment "ingress[0]"',
  ]);
});

test('named and numeric ports in one rule: one rule each', () => {
  const s = state({
    pods: servers,
    policies: [
      policy('a', 'p', {
        podSelector: sel({ app: 'srv' }),
        ingress: [rule([ipBlock('10.8.0.0/16')], [port('TCP', 'metrics'), port('TCP', 443)])],
      }),
    ],
  });
  const c = compileRules(s, 'node-1');
  log.add('mixed', renderRuleset(c));
  const ch = mustPolicyChain(c, 'a', 'p', 'ingress');
  assert.deepEqual(shapes(ch), [
    'ip saddr @peer4-* meta l4proto . th dport @port-* accept comment "ingress[0]"',
    'ip saddr @peer4-* ip daddr . meta l4proto . th dport @named4-* accept comment "ingress[0]"',
  ]);
  // Both rules match on the same peer set.
  assert.deepEqual(elementTexts(setOf(c, ch, 'addrSet', 4)), ['10.8.0.0/16']);
  assert.deepEqual(elementTexts(setOf(c, ch, 'namedPortSet', 4)), ['10.0.0.1 . tcp . 9090']);
});

test('a named port nobody serves allows nothing', () => {
  const { c, ch } = compileIngress('unserved', [port('TCP', 'grpc')], servers);
  assert.deepEqual(ch.rules, []);
  assert.equal(c.sets.length, 0);
  const wrongProto = compileIngress('wrong protocol', [port('UDP', 'http')], servers);
  assert.deepEqual(wrongProto.ch.rules, []);
});

function compileEgress(label: string, peers: Peer[] | undefined, ports: PortSpec[]) {
  const pods = [
    pod('a', 'client', { labels: { app: 'client' }, ips: ['10.0.0.10', 'fd00::10'] }),
    pod('a', 'api', { labels: { app: 'api' }, ips: ['10.1.0.1', 'fd00:1::1'], node: 'node-2', ports: [cport('http', 8080)] }),
    pod('b', 'api', {
      labels: { app: 'api' },
      ips: ['10.2.0.1'],
      node: 'node-3',
      ports: [cport('http', 8000), cport('http-alt', 8001)],
    }),
    pod('b', 'web', { labels: { app: 'web' }, ips: ['10.2.0.2'], node: 'node-3', ports: [cport('http', 80)] }),
    pod('b', 'gone', { labels: { app: 'api' }, ips: ['10.2.0.3'], node: 'node-3', phase: 'Failed', ports: [cport('http', 81)] }),
  ];
  const s = state({
    pods,
    policies: [
      policy('a', 'p', {
        podSelector: sel({ app: 'client' }),
        types: { ingress: false, egress: true },
        egress: [rule(peers, ports)],
      }),
    ],
  });
  const c = compileRules(s, 'node-1');
  log.add(label, renderRuleset(c));
  const ch = mustPolicyChain(c, 'a', 'p', 'egress');
  return { c, ch, v4: elementsByKind(c, ch, 'namedPortSet', 4).flat(), v6: elementsByKind(c, ch, 'namedPortSet', 6).flat() };
}

test('named ports, egress: resolved on the destination pods the peers match', () => {
  const cases: { name: string; peers: Peer[] | undefined; v4: string[]; v6: string[] }[] = [
    {
      name: 'pod peer',
      peers: [podPeer(sel({ app: 'api' }), sel())],
      v4: ['10.1.0.1 . tcp . 8080', '10.2.0.1 . tcp . 8000'],
      v6: ['fd00:1::1 . tcp . 8080'],
    },
    {
      name: 'own namespace only',
      peers: [podPeer(sel({ app: 'api' }))],
      v4: ['10.1.0.1 . tcp . 8080'],
      v6: ['fd00:1::1 . tcp . 8080'],
    },
    {
      name: 'ipBlock peer: pods inside the block',
      peers: [ipBlock('10.2.0.0/16', ['10.2.0.2/32'])],
      v4: ['10.2.0.1 . tcp . 8000'],
      v6: [],
    },
    {
      name: 'no peers: every active pod in the cluster',
      peers: undefined,
      v4: ['10.1.0.1 . tcp . 8080', '10.2.0.1 . tcp . 8000', '10.2.0.2 . tcp . 80'],
      v6: ['fd00:1::1 . tcp . 8080'],
    },
  ];
  for (const k of cases) {
    const r = compileEgress(k.name, k.peers, [port('TCP', 'http')]);
    assert.deepEqual(r.v4, k.v4, `${k.name} v4`);
    assert.deepEqual(r.v6, k.v6, `${k.name} v6`);
  }
  assert.deepEqual(shapes(compileEgress('rule shape', undefined, [port('TCP', 'http')]).ch), [
    'ip daddr . meta l4proto . th dport @named4-* accept comment "egress[0]"',
    'ip6 daddr . meta l4proto . th dport @named6-* accept comment "egress[0]"',
  ]);
  assert.deepEqual(
    shapes(compileEgress('rule shape with peers', [podPeer(sel({ app: 'api' }))], [port('TCP', 'http')]).ch)[0],
    'ip daddr @peer4-* ip daddr . meta l4proto . th dport @named4-* accept comment "egress[0]"',
  );
});

test('named ports, egress: nobody serving them yet keeps the rule with an empty set (churn is an element update)', () => {
  const { c, ch } = compileEgress('egress named nobody', [podPeer(sel({ app: 'api' }), sel())], [port('TCP', 'grpc')]);
  // The local pod is dual-stack: both families, both sets empty; matching nothing, they allow nothing.
  assert.deepEqual(shapes(ch), [
    'ip daddr @peer4-* ip daddr . meta l4proto . th dport @named4-* accept comment "egress[0]"',
    'ip6 daddr @peer6-* ip6 daddr . meta l4proto . th dport @named6-* accept comment "egress[0]"',
  ]);
  assert.deepEqual(setOf(c, ch, 'namedPortSet', 4).elements, []);
  assert.deepEqual(setOf(c, ch, 'namedPortSet', 6).elements, []);
});

log.registerCheck();
