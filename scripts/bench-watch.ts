// What watching costs one node's agent as the cluster grows: memory after the
// initial sync, objects cached, and watch events received while the whole
// cluster churns; the selective design (src/kube) against cluster-wide watches.
//
//   node scripts/bench-watch.ts [--sizes 1000:100:50,10000:1000:500,100000:10000:5000]
//                               [--churn 2000] [--modes naive-informers,all-pods,selective,selective-unbounded]
//                               [--mix gen,local]
//   node scripts/bench-watch.ts --fleet 1000 --sizes 150000:15000:7500 --pods-per-node 30
//       what the API server sends a fleet of agents (see fleet() below): one JSON line per size and mix
//
// Each size runs the in-repo fake API server in a child process, loaded with
// scripts/gen-cluster.ts's seeded cluster (pods:policies:namespaces; 110 pods
// per node; pods padded to a real pod's ~5 KB). Mixes: 'gen' is its policy
// mix as is, with cluster-wide peers (every frontend of every namespace) and
// team namespaceSelectors; 'local' drops those policies, leaving
// namespace-scoped microservice policies plus DNS and monitoring peers. Each mode then runs in its own child process (--expose-gc, so its
// RSS and heap are its own; with the agent's memory settings, RUNTIME below): it syncs, is measured, and counts the objects it
// receives while the server applies the same churn to random pods cluster-wide
// (half label changes, half delete + re-create). Modes:
//   naive-informers      plain client-node informers on all pods, namespaces,
//                        policies and nodes, caching raw objects
//   all-pods             KubeClusterSource with remotePods=all: one cluster-wide
//                        pod watch, normalized envelopes only
//   selective            KubeClusterSource as shipped (peer watches, bound 32)
//   selective-unbounded  the same without the bound: what the node really needs
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import { createInterface } from 'node:readline';
import type { Interface } from 'node:readline';
import { CoreV1Api, ListWatch, NetworkingV1Api, Watch } from '@kubernetes/client-node';
import type { KubernetesObject } from '@kubernetes/client-node';
import { KubeClusterSource } from '../src/kube/kube-source.ts';
import { planPeerWatches } from '../src/kube/peer-demand.ts';
import type { Pod } from '../src/model/types.ts';
import type { KubeSourceOptions } from '../src/kube/kube-source.ts';
import { FakeApiServer, labelsMatch, makeKubeConfig, parseLabelSelector } from '../test/support/fake-apiserver.ts';
import type { KubeObject } from '../test/support/fake-apiserver.ts';
import { clusterObjects, generateCluster, rng } from './gen-cluster.ts';
import { scriptArgs } from './script-args.ts';

const MODES = ['naive-informers', 'all-pods', 'selective', 'selective-unbounded'] as const;
type Mode = (typeof MODES)[number];
const MIXES = ['gen', 'local'] as const;
type Mix = (typeof MIXES)[number];

const MB = 1024 * 1024;

/**
 * The runtime settings the agent ships with (daemonset/daemonset.yaml env,
 * as scripts/bench-agent.ts): measured modes run with them, so that RSS is
 * what a node would see. (The heap limit is left out: the naive mode would
 * not fit in it at 100k pods.)
 */
const RUNTIME = { nodeArgs: ['--max-semi-space-size=8'], env: { MALLOC_ARENA_MAX: '2' } };

function send(obj: unknown): void {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

// ------------------------------------------------------------ role: server

/**
 * The fields a real Pod carries besides what the engine reads (managedFields,
 * owner, volumes, conditions, container statuses...): about 5 KB of JSON, as
 * `kubectl get pod -o json` shows for a plain Deployment pod. Without them a
 * naive cache would look far cheaper than it is.
 */
function realistic(o: KubeObject): KubeObject {
  const meta = o.metadata;
  const spec = (o.spec ?? {}) as Record<string, unknown>;
  const status = (o.status ?? {}) as Record<string, unknown>;
  const ts = '2026-11-01T10:00:00Z';
  const containers = ((spec.containers ?? []) as Record<string, unknown>[]).map((c): Record<string, unknown> => ({
    ...c,
    imagePullPolicy: 'IfNotPresent',
    resources: { limits: { cpu: '500m', memory: '256Mi' }, requests: { cpu: '100m', memory: '128Mi' } },
    env: [
      { name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } },
      { name: 'LOG_LEVEL', value: 'info' },
    ],
    volumeMounts: [{ name: 'kube-api-access', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true }],
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
    readinessProbe: {
      httpGet: { path: '/healthz', port: 8080, scheme: 'HTTP' },
      periodSeconds: 10,
      timeoutSeconds: 1,
      successThreshold: 1,
      failureThreshold: 3,
    },
  }));
  const fields = (prefix: string): Record<string, unknown> =>
    Object.fromEntries(
      [
        'f:labels',
        'f:ownerReferences',
        'f:containers',
        'f:dnsPolicy',
        'f:restartPolicy',
        'f:volumes',
        'f:conditions',
        'f:podIPs',
      ].map((k) => [k, { '.': {}, [`${prefix}${k}`]: {} }]),
    );
  return {
    ...o,
    metadata: {
      ...meta,
      generateName: `${meta.name.replace(/-[^-]*$/, '')}-`,
      annotations: { 'kubectl.kubernetes.io/restartedAt': ts, 'prometheus.io/scrape': 'true' },
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: `${meta.name}-rs`,
          uid: '3f1c6b1e-8d1a-4c55-9a53-1d3c1c7b9e11',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
      managedFields: [
        {
          manager: 'kube-controller-manager',
          operation: 'Update',
          apiVersion: 'v1',
          time: ts,
          fieldsType: 'FieldsV1',
          fieldsV1: { 'f:metadata': fields('m'), 'f:spec': fields('s') },
        },
        {
          manager: 'kubelet',
          operation: 'Update',
          apiVersion: 'v1',
          time: ts,
          fieldsType: 'FieldsV1',
          subresource: 'status',
          fieldsV1: { 'f:status': fields('st') },
        },
      ],
    },
    spec: {
      ...spec,
      containers,
      dnsPolicy: 'ClusterFirst',
      enableServiceLinks: true,
      preemptionPolicy: 'PreemptLowerPriority',
      priority: 0,
      restartPolicy: 'Always',
      schedulerName: 'default-scheduler',
      securityContext: {},
      serviceAccount: 'default',
      serviceAccountName: 'default',
      terminationGracePeriodSeconds: 30,
      tolerations: [
        { effect: 'NoExecute', key: 'node.kubernetes.io/not-ready', operator: 'Exists', tolerationSeconds: 300 },
        { effect: 'NoExecute', key: 'node.kubernetes.io/unreachable', operator: 'Exists', tolerationSeconds: 300 },
      ],
      volumes: [
        {
          name: 'kube-api-access',
          projected: {
            defaultMode: 420,
            sources: [
              { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
              { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
              {
                downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] },
              },
            ],
          },
        },
      ],
    },
    status: {
      ...status,
      conditions: ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map((type) => ({
        type,
        status: 'True',
        lastProbeTime: null,
        lastTransitionTime: ts,
      })),
      containerStatuses: containers.map((c) => ({
        name: c.name,
        ready: true,
        restartCount: 0,
        started: true,
        image: c.image,
        imageID: `${String(c.image)}@sha256:9d3c1c7b9e113f1c6b1e8d1a4c559a531d3c1c7b9e113f1c6b1e8d1a4c559a53`,
        containerID: 'containerd://5e0c1d6e3b2a4f7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e',
        lastState: {},
        state: { running: { startedAt: ts } },
      })),
      hostIP: '172.16.0.1',
      hostIPs: [{ ip: '172.16.0.1' }],
      qosClass: 'Burstable',
      startTime: ts,
    },
  };
}

/** Policies of gen-cluster whose peers reach into other namespaces (dropped by the 'local' mix). */
const CROSS_NAMESPACE = /^(allow-all-frontends|allow-team|expressions)-/;

async function serve(pods: number, policies: number, namespaces: number, mix: Mix): Promise<void> {
  const t0 = performance.now();
  const generated = generateCluster({ pods, policies, namespaces, seed: 1 });
  const cluster =
    mix === 'local'
      ? {
          ...generated,
          state: { ...generated.state, policies: generated.state.policies.filter((p) => !CROSS_NAMESPACE.test(p.name)) },
        }
      : generated;
  const api = await FakeApiServer.start({ bookmarkIntervalMs: 0, maxLogEntries: 2_000_000 });
  api.load((clusterObjects(cluster) as KubeObject[]).map((o) => (o.kind === 'Pod' ? realistic(o) : o)));
  const keys = cluster.state.pods.map((p) => [p.namespace, p.name] as const);
  const node = cluster.nodes[0] ?? 'node-00000';
  const sample = keys[0] === undefined ? undefined : api.get('pods', keys[0][0], keys[0][1]);
  send({
    url: api.url,
    node,
    policies: cluster.state.policies.length,
    loadMs: Math.round(performance.now() - t0),
    rv: api.resourceVersion,
    podBytes: JSON.stringify(sample ?? {}).length,
  });
  for await (const line of createInterface({ input: process.stdin })) {
    const [cmd, a, b] = line.split(' ');
    if (cmd === 'churn') {
      const n = Number(a);
      const rand = rng(Number(b));
      const rv0 = api.resourceVersion;
      for (let i = 0; i < n; i++) {
        const k = keys[Math.floor(rand() * keys.length)];
        if (k === undefined) continue;
        if (rand() < 0.5) {
          api.patchLabels('pods', k[0], k[1], { churn: String(i) });
        } else {
          const o = api.get('pods', k[0], k[1]);
          if (o === undefined) continue;
          api.delete('pods', k[0], k[1]);
          delete o.metadata.resourceVersion;
          api.create('pods', o);
        }
      }
      send({ done: true, events: api.resourceVersion - rv0 });
    } else if (cmd === 'exit') break;
  }
  await api.close();
  process.exit(0);
}

// ------------------------------------------------------------ role: measured agent

interface Measured {
  synced(): boolean;
  received(): number;
  objects(): number;
  watches(): number;
  note(): string;
  stop(): Promise<void>;
}

/** What a straightforward agent would do: informers on everything, raw objects cached. */
function naive(url: string): Measured {
  const kc = makeKubeConfig(url);
  const core = kc.makeApiClient(CoreV1Api);
  const net = kc.makeApiClient(NetworkingV1Api);
  let received = 0;
  const listed = new Set<string>();
  const make = (name: string, path: string, list: () => Promise<{ items: KubernetesObject[] }>): ListWatch<KubernetesObject> => {
    const inf = new ListWatch<KubernetesObject>(
      path,
      new Watch(kc),
      async () => {
        const r = await list();
        setImmediate(() => listed.add(name));
        return r;
      },
      false,
    );
    for (const verb of ['add', 'update', 'delete'] as const) inf.on(verb, () => received++);
    inf.on('error', () => {});
    return inf;
  };
  const informers = [
    make('pods', '/api/v1/pods', () => core.listPodForAllNamespaces()),
    make('namespaces', '/api/v1/namespaces', () => core.listNamespace()),
    make('networkpolicies', '/apis/networking.k8s.io/v1/networkpolicies', () => net.listNetworkPolicyForAllNamespaces()),
    make('nodes', '/api/v1/nodes', () => core.listNode()),
  ];
  for (const i of informers) void i.start();
  return {
    synced: () => listed.size === informers.length,
    received: () => received,
    objects: () => informers.reduce((n, i) => n + i.list().length, 0),
    watches: () => informers.length,
    note: () => 'raw objects',
    stop: async () => {
      for (const i of informers) await i.stop();
    },
  };
}

function source(url: string, node: string, opts: Partial<KubeSourceOptions>): Measured {
  const s = new KubeClusterSource({ kubeConfig: makeKubeConfig(url), nodeName: node, ...opts });
  void s.start();
  return {
    synced: () => s.synced(),
    received: () => s.counters().received,
    objects: () => s.counters().objects,
    watches: () => s.counters().watches,
    note: () => `peer mode ${s.peerPlan()?.mode ?? '?'}`,
    stop: () => s.stop(),
  };
}

async function measure(mode: Mode, url: string, node: string): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});
  gc();
  const base = process.memoryUsage();
  const t0 = performance.now();
  const m =
    mode === 'naive-informers'
      ? naive(url)
      : source(
          url,
          node,
          mode === 'all-pods' ? { remotePods: 'all' } : mode === 'selective-unbounded' ? { maxPeerWatches: 1_000_000 } : {},
        );
  while (!m.synced()) await new Promise((r) => setTimeout(r, 20));
  const syncMs = performance.now() - t0;
  gc();
  gc();
  const mem = process.memoryUsage();
  send({
    phase: 'synced',
    syncMs: Math.round(syncMs),
    rssMB: +(mem.rss / MB).toFixed(1),
    heapMB: +((mem.heapUsed - base.heapUsed) / MB).toFixed(1),
    baseRssMB: +(base.rss / MB).toFixed(1),
    objects: m.objects(),
    watches: m.watches(),
    received: m.received(),
    note: m.note(),
  });
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'count') send({ received: m.received(), watches: m.watches(), objects: m.objects() });
    else if (line === 'exit') break;
  }
  await m.stop();
  process.exit(0);
}

// ------------------------------------------------------------ role: fleet (scale on paper, by simulation)

/**
 * What the API server sends a fleet of agents: for a sample of `agents`
 * nodes of the generated cluster, each agent's watches are computed with the
 * agent's own planner (planPeerWatches, bound 32, as shipped) and the fixed
 * watches (its node's pods, all namespaces, all policies, its Node); then the
 * same churn as the other modes (random pods, half relabelled, half deleted
 * and re-created) is delivered the way the API server's watch cache filters
 * (a pod event reaches a watch whose namespace and label selector match the
 * old or the new object; the fake server's selector code), counting events
 * and bytes (the realistic pod's JSON). Also: what each agent's initial lists
 * fetch (a node restart), and what one policy or namespace change costs (every
 * agent watches them all). Sampled agents are spread evenly over the nodes;
 * per-agent figures are then scaled to the whole fleet.
 */
async function fleet(
  pods: number,
  policies: number,
  namespaces: number,
  podsPerNode: number,
  agents: number,
  churn: number,
  mix: Mix,
): Promise<void> {
  const generated = generateCluster({ pods, policies, namespaces, podsPerNode, seed: 1 });
  const st =
    mix === 'local'
      ? { ...generated.state, policies: generated.state.policies.filter((p) => !CROSS_NAMESPACE.test(p.name)) }
      : generated.state;
  const objects = clusterObjects({ ...generated, state: st }) as KubeObject[];
  const podObj = new Map<string, KubeObject>();
  let nsBytes = 0;
  let polBytes = 0;
  let nodeBytes = 0;
  for (const o of objects) {
    if (o.kind === 'Pod') podObj.set(`${o.metadata.namespace ?? ''}/${o.metadata.name}`, o);
    else if (o.kind === 'Namespace') nsBytes += JSON.stringify(o).length;
    else if (o.kind === 'NetworkPolicy') polBytes += JSON.stringify(o).length;
    else if (o.kind === 'Node') nodeBytes = JSON.stringify(o).length;
  }
  const podBytes = (key: string): number => {
    const o = podObj.get(key);
    return o === undefined ? 0 : JSON.stringify(realistic(o)).length;
  };
  const avgPodBytes = podBytes(`${st.pods.at(0)?.namespace ?? ''}/${st.pods.at(0)?.name ?? ''}`);
  const byNode = new Map<string, Pod[]>();
  for (const p of st.pods) if (p.nodeName !== undefined) byNode.set(p.nodeName, [...(byNode.get(p.nodeName) ?? []), p]);
  const nodes = generated.nodes;
  const step = Math.max(1, nodes.length / agents);
  const sample = Array.from({ length: Math.min(agents, nodes.length) }, (_, i) => nodes[Math.floor(i * step)] ?? '');
  const t0 = performance.now();
  interface Agent {
    node: string;
    mode: string;
    watches: { key: string; ns: string | undefined; reqs: ReturnType<typeof parseLabelSelector> }[];
  }
  const fleetAgents: Agent[] = sample.map((node) => {
    const plan = planPeerWatches({ policies: [...st.policies], localPods: byNode.get(node) ?? [], namespaces: st.namespaces });
    return {
      node,
      mode: plan.mode,
      watches: plan.watches.map((w) => ({ key: w.key, ns: w.namespace, reqs: parseLabelSelector(w.labelSelector) })),
    };
  });
  const planMs = performance.now() - t0;
  // Streams of the agent that carry this pod's event (overlapping watches each send it).
  const sees = (
    a: Agent,
    ns: string,
    node: string | undefined,
    labels: Readonly<Record<string, string>>,
    next?: Readonly<Record<string, string>>,
  ): number => {
    let n = node === a.node ? 1 : 0;
    for (const w of a.watches)
      if (
        (w.ns === undefined || w.ns === ns) &&
        (labelsMatch(w.reqs, labels) || (next !== undefined && labelsMatch(w.reqs, next)))
      )
        n++;
    return n;
  };
  // Initial lists of each agent: its pods, every namespace and policy, its Node, and its peer watches' pods.
  let listObjects = 0;
  let listBytes = 0;
  const byNs = new Map<string, Pod[]>();
  for (const p of st.pods) byNs.set(p.namespace, [...(byNs.get(p.namespace) ?? []), p]);
  const listed = new Map<string, number>();
  let peerWatches = 0;
  const modes = new Map<string, number>();
  for (const a of fleetAgents) {
    modes.set(a.mode, (modes.get(a.mode) ?? 0) + 1);
    peerWatches += a.watches.length;
    const local = byNode.get(a.node)?.length ?? 0;
    listObjects += local;
    listBytes += local * avgPodBytes;
    // Overlapping watches list a pod once per watch (the server answers each list).
    for (const w of a.watches) {
      let n = listed.get(w.key);
      if (n === undefined) {
        n = 0;
        for (const p of w.ns === undefined ? st.pods : (byNs.get(w.ns) ?? [])) if (labelsMatch(w.reqs, p.labels)) n++;
        listed.set(w.key, n);
      }
      listObjects += n;
      listBytes += n * avgPodBytes;
    }
    listObjects += st.namespaces.length + st.policies.length + 1;
    listBytes += nsBytes + polBytes + nodeBytes;
  }
  // Churn, delivered as the watch cache would.
  const rand = rng(1007);
  const keys = [...st.pods];
  let events = 0;
  let delivered = 0;
  let deliveredBytes = 0;
  let allPodsDelivered = 0;
  for (let i = 0; i < churn; i++) {
    const p = keys[Math.floor(rand() * keys.length)];
    if (p === undefined) continue;
    const bytes = podBytes(`${p.namespace}/${p.name}`) + 30;
    if (rand() < 0.5) {
      const next = { ...p.labels, churn: String(i) };
      events += 1;
      allPodsDelivered += fleetAgents.length;
      for (const a of fleetAgents) {
        const n = sees(a, p.namespace, p.nodeName, p.labels, next);
        delivered += n;
        deliveredBytes += n * bytes;
      }
    } else {
      events += 2;
      allPodsDelivered += 2 * fleetAgents.length;
      for (const a of fleetAgents) {
        const n = sees(a, p.namespace, p.nodeName, p.labels);
        delivered += 2 * n;
        deliveredBytes += 2 * n * bytes;
      }
    }
  }
  const scale = nodes.length / fleetAgents.length;
  const polAvg = polBytes / Math.max(1, st.policies.length);
  const nsAvg = nsBytes / Math.max(1, st.namespaces.length);
  send({
    mix,
    pods: st.pods.length,
    policies: st.policies.length,
    namespaces: st.namespaces.length,
    nodes: nodes.length,
    agents: fleetAgents.length,
    planMs: Math.round(planMs),
    modes: Object.fromEntries(modes),
    peerWatchesPerAgent: +(peerWatches / fleetAgents.length).toFixed(1),
    podBytes: avgPodBytes,
    churnEvents: events,
    perPodEvent: {
      streams: +((delivered / events) * scale).toFixed(1),
      kib: +((deliveredBytes / events / 1024) * scale).toFixed(1),
      allPods: (allPodsDelivered / events) * scale,
    },
    perPolicyChange: { agents: nodes.length, kib: +((polAvg * nodes.length) / 1024).toFixed(0) },
    perNamespaceChange: { agents: nodes.length, kib: +((nsAvg * nodes.length) / 1024).toFixed(0) },
    restartPerAgent: {
      objects: Math.round(listObjects / fleetAgents.length),
      mib: +(listBytes / fleetAgents.length / MB).toFixed(1),
    },
    restartFleet: { objects: Math.round(listObjects * scale), gib: +((listBytes * scale) / 1024 ** 3).toFixed(1) },
  });
}

// ------------------------------------------------------------ orchestrator

interface Child {
  readonly proc: ChildProcess;
  readonly lines: Interface;
  next(): Promise<Record<string, unknown>>;
  cmd(line: string): Promise<Record<string, unknown>>;
}

function child(args: string[], nodeArgs: string[] = [], env: Readonly<Record<string, string>> = {}): Child {
  const proc = spawn(process.execPath, [...nodeArgs, import.meta.filename, ...args], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  });
  const lines = createInterface({ input: proc.stdout as NodeJS.ReadableStream });
  const queue: string[] = [];
  const waiters: ((l: string) => void)[] = [];
  lines.on('line', (l) => {
    const w = waiters.shift();
    if (w !== undefined) w(l);
    else queue.push(l);
  });
  let exited: Error | undefined;
  const failed: ((e: Error) => void)[] = [];
  proc.once('exit', (code) => {
    exited = new Error(`child ${args.join(' ')} exited ${String(code)}`);
    for (const f of failed.splice(0)) f(exited);
  });
  const next = (): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const got = (l: string): void => resolve(JSON.parse(l) as Record<string, unknown>);
      const q = queue.shift();
      if (q !== undefined) return got(q);
      if (exited !== undefined) return reject(exited);
      waiters.push(got);
      failed.push(reject);
    });
  return {
    proc,
    lines,
    next,
    cmd: (line) => {
      proc.stdin?.write(`${line}\n`);
      return next();
    },
  };
}

async function orchestrate(sizes: [number, number, number][], churn: number, modes: Mode[], mixes: Mix[]): Promise<void> {
  const rows: string[] = [];
  console.log(
    `# bench-watch ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ${(totalmem() / 1024 ** 3).toFixed(0)} GiB; measured with ${[...RUNTIME.nodeArgs, ...Object.entries(RUNTIME.env).map(([k, v]) => `${k}=${v}`)].join(' ')}`,
  );
  const header =
    '| mix | pods | policies | namespaces | mode | watches | objects cached | sync s | RSS MB (idle) | heap MB | churn events (cluster) | received |';
  console.log(header);
  console.log('|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const mix of mixes)
    for (const [pods, policies, namespaces] of sizes) {
      const server = child(['--serve', `${pods}:${policies}:${namespaces}`, '--mix', mix]);
      const ready = await server.next();
      if (rows.length === 0)
        console.log(
          `(a pod is ${String(ready.podBytes)} bytes of JSON; churn: ${churn} random pods, half relabelled, half deleted and re-created)`,
        );
      const url = String(ready.url);
      const node = String(ready.node);
      for (const mode of modes) {
        const m = child(['--measure', mode, '--url', url, '--node', node], ['--expose-gc', ...RUNTIME.nodeArgs], RUNTIME.env);
        const synced = await m.next();
        const before = Number((await m.cmd('count')).received);
        // The same seed for every mode: the same pods churn the same way.
        const done = await server.cmd(`churn ${churn} 1007`);
        // Wait until the stream has drained: the count stops moving.
        let last = -1;
        let stable = 0;
        let cur = before;
        while (stable < 3) {
          await new Promise((r) => setTimeout(r, 250));
          cur = Number((await m.cmd('count')).received);
          stable = cur === last ? stable + 1 : 0;
          last = cur;
        }
        m.proc.stdin?.write('exit\n');
        await new Promise((r) => m.proc.once('exit', r));
        const row = `| ${mix} | ${pods} | ${String(ready.policies)} | ${namespaces} | ${mode}${mode.startsWith('selective') ? ` (${String(synced.note).replace('peer mode ', '')})` : ''} | ${String(synced.watches)} | ${String(synced.objects)} | ${(Number(synced.syncMs) / 1000).toFixed(1)} | ${String(synced.rssMB)} (${String(synced.baseRssMB)}) | ${String(synced.heapMB)} | ${String(done.events)} | ${cur - before} |`;
        rows.push(row);
        console.log(row);
      }
      server.proc.stdin?.write('exit\n');
      await new Promise((r) => server.proc.once('exit', r));
    }
}

const { values } = scriptArgs(import.meta.url, {
  options: {
    serve: { type: 'string' },
    measure: { type: 'string' },
    url: { type: 'string' },
    node: { type: 'string' },
    sizes: { type: 'string', default: '1000:100:50,10000:1000:500,100000:10000:5000' },
    churn: { type: 'string', default: '2000' },
    modes: { type: 'string', default: MODES.join(',') },
    mix: { type: 'string', default: MIXES.join(',') },
    fleet: { type: 'string' },
    'pods-per-node': { type: 'string', default: '110' },
  },
});

function triple(s: string): [number, number, number] {
  const [a, b, c] = s.split(':').map(Number);
  if (![a, b, c].every((x) => Number.isInteger(x) && (x ?? -1) >= 0))
    throw new Error(`size must be pods:policies:namespaces, not ${s}`);
  return [a as number, b as number, c as number];
}

function mixes(text: string): Mix[] {
  return text.split(',').map((m) => {
    if (!(MIXES as readonly string[]).includes(m)) throw new Error(`unknown mix ${m}`);
    return m as Mix;
  });
}

if (values.fleet !== undefined) {
  for (const size of values.sizes.split(',').map(triple))
    for (const mix of mixes(values.mix))
      await fleet(...size, Number(values['pods-per-node']), Number(values.fleet), Number(values.churn), mix);
} else if (values.serve !== undefined) {
  const [mix] = mixes(values.mix);
  await serve(...triple(values.serve), mix ?? 'gen');
} else if (values.measure !== undefined) {
  if (!(MODES as readonly string[]).includes(values.measure)) throw new Error(`unknown mode ${values.measure}`);
  await measure(values.measure as Mode, values.url ?? '', values.node ?? '');
} else {
  const modes = values.modes.split(',').map((m) => {
    if (!(MODES as readonly string[]).includes(m)) throw new Error(`unknown mode ${m}`);
    return m as Mode;
  });
  await orchestrate(values.sizes.split(',').map(triple), Number(values.churn), modes, mixes(values.mix));
}
