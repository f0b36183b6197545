/**
 * prom-client's process and Node runtime metrics, as the gateway and the addon manager expose them.
 */
import { collectDefaultMetrics, type Registry } from 'prom-client';

/**
 * How often the event-loop delay histogram samples, in ms. prom-client's default of 10 ms wakes an
 * idle process 100 times a second, and that timer alone cost 0.65 % of a core on the 2-core
 * machine of docs/benchmarks-log.md (50 ms: 0.16 %; none: 0.03 %), about half of what an idle gateway
 * costs. Its figures include the sampling period: `nodejs_eventloop_lag_min_seconds` of an idle
 * process reads about 0.05, and a stall of S seconds reads between S and S + 0.05.
 */
export const eventLoopSamplingMs = 50;

export function registerProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: eventLoopSamplingMs });
}
