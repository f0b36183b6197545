/**
 * An informer for one managed cluster that keeps working through everything between the program and the
 * cluster: a gateway replica restarted, an agent (and its tunnel) restarted, the hub's aggregator briefly
 * without an endpoint, a `410 Gone`, an offline cluster coming back.
 *
 * Why not client-node's makeInformer: its ListWatch stops at the first error other than 410 and a timeout
 * (it emits `error` and waits for the program to call start() again), so the first gateway restart ends
 * it. This one never stops by itself:
 * - a watch that ends or fails resumes from the last resourceVersion it saw (bookmarks included), so the
 *   API server replays what happened meanwhile and no event is lost or repeated;
 * - a `410 Gone` (HTTP status or an ERROR event) relists and emits the differences against the cache
 *   (relist-diff.ts): every object's final state, adds, updates and deletes;
 * - failures back off, exponentially, capped, jittered (backoff.ts);
 * - `error` events say what failed and are informational: the informer keeps retrying until stop().
 * It uses client-node's own Watch on the KubeConfig it is given (kubeConfigForCluster's, for a cluster
 * behind the gateway), so requests carry the same identity and TLS settings as every other client-node call.
 */
import {
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  Watch,
} from '@kubernetes/client-node';
import { type BackoffPolicy, backoffDelay, defaultBackoff } from './backoff.ts';
import { kubeConfigForCluster } from './proxied-kubeconfig.ts';
import { diffRelist, objectKey } from './relist-diff.ts';

export type ObjectHandler<T> = (object: T, cluster: string) => void;
export type ErrorHandler = (error: unknown, cluster: string) => void;
export type ConnectHandler = (cluster: string) => void;

export interface InformerHandlers<T> {
  add: ObjectHandler<T>;
  update: ObjectHandler<T>;
  delete: ObjectHandler<T>;
  /** A watch (re)connected; after it, events flow again. */
  connect: ConnectHandler;
  /** Something failed; the informer retries by itself. isClusterOffline(error) tells an offline cluster. */
  error: ErrorHandler;
}
export type InformerEvent = keyof InformerHandlers<unknown>;

/** client-node's Watch, or anything with its watch() (tests pass a fake). */
export type WatchLike = Pick<Watch, 'watch'>;

export interface ClusterInformerOptions<T extends KubernetesObject> {
  /** The cluster's name: it labels every event and error. */
  cluster: string;
  /** A KubeConfig that reaches the cluster, e.g. kubeConfigForCluster(hub, cluster). */
  kubeConfig: KubeConfig;
  /** The collection to watch, e.g. /api/v1/namespaces/default/configmaps. */
  path: string;
  /** Lists that collection (with the same selectors), e.g. (kc) => kc.makeApiClient(CoreV1Api).listNamespacedConfigMap({ namespace }). */
  list: (kubeConfig: KubeConfig) => Promise<KubernetesListObject<T>>;
  labelSelector?: string;
  fieldSelector?: string;
  backoff?: Partial<BackoffPolicy>;
  /** Injected for tests. */
  watch?: WatchLike;
  random?: () => number;
  now?: () => number;
}

// A watch that ends cleanly this soon without delivering anything counts as a failure, so a server (or a
// proxy) that accepts and closes at once is retried with backoff, not in a tight loop.
const minHealthyWatchMs = 1000;

type WatchOutcome = { kind: 'closed' | 'gone' | 'stopped' } | { kind: 'failed'; error: unknown };

export class ClusterInformer<T extends KubernetesObject = KubernetesObject> {
  readonly cluster: string;
  private readonly options: ClusterInformerOptions<T>;
  private readonly watcher: WatchLike;
  private readonly policy: BackoffPolicy;
  private readonly random: () => number;
  private readonly now: () => number;
  private readonly handlers: { [K in InformerEvent]: InformerHandlers<T>[K][] } = {
    add: [],
    update: [],
    delete: [],
    connect: [],
    error: [],
  };
  private readonly cache = new Map<string, T>();
  private version = '';
  private attempts = 0;
  private running?: Promise<void>;
  private stopController = new AbortController();
  private abortWatch?: () => void;
  private synced = false;
  private resolveSynced?: () => void;
  private syncedPromise?: Promise<void>;
  /** How many times a 410 Gone made it relist (for tests and metrics). */
  relists = 0;

  constructor(options: ClusterInformerOptions<T>) {
    this.cluster = options.cluster;
    this.options = options;
    this.watcher = options.watch ?? new Watch(options.kubeConfig);
    this.policy = { ...defaultBackoff, ...options.backoff };
    this.random = options.random ?? Math.random;
    this.now = options.now ?? Date.now;
  }

  on<K extends InformerEvent>(event: K, handler: InformerHandlers<T>[K]): void {
    const list = this.handlers[event] as InformerHandlers<T>[K][] | undefined;
    if (!list) throw new Error(`unknown informer event: ${String(event)}`);
    list.push(handler);
  }

  off<K extends InformerEvent>(event: K, handler: InformerHandlers<T>[K]): void {
    const list = this.handlers[event] as InformerHandlers<T>[K][];
    const at = list.indexOf(handler);
    if (at >= 0) list.splice(at, 1);
  }

  /** Starts; resolves once the first list is in the cache and its watch is connected (or on stop()). */
  start(): Promise<void> {
    if (!this.running) {
      this.stopController = new AbortController();
      this.syncedPromise = new Promise((resolve) => {
        this.resolveSynced = resolve;
      });
      this.running = this.run().finally(() => {
        this.running = undefined;
      });
    }
    return this.syncedPromise!;
  }

  /** Stops watching; the cache keeps its last state. Resolves once the loop has ended. */
  async stop(): Promise<void> {
    this.stopController.abort();
    this.abortWatch?.();
    this.resolveSynced?.();
    await this.running;
  }

  get hasSynced(): boolean {
    return this.synced;
  }

  /** The resourceVersion the cache is at; a watch resumes from it. */
  get resourceVersion(): string {
    return this.version;
  }

  get(name: string, namespace?: string): T | undefined {
    return this.cache.get(namespace ? `${namespace}/${name}` : name);
  }

  list(namespace?: string): T[] {
    const all = [...this.cache.values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata?.namespace === namespace);
  }

  private get stopped(): boolean {
    return this.stopController.signal.aborted;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      if (!this.version) {
        try {
          await this.relist();
        } catch (error) {
          this.emitError(error);
          await this.backoff();
          continue;
        }
      }
      const opened = this.now();
      let delivered = false;
      const outcome = await this.watchOnce(() => {
        delivered = true;
      });
      const healthy = delivered || this.now() - opened >= minHealthyWatchMs;
      if (healthy) this.attempts = 0;
      if (outcome.kind === 'stopped') return;
      if (outcome.kind === 'gone') {
        // The server no longer has history from our resourceVersion: relist now.
        this.version = '';
        this.relists++;
      } else if (outcome.kind === 'failed') {
        this.emitError(outcome.error);
        await this.backoff();
      } else if (!healthy) {
        await this.backoff();
      }
      // A healthy watch that ended (the server's timeout, the client's inactivity timeout): resume at once.
    }
  }

  private async relist(): Promise<void> {
    const list = await this.options.list(this.options.kubeConfig);
    if (this.stopped) return;
    const diff = diffRelist(this.cache, list.items ?? []);
    for (const obj of diff.deleted) {
      this.cache.delete(objectKey(obj));
      this.emit('delete', obj);
    }
    for (const obj of diff.added) {
      this.cache.set(objectKey(obj), obj);
      this.emit('add', obj);
    }
    for (const obj of diff.updated) {
      this.cache.set(objectKey(obj), obj);
      this.emit('update', obj);
    }
    this.version = list.metadata?.resourceVersion ?? '';
    if (!this.version)
      throw new Error(`the list of ${this.options.path} has no resourceVersion to watch from`);
  }

  private watchOnce(onEvent: () => void): Promise<WatchOutcome> {
    return new Promise<WatchOutcome>((resolve) => {
      let settled = false;
      let controller: AbortController | undefined;
      const finish = (outcome: WatchOutcome) => {
        if (settled) return;
        settled = true;
        this.abortWatch = undefined;
        controller?.abort();
        resolve(outcome);
      };
      this.abortWatch = () => finish({ kind: 'stopped' });
      const query: Record<string, string | boolean> = {
        resourceVersion: this.version,
        // Bookmarks move the resourceVersion forward on a quiet collection, so a reconnect after a long
        // quiet spell still resumes instead of meeting a 410 and relisting.
        allowWatchBookmarks: true,
      };
      if (this.options.labelSelector !== undefined) query.labelSelector = this.options.labelSelector;
      if (this.options.fieldSelector !== undefined) query.fieldSelector = this.options.fieldSelector;
      const onPhase = (phase: string, obj: unknown) => {
        if (settled) return;
        if (phase === 'ERROR') {
          // A Status in the stream: 410 means our resourceVersion is too old; anything else is a failure.
          if ((obj as { code?: unknown } | undefined)?.code === 410) finish({ kind: 'gone' });
          else finish({ kind: 'failed', error: statusError(obj) });
          return;
        }
        onEvent();
        this.apply(phase, obj as T);
      };
      const onDone = (err: unknown) => {
        const e = err as { statusCode?: unknown; code?: unknown; name?: unknown } | null | undefined;
        if (!err) finish({ kind: 'closed' });
        else if (e?.statusCode === 410 || e?.code === 410) finish({ kind: 'gone' });
        // client-node's 30 s inactivity timeout on a quiet collection: reconnect like a clean close.
        else if (e?.name === 'TimeoutError') finish({ kind: 'closed' });
        else finish({ kind: 'failed', error: err });
      };
      this.watcher.watch(this.options.path, query, onPhase, onDone).then(
        (c) => {
          controller = c;
          if (settled) {
            c.abort();
            return;
          }
          // Watch.watch resolves once the response is 200 (an error status has called done already).
          this.synced = true;
          this.resolveSynced?.();
          this.emit('connect');
        },
        (error) => finish({ kind: 'failed', error }),
      );
    });
  }

  private apply(phase: string, obj: T): void {
    const rv = obj?.metadata?.resourceVersion;
    if (phase === 'BOOKMARK') {
      if (rv) this.version = rv;
      return;
    }
    const key = objectKey(obj);
    const cached = this.cache.get(key);
    // The resourceVersion advances before the handlers run, so a handler that reads it sees this event's.
    if (rv) this.version = rv;
    if (phase === 'DELETED') {
      if (!cached) return;
      this.cache.delete(key);
      this.emit('delete', obj);
    } else if (phase === 'ADDED' || phase === 'MODIFIED') {
      this.cache.set(key, obj);
      if (!cached) this.emit('add', obj);
      else if (cached.metadata?.resourceVersion !== rv || !rv) this.emit('update', obj);
    }
  }

  private async backoff(): Promise<void> {
    this.attempts++;
    const ms = backoffDelay(this.attempts, this.policy, this.random);
    await new Promise<void>((resolve) => {
      const signal = this.stopController.signal;
      if (signal.aborted) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done);
    });
  }

  private emit(event: 'add' | 'update' | 'delete', obj: T): void;
  private emit(event: 'connect'): void;
  private emit(event: 'add' | 'update' | 'delete' | 'connect', obj?: T): void {
    for (const handler of [...this.handlers[event]]) {
      try {
        if (event === 'connect') (handler as ConnectHandler)(this.cluster);
        else (handler as ObjectHandler<T>)(obj as T, this.cluster);
      } catch (error) {
        // A throwing handler must not end the informer; it is reported like any other failure.
        this.emitError(error);
      }
    }
  }

  private emitError(error: unknown): void {
    for (const handler of [...this.handlers.error]) {
      try {
        handler(error, this.cluster);
      } catch {
        // An error handler that throws has nowhere left to report to.
      }
    }
  }
}

/** A Status received in a watch stream, as an Error with its code and the Status itself as `body`. */
function statusError(value: unknown): Error & { statusCode?: number; body?: unknown } {
  const status = value as { message?: unknown; code?: unknown } | undefined;
  const error: Error & { statusCode?: number; body?: unknown } = new Error(
    typeof status?.message === 'string' ? status.message : `watch error: ${JSON.stringify(value)}`,
  );
  if (typeof status?.code === 'number') error.statusCode = status.code;
  error.body = status;
  return error;
}

/**
 * An informer for `cluster` through the hub's ClusterGateway proxy:
 *
 *   const cms = clusterInformer(hub, 'cluster2', '/api/v1/namespaces/default/configmaps',
 *     (kc) => kc.makeApiClient(CoreV1Api).listNamespacedConfigMap({ namespace: 'default' }));
 *   cms.on('add', (cm, cluster) => console.log(cluster, cm.metadata?.name));
 *   await cms.start();
 */
export function clusterInformer<T extends KubernetesObject = KubernetesObject>(
  hub: KubeConfig,
  cluster: string,
  path: string,
  list: (kubeConfig: KubeConfig) => Promise<KubernetesListObject<T>>,
  options: Omit<ClusterInformerOptions<T>, 'cluster' | 'kubeConfig' | 'path' | 'list'> = {},
): ClusterInformer<T> {
  return new ClusterInformer<T>({
    ...options,
    cluster,
    kubeConfig: kubeConfigForCluster(hub, cluster),
    path,
    list,
  });
}
