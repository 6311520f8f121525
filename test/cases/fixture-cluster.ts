// A small cluster for the evaluator's semantic tables and the explain tests.
//
//   namespaces  app {team: a, env: prod}   other {team: b, env: dev}   ops {}
//   app/web     app=web,tier=front  10.0.1.1 fd00::1:1  node-1  http 80/TCP, metrics 9090/TCP, dns 53/UDP
//   app/db      app=db              10.0.1.2 fd00::1:2  node-2  http 8080/TCP (same name, other number), sig 3868/SCTP
//   app/client  app=client          10.0.1.3 fd00::1:3  node-1
//   other/client app=client         10.0.2.1 fd00::2:1  node-2
//   other/web   app=web             10.0.2.2 (IPv4 only) node-2  http 80/TCP
//   ops/tool    app=tool            10.0.3.1 fd00::3:1  node-2
//   app/done    app=client  Succeeded, 10.0.1.9;  app/pending app=client, no IP;
//   app/hostnet app=client  hostNetwork on node-1, 192.168.0.1 (the node's address)
//   nodes       node-1 192.168.0.1 fd00:ffff::1;  node-2 192.168.0.2
import assert from 'node:assert/strict';
import { buildState } from '../../src/model/normalize.ts';
import type { ClusterState, Family, Protocol } from '../../src/model/types.ts';
import { verdict, type Endpoint, type Verdict } from '../../src/policy/verdict.ts';
import { parseIP } from '../../src/model/ip.ts';
import type { RawObject, RawPolicySpec } from './raw.ts';
import { networkPolicy } from './raw.ts';
import { nodeObject } from './upstream-model.ts';

function ns(name: string, labels: Record<string, string> = {}): RawObject {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { 'kubernetes.io/metadata.name': name, ...labels } } };
}

interface PodOpts {
  readonly ips?: readonly string[];
  readonly node?: string;
  readonly ports?: readonly { name: string; containerPort: number; protocol: Protocol }[];
  readonly phase?: string;
  readonly hostNetwork?: boolean;
}

function pod(namespace: string, name: string, labels: Record<string, string>, o: PodOpts = {}): RawObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels },
    spec: {
      nodeName: o.node ?? 'node-1',
      hostNetwork: o.hostNetwork ?? false,
      containers: [{ name: 'main', image: 'x', ports: o.ports ?? [] }],
    },
    status: { phase: o.phase ?? 'Running', podIPs: (o.ips ?? []).map((ip) => ({ ip })) },
  };
}

export const BASE: readonly RawObject[] = [
  ns('app', { team: 'a', env: 'prod' }),
  ns('other', { team: 'b', env: 'dev' }),
  ns('ops'),
  pod(
    'app',
    'web',
    { app: 'web', tier: 'front' },
    {
      ips: ['10.0.1.1', 'fd00::1:1'],
      ports: [
        { name: 'http', containerPort: 80, protocol: 'TCP' },
        { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
        { name: 'dns', containerPort: 53, protocol: 'UDP' },
      ],
    },
  ),
  pod(
    'app',
    'db',
    { app: 'db' },
    {
      ips: ['10.0.1.2', 'fd00::1:2'],
      node: 'node-2',
      ports: [
        { name: 'http', containerPort: 8080, protocol: 'TCP' },
        { name: 'sig', containerPort: 3868, protocol: 'SCTP' },
      ],
    },
  ),
  pod('app', 'client', { app: 'client' }, { ips: ['10.0.1.3', 'fd00::1:3'] }),
  pod('other', 'client', { app: 'client' }, { ips: ['10.0.2.1', 'fd00::2:1'], node: 'node-2' }),
  pod(
    'other',
    'web',
    { app: 'web' },
    { ips: ['10.0.2.2'], node: 'node-2', ports: [{ name: 'http', containerPort: 80, protocol: 'TCP' }] },
  ),
  pod('ops', 'tool', { app: 'tool' }, { ips: ['10.0.3.1', 'fd00::3:1'], node: 'node-2' }),
  pod('app', 'done', { app: 'client' }, { ips: ['10.0.1.9'], phase: 'Succeeded' }),
  pod('app', 'pending', { app: 'client' }, { phase: 'Pending' }),
  pod('app', 'hostnet', { app: 'client' }, { ips: ['192.168.0.1'], hostNetwork: true }),
  nodeObject('node-1', ['192.168.0.1', 'fd00:ffff::1']),
  nodeObject('node-2', ['192.168.0.2']),
];

/** `spec` for a policy named `name` in `namespace`. */
export const pol = (namespace: string, name: string, spec: RawPolicySpec): RawObject => networkPolicy(namespace, name, spec);

export function stateWith(policies: readonly RawObject[], extra: readonly RawObject[] = []): ClusterState {
  const { state, errors } = buildState([...BASE, ...extra, ...policies]);
  assert.deepEqual(errors, [], 'fixture objects must be valid');
  return state;
}

/** An IP literal is an address, anything else names a pod `ns/pod`. */
export function endpoint(state: ClusterState, text: string): Endpoint {
  if (parseIP(text) !== undefined) return { kind: 'ip', ip: text };
  const p = state.pods.find((q) => `${q.namespace}/${q.name}` === text);
  assert.ok(p, `no pod ${text} in the fixture`);
  return { kind: 'pod', pod: p };
}

/** One connection: `from -> to` on `PORT/PROTO` (default TCP). */
export interface Conn {
  readonly from: string;
  readonly to: string;
  readonly port: number;
  readonly protocol?: Protocol;
  readonly family?: Family;
}

export function judge(state: ClusterState, c: Conn): Verdict {
  const opts = c.family === undefined ? {} : { family: c.family };
  return verdict(state, endpoint(state, c.from), endpoint(state, c.to), c.protocol ?? 'TCP', c.port, opts);
}

export const c = (from: string, to: string, port: number, protocol: Protocol = 'TCP', family?: Family): Conn =>
  family === undefined ? { from, to, port, protocol } : { from, to, port, protocol, family };

export function show(x: Conn): string {
  return `${x.from} -> ${x.to} ${x.port}/${x.protocol ?? 'TCP'}${x.family === undefined ? '' : ` v${x.family}`}`;
}
