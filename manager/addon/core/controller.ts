/**
 * The one way a controller of the manager is wired, in the manner of
 * addon-framework's controller factory (Go: `factory.New()
 * .WithInformersQueueKeysFunc(...).WithSync(...).ToController(name)`). A
 * controller declares its name, the informers it watches and how an event
 * maps to queue keys, the keys of everything it looks after (enqueued once
 * the caches are complete, and again on every resync) and its `sync(key)`;
 * this file does the rest, alike for all of them:
 * - a keyed work queue (work-queue.ts: deduplication, one worker per key,
 *   retries with backoff, `requeueAfterMs`);
 * - starting only once every watched cache is complete: a partial list
 *   would look like deleted objects;
 * - the reconcile metrics (duration, result, queue depth) and one warning
 *   per failure with its retry delay, under the controller's name;
 * - event handlers off and timers cleared when the signal aborts.
 */
import type { Logger } from 'pino';
import type { KubeObject } from '../../../shared/kube/client.ts';
import type { InformerHandlers } from '../../../shared/kube/informer.ts';
import type { AddonMetrics } from './metrics.ts';
import { type ProcessResult, WorkQueue } from './work-queue.ts';

/** What an event or a resync asks to look at: a key, several, or none. */
export type Keys = string | Iterable<string> | undefined;

/** The part of an Informer a controller watches. */
export interface WatchedInformer<T extends KubeObject> {
  on(handlers: InformerHandlers<T>): () => void;
  readonly synced: Promise<unknown>;
}

/**
 * One informer and the keys each of its events concerns; an event left out
 * is ignored. `update` gets the new object first, then the previous one.
 */
export interface Watch<T extends KubeObject = KubeObject> {
  informer: WatchedInformer<T>;
  add?: (obj: T) => Keys;
  update?: (obj: T, old: T) => Keys;
  delete?: (obj: T) => Keys;
  /** Start without waiting for this cache: an API that may not be served yet (it may never list). */
  optional?: boolean;
}

/** A watch whose three events all map an object to its keys alike. */
export function watchAll<T extends KubeObject>(
  informer: WatchedInformer<T>,
  keys: (obj: T) => Keys,
  options: Pick<Watch<T>, 'optional'> = {},
): Watch<T> {
  return { informer, add: keys, update: (obj) => keys(obj), delete: keys, ...options };
}

export interface ControllerSpec {
  /** The `controller` label of the metrics and the logs. */
  name: string;
  // biome-ignore lint/suspicious/noExplicitAny: each watch has its own object type.
  watches?: Watch<any>[];
  /** The keys of everything the controller looks after: enqueued at start and on every resync. */
  keys?: () => Keys;
  /** Enqueue `keys()` again this often (default: never; events and `requeueAfterMs` only). */
  resyncMs?: number;
  workers?: number;
  sync: (key: string, signal: AbortSignal) => Promise<ProcessResult>;
  /** After every sync, failed or not (e.g. to refresh a gauge). */
  afterSync?: () => void;
}

/** What every controller is given besides its own dependencies. */
export interface ControllerDeps {
  log: Logger;
  metrics?: AddonMetrics | undefined;
}

export class Controller {
  readonly name: string;
  /** The manager's logger with this controller's name on every line. */
  readonly log: Logger;
  readonly queue: WorkQueue;
  readonly #spec: ControllerSpec;

  constructor(spec: ControllerSpec, deps: ControllerDeps) {
    this.#spec = spec;
    this.name = spec.name;
    this.log = deps.log.child({ controller: spec.name });
    this.queue = instrumentedQueue(spec, this.log, deps.metrics);
  }

  /** Looks at `key` (again) as soon as a worker is free. */
  enqueue(keys: Keys): void {
    if (keys === undefined) return;
    if (typeof keys === 'string') this.queue.add(keys);
    else for (const key of keys) this.queue.add(key);
  }

  /** Watches now; syncs once the caches it waits for are complete; stops when `signal` aborts. */
  start(signal: AbortSignal): void {
    const { watches = [], keys, resyncMs } = this.#spec;
    const cleanup = watches.map((w) => this.#watch(w));
    const all = () => this.enqueue(keys?.());
    if (resyncMs) {
      const resync = setInterval(all, resyncMs);
      resync.unref();
      cleanup.push(() => clearInterval(resync));
    }
    signal.addEventListener(
      'abort',
      () => {
        for (const clean of cleanup) clean();
      },
      { once: true },
    );
    void Promise.all(watches.filter((w) => !w.optional).map((w) => w.informer.synced)).then(
      () => {
        if (signal.aborted) return;
        all();
        this.queue.start(signal);
      },
      () => {},
    );
  }

  #watch<T extends KubeObject>(w: Watch<T>): () => void {
    const handlers: InformerHandlers<T> = {};
    if (w.add) handlers.onAdd = (obj) => this.enqueue(w.add?.(obj));
    if (w.update) handlers.onUpdate = (old, obj) => this.enqueue(w.update?.(obj, old));
    if (w.delete) handlers.onDelete = (obj) => this.enqueue(w.delete?.(obj));
    return w.informer.on(handlers);
  }
}

/** The work queue with the manager's bookkeeping around each sync. */
function instrumentedQueue(
  spec: ControllerSpec,
  log: Pick<Logger, 'warn'>,
  metrics: ControllerDeps['metrics'],
): WorkQueue {
  const controller = spec.name;
  return new WorkQueue({
    ...(spec.workers ? { workers: spec.workers } : {}),
    process: async (key, signal) => {
      const started = performance.now();
      const seconds = () => (performance.now() - started) / 1000;
      try {
        const result = await spec.sync(key, signal);
        metrics?.observeReconcile(controller, seconds(), 'success');
        return result;
      } catch (err) {
        metrics?.observeReconcile(controller, seconds(), 'error');
        throw err;
      } finally {
        spec.afterSync?.();
      }
    },
    onError: (key, err, retryInMs) =>
      log.warn(
        { controller, key, err: err instanceof Error ? err.message : String(err), retryInMs },
        'reconcile failed; retrying',
      ),
    onDepth: (depth) => metrics?.setQueueDepth(controller, depth),
  });
}
