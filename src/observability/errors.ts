// The text of anything thrown, for log lines and status fields (watch
// status, /debug/state, apply results): one helper, so an error reads the
// same wherever it surfaces.

/** Long API server bodies must not flood a log line or a status field. */
const MAX_ERROR_TEXT = 300;

/** A property of an error object, read without trusting its type. */
function prop(err: Error, name: string): unknown {
  const v: unknown = name in err ? Reflect.get(err, name) : undefined;
  return v;
}

/**
 * `[code ]message[: cause]`, at most 300 characters. The code is an HTTP
 * status (`statusCode`, Kubernetes client errors) or a system error code
 * (`code`, e.g. ECONNREFUSED); the cause is what fetch failures wrap.
 */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) {
    const code = prop(err, 'statusCode') ?? prop(err, 'code');
    const head = code !== undefined && typeof code !== 'object' ? `${String(code)} ` : '';
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
    return `${head}${err.message}${cause}`.slice(0, MAX_ERROR_TEXT);
  }
  return String(err).slice(0, MAX_ERROR_TEXT);
}
