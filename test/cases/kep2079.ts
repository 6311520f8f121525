// KEP-2079 (NetworkPolicy port ranges, `endPort`): its three user stories and
// the edges of ranges, as raw policies over the upstream model's pods plus an
// explicit list of expected connections. Upstream has no endPort connectivity
// test (only API validation), so these are ours; every expectation below is
// written by hand from the KEP and the API reference, not computed.
import type { Protocol } from '../../src/model/types.ts';
import { networkPolicy, type RawObject, type RawPort, type RawSelector } from './raw.ts';
import { defaultCaseContext, type CaseContext } from './upstream-cases.ts';
import { NAMESPACE_NAME_LABEL } from './upstream-model.ts';

export interface PortProbe {
  /** `ns/pod` of the upstream model. */
  readonly from: string;
  readonly to: string;
  readonly protocol: Protocol;
  readonly port: number;
  readonly allowed: boolean;
}

export interface Kep2079Case {
  readonly id: string;
  readonly name: string;
  /** Created on top of the upstream model (no other policies). */
  readonly policies: readonly RawObject[];
  /** The destination must serve every probed port/protocol (see servedPorts). */
  readonly probes: readonly PortProbe[];
}

const podLabel = (name: string): RawSelector => ({ matchLabels: { pod: name } });
const nsName = (ns: string): RawSelector => ({ matchLabels: { [NAMESPACE_NAME_LABEL]: ns } });

/** Probes of one from -> to pair: [port, protocol, allowed]. */
function pair(from: string, to: string, list: readonly (readonly [number, Protocol, boolean])[]): PortProbe[] {
  return list.map(([port, protocol, allowed]) => ({ from, to, port, protocol, allowed }));
}

/** An ingress-only policy on x/a allowing `ports` from anywhere. */
function ingressToXA(name: string, ports: readonly RawPort[]): RawObject {
  return networkPolicy('x', name, { podSelector: podLabel('a'), policyTypes: ['Ingress'], ingress: [{ ports }] });
}

export function kep2079Cases(ctx: CaseContext = defaultCaseContext()): Kep2079Case[] {
  const yb = ctx.podIP('y', 'b', ctx.family);
  const host = `${yb}/${ctx.family === 4 ? 32 : 128}`;
  return [
    {
      id: 'kep2079-story1-nodeport-egress',
      name: 'Story 1: egress only to the NodePort range (30000-32767) of hosts outside',
      policies: [
        networkPolicy('x', 'egress-to-nodeports', {
          podSelector: podLabel('a'),
          policyTypes: ['Egress'],
          egress: [{ to: [{ ipBlock: { cidr: host } }], ports: [{ protocol: 'TCP', port: 30000, endPort: 32767 }] }],
        }),
      ],
      probes: [
        ...pair('x/a', 'y/b', [
          [30000, 'TCP', true],
          [31234, 'TCP', true],
          [32767, 'TCP', true],
          [29999, 'TCP', false],
          [32768, 'TCP', false],
          [80, 'TCP', false],
          [30000, 'UDP', false],
        ]),
        // Not in the ipBlock.
        ...pair('x/a', 'y/a', [[30000, 'TCP', false]]),
        // x/b is not selected: its egress is not restricted.
        ...pair('x/b', 'y/b', [[29999, 'TCP', true]]),
      ],
    },

    {
      id: 'kep2079-story2-all-but-insecure',
      name: 'Story 2: egress to every port except 111 and 445 (TCP and UDP)',
      policies: [
        networkPolicy('x', 'egress-all-but-111-445', {
          podSelector: podLabel('a'),
          policyTypes: ['Egress'],
          egress: [
            {
              ports: (['TCP', 'UDP'] as const).flatMap((protocol) => [
                { protocol, port: 1, endPort: 110 },
                { protocol, port: 112, endPort: 444 },
                { protocol, port: 446, endPort: 65535 },
              ]),
            },
          ],
        }),
      ],
      probes: pair('x/a', 'y/a', [
        [1, 'TCP', true],
        [110, 'TCP', true],
        [111, 'TCP', false],
        [112, 'TCP', true],
        [444, 'TCP', true],
        [445, 'TCP', false],
        [446, 'TCP', true],
        [5432, 'TCP', true],
        [65535, 'TCP', true],
        [111, 'UDP', false],
        [445, 'UDP', false],
        [53, 'UDP', true],
        [80, 'SCTP', false],
      ]),
    },

    {
      id: 'kep2079-story3-passive-ftp',
      name: 'Story 3: default deny, FTP server open on 21 and 49152-65535 only',
      policies: [
        networkPolicy('x', 'default-deny', { podSelector: {}, policyTypes: ['Ingress'], ingress: [] }),
        networkPolicy('x', 'ftp-server', {
          podSelector: podLabel('a'),
          policyTypes: ['Ingress'],
          // Protocol omitted on the range: it defaults to TCP.
          ingress: [
            {
              ports: [
                { protocol: 'TCP', port: 21 },
                { port: 49152, endPort: 65535 },
              ],
            },
          ],
        }),
      ],
      probes: [
        ...pair('y/a', 'x/a', [
          [21, 'TCP', true],
          [20, 'TCP', false],
          [22, 'TCP', false],
          [49151, 'TCP', false],
          [49152, 'TCP', true],
          [60000, 'TCP', true],
          [65535, 'TCP', true],
          [21, 'UDP', false],
          [50000, 'UDP', false],
        ]),
        ...pair('x/b', 'x/a', [[50000, 'TCP', true]]),
        // Another pod of x stays under the default deny.
        ...pair('y/a', 'x/b', [
          [21, 'TCP', false],
          [50000, 'TCP', false],
        ]),
      ],
    },

    {
      id: 'kep2079-range-1-1',
      name: 'a range at the bottom of the port space: 1-1',
      policies: [ingressToXA('port-1-1', [{ protocol: 'TCP', port: 1, endPort: 1 }])],
      probes: pair('y/a', 'x/a', [
        [1, 'TCP', true],
        [2, 'TCP', false],
        [65535, 'TCP', false],
      ]),
    },

    {
      id: 'kep2079-port-65535',
      name: 'the top of the port space: 65535 alone and 65535-65535',
      policies: [
        ingressToXA('port-65535', [
          { protocol: 'TCP', port: 65535 },
          { protocol: 'UDP', port: 65535, endPort: 65535 },
        ]),
      ],
      probes: pair('y/a', 'x/a', [
        [65535, 'TCP', true],
        [65534, 'TCP', false],
        [65535, 'UDP', true],
        [65534, 'UDP', false],
        [1, 'TCP', false],
      ]),
    },

    {
      id: 'kep2079-range-1-65535',
      name: 'the whole port space of one protocol: TCP 1-65535',
      policies: [ingressToXA('all-tcp-ports', [{ protocol: 'TCP', port: 1, endPort: 65535 }])],
      probes: pair('y/a', 'x/a', [
        [1, 'TCP', true],
        [80, 'TCP', true],
        [65535, 'TCP', true],
        [80, 'UDP', false],
        [80, 'SCTP', false],
      ]),
    },

    {
      id: 'kep2079-overlap-in-rule',
      name: 'overlapping ranges in one rule: 1000-2000 and 1500-2500',
      policies: [
        ingressToXA('overlap', [
          { protocol: 'TCP', port: 1000, endPort: 2000 },
          { protocol: 'TCP', port: 1500, endPort: 2500 },
        ]),
      ],
      probes: pair('y/a', 'x/a', [
        [999, 'TCP', false],
        [1000, 'TCP', true],
        [1750, 'TCP', true],
        [2000, 'TCP', true],
        [2001, 'TCP', true],
        [2500, 'TCP', true],
        [2501, 'TCP', false],
      ]),
    },

    {
      id: 'kep2079-overlap-across-policies',
      name: 'overlapping ranges across policies with different peers: x on 1000-2000, y on 1500-3000',
      policies: [
        networkPolicy('x', 'from-x-1000-2000', {
          podSelector: podLabel('a'),
          policyTypes: ['Ingress'],
          ingress: [{ from: [{ podSelector: {} }], ports: [{ protocol: 'TCP', port: 1000, endPort: 2000 }] }],
        }),
        networkPolicy('x', 'from-y-1500-3000', {
          podSelector: podLabel('a'),
          policyTypes: ['Ingress'],
          ingress: [{ from: [{ namespaceSelector: nsName('y') }], ports: [{ protocol: 'TCP', port: 1500, endPort: 3000 }] }],
        }),
      ],
      probes: [
        ...pair('x/b', 'x/a', [
          [1000, 'TCP', true],
          [1750, 'TCP', true],
          [2000, 'TCP', true],
          [2001, 'TCP', false],
          [2500, 'TCP', false],
        ]),
        ...pair('y/b', 'x/a', [
          [1200, 'TCP', false],
          [1500, 'TCP', true],
          [1750, 'TCP', true],
          [3000, 'TCP', true],
          [3001, 'TCP', false],
        ]),
        ...pair('z/a', 'x/a', [[1750, 'TCP', false]]),
      ],
    },

    {
      id: 'kep2079-one-protocol',
      name: 'a range on one protocol only: TCP 1000-2000 does not open UDP or SCTP 1500',
      policies: [ingressToXA('tcp-1000-2000', [{ protocol: 'TCP', port: 1000, endPort: 2000 }])],
      probes: pair('y/a', 'x/a', [
        [1500, 'TCP', true],
        [1500, 'UDP', false],
        [1500, 'SCTP', false],
        [2001, 'TCP', false],
      ]),
    },

    {
      id: 'kep2079-endport-equals-port',
      name: 'endPort == port is a single port',
      policies: [ingressToXA('just-8080', [{ protocol: 'TCP', port: 8080, endPort: 8080 }])],
      probes: pair('y/a', 'x/a', [
        [8080, 'TCP', true],
        [8079, 'TCP', false],
        [8081, 'TCP', false],
      ]),
    },

    {
      // The ruleset keeps ranges of up to 16 ports as single ports in a hash
      // set and longer ones in an interval set: both edges of both kinds.
      id: 'kep2079-short-and-long-ranges',
      name: 'a 16-port range and a 17-port range, edges included',
      policies: [
        ingressToXA('short-and-long', [
          { protocol: 'TCP', port: 8080, endPort: 8095 },
          { protocol: 'UDP', port: 9000, endPort: 9016 },
        ]),
      ],
      probes: pair('y/a', 'x/a', [
        [8079, 'TCP', false],
        [8080, 'TCP', true],
        [8095, 'TCP', true],
        [8096, 'TCP', false],
        [8090, 'UDP', false],
        [8999, 'UDP', false],
        [9000, 'UDP', true],
        [9016, 'UDP', true],
        [9017, 'UDP', false],
        [9010, 'TCP', false],
      ]),
    },
  ];
}

/** `to` pod -> the ports/protocols it must serve for the probes of a case. */
export function servedPorts(c: Kep2079Case): Map<string, { port: number; protocol: Protocol }[]> {
  const out = new Map<string, { port: number; protocol: Protocol }[]>();
  for (const p of c.probes) {
    const list = out.get(p.to) ?? [];
    if (!list.some((s) => s.port === p.port && s.protocol === p.protocol)) list.push({ port: p.port, protocol: p.protocol });
    out.set(p.to, list);
  }
  return out;
}
