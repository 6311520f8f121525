// Capped exponential backoff for failed applies: 100 ms, 200 ms, ... 3.2 s,
// back to the start after a success. Pure: the caller keeps the failure count.
// The cap is low so that a node converges within seconds of nft working
// again; what keeps a failing ruleset from costing much is retryDelay's
// floor, a multiple of what the failed attempt itself cost.

export interface BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
  /** Retries wait at least this many times as long as the failed attempt took (at most 30 s); 0 or unset: no such floor. */
  readonly costFactor?: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 100, maxMs: 3_200, costFactor: 4 };

const COST_FLOOR_MAX_MS = 30_000;

/** The wait before retry number `failures` of an attempt that took costMs: the backoff, or more for a costly attempt. */
export function retryDelay(policy: BackoffPolicy, failures: number, costMs: number): number {
  return Math.max(backoffDelay(policy, failures), Math.min(COST_FLOOR_MAX_MS, Math.round((policy.costFactor ?? 0) * costMs)));
}

/** Delay before retry number `failures` (1 = after the first failure). */
export function backoffDelay(policy: BackoffPolicy, failures: number): number {
  if (failures <= 0) return 0;
  // Cap the exponent first so large failure counts cannot overflow to Infinity.
  const exp = Math.min(failures - 1, 40);
  return Math.min(policy.maxMs, policy.initialMs * 2 ** exp);
}
