/**
 * A controller's work queue with the manager's bookkeeping around each
 * reconcile: duration and result in the reconcile metrics, queue depth, and
 * one warning per failure with its retry delay. Every controller takes its
 * queue from here, so they all report alike.
 */
import type { Logger } from 'pino';
import type { AddonMetrics } from './metrics.ts';
import { type ProcessResult, WorkQueue } from './work-queue.ts';

export interface ControllerQueueOptions {
  /** The `controller` label of the metrics and logs. */
  controller: string;
  reconcile: (key: string, signal: AbortSignal) => Promise<ProcessResult>;
  log: Pick<Logger, 'warn'>;
  metrics?: Pick<AddonMetrics, 'observeReconcile' | 'setQueueDepth'> | undefined;
  workers?: number;
  /** Called after every reconcile, failed or not (e.g. to refresh a gauge). */
  after?: () => void;
}

export function controllerQueue(options: ControllerQueueOptions): WorkQueue {
  const { controller, metrics } = options;
  return new WorkQueue({
    ...(options.workers ? { workers: options.workers } : {}),
    process: async (key, signal) => {
      const started = performance.now();
      const seconds = () => (performance.now() - started) / 1000;
      try {
        const result = await options.reconcile(key, signal);
        metrics?.observeReconcile(controller, seconds(), 'success');
        return result;
      } catch (err) {
        metrics?.observeReconcile(controller, seconds(), 'error');
        throw err;
      } finally {
        options.after?.();
      }
    },
    onError: (key, err, retryInMs) =>
      options.log.warn(
        { controller, key, err: err instanceof Error ? err.message : String(err), retryInMs },
        'reconcile failed; retrying',
      ),
    onDepth: (depth) => metrics?.setQueueDepth(controller, depth),
  });
}

/**
 * Starts `queue` once every cache in `synced` is complete (a partial list
 * would look like deleted objects), after `initial` enqueued what they hold;
 * `cleanup` runs when `signal` aborts (event handlers off, timers cleared).
 */
export function startWhenSynced(
  queue: WorkQueue,
  signal: AbortSignal,
  options: { synced: Promise<unknown>[]; initial: () => void; cleanup: (() => void)[] },
): void {
  signal.addEventListener(
    'abort',
    () => {
      for (const clean of options.cleanup) clean();
    },
    { once: true },
  );
  void Promise.all(options.synced).then(
    () => {
      if (signal.aborted) return;
      options.initial();
      queue.start(signal);
    },
    () => {},
  );
}
