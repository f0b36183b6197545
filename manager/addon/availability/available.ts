/**
 * The addon's `Available` condition as a pure function of what the manager
 * observes. The first thing that is wrong, in the order a user would fix
 * it, decides the verdict; every verdict has its own reason and a message
 * that says what to look at. The controller (availability-controller.ts) only
 * gathers observations and writes the result when it changes.
 */
import type { ConditionVerdict } from '../core/conditions.ts';

export interface ClusterObservation {
  /** The ManagedCluster's ManagedClusterConditionAvailable; undefined when there is no ManagedCluster. */
  available?: { status: 'True' | 'False' | 'Unknown'; reason: string; message: string };
}

export type WorkObservation =
  | { state: 'missing' }
  | { state: 'pending'; message?: string }
  | { state: 'failed'; message: string }
  | { state: 'applied' };

export type DeploymentObservation =
  | { state: 'no-feedback' }
  | { state: 'available'; availableReplicas: number; replicas: number }
  | { state: 'unavailable'; availableReplicas: number; replicas: number; message?: string };

export type HeartbeatObservation =
  | { state: 'missing' }
  | { state: 'never-renewed' }
  | { state: 'renewed'; ageSeconds: number };

export type GatewayObservation =
  /** The clustergateways API is not served (gateway not installed) or did not answer: not held against the agent. */
  | { state: 'unknown' }
  /**
   * The API is served and lists no ClusterGateway of this cluster: the gateway has no way into it yet
   * (no credential Secret, no tunnel of a Secret-less cluster).
   */
  | { state: 'absent' }
  | { state: 'healthy' }
  | { state: 'unhealthy'; reason: string }
  /** The cluster is reached through its agent's tunnel only (endpoint type ClusterProxy), and it is down. */
  | { state: 'tunnel-disconnected'; reason?: string };

/**
 * The addon's ClusterCertificateRotated condition, which OCM's registration agent writes: False when it
 * could not get the agent a hub certificate (for example "Stop creating csr since there are too many csr
 * created already on hub"). Undefined when absent.
 */
export type CredentialObservation = { status: string; reason?: string; message?: string } | undefined;

export interface HealthObservations {
  addonName: string;
  cluster: string;
  workName: string;
  /** The agent Deployment as `<namespace>/<name>` on the managed cluster. */
  agentDeployment: string;
  managedCluster: ClusterObservation;
  work: WorkObservation;
  deployment: DeploymentObservation;
  heartbeat: HeartbeatObservation;
  gateway: GatewayObservation;
  credential?: CredentialObservation;
  /** A heartbeat older than this is stale. */
  heartbeatStaleSeconds: number;
}

/** Every reason this module can produce (the table-driven test checks each one is reachable). */
export const availableReasons = [
  'ManagedClusterNotFound',
  'ManagedClusterUnavailable',
  'WorkNotFound',
  'WorkNotApplied',
  'WorkApplyFailed',
  'AgentDeploymentNoFeedback',
  'AgentDeploymentUnavailable',
  'AgentCredentialNotIssued',
  'HeartbeatLeaseNotFound',
  'WaitingForFirstHeartbeat',
  'HeartbeatStale',
  'ClusterNotServedByGateway',
  'TunnelDisconnected',
  'ClusterUnreachableFromGateway',
  'AgentAvailable',
] as const;
export type AvailableReason = (typeof availableReasons)[number];

export function computeAvailable(o: HealthObservations): ConditionVerdict {
  const cluster = o.managedCluster.available;
  if (!cluster) {
    return verdict(
      'False',
      'ManagedClusterNotFound',
      `ManagedCluster ${o.cluster} does not exist: the addon is enabled on a namespace that is not a managed cluster; disable it there or register the cluster`,
    );
  }
  // While the cluster is Unknown, OCM's hub (registration healthcheck
  // controller) copies the cluster's condition onto every addon. Saying the
  // same thing keeps the two writers from taking turns on the condition.
  if (cluster.status === 'Unknown') return verdict('Unknown', cluster.reason, cluster.message);
  if (cluster.status === 'False') {
    return verdict(
      'False',
      'ManagedClusterUnavailable',
      `managed cluster ${o.cluster} is not available (${cluster.reason}: ${cluster.message}); the agent cannot run until the cluster is back`,
    );
  }

  switch (o.work.state) {
    case 'missing':
      return verdict(
        'Unknown',
        'WorkNotFound',
        `waiting for the addon manager to create ManifestWork ${o.cluster}/${o.workName}`,
      );
    case 'pending':
      return verdict(
        'Unknown',
        'WorkNotApplied',
        `waiting for the work agent of ${o.cluster} to apply ManifestWork ${o.cluster}/${o.workName}${o.work.message ? `: ${o.work.message}` : ''}`,
      );
    case 'failed':
      return verdict(
        'False',
        'WorkApplyFailed',
        `ManifestWork ${o.cluster}/${o.workName} failed to apply on ${o.cluster}: ${o.work.message}`,
      );
  }

  const d = o.deployment;
  if (d.state === 'no-feedback') {
    return verdict(
      'Unknown',
      'AgentDeploymentNoFeedback',
      `ManifestWork ${o.cluster}/${o.workName} is applied; waiting for the status of Deployment ${o.agentDeployment} on ${o.cluster}`,
    );
  }
  // A Deployment's availability lags its agent: a restarted container renews the heartbeat before its
  // readiness probe passes and the work agent's feedback catches up, and a rollout keeps an old pod
  // serving. While the heartbeat is fresh the agent runs, so the Deployment's count does not decide.
  const heartbeatFresh = o.heartbeat.state === 'renewed' && o.heartbeat.ageSeconds <= o.heartbeatStaleSeconds;
  if (d.state === 'unavailable' && !heartbeatFresh) {
    // The agent mounts the hub kubeconfig Secret that registration produces: without a certificate it
    // never starts, and the cause is OCM's, not the pod's.
    if (o.credential?.status === 'False') {
      return verdict(
        'False',
        'AgentCredentialNotIssued',
        `agent Deployment ${o.agentDeployment} on ${o.cluster} waits for its hub credential, which OCM's registration agent did not obtain (ClusterCertificateRotated ${o.credential.reason ?? 'False'}: ${o.credential.message ?? 'no message'}); see the CSRs of the addon: kubectl get csr -l open-cluster-management.io/cluster-name=${o.cluster},open-cluster-management.io/addon-name=${o.addonName}`,
      );
    }
    return verdict(
      'False',
      'AgentDeploymentUnavailable',
      `agent Deployment ${o.agentDeployment} on ${o.cluster} has ${d.availableReplicas}/${d.replicas} available replicas${d.message ? ` (${d.message})` : ''}; check its pods there for an image pull error or a crash loop: kubectl -n ${o.agentDeployment.split('/')[0]} get pods`,
    );
  }

  const h = o.heartbeat;
  if (h.state === 'missing') {
    return verdict(
      'Unknown',
      'HeartbeatLeaseNotFound',
      `the agent's heartbeat Lease ${o.cluster}/${o.addonName} on the hub is missing; the addon manager recreates it`,
    );
  }
  if (h.state === 'never-renewed') {
    return verdict(
      'Unknown',
      'WaitingForFirstHeartbeat',
      `agent Deployment ${o.agentDeployment} on ${o.cluster} is available; waiting for its first heartbeat (Lease ${o.cluster}/${o.addonName} on the hub)`,
    );
  }
  if (h.ageSeconds > o.heartbeatStaleSeconds) {
    return verdict(
      'False',
      'HeartbeatStale',
      `the agent on ${o.cluster} last renewed its heartbeat ${Math.round(h.ageSeconds)}s ago (stale after ${o.heartbeatStaleSeconds}s): it is stopped, cannot reach the hub, or finds the managed kube-apiserver unhealthy; see its logs on ${o.cluster} (Deployment ${o.agentDeployment})`,
    );
  }

  // Heartbeats come through the hub, the tunnel through the aggregator to the gateway: an agent can do
  // the first and not the second (its attach refused, the gateway down), and then nobody reaches the cluster.
  // Not served at all: an agent alone is no way in. With a trust model (the chart's default) its agent writes
  // the credential Secret and attaches its tunnel within seconds of its first heartbeat; without one, an
  // admin's Secret is the only way in (docs/install.md, step 2).
  if (o.gateway.state === 'absent') {
    return verdict(
      'False',
      'ClusterNotServedByGateway',
      `the agent on ${o.cluster} is running, but the cluster gateway does not serve ${o.cluster} yet: it has no credential Secret for it and no tunnel of a Secret-less cluster. With TUNNEL_TRUST_MODEL HubCredential or NoCredential the agent provides them within seconds (if this stays, see its log on ${o.cluster}, Deployment ${o.agentDeployment}); with none, write the cluster's credential Secret (docs/install.md, step 2). kubectl get clustergateway ${o.cluster}`,
    );
  }
  if (o.gateway.state === 'tunnel-disconnected') {
    return verdict(
      'False',
      'TunnelDisconnected',
      `the agent on ${o.cluster} is running, but its tunnel to the cluster gateway is not connected, and the gateway reaches ${o.cluster} through it only (endpoint type ClusterProxy); see the agent's log on ${o.cluster} for "cannot attach the tunnel" (Deployment ${o.agentDeployment}) and kubectl get clustergateway ${o.cluster} -o wide`,
    );
  }
  if (o.gateway.state === 'unhealthy') {
    return verdict(
      'False',
      'ClusterUnreachableFromGateway',
      `the agent on ${o.cluster} is running, but the cluster gateway cannot reach the cluster: ${o.gateway.reason} (kubectl get clustergateway ${o.cluster})`,
    );
  }
  // The age as a bound, not a number: an exact age would change the message on
  // every renewal and turn each heartbeat into a status write.
  return verdict(
    'True',
    'AgentAvailable',
    `${o.addonName} add-on is available: the agent on ${o.cluster} renewed its heartbeat within the last ${o.heartbeatStaleSeconds}s`,
  );
}

function verdict(status: ConditionVerdict['status'], reason: string, message: string): ConditionVerdict {
  return { status, reason, message };
}
