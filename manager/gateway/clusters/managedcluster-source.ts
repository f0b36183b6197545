/**
 * Clusters from OCM ManagedClusters (the original's --ocm-integration):
 * the address and CA come from spec.managedClusterClientConfigs[0], the
 * credentials still from the same-named Secret (merged in merge.ts), and
 * health from the ManagedClusterConditionAvailable condition.
 *
 * A ManagedCluster's spec is not the hub admin's word: the bootstrap
 * identity handed to every joining cluster may create one under any name,
 * and a spoke's registration agent (or anyone with `update managedclusters`)
 * may rewrite its client configs. Unlike the original, which took the URL
 * of any ManagedCluster, it is only *trusted* once the hub accepted it
 * (`spec.hubAcceptsClient`, which OCM guards with the managedclusters/accept
 * permission) and it joined (`ManagedClusterJoined=True`, set by the hub's
 * registration controller after signing the agent's CSR), and its URL is
 * used only with https: the gateway sends the cluster's credential there.
 * An untrusted ManagedCluster contributes nothing (no address, CA, labels
 * or health); `distrust` says why, for the cluster's problem.
 *
 * The ManagedCluster CRD may not be installed (plain KubeVela setups); the
 * informer then reports an empty, synced collection and keeps checking, so
 * the integration starts working as soon as OCM is installed.
 */
import type { KubeObject } from '../../../shared/kube/client.ts';
import { Informer, type InformerClient, type InformerOptions } from '../../../shared/kube/informer.ts';
import type { ClusterHealth } from './cluster.ts';
import { parseResourceVersion, probeFromAnnotations } from './health-precedence.ts';
import { publicAnnotations } from './metadata.ts';
import { isPemCertificate, parseEndpointAddress } from './parse-util.ts';

export const managedClusterPath = '/apis/cluster.open-cluster-management.io/v1/managedclusters';
export const availableCondition = 'ManagedClusterConditionAvailable';
export const joinedCondition = 'ManagedClusterJoined';

interface Condition {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
}

export interface ManagedClusterObject extends KubeObject {
  spec?: {
    hubAcceptsClient?: boolean;
    managedClusterClientConfigs?: Array<{ url?: string; caBundle?: string }>;
  };
  status?: { conditions?: Condition[] };
}

export interface ManagedClusterInfo {
  name: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  creationTimestamp: string;
  /** Why this ManagedCluster is not trusted (not accepted or not joined); then nothing below is used. */
  distrust?: string;
  /** Set only for a trusted ManagedCluster whose URL is https. */
  address?: string;
  addressProblem?: string;
  /** PEM, decoded from the base64 caBundle. */
  caBundle?: string;
  health: ClusterHealth;
  /** The prober's verdict recorded on the ManagedCluster (a cluster without a credential Secret). */
  probe?: ClusterHealth;
  /** The ManagedCluster's resourceVersion (clusters/registry.ts derives the ClusterGateway's from it). */
  resourceVersion: number;
}

export function parseManagedCluster(cluster: ManagedClusterObject): ManagedClusterInfo {
  const meta = cluster.metadata ?? {};
  const info: ManagedClusterInfo = {
    name: meta.name ?? '',
    labels: { ...(meta.labels ?? {}) },
    annotations: publicAnnotations(meta.annotations),
    creationTimestamp: typeof meta.creationTimestamp === 'string' ? meta.creationTimestamp : '',
    health: managedClusterHealth(cluster.status?.conditions),
    resourceVersion: parseResourceVersion(meta.resourceVersion),
  };
  const probe = probeFromAnnotations(meta.annotations);
  if (probe) info.probe = probe;
  const distrust = managedClusterDistrust(cluster);
  if (distrust) {
    info.distrust = distrust;
    return info;
  }
  const config = cluster.spec?.managedClusterClientConfigs?.[0];
  const source = 'ManagedCluster spec.managedClusterClientConfigs[0].url';
  if (!config?.url) {
    info.addressProblem = 'ManagedCluster has no spec.managedClusterClientConfigs[0].url';
  } else {
    const address = parseEndpointAddress(config.url, source);
    if (!address.ok) info.addressProblem = address.problem;
    else if (!address.value.toLowerCase().startsWith('https://')) {
      // Plain http would hand the cluster's bearer token to whoever is on the path.
      info.addressProblem = `${source} ${JSON.stringify(config.url.trim())} is not used: a ManagedCluster's URL must be https://`;
    } else info.address = address.value;
  }
  if (info.address && config?.caBundle) {
    const pem = Buffer.from(config.caBundle, 'base64').toString('utf8');
    // An unusable CA is ignored here; the merge falls back to the Secret's CA or the system roots.
    if (isPemCertificate(pem)) info.caBundle = pem;
  }
  return info;
}

/**
 * undefined when the hub accepted the ManagedCluster and it joined;
 * otherwise why its spec must not be believed.
 */
export function managedClusterDistrust(cluster: ManagedClusterObject): string | undefined {
  if (cluster.spec?.hubAcceptsClient !== true) {
    return 'ManagedCluster is not accepted by the hub (spec.hubAcceptsClient is not true), so its URL and CA are ignored';
  }
  const joined = cluster.status?.conditions?.find((c) => c.type === joinedCondition);
  if (joined?.status !== 'True') {
    return `ManagedCluster has not joined (${joinedCondition} is ${joined?.status ?? 'missing'}), so its URL and CA are ignored`;
  }
  return undefined;
}

/** The Available condition of a trusted ManagedCluster; undefined for an untrusted one. */
export function trustedManagedClusterHealth(cluster: ManagedClusterObject): ClusterHealth | undefined {
  return managedClusterDistrust(cluster) ? undefined : managedClusterHealth(cluster.status?.conditions);
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
  /** `version` as for SecretSink.setSecret. */
  setManagedCluster(name: string, info: ManagedClusterInfo | undefined, version: number): void;
  advance?(resourceVersion: string): void;
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
    const version = () => parseResourceVersion(this.informer.resourceVersion);
    const update = (cluster: ManagedClusterObject) => {
      const info = parseManagedCluster(cluster);
      sink.setManagedCluster(info.name, info, version());
    };
    this.informer.on({
      onAdd: update,
      onUpdate: (_old, cluster) => update(cluster),
      onDelete: (cluster) => sink.setManagedCluster(cluster.metadata?.name ?? '', undefined, version()),
      onSync: (resourceVersion) => sink.advance?.(resourceVersion),
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
