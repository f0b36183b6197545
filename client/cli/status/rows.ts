/**
 * One status row per cluster, as a pure function of the listed hub objects, the /healthz probes and the time: every
 * rule of what a column shows is here and unit-tested without a hub.
 *
 * Where each value comes from:
 * - addon Available: the ManagedClusterAddOn `cluster-gateway` in the cluster's namespace (the manager writes it);
 * - agent version: the hub writes the agent's Deployment into the ManifestWork, and the work agent feeds the
 *   Deployment's status back into it. The version is the image's tag there; it is what runs once the feedback says the
 *   rollout completed (observed generation caught up, every replica updated and available), else "rolling out";
 * - endpoint type and gateway health: the ClusterGateway (spec.access.endpoint.type, status.healthy/healthyReason);
 * - tunnel: the tunnel Lease the gateway replica holding the agent's tunnel renews (manager/gateway/tunnel/leases.ts):
 *   connected while held and renewed within its duration; the ClusterGateway's status.tunnel when the Leases could
 *   not be listed;
 * - heartbeat: the agent's Lease `cluster-gateway` in the cluster's namespace: age of its renewTime (the agent's
 *   clock against this machine's).
 */
import type { HealthzResult } from './healthz.ts';
import {
  type ClusterGateway,
  failureOf,
  itemsOf,
  type Lease,
  type ListFailure,
  type ManagedClusterAddOn,
  type ManifestWork,
  type StatusSources,
  tunnelLeaseClusterAnnotation,
  tunnelLeaseName,
} from './sources.ts';

const agentDeploymentName = 'cluster-gateway-agent';

/** A value, or why it is not known: the collection it comes from could not be listed. */
export type Known<T> = T | { unknown: string };

export interface AddonStatus {
  available: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

export interface AgentStatus {
  image: string;
  version: string;
  rolledOut: boolean;
  replicas?: number;
  availableReplicas?: number;
}

export interface TunnelStatus {
  connected: boolean;
  replica?: string;
  /** The Lease: held but not renewed within its duration. */
  stale?: boolean;
  since?: string;
  sinceSeconds?: number;
  renewTime?: string;
  renewAgeSeconds?: number;
  source: 'lease' | 'clustergateway';
}

export interface HeartbeatStatus {
  renewTime?: string;
  ageSeconds?: number;
  holder?: string;
  leaseDurationSeconds?: number;
}

export interface GatewayHealth {
  healthy?: boolean;
  reason?: string;
}

export interface StatusRow {
  name: string;
  managedCluster: Known<boolean>;
  /** null: no ManagedClusterAddOn (the addon is not enabled there). */
  addon: Known<AddonStatus | null>;
  /** null: no ManifestWork of the addon. */
  agent: Known<AgentStatus | null>;
  /** null: no ClusterGateway (the gateway has no way into the cluster). */
  endpointType: Known<string | null>;
  /** null: no tunnel Lease and no tunnel status. */
  tunnel: Known<TunnelStatus | null>;
  /** null: no heartbeat Lease. */
  heartbeat: Known<HeartbeatStatus | null>;
  gateway: Known<GatewayHealth | null>;
  /** null: not probed (no ClusterGateway). */
  healthz: Known<HealthzResult | null>;
}

export function isUnknown<T>(v: Known<T>): v is { unknown: string } {
  return typeof v === 'object' && v !== null && 'unknown' in v;
}

const seconds = (ms: number) => Math.max(0, Math.round(ms / 1000));
const ageOf = (time: string | undefined, now: number) => {
  const t = time ? Date.parse(time) : Number.NaN;
  return Number.isNaN(t) ? undefined : seconds(now - t);
};

export function statusRows(
  sources: StatusSources,
  healthz: Map<string, HealthzResult> | { unknown: string },
  now: number,
): StatusRow[] {
  const byNamespace = <T extends { metadata: { namespace?: string } }>(items: T[]) =>
    new Map(items.map((o) => [o.metadata.namespace ?? '', o]));
  const clusters = itemsOf(sources.managedClusters);
  const addons = byNamespace(itemsOf(sources.addons));
  const works = byNamespace(itemsOf(sources.works));
  const heartbeats = byNamespace(
    itemsOf(sources.heartbeats).filter((l) => l.metadata.name === 'cluster-gateway'),
  );
  const gateways = new Map(itemsOf(sources.gateways).map((g) => [g.metadata.name, g]));
  const tunnelLeases = new Map<string, Lease>();
  for (const lease of itemsOf(sources.tunnelLeases)) {
    const cluster = (lease.metadata.annotations as Record<string, string> | undefined)?.[
      tunnelLeaseClusterAnnotation
    ];
    // As the gateway does: a Lease counts for the cluster it names only under that cluster's Lease name.
    if (typeof cluster === 'string' && cluster && lease.metadata.name === tunnelLeaseName(cluster)) {
      tunnelLeases.set(cluster, lease);
    }
  }

  const names = new Set<string>([
    ...clusters.map((c) => c.metadata.name),
    ...gateways.keys(),
    ...addons.keys(),
  ]);
  const clusterNames = new Set(clusters.map((c) => c.metadata.name));
  const unknown = (f: ListFailure | undefined) => (f ? { unknown: f.word } : undefined);

  return [...names].sort().map((name): StatusRow => {
    const gateway = gateways.get(name);
    const gatewaysFailed = unknown(failureOf(sources.gateways));
    const probe = isUnknownMap(healthz) ? healthz : healthz.get(name);
    return {
      name,
      managedCluster: unknown(failureOf(sources.managedClusters)) ?? clusterNames.has(name),
      addon: unknown(failureOf(sources.addons)) ?? addonStatus(addons.get(name)),
      agent: unknown(failureOf(sources.works)) ?? agentStatus(works.get(name)),
      endpointType: gatewaysFailed ?? (gateway ? (gateway.spec?.access?.endpoint?.type ?? '') : null),
      tunnel: tunnelStatus(
        tunnelLeases.get(name),
        failureOf(sources.tunnelLeases),
        gateway,
        gatewaysFailed,
        now,
      ),
      heartbeat: unknown(failureOf(sources.heartbeats)) ?? heartbeatStatus(heartbeats.get(name), now),
      gateway:
        gatewaysFailed ??
        (gateway
          ? {
              ...(gateway.status?.healthy !== undefined ? { healthy: gateway.status.healthy } : {}),
              ...(gateway.status?.healthyReason ? { reason: gateway.status.healthyReason } : {}),
            }
          : null),
      healthz: probe ?? null,
    };
  });
}

function isUnknownMap(v: Map<string, HealthzResult> | { unknown: string }): v is { unknown: string } {
  return !(v instanceof Map);
}

function addonStatus(addon: ManagedClusterAddOn | undefined): AddonStatus | null {
  if (!addon) return null;
  const c = addon.status?.conditions?.find((x) => x.type === 'Available');
  if (!c) return { available: 'Unknown', reason: 'NoAvailableCondition' };
  return {
    available: c.status,
    ...(c.reason ? { reason: c.reason } : {}),
    ...(c.message ? { message: c.message } : {}),
    ...(c.lastTransitionTime ? { lastTransitionTime: c.lastTransitionTime } : {}),
  };
}

/** The tag of an image reference (`repo:tag`, `repo@sha256:…` shortened to 12 hex digits, or the whole reference). */
export function imageVersion(image: string): string {
  const at = image.indexOf('@');
  if (at >= 0) {
    const digest = image.slice(at + 1);
    const tagged = imageVersion(image.slice(0, at));
    const short = digest.replace(/^sha256:/, '').slice(0, 12);
    return tagged === image.slice(0, at) ? `@${short}` : tagged;
  }
  const slash = image.lastIndexOf('/');
  const colon = image.lastIndexOf(':');
  return colon > slash ? image.slice(colon + 1) : image;
}

export function agentStatus(work: ManifestWork | undefined): AgentStatus | null {
  if (!work) return null;
  const deployment = work.spec?.workload?.manifests?.find(
    (m) => m.kind === 'Deployment' && m.metadata?.name === agentDeploymentName,
  );
  const containers = deployment?.spec?.template?.spec?.containers ?? [];
  const image = (containers.find((c) => c.name === 'agent') ?? containers[0])?.image;
  if (!image) return null;
  const feedback = work.status?.resourceStatus?.manifests?.find(
    (m) =>
      (m.resourceMeta.kind === 'Deployment' || m.resourceMeta.resource === 'deployments') &&
      m.resourceMeta.name === agentDeploymentName,
  )?.statusFeedback?.values;
  const integer = (name: string) => feedback?.find((v) => v.name === name)?.fieldValue.integer;
  const replicas = integer('Replicas');
  const updated = integer('UpdatedReplicas');
  const available = integer('AvailableReplicas');
  const generation = integer('Generation');
  const observed = integer('ObservedGeneration');
  const rolledOut =
    replicas !== undefined &&
    available !== undefined &&
    replicas > 0 &&
    available >= replicas &&
    (updated === undefined || updated >= replicas) &&
    (generation === undefined || observed === undefined || observed >= generation);
  return {
    image,
    version: imageVersion(image),
    rolledOut,
    ...(replicas !== undefined ? { replicas } : {}),
    ...(available !== undefined ? { availableReplicas: available } : {}),
  };
}

function tunnelStatus(
  lease: Lease | undefined,
  leaseFailure: ListFailure | undefined,
  gateway: ClusterGateway | undefined,
  gatewaysFailed: { unknown: string } | undefined,
  now: number,
): Known<TunnelStatus | null> {
  if (!leaseFailure) {
    if (!lease) return null;
    const holder = lease.spec?.holderIdentity || undefined;
    const renewAge = ageOf(lease.spec?.renewTime, now);
    const duration = lease.spec?.leaseDurationSeconds ?? 0;
    // Judged by this machine's clock against the holder's: a little slack for the skew between them.
    const stale = holder !== undefined && (renewAge === undefined || renewAge > duration + 5);
    const since = gateway?.status?.tunnel?.connectedSince ?? lease.spec?.acquireTime;
    const sinceSeconds = holder ? ageOf(since, now) : undefined;
    return {
      connected: holder !== undefined && !stale,
      ...(holder ? { replica: holder } : {}),
      ...(stale ? { stale } : {}),
      ...(holder && since ? { since } : {}),
      ...(sinceSeconds !== undefined ? { sinceSeconds } : {}),
      ...(lease.spec?.renewTime ? { renewTime: lease.spec.renewTime } : {}),
      ...(renewAge !== undefined ? { renewAgeSeconds: renewAge } : {}),
      source: 'lease',
    };
  }
  if (gatewaysFailed) return { unknown: leaseFailure.word };
  const t = gateway?.status?.tunnel;
  if (!t) return null;
  const sinceSeconds = ageOf(t.connectedSince, now);
  return {
    connected: t.connected === true,
    ...(t.replica ? { replica: t.replica } : {}),
    ...(t.connectedSince ? { since: t.connectedSince } : {}),
    ...(sinceSeconds !== undefined ? { sinceSeconds } : {}),
    source: 'clustergateway',
  };
}

function heartbeatStatus(lease: Lease | undefined, now: number): HeartbeatStatus | null {
  if (!lease) return null;
  const ageSeconds = ageOf(lease.spec?.renewTime, now);
  return {
    ...(lease.spec?.renewTime ? { renewTime: lease.spec.renewTime } : {}),
    ...(ageSeconds !== undefined ? { ageSeconds } : {}),
    ...(lease.spec?.holderIdentity ? { holder: lease.spec.holderIdentity } : {}),
    ...(lease.spec?.leaseDurationSeconds ? { leaseDurationSeconds: lease.spec.leaseDurationSeconds } : {}),
  };
}
