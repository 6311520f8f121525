// One-shot API reads (the `status` command) the way kubectl makes them: an
// answer 429 (TooManyRequests: e.g. "storage is (re)initializing" right after
// an API server restart) or 503 (ServiceUnavailable) is retried after its
// Retry-After (client-go's checkWait: up to 10 attempts), within a bounded
// total wait; any other failure is final. Failures read as one line
// (`429 TooManyRequests: storage is (re)initializing`), never the client's
// multi-line dump of body and headers.
import { ApiException } from '@kubernetes/client-node';
import { errorMessage } from '../observability/errors.ts';

export interface RetryPolicy {
  /** Attempts in all (the first one included). */
  readonly maxAttempts: number;
  /** The most time spent waiting between attempts, in all; an answer asking for more ends the retries. */
  readonly maxWaitMs: number;
  /** Wait when the answer has no (valid) Retry-After. */
  readonly defaultWaitMs: number;
  readonly sleep: (ms: number) => Promise<void>;
}

export const DEFAULT_RETRY: RetryPolicy = {
  maxAttempts: 10,
  maxWaitMs: 30_000,
  defaultWaitMs: 1_000,
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/** Statuses worth waiting for: the server is there but not ready or overloaded. */
const RETRIABLE = new Set([429, 503]);

/** The API server gave 429/503 to every attempt: it is not ready (yet). */
export class ApiNotReadyError extends Error {}

function statusBody(body: unknown): Record<string, unknown> | undefined {
  let b = body;
  if (typeof b === 'string') {
    try {
      b = JSON.parse(b) as unknown;
    } catch {
      return undefined;
    }
  }
  return typeof b === 'object' && b !== null && !Array.isArray(b) ? (b as Record<string, unknown>) : undefined;
}

function header(headers: unknown, name: string): string | undefined {
  if (typeof headers !== 'object' || headers === null) return undefined;
  for (const [k, v] of Object.entries(headers as Record<string, unknown>))
    if (k.toLowerCase() === name) return Array.isArray(v) ? String(v[0]) : String(v);
  return undefined;
}

/** `CODE Reason: message` of a failed API call (the Status the server sent), else the error's own one-line text. */
export function apiErrorText(err: unknown): string {
  if (err instanceof ApiException) {
    const s = statusBody(err.body);
    const reason = typeof s?.reason === 'string' ? ` ${s.reason}` : '';
    const message = typeof s?.message === 'string' && s.message !== '' ? `: ${s.message}` : '';
    return `${String(err.code)}${reason}${message}`.replace(/\s*\n\s*/g, ' ');
  }
  // A wrapper that already says what failed: its own text, not the client's dump of the cause.
  if (err instanceof Error && err.cause instanceof ApiException) return err.message.replace(/\s*\n\s*/g, ' ');
  return errorMessage(err).replace(/\s*\n\s*/g, ' ');
}

/** No answer at all (refused, reset, DNS, TLS): fetch's "fetch failed" or a system error code. */
export function isConnectionError(err: unknown): boolean {
  if (err instanceof ApiException || !(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  return (err instanceof TypeError && err.message === 'fetch failed') || (typeof code === 'string' && /^E[A-Z]+$/.test(code));
}

/** How long a 429/503 asks to wait (Retry-After in seconds, else details.retryAfterSeconds); undefined when not retriable. */
export function retryWaitMs(err: unknown, defaultMs: number): number | undefined {
  if (!(err instanceof ApiException) || !RETRIABLE.has(err.code)) return undefined;
  const h = header(err.headers, 'retry-after');
  if (h !== undefined && /^\d+$/.test(h.trim())) return Number(h.trim()) * 1000;
  const details = statusBody(err.body)?.details as { retryAfterSeconds?: unknown } | undefined;
  if (typeof details?.retryAfterSeconds === 'number' && details.retryAfterSeconds >= 0) return details.retryAfterSeconds * 1000;
  return defaultMs;
}

/** `call`, retried on 429/503 as the policy allows; the last failure (or ApiNotReadyError) when it gives up. */
export async function withRetry<T>(call: () => Promise<T>, policy: RetryPolicy = DEFAULT_RETRY): Promise<T> {
  let waited = 0;
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      const wait = retryWaitMs(err, policy.defaultWaitMs);
      if (wait === undefined) throw err;
      if (attempt >= policy.maxAttempts || waited + wait > policy.maxWaitMs)
        throw new ApiNotReadyError(
          `the API server is not ready: ${apiErrorText(err)} (gave up after ${attempt} ${attempt === 1 ? 'attempt' : 'attempts'} and ${Math.round(waited / 1000)} s of waiting; Retry-After asked for ${Math.round(wait / 1000)} s more); try again later`,
          { cause: err },
        );
      waited += wait;
      await policy.sleep(wait);
    }
  }
}
