/**
 * Which health a cluster shows, from what is known about it:
 *
 * - mark: what an operator (or any client of the health subresource, e.g.
 *   the original's addon health prober) recorded in the
 *   `status.cluster.core.oam.dev/healthy` / `.../healthy-reason`
 *   annotations, on the credential Secret or, for a cluster without one,
 *   on its ManagedCluster;
 * - probe: the gateway's own prober (health/prober.ts);
 * - condition: the ManagedCluster's Available condition.
 *
 * Rules:
 * 1. A mark of unhealthy wins over everything until it is cleared (set to
 *    healthy, or the annotations removed): an operator who takes a cluster
 *    out of service must not be overruled by a prober that can still reach
 *    it. `--reject-unhealthy` therefore rejects it too.
 * 2. Otherwise the probe wins when there is one, since it reports what the
 *    gateway sees now; when it agrees with a healthy mark, the mark is
 *    shown, so the reason its writer gave is kept (the original echoes it).
 * 3. Without a probe (HealthinessCheck off): the mark, else the
 *    ManagedCluster's condition, else unhealthy (the original's default).
 * 4. With a prober that has not probed the cluster yet (a new cluster, or
 *    any cluster just after a restart): the mark, else the condition, else
 *    unknown. Unknown shows as not healthy with the reason "Unknown: not
 *    probed yet" (the original's Unknown: reason prefix), and
 *    --reject-unhealthy lets requests through: a restart must not turn
 *    healthy clusters into 503s before anyone looked at them.
 */
import type { ClusterHealth } from './cluster.ts';
import {
  annotationHealthy,
  annotationHealthyReason,
  annotationProbedHealthy,
  annotationProbedReason,
} from './keys.ts';
import { parseGoBool } from './parse-util.ts';

export interface HealthInputs {
  mark?: ClusterHealth | undefined;
  probe?: ClusterHealth | undefined;
  condition?: ClusterHealth | undefined;
  /** A prober runs and has not probed this cluster yet. */
  probePending?: boolean;
}

export const notProbedYetReason = 'Unknown: not probed yet';

export function resolveHealth({ mark, probe, condition, probePending }: HealthInputs): ClusterHealth {
  if (mark && !mark.healthy) return mark;
  if (probe) return mark && probe.healthy ? mark : probe;
  return (
    mark ??
    condition ??
    (probePending ? { healthy: false, reason: notProbedYetReason, unknown: true } : { healthy: false })
  );
}

/** The mark recorded in an object's status annotations, if any (the Secret's parsing does the same). */
export function healthFromAnnotations(
  annotations: Record<string, string> | undefined,
): ClusterHealth | undefined {
  const healthy = annotations?.[annotationHealthy];
  const reason = annotations?.[annotationHealthyReason];
  if (healthy === undefined) return reason ? { healthy: false, reason } : undefined;
  const value = parseGoBool(healthy);
  if (value === undefined) {
    return { healthy: false, reason: `invalid ${annotationHealthy} annotation ${JSON.stringify(healthy)}` };
  }
  return { healthy: value, ...(reason ? { reason } : {}) };
}

/** The prober's verdict recorded on the object (health/probe-store.ts), if any; a malformed one is ignored. */
export function probeFromAnnotations(
  annotations: Record<string, string> | undefined,
): ClusterHealth | undefined {
  const healthy = annotations?.[annotationProbedHealthy];
  if (healthy === undefined) return undefined;
  const value = parseGoBool(healthy);
  if (value === undefined) return undefined;
  const reason = annotations?.[annotationProbedReason];
  return { healthy: value, ...(reason ? { reason } : {}) };
}

/** A Kubernetes resourceVersion as a number (etcd's revision); 0 when absent or not a plain integer. */
export function parseResourceVersion(value: unknown): number {
  return typeof value === 'string' && /^[0-9]{1,15}$/.test(value) ? Number(value) : 0;
}
