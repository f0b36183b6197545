/**
 * Prometheus metrics of the addon manager, on a registry of its own (not
 * prom-client's global one, so tests and the gateway never share series).
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { registerProcessMetrics } from '../../../shared/process-metrics.ts';

export type ReconcileResult = 'success' | 'error';

export class AddonMetrics {
  readonly registry = new Registry();
  readonly #reconciles: Counter<'controller' | 'result'>;
  readonly #errors: Counter<'controller'>;
  readonly #durations: Histogram<'controller'>;
  readonly #addonsByReason: Gauge<'condition' | 'status' | 'reason'>;
  readonly #leader: Gauge;
  readonly #queueDepth: Gauge<'controller'>;
  /** condition -> the "status/reason" series set so far. */
  readonly #known = new Map<string, Set<string>>();

  constructor({ processMetrics = true }: { processMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.#reconciles = new Counter({
      name: 'cluster_gateway_addon_reconciles_total',
      help: 'Reconciles by controller and result',
      labelNames: ['controller', 'result'],
      registers,
    });
    this.#errors = new Counter({
      name: 'cluster_gateway_addon_reconcile_errors_total',
      help: 'Reconciles that failed (each is retried with backoff)',
      labelNames: ['controller'],
      registers,
    });
    this.#durations = new Histogram({
      name: 'cluster_gateway_addon_reconcile_duration_seconds',
      help: 'Time per reconcile',
      labelNames: ['controller'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.#addonsByReason = new Gauge({
      name: 'cluster_gateway_addon_managedclusteraddons',
      help: 'ManagedClusterAddOns by condition, status and reason (e.g. Available False ManifestWorkNotApplied)',
      labelNames: ['condition', 'status', 'reason'],
      registers,
    });
    this.#leader = new Gauge({
      name: 'cluster_gateway_addon_manager_leader',
      help: '1 while this replica holds the leader Lease',
      registers,
    });
    this.#queueDepth = new Gauge({
      name: 'cluster_gateway_addon_workqueue_depth',
      help: 'Keys waiting in a controller work queue',
      labelNames: ['controller'],
      registers,
    });
    if (processMetrics) registerProcessMetrics(this.registry);
  }

  observeReconcile(controller: string, seconds: number, result: ReconcileResult): void {
    this.#reconciles.inc({ controller, result });
    if (result === 'error') this.#errors.inc({ controller });
    this.#durations.observe({ controller }, seconds);
  }

  /**
   * Replaces the counts of one condition type: `counts` maps "status/reason"
   * to the number of addons in that state. Reasons that disappeared drop to
   * nothing rather than lingering at their last value.
   */
  setAddonsByReason(condition: string, counts: Map<string, number>): void {
    const known = this.#known.get(condition) ?? new Set<string>();
    for (const key of known) {
      if (counts.has(key)) continue;
      const [status = '', reason = ''] = key.split('/');
      this.#addonsByReason.remove({ condition, status, reason });
      known.delete(key);
    }
    for (const [key, count] of counts) {
      const [status = '', reason = ''] = key.split('/');
      this.#addonsByReason.set({ condition, status, reason }, count);
      known.add(key);
    }
    this.#known.set(condition, known);
  }

  setLeader(leader: boolean): void {
    this.#leader.set(leader ? 1 : 0);
  }

  setQueueDepth(controller: string, depth: number): void {
    this.#queueDepth.set({ controller }, depth);
  }

  async text(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
