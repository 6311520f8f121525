// Minimal HTTP plumbing for the agent's two listeners: routing by path,
// content negotiation (JSON or text), and listening with clear errors.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Reply {
  readonly status: number;
  /** Objects are sent as JSON (or through `text` for text clients). */
  readonly body: unknown;
  /** Plain-text rendering, used when the client prefers text. */
  readonly text?: string | undefined;
  /** Raw content type for bodies that are neither (e.g. Prometheus exposition). */
  readonly contentType?: string;
}

export type Handler = (url: URL, req: IncomingMessage) => Promise<Reply> | Reply;

/**
 * Text or JSON? JSON unless the client asks for text: `?format=text`, or an
 * Accept header that names text/plain with a higher weight than
 * application/json. `*\/*` (curl's default) and a missing header mean JSON.
 */
export function wantsText(url: URL, accept: string | undefined): boolean {
  const f = url.searchParams.get('format');
  if (f === 'text') return true;
  if (f === 'json') return false;
  if (accept === undefined) return false;
  let text = -1;
  let json = -1;
  for (const part of accept.split(',')) {
    const [type = '', ...params] = part.trim().toLowerCase().split(';');
    const qp = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const q = qp === undefined ? 1 : Number(qp.slice(2));
    const weight = Number.isFinite(q) ? q : 0;
    if (type === 'text/plain') text = Math.max(text, weight);
    if (type === 'application/json') json = Math.max(json, weight);
  }
  return text > 0 && text > json;
}

function send(res: ServerResponse, url: URL, req: IncomingMessage, r: Reply): void {
  let body: string;
  let type: string;
  if (r.contentType !== undefined) {
    body = typeof r.body === 'string' ? r.body : JSON.stringify(r.body);
    type = r.contentType;
  } else if (wantsText(url, req.headers.accept) && (r.text !== undefined || typeof r.body === 'string')) {
    body = r.text ?? String(r.body);
    type = 'text/plain; charset=utf-8';
  } else {
    body = `${JSON.stringify(r.body, null, 2)}\n`;
    type = 'application/json; charset=utf-8';
  }
  if (!body.endsWith('\n')) body += '\n';
  res.writeHead(r.status, { 'content-type': type, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
  res.end(req.method === 'HEAD' ? undefined : body);
}

export function routes(
  table: Readonly<Record<string, Handler>>,
  onError: (err: unknown, path: string) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    // The Host header is not trusted for anything but building a URL object.
    const url = new URL(req.url ?? '/', 'http://localhost');
    const handler = Object.hasOwn(table, url.pathname) ? table[url.pathname] : undefined;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, url, req, {
        status: 405,
        body: { error: `method ${req.method ?? '?'} not allowed` },
        text: 'method not allowed',
      });
      return;
    }
    if (handler === undefined) {
      send(res, url, req, {
        status: 404,
        body: { error: `no such endpoint: ${url.pathname}`, endpoints: Object.keys(table) },
        text: `no such endpoint: ${url.pathname}\nendpoints: ${Object.keys(table).join(' ')}`,
      });
      return;
    }
    Promise.resolve()
      .then(() => handler(url, req))
      .then(
        (r) => send(res, url, req, r),
        (e: unknown) => {
          onError(e, url.pathname);
          if (!res.headersSent) send(res, url, req, { status: 500, body: { error: e instanceof Error ? e.message : String(e) } });
          else res.destroy();
        },
      )
      .catch((e: unknown) => {
        onError(e, url.pathname);
        res.destroy();
      });
  };
}

export class ListenError extends Error {}

/** Listens on host:port; rejects with a readable reason (in use, not permitted, bad address). */
export async function listen(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  host: string,
  port: number,
  what: string,
): Promise<{ server: Server; port: number }> {
  const server = createServer(handler);
  // A stuck client must not hold sockets forever.
  server.requestTimeout = 30_000;
  server.headersTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    const onError = (e: NodeJS.ErrnoException): void => {
      const why =
        e.code === 'EADDRINUSE'
          ? 'the address is already in use'
          : e.code === 'EACCES'
            ? 'permission denied'
            : e.code === 'EADDRNOTAVAIL'
              ? 'no such local address'
              : e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN'
                ? 'the host name does not resolve'
                : e.message;
      reject(new ListenError(`cannot listen on ${host.includes(':') ? `[${host}]` : host}:${port} for ${what}: ${why}`));
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  return { server, port: (server.address() as AddressInfo).port };
}

export async function closeServer(server: Server): Promise<void> {
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
