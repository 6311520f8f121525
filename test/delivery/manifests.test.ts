// The kustomizations under daemonset/ render, and every object they render is
// valid against the Kubernetes OpenAPI schemas (kubernetes-models: ajv
// validators generated from the Kubernetes OpenAPI spec; ServiceMonitor and
// PrometheusRule from the Prometheus Operator CRD schemas through
// @kubernetes-models/prometheus-operator). Those validators accept unknown
// fields, so every object is also type-checked against the same models'
// TypeScript interfaces, whose excess-property check rejects misspelled or
// misplaced fields (the equivalent of kubeconform -strict). Then the
// project's own rules: RBAC verbs, security context, probes, image tag.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import ts from 'typescript';
import { daemonsetEnv } from '../../scripts/daemonset-env.ts';
import {
  DAEMONSET_DIR,
  IN_CI,
  MONITORING_DIR,
  ROOT,
  arr,
  at,
  isRecord,
  parseYamlStream,
  readText,
  readYaml,
  rec,
  run,
  str,
  which,
} from './support.ts';

type K8sObject = Record<string, unknown> & { apiVersion: string; kind: string; metadata: Record<string, unknown> };

function asObject(v: unknown, where: string): K8sObject {
  const o = rec(v, where);
  assert.equal(typeof o.apiVersion, 'string', `${where}: apiVersion`);
  assert.equal(typeof o.kind, 'string', `${where}: kind`);
  assert.ok(isRecord(o.metadata) && typeof o.metadata.name === 'string', `${where}: metadata.name`);
  return o as K8sObject;
}

const id = (o: K8sObject): string => `${o.kind}/${String(o.metadata.namespace ?? '')}/${String(o.metadata.name)}`;

// --- rendering ---------------------------------------------------------

/** `kubectl kustomize DIR` (or `kustomize build DIR`); undefined = skipped. */
function kustomize(t: TestContext, dir: string): K8sObject[] | undefined {
  const kubectl = which('kubectl');
  const standalone = which('kustomize');
  if (kubectl === undefined && standalone === undefined) {
    const msg = 'neither kubectl nor kustomize on PATH (the node machine image ships kubectl with kustomize built in)';
    if (IN_CI) assert.fail(`${msg}: CI must run this test, not skip it`);
    t.skip(msg);
    return undefined;
  }
  const r = kubectl !== undefined ? run(kubectl, ['kustomize', dir]) : run(standalone ?? 'kustomize', ['build', dir]);
  assert.equal(r.status, 0, `kustomize ${relative(ROOT, dir)} failed:\n${r.stderr}`);
  return parseYamlStream(r.stdout, `kustomize ${dir}`).map((o, i) => asObject(o, `${dir} object ${i}`));
}

/** A kustomization's `images:` entry. */
interface ImageEntry {
  readonly name: string;
  readonly newName?: string;
  readonly newTag?: string;
  readonly digest?: string;
}

function imageEntries(k: Record<string, unknown>): ImageEntry[] {
  return arr(k.images ?? [], 'images').map((e, i) => {
    const x = rec(e, `images[${i}]`);
    const opt = (f: string): Record<string, string> => (x[f] === undefined ? {} : { [f]: str(x[f], `images[${i}].${f}`) });
    return { name: str(x.name, `images[${i}].name`), ...opt('newName'), ...opt('newTag'), ...opt('digest') };
  });
}

/**
 * kustomize's image transformer on one image reference: an entry whose name is
 * the reference's name (without tag or digest) replaces the name (newName),
 * the tag (newTag) or sets a digest (digest, dropping the tag).
 */
function setImage(image: string, entries: readonly ImageEntry[]): string {
  const at = image.indexOf('@');
  const beforeDigest = at < 0 ? image : image.slice(0, at);
  const colon = beforeDigest.lastIndexOf(':');
  const hasTag = colon > beforeDigest.lastIndexOf('/');
  const name = hasTag ? beforeDigest.slice(0, colon) : beforeDigest;
  let suffix = image.slice(name.length);
  const e = entries.find((x) => x.name === name);
  if (e === undefined) return image;
  if (e.newTag !== undefined) suffix = `:${e.newTag}`;
  if (e.digest !== undefined) suffix = `@${e.digest}`;
  return `${e.newName ?? name}${suffix}`;
}

/** Applies `images:` to the containers and init containers of pod templates. */
function applyImages(o: K8sObject, entries: readonly ImageEntry[]): K8sObject {
  const spec = at(o, 'spec.template.spec');
  if (entries.length === 0 || !isRecord(spec)) return o;
  const out = structuredClone(o);
  const podSpec = rec(at(out, 'spec.template.spec'), 'pod spec');
  for (const key of ['containers', 'initContainers'])
    for (const c of arr(podSpec[key] ?? [], key)) {
      const container = rec(c, key);
      if (typeof container.image === 'string') container.image = setImage(container.image, entries);
    }
  return out;
}

/**
 * A minimal, documented kustomization loader (no kustomize needed): resolves
 * `resources:` (files only) and `configMapGenerator` files of DIR, parses
 * every file, applies `namespace:` to namespaced objects and `images:` to pod
 * templates. It checks that everything listed exists and parses; it does not
 * implement patches.
 */
function loadKustomization(dir: string): K8sObject[] {
  const k = rec(readYaml(join(dir, 'kustomization.yaml')), `${dir}/kustomization.yaml`);
  assert.equal(k.kind, 'Kustomization');
  const ns = k.namespace === undefined ? undefined : str(k.namespace, 'namespace');
  const out: K8sObject[] = [];
  for (const r of arr(k.resources ?? [], 'resources')) {
    const file = join(dir, str(r, 'resource'));
    assert.ok(existsSync(file), `${relative(ROOT, file)} is listed in kustomization.yaml but does not exist`);
    for (const [i, doc] of parseYamlStream(readText(file), file).entries())
      out.push(asObject(doc, `${relative(ROOT, file)}#${i}`));
  }
  for (const g of arr(k.configMapGenerator ?? [], 'configMapGenerator')) {
    const data: Record<string, string> = {};
    for (const f of arr(at(g, 'files') ?? [], 'files')) {
      const file = join(dir, str(f, 'file'));
      assert.ok(existsSync(file), `${relative(ROOT, file)} is listed in configMapGenerator but does not exist`);
      data[file.split('/').pop() ?? ''] = readText(file);
    }
    out.push({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: str(at(g, 'name'), 'generator name') }, data });
  }
  const clusterScoped = new Set([
    'Namespace',
    'ClusterRole',
    'ClusterRoleBinding',
    'CustomResourceDefinition',
    'ValidatingAdmissionPolicy',
    'ValidatingAdmissionPolicyBinding',
  ]);
  const images = imageEntries(k);
  return out.map((o) =>
    applyImages(
      ns !== undefined && !clusterScoped.has(o.kind) ? { ...o, metadata: { ...o.metadata, namespace: ns } } : o,
      images,
    ),
  );
}

// --- schema validation -------------------------------------------------

/** The module path of the model class for an apiVersion (kubernetes-models layout). */
function modelModule(o: K8sObject): string {
  const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
  if (group === 'monitoring.coreos.com') return `@kubernetes-models/prometheus-operator/${group}/${version}/${o.kind}`;
  return group === '' ? `kubernetes-models/${version}/${o.kind}` : `kubernetes-models/${group}/${version}/${o.kind}`;
}

interface Validatable {
  validate(): void;
}

async function validateWithSchema(o: K8sObject): Promise<void> {
  const spec = modelModule(o);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(spec)) as Record<string, unknown>;
  } catch (e) {
    assert.fail(`${id(o)}: no schema for ${o.apiVersion} ${o.kind} (${spec}): ${String(e)}`);
  }
  const Cls = mod[o.kind];
  assert.equal(typeof Cls, 'function', `${spec} exports no ${o.kind}`);
  const instance = new (Cls as new (data: unknown) => Validatable)(o);
  instance.validate(); // throws with the JSON-schema errors
}

/**
 * Type-checks every object against the model's TypeScript interface in one
 * in-memory program. Returns the diagnostics, each prefixed by the object.
 */
function strictTypeCheck(objects: readonly K8sObject[]): string[] {
  const fileName = join(ROOT, 'test', 'delivery', '__manifest_typecheck__.ts');
  const lines: string[] = [];
  const owners: { from: number; what: string }[] = [];
  objects.forEach((o, i) => lines.push(`import type { I${o.kind} as T${i} } from '${modelModule(o)}';`));
  objects.forEach((o, i) => {
    owners.push({ from: lines.length, what: id(o) });
    lines.push(`export const o${i}: T${i} = ${JSON.stringify(o, null, 2)};`.split('\n').join('\n'));
  });
  const source = lines.join('\n');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2023,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const origGet = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, onError, create) =>
    name === fileName ? ts.createSourceFile(name, source, lang, true) : origGet(name, lang, onError, create);
  const origExists = host.fileExists.bind(host);
  host.fileExists = (name) => name === fileName || origExists(name);
  const origRead = host.readFile.bind(host);
  host.readFile = (name) => (name === fileName ? source : origRead(name));
  const program = ts.createProgram([fileName], options, host);
  const sf = program.getSourceFile(fileName);
  assert.ok(sf !== undefined);
  const sourceLines = source.split('\n');
  const lineOf = (pos: number): number => sf.getLineAndCharacterOfPosition(pos).line;
  return [...program.getSemanticDiagnostics(sf), ...program.getSyntacticDiagnostics(sf)].map((d) => {
    const line = d.start === undefined ? 0 : lineOf(d.start);
    const owner = [...owners].reverse().find((x) => x.from <= line);
    return `${owner?.what ?? '?'}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')} (at: ${(sourceLines[line] ?? '').trim()})`;
  });
}

// --- the tests ---------------------------------------------------------

const packageVersion = str(
  (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, unknown>).version,
  'version',
);

const find = (objs: readonly K8sObject[], kind: string, name?: string): K8sObject => {
  const o = objs.find((x) => x.kind === kind && (name === undefined || x.metadata.name === name));
  assert.ok(o !== undefined, `no ${kind} ${name ?? ''} in the rendered manifests`);
  return o;
};

const base = loadKustomization(DAEMONSET_DIR);
const monitoring = loadKustomization(MONITORING_DIR);
const STATUS_ADMISSION_DIR = join(DAEMONSET_DIR, 'status-admission');
const statusAdmission = loadKustomization(STATUS_ADMISSION_DIR);

describe('kustomize renders', () => {
  test('base: every resource listed exists and parses (own loader)', () => {
    assert.deepEqual(base.map((o) => o.kind).sort(), [
      'ClusterRole',
      'ClusterRoleBinding',
      'CustomResourceDefinition',
      'DaemonSet',
      'Namespace',
      'Role',
      'RoleBinding',
      'Service',
      'ServiceAccount',
    ]);
  });

  test('monitoring: every resource listed exists and parses (own loader)', () => {
    assert.deepEqual(monitoring.map((o) => o.kind).sort(), ['ConfigMap', 'PrometheusRule', 'ServiceMonitor']);
  });

  for (const [name, dir, loaded] of [
    ['base', DAEMONSET_DIR, base],
    ['monitoring', MONITORING_DIR, monitoring],
    ['status-admission', STATUS_ADMISSION_DIR, statusAdmission],
  ] as const) {
    test(`kubectl kustomize ${relative(ROOT, dir)}/ renders the same objects as the loader`, (t) => {
      const rendered = kustomize(t, dir);
      if (rendered === undefined) return;
      assert.deepEqual(rendered.map(id).sort(), loaded.map(id).sort(), `${name}: kustomize and the loader disagree`);
      // Apart from the generated ConfigMap, kustomize output equals the files with the loader's
      // namespace and images applied (nothing renamed or patched).
      for (const o of rendered.filter((x) => x.kind !== 'ConfigMap')) {
        const mine = loaded.find((x) => id(x) === id(o));
        assert.deepEqual(o, mine, `${id(o)} differs between kustomize and the files`);
      }
    });
  }
});

describe('schema validation', () => {
  const all = [...base, ...monitoring, ...statusAdmission];

  for (const o of all) {
    test(`${id(o)} is valid against the ${o.apiVersion} ${o.kind} schema`, async () => {
      await validateWithSchema(o);
    });
  }

  test('no unknown or misplaced fields (type-checked against the same models)', () => {
    const problems = strictTypeCheck(all);
    assert.deepEqual(problems, []);
  });

  test('the validators catch mistakes (self-test)', async () => {
    const ds = structuredClone(find(base, 'DaemonSet'));
    const c = rec(at(ds, 'spec.template.spec.containers.0'), 'container');
    c.ports = [{ name: 'metrics', containerPort: '9742' }];
    await assert.rejects(validateWithSchema(ds), /containerPort must be integer/);
    const ds2 = structuredClone(find(base, 'DaemonSet'));
    rec(at(ds2, 'spec.template.spec'), 'pod spec').hostNetwrok = true;
    assert.match(strictTypeCheck([ds2]).join('\n'), /hostNetwrok/);
    const sm = structuredClone(find(monitoring, 'ServiceMonitor'));
    rec(at(sm, 'spec.endpoints.0'), 'endpoint').honorLabel = true;
    assert.match(strictTypeCheck([sm]).join('\n'), /honorLabel/);
  });
});

describe('project rules', () => {
  const ds = find(base, 'DaemonSet', 'nft-netpol-agent');
  const podSpec = rec(at(ds, 'spec.template.spec'), 'pod spec');
  const containers = arr(podSpec.containers, 'containers');
  const agent = rec(containers[0], 'agent container');

  test('everything namespaced is in nft-netpol-system, which allows privileged pods', () => {
    for (const o of [...base, ...monitoring]) {
      if (['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition'].includes(o.kind)) continue;
      assert.equal(o.metadata.namespace, 'nft-netpol-system', id(o));
    }
    const ns = find(base, 'Namespace');
    assert.equal(ns.metadata.name, 'nft-netpol-system');
    assert.equal(rec(ns.metadata.labels, 'labels')['pod-security.kubernetes.io/enforce'], 'privileged');
  });

  test('ClusterRole grants exactly list/watch on the watched resources and create/patch on events', () => {
    const role = find(base, 'ClusterRole', 'nft-netpol-agent');
    const grants = new Set<string>();
    for (const r of arr(role.rules, 'rules')) {
      for (const g of arr(at(r, 'apiGroups'), 'apiGroups'))
        for (const res of arr(at(r, 'resources'), 'resources'))
          for (const v of arr(at(r, 'verbs'), 'verbs'))
            grants.add(`${str(g, 'group')}/${str(res, 'resource')}:${str(v, 'verb')}`);
      assert.equal(at(r, 'resourceNames'), undefined);
      assert.equal(at(r, 'nonResourceURLs'), undefined);
    }
    const want = [
      '/pods:list',
      '/pods:watch',
      '/namespaces:list',
      '/namespaces:watch',
      '/nodes:list',
      '/nodes:watch',
      '/services:list',
      '/services:watch',
      'tenant.kubesphere.io/workspaces:list',
      'tenant.kubesphere.io/workspaces:watch',
      'network.kubesphere.io/namespacenetworkpolicies:list',
      'network.kubesphere.io/namespacenetworkpolicies:watch',
      'networking.k8s.io/networkpolicies:list',
      'networking.k8s.io/networkpolicies:watch',
      'policy.networking.k8s.io/clusternetworkpolicies:list',
      'policy.networking.k8s.io/clusternetworkpolicies:watch',
      'policy.networking.k8s.io/adminnetworkpolicies:list',
      'policy.networking.k8s.io/adminnetworkpolicies:watch',
      'policy.networking.k8s.io/baselineadminnetworkpolicies:list',
      'policy.networking.k8s.io/baselineadminnetworkpolicies:watch',
      '/events:create',
      '/events:patch',
      'events.k8s.io/events:create',
      'events.k8s.io/events:patch',
      'nft-netpol.io/nodepolicystatuses:create',
      'nft-netpol.io/nodepolicystatuses:update',
      'nft-netpol.io/nodepolicystatuses:patch',
      'nft-netpol.io/nodepolicystatuses/status:update',
      'nft-netpol.io/nodepolicystatuses/status:patch',
    ];
    assert.deepEqual([...grants].sort(), want.sort());
    const binding = find(base, 'ClusterRoleBinding', 'nft-netpol-agent');
    assert.deepEqual(binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'nft-netpol-agent' });
    assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'nft-netpol-agent', namespace: 'nft-netpol-system' }]);
    assert.equal(podSpec.serviceAccountName, 'nft-netpol-agent');
    find(base, 'ServiceAccount', 'nft-netpol-agent');
  });

  test('pod: host network, node-critical, runs on every node, rolls one node at a time', () => {
    assert.equal(podSpec.hostNetwork, true);
    assert.equal(podSpec.dnsPolicy, 'ClusterFirstWithHostNet');
    assert.equal(podSpec.priorityClassName, 'system-node-critical');
    assert.deepEqual(podSpec.tolerations, [{ operator: 'Exists' }]);
    assert.equal(podSpec.terminationGracePeriodSeconds, 30);
    assert.deepEqual(at(ds, 'spec.updateStrategy'), { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1, maxSurge: 0 } });
    assert.equal(at(podSpec, 'securityContext.seccompProfile.type'), 'RuntimeDefault');
    assert.equal(containers.length, 1);
    assert.equal(podSpec.hostPID, undefined);
    assert.equal(podSpec.hostIPC, undefined);
    assert.equal(podSpec.volumes, undefined, 'the agent mounts nothing from the host');
  });

  test('container: NET_ADMIN only, not privileged, read-only root, no privilege escalation', () => {
    const sc = rec(agent.securityContext, 'securityContext');
    assert.deepEqual(sc.capabilities, { drop: ['ALL'], add: ['NET_ADMIN'] });
    assert.equal(sc.privileged, false);
    assert.equal(sc.allowPrivilegeEscalation, false);
    assert.equal(sc.readOnlyRootFilesystem, true);
    // uid 0 on purpose (see the comment in daemonset.yaml and the Dockerfile's USER).
    assert.equal(sc.runAsUser, 0);
    assert.equal(sc.runAsNonRoot, false);
    assert.equal(at(sc, 'seccompProfile.type'), 'RuntimeDefault');
  });

  test('container: NODE_NAME from the downward API, args run; the image comes from images: alone, tag = package version', () => {
    const env = arr(agent.env, 'env').map((e) => rec(e, 'env'));
    const nodeName = env.find((e) => e.name === 'NODE_NAME');
    assert.deepEqual(nodeName?.valueFrom, { fieldRef: { fieldPath: 'spec.nodeName' } });
    assert.deepEqual(agent.args, ['run']);
    // One place: daemonset.yaml names the image without registry or tag, the kustomization sets both.
    const entries = imageEntries(rec(readYaml(join(DAEMONSET_DIR, 'kustomization.yaml')), 'kustomization'));
    assert.equal(entries.length, 1, 'one images: entry');
    const [entry] = entries;
    assert.ok(entry !== undefined);
    const file = parseYamlStream(readText(join(DAEMONSET_DIR, 'daemonset.yaml')), 'daemonset.yaml').map((d) => rec(d, 'doc'));
    const raw = str(at(file[0], 'spec.template.spec.containers.0.image'), 'daemonset.yaml image');
    assert.equal(raw, entry.name, 'daemonset.yaml names the image exactly as the images: entry, with no tag or registry');
    assert.match(raw, /^[a-z0-9-]+$/);
    assert.ok(entry.newName !== undefined && entry.newTag !== undefined && entry.digest === undefined);
    const image = str(agent.image, 'image');
    assert.equal(image, `${entry.newName}:${entry.newTag}`, 'the rendered DaemonSet runs the images: entry');
    assert.equal(entry.newTag, packageVersion, 'the image tag follows package.json');
    assert.notEqual(entry.newTag, 'latest');
    // It is the name scripts/image/build.sh tags by default.
    assert.match(readText(join(ROOT, 'scripts', 'image', 'build.sh')), new RegExp(`^tag="${entry.newName}:\\$version"$`, 'm'));
    // kustomize's semantics for a registry of one's own, a tag, a digest.
    assert.equal(
      setImage('nft-netpol-agent', [{ name: 'nft-netpol-agent', newName: 'r.example:5000/a/b', newTag: '1' }]),
      'r.example:5000/a/b:1',
    );
    assert.equal(
      setImage('nft-netpol-agent:0.1.0', [{ name: 'nft-netpol-agent', digest: 'sha256:ab' }]),
      'nft-netpol-agent@sha256:ab',
    );
    assert.equal(setImage('other:1', [{ name: 'nft-netpol-agent', newTag: '2' }]), 'other:1');
    const byName = Object.fromEntries(env.filter((e) => typeof e.value === 'string').map((e) => [e.name, e.value]));
    assert.equal(byName.METRICS_ADDR, '0.0.0.0:9742');
    assert.equal(byName.DEBUG_ADDR, '127.0.0.1:9743', 'the debug endpoint stays on loopback');
  });

  test('probes hit /healthz and /readyz on the metrics port; resources sized', () => {
    assert.deepEqual(agent.ports, [{ name: 'metrics', containerPort: 9742, protocol: 'TCP' }]);
    assert.deepEqual(at(agent, 'livenessProbe.httpGet'), { path: '/healthz', port: 'metrics' });
    assert.deepEqual(at(agent, 'readinessProbe.httpGet'), { path: '/readyz', port: 'metrics' });
    assert.deepEqual(agent.resources, { requests: { cpu: '50m', memory: '192Mi' }, limits: { memory: '512Mi' } });
    const annotations = rec(at(ds, 'spec.template.metadata.annotations'), 'annotations');
    assert.deepEqual(annotations, {
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': '9742',
      'prometheus.io/path': '/metrics',
    });
  });

  test('the headless Service selects the agent pods; the ServiceMonitor selects the Service by its port name', () => {
    const svc = find(base, 'Service', 'nft-netpol-agent');
    assert.equal(at(svc, 'spec.clusterIP'), 'None');
    const podLabels = rec(at(ds, 'spec.template.metadata.labels'), 'pod labels');
    for (const [k, v] of Object.entries(rec(at(svc, 'spec.selector'), 'selector')))
      assert.equal(podLabels[k], v, `Service selector ${k}`);
    assert.deepEqual(at(svc, 'spec.ports'), [{ name: 'metrics', port: 9742, targetPort: 'metrics', protocol: 'TCP' }]);
    const sm = find(monitoring, 'ServiceMonitor', 'nft-netpol-agent');
    const svcLabels = rec(svc.metadata.labels, 'service labels');
    for (const [k, v] of Object.entries(rec(at(sm, 'spec.selector.matchLabels'), 'matchLabels')))
      assert.equal(svcLabels[k], v, `ServiceMonitor selector ${k}`);
    assert.deepEqual(at(sm, 'spec.namespaceSelector.matchNames'), ['nft-netpol-system']);
    assert.equal(at(sm, 'spec.endpoints.0.port'), 'metrics');
    assert.deepEqual(at(sm, 'spec.endpoints.0.relabelings'), [
      { sourceLabels: ['__meta_kubernetes_pod_node_name'], targetLabel: 'node', action: 'replace' },
    ]);
  });

  test('the dashboard ConfigMap carries the Grafana sidecar label and the dashboard JSON', () => {
    const cm = find(monitoring, 'ConfigMap', 'nft-netpol-agent-dashboard');
    const data = rec(cm.data, 'data');
    const json = JSON.parse(str(data['nft-netpol-agent.json'], 'dashboard')) as Record<string, unknown>;
    assert.equal(json.uid, 'nft-netpol-agent');
    const k = rec(readYaml(join(MONITORING_DIR, 'kustomization.yaml')), 'kustomization');
    assert.equal(at(k, 'configMapGenerator.0.options.labels.grafana_dashboard'), '1');
  });

  test('the base needs no CRDs: no monitoring.coreos.com objects in it', () => {
    for (const o of base) assert.ok(!o.apiVersion.startsWith('monitoring.coreos.com/'), id(o));
    assert.equal(dirname(MONITORING_DIR), DAEMONSET_DIR);
  });
});

test("the agent benchmark runs with the DaemonSet's memory settings, and the image has the same defaults", () => {
  // scripts/bench-agent.ts starts the agent with daemonsetEnv(): what ships is what is measured.
  const env = daemonsetEnv(join(DAEMONSET_DIR, 'daemonset.yaml'), ['NODE_OPTIONS', 'MALLOC_ARENA_MAX']);
  assert.match(env['NODE_OPTIONS'] ?? '', /^--max-old-space-size=\d+ --max-semi-space-size=8$/);
  assert.equal(env['MALLOC_ARENA_MAX'], '2');
  const docker = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  assert.match(docker, /NODE_OPTIONS=--max-semi-space-size=8\b/);
  assert.match(docker, /MALLOC_ARENA_MAX=2\b/);
  assert.throws(
    () => daemonsetEnv(join(DAEMONSET_DIR, 'daemonset.yaml'), ['NO_SUCH_VARIABLE']),
    /sets no literal NO_SUCH_VARIABLE/,
  );
});
