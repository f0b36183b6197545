/**
 * When the gateway knows a cluster to be offline, and how it says so (issue 32: "a defined error for an
 * offline cluster"). Two steps, both pure:
 *
 * - offlineCauses (merge.ts): what is known, from the same inputs as the cluster's health, so the
 *   causes never disagree with `status.healthy`:
 *   1. an operator's unhealthy mark (health subresource): it wins over everything (health-precedence.ts);
 *   2. a ClusterProxy cluster with no agent tunnel connected: there is nothing to dial;
 *   3. the prober's last verdict, when it failed and no tunnel cause explains it already. A cluster
 *      not probed yet is not offline (a restart must not turn healthy clusters into 503s), nor is a
 *      cluster unhealthy only by its ManagedCluster's condition or by default with the prober off:
 *      the gateway did not find it offline itself.
 * - offlineAnswer (routes.ts): which of them the gateway answers at once. A tunnel cause always (it
 *   was always a 503 at once: no endpoint to try); a mark or a failed probe with --reject-unhealthy.
 *
 * Why --reject-unhealthy stays a flag, off in the binary and on in the chart: the Go original forwards
 * to every cluster whatever its health (clustergateway_proxy.go never reads status.healthy), and a
 * gateway started with the original's flags (docs/migration.md) keeps that behaviour, as do the
 * e2e/ gateways that assert what forwarding to a broken cluster answers. The chart, which is how the
 * gateway is installed, turns it on: a cluster an operator took out of service, or that the prober
 * cannot reach, is answered in well under 100 ms with a cause a client can branch on, instead of
 * being tried until a dial timeout. `gateway.healthCheck.rejectUnhealthy: false` turns it off.
 */
import type { ClusterOfflineAnswer } from '../../../shared/kube/cluster-offline.ts';
import type { ClusterHealth, ClusterTarget, OfflineCause } from './cluster.ts';

export interface OfflineInputs {
  /** The operator's mark (Secret, else ManagedCluster annotations). */
  mark?: ClusterHealth | undefined;
  /** The prober's verdict as merge.ts uses it (undefined while not probed, or with the prober off). */
  probe?: ClusterHealth | undefined;
  /** The cluster's resolved health (its reason may be explained, e.g. a missing CA). */
  health: ClusterHealth;
  /** Its endpoint is its agent's tunnel and none is connected. */
  tunnelDown: boolean;
}

export const noTunnelCause = 'no agent tunnel is connected (endpoint type ClusterProxy)';

export function offlineCauses({ mark, probe, health, tunnelDown }: OfflineInputs): OfflineCause[] {
  const causes: OfflineCause[] = [];
  if (mark && !mark.healthy) {
    causes.push({
      kind: 'mark',
      message: `marked unhealthy through the health subresource: ${mark.reason || '(no reason given)'}`,
    });
  }
  if (tunnelDown) causes.push({ kind: 'tunnel', message: noTunnelCause });
  else if (probe && !probe.healthy) {
    // Unless a mark won, the resolved health is the probe's, its reason possibly explained (merge.ts).
    const reason = (mark && !mark.healthy ? probe.reason : health.reason) ?? probe.reason;
    causes.push({
      kind: 'probe',
      message: `the last health probe failed: ${reason || '(no reason given)'}`,
    });
  }
  return causes;
}

export interface OfflinePolicy {
  /** --reject-unhealthy: also answer marked and probed-unhealthy clusters at once. */
  rejectUnhealthy: boolean;
  /** --health-check-interval: a probed-unhealthy cluster is looked at again within it. */
  probeIntervalSeconds?: number;
}

/** The 503 to answer at once for this cluster, or undefined to forward the request. */
export function offlineAnswer(
  target: ClusterTarget,
  policy: OfflinePolicy,
): ClusterOfflineAnswer | undefined {
  const causes = (target.offline ?? []).filter((c) => c.kind === 'tunnel' || policy.rejectUnhealthy);
  const first = causes[0];
  if (!first) return undefined;
  const name = target.name;
  // Status.message is worded as before issue 32, so people and scripts that read it see no change.
  const message =
    first.kind === 'tunnel'
      ? `cluster "${name}" is unreachable: ${target.problem ?? noTunnelCause}`
      : `cluster "${name}" is unhealthy: ${target.health.reason ?? 'its last health probe failed'}`;
  // Only the prober changes its own verdict by itself, at its next probe; a mark waits for an operator
  // and a tunnel for its agent, of which the gateway knows no time. Never sent as a Retry-After header:
  // client-go would then retry by itself and hide the defined answer behind up to 10 silent retries.
  const retryAfterSeconds =
    causes.every((c) => c.kind === 'probe') && policy.probeIntervalSeconds
      ? policy.probeIntervalSeconds
      : undefined;
  return {
    cluster: name,
    message,
    causes: causes.map((c) => c.message),
    ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
  };
}
