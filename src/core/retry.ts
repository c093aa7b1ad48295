import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The one retry helper: bounded attempts, exponential backoff with full jitter. Blob-store
 * requests are retried here, inside the S3 driver's request wrapper, and nowhere above it
 * (see `objects/pack-uploader.ts` for why the upload does not retry again).
 */

/** How {@link withRetry} bounds and spaces its attempts. */
export interface RetryPolicy {
  /** Total tries including the first; 1 disables retrying. */
  readonly maxAttempts: number;
  /** Upper bound of the first backoff; the bound doubles with every further attempt. */
  readonly baseDelayMs: number;
  /** Cap on any single backoff. */
  readonly maxDelayMs: number;
}

/**
 * Runs `operation` until it succeeds, `isTransient` says its error is not worth retrying, or
 * `policy.maxAttempts` tries are used up; then rethrows the last error unchanged, so callers map
 * errors in one place. `operation` receives the 1-based attempt number.
 *
 * Backoff is "full jitter" (a uniform random delay up to the exponential bound), which spreads
 * out many clients that failed together instead of having them retry in lockstep. An aborted
 * `signal` stops the wait and rejects with the abort reason.
 */
export async function withRetry<T>(
  operation: (attempt: number) => Promise<T>,
  policy: RetryPolicy,
  isTransient: (error: unknown) => boolean,
  signal?: AbortSignal,
): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    signal?.throwIfAborted();
    try {
      return await operation(attempt);
    } catch (error) {
      if (attempt >= policy.maxAttempts || signal?.aborted || !isTransient(error)) throw error;
    }
    await sleep(backoffMs(attempt, policy), undefined, signal === undefined ? undefined : { signal });
  }
}

/** The delay before try `attempt + 1`: uniform in [0, min(max, base * 2^(attempt-1))]. */
export function backoffMs(attempt: number, policy: RetryPolicy): number {
  const bound = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  return Math.round(Math.random() * bound);
}
