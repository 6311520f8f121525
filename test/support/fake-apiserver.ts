// An in-repo Kubernetes API server (node:http) that speaks the real list/watch
// protocol well enough for the unmodified @kubernetes/client-node informers,
// plus fault hooks for tests. See /work/shared/references/client-node.md §5.
//
// In-process use:
//   const api = await FakeApiServer.start({ token: 't' });
//   api.create('pods', pod('ns', 'a', { app: 'a' }, 'node-1', '10.0.0.1'));
//   const kc = api.kubeConfig();            // for @kubernetes/client-node
//   api.resetConnections(); api.failNext(2, 500); api.compact(); ...
//   await api.close();
//
// Standalone (for process tests and benchmarks):
//   node test/support/fake-apiserver.ts --port 0 --state cluster.yaml [--token T] [--bookmark-ms N] [--bookmark-mode M]
// prints `http://127.0.0.1:PORT` as its first stdout line. A small control API
// lives under /_fake/ (no auth, never subject to injected faults):
//   POST   /_fake/objects               JSON or YAML (object, list, multi-doc): create or replace
//   DELETE /_fake/objects/{resource}/{ns}/{name}   (cluster-scoped: /{resource}/{name})
//   POST   /_fake/fail?count=N&status=500[&only=list|watch|write][&retryAfter=S][&message=M]
//   POST   /_fake/reset-connections | end-streams | silence | compact | bookmark
//   POST   /_fake/crds?installed=true|false[&groups=G,G]   (un)install custom resource groups
//   POST   /_fake/refuse?ms=N            close the listener for N ms, then reopen on the same port
//   GET    /_fake/stats | /_fake/events | /_fake/watchers | /_fake/requests?from=N (request records from N on)
//
// Beyond the four watched kinds it serves Leases (coordination.k8s.io/v1) and
// the agent's NodePolicyStatus custom resource (cluster-scoped, with a status
// subresource), with the write semantics the applied-status writer relies on:
// POST (409 AlreadyExists), PUT and JSON merge PATCH with resourceVersion
// preconditions (409 Conflict), metadata.generation bumped on spec changes,
// status ignored on the main resource and everything but status ignored on
// /status, and owner references as data: deleting an owner deletes its
// dependents, and a dependent whose owners are all gone is collected, like the
// garbage collector's background propagation.
//
// CustomResourceDefinitions and ValidatingAdmissionPolicies (and bindings)
// POSTed or PUT to their real paths are checked with the API server's rules
// and refused with 422 Invalid like the real one (fake-definitions.ts);
// creating the CRD of a custom resource group served here installs that group.
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { KubeConfig } from '@kubernetes/client-node';
import { DefinitionStore, definitionRoute } from './fake-definitions.ts';

export type Resource =
  | 'pods'
  | 'namespaces'
  | 'networkpolicies'
  | 'nodes'
  | 'services'
  | 'workspaces'
  | 'namespacenetworkpolicies'
  | 'leases'
  | 'nodepolicystatuses'
  | 'clusternetworkpolicies'
  | 'adminnetworkpolicies'
  | 'baselineadminnetworkpolicies';
export const RESOURCES: readonly Resource[] = [
  'pods',
  'namespaces',
  'networkpolicies',
  'nodes',
  'services',
  'workspaces',
  'namespacenetworkpolicies',
  'leases',
  'nodepolicystatuses',
  'clusternetworkpolicies',
  'adminnetworkpolicies',
  'baselineadminnetworkpolicies',
];
/**
 * API groups of custom resources: served only while "installed" (see
 * installCRDs/removeCRDs). One CRD of a group can be installed alone by its
 * CRD name (`<plural>.<group>`, e.g. clusternetworkpolicies.policy.networking.k8s.io).
 */
export const CRD_GROUPS = ['tenant.kubesphere.io', 'network.kubesphere.io', 'policy.networking.k8s.io'] as const;

interface ResourceInfo {
  readonly kind: string;
  readonly apiVersion: string;
  readonly namespaced: boolean;
  /** Served with a /status subresource (the main resource then ignores status, /status all but status). */
  readonly statusSubresource?: boolean;
  /** metadata.generation is set on create and bumped when spec changes. */
  readonly generation?: boolean;
}

const INFO: Record<Resource, ResourceInfo> = {
  pods: { kind: 'Pod', apiVersion: 'v1', namespaced: true },
  namespaces: { kind: 'Namespace', apiVersion: 'v1', namespaced: false },
  networkpolicies: { kind: 'NetworkPolicy', apiVersion: 'networking.k8s.io/v1', namespaced: true, generation: true },
  nodes: { kind: 'Node', apiVersion: 'v1', namespaced: false },
  leases: { kind: 'Lease', apiVersion: 'coordination.k8s.io/v1', namespaced: true },
  nodepolicystatuses: {
    kind: 'NodePolicyStatus',
    apiVersion: 'nft-netpol.io/v1alpha1',
    namespaced: false,
    statusSubresource: true,
    generation: true,
  },
  services: { kind: 'Service', apiVersion: 'v1', namespaced: true },
  // Custom resources always carry metadata.generation (bumped on spec changes).
  workspaces: { kind: 'Workspace', apiVersion: 'tenant.kubesphere.io/v1alpha1', namespaced: false, generation: true },
  namespacenetworkpolicies: {
    kind: 'NamespaceNetworkPolicy',
    apiVersion: 'network.kubesphere.io/v1alpha1',
    namespaced: true,
    generation: true,
  },
  // sigs.k8s.io/network-policy-api: ClusterNetworkPolicy (v0.2) and the legacy v1alpha1 kinds.
  clusternetworkpolicies: {
    kind: 'ClusterNetworkPolicy',
    apiVersion: 'policy.networking.k8s.io/v1alpha2',
    namespaced: false,
    statusSubresource: true,
    generation: true,
  },
  adminnetworkpolicies: {
    kind: 'AdminNetworkPolicy',
    apiVersion: 'policy.networking.k8s.io/v1alpha1',
    namespaced: false,
    statusSubresource: true,
    generation: true,
  },
  baselineadminnetworkpolicies: {
    kind: 'BaselineAdminNetworkPolicy',
    apiVersion: 'policy.networking.k8s.io/v1alpha1',
    namespaced: false,
    statusSubresource: true,
    generation: true,
  },
};

const KIND_TO_RESOURCE: Record<string, Resource> = {
  Pod: 'pods',
  Namespace: 'namespaces',
  NetworkPolicy: 'networkpolicies',
  Node: 'nodes',
  Lease: 'leases',
  NodePolicyStatus: 'nodepolicystatuses',
  Service: 'services',
  Workspace: 'workspaces',
  WorkspaceTemplate: 'workspaces',
  NamespaceNetworkPolicy: 'namespacenetworkpolicies',
  ClusterNetworkPolicy: 'clusternetworkpolicies',
  AdminNetworkPolicy: 'adminnetworkpolicies',
  BaselineAdminNetworkPolicy: 'baselineadminnetworkpolicies',
};

export interface ObjectMeta {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  resourceVersion?: string;
  uid?: string;
  creationTimestamp?: string;
  [k: string]: unknown;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [k: string]: unknown;
}

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface LogEntry {
  readonly rv: number;
  readonly resource: Resource;
  readonly type: EventType;
  readonly object: KubeObject;
  /** The previous version for MODIFIED and DELETED (DELETED: the object itself). */
  readonly old: KubeObject | undefined;
}

// ---------------------------------------------------------------- selectors

type LabelRequirement =
  | { readonly op: 'in' | 'notin'; readonly key: string; readonly values: readonly string[] }
  | { readonly op: 'exists' | '!exists'; readonly key: string };

export class SelectorError extends Error {}

/** Parses Kubernetes label-selector syntax: a=b, a==b, a!=b, a in (x,y), a notin (x), a, !a. */
export function parseLabelSelector(text: string): readonly LabelRequirement[] {
  const reqs: LabelRequirement[] = [];
  // Split on commas outside parentheses.
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += ch;
  }
  parts.push(cur);
  for (const raw of parts) {
    const p = raw.trim();
    if (p === '') {
      if (parts.length === 1) continue;
      throw new SelectorError(`empty requirement in ${JSON.stringify(text)}`);
    }
    const set = /^([^\s!=(),]+)\s+(in|notin)\s*\(([^()]*)\)$/.exec(p);
    if (set !== null) {
      const values = (set[3] as string).split(',').map((v) => v.trim());
      if (values.length === 0 || values.some((v) => v === '' && values.length > 1)) throw new SelectorError(`bad values in ${p}`);
      reqs.push({ op: set[2] as 'in' | 'notin', key: set[1] as string, values });
      continue;
    }
    const eq = /^([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)$/.exec(p);
    if (eq !== null) {
      const key = eq[1] as string;
      const value = eq[3] as string;
      reqs.push({ op: eq[2] === '!=' ? 'notin' : 'in', key, values: [value] });
      continue;
    }
    const not = /^!\s*([^\s!=(),]+)$/.exec(p);
    if (not !== null) {
      reqs.push({ op: '!exists', key: not[1] as string });
      continue;
    }
    if (/^[^\s!=(),]+$/.test(p)) {
      reqs.push({ op: 'exists', key: p });
      continue;
    }
    throw new SelectorError(`unable to parse requirement ${JSON.stringify(p)}`);
  }
  return reqs;
}

export function labelsMatch(reqs: readonly LabelRequirement[], labels: Readonly<Record<string, string>> | undefined): boolean {
  const l = labels ?? {};
  for (const r of reqs) {
    const has = Object.hasOwn(l, r.key);
    const v = l[r.key];
    switch (r.op) {
      case 'in':
        if (!has || !r.values.includes(v as string)) return false;
        break;
      case 'notin':
        if (has && r.values.includes(v as string)) return false;
        break;
      case 'exists':
        if (!has) return false;
        break;
      case '!exists':
        if (has) return false;
        break;
    }
  }
  return true;
}

interface FieldRequirement {
  readonly path: readonly string[];
  readonly value: string;
  readonly equal: boolean;
}

export function parseFieldSelector(text: string): readonly FieldRequirement[] {
  const out: FieldRequirement[] = [];
  for (const raw of text.split(',')) {
    const p = raw.trim();
    if (p === '') continue;
    const m = /^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$/.exec(p);
    if (m === null) throw new SelectorError(`unable to parse field requirement ${JSON.stringify(p)}`);
    out.push({ path: (m[1] as string).split('.'), value: m[3] as string, equal: m[2] !== '!=' });
  }
  return out;
}

function fieldValue(obj: unknown, path: readonly string[]): string {
  let cur: unknown = obj;
  for (const k of path) {
    if (typeof cur !== 'object' || cur === null) return '';
    cur = (cur as Record<string, unknown>)[k];
  }
  if (cur === undefined || cur === null) return '';
  return typeof cur === 'string' ? cur : String(cur);
}

function fieldsMatch(reqs: readonly FieldRequirement[], obj: KubeObject): boolean {
  return reqs.every((r) => (fieldValue(obj, r.path) === r.value) === r.equal);
}

// ---------------------------------------------------------------- object helpers

/** A Pod as the API server would store it. */
export function pod(
  namespace: string,
  name: string,
  labels: Record<string, string>,
  nodeName: string | undefined,
  ip: string | undefined,
  extra?: {
    ports?: { name?: string; containerPort: number; protocol?: string }[];
    phase?: string;
    hostNetwork?: boolean;
    ips?: string[];
  },
): KubeObject {
  const ips = extra?.ips ?? (ip === undefined ? [] : [ip]);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels },
    spec: {
      ...(nodeName === undefined ? {} : { nodeName }),
      ...(extra?.hostNetwork === true ? { hostNetwork: true } : {}),
      containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10', ports: extra?.ports ?? [] }],
    },
    status: {
      phase: extra?.phase ?? 'Running',
      ...(ips.length > 0 ? { podIP: ips[0], podIPs: ips.map((i) => ({ ip: i })) } : {}),
    },
  };
}

export function namespace(name: string, labels: Record<string, string> = {}): KubeObject {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } };
}

export function node(name: string, addresses: string[]): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'kubernetes.io/hostname': name } },
    status: { addresses: [...addresses.map((a) => ({ type: 'InternalIP', address: a })), { type: 'Hostname', address: name }] },
  };
}

export function networkPolicy(namespace: string, name: string, spec: Record<string, unknown>): KubeObject {
  return { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name, namespace }, spec };
}

/** A ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2, cluster-scoped). */
export function clusterNetworkPolicy(name: string, spec: Record<string, unknown>): KubeObject {
  return { apiVersion: 'policy.networking.k8s.io/v1alpha2', kind: 'ClusterNetworkPolicy', metadata: { name }, spec };
}

function keyOf(o: KubeObject): string {
  return `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
}

function clone<T>(o: T): T {
  return structuredClone(o);
}

function status(code: number, reason: string, message: string): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'AlreadyExists',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  410: 'Expired',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
};

// ---------------------------------------------------------------- server

export interface FakeApiServerOptions {
  /** 0 (default) picks a free port. */
  readonly port?: number;
  readonly host?: string;
  /** When set, every API request must carry `Authorization: Bearer <token>`. */
  readonly token?: string;
  /** Installed CRD groups at start (default: all of CRD_GROUPS). */
  readonly crds?: readonly string[];
  /** Period of BOOKMARK events for watches that asked for them; 0 = only on demand. Default 10 s (real: ~60 s). */
  readonly bookmarkIntervalMs?: number;
  /**
   * 'progress' (default), like a real API server's watch cache: a watcher gets
   * a bookmark only when the resource's resourceVersion (its last change) has
   * moved past what the watcher has seen, so a quiet resource gets none
   * (apiserver pkg/storage/cacher: dispatchEvents builds bookmarks at the
   * cacher's last processed resourceVersion, about once a minute per watcher;
   * cacheWatcher.process forwards only events newer than the watcher's).
   * 'timer': every period, carrying the global resourceVersion (older tests).
   */
  readonly bookmarkMode?: 'progress' | 'timer';
  /** Keep at most this many log entries (older watches get 410). Default 200 000. */
  readonly maxLogEntries?: number;
}

export interface RequestRecord {
  readonly method: string;
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  readonly watch: boolean;
  readonly status: number;
  /** Request body size of writes (POST, PUT, PATCH of the kinds served here). */
  readonly bytes?: number;
}

export interface RecordedEvent {
  readonly api: 'v1' | 'events.k8s.io/v1';
  readonly namespace: string;
  readonly body: Record<string, unknown>;
}

export interface WatcherInfo {
  readonly id: number;
  readonly resource: Resource;
  readonly namespace: string | undefined;
  readonly labelSelector: string | undefined;
  readonly fieldSelector: string | undefined;
  readonly bookmarks: boolean;
  readonly silent: boolean;
  /** Events and bookmarks written to this stream. */
  readonly sent: number;
}

interface Watcher {
  readonly id: number;
  readonly resource: Resource;
  readonly namespace: string | undefined;
  readonly labelText: string | undefined;
  readonly fieldText: string | undefined;
  readonly labels: readonly LabelRequirement[];
  readonly fields: readonly FieldRequirement[];
  readonly bookmarks: boolean;
  readonly res: ServerResponse;
  silent: boolean;
  sent: number;
  timer: NodeJS.Timeout | undefined;
  /** The resourceVersion this watcher has seen (start, then every event and bookmark sent). */
  rv: number;
  /** Ends the stream at timeoutSeconds, like the real server. */
  deadline: NodeJS.Timeout | undefined;
}

interface Fault {
  remaining: number;
  readonly status: number;
  readonly only: 'list' | 'watch' | 'write' | undefined;
  readonly resource: Resource | undefined;
  /** Retry-After header (seconds) and Status details.retryAfterSeconds, as a 429/503 carries. */
  readonly retryAfterSeconds: number | undefined;
  readonly message: string | undefined;
}

/** Options of failNext beyond count and status. */
export interface FaultOptions {
  readonly only?: 'list' | 'watch' | 'write';
  readonly resource?: Resource;
  /**
   * Answer with `Retry-After: N` and details.retryAfterSeconds, like the real
   * server's 429 "storage is (re)initializing" right after a restart (1 s).
   */
  readonly retryAfterSeconds?: number;
  /** The Status message (default "injected failure CODE"). */
  readonly message?: string;
}

interface Route {
  readonly resource: Resource | 'events';
  /** "v1" or "group/version". */
  readonly api: string;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
  readonly subresource: 'status' | undefined;
}

/** Is a CRD of `group` installed by its own name for the path after /apis/{group}/{version}? */
function crdInstalled(crds: ReadonlySet<string>, group: string, rest: readonly string[]): boolean {
  const plural = rest[0] === 'namespaces' && rest.length >= 3 ? rest[2] : rest[0];
  return plural !== undefined && crds.has(`${plural}.${group}`);
}

function parseRoute(pathname: string, crds: ReadonlySet<string>): Route | undefined {
  const seg = pathname
    .split('/')
    .filter((s) => s !== '')
    .map(decodeURIComponent);
  let api: Route['api'];
  let rest: string[];
  if (seg[0] === 'api' && seg[1] === 'v1') {
    api = 'v1';
    rest = seg.slice(2);
  } else if (seg[0] === 'apis' && seg[1] !== undefined && seg[2] !== undefined) {
    // Custom resources exist only while their CRD (or their whole group) is installed.
    if ((CRD_GROUPS as readonly string[]).includes(seg[1]) && !crds.has(seg[1]) && !crdInstalled(crds, seg[1], seg.slice(3)))
      return undefined;
    api = `${seg[1]}/${seg[2]}`;
    rest = seg.slice(3);
  } else return undefined;
  let namespace: string | undefined;
  // /namespaces/{ns}/{plural}[/{name}] vs /namespaces[/{name}]
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const plural = rest[0];
  const name = rest[1];
  const sub = rest[2];
  if (rest.length > 3 || plural === undefined) return undefined;
  const resource = plural === 'events' ? 'events' : (plural as Resource);
  if (resource !== 'events' && !RESOURCES.includes(resource)) return undefined;
  const expectedApi = resource === 'events' ? (api === 'v1' || api === 'events.k8s.io/v1' ? api : '') : INFO[resource].apiVersion;
  if (api !== expectedApi) return undefined;
  if (resource !== 'events' && namespace !== undefined && !INFO[resource].namespaced) return undefined;
  if (sub !== undefined && (sub !== 'status' || resource === 'events' || INFO[resource].statusSubresource !== true))
    return undefined;
  return { resource, api, namespace, name, subresource: sub };
}

export class FakeApiServer {
  readonly #opts: Required<Omit<FakeApiServerOptions, 'token' | 'crds'>> & { token: string | undefined };
  #server: Server;
  #port = 0;
  #rv = 100;
  #floor = 0;
  /** The resourceVersion of each resource's last change (the watch cache's, per resource). */
  readonly #resourceRv = new Map<string, number>();
  #log: LogEntry[] = [];
  readonly #store: Record<Resource, Map<string, KubeObject>> = {
    pods: new Map(),
    namespaces: new Map(),
    networkpolicies: new Map(),
    nodes: new Map(),
    leases: new Map(),
    nodepolicystatuses: new Map(),
    services: new Map(),
    workspaces: new Map(),
    namespacenetworkpolicies: new Map(),
    clusternetworkpolicies: new Map(),
    adminnetworkpolicies: new Map(),
    baselineadminnetworkpolicies: new Map(),
  };
  /** Installed CRD groups (all by default). */
  readonly #crds = new Set<string>(CRD_GROUPS);
  readonly #watchers = new Set<Watcher>();
  readonly #sockets = new Set<Socket>();
  #faults: Fault[] = [];
  readonly #definitions = new DefinitionStore();
  /** List snapshots of paged lists in progress, by continue-token id. */
  readonly #pages = new Map<string, { rv: number; items: KubeObject[] }>();
  #nextWatcher = 1;
  #uid = 1;
  #closed = false;
  #refusing = false;
  #token: string | undefined;
  /** Every API request (not /_fake/ control calls), in arrival order. */
  readonly requests: RequestRecord[] = [];
  /** Events POSTed by clients. */
  readonly events: RecordedEvent[] = [];

  private constructor(opts: FakeApiServerOptions) {
    this.#opts = {
      port: opts.port ?? 0,
      host: opts.host ?? '127.0.0.1',
      token: opts.token,
      bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 10_000,
      bookmarkMode: opts.bookmarkMode ?? 'progress',
      maxLogEntries: opts.maxLogEntries ?? 200_000,
    };
    this.#token = opts.token;
    if (opts.crds !== undefined) {
      this.#crds.clear();
      for (const g of opts.crds) this.#crds.add(g);
    }
    this.#server = this.#makeServer();
  }

  static async start(opts: FakeApiServerOptions = {}): Promise<FakeApiServer> {
    const s = new FakeApiServer(opts);
    await s.#listen(s.#opts.port);
    return s;
  }

  get port(): number {
    return this.#port;
  }

  get url(): string {
    return `http://${this.#opts.host}:${this.#port}`;
  }

  /** The current (global) resourceVersion. */
  get resourceVersion(): number {
    return this.#rv;
  }

  /** A KubeConfig for @kubernetes/client-node pointing here (plain http needs skipTLSVerify). */
  kubeConfig(token: string | undefined = this.#token): KubeConfig {
    return makeKubeConfig(this.url, token);
  }

  /** Change the accepted bearer token (undefined = no auth). */
  setToken(token: string | undefined): void {
    this.#token = token;
  }

  #makeServer(): Server {
    const server = createServer((req, res) => {
      try {
        this.#handle(req, res);
      } catch (err) {
        this.#send(res, 500, status(500, 'InternalError', String(err)));
      }
    });
    server.on('connection', (sock) => {
      sock.setNoDelay(true);
      this.#sockets.add(sock);
      sock.on('close', () => this.#sockets.delete(sock));
    });
    // Watches live long; never let node's request timeouts cut them.
    server.requestTimeout = 0;
    server.keepAliveTimeout = 5_000;
    return server;
  }

  async #listen(port: number): Promise<void> {
    // Reopening on the same port can race the old socket's teardown: retry briefly.
    for (let attempt = 0; ; attempt++) {
      try {
        await new Promise<void>((resolve, reject) => {
          const onError = (err: Error): void => reject(err);
          this.#server.once('error', onError);
          this.#server.listen(port, this.#opts.host, () => {
            this.#server.off('error', onError);
            resolve();
          });
        });
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 50) throw err;
        this.#server = this.#makeServer();
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    const addr = this.#server.address();
    if (addr === null || typeof addr === 'string') throw new Error('no address');
    this.#port = addr.port;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const w of this.#watchers) this.#dropWatcher(w);
    await new Promise<void>((resolve) => {
      if (!this.#server.listening) return resolve();
      this.#server.close(() => resolve());
      this.resetConnections();
    });
  }

  // ------------------------------------------------------------ fault hooks

  /** Destroys every socket (watches and idle keep-alive connections): clients see a reset. */
  resetConnections(): void {
    for (const w of this.#watchers) this.#dropWatcher(w);
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
  }

  /** Ends every watch stream cleanly (the client reconnects from its last RV). */
  endStreams(resource?: Resource): void {
    for (const w of this.#watchers) {
      if (resource !== undefined && w.resource !== resource) continue;
      this.#dropWatcher(w);
      w.res.end();
    }
  }

  /** Current watch streams stop receiving anything (events, bookmarks) but stay open. */
  silence(resource?: Resource): void {
    for (const w of this.#watchers) if (resource === undefined || w.resource === resource) w.silent = true;
  }

  /** The next `count` API requests (optionally only lists or only watches, of one resource) fail with `status`. */
  failNext(count: number, statusCode = 500, opts: FaultOptions = {}): void {
    this.#faults.push({
      remaining: count,
      status: statusCode,
      only: opts.only,
      resource: opts.resource,
      retryAfterSeconds: opts.retryAfterSeconds,
      message: opts.message,
    });
  }

  /** Forgets faults not yet used up. */
  clearFaults(): void {
    this.#faults = [];
  }

  /** Closes the listener and every connection: new connections are refused until accept(). */
  async refuse(): Promise<void> {
    if (this.#refusing) return;
    this.#refusing = true;
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.resetConnections();
    await closed;
  }

  /** Reopens the listener on the same port after refuse(). */
  async accept(): Promise<void> {
    if (!this.#refusing) return;
    this.#server = this.#makeServer();
    await this.#listen(this.#port);
    this.#refusing = false;
  }

  /** Forgets the event log up to `rv` (default: now): watches from older RVs get 410 Expired. */
  compact(rv: number = this.#rv): void {
    this.#log = this.#log.filter((e) => e.rv > rv);
    this.#floor = Math.max(this.#floor, rv);
  }

  /** Sends a BOOKMARK now, at the global resourceVersion, to every watch that asked for bookmarks (any mode). */
  bookmark(): void {
    for (const w of this.#watchers) if (w.bookmarks) this.#sendBookmark(w, true);
  }

  watchers(): WatcherInfo[] {
    return [...this.#watchers].map((w) => ({
      id: w.id,
      resource: w.resource,
      namespace: w.namespace,
      labelSelector: w.labelText,
      fieldSelector: w.fieldText,
      bookmarks: w.bookmarks,
      silent: w.silent,
      sent: w.sent,
    }));
  }

  /** Total events and bookmarks written to watch streams since start. */
  get watchEventsSent(): number {
    return this.#sentTotal;
  }
  #sentTotal = 0;

  // ------------------------------------------------------------ object API

  get(resource: Resource, namespace: string | undefined, name: string): KubeObject | undefined {
    const o = this.#store[resource].get(`${INFO[resource].namespaced ? (namespace ?? '') : ''}/${name}`);
    return o === undefined ? undefined : clone(o);
  }

  list(resource: Resource): KubeObject[] {
    return [...this.#store[resource].values()].map(clone);
  }

  count(resource: Resource): number {
    return this.#store[resource].size;
  }

  create(resource: Resource, obj: KubeObject): KubeObject {
    const o = this.#normalizeIncoming(resource, obj);
    const key = keyOf(o);
    if (this.#store[resource].has(key)) throw new Error(`${resource} ${key} already exists`);
    o.metadata.uid = `uid-${this.#uid++}`;
    o.metadata.creationTimestamp = new Date().toISOString();
    if (INFO[resource].generation === true) o.metadata.generation = 1;
    const out = this.#commit(resource, 'ADDED', o, undefined);
    if (Array.isArray(o.metadata.ownerReferences)) this.#scheduleGc(`${resource}:${keyOf(o)}`);
    return out;
  }

  update(resource: Resource, obj: KubeObject): KubeObject {
    const o = this.#normalizeIncoming(resource, obj);
    const old = this.#store[resource].get(keyOf(o));
    if (old === undefined) throw new Error(`${resource} ${keyOf(o)} not found`);
    o.metadata.uid = old.metadata.uid;
    o.metadata.creationTimestamp = old.metadata.creationTimestamp;
    if (INFO[resource].generation === true) {
      const g = typeof old.metadata.generation === 'number' ? old.metadata.generation : 1;
      o.metadata.generation = isDeepStrictEqual(o.spec, old.spec) ? g : g + 1;
    }
    const out = this.#commit(resource, 'MODIFIED', o, old);
    if (Array.isArray(o.metadata.ownerReferences) && !isDeepStrictEqual(o.metadata.ownerReferences, old.metadata.ownerReferences))
      this.#scheduleGc(`${resource}:${keyOf(o)}`);
    return out;
  }

  /** Create or replace. */
  apply(resource: Resource, obj: KubeObject): KubeObject {
    const o = this.#normalizeIncoming(resource, obj);
    return this.#store[resource].has(keyOf(o)) ? this.update(resource, o) : this.create(resource, o);
  }

  delete(resource: Resource, namespace: string | undefined, name: string): boolean {
    const key = `${INFO[resource].namespaced ? (namespace ?? '') : ''}/${name}`;
    const old = this.#store[resource].get(key);
    if (old === undefined) return false;
    const gone = clone(old);
    this.#commit(resource, 'DELETED', gone, old);
    this.#collectGarbage(this.#dependentsOf(old.metadata.uid));
    return true;
  }

  // ------------------------------------------------------------ garbage collection

  /** Dependents waiting for the collector to look at them (see #scheduleGc). */
  readonly #gcQueue = new Set<string>();
  /** "resource:ns/name" -> resource of every object with owner references (the collector's work list). */
  readonly #dependents = new Map<string, Resource>();

  #scheduleGc(id: string): void {
    if (this.#gcQueue.size === 0)
      // Asynchronous like the real collector: a create with a dangling owner succeeds, then the object goes.
      setImmediate(() => {
        const ids = [...this.#gcQueue];
        this.#gcQueue.clear();
        if (!this.#closed) this.#collectGarbage(ids);
      });
    this.#gcQueue.add(id);
  }

  /** Ids ("resource:ns/name") of the objects naming `uid` as an owner. */
  #dependentsOf(uid: string | undefined): string[] {
    if (uid === undefined) return [];
    const out: string[] = [];
    for (const [id, r] of this.#dependents) {
      const refs = this.#store[r].get(id.slice(r.length + 1))?.metadata.ownerReferences;
      if (Array.isArray(refs) && refs.some((ref) => (ref as { uid?: unknown } | null)?.uid === uid)) out.push(id);
    }
    return out;
  }

  /** Does the owner an ownerReference names exist (same uid)? Namespaced owners live in the dependent's namespace. */
  #ownerExists(ref: unknown, dependentNs: string | undefined): boolean {
    if (typeof ref !== 'object' || ref === null) return false;
    const r = ref as Record<string, unknown>;
    const resource = typeof r.kind === 'string' ? KIND_TO_RESOURCE[r.kind] : undefined;
    if (resource === undefined || typeof r.name !== 'string') return false;
    const owner = this.#store[resource].get(`${INFO[resource].namespaced ? (dependentNs ?? '') : ''}/${r.name}`);
    return owner !== undefined && owner.metadata.uid === r.uid;
  }

  /** Deletes the given dependents whose owner references are all gone, then their own dependents (background propagation). */
  #collectGarbage(ids: readonly string[]): void {
    const work = [...ids];
    for (let id = work.pop(); id !== undefined; id = work.pop()) {
      const r = this.#dependents.get(id);
      const o = r === undefined ? undefined : this.#store[r].get(id.slice(r.length + 1));
      const refs = o?.metadata.ownerReferences;
      if (r === undefined || o === undefined || !Array.isArray(refs)) continue;
      if (refs.some((ref) => this.#ownerExists(ref, o.metadata.namespace))) continue;
      this.#commit(r, 'DELETED', clone(o), o);
      work.push(...this.#dependentsOf(o.metadata.uid));
    }
  }

  /** Merge `labels` into the object's labels (a null value removes the label). */
  patchLabels(
    resource: Resource,
    namespace: string | undefined,
    name: string,
    labels: Record<string, string | null>,
  ): KubeObject {
    const cur = this.get(resource, namespace, name);
    if (cur === undefined) throw new Error(`${resource} ${namespace ?? ''}/${name} not found`);
    const next: Record<string, string> = { ...cur.metadata.labels };
    for (const [k, v] of Object.entries(labels)) {
      if (v === null) delete next[k];
      else next[k] = v;
    }
    cur.metadata.labels = next;
    return this.update(resource, cur);
  }

  /**
   * Uninstalls the CRDs of these groups (default: all): their API paths answer
   * 404, open watches on them end, stored objects stay for a later install.
   */
  removeCRDs(groups: readonly string[] = CRD_GROUPS): void {
    for (const g of groups) this.#crds.delete(g);
    for (const w of [...this.#watchers]) {
      const group = INFO[w.resource].apiVersion.split('/')[0] ?? '';
      if (groups.includes(group)) this.endStreams(w.resource);
    }
  }

  installCRDs(groups: readonly string[] = CRD_GROUPS): void {
    for (const g of groups) this.#crds.add(g);
  }

  /** Loads many objects (any supported kind) without emitting per-object work beyond the log. */
  load(objects: readonly KubeObject[]): void {
    for (const o of objects) {
      const r = o.kind === undefined ? undefined : KIND_TO_RESOURCE[o.kind];
      if (r === undefined) throw new Error(`unsupported kind ${String(o.kind)}`);
      this.apply(r, o);
    }
  }

  #normalizeIncoming(resource: Resource, obj: KubeObject): KubeObject {
    const o = clone(obj);
    const info = INFO[resource];
    o.apiVersion = info.apiVersion;
    o.kind = info.kind;
    if (typeof o.metadata?.name !== 'string' || o.metadata.name === '') throw new Error('metadata.name is required');
    if (info.namespaced) o.metadata.namespace = o.metadata.namespace ?? 'default';
    else delete o.metadata.namespace;
    if (resource === 'namespaces') o.metadata.labels = { ...o.metadata.labels, 'kubernetes.io/metadata.name': o.metadata.name };
    return o;
  }

  #commit(resource: Resource, type: EventType, obj: KubeObject, old: KubeObject | undefined): KubeObject {
    const rv = ++this.#rv;
    obj.metadata.resourceVersion = String(rv);
    this.#resourceRv.set(resource, rv);
    const store = this.#store[resource];
    if (type === 'DELETED') store.delete(keyOf(obj));
    else store.set(keyOf(obj), obj);
    const id = `${resource}:${keyOf(obj)}`;
    const refs = obj.metadata.ownerReferences;
    if (type !== 'DELETED' && Array.isArray(refs) && refs.length > 0) this.#dependents.set(id, resource);
    else this.#dependents.delete(id);
    const entry: LogEntry = { rv, resource, type, object: obj, old };
    this.#log.push(entry);
    if (this.#log.length > this.#opts.maxLogEntries) {
      const drop = this.#log.length - this.#opts.maxLogEntries;
      const last = this.#log[drop - 1];
      this.#log.splice(0, drop);
      if (last !== undefined) this.#floor = Math.max(this.#floor, last.rv);
    }
    for (const w of this.#watchers) if (w.resource === resource) this.#deliver(w, entry);
    return clone(obj);
  }

  // ------------------------------------------------------------ HTTP

  #send(res: ServerResponse, code: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname.startsWith('/_fake/')) {
      this.#control(req, res, url);
      return;
    }
    const query: Record<string, string> = {};
    for (const [k, v] of url.searchParams) query[k] = v;
    const isWatch = query.watch === 'true' || query.watch === '1';
    const method = req.method ?? 'GET';
    const record = (code: number, bytes?: number): void => {
      this.requests.push({
        method,
        path: url.pathname,
        query,
        watch: isWatch,
        status: code,
        ...(bytes === undefined ? {} : { bytes }),
      });
    };
    const fail = (code: number, message: string): void => {
      record(code);
      this.#send(res, code, status(code, REASONS[code] ?? 'Unknown', message));
    };

    if (this.#token !== undefined && req.headers.authorization !== `Bearer ${this.#token}`) {
      fail(401, 'Unauthorized');
      return;
    }
    const route = parseRoute(url.pathname, this.#crds);
    const fault = this.#takeFault(
      method !== 'GET' ? 'write' : route !== undefined && route.name === undefined ? (isWatch ? 'watch' : 'list') : undefined,
      route,
    );
    if (fault !== undefined) {
      const message = fault.message ?? `injected failure ${fault.status}`;
      const after = fault.retryAfterSeconds;
      if (after === undefined) return fail(fault.status, message);
      record(fault.status);
      const body = {
        ...status(fault.status, REASONS[fault.status] ?? 'Unknown', message),
        details: { retryAfterSeconds: after },
      };
      const text = JSON.stringify(body);
      res.writeHead(fault.status, {
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(text),
        'Retry-After': String(after),
      });
      res.end(text);
      return;
    }
    const definition = route === undefined ? definitionRoute(url.pathname) : undefined;
    if (definition !== undefined) {
      const answer = (body: unknown): void => {
        const a = this.#definitions.handle(method, definition, body, () => ++this.#rv);
        this.#definitionInstalled(definition.key, method, a.stored);
        record(a.code);
        this.#send(res, a.code, a.body);
      };
      if (method !== 'POST' && method !== 'PUT') return answer(undefined);
      readBody(req).then(
        (text) => {
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            return fail(400, 'invalid JSON');
          }
          answer(body);
        },
        () => res.destroy(),
      );
      return;
    }
    if (route === undefined) {
      fail(404, `the server could not find the requested resource ${url.pathname}`);
      return;
    }
    if (route.resource === 'events') {
      if (
        method !== 'POST' ||
        route.namespace === undefined ||
        route.name !== undefined ||
        route.api === 'networking.k8s.io/v1'
      ) {
        fail(405, 'only POST to namespaced events is supported');
        return;
      }
      const api: RecordedEvent['api'] = route.api === 'v1' ? 'v1' : 'events.k8s.io/v1';
      const ns = route.namespace;
      readBody(req).then(
        (text) => {
          let body: Record<string, unknown>;
          try {
            body = JSON.parse(text) as Record<string, unknown>;
          } catch {
            fail(400, 'invalid JSON');
            return;
          }
          const meta = (typeof body.metadata === 'object' && body.metadata !== null ? body.metadata : {}) as Record<
            string,
            unknown
          >;
          const name =
            typeof meta.name === 'string' && meta.name !== ''
              ? meta.name
              : `${String(meta.generateName ?? 'event.')}${(this.#uid++).toString(36)}`;
          const stored = {
            ...body,
            metadata: { ...meta, name, namespace: ns, resourceVersion: String(++this.#rv), uid: `uid-${this.#uid++}` },
          };
          this.events.push({ api, namespace: ns, body: stored });
          record(201);
          this.#send(res, 201, stored);
        },
        () => res.destroy(),
      );
      return;
    }
    const resource = route.resource;
    if (method === 'GET') {
      if (route.name !== undefined) {
        const o = this.get(resource, route.namespace, route.name);
        if (o === undefined) return fail(404, `${resource} "${route.name}" not found`);
        record(200);
        return this.#send(res, 200, o);
      }
      let labels: readonly LabelRequirement[];
      let fields: readonly FieldRequirement[];
      try {
        labels = parseLabelSelector(query.labelSelector ?? '');
        fields = parseFieldSelector(query.fieldSelector ?? '');
      } catch (err) {
        return fail(400, (err as Error).message);
      }
      if (isWatch) {
        record(200);
        this.#startWatch(req, res, resource, route.namespace, query, labels, fields);
        return;
      }
      const info = INFO[resource];
      // Paging (limit/continue) serves every page from the snapshot taken for the first one, like etcd.
      let snap: { rv: number; items: KubeObject[] };
      let offset = 0;
      const cont = query.continue ?? '';
      if (cont !== '') {
        const [id, off] = cont.split(':');
        const found = this.#pages.get(id ?? '');
        if (found === undefined)
          return fail(410, 'The provided continue parameter is too old to display a consistent list result.');
        snap = found;
        offset = Number(off);
      } else {
        const items = [...this.#store[resource].values()]
          .filter((o) => this.#matches(resource, route.namespace, labels, fields, o))
          .sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));
        snap = { rv: this.#rv, items };
      }
      const limit = Number(query.limit ?? '0');
      const end = limit > 0 ? offset + limit : snap.items.length;
      const metadata: Record<string, unknown> = { resourceVersion: String(snap.rv) };
      if (end < snap.items.length) {
        const id = cont === '' ? String(this.#uid++) : (cont.split(':')[0] ?? '');
        this.#pages.set(id, snap);
        metadata.continue = `${id}:${end}`;
        metadata.remainingItemCount = snap.items.length - end;
      } else if (cont !== '') this.#pages.delete(cont.split(':')[0] ?? '');
      record(200);
      const page = snap.items.slice(offset, end);
      if (page.length <= 1_000)
        return this.#send(res, 200, { kind: `${info.kind}List`, apiVersion: info.apiVersion, metadata, items: page });
      this.#streamList(res, { kind: `${info.kind}List`, apiVersion: info.apiVersion, metadata }, page);
      return;
    }
    // Writes, so that process tests can drive the server with a real client too.
    if (method === 'DELETE' && route.name !== undefined) {
      const o = this.get(resource, route.namespace, route.name);
      if (o === undefined || !this.delete(resource, route.namespace, route.name))
        return fail(404, `${resource} "${route.name}" not found`);
      record(200);
      return this.#send(res, 200, o);
    }
    if (
      (method === 'POST' && route.name === undefined && route.subresource === undefined) ||
      ((method === 'PUT' || method === 'PATCH') && route.name !== undefined)
    ) {
      const name = route.name;
      const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim();
      if (method === 'PATCH' && contentType !== 'application/merge-patch+json')
        return fail(
          415,
          `the body of the request was in an unknown format: ${contentType ?? ''} (only application/merge-patch+json)`,
        );
      readBody(req).then(
        (text) => {
          try {
            const body = JSON.parse(text) as KubeObject;
            if (typeof body !== 'object' || body === null) return fail(400, 'the body must be a JSON object');
            if (method === 'POST') {
              const obj = this.#forCreate(resource, body);
              if (route.namespace !== undefined) obj.metadata = { ...obj.metadata, namespace: route.namespace };
              const key = `${INFO[resource].namespaced ? (obj.metadata.namespace ?? 'default') : ''}/${String(obj.metadata?.name)}`;
              if (this.#store[resource].has(key)) return fail(409, `${resource} "${String(obj.metadata?.name)}" already exists`);
              const out = this.create(resource, obj);
              record(201, Buffer.byteLength(text));
              return this.#send(res, 201, out);
            }
            const cur = this.#store[resource].get(`${INFO[resource].namespaced ? (route.namespace ?? '') : ''}/${name}`);
            if (cur === undefined) return fail(404, `${resource} "${String(name)}" not found`);
            // A resourceVersion in the body (PUT) or the patch is a precondition.
            const want = (body.metadata as ObjectMeta | undefined)?.resourceVersion;
            if (want !== undefined && want !== cur.metadata.resourceVersion) {
              record(409);
              return this.#send(res, 409, {
                ...status(
                  409,
                  'Conflict',
                  `Operation cannot be fulfilled on ${resource} "${String(name)}": the object has been modified; please apply your changes to the latest version and try again`,
                ),
              });
            }
            const next = method === 'PUT' ? clone(body) : (mergePatch(clone(cur), body) as KubeObject);
            if (typeof next !== 'object' || next === null || typeof next.metadata !== 'object' || next.metadata === null)
              return fail(400, 'the result has no metadata');
            if (next.metadata.name !== name) return fail(400, `metadata.name must be ${String(name)}`);
            if (route.namespace !== undefined) next.metadata.namespace = route.namespace;
            next.metadata.resourceVersion = cur.metadata.resourceVersion;
            const out = this.update(resource, this.#forUpdate(resource, route.subresource, cur, next));
            record(200, Buffer.byteLength(text));
            this.#send(res, 200, out);
          } catch (err) {
            fail(/not found/.test(String(err)) ? 404 : 400, String(err));
          }
        },
        () => res.destroy(),
      );
      return;
    }
    fail(405, `${method} not supported`);
  }

  /** A created object of a kind with a status subresource starts without status, as on a real server. */
  #forCreate(resource: Resource, body: KubeObject): KubeObject {
    const o = clone(body);
    if (INFO[resource].statusSubresource === true) delete o.status;
    return o;
  }

  /** What an update of the main resource or of /status may change. */
  #forUpdate(resource: Resource, sub: 'status' | undefined, cur: KubeObject, next: KubeObject): KubeObject {
    if (INFO[resource].statusSubresource !== true) return next;
    if (sub === 'status') {
      const o = clone(cur);
      if (next.status === undefined) delete o.status;
      else o.status = next.status;
      return o;
    }
    const o = clone(next);
    if (cur.status === undefined) delete o.status;
    else o.status = clone(cur.status);
    return o;
  }

  /** Big lists are written in chunks (one JSON.stringify of 100k pods would exceed V8's string limit). */
  #streamList(res: ServerResponse, head: Record<string, unknown>, items: readonly KubeObject[]): void {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    const open = JSON.stringify(head);
    res.write(`${open.slice(0, -1)},"items":[`);
    let i = 0;
    const pump = (): void => {
      while (i < items.length) {
        const chunk: string[] = [];
        for (const end = Math.min(items.length, i + 200); i < end; i++) chunk.push(JSON.stringify(items[i]));
        const more = res.write(`${i > chunk.length ? ',' : ''}${chunk.join(',')}`);
        if (!more) {
          res.once('drain', pump);
          return;
        }
      }
      res.end(']}');
    };
    res.on('error', () => {});
    pump();
  }

  #takeFault(kind: 'list' | 'watch' | 'write' | undefined, route: Route | undefined): Fault | undefined {
    for (const f of this.#faults) {
      if (f.remaining <= 0) continue;
      if (f.only !== undefined && f.only !== kind) continue;
      if (f.resource !== undefined && route?.resource !== f.resource) continue;
      f.remaining--;
      this.#faults = this.#faults.filter((x) => x.remaining > 0);
      return f;
    }
    return undefined;
  }

  /** Creating a CRD of a custom resource group served here installs the group; deleting it uninstalls it. */
  #definitionInstalled(key: string, method: string, stored: Record<string, unknown> | undefined): void {
    if (stored === undefined || !key.startsWith('apiextensions.k8s.io/')) return;
    const spec = stored.spec as { group?: unknown } | undefined;
    const group = typeof spec?.group === 'string' ? spec.group : '';
    if (!(CRD_GROUPS as readonly string[]).includes(group)) return;
    if (method === 'DELETE') this.removeCRDs([group]);
    else this.installCRDs([group]);
  }

  /** CustomResourceDefinitions and ValidatingAdmissionPolicies (and bindings) accepted through the API. */
  definitions(
    kind: 'CustomResourceDefinition' | 'ValidatingAdmissionPolicy' | 'ValidatingAdmissionPolicyBinding',
  ): Record<string, unknown>[] {
    return this.#definitions.list(kind);
  }

  #matches(
    resource: Resource,
    ns: string | undefined,
    labels: readonly LabelRequirement[],
    fields: readonly FieldRequirement[],
    o: KubeObject,
  ): boolean {
    if (INFO[resource].namespaced && ns !== undefined && o.metadata.namespace !== ns) return false;
    return labelsMatch(labels, o.metadata.labels) && fieldsMatch(fields, o);
  }

  #startWatch(
    req: IncomingMessage,
    res: ServerResponse,
    resource: Resource,
    ns: string | undefined,
    query: Record<string, string>,
    labels: readonly LabelRequirement[],
    fields: readonly FieldRequirement[],
  ): void {
    res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache' });
    res.flushHeaders();
    const w: Watcher = {
      id: this.#nextWatcher++,
      resource,
      namespace: ns,
      labelText: query.labelSelector,
      fieldText: query.fieldSelector,
      labels,
      fields,
      bookmarks: query.allowWatchBookmarks === 'true' || query.allowWatchBookmarks === '1',
      res,
      silent: false,
      sent: 0,
      timer: undefined,
      rv: this.#rv,
      deadline: undefined,
    };
    const rvText = query.resourceVersion ?? '';
    const from = rvText === '' || rvText === '0' ? undefined : Number(rvText);
    if (from !== undefined && Number.isFinite(from)) w.rv = from;
    if (from !== undefined && (!Number.isFinite(from) || from < this.#floor)) {
      // Like the watch cache: 200, one ERROR Status event, then the end of the stream.
      this.#write(w, { type: 'ERROR', object: status(410, 'Expired', `too old resource version: ${rvText} (${this.#floor})`) });
      res.end();
      return;
    }
    if (from === undefined) {
      // "Get state and start at most recent": synthetic ADDED for the current objects.
      for (const o of this.#store[resource].values()) {
        if (this.#matches(resource, ns, labels, fields, o)) this.#write(w, { type: 'ADDED', object: o });
      }
    } else {
      for (const e of this.#log) if (e.rv > from && e.resource === resource) this.#deliver(w, e);
    }
    this.#watchers.add(w);
    if (w.bookmarks && this.#opts.bookmarkIntervalMs > 0) {
      w.timer = setInterval(() => this.#sendBookmark(w, false), this.#opts.bookmarkIntervalMs);
      w.timer.unref();
    }
    const timeout = Number(query.timeoutSeconds ?? '0');
    if (Number.isFinite(timeout) && timeout > 0) {
      // The server ends the watch cleanly at its timeout.
      w.deadline = setTimeout(() => {
        this.#dropWatcher(w);
        w.res.end();
      }, timeout * 1000);
      w.deadline.unref();
    }
    const gone = (): void => this.#dropWatcher(w);
    req.on('close', gone);
    res.on('close', gone);
  }

  #dropWatcher(w: Watcher): void {
    if (w.timer !== undefined) clearInterval(w.timer);
    w.timer = undefined;
    if (w.deadline !== undefined) clearTimeout(w.deadline);
    w.deadline = undefined;
    this.#watchers.delete(w);
  }

  /**
   * `force` (on demand) or timer mode: now, at the global resourceVersion.
   * Progress mode: only when the resource's last change is newer than what the
   * watcher has seen (the watch cache sends its own resourceVersion, and only
   * events newer than the watcher's).
   */
  #sendBookmark(w: Watcher, force: boolean): void {
    if (w.silent) return;
    let rv = this.#rv;
    if (!force && this.#opts.bookmarkMode === 'progress') {
      rv = this.#resourceRv.get(w.resource) ?? 0;
      if (rv <= w.rv) return;
    }
    const info = INFO[w.resource];
    this.#write(w, {
      type: 'BOOKMARK',
      object: {
        kind: info.kind,
        apiVersion: info.apiVersion,
        metadata: { resourceVersion: String(rv), annotations: { 'k8s.io/initial-events-end': 'false' } },
      },
    });
  }

  /** Applies the selector-crossing rule: starts matching -> ADDED, stops matching -> DELETED (old object, new RV). */
  #deliver(w: Watcher, e: LogEntry): void {
    const m = (o: KubeObject | undefined): boolean =>
      o !== undefined && this.#matches(w.resource, w.namespace, w.labels, w.fields, o);
    const now = m(e.object);
    const before = e.type === 'ADDED' ? false : m(e.old);
    if (e.type === 'DELETED') {
      if (before) this.#write(w, { type: 'DELETED', object: e.object });
      return;
    }
    if (now && before) this.#write(w, { type: 'MODIFIED', object: e.object });
    else if (now) this.#write(w, { type: 'ADDED', object: e.object });
    else if (before && e.old !== undefined) {
      const old = clone(e.old);
      old.metadata.resourceVersion = String(e.rv);
      this.#write(w, { type: 'DELETED', object: old });
    }
  }

  #write(w: Watcher, ev: unknown): void {
    if (w.silent || w.res.destroyed || w.res.writableEnded) return;
    const rv = Number((ev as { object?: { metadata?: { resourceVersion?: unknown } } }).object?.metadata?.resourceVersion);
    if (Number.isFinite(rv) && rv > w.rv) w.rv = rv;
    w.sent++;
    this.#sentTotal++;
    w.res.write(`${JSON.stringify(ev)}\n`);
  }

  // ------------------------------------------------------------ control API

  #control(req: IncomingMessage, res: ServerResponse, url: URL): void {
    const parts = url.pathname
      .split('/')
      .filter((s) => s !== '')
      .slice(1)
      .map(decodeURIComponent);
    const q = url.searchParams;
    const ok = (body: unknown = { ok: true }): void => this.#send(res, 200, body);
    const bad = (err: unknown): void => this.#send(res, 400, { ok: false, error: String(err) });
    const method = req.method ?? 'GET';
    const op = parts[0];
    try {
      if (method === 'GET' && op === 'stats') {
        const objects: Record<string, number> = {};
        for (const r of RESOURCES) objects[r] = this.#store[r].size;
        return ok({
          url: this.url,
          resourceVersion: this.#rv,
          objects,
          watchers: this.#watchers.size,
          requests: this.requests.length,
          watchEventsSent: this.#sentTotal,
          logEntries: this.#log.length,
        });
      }
      if (method === 'GET' && op === 'events') return ok(this.events);
      if (method === 'GET' && op === 'watchers') return ok(this.watchers());
      if (method === 'GET' && op === 'requests') {
        const from = Number(q.get('from') ?? '0');
        return ok({ total: this.requests.length, items: this.requests.slice(Number.isFinite(from) ? from : 0) });
      }
      if (method === 'POST' && op === 'objects') {
        readBody(req).then((text) => {
          try {
            const objs = parseObjects(text);
            this.load(objs);
            ok({ ok: true, applied: objs.length, resourceVersion: this.#rv });
          } catch (err) {
            bad(err);
          }
        }, bad);
        return;
      }
      if (method === 'DELETE' && op === 'objects') {
        const resource = parts[1] as Resource;
        if (!RESOURCES.includes(resource)) return bad(`unknown resource ${String(resource)}`);
        const [nsOrName, name] = [parts[2], parts[3]];
        const found =
          name === undefined ? this.delete(resource, undefined, nsOrName ?? '') : this.delete(resource, nsOrName, name);
        return ok({ ok: found });
      }
      if (method === 'POST') {
        switch (op) {
          case 'fail': {
            const only = q.get('only');
            const resource = q.get('resource');
            const retryAfter = q.get('retryAfter');
            const message = q.get('message');
            this.failNext(Number(q.get('count') ?? '1'), Number(q.get('status') ?? '500'), {
              ...(only === 'list' || only === 'watch' || only === 'write' ? { only } : {}),
              ...(resource !== null && RESOURCES.includes(resource as Resource) ? { resource: resource as Resource } : {}),
              ...(retryAfter === null ? {} : { retryAfterSeconds: Number(retryAfter) }),
              ...(message === null ? {} : { message }),
            });
            return ok();
          }
          case 'reset-connections':
            // Answer first: this very connection is one of those destroyed.
            res.on('finish', () => this.resetConnections());
            return ok();
          case 'end-streams':
            this.endStreams();
            return ok();
          case 'silence':
            this.silence();
            return ok();
          case 'compact':
            this.compact();
            return ok({ ok: true, floor: this.#floor });
          case 'bookmark':
            this.bookmark();
            return ok();
          case 'crds': {
            const groups = (q.get('groups') ?? CRD_GROUPS.join(',')).split(',').filter((g) => g !== '');
            if (q.get('installed') === 'false') this.removeCRDs(groups);
            else this.installCRDs(groups);
            return ok();
          }
          case 'refuse': {
            const ms = Number(q.get('ms') ?? '1000');
            res.on('finish', () => {
              void this.refuse().then(() => setTimeout(() => void this.accept(), ms));
            });
            return ok();
          }
          default:
            break;
        }
      }
      this.#send(res, 404, { ok: false, error: `unknown control call ${method} ${url.pathname}` });
    } catch (err) {
      bad(err);
    }
  }
}

/** RFC 7386 JSON merge patch: objects merge, null deletes, everything else (lists too) replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    typeof target === 'object' && target !== null && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** JSON (object or List) or YAML (multi-document, Lists flattened). */
export function parseObjects(text: string): KubeObject[] {
  const out: KubeObject[] = [];
  const add = (v: unknown): void => {
    if (typeof v !== 'object' || v === null) return;
    const o = v as KubeObject & { items?: unknown };
    if (typeof o.kind === 'string' && o.kind.endsWith('List') && Array.isArray(o.items)) {
      for (const i of o.items) add(i);
      return;
    }
    out.push(o);
  };
  const t = text.trimStart();
  if (t.startsWith('{') || t.startsWith('[')) {
    // Plain JSON (one object, a List or an array): much faster than YAML for big states.
    try {
      const v: unknown = JSON.parse(text);
      for (const o of Array.isArray(v) ? v : [v]) add(o);
      return out;
    } catch {
      // Several JSON documents separated by `---`: fall through to YAML.
    }
  }
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(doc.errors.map((e) => e.message).join('; '));
    add(doc.toJS());
  }
  return out;
}

/**
 * Polls `cond` until it returns a truthy value (returned) or `timeoutMs` passes
 * (throws with `what`). For tests: wait for conditions, never for durations.
 */
export async function waitFor<T>(
  cond: () => T | Promise<T>,
  what = 'condition',
  timeoutMs = 10_000,
  everyMs = 10,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await cond();
    if (v !== undefined && v !== null && v !== false) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** A KubeConfig pointing at a plain-http server (client-node requires skipTLSVerify for http:). */
export function makeKubeConfig(server: string, token?: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromClusterAndUser(
    { name: 'fake', server, skipTLSVerify: true },
    { name: 'fake-user', ...(token === undefined ? {} : { token }) },
  );
  return kc;
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '0' },
      host: { type: 'string', default: '127.0.0.1' },
      state: { type: 'string' },
      token: { type: 'string' },
      'bookmark-ms': { type: 'string' },
      'bookmark-mode': { type: 'string' },
      'max-log': { type: 'string' },
    },
  });
  const api = await FakeApiServer.start({
    port: Number(values.port),
    host: values.host,
    ...(values.token === undefined ? {} : { token: values.token }),
    ...(values['bookmark-ms'] === undefined ? {} : { bookmarkIntervalMs: Number(values['bookmark-ms']) }),
    ...(values['bookmark-mode'] === 'timer' || values['bookmark-mode'] === 'progress'
      ? { bookmarkMode: values['bookmark-mode'] }
      : {}),
    ...(values['max-log'] === undefined ? {} : { maxLogEntries: Number(values['max-log']) }),
  });
  if (values.state !== undefined) api.load(parseObjects(readFileSync(values.state, 'utf8')));
  process.stdout.write(`${api.url}\n`);
  const stop = (): void => {
    void api.close().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
