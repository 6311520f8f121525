// The agent's HTTP path to the API server, on node:http/node:https alone.
//
// Why not @kubernetes/client-node's API classes and Watch: importing the
// library loads its ~2 700 generated model classes, its API classes and
// undici, ~70 MiB of RSS in every agent (docs/benchmarks.md, "Agent"), while
// the agent only lists, watches and writes a handful of kinds as plain JSON.
// Here a list is one GET parsed with JSON.parse (raw objects, the same shape
// the watch delivers), a watch is one streamed GET split into lines, and a
// write is one POST/PUT/PATCH. Credentials come from a KubeAccess: the lean
// loader (kube-access.ts) or, for kubeconfigs it does not cover and for tests,
// a client-node KubeConfig (which satisfies the interface as is).
import { STATUS_CODES, request as httpRequest } from 'node:http';
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { RequestOptions } from 'node:https';

/** What a request needs from the client configuration (client-node's KubeConfig has both). */
export interface KubeAccess {
  getCurrentCluster(): { readonly name: string; readonly server: string; readonly skipTLSVerify?: boolean } | null;
  /** Fills headers (Authorization), ca, cert, key and rejectUnauthorized. */
  applyToHTTPSOptions(opts: RequestOptions): Promise<void>;
}

/** A request the server answered with a status other than 2xx. */
export class KubeApiError extends Error {
  /** HTTP status. */
  readonly code: number;
  readonly statusCode: number;
  /** The answer's body (a Status, as text). */
  readonly body: string;
  readonly headers: Record<string, string | string[] | undefined>;

  constructor(code: number, body: string, headers: Record<string, string | string[] | undefined>, what: string) {
    super(`${what}: HTTP ${code} ${statusMessage(body) ?? STATUS_CODES[code] ?? ''}`.trim());
    this.code = code;
    this.statusCode = code;
    this.body = body;
    this.headers = headers;
  }
}

function statusMessage(body: string): string | undefined {
  try {
    const s = JSON.parse(body) as { message?: unknown };
    return typeof s.message === 'string' && s.message !== '' ? s.message : undefined;
  } catch {
    return undefined;
  }
}

export type Query = Record<string, string | number | boolean | undefined>;

function url(access: KubeAccess, path: string, query: Query | undefined): URL {
  const cluster = access.getCurrentCluster();
  if (cluster === null) throw new Error('the Kubernetes client configuration has no current cluster');
  const u = new URL(cluster.server.replace(/\/+$/, '') + path);
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
  return u;
}

/** Opens a request with the access's credentials; the caller writes the body and ends it. */
async function open(
  access: KubeAccess,
  method: string,
  u: URL,
  headers: OutgoingHttpHeaders,
  signal: AbortSignal | undefined,
): Promise<{ req: ReturnType<typeof httpRequest>; res: Promise<IncomingMessage> }> {
  const opts: RequestOptions = { method, headers: { ...headers } };
  await access.applyToHTTPSOptions(opts);
  // client-node's KubeConfig adds an agent of its own per call: keep Node's
  // global keep-alive agent instead (it pools by TLS options too).
  delete opts.agent;
  const make = u.protocol === 'http:' ? httpRequest : httpsRequest;
  const req = make(u, { ...opts, ...(signal === undefined ? {} : { signal }) });
  const res = new Promise<IncomingMessage>((resolve, reject) => {
    req.once('response', resolve);
    req.once('error', reject);
  });
  return { req, res };
}

function readBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.once('error', reject);
  });
}

export interface RequestSpec {
  readonly query?: Query;
  readonly body?: unknown;
  /** Of the body (default application/json). */
  readonly contentType?: string;
  /** Bounds the whole request (default 60 s). */
  readonly timeoutMs?: number;
}

/** One JSON request; resolves the parsed answer, rejects with KubeApiError on a non-2xx answer. */
export async function kubeRequest(access: KubeAccess, method: string, path: string, spec: RequestSpec = {}): Promise<unknown> {
  const u = url(access, path, spec.query);
  const body = spec.body === undefined ? undefined : Buffer.from(JSON.stringify(spec.body));
  const headers: OutgoingHttpHeaders = { accept: 'application/json' };
  if (body !== undefined) {
    headers['content-type'] = spec.contentType ?? 'application/json';
    headers['content-length'] = body.length;
  }
  const signal = AbortSignal.timeout(spec.timeoutMs ?? 60_000);
  const { req, res } = await open(access, method, u, headers, signal);
  req.end(body);
  const answer = await res;
  const text = await readBody(answer);
  const code = answer.statusCode ?? 0;
  if (code < 200 || code > 299) throw new KubeApiError(code, text, answer.headers, `${method} ${u.pathname}`);
  return text === '' ? undefined : (JSON.parse(text) as unknown);
}

/** A list page as the server sends it (raw JSON). */
export interface RawList {
  readonly metadata?: { readonly resourceVersion?: string; readonly continue?: string };
  readonly items: unknown[];
}

/** GET of a collection (one page). */
export async function kubeList(access: KubeAccess, path: string, query: Query): Promise<RawList> {
  const out = (await kubeRequest(access, 'GET', path, { query })) as Partial<RawList> | undefined;
  return {
    ...(out?.metadata === undefined ? {} : { metadata: out.metadata }),
    items: Array.isArray(out?.items) ? out.items : [],
  };
}

function named(message: string, name: string): Error {
  const e = new Error(message);
  e.name = name;
  return e;
}

/**
 * A watch over one streamed GET, with client-node Watch's contract (what
 * list-watch.ts and resource-watch.ts rely on): `callback(type, object)` per
 * event line (lines that do not parse are skipped), then `done` exactly once:
 * null on a clean end, an error with `statusCode` for a non-200 answer, a
 * TimeoutError after `requestTimeoutMs` without a byte (connect, then
 * inactivity), an AbortError when the returned controller aborts it.
 */
export class HttpWatch {
  requestTimeoutMs = 30_000;
  readonly #access: KubeAccess;

  constructor(access: KubeAccess) {
    this.#access = access;
  }

  async watch(
    path: string,
    queryParams: Query,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    const controller = new AbortController();
    let finished = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (err: unknown): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      if (!controller.signal.aborted) controller.abort();
      done(err);
    };
    let timeoutError: Error | undefined;
    const arm = (): void => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        timeoutError = named('watch stream silent: reopened', 'TimeoutError');
        controller.abort(timeoutError);
      }, this.requestTimeoutMs);
      timer.unref();
    };
    controller.signal.addEventListener('abort', () => finish(timeoutError ?? named('The operation was aborted', 'AbortError')));
    try {
      const u = url(this.#access, path, { ...queryParams, watch: 'true' });
      arm();
      const { req, res } = await open(this.#access, 'GET', u, { accept: 'application/json' }, controller.signal);
      req.end();
      const answer = await res;
      if (answer.statusCode !== 200) {
        const text = await readBody(answer).catch(() => '');
        const e = new KubeApiError(answer.statusCode ?? 0, text, answer.headers, `watch ${u.pathname}`);
        finish(e);
        return controller;
      }
      arm();
      answer.setEncoding('utf8');
      let rest = '';
      answer.on('data', (chunk: string) => {
        arm();
        rest += chunk;
        let nl = rest.indexOf('\n');
        while (nl >= 0 && !finished) {
          const line = rest.slice(0, nl);
          rest = rest.slice(nl + 1);
          nl = rest.indexOf('\n');
          if (line.trim() === '') continue;
          let ev: { type?: unknown; object?: unknown };
          try {
            ev = JSON.parse(line) as { type?: unknown; object?: unknown };
          } catch {
            continue;
          }
          callback(String(ev.type), ev.object, ev);
        }
      });
      answer.once('end', () => finish(null));
      answer.once('error', (err) => finish(err));
      answer.once('close', () => finish(answer.complete ? null : named('watch stream closed before its end', 'Error')));
    } catch (err) {
      finish(err);
    }
    return controller;
  }
}
