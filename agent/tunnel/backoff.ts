/**
 * Reconnect delays: exponential, capped, with jitter. A thousand agents that lost the hub at the
 * same moment (an apiserver restart, a gateway rollout) must not come back in lock step: each wait
 * is drawn from [d/2, d] for the current step d ("equal jitter"), so they spread out while none
 * retries sooner than half the step.
 */
export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  /** Growth per failed attempt. */
  factor?: number;
  random?: () => number;
}

export const defaultBackoff: BackoffOptions = { initialMs: 1_000, maxMs: 30_000, factor: 2 };

export class Backoff {
  readonly #o: Required<BackoffOptions>;
  #attempt = 0;

  constructor(options: BackoffOptions = defaultBackoff) {
    this.#o = { factor: 2, random: Math.random, ...options };
  }

  /** The wait before the next attempt; each call grows the next one, up to maxMs. */
  next(): number {
    const step = Math.min(this.#o.maxMs, this.#o.initialMs * this.#o.factor ** this.#attempt);
    this.#attempt++;
    return Math.round(step / 2 + (this.#o.random() * step) / 2);
  }

  /** After a connection that held: the next failure starts from the initial wait again. */
  reset(): void {
    this.#attempt = 0;
  }

  get attempts(): number {
    return this.#attempt;
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
