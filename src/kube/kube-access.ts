// The agent's client configuration without @kubernetes/client-node (see
// kube-http.ts for why), found where client-node's loadFromDefault finds it:
// the first file $KUBECONFIG names, else ~/.kube/config, else the pod's
// service account (the DaemonSet's case). It covers what a node agent is
// given: a server with its CA (file or data) or insecure-skip-tls-verify,
// and a bearer token (inline, token file, the service account's, re-read
// every minute as client-node does for rotation) or a client certificate.
// Anything else (exec or auth-provider plugins, basic auth, proxies, a
// KUBECONFIG list to merge) returns undefined: the caller then loads
// client-node's KubeConfig, which covers it, at the library's memory price.
import { readFileSync, statSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import type { KubeAccess } from './kube-http.ts';
import { yaml } from '../model/yaml-lib.ts';

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** client-node re-reads a token file after this long (token rotation). */
const TOKEN_REREAD_MS = 60_000;

type Secret = { readonly file: string } | { readonly data: Buffer };

export interface LeanAccessSpec {
  readonly name: string;
  readonly server: string;
  readonly skipTLSVerify: boolean;
  readonly tlsServerName?: string | undefined;
  readonly ca?: Secret | undefined;
  readonly cert?: Secret | undefined;
  readonly key?: Secret | undefined;
  readonly token?: string | undefined;
  readonly tokenFile?: string | undefined;
}

function read(s: Secret | undefined): Buffer | undefined {
  if (s === undefined) return undefined;
  return 'data' in s ? s.data : readFileSync(s.file);
}

/** KubeAccess over node:https options. */
export class LeanKubeAccess implements KubeAccess {
  readonly #spec: LeanAccessSpec;
  readonly #tls: { ca?: Buffer; cert?: Buffer; key?: Buffer };
  #token: { value: string; at: number } | undefined;

  constructor(spec: LeanAccessSpec) {
    this.#spec = spec;
    const ca = read(spec.ca);
    const cert = read(spec.cert);
    const key = read(spec.key);
    this.#tls = {
      ...(ca === undefined ? {} : { ca }),
      ...(cert === undefined ? {} : { cert }),
      ...(key === undefined ? {} : { key }),
    };
  }

  getCurrentCluster(): { name: string; server: string; skipTLSVerify: boolean } {
    return { name: this.#spec.name, server: this.#spec.server, skipTLSVerify: this.#spec.skipTLSVerify };
  }

  #bearer(): string | undefined {
    if (this.#spec.token !== undefined) return this.#spec.token;
    const file = this.#spec.tokenFile;
    if (file === undefined) return undefined;
    const now = Date.now();
    if (this.#token === undefined || now - this.#token.at >= TOKEN_REREAD_MS)
      this.#token = { value: readFileSync(file, 'utf8').trim(), at: now };
    return this.#token.value;
  }

  applyToHTTPSOptions(opts: RequestOptions): Promise<void> {
    Object.assign(opts, this.#tls);
    if (this.#spec.skipTLSVerify) opts.rejectUnauthorized = false;
    if (this.#spec.tlsServerName !== undefined) opts.servername = this.#spec.tlsServerName;
    const token = this.#bearer();
    if (token !== undefined) opts.headers = { ...(opts.headers as Record<string, string>), authorization: `Bearer ${token}` };
    return Promise.resolve();
  }
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : undefined);
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

function named(list: unknown, name: string, field: string): Obj | undefined {
  if (!Array.isArray(list)) return undefined;
  for (const e of list as unknown[]) if (obj(e)?.name === name) return obj(obj(e)?.[field]);
  return undefined;
}

const CLUSTER_KEYS = new Set([
  'server',
  'certificate-authority',
  'certificate-authority-data',
  'insecure-skip-tls-verify',
  'tls-server-name',
  'extensions',
]);
const USER_KEYS = new Set([
  'token',
  'tokenFile',
  'client-certificate',
  'client-certificate-data',
  'client-key',
  'client-key-data',
  'extensions',
]);

/** JSON (what client-node's exportConfig writes) without loading the YAML library; YAML otherwise. */
function parseConfig(text: string): unknown {
  if (text.trimStart().startsWith('{'))
    try {
      return JSON.parse(text) as unknown;
    } catch {
      // A YAML flow mapping, or not valid: the library says.
    }
  return yaml().parse(text);
}

/** A kubeconfig's current context, when it uses only what LeanKubeAccess covers; undefined otherwise. */
export function leanAccessFromKubeconfig(text: string, file: string): LeanKubeAccess | undefined {
  let doc: Obj | undefined;
  try {
    doc = obj(parseConfig(text));
  } catch {
    return undefined;
  }
  const ctxName = str(doc?.['current-context']);
  if (doc === undefined || ctxName === undefined) return undefined;
  const ctx = named(doc.contexts, ctxName, 'context');
  const clusterName = str(ctx?.cluster);
  if (ctx === undefined || clusterName === undefined) return undefined;
  const cluster = named(doc.clusters, clusterName, 'cluster');
  const userName = str(ctx.user);
  const user = userName === undefined ? {} : named(doc.users, userName, 'user');
  if (cluster === undefined || user === undefined) return undefined;
  if (Object.keys(cluster).some((k) => !CLUSTER_KEYS.has(k)) || Object.keys(user).some((k) => !USER_KEYS.has(k)))
    return undefined;
  const server = str(cluster.server);
  if (server === undefined) return undefined;
  const skipTLSVerify = cluster['insecure-skip-tls-verify'] === true;
  // client-node refuses plain HTTP without skip-tls-verify: let it say so.
  if (server.startsWith('http:') && !skipTLSVerify) return undefined;
  const dir = dirname(file);
  const path = (p: string): string => (isAbsolute(p) ? p : join(dir, p));
  const secret = (data: unknown, f: unknown): Secret | undefined => {
    const d = str(data);
    if (d !== undefined) return { data: Buffer.from(d, 'base64') };
    const p = str(f);
    return p === undefined ? undefined : { file: path(p) };
  };
  const tokenFile = str(user.tokenFile);
  const spec: LeanAccessSpec = {
    name: clusterName,
    server,
    skipTLSVerify,
    tlsServerName: str(cluster['tls-server-name']),
    ca: secret(cluster['certificate-authority-data'], cluster['certificate-authority']),
    cert: secret(user['client-certificate-data'], user['client-certificate']),
    key: secret(user['client-key-data'], user['client-key']),
    token: str(user.token),
    tokenFile: tokenFile === undefined ? undefined : path(tokenFile),
  };
  try {
    return new LeanKubeAccess(spec);
  } catch {
    // An unreadable CA or client certificate: client-node says which.
    return undefined;
  }
}

export interface AccessEnv {
  readonly KUBECONFIG?: string | undefined;
  readonly HOME?: string | undefined;
  readonly KUBERNETES_SERVICE_HOST?: string | undefined;
  readonly KUBERNETES_SERVICE_PORT?: string | undefined;
}

const isFile = (p: string): boolean => {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
};

/**
 * loadFromDefault's search, for what LeanKubeAccess covers; undefined when
 * client-node's KubeConfig must do it (or report that there is nothing).
 */
export function loadLeanAccess(env: AccessEnv, saDir: string = SERVICE_ACCOUNT_DIR): LeanKubeAccess | undefined {
  const listed = (env.KUBECONFIG ?? '').split(delimiter).filter((f) => f !== '');
  const home = env.HOME === undefined || env.HOME === '' ? undefined : join(env.HOME, '.kube', 'config');
  const file =
    listed.length > 0 ? (listed.length === 1 ? listed[0] : undefined) : home !== undefined && isFile(home) ? home : undefined;
  if (listed.length > 1) return undefined;
  if (file !== undefined) {
    try {
      return leanAccessFromKubeconfig(readFileSync(file, 'utf8'), file);
    } catch {
      return undefined;
    }
  }
  const host = env.KUBERNETES_SERVICE_HOST;
  const token = join(saDir, 'token');
  if (host === undefined || host === '' || !isFile(token)) return undefined;
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  const scheme = port === '80' || port === '8080' || port === '8001' ? 'http' : 'https';
  const h = host.includes(':') ? `[${host}]` : host;
  const ca = join(saDir, 'ca.crt');
  return new LeanKubeAccess({
    name: 'inCluster',
    server: `${scheme}://${h}:${port}`,
    skipTLSVerify: false,
    ca: isFile(ca) ? { file: ca } : undefined,
    tokenFile: token,
  });
}
