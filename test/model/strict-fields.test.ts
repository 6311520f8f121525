// Strict field checks (src/model/field-tree.ts): unknown fields are errors
// with the API server's path and words; real objects as kubectl prints them
// never are.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { object, ANY, listOf, openObject, unknownFields } from '../../src/model/field-tree.ts';
import { buildState, FIELD_TREES } from '../../src/model/normalize.ts';
import { formatValidationError } from '../../src/model/types.ts';

const misspelled = parse(`
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db, namespace: shop, lables: {a: b}}
spec:
  podselector: {matchLabels: {app: db}}
  ingres:
  - from: [{podSelector: {}}]
  egress:
  - to:
    - podSelector: {matchExpressions: [{key: a, operator: Exists, value: [x]}]}
    - ipBlock: {cidr: 10.0.0.0/8, excepts: [10.1.0.0/16]}
    ports: [{prot: UDP, port: 53}]
`) as unknown;

test('a NetworkPolicy with misspelled fields: each is an error with its path, as the API server words it', () => {
  const { errors, warnings } = buildState([misspelled], { unknownFields: 'error' });
  assert.deepEqual(warnings, []);
  assert.deepEqual(errors.map(formatValidationError), [
    'shop/db metadata.lables: unknown field "metadata.lables"',
    'shop/db spec.podselector: unknown field "spec.podselector"',
    'shop/db spec.ingres: unknown field "spec.ingres"',
    'shop/db spec.egress[0].to[0].podSelector.matchExpressions[0].value: unknown field "spec.egress[0].to[0].podSelector.matchExpressions[0].value"',
    'shop/db spec.egress[0].to[1].ipBlock.excepts: unknown field "spec.egress[0].to[1].ipBlock.excepts"',
    'shop/db spec.egress[0].ports[0].prot: unknown field "spec.egress[0].ports[0].prot"',
  ]);
});

test('unknown fields are warnings when asked, and not looked for by default (objects from an API server)', () => {
  const warn = buildState([misspelled], { unknownFields: 'warn' });
  assert.deepEqual(warn.errors, []);
  assert.equal(warn.warnings.length, 6);
  assert.equal(warn.warnings[1]?.path, 'spec.podselector');
  const plain = buildState([misspelled]);
  assert.deepEqual(plain.errors, []);
  assert.deepEqual(plain.warnings, []);
  // The policy itself reads the same in every mode.
  assert.deepEqual(warn.state, plain.state);
});

test('every kind read from files has a field tree that catches a top-level and a metadata typo', () => {
  const kinds: [string, string][] = [
    ['Namespace', 'v1'],
    ['Pod', 'v1'],
    ['NetworkPolicy', 'networking.k8s.io/v1'],
    ['Node', 'v1'],
    ['Workspace', 'tenant.kubesphere.io/v1alpha1'],
    ['WorkspaceTemplate', 'tenant.kubesphere.io/v1alpha2'],
    ['NamespaceNetworkPolicy', 'network.kubesphere.io/v1alpha1'],
    ['Service', 'v1'],
    ['ClusterNetworkPolicy', 'policy.networking.k8s.io/v1alpha2'],
    ['AdminNetworkPolicy', 'policy.networking.k8s.io/v1alpha1'],
    ['BaselineAdminNetworkPolicy', 'policy.networking.k8s.io/v1alpha1'],
  ];
  assert.deepEqual(Object.keys(FIELD_TREES).sort(), kinds.map(([k]) => k).sort());
  for (const [kind, apiVersion] of kinds) {
    const obj = { apiVersion, kind, metadata: { name: 'x', namespace: 'y', labelz: {} }, sepc: {} };
    const { errors } = buildState([obj], { unknownFields: 'error' });
    assert.deepEqual(
      errors.filter((e) => e.message.startsWith('unknown field')).map((e) => e.path),
      ['metadata.labelz', 'sepc'],
      kind,
    );
  }
});

test('the parts each kind reads are checked: tenancy peers, service ports, container ports, node addresses, lists', () => {
  const objs = [
    {
      apiVersion: 'network.kubesphere.io/v1alpha1',
      kind: 'NamespaceNetworkPolicy',
      metadata: { name: 'n', namespace: 'shop' },
      spec: { ingress: [{ from: [{ namespace: { name: 'a', nmae: 'b' } }, { service: { name: 's', namespce: 'x' } }] }] },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 's', namespace: 'shop' },
      spec: { selector: { app: 'x' }, ports: [{ port: 80, targetport: 8080 }] },
    },
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'p', namespace: 'shop' },
      spec: { containers: [{ name: 'c', ports: [{ containerport: 80 }] }] },
      status: { podIPs: [{ address: '10.0.0.1' }] },
    },
    {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'n1' },
      status: { addresses: [{ type: 'InternalIP', adress: '1.2.3.4' }] },
    },
    {
      apiVersion: 'tenant.kubesphere.io/v1alpha2',
      kind: 'WorkspaceTemplate',
      metadata: { name: 'w' },
      spec: { template: { spec: { networkIsolaton: true } } },
    },
    { apiVersion: 'v1', kind: 'List', itemz: [] },
  ];
  const { errors } = buildState(objs, { unknownFields: 'error' });
  assert.deepEqual(
    errors.filter((e) => e.message.startsWith('unknown field')).map((e) => `${e.kind} ${e.path}`),
    [
      'NamespaceNetworkPolicy spec.ingress[0].from[0].namespace.nmae',
      'NamespaceNetworkPolicy spec.ingress[0].from[1].service.namespce',
      'Service spec.ports[0].targetport',
      'Pod spec.containers[0].ports[0].containerport',
      'Pod status.podIPs[0].address',
      'Node status.addresses[0].adress',
      'WorkspaceTemplate spec.template.spec.networkIsolaton',
      'List itemz',
    ],
  );
});

// kubectl get -o yaml output of a busy cluster: every real field of the parts
// the project reads, and plenty it does not read. None may be flagged.
const REAL = `
apiVersion: v1
kind: List
metadata: {resourceVersion: "", selfLink: ""}
items:
- apiVersion: v1
  kind: Namespace
  metadata:
    creationTimestamp: "2026-01-01T00:00:00Z"
    labels: {kubernetes.io/metadata.name: shop}
    name: shop
    resourceVersion: "12"
    uid: 0c5e-1
    managedFields:
    - {apiVersion: v1, fieldsType: FieldsV1, fieldsV1: {f:metadata: {}}, manager: kubectl, operation: Update, time: "2026-01-01T00:00:00Z"}
  spec: {finalizers: [kubernetes]}
  status: {phase: Active}
- apiVersion: v1
  kind: Pod
  metadata:
    annotations: {a: b}
    creationTimestamp: "2026-01-01T00:00:00Z"
    generateName: web-5c8b7-
    labels: {app: web, pod-template-hash: 5c8b7}
    name: web-5c8b7-abcde
    namespace: shop
    ownerReferences:
    - {apiVersion: apps/v1, blockOwnerDeletion: true, controller: true, kind: ReplicaSet, name: web-5c8b7, uid: u-1}
    resourceVersion: "99"
    uid: u-2
    finalizers: [x/y]
    deletionGracePeriodSeconds: 30
  spec:
    affinity: {nodeAffinity: {}}
    automountServiceAccountToken: false
    containers:
    - args: [a]
      command: [b]
      env: [{name: A, value: b}]
      envFrom: []
      image: registry.example/web:1
      imagePullPolicy: IfNotPresent
      lifecycle: {}
      livenessProbe: {httpGet: {path: /, port: http}}
      name: web
      ports:
      - {containerPort: 8080, name: http, protocol: TCP, hostPort: 80, hostIP: 0.0.0.0}
      readinessProbe: {}
      resizePolicy: []
      resources: {limits: {cpu: "1"}}
      securityContext: {runAsNonRoot: true}
      startupProbe: {}
      stdin: false
      terminationMessagePath: /dev/termination-log
      terminationMessagePolicy: File
      volumeMounts: [{mountPath: /x, name: v}]
      workingDir: /
    dnsPolicy: ClusterFirst
    enableServiceLinks: true
    hostNetwork: false
    initContainers:
    - {name: proxy, image: envoy, restartPolicy: Always, ports: [{containerPort: 9901, name: envoy-admin}]}
    nodeName: node-1
    preemptionPolicy: PreemptLowerPriority
    priority: 0
    restartPolicy: Always
    schedulerName: default-scheduler
    securityContext: {}
    serviceAccount: default
    serviceAccountName: default
    terminationGracePeriodSeconds: 30
    tolerations: [{effect: NoExecute, key: node.kubernetes.io/not-ready, operator: Exists, tolerationSeconds: 300}]
    topologySpreadConstraints: []
    volumes: [{name: v, emptyDir: {}}]
    someFieldOfAFutureRelease: {}
  status:
    conditions: [{type: Ready, status: "True"}]
    containerStatuses: [{name: web, ready: true, restartCount: 0}]
    hostIP: 192.168.1.10
    hostIPs: [{ip: 192.168.1.10}]
    phase: Running
    podIP: 10.0.1.5
    podIPs: [{ip: 10.0.1.5}, {ip: "fd00::5"}]
    qosClass: BestEffort
    startTime: "2026-01-01T00:00:00Z"
- apiVersion: v1
  kind: Node
  metadata: {name: node-1, labels: {kubernetes.io/hostname: node-1}, annotations: {}}
  spec: {podCIDR: 10.0.1.0/24, podCIDRs: [10.0.1.0/24], providerID: "kind://x", taints: [], unschedulable: false}
  status:
    addresses: [{address: 192.168.1.10, type: InternalIP}, {address: node-1, type: Hostname}]
    allocatable: {cpu: "2"}
    capacity: {cpu: "2"}
    conditions: []
    daemonEndpoints: {kubeletEndpoint: {Port: 10250}}
    images: []
    nodeInfo: {kubeletVersion: v1.31.0}
    runtimeHandlers: []
    features: {}
- apiVersion: v1
  kind: Service
  metadata: {name: web, namespace: shop}
  spec:
    clusterIP: 10.96.0.10
    clusterIPs: [10.96.0.10]
    internalTrafficPolicy: Cluster
    ipFamilies: [IPv4]
    ipFamilyPolicy: SingleStack
    ports: [{name: http, port: 80, protocol: TCP, targetPort: http, appProtocol: http, nodePort: 30080}]
    selector: {app: web}
    sessionAffinity: None
    type: NodePort
  status: {loadBalancer: {}}
- apiVersion: networking.k8s.io/v1
  kind: NetworkPolicy
  metadata: {name: web, namespace: shop, generation: 1}
  spec:
    podSelector: {matchLabels: {app: web}, matchExpressions: [{key: tier, operator: In, values: [a]}]}
    policyTypes: [Ingress, Egress]
    ingress:
    - from:
      - podSelector: {}
        namespaceSelector: {matchLabels: {team: a}}
      - ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}
      ports: [{protocol: TCP, port: 8000, endPort: 9000}]
    egress:
    - to: [{namespaceSelector: {}}]
      ports: [{port: dns, protocol: UDP}]
  status: {conditions: []}
- apiVersion: network.kubesphere.io/v1alpha1
  kind: NamespaceNetworkPolicy
  metadata: {name: n, namespace: shop}
  spec:
    policyTypes: [Ingress, Egress]
    ingress:
    - from: [{namespace: {name: a}}, {ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}}]
      ports: [{protocol: TCP, port: 80, endPort: 90}]
    egress:
    - to: [{service: {name: web, namespace: shop}}]
- apiVersion: tenant.kubesphere.io/v1alpha1
  kind: Workspace
  metadata: {name: acme}
  spec: {manager: admin, networkIsolation: true}
  status: {}
- apiVersion: tenant.kubesphere.io/v1alpha2
  kind: WorkspaceTemplate
  metadata: {name: acme2}
  spec:
    template: {metadata: {labels: {a: b}}, spec: {manager: admin, networkIsolation: true}}
    placement: {clusterSelector: {}}
    overrides: []
`;

test('real objects as kubectl prints them (status, managedFields, every real field) are never flagged', async () => {
  const { errors } = buildState([parse(REAL)], { unknownFields: 'error' });
  assert.deepEqual(errors, []);
  // The bundled examples too.
  const { loadManifests } = await import('../../src/model/load.ts');
  const loaded = await loadManifests(['examples']);
  assert.deepEqual(buildState(loaded.objects, { unknownFields: 'error' }).errors, []);
});

test('unknownFields: closed, open and list trees; wrong types are left to the normalizers', () => {
  const tree = object({ a: ANY, b: listOf(object({ c: ANY })), d: openObject({ e: object({}) }) });
  assert.deepEqual(unknownFields({ a: 1, b: [{ c: 1 }, { x: 1 }], d: { free: 1, e: { y: null } }, z: null }, tree), [
    'b[1].x',
    'd.e.y',
    'z',
  ]);
  assert.deepEqual(unknownFields({ b: 'not a list', d: [] }, tree), []);
  // Own fields only: an inherited name is not a known field.
  assert.deepEqual(unknownFields(JSON.parse('{"constructor": 1, "__proto__": 2}'), object({})), ['constructor', '__proto__']);
});

test('the API-server path never checks fields: only the CLI passes unknownFields', async () => {
  for (const f of ['src/kube/kube-source.ts', 'src/kube/resource-watch.ts', 'src/kube/file-source.ts']) {
    const text = await readFile(f, 'utf8');
    assert.doesNotMatch(text, /unknownFields|field-tree/, f);
  }
});

test('ClusterNetworkPolicy and the legacy admin kinds: unknown fields are errors; every example passes', async () => {
  const cnp = parse(`
apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: guard}
spec:
  tier: Admin
  priority: 10
  subject: {namespaces: {}}
  ingres:
  - {action: Deny, from: [{namespaces: {}}]}
  egress:
  - action: Deny
    to: [{networks: [169.254.169.254/32]}]
    protocols: [{tcp: {destinationPort: {nummber: 80}}}]
  - action: Accept
    to: [{pods: {namespaceSelector: {}, podselector: {}}}]
`) as unknown;
  const anp = parse(`
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: old}
spec:
  priority: 3
  subject: {namespaces: {}}
  ingress:
  - {action: Allow, from: [{namespaces: {}}], ports: [{portNumber: {protocol: TCP, port: 80, extra: 1}}]}
`) as unknown;
  const { errors } = buildState([cnp, anp], { unknownFields: 'error' });
  assert.deepEqual(errors.filter((e) => e.message.startsWith('unknown field')).map(formatValidationError), [
    'guard spec.ingres: unknown field "spec.ingres"',
    'guard spec.egress[0].protocols[0].tcp.destinationPort.nummber: unknown field "spec.egress[0].protocols[0].tcp.destinationPort.nummber"',
    'guard spec.egress[1].to[0].pods.podselector: unknown field "spec.egress[1].to[0].pods.podselector"',
    'old spec.ingress[0].ports[0].portNumber.extra: unknown field "spec.ingress[0].ports[0].portNumber.extra"',
  ]);
  const examples = parse(
    await readFile('examples/cluster-network-policies.yaml', 'utf8').then(
      (t) =>
        `[${t
          .split(/^---$/m)
          .map((d) => JSON.stringify(parse(d)))
          .join(',')}]`,
    ),
  ) as unknown[];
  assert.deepEqual(
    buildState(
      examples.filter((o) => o !== null),
      { unknownFields: 'error' },
    ).errors,
    [],
  );
});
