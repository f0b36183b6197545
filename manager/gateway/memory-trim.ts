/**
 * Gives back to the OS the memory V8 keeps after a burst.
 *
 * V8 (13.6, Node 24) keeps the 256 KB pages a garbage collection frees in a
 * pool, resident, and empties that pool only on a memory-reducing collection.
 * Its memory reducer starts one only when the process allocates slowly, which
 * a gateway probing 1,000 clusters never does. So a burst grows RSS and never
 * gives it back. Examples: a restart listing and probing every cluster, or a
 * mass deletion (2,000 watch events). Measured with `npm run bench:scale` at
 * 1,000 clusters: 241 MB after deleting them, against 108 MB with 2 clusters.
 * Of that, 75 to 90 MB were pooled pages V8 no longer counts in its heap, and
 * one memory-reducing collection freed them (docs/benchmarks-log.md, "V8's page
 * pool").
 *
 * Running V8 with `--optimize-for-size` makes every major collection
 * memory-reducing. It holds RSS down too, but it cost 1.5 to 1.8 % of a core
 * more at rest with 1,000 clusters. This trimmer instead looks every
 * `intervalMs`. It compares the memory V8 does not count (RSS minus V8's
 * committed heap and external memory) with the least it has seen. When that
 * grew by `thresholdBytes`, it runs one last-resort collection, which also
 * empties the pool. It then waits at least `minGapMs` before the next one. A
 * collection that freed little doubles that wait: what grew is then native
 * memory a collection cannot free.
 *
 * The collection needs `--expose-gc` (in the gateway's Node flags).
 * takeCollector() takes the function off the global object at startup, so
 * code that runs later cannot reach it.
 */

export interface MemorySample {
  rss: number;
  heapTotal: number;
  external: number;
}

export interface MemoryTrimOptions {
  /** A memory-reducing full collection; undefined disables the trimmer. */
  collect: (() => void) | undefined;
  intervalMs?: number;
  /** Growth of the memory V8 does not count, over the least seen, that is worth a collection. */
  thresholdBytes?: number;
  /** Least time between two collections; doubles after one that freed under a quarter of the threshold. */
  minGapMs?: number;
  /** Cap of that doubling. */
  maxGapMs?: number;
  sample?: () => MemorySample;
  now?: () => number;
  onTrim?: (trim: TrimRecord) => void;
}

export interface TrimRecord {
  rssBefore: number;
  rssAfter: number;
  durationMs: number;
  /** The wait before the next collection may run. */
  nextGapMs: number;
}

const mib = 1024 * 1024;

export class MemoryTrimmer {
  readonly #collect: (() => void) | undefined;
  readonly #intervalMs: number;
  readonly #threshold: number;
  readonly #minGapMs: number;
  readonly #maxGapMs: number;
  readonly #sample: () => MemorySample;
  readonly #now: () => number;
  readonly #onTrim: (trim: TrimRecord) => void;
  #baseline = Number.POSITIVE_INFINITY;
  #gapMs: number;
  #lastTrimAt = Number.NEGATIVE_INFINITY;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: MemoryTrimOptions) {
    this.#collect = options.collect;
    this.#intervalMs = options.intervalMs ?? 30_000;
    this.#threshold = options.thresholdBytes ?? 32 * mib;
    this.#minGapMs = options.minGapMs ?? 5 * 60_000;
    this.#maxGapMs = options.maxGapMs ?? 4 * 60 * 60_000;
    this.#gapMs = this.#minGapMs;
    this.#sample = options.sample ?? process.memoryUsage;
    this.#now = options.now ?? Date.now;
    this.#onTrim = options.onTrim ?? (() => {});
  }

  get enabled(): boolean {
    return this.#collect !== undefined;
  }

  start(): void {
    if (!this.#collect || this.#timer) return;
    this.check();
    this.#timer = setInterval(() => this.check(), this.#intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One look; runs a collection when it is due. Public for tests. */
  check(): TrimRecord | undefined {
    if (!this.#collect) return undefined;
    const before = this.#sample();
    const uncounted = uncountedBytes(before);
    this.#baseline = Math.min(this.#baseline, uncounted);
    const now = this.#now();
    if (uncounted - this.#baseline < this.#threshold || now - this.#lastTrimAt < this.#gapMs)
      return undefined;
    const started = performance.now();
    this.#collect();
    const durationMs = performance.now() - started;
    const after = this.#sample();
    this.#baseline = Math.min(this.#baseline, uncountedBytes(after));
    this.#lastTrimAt = now;
    const freed = before.rss - after.rss;
    this.#gapMs = freed < this.#threshold / 4 ? Math.min(this.#maxGapMs, this.#gapMs * 2) : this.#minGapMs;
    const record = { rssBefore: before.rss, rssAfter: after.rss, durationMs, nextGapMs: this.#gapMs };
    this.#onTrim(record);
    return record;
  }
}

function uncountedBytes(sample: MemorySample): number {
  return sample.rss - sample.heapTotal - sample.external;
}

type ExposedGc = (options?: {
  type?: 'major' | 'minor';
  execution?: 'sync' | 'async';
  flavor?: string;
}) => unknown;

/**
 * The collection `--expose-gc` puts on the global object, taken off it:
 * a last-resort major collection, the one kind that empties V8's page pool.
 * undefined when Node runs without the flag.
 */
export function takeCollector(
  global: { gc?: unknown } = globalThis as { gc?: unknown },
): (() => void) | undefined {
  const gc = global.gc;
  if (typeof gc !== 'function') return undefined;
  // --expose-gc defines it writable but not configurable: it cannot be deleted, only overwritten.
  global.gc = undefined;
  return () => {
    (gc as ExposedGc)({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  };
}
