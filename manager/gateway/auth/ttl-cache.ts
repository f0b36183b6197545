/**
 * A small bounded cache with per-entry TTL, LRU eviction and in-flight
 * coalescing, for TokenReview and SubjectAccessReview results.
 *
 * Coalescing matters more than the cache itself: kubectl and controllers fire
 * bursts of identical requests (a list plus a watch, parallel discovery), and
 * without it every request of a burst would post its own review before the
 * first answer lands.
 */

export interface TtlCacheOptions {
  /** Upper bound on stored entries; the least recently used one goes first. */
  maxEntries: number;
  /** Milliseconds clock, injectable for tests. */
  now?: () => number;
}

interface Entry<V> {
  value: V;
  expiresAt: number;
}

export class TtlCache<K, V> {
  readonly #maxEntries: number;
  readonly #now: () => number;
  // A Map iterates in insertion order: re-inserting on every hit keeps the
  // least recently used key first, which is all an LRU needs.
  readonly #entries = new Map<K, Entry<V>>();
  readonly #inflight = new Map<K, Promise<V>>();
  // Bumped by clear(): loads started before it must not repopulate the cache
  // with answers computed under the old configuration.
  #generation = 0;

  constructor(options: TtlCacheOptions) {
    if (!(options.maxEntries > 0)) throw new Error('TtlCache: maxEntries must be positive');
    this.#maxEntries = options.maxEntries;
    this.#now = options.now ?? Date.now;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(key: K): V | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.#now()) {
      this.#entries.delete(key);
      return undefined;
    }
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry.value;
  }

  /** Stores `value` for `ttlMs`; a TTL of zero or less stores nothing. */
  set(key: K, value: V, ttlMs: number): void {
    this.#entries.delete(key);
    if (!(ttlMs > 0)) return;
    this.#entries.set(key, { value, expiresAt: this.#now() + ttlMs });
    while (this.#entries.size > this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (oldest.done) break;
      this.#entries.delete(oldest.value);
    }
  }

  delete(key: K): void {
    this.#entries.delete(key);
    this.#inflight.delete(key);
  }

  clear(): void {
    this.#generation++;
    this.#entries.clear();
    this.#inflight.clear();
  }

  /**
   * Returns the cached value, or joins the load already running for `key`, or
   * starts `load`. `ttl` picks the lifetime from the loaded value (a granted
   * and a refused review live for different times). A rejected load is not
   * cached, and every caller waiting on it sees the same error.
   */
  getOrLoad(key: K, load: () => Promise<V>, ttl: (value: V) => number): Promise<V> {
    const cached = this.get(key);
    if (cached !== undefined) return Promise.resolve(cached);
    const running = this.#inflight.get(key);
    if (running) return running;

    const generation = this.#generation;
    // Deferred through a resolved promise so that a loader throwing
    // synchronously still rejects the promise every waiter holds.
    const promise: Promise<V> = Promise.resolve()
      .then(load)
      .then((value) => {
        if (generation === this.#generation) this.set(key, value, ttl(value));
        return value;
      })
      .finally(() => {
        if (this.#inflight.get(key) === promise) this.#inflight.delete(key);
      });
    this.#inflight.set(key, promise);
    return promise;
  }
}
