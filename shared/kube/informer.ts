/**
 * A small, self-healing informer over KubeClient: list, then watch from the
 * list's resourceVersion, keeping an in-memory store keyed by
 * namespace/name and calling add/update/delete handlers.
 *
 * Why not client-node's makeInformer: it stops on the first non-410 error,
 * has no watchdog for silent stalls and no notion of a resource that does
 * not exist yet. Here:
 * - 410 Gone (HTTP or an ERROR event) relists at once;
 * - any other error backs off exponentially (capped, jittered) and resumes
 *   the watch from the last resourceVersion it saw;
 * - every watch asks the server to end it after `timeoutSeconds` (5 to 10
 *   minutes, jittered so replicas do not reconnect in step), and a local
 *   watchdog aborts it shortly after that if the server never did, so a
 *   half-open connection cannot freeze the cache forever;
 * - a 404 on list (a CRD that is not installed, such as OCM's
 *   ManagedCluster) counts as an empty, synced collection, and the list is
 *   retried periodically so the informer starts working once the CRD
 *   appears.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { KubeList, KubeObject, WatchEvent } from './client.ts';
import { failureStatus, type KubeStatus, StatusError } from './status.ts';

/** The part of KubeClient an informer needs; tests pass a small fake. */
export interface InformerClient {
  list<T extends KubeObject = KubeObject>(path: string): Promise<KubeList<T>>;
  watch<T extends KubeObject = KubeObject>(path: string, signal?: AbortSignal): AsyncGenerator<WatchEvent<T>>;
}

export interface BackoffPolicy {
  initialMs: number;
  maxMs: number;
  factor: number;
  /** Extra random fraction added on top, 0.2 means up to +20 %. */
  jitter: number;
}

export const defaultBackoff: BackoffPolicy = { initialMs: 500, maxMs: 30_000, factor: 2, jitter: 0.2 };

export interface InformerHandlers<T extends KubeObject> {
  onAdd?(obj: T): void;
  onUpdate?(oldObj: T, newObj: T): void;
  onDelete?(obj: T): void;
  /**
   * Everything up to `resourceVersion` is applied (after a list, an event or a bookmark). While the
   * add/update/delete handlers run, `informer.resourceVersion` is already the version of the change
   * they are told about: for a deletion, the revision that deleted the object (or the list's, when a
   * relist found it gone).
   */
  onSync?(resourceVersion: string): void;
}

export type InformerPhase = 'list' | 'watch' | 'handler';

export interface InformerOptions {
  /** Collection path without query, e.g. /api/v1/namespaces/vela-system/secrets. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Page size for the list; large collections are read in chunks. */
  pageSize?: number;
  /** Base server-side watch timeout; each watch uses a value in [base, 2*base). */
  watchTimeoutSeconds?: number;
  /** How long past the server-side timeout the local watchdog waits before aborting. */
  watchGraceSeconds?: number;
  backoff?: Partial<BackoffPolicy>;
  /** How often to retry listing a collection that returned 404. */
  absentRetryMs?: number;
  /** Errors the informer recovered from (for logs and metrics); it keeps running. */
  onError?: (err: unknown, phase: InformerPhase) => void;
  /** Injected for tests. */
  random?: () => number;
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  now?: () => number;
}

/** Cache key of an object: "namespace/name", or "name" for cluster-scoped objects. */
export function objectKey(obj: KubeObject): string {
  const name = obj.metadata?.name ?? '';
  const namespace = obj.metadata?.namespace;
  return namespace ? `${namespace}/${name}` : name;
}

/**
 * Delay before retry number `attempt` (0-based): exponential, capped at
 * maxMs, then jittered upwards so that many informers failing together do
 * not retry together.
 */
export function backoffDelay(
  attempt: number,
  policy: BackoffPolicy,
  random: () => number = Math.random,
): number {
  const base = Math.min(policy.maxMs, policy.initialMs * policy.factor ** Math.max(0, attempt));
  return Math.round(base * (1 + policy.jitter * random()));
}

/** Appends query parameters to a path that may already carry some. */
export function withQuery(path: string, params: Record<string, string | number | undefined>): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== '') query.set(key, String(value));
  }
  const text = query.toString();
  if (!text) return path;
  return `${path}${path.includes('?') ? '&' : '?'}${text}`;
}

/** A watch ERROR event carries a Status; turn it into the same error an HTTP failure would be. */
export function watchErrorToStatusError(object: unknown): StatusError {
  const status = object as Partial<KubeStatus> | undefined;
  const code = typeof status?.code === 'number' ? status.code : 500;
  return new StatusError(
    { ...failureStatus(code, status?.message ?? 'watch error', undefined, status?.reason), code },
    'watch ERROR event',
  );
}

function isGone(err: unknown): boolean {
  return (
    err instanceof StatusError && (err.code === 410 || err.reason === 'Expired' || err.reason === 'Gone')
  );
}

function isNotFound(err: unknown): boolean {
  return err instanceof StatusError && err.code === 404;
}

const abortableSleep = async (ms: number, signal: AbortSignal): Promise<void> => {
  try {
    await delay(ms, undefined, { signal, ref: false });
  } catch {
    // aborted: the caller checks the signal
  }
};

type WatchOutcome = { events: number; durationMs: number };

export class Informer<T extends KubeObject = KubeObject> {
  readonly #client: InformerClient;
  readonly #path: string;
  readonly #labelSelector: string | undefined;
  readonly #fieldSelector: string | undefined;
  readonly #pageSize: number;
  readonly #watchTimeoutSeconds: number;
  readonly #watchGraceSeconds: number;
  readonly #backoff: BackoffPolicy;
  readonly #absentRetryMs: number;
  readonly #onError: (err: unknown, phase: InformerPhase) => void;
  readonly #random: () => number;
  readonly #sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  readonly #now: () => number;

  readonly #store = new Map<string, T>();
  readonly #handlers = new Set<InformerHandlers<T>>();
  readonly #stop = new AbortController();
  #resourceVersion = '';
  #hasSynced = false;
  #absent = false;
  #running: Promise<void> | undefined;
  #resolveSynced!: () => void;
  #rejectSynced!: (err: unknown) => void;

  /** Resolves after the first successful list (or the first 404, see `absent`). */
  readonly synced: Promise<void>;

  constructor(client: InformerClient, options: InformerOptions) {
    this.#client = client;
    this.#path = options.path;
    this.#labelSelector = options.labelSelector;
    this.#fieldSelector = options.fieldSelector;
    this.#pageSize = options.pageSize ?? 500;
    this.#watchTimeoutSeconds = options.watchTimeoutSeconds ?? 300;
    this.#watchGraceSeconds = options.watchGraceSeconds ?? 30;
    this.#backoff = { ...defaultBackoff, ...options.backoff };
    this.#absentRetryMs = options.absentRetryMs ?? 30_000;
    this.#onError = options.onError ?? (() => {});
    this.#random = options.random ?? Math.random;
    this.#sleep = options.sleep ?? abortableSleep;
    this.#now = options.now ?? Date.now;
    this.synced = new Promise<void>((resolve, reject) => {
      this.#resolveSynced = resolve;
      this.#rejectSynced = reject;
    });
    // Stopping before the first sync rejects `synced`; nobody may be waiting.
    this.synced.catch(() => {});
  }

  get hasSynced(): boolean {
    return this.#hasSynced;
  }

  /** True while the collection's list returns 404 (for a CRD: not installed). */
  get absent(): boolean {
    return this.#absent;
  }

  /** The last resourceVersion seen (from a list, an event or a bookmark). */
  get resourceVersion(): string {
    return this.#resourceVersion;
  }

  get stopped(): boolean {
    return this.#stop.signal.aborted;
  }

  list(): T[] {
    return [...this.#store.values()];
  }

  get(key: string): T | undefined {
    return this.#store.get(key);
  }

  /** Registers handlers; returns a function that removes them. */
  on(handlers: InformerHandlers<T>): () => void {
    this.#handlers.add(handlers);
    return () => this.#handlers.delete(handlers);
  }

  /** Starts the list/watch loop (idempotent). The returned promise settles when the informer stops. */
  start(): Promise<void> {
    this.#running ??= this.#run();
    return this.#running;
  }

  stop(): void {
    this.#stop.abort();
    if (!this.#hasSynced)
      this.#rejectSynced(new Error(`informer for ${this.#path} stopped before it synced`));
  }

  async #run(): Promise<void> {
    const signal = this.#stop.signal;
    let attempt = 0;
    let needList = true;
    while (!signal.aborted) {
      try {
        if (needList) {
          const outcome = await this.#relist();
          if (signal.aborted) break;
          if (outcome === 'absent') {
            await this.#sleep(this.#absentRetryMs, signal);
            continue;
          }
          needList = false;
          attempt = 0;
        }
        const outcome = await this.#watchOnce();
        if (signal.aborted) break;
        // A watch the server closes at once without a single event is as
        // good as a failure: back off instead of spinning on reconnects.
        if (outcome.events === 0 && outcome.durationMs < 1000) {
          await this.#sleep(backoffDelay(attempt++, this.#backoff, this.#random), signal);
        } else {
          attempt = 0;
        }
      } catch (err) {
        if (signal.aborted) break;
        this.#onError(err, needList ? 'list' : 'watch');
        if (isGone(err)) {
          // Our resourceVersion is too old: a fresh list is the only way forward.
          needList = true;
          continue;
        }
        if (!needList && isNotFound(err)) needList = true; // the collection went away mid-watch
        await this.#sleep(backoffDelay(attempt++, this.#backoff, this.#random), signal);
      }
    }
  }

  /**
   * Lists and replaces the store. A method of its own so that the list's
   * result dies with this frame: held in #run's, it stayed reachable from the
   * suspended loop for as long as the watch after it ran, with every object
   * listed, deleted or not (5,000 deleted ManagedClusters kept 34 MB alive).
   */
  async #relist(): Promise<'listed' | 'absent'> {
    const listed = await this.#listAll();
    if (this.#stop.signal.aborted) return 'listed';
    if (listed === 'absent') {
      this.#absent = true;
      this.#replace([]);
      this.#markSynced();
      return 'absent';
    }
    this.#absent = false;
    this.#resourceVersion = listed.resourceVersion;
    this.#replace(listed.items);
    this.#markSynced();
    this.#synced();
    return 'listed';
  }

  #markSynced(): void {
    if (this.#hasSynced) return;
    this.#hasSynced = true;
    this.#resolveSynced();
  }

  /** Lists every page; 'absent' on 404. Restarts once if a continue token expires. */
  async #listAll(): Promise<{ items: T[]; resourceVersion: string } | 'absent'> {
    for (let restart = 0; ; restart++) {
      const items: T[] = [];
      let token: string | undefined;
      let resourceVersion = '';
      try {
        do {
          const page: KubeList<T> = await this.#client.list<T>(
            withQuery(this.#path, {
              labelSelector: this.#labelSelector,
              fieldSelector: this.#fieldSelector,
              limit: this.#pageSize,
              continue: token,
            }),
          );
          items.push(...(page.items ?? []));
          resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
          token = page.metadata?.continue || undefined;
        } while (token && !this.#stop.signal.aborted);
        return { items, resourceVersion };
      } catch (err) {
        if (isNotFound(err)) return 'absent';
        // An expired continue token means the snapshot moved on: start over, once.
        if (token && isGone(err) && restart === 0) continue;
        throw err;
      }
    }
  }

  async #watchOnce(): Promise<WatchOutcome> {
    const started = this.#now();
    const controller = new AbortController();
    const stop = () => controller.abort();
    this.#stop.signal.addEventListener('abort', stop, { once: true });
    const timeoutSeconds = this.#watchTimeoutSeconds + Math.floor(this.#random() * this.#watchTimeoutSeconds);
    let stalled = false;
    const watchdog = setTimeout(
      () => {
        stalled = true;
        controller.abort();
      },
      (timeoutSeconds + this.#watchGraceSeconds) * 1000,
    );
    watchdog.unref();
    let events = 0;
    try {
      const path = withQuery(this.#path, {
        labelSelector: this.#labelSelector,
        fieldSelector: this.#fieldSelector,
        resourceVersion: this.#resourceVersion,
        // Bookmarks move resourceVersion on while nothing changes (about once a minute): a relist
        // after a dropped watch then starts from a recent version, and onSync reports progress.
        allowWatchBookmarks: 'true',
        timeoutSeconds,
      });
      for await (const event of this.#client.watch<T>(path, controller.signal)) {
        this.#apply(event);
        events++;
      }
    } catch (err) {
      // The watchdog fired: a stalled connection, not a server error. Resume at once.
      if (!(stalled && !this.#stop.signal.aborted)) throw err;
    } finally {
      clearTimeout(watchdog);
      this.#stop.signal.removeEventListener('abort', stop);
      controller.abort(); // tear down the request whatever ended the loop
    }
    if (stalled && !this.#stop.signal.aborted) {
      this.#onError(
        new Error(`watch on ${this.#path} stalled past ${timeoutSeconds}s; reconnecting`),
        'watch',
      );
    }
    return { events, durationMs: this.#now() - started };
  }

  #apply(event: WatchEvent<T>): void {
    if (event.type === 'ERROR') throw watchErrorToStatusError(event.object);
    const rv = event.object?.metadata?.resourceVersion;
    if (rv) this.#resourceVersion = rv;
    if (event.type === 'BOOKMARK') {
      this.#synced();
      return;
    }
    const obj = event.object;
    const key = objectKey(obj);
    const old = this.#store.get(key);
    if (event.type === 'DELETED') {
      if (old) {
        this.#store.delete(key);
        this.#emit((h) => h.onDelete?.(obj));
      }
    } else {
      this.#store.set(key, obj);
      if (old) this.#emit((h) => h.onUpdate?.(old, obj));
      else this.#emit((h) => h.onAdd?.(obj));
    }
    this.#synced();
  }

  #synced(): void {
    const rv = this.#resourceVersion;
    if (rv) this.#emit((h) => h.onSync?.(rv));
  }

  /** Makes the store equal to a fresh list, emitting only the differences. */
  #replace(items: T[]): void {
    const next = new Map<string, T>();
    for (const item of items) next.set(objectKey(item), item);
    for (const [key, old] of this.#store) {
      if (!next.has(key)) {
        this.#store.delete(key);
        this.#emit((h) => h.onDelete?.(old));
      }
    }
    for (const [key, obj] of next) {
      const old = this.#store.get(key);
      this.#store.set(key, obj);
      if (!old) this.#emit((h) => h.onAdd?.(obj));
      else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) {
        this.#emit((h) => h.onUpdate?.(old, obj));
      }
    }
  }

  /** A throwing handler must not kill the loop or starve the other handlers. */
  #emit(call: (handlers: InformerHandlers<T>) => void): void {
    for (const handlers of this.#handlers) {
      try {
        call(handlers);
      } catch (err) {
        this.#onError(err, 'handler');
      }
    }
  }
}
