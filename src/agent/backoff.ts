// Capped exponential backoff for failed applies: 100 ms, 200 ms, ... 30 s,
// back to the start after a success. Pure: the caller keeps the failure count.

export interface BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 100, maxMs: 30_000 };

/** Delay before retry number `failures` (1 = after the first failure). */
export function backoffDelay(policy: BackoffPolicy, failures: number): number {
  if (failures <= 0) return 0;
  // Cap the exponent first so large failure counts cannot overflow to Infinity.
  const exp = Math.min(failures - 1, 40);
  return Math.min(policy.maxMs, policy.initialMs * 2 ** exp);
}
