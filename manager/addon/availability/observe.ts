/**
 * Turns hub objects into health observations (available.ts). Pure, so each
 * parsing rule is unit-tested without a cluster.
 */
import type { KubeObject } from '../../../shared/kube/client.ts';
import type { Condition, ManagedCluster, ManifestWork } from '../core/resources.ts';
import type {
  ClusterObservation,
  DeploymentObservation,
  GatewayObservation,
  HeartbeatObservation,
  WorkObservation,
} from './available.ts';

export function observeCluster(cluster: ManagedCluster | undefined): ClusterObservation {
  if (!cluster) return {};
  const c = cluster.status?.conditions?.find((x) => x.type === 'ManagedClusterConditionAvailable');
  // A cluster that never reported is Unknown, as OCM's hub treats it.
  return {
    available: c
      ? { status: c.status, reason: c.reason, message: c.message }
      : {
          status: 'Unknown',
          reason: 'ManagedClusterAvailabilityUnknown',
          message: `ManagedCluster ${cluster.metadata.name} has not reported availability yet`,
        },
  };
}

export function observeWork(work: ManifestWork | undefined): WorkObservation {
  if (!work) return { state: 'missing' };
  const applied = find(work.status?.conditions, 'Applied');
  if (!applied || applied.status === 'Unknown')
    return { state: 'pending', ...(applied?.message ? { message: applied.message } : {}) };
  if (applied.status === 'False')
    return { state: 'failed', message: `${applied.reason}: ${applied.message}` };
  // Applied, but only after the work agent has seen this generation of the work.
  const generation = work.metadata.generation;
  if (
    generation !== undefined &&
    applied.observedGeneration !== undefined &&
    applied.observedGeneration < generation
  ) {
    return { state: 'pending', message: 'the work agent has not applied its latest change yet' };
  }
  return { state: 'applied' };
}

/**
 * The agent Deployment from the ManifestWork's status feedback: the
 * WellKnownStatus values (Replicas, AvailableReplicas, ReadyReplicas) and,
 * when the deploy controller asks for them, the messages of the Deployment's
 * Available and Progressing conditions (jsonPaths `AvailableMessage`,
 * `ProgressingMessage`).
 */
export function observeDeployment(
  work: ManifestWork | undefined,
  namespace: string,
  name: string,
): DeploymentObservation {
  const manifest = work?.status?.resourceStatus?.manifests?.find(
    (m) =>
      (m.resourceMeta.kind === 'Deployment' || m.resourceMeta.resource === 'deployments') &&
      m.resourceMeta.name === name &&
      (m.resourceMeta.namespace ?? namespace) === namespace,
  );
  const values = manifest?.statusFeedback?.values ?? [];
  if (values.length === 0) return { state: 'no-feedback' };
  const integer = (key: string) => values.find((v) => v.name === key)?.fieldValue.integer;
  const text = (key: string) => values.find((v) => v.name === key)?.fieldValue.string;
  const replicas = integer('Replicas') ?? 0;
  const availableReplicas = integer('AvailableReplicas') ?? 0;
  if (availableReplicas >= 1 && availableReplicas >= replicas)
    return { state: 'available', availableReplicas, replicas };
  const message = [text('AvailableMessage'), text('ProgressingMessage')].filter(Boolean).join('; ');
  return {
    state: 'unavailable',
    availableReplicas,
    replicas: Math.max(replicas, 1),
    ...(message ? { message } : {}),
  };
}

export interface HeartbeatLease extends KubeObject {
  metadata: { name: string; namespace: string; [key: string]: unknown };
  spec?: { renewTime?: string; holderIdentity?: string };
}

/**
 * When the manager first saw each renewTime, on its own clock: the age of a
 * heartbeat then never depends on the agent's clock being right. A renewTime
 * seen for the first time (manager start) is trusted, capped at "now".
 */
export class HeartbeatClock {
  readonly #seen = new Map<string, { renewTime: string; at: number }>();

  observe(lease: HeartbeatLease | undefined, now: number = Date.now()): HeartbeatObservation {
    if (!lease) return { state: 'missing' };
    const key = `${lease.metadata.namespace}/${lease.metadata.name}`;
    const renewTime = lease.spec?.renewTime;
    if (!renewTime) return { state: 'never-renewed' };
    let entry = this.#seen.get(key);
    if (!entry || entry.renewTime !== renewTime) {
      const stated = Date.parse(renewTime);
      const at = entry ? now : Math.min(now, Number.isNaN(stated) ? now : stated);
      entry = { renewTime, at };
      this.#seen.set(key, entry);
    }
    return { state: 'renewed', ageSeconds: Math.max(0, (now - entry.at) / 1000) };
  }

  forget(namespace: string, name: string): void {
    this.#seen.delete(`${namespace}/${name}`);
  }
}

export interface ClusterGatewayView extends KubeObject {
  spec?: { access?: { endpoint?: { type?: string } } };
  status?: { healthy?: boolean; healthyReason?: string; tunnel?: { connected?: boolean } };
}

export function observeGateway(
  gateway: ClusterGatewayView | undefined,
  apiServed: boolean,
): GatewayObservation {
  if (!apiServed) return { state: 'unknown' };
  if (!gateway) return { state: 'absent' };
  // A tunnel-only cluster (ClusterProxy) whose tunnel is down: its own reason, before any health.
  if (
    gateway.spec?.access?.endpoint?.type === 'ClusterProxy' &&
    gateway.status?.tunnel?.connected === false
  ) {
    return {
      state: 'tunnel-disconnected',
      ...(gateway.status.healthyReason ? { reason: gateway.status.healthyReason } : {}),
    };
  }
  if (gateway.status?.healthy === false)
    return { state: 'unhealthy', reason: gateway.status.healthyReason || 'no reason given' };
  return gateway.status?.healthy === true ? { state: 'healthy' } : { state: 'unknown' };
}

function find(conditions: Condition[] | undefined, type: string) {
  return conditions?.find((c) => c.type === type);
}
