/**
 * A keyed work queue in the manner of client-go's: controllers enqueue
 * keys (a cluster name, say), never events, and a reconcile reads the
 * current state for its key. That gives:
 * - deduplication: a key waiting in the queue is queued once, however many
 *   events named it;
 * - one worker per key at a time: a key added while it is being processed
 *   runs again once, right after, so the last event is never lost and two
 *   reconciles of one object never race;
 * - retries with per-key exponential backoff on failure, reset by a success;
 * - a key can ask to be looked at again after a delay (a timer re-check:
 *   the availability controller's heartbeat turning stale produces no event);
 * - a bounded number of workers across keys.
 */

export interface QueueBackoff {
  initialMs: number;
  maxMs: number;
  factor: number;
}

export const defaultQueueBackoff: QueueBackoff = { initialMs: 200, maxMs: 60_000, factor: 2 };

/** What a reconcile may return: `requeueAfterMs` looks at the key again after that delay. */
// biome-ignore lint/suspicious/noConfusingVoidType: a reconcile with nothing to say returns nothing.
export type ProcessResult = void | { requeueAfterMs?: number };

export interface WorkQueueOptions {
  /** Reconciles one key; a rejection schedules a retry with backoff. */
  process: (key: string, signal: AbortSignal) => Promise<ProcessResult>;
  workers?: number;
  backoff?: Partial<QueueBackoff>;
  /** Called for each failure with the delay before the retry. */
  onError?: (key: string, err: unknown, retryInMs: number) => void;
  /** Called when the number of waiting keys changes. */
  onDepth?: (depth: number) => void;
}

/** Delay before retry number `failures` (1-based). */
export function retryDelay(failures: number, policy: QueueBackoff): number {
  return Math.min(policy.maxMs, policy.initialMs * policy.factor ** Math.max(0, failures - 1));
}

export class WorkQueue {
  readonly #process: WorkQueueOptions['process'];
  readonly #workers: number;
  readonly #backoff: QueueBackoff;
  readonly #onError: NonNullable<WorkQueueOptions['onError']>;
  readonly #onDepth: NonNullable<WorkQueueOptions['onDepth']>;

  /** Keys ready to run, in order; `#waiting` mirrors it for O(1) dedup. */
  readonly #ready: string[] = [];
  readonly #waiting = new Set<string>();
  readonly #processing = new Set<string>();
  /** Keys added while being processed: they run again right after. */
  readonly #dirty = new Set<string>();
  readonly #delayed = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  readonly #failures = new Map<string, number>();
  #signal: AbortSignal | undefined;
  #idleWaiters: (() => void)[] = [];

  constructor(options: WorkQueueOptions) {
    this.#process = options.process;
    this.#workers = Math.max(1, options.workers ?? 1);
    this.#backoff = { ...defaultQueueBackoff, ...options.backoff };
    this.#onError = options.onError ?? (() => {});
    this.#onDepth = options.onDepth ?? (() => {});
  }

  get depth(): number {
    return this.#ready.length;
  }

  /** Failures in a row of `key` (0 after a success). */
  failures(key: string): number {
    return this.#failures.get(key) ?? 0;
  }

  add(key: string): void {
    if (this.#signal?.aborted) return;
    if (this.#processing.has(key)) {
      this.#dirty.add(key);
      return;
    }
    if (this.#waiting.has(key)) return;
    this.#waiting.add(key);
    this.#ready.push(key);
    this.#onDepth(this.#ready.length);
    this.#pump();
  }

  /** Adds `key` after `ms`; an earlier pending delayed add of the same key wins. */
  addAfter(key: string, ms: number): void {
    if (this.#signal?.aborted) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + ms;
    const pending = this.#delayed.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.#delayed.delete(key);
      this.add(key);
    }, ms);
    timer.unref();
    this.#delayed.set(key, { at, timer });
  }

  /** Starts the workers; keys added before run now. Aborting stops taking keys and cancels delayed adds. */
  start(signal: AbortSignal): void {
    this.#signal = signal;
    signal.addEventListener(
      'abort',
      () => {
        for (const { timer } of this.#delayed.values()) clearTimeout(timer);
        this.#delayed.clear();
        this.#ready.length = 0;
        this.#waiting.clear();
        this.#dirty.clear();
        this.#notifyIdle();
      },
      { once: true },
    );
    this.#pump();
  }

  /** Resolves once nothing is ready or running (delayed adds may still be pending). */
  idle(): Promise<void> {
    if (this.#ready.length === 0 && this.#processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  #pump(): void {
    const signal = this.#signal;
    if (!signal || signal.aborted) return;
    while (this.#processing.size < this.#workers && this.#ready.length > 0) {
      // Skip keys that are running (possible only through `#dirty` re-adds racing a pump).
      const index = this.#ready.findIndex((k) => !this.#processing.has(k));
      if (index < 0) break;
      const [key] = this.#ready.splice(index, 1);
      if (key === undefined) break;
      this.#waiting.delete(key);
      this.#onDepth(this.#ready.length);
      this.#processing.add(key);
      void this.#run(key, signal);
    }
  }

  async #run(key: string, signal: AbortSignal): Promise<void> {
    try {
      const result = await this.#process(key, signal);
      this.#failures.delete(key);
      if (result?.requeueAfterMs !== undefined && !signal.aborted) {
        this.addAfter(key, Math.max(1, result.requeueAfterMs));
      }
    } catch (err) {
      const failures = (this.#failures.get(key) ?? 0) + 1;
      this.#failures.set(key, failures);
      const delay = retryDelay(failures, this.#backoff);
      if (!signal.aborted) {
        try {
          this.#onError(key, err, delay);
        } catch {
          // a failing error reporter must not stop the queue
        }
        this.addAfter(key, delay);
      }
    } finally {
      this.#processing.delete(key);
      if (this.#dirty.delete(key)) this.add(key);
      this.#pump();
      if (this.#ready.length === 0 && this.#processing.size === 0) this.#notifyIdle();
    }
  }

  #notifyIdle(): void {
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
