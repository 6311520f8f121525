// Every case of the upstream NetworkPolicy e2e suite
// (kubernetes/kubernetes test/e2e/network/netpol/network_policy.go): 42 TCP,
// 3 UDP and 3 SCTP. Policies are the raw objects the upstream helpers build
// (GenNetworkPolicyWithNameAndPodSelector + SetSpecIngressRules /
// SetSpecEgressRules, which also append the matching policyTypes), and the
// expected tables are written the way upstream writes them (default allow,
// then ExpectPeer / ExpectAllIngress / ExpectAllEgress / Expect), over the
// full 3x3 model of the versions that probed all 81 pairs. Nothing here is
// computed by the evaluator. Self-probes are not part of any expectation
// (upstream's ignoreLoopback): compare with diffTables, which skips them.
import { formatCIDR, parseIP, prefixMask } from '../../src/model/ip.ts';
import type { Family, Protocol } from '../../src/model/types.ts';
import { Reachability, type TruthTable } from '../support/truth-table.ts';
import { networkPolicy, type RawEgressRule, type RawIngressRule, type RawObject, type RawSelector } from './raw.ts';
import { defaultPodIPs, NAMESPACE_NAME_LABEL, UPSTREAM_PODS } from './upstream-model.ts';

export type Change =
  /** Create, or replace entirely (same namespace/name), a NetworkPolicy. */
  | { readonly type: 'upsertPolicy'; readonly policy: RawObject }
  | { readonly type: 'deletePolicy'; readonly namespace: string; readonly name: string }
  /** Merged into the namespace's labels (upstream AddNamespaceLabel); `null` removes a key. */
  | { readonly type: 'labelNamespace'; readonly name: string; readonly labels: Readonly<Record<string, string | null>> }
  /** Merged into the pod's labels (upstream AddPodLabels); `null` removes a key. */
  | {
      readonly type: 'labelPod';
      readonly namespace: string;
      readonly name: string;
      readonly labels: Readonly<Record<string, string | null>>;
    };

export interface Probe {
  readonly protocol: Protocol;
  readonly port: number;
  /** Over UPSTREAM_PODS; loopback cells are not expectations. */
  readonly expected: TruthTable;
}

/** Apply `changes` in order, then every probe must hold. */
export interface Step {
  readonly description: string;
  readonly changes: readonly Change[];
  readonly probes: readonly Probe[];
}

export interface UpstreamCase {
  /** Stable: tcp-01..tcp-42, udp-01..03, sctp-01..03 (numbering of upstream-netpol-e2e.md). */
  readonly id: string;
  /** The upstream test name (`should ...`). */
  readonly name: string;
  /** The protocols upstream serves for this case (initializeResources). */
  readonly protocols: readonly Protocol[];
  readonly steps: readonly Step[];
}

export interface CaseContext {
  /** The family the probes use; ipBlock policies (cases 34-36) are written for it. */
  readonly family: Family;
  readonly podIP: (namespace: string, pod: string, family: Family) => string;
}

/** A context over upstream-model's default addresses. */
export function defaultCaseContext(family: Family = 4): CaseContext {
  return {
    family,
    podIP(namespace, pod, fam) {
      const a = defaultPodIPs(namespace, pod);
      const ip = fam === 4 ? a.v4 : a.v6;
      if (ip === undefined) throw new Error(`${namespace}/${pod} has no IPv${fam} address`);
      return ip;
    },
  };
}

// --- upstream helpers, as raw objects -------------------------------------

const everything: RawSelector = {};
const podLabel = (name: string): RawSelector => ({ matchLabels: { pod: name } });
const nsName = (ns: string): RawSelector => ({ matchLabels: { [NAMESPACE_NAME_LABEL]: ns } });
const expr = (key: string, operator: string, values: readonly string[]): RawSelector => ({
  matchExpressions: [{ key, operator, values }],
});

/**
 * GenNetworkPolicyWithNameAndPodSelector(name, podSelector, SetSpecIngressRules(...), SetSpecEgressRules(...)):
 * a given `ingress`/`egress` list (even empty) sets the field and appends its policyType.
 */
function genPolicy(
  namespace: string,
  name: string,
  podSelector: RawSelector,
  rules: { ingress?: RawIngressRule[]; egress?: RawEgressRule[] },
): RawObject {
  const policyTypes: ('Ingress' | 'Egress')[] = [];
  if (rules.ingress !== undefined) policyTypes.push('Ingress');
  if (rules.egress !== undefined) policyTypes.push('Egress');
  return networkPolicy(namespace, name, { podSelector, policyTypes, ...rules });
}

/** makeLargeCIDRForIP: the /4 that contains the address. */
export function largeCIDRFor(ip: string): string {
  const p = parseIP(ip);
  if (p === undefined) throw new Error(`not an IP: ${ip}`);
  return formatCIDR({ family: p.family, base: p.value & prefixMask(p.family, 4), prefix: 4 });
}

function hostCIDR(ip: string): string {
  const p = parseIP(ip);
  if (p === undefined) throw new Error(`not an IP: ${ip}`);
  return `${ip}/${p.family === 4 ? 32 : 128}`;
}

const upsert = (policy: RawObject): Change => ({ type: 'upsertPolicy', policy });

/** A fresh expectation: everything connected, then the given exceptions. */
function reach(exceptions: (r: Reachability) => void = () => {}): TruthTable {
  const r = new Reachability(UPSTREAM_PODS, true);
  exceptions(r);
  return r.table();
}

const probe = (protocol: Protocol, port: number, expected: TruthTable): Probe => ({ protocol, port, expected });

const x = 'x';
const y = 'y';
const z = 'z';

function oneStep(
  id: string,
  name: string,
  protocols: readonly Protocol[],
  description: string,
  changes: Change[],
  probes: Probe[],
): UpstreamCase {
  return { id, name, protocols, steps: [{ description, changes, probes }] };
}

// --- the cases ---------------------------------------------------------------

function tcpCases(ctx: CaseContext): UpstreamCase[] {
  const TCP: Protocol[] = ['TCP'];
  const ip = (ns: string, pod: string) => ctx.podIP(ns, pod, ctx.family);
  return [
    oneStep(
      'tcp-01',
      "should support a 'default-deny-ingress' policy",
      TCP,
      'deny all ingress in x',
      [upsert(genPolicy(x, 'deny-ingress', everything, { ingress: [] }))],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expectPeer({}, { namespace: x }, false)),
        ),
      ],
    ),

    oneStep(
      'tcp-02',
      "should support a 'default-deny-all' policy",
      TCP,
      'deny all ingress and egress in x',
      [upsert(genPolicy(x, 'deny-all', everything, { ingress: [], egress: [] }))],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expectPeer({}, { namespace: x }, false).expectPeer({ namespace: x }, {}, false)),
        ),
      ],
    ),

    oneStep(
      'tcp-03',
      'should enforce policy to allow traffic from pods within server namespace based on PodSelector',
      TCP,
      'x/a allows ingress from pod=b',
      [upsert(genPolicy(x, 'x-a-allows-x-b', podLabel('a'), { ingress: [{ from: [{ podSelector: podLabel('b') }] }] }))],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expectAllIngress('x/a', false).expect('x/b', 'x/a', true)),
        ),
      ],
    ),

    oneStep(
      'tcp-04',
      'should enforce policy to allow ingress traffic for a target',
      TCP,
      'deny all ingress in x, then allow everything into x/a',
      [
        upsert(genPolicy(x, 'deny-all', everything, { ingress: [] })),
        upsert(
          genPolicy(x, 'allow-all-to-a', podLabel('a'), { ingress: [{ from: [{ podSelector: {}, namespaceSelector: {} }] }] }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expectAllIngress('x/a', true).expectAllIngress('x/b', false).expectAllIngress('x/c', false)),
        ),
      ],
    ),

    oneStep(
      'tcp-05',
      'should enforce policy to allow ingress traffic from pods in all namespaces',
      TCP,
      'x/a allows ingress from namespaceSelector {}',
      [
        upsert(
          genPolicy(x, 'allow-from-another-ns', podLabel('a'), {
            ingress: [{ from: [{ namespaceSelector: { matchLabels: {} } }] }],
          }),
        ),
      ],
      [probe('TCP', 80, reach())],
    ),

    oneStep(
      'tcp-06',
      'should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector',
      TCP,
      'x/a allows ingress from namespace y',
      [
        upsert(
          genPolicy(x, 'allow-client-a-via-ns-selector', podLabel('a'), {
            ingress: [{ from: [{ namespaceSelector: nsName(y) }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) =>
            r
              .expectPeer({ namespace: x }, { namespace: x, pod: 'a' }, false)
              .expectPeer({ namespace: z }, { namespace: x, pod: 'a' }, false),
          ),
        ),
      ],
    ),

    oneStep(
      'tcp-07',
      'should enforce policy based on PodSelector with MatchExpressions',
      TCP,
      'x/a allows ingress from pod In [b]',
      [
        upsert(
          genPolicy(x, 'x-a-allows-x-b', podLabel('a'), { ingress: [{ from: [{ podSelector: expr('pod', 'In', ['b']) }] }] }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expectAllIngress('x/a', false).expect('x/b', 'x/a', true)),
        ),
      ],
    ),

    oneStep(
      'tcp-08',
      'should enforce policy based on NamespaceSelector with MatchExpressions',
      TCP,
      'x/a allows ingress from namespace In [y]',
      [
        upsert(
          genPolicy(x, 'allow-ns-y-match-selector', podLabel('a'), {
            ingress: [{ from: [{ namespaceSelector: expr(NAMESPACE_NAME_LABEL, 'In', [y]) }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) =>
            r
              .expectPeer({ namespace: x }, { namespace: x, pod: 'a' }, false)
              .expectPeer({ namespace: z }, { namespace: x, pod: 'a' }, false),
          ),
        ),
      ],
    ),

    oneStep(
      'tcp-09',
      'should enforce policy based on PodSelector or NamespaceSelector',
      TCP,
      'x/a allows ingress from namespace NotIn [x] OR pod=b',
      [
        upsert(
          genPolicy(x, 'allow-ns-y-match-selector', podLabel('a'), {
            ingress: [
              { from: [{ namespaceSelector: expr(NAMESPACE_NAME_LABEL, 'NotIn', [x]) }, { podSelector: podLabel('b') }] },
            ],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expect('x/a', 'x/a', false).expect('x/c', 'x/a', false)),
        ),
      ],
    ),

    oneStep(
      'tcp-10',
      'should enforce policy based on PodSelector and NamespaceSelector',
      TCP,
      'x/a allows ingress from (namespace NotIn [x] AND pod=b)',
      [
        upsert(
          genPolicy(x, 'allow-ns-y-podselector-and-nsselector', podLabel('a'), {
            ingress: [{ from: [{ namespaceSelector: expr(NAMESPACE_NAME_LABEL, 'NotIn', [x]), podSelector: podLabel('b') }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expectAllIngress('x/a', false).expect('y/b', 'x/a', true).expect('z/b', 'x/a', true)),
        ),
      ],
    ),

    oneStep(
      'tcp-11',
      'should enforce policy based on Multiple PodSelectors and NamespaceSelectors',
      TCP,
      'x/a allows ingress from (namespace NotIn [x] AND pod In [b, c])',
      [
        upsert(
          genPolicy(x, 'allow-ns-y-z-pod-b-c', podLabel('a'), {
            ingress: [
              {
                from: [
                  { namespaceSelector: expr(NAMESPACE_NAME_LABEL, 'NotIn', [x]), podSelector: expr('pod', 'In', ['b', 'c']) },
                ],
              },
            ],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) =>
            r
              .expectPeer({ namespace: x }, { namespace: x, pod: 'a' }, false)
              .expect('y/a', 'x/a', false)
              .expect('z/a', 'x/a', false),
          ),
        ),
      ],
    ),

    oneStep(
      'tcp-12',
      'should enforce policy based on any PodSelectors',
      TCP,
      'x/a allows ingress from pod=b OR pod=c',
      [
        upsert(
          genPolicy(x, 'allow-ns-x-pod-b-c', podLabel('a'), {
            ingress: [{ from: [{ podSelector: podLabel('b') }, { podSelector: podLabel('c') }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expectAllIngress('x/a', false).expect('x/b', 'x/a', true).expect('x/c', 'x/a', true)),
        ),
      ],
    ),

    oneStep(
      'tcp-13',
      'should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector',
      TCP,
      'x/a allows ingress from (namespace y AND pod=a)',
      [
        upsert(
          genPolicy(x, 'allow-ns-y-pod-a-via-namespace-pod-selector', podLabel('a'), {
            ingress: [{ from: [{ namespaceSelector: nsName(y), podSelector: podLabel('a') }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expectAllIngress('x/a', false).expect('y/a', 'x/a', true)),
        ),
      ],
    ),

    oneStep(
      'tcp-14',
      'should enforce policy based on Ports',
      TCP,
      'x/a allows ingress from namespace y on TCP 81',
      [
        upsert(
          genPolicy(x, 'allow-client-a-via-ns-selector', podLabel('a'), {
            ingress: [{ from: [{ namespaceSelector: nsName(y) }], ports: [{ port: 81, protocol: 'TCP' }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          81,
          reach((r) =>
            r
              .expectPeer({ namespace: x }, { namespace: x, pod: 'a' }, false)
              .expectPeer({ namespace: y }, { namespace: x, pod: 'a' }, true)
              .expectPeer({ namespace: z }, { namespace: x, pod: 'a' }, false),
          ),
        ),
      ],
    ),

    stackedPolicies(),

    oneStep(
      'tcp-16',
      'should support allow-all policy',
      TCP,
      'x allows all ingress (ingress: [{}])',
      [upsert(genPolicy(x, 'allow-all', { matchLabels: {} }, { ingress: [{}] }))],
      [probe('TCP', 80, reach()), probe('TCP', 81, reach())],
    ),

    oneStep(
      'tcp-17',
      'should allow ingress access on one named port',
      TCP,
      'x allows ingress on named port serve-81-tcp only',
      [upsert(genPolicy(x, 'allow-all', { matchLabels: {} }, { ingress: [{ ports: [{ port: 'serve-81-tcp' }] }] }))],
      [
        probe('TCP', 81, reach()),
        probe(
          'TCP',
          80,
          reach((r) => r.expectPeer({}, { namespace: x }, false)),
        ),
      ],
    ),

    oneStep(
      'tcp-18',
      'should allow ingress access from namespace on one named port',
      TCP,
      'x/a allows ingress from namespace y on named port serve-80-tcp',
      [
        upsert(
          genPolicy(x, 'allow-client-a-via-ns-selector-80', podLabel('a'), {
            ingress: [{ from: [{ namespaceSelector: nsName(y) }], ports: [{ port: 'serve-80-tcp', protocol: 'TCP' }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) =>
            r
              .expectPeer({ namespace: x }, { namespace: x, pod: 'a' }, false)
              .expectPeer({ namespace: z }, { namespace: x, pod: 'a' }, false),
          ),
        ),
        probe(
          'TCP',
          81,
          reach((r) => r.expectAllIngress('x/a', false)),
        ),
      ],
    ),

    oneStep(
      'tcp-19',
      'should allow egress access on one named port',
      TCP,
      'x allows egress on named port serve-80-tcp only',
      [upsert(genPolicy(x, 'allow-egress', { matchLabels: {} }, { egress: [{ ports: [{ port: 'serve-80-tcp' }] }] }))],
      [
        probe('TCP', 80, reach()),
        probe(
          'TCP',
          81,
          reach((r) => r.expectPeer({ namespace: x }, {}, false)),
        ),
      ],
    ),

    {
      id: 'tcp-20',
      name: 'should enforce updated policy',
      protocols: TCP,
      steps: [
        {
          description: 'x allows all ingress',
          changes: [upsert(genPolicy(x, 'allow-all-mutate-to-deny-all', { matchLabels: {} }, { ingress: [{}] }))],
          probes: [probe('TCP', 81, reach())],
        },
        {
          description: 'the same policy is updated to ingress: []',
          changes: [upsert(genPolicy(x, 'allow-all-mutate-to-deny-all', { matchLabels: {} }, { ingress: [] }))],
          probes: [
            probe(
              'TCP',
              81,
              reach((r) => r.expectPeer({}, { namespace: x }, false)),
            ),
          ],
        },
      ],
    },

    {
      id: 'tcp-21',
      name: 'should allow ingress access from updated namespace',
      protocols: TCP,
      steps: [
        {
          description: 'x/a allows ingress from namespaces labelled ns2=updated (none yet)',
          changes: [
            upsert(
              genPolicy(x, 'allow-client-a-via-ns-selector', podLabel('a'), {
                ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns2: 'updated' } } }] }],
              }),
            ),
          ],
          probes: [
            probe(
              'TCP',
              80,
              reach((r) => r.expectAllIngress('x/a', false)),
            ),
          ],
        },
        {
          description: 'namespace y is labelled ns2=updated',
          changes: [{ type: 'labelNamespace', name: y, labels: { ns2: 'updated' } }],
          probes: [
            probe(
              'TCP',
              80,
              reach((r) => r.expectAllIngress('x/a', false).expectPeer({ namespace: y }, {}, true)),
            ),
          ],
        },
      ],
    },

    {
      id: 'tcp-22',
      name: 'should allow ingress access from updated pod',
      protocols: TCP,
      steps: [
        {
          description: 'x/a allows ingress from pod=b,pod2=updated (none yet)',
          changes: [
            upsert(
              genPolicy(x, 'allow-client-a-via-pod-selector', podLabel('a'), {
                ingress: [{ from: [{ podSelector: { matchLabels: { pod: 'b', pod2: 'updated' } } }] }],
              }),
            ),
          ],
          probes: [
            probe(
              'TCP',
              80,
              reach((r) => r.expectAllIngress('x/a', false)),
            ),
          ],
        },
        {
          description: 'x/b is labelled pod2=updated',
          changes: [{ type: 'labelPod', namespace: x, name: 'b', labels: { pod: 'b', pod2: 'updated' } }],
          probes: [
            probe(
              'TCP',
              80,
              reach((r) => r.expectAllIngress('x/a', false).expect('x/b', 'x/a', true)),
            ),
          ],
        },
      ],
    },

    oneStep(
      'tcp-23',
      'should deny ingress from pods on other namespaces',
      TCP,
      'x allows ingress from podSelector {} (its own namespace only)',
      [upsert(genPolicy(x, 'deny-empty-policy', everything, { ingress: [{ from: [{ podSelector: { matchLabels: {} } }] }] }))],
      [
        probe(
          'TCP',
          80,
          reach((r) =>
            r.expectPeer({ namespace: y }, { namespace: x }, false).expectPeer({ namespace: z }, { namespace: x }, false),
          ),
        ),
      ],
    ),

    {
      id: 'tcp-24',
      name: 'should deny ingress access to updated pod',
      protocols: TCP,
      steps: [
        {
          description: 'deny all ingress to target=isolated (no pod yet)',
          changes: [
            upsert(genPolicy(x, 'deny-ingress-via-label-selector', { matchLabels: { target: 'isolated' } }, { ingress: [] })),
          ],
          probes: [probe('TCP', 80, reach())],
        },
        {
          description: 'x/a is labelled target=isolated',
          changes: [{ type: 'labelPod', namespace: x, name: 'a', labels: { target: 'isolated' } }],
          probes: [
            probe(
              'TCP',
              80,
              reach((r) => r.expectAllIngress('x/a', false)),
            ),
          ],
        },
      ],
    },

    oneStep(
      'tcp-25',
      'should deny egress from pods based on PodSelector',
      TCP,
      'x/a: egress: []',
      [upsert(genPolicy(x, 'deny-egress-pod-a', podLabel('a'), { egress: [] }))],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expectAllEgress('x/a', false)),
        ),
      ],
    ),

    oneStep(
      'tcp-26',
      'should deny egress from all pods in a namespace',
      TCP,
      'x: egress: []',
      [upsert(genPolicy(x, 'deny-egress-ns-x', everything, { egress: [] }))],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expectPeer({ namespace: x }, {}, false)),
        ),
      ],
    ),

    oneStep(
      'tcp-27',
      'should work with Ingress, Egress specified together',
      TCP,
      'x/a allows ingress from pod=b and egress to port 80 (protocol defaulted)',
      [
        upsert(
          networkPolicy(x, 'allow-client-a-via-pod-selector', {
            podSelector: podLabel('a'),
            policyTypes: ['Egress', 'Ingress'],
            ingress: [{ from: [{ podSelector: podLabel('b') }] }],
            egress: [{ ports: [{ port: 80 }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expectAllIngress('x/a', false).expect('x/b', 'x/a', true)),
        ),
        probe(
          'TCP',
          81,
          reach((r) => r.expectAllIngress('x/a', false).expectAllEgress('x/a', false).expect('x/b', 'x/a', true)),
        ),
      ],
    ),

    oneStep(
      'tcp-28',
      'should support denying of egress traffic on the client side (even if the server explicitly allows this traffic)',
      TCP,
      'x/a egress only to (y AND pod=a); y/a and y/b ingress only from (x AND pod=a)',
      [
        upsert(
          genPolicy(x, 'allow-to-ns-y-pod-a', podLabel('a'), {
            egress: [{ to: [{ namespaceSelector: nsName(y), podSelector: podLabel('a') }] }],
          }),
        ),
        upsert(
          genPolicy(y, 'allow-from-xa-on-ya-match-selector', podLabel('a'), {
            ingress: [{ from: [{ namespaceSelector: nsName(x), podSelector: podLabel('a') }] }],
          }),
        ),
        upsert(
          genPolicy(y, 'allow-from-xa-on-yb-match-selector', podLabel('b'), {
            ingress: [{ from: [{ namespaceSelector: nsName(x), podSelector: podLabel('a') }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) =>
            r
              .expectPeer({ namespace: x, pod: 'a' }, {}, false)
              .expectPeer({}, { namespace: y, pod: 'a' }, false)
              .expectPeer({ namespace: x, pod: 'a' }, { namespace: y, pod: 'a' }, true)
              .expectPeer({}, { namespace: y, pod: 'b' }, false),
          ),
        ),
      ],
    ),

    oneStep(
      'tcp-29',
      'should enforce egress policy allowing traffic to a server in a different namespace based on PodSelector and NamespaceSelector',
      TCP,
      'x/a egress only to (y AND pod=a)',
      [
        upsert(
          genPolicy(x, 'allow-to-ns-y-pod-a', podLabel('a'), {
            egress: [{ to: [{ namespaceSelector: nsName(y), podSelector: podLabel('a') }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expectAllEgress('x/a', false).expect('x/a', 'y/a', true)),
        ),
      ],
    ),

    oneStep(
      'tcp-30',
      'should enforce ingress policy allowing any port traffic to a server on a specific protocol',
      ['TCP', 'UDP'],
      'x/a allows ingress on every TCP port',
      [upsert(genPolicy(x, 'allow-ingress-by-proto', podLabel('a'), { ingress: [{ ports: [{ protocol: 'TCP' }] }] }))],
      [
        probe('TCP', 80, reach()),
        probe(
          'UDP',
          80,
          reach((r) => r.expectPeer({}, { namespace: x, pod: 'a' }, false)),
        ),
      ],
    ),

    {
      id: 'tcp-31',
      name: 'should enforce multiple ingress policies with ingress allow-all policy taking precedence',
      protocols: TCP,
      steps: [
        {
          description: 'x allows ingress on port 80 only',
          changes: [upsert(genPolicy(x, 'allow-ingress-port-80', { matchLabels: {} }, { ingress: [{ ports: [{ port: 80 }] }] }))],
          probes: [
            probe(
              'TCP',
              81,
              reach((r) => r.expectPeer({}, { namespace: x }, false)),
            ),
          ],
        },
        {
          description: 'a second policy allows all ingress',
          changes: [upsert(genPolicy(x, 'allow-ingress', { matchLabels: {} }, { ingress: [{}] }))],
          probes: [probe('TCP', 81, reach())],
        },
      ],
    },

    {
      id: 'tcp-32',
      name: 'should enforce multiple egress policies with egress allow-all policy taking precedence',
      protocols: TCP,
      steps: [
        {
          description: 'x allows egress on port 80 only',
          changes: [upsert(genPolicy(x, 'allow-egress-port-80', { matchLabels: {} }, { egress: [{ ports: [{ port: 80 }] }] }))],
          probes: [
            probe(
              'TCP',
              81,
              reach((r) => r.expectPeer({ namespace: x }, {}, false)),
            ),
          ],
        },
        {
          description: 'a second policy allows all egress',
          changes: [upsert(genPolicy(x, 'allow-egress', { matchLabels: {} }, { egress: [{}] }))],
          probes: [probe('TCP', 81, reach())],
        },
      ],
    },

    {
      id: 'tcp-33',
      name: 'should stop enforcing policies after they are deleted',
      protocols: TCP,
      steps: [
        {
          description: 'deny all ingress and egress in x',
          changes: [upsert(genPolicy(x, 'deny-all', everything, { ingress: [], egress: [] }))],
          probes: [
            probe(
              'TCP',
              80,
              reach((r) => r.expectPeer({ namespace: x }, {}, false).expectPeer({}, { namespace: x }, false)),
            ),
          ],
        },
        {
          description: 'the policy is deleted',
          changes: [{ type: 'deletePolicy', namespace: x, name: 'deny-all' }],
          probes: [probe('TCP', 80, reach())],
        },
      ],
    },

    oneStep(
      'tcp-34',
      'should allow egress access to server in CIDR block',
      TCP,
      "x/a egress only to y/b's address (ipBlock /32 or /128)",
      [
        upsert(
          genPolicy(x, 'allow-client-a-via-cidr-egress-rule', podLabel('a'), {
            egress: [{ to: [{ ipBlock: { cidr: hostCIDR(ip(y, 'b')) } }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expectAllEgress('x/a', false).expect('x/a', 'y/b', true)),
        ),
      ],
    ),

    oneStep(
      'tcp-35',
      'should enforce except clause while egress access to server in CIDR block',
      TCP,
      "x/a egress to the /4 around x/b's address, except x/b",
      [
        upsert(
          genPolicy(x, 'allow-client-a-via-cidr-egress-rule', podLabel('a'), {
            egress: [{ to: [{ ipBlock: { cidr: largeCIDRFor(ip(x, 'b')), except: [hostCIDR(ip(x, 'b'))] } }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expect('x/a', 'x/b', false)),
        ),
      ],
    ),

    {
      id: 'tcp-36',
      name: 'should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed',
      protocols: TCP,
      steps: [
        {
          description: "x/a egress to the /4 around x/b's address, except x/b",
          changes: [
            upsert(
              genPolicy(x, 'allow-client-a-via-cidr-egress-rule', podLabel('a'), {
                egress: [{ to: [{ ipBlock: { cidr: largeCIDRFor(ip(x, 'b')), except: [hostCIDR(ip(x, 'b'))] } }] }],
              }),
            ),
          ],
          probes: [
            probe(
              'TCP',
              80,
              reach((r) => r.expect('x/a', 'x/b', false)),
            ),
          ],
        },
        {
          description: "the same policy is updated to egress only to x/b's address",
          changes: [
            upsert(
              genPolicy(x, 'allow-client-a-via-cidr-egress-rule', podLabel('a'), {
                egress: [{ to: [{ ipBlock: { cidr: hostCIDR(ip(x, 'b')) } }] }],
              }),
            ),
          ],
          probes: [
            probe(
              'TCP',
              80,
              reach((r) => r.expectAllEgress('x/a', false).expect('x/a', 'x/b', true)),
            ),
          ],
        },
      ],
    },

    {
      id: 'tcp-37',
      name: 'should enforce policies to check ingress and egress policies can be controlled independently based on PodSelector',
      protocols: TCP,
      steps: [
        {
          description: 'x/a allows all egress',
          changes: [upsert(genPolicy(x, 'allow-egress-for-target', podLabel('a'), { egress: [{}] }))],
          probes: [probe('TCP', 80, reach())],
        },
        {
          description: 'a second policy denies all ingress to x/a',
          changes: [upsert(genPolicy(x, 'deny-ingress-via-label-selector', podLabel('a'), { ingress: [] }))],
          probes: [
            probe(
              'TCP',
              80,
              reach((r) => r.expectAllIngress('x/a', false)),
            ),
          ],
        },
      ],
    },

    oneStep(
      'tcp-38',
      "should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP', even if the plugin doesn't support SCTP",
      TCP,
      'deny all ingress in x, then allow SCTP 81 into x/a',
      [
        upsert(genPolicy(x, 'deny-ingress', everything, { ingress: [] })),
        upsert(
          genPolicy(x, 'allow-only-sctp-ingress-on-port-81', podLabel('a'), {
            ingress: [{ ports: [{ port: 81, protocol: 'SCTP' }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          81,
          reach((r) => r.expectPeer({}, { namespace: x }, false)),
        ),
      ],
    ),

    oneStep(
      'tcp-39',
      "should properly isolate pods that are selected by a policy allowing SCTP, even if the plugin doesn't support SCTP",
      TCP,
      'x/a allows SCTP 80 only',
      [
        upsert(
          genPolicy(x, 'allow-only-sctp-ingress-on-port-80', podLabel('a'), {
            ingress: [{ ports: [{ port: 80, protocol: 'SCTP' }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          81,
          reach((r) => r.expectAllIngress('x/a', false)),
        ),
      ],
    ),

    oneStep(
      'tcp-40',
      'should not allow access by TCP when a policy specifies only UDP',
      TCP,
      'x/a allows UDP 81 only',
      [
        upsert(
          genPolicy(x, 'allow-only-udp-ingress-on-port-81', podLabel('a'), {
            ingress: [{ ports: [{ port: 81, protocol: 'UDP' }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          81,
          reach((r) => r.expectAllIngress('x/a', false)),
        ),
      ],
    ),

    oneStep(
      'tcp-41',
      'should enforce policy to allow traffic based on NamespaceSelector with MatchLabels using default ns label',
      TCP,
      'x/a allows ingress from kubernetes.io/metadata.name=y',
      [
        upsert(
          genPolicy(x, 'allow-client-a-via-ns-selector-for-immutable-ns-label', podLabel('a'), {
            ingress: [{ from: [{ namespaceSelector: nsName(y) }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) =>
            r
              .expectPeer({ namespace: x }, { namespace: x, pod: 'a' }, false)
              .expectPeer({ namespace: z }, { namespace: x, pod: 'a' }, false),
          ),
        ),
      ],
    ),

    oneStep(
      'tcp-42',
      'should enforce policy based on NamespaceSelector with MatchExpressions using default ns label',
      TCP,
      'x/a egress only to namespaces NotIn [y]',
      [
        upsert(
          genPolicy(x, 'allow-ns-y-match-selector-for-immutable-ns-label', podLabel('a'), {
            egress: [{ to: [{ namespaceSelector: expr(NAMESPACE_NAME_LABEL, 'NotIn', [y]) }] }],
          }),
        ),
      ],
      [
        probe(
          'TCP',
          80,
          reach((r) => r.expectPeer({ namespace: x, pod: 'a' }, { namespace: y }, false)),
        ),
      ],
    ),
  ];
}

function stackedPolicies(): UpstreamCase {
  const fromY = (port: number): RawIngressRule => ({
    from: [{ namespaceSelector: nsName(y) }],
    ports: [{ port, protocol: 'TCP' }],
  });
  const allowYOnly = () =>
    reach((r) =>
      r
        .expectPeer({ namespace: x }, { namespace: x, pod: 'a' }, false)
        .expectPeer({ namespace: y }, { namespace: x, pod: 'a' }, true)
        .expectPeer({ namespace: z }, { namespace: x, pod: 'a' }, false),
    );
  return {
    id: 'tcp-15',
    name: 'should enforce multiple, stacked policies with overlapping podSelectors',
    protocols: ['TCP'],
    steps: [
      {
        description: 'x/a allows namespace y on TCP 81',
        changes: [upsert(genPolicy(x, 'allow-client-a-via-ns-selector', podLabel('a'), { ingress: [fromY(81)] }))],
        probes: [
          probe('TCP', 81, allowYOnly()),
          probe(
            'TCP',
            80,
            reach((r) => r.expectAllIngress('x/a', false)),
          ),
        ],
      },
      {
        description: 'a second policy allows namespace y on TCP 80 (union)',
        changes: [upsert(genPolicy(x, 'allow-client-a-via-ns-selector-80', podLabel('a'), { ingress: [fromY(80)] }))],
        probes: [probe('TCP', 80, allowYOnly())],
      },
    ],
  };
}

/** The three cases upstream repeats for UDP ("Netpol [LinuxOnly]") and SCTP ("[Feature:SCTPConnectivity]"). */
function protocolCases(protocol: 'UDP' | 'SCTP'): UpstreamCase[] {
  const p = protocol.toLowerCase();
  return [
    oneStep(
      `${p}-01`,
      "should support a 'default-deny-ingress' policy",
      [protocol],
      'deny all ingress in x',
      [upsert(genPolicy(x, 'deny-all', everything, { ingress: [] }))],
      [
        probe(
          protocol,
          80,
          reach((r) => r.expectPeer({}, { namespace: x }, false)),
        ),
      ],
    ),
    oneStep(
      `${p}-02`,
      'should enforce policy based on Ports',
      [protocol],
      `x/a allows namespace y on ${protocol} 81`,
      [
        upsert(
          genPolicy(x, 'allow-ingress-on-port-81-ns-x', podLabel('a'), {
            ingress: [{ from: [{ namespaceSelector: nsName(y) }], ports: [{ port: 81, protocol }] }],
          }),
        ),
      ],
      [
        probe(
          protocol,
          81,
          reach((r) =>
            r
              .expectPeer({ namespace: x }, { namespace: x, pod: 'a' }, false)
              .expectPeer({ namespace: z }, { namespace: x, pod: 'a' }, false),
          ),
        ),
      ],
    ),
    oneStep(
      `${p}-03`,
      'should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector',
      [protocol],
      'x/a allows ingress from (namespace y AND pod=a)',
      [
        upsert(
          genPolicy(x, 'allow-ns-y-pod-a-via-namespace-pod-selector', podLabel('a'), {
            ingress: [{ from: [{ namespaceSelector: nsName(y), podSelector: podLabel('a') }] }],
          }),
        ),
      ],
      [
        probe(
          protocol,
          80,
          reach((r) => r.expectAllIngress('x/a', false).expect('y/a', 'x/a', true)),
        ),
      ],
    ),
  ];
}

/** All 48 cases: tcp-01..42, udp-01..03, sctp-01..03. */
export function upstreamCases(ctx: CaseContext = defaultCaseContext()): UpstreamCase[] {
  return [...tcpCases(ctx), ...protocolCases('UDP'), ...protocolCases('SCTP')];
}

function mergeLabels(obj: RawObject, labels: Readonly<Record<string, string | null>>): RawObject {
  const merged: Record<string, string> = { ...obj.metadata.labels };
  for (const [k, v] of Object.entries(labels)) {
    if (v === null) delete merged[k];
    else merged[k] = v;
  }
  return { ...obj, metadata: { ...obj.metadata, labels: merged } };
}

const sameObject = (o: RawObject, kind: string, namespace: string | undefined, name: string): boolean =>
  o.kind === kind && o.metadata.name === name && (namespace === undefined || o.metadata.namespace === namespace);

/**
 * The raw objects after `changes`, in order (a pure helper for tests; the
 * datapath harness applies the same changes to its API server instead).
 * Changes to objects that don't exist throw: the case data would be wrong.
 */
export function applyChanges(objects: readonly RawObject[], changes: readonly Change[]): RawObject[] {
  let out = [...objects];
  const mustFind = (kind: string, namespace: string | undefined, name: string): void => {
    if (!out.some((o) => sameObject(o, kind, namespace, name)))
      throw new Error(`no ${kind} ${namespace === undefined ? '' : `${namespace}/`}${name} to change`);
  };
  for (const c of changes) {
    switch (c.type) {
      case 'upsertPolicy': {
        const { namespace, name } = c.policy.metadata;
        out = [...out.filter((o) => !sameObject(o, 'NetworkPolicy', namespace, name)), c.policy];
        break;
      }
      case 'deletePolicy':
        mustFind('NetworkPolicy', c.namespace, c.name);
        out = out.filter((o) => !sameObject(o, 'NetworkPolicy', c.namespace, c.name));
        break;
      case 'labelNamespace':
        mustFind('Namespace', undefined, c.name);
        out = out.map((o) => (sameObject(o, 'Namespace', undefined, c.name) ? mergeLabels(o, c.labels) : o));
        break;
      case 'labelPod':
        mustFind('Pod', c.namespace, c.name);
        out = out.map((o) => (sameObject(o, 'Pod', c.namespace, c.name) ? mergeLabels(o, c.labels) : o));
        break;
    }
  }
  return out;
}
