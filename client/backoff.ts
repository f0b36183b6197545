/**
 * Reconnect delays of the informers: exponential, capped, and jittered.
 *
 * Why jitter: after a gateway restart every informer of every program loses its watch at the same instant;
 * without jitter they would all come back in lock step, and again at each doubling. "Equal jitter" (a
 * delay between half and all of the exponential step) is used rather than "full jitter" (0 to the step):
 * it spreads reconnects as well, and never retries at once, which would hammer a gateway that is still
 * starting.
 */
export interface BackoffPolicy {
  /** The first delay's upper bound, in ms. */
  initialMs: number;
  /** No delay exceeds this, in ms. */
  maxMs: number;
  factor: number;
}

// Short first steps: a gateway replica is replaced, or an agent re-attaches its tunnel, in a second or two,
// and an informer should be back as soon as it is. Capped at 10 s (client-node's ListWatch caps at 30 s)
// so a cluster that comes back online is seen within seconds.
export const defaultBackoff: BackoffPolicy = { initialMs: 200, maxMs: 10_000, factor: 2 };

/** The delay before retry number `attempt` (1 for the first retry). */
export function backoffDelay(
  attempt: number,
  policy: BackoffPolicy = defaultBackoff,
  random: () => number = Math.random,
): number {
  if (!Number.isInteger(attempt) || attempt < 1) throw new RangeError(`attempt must be >= 1, not ${attempt}`);
  const step = Math.min(policy.maxMs, policy.initialMs * policy.factor ** (attempt - 1));
  return Math.round(step / 2 + (random() * step) / 2);
}
