/**
 * Clusters from OCM ManagedClusters (the original's --ocm-integration):
 * the address and CA come from spec.managedClusterClientConfigs[0], the
 * credentials still from the same-named Secret (merged in merge.ts), and
 * health from the ManagedClusterConditionAvailable condition.
 *
 * The ManagedCluster CRD may not be installed (plain KubeVela setups); the
 * informer then reports an empty, synced collection and keeps checking, so
 * the integration starts working as soon as OCM is installed.
 */
import type { KubeObject } from '../../../shared/kube/client.ts';
import { Informer, type InformerClient, type InformerOptions } from '../../../shared/kube/informer.ts';
import type { ClusterHealth } from './cluster.ts';
import { publicAnnotations } from './metadata.ts';
import { isPemCertificate, parseEndpointAddress } from './parse-util.ts';

export const managedClusterPath = '/apis/cluster.open-cluster-management.io/v1/managedclusters';
export const availableCondition = 'ManagedClusterConditionAvailable';

interface Condition {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
}

export interface ManagedClusterObject extends KubeObject {
  spec?: { managedClusterClientConfigs?: Array<{ url?: string; caBundle?: string }> };
  status?: { conditions?: Condition[] };
}

export interface ManagedClusterInfo {
  name: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  creationTimestamp: string;
  address?: string;
  addressProblem?: string;
  /** PEM, decoded from the base64 caBundle. */
  caBundle?: string;
  health: ClusterHealth;
}

export function parseManagedCluster(cluster: ManagedClusterObject): ManagedClusterInfo {
  const meta = cluster.metadata ?? {};
  const info: ManagedClusterInfo = {
    name: meta.name ?? '',
    labels: { ...(meta.labels ?? {}) },
    annotations: publicAnnotations(meta.annotations),
    creationTimestamp: typeof meta.creationTimestamp === 'string' ? meta.creationTimestamp : '',
    health: managedClusterHealth(cluster.status?.conditions),
  };
  const config = cluster.spec?.managedClusterClientConfigs?.[0];
  if (!config?.url) {
    info.addressProblem = 'ManagedCluster has no spec.managedClusterClientConfigs[0].url';
  } else {
    const address = parseEndpointAddress(
      config.url,
      'ManagedCluster spec.managedClusterClientConfigs[0].url',
    );
    if (address.ok) info.address = address.value;
    else info.addressProblem = address.problem;
  }
  if (config?.caBundle) {
    const pem = Buffer.from(config.caBundle, 'base64').toString('utf8');
    // An unusable CA is ignored here; the merge falls back to the Secret's CA or the system roots.
    if (isPemCertificate(pem)) info.caBundle = pem;
  }
  return info;
}

/** Available=True is healthy; anything else is not, with the condition's reason. */
export function managedClusterHealth(conditions: Condition[] | undefined): ClusterHealth {
  const available = conditions?.find((c) => c.type === availableCondition);
  if (!available) return { healthy: false, reason: `ManagedCluster has no ${availableCondition} condition` };
  if (available.status === 'True')
    return { healthy: true, ...(available.reason ? { reason: available.reason } : {}) };
  const reason = available.reason || `${availableCondition}=${available.status ?? 'Unknown'}`;
  return { healthy: false, reason: available.message ? `${reason}: ${available.message}` : reason };
}

/** Receives parsed ManagedClusters; the registry implements it. */
export interface ManagedClusterSink {
  setManagedCluster(name: string, info: ManagedClusterInfo | undefined): void;
}

export interface ManagedClusterSourceOptions {
  informer?: Partial<Omit<InformerOptions, 'path'>>;
}

export class ManagedClusterSource {
  readonly informer: Informer<ManagedClusterObject>;

  constructor(client: InformerClient, options: ManagedClusterSourceOptions, sink: ManagedClusterSink) {
    this.informer = new Informer<ManagedClusterObject>(client, {
      ...options.informer,
      path: managedClusterPath,
    });
    const update = (cluster: ManagedClusterObject) => {
      const info = parseManagedCluster(cluster);
      sink.setManagedCluster(info.name, info);
    };
    this.informer.on({
      onAdd: update,
      onUpdate: (_old, cluster) => update(cluster),
      onDelete: (cluster) => sink.setManagedCluster(cluster.metadata?.name ?? '', undefined),
    });
  }

  get hasSynced(): boolean {
    return this.informer.hasSynced;
  }

  /** True while the ManagedCluster CRD is not installed. */
  get absent(): boolean {
    return this.informer.absent;
  }

  start(): Promise<void> {
    return this.informer.start();
  }

  stop(): void {
    this.informer.stop();
  }
}
