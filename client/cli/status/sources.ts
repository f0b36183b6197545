/**
 * What `status` reads from the hub: six collections, each listed once for all clusters (never per cluster), all at
 * the same time. A collection that cannot be listed does not stop the others: its failure is kept, with the
 * permission that would have allowed it, and the columns it feeds say so.
 */
import { createHash } from 'node:crypto';
import type { KubeClient, KubeList, KubeObject } from '../../../shared/kube/client.ts';
import { StatusError } from '../../../shared/kube/status.ts';

export const addonName = 'cluster-gateway';
const addonNameLabel = 'open-cluster-management.io/addon-name';
/** The tunnel Leases the gateway replicas write (manager/gateway/tunnel/leases.ts). */
export const tunnelLeaseLabel = 'cluster.core.oam.dev/tunnel-lease';
export const tunnelLeaseClusterAnnotation = 'cluster.core.oam.dev/cluster-name';

/**
 * The tunnel Lease name of `cluster`, as manager/gateway/tunnel/leases.ts names it (that file is not in the
 * package the CLI ships in; its test checks the two agree): long names shortened with a hash.
 */
export function tunnelLeaseName(cluster: string): string {
  const name = `cluster-gateway-tunnel-${cluster}`;
  if (name.length <= 253) return name;
  const hash = createHash('sha256').update(cluster).digest('hex').slice(0, 16);
  return `${name.slice(0, 253 - 17).replace(/[-.]+$/, '')}-${hash}`;
}

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

export interface Named extends KubeObject {
  metadata: { name: string; namespace?: string; [key: string]: unknown };
}

export interface ManagedCluster extends Named {
  status?: { conditions?: Condition[] };
}

export interface ManagedClusterAddOn extends Named {
  status?: { conditions?: Condition[] };
}

export interface FeedbackValue {
  name: string;
  fieldValue: { type?: string; integer?: number; string?: string; boolean?: boolean };
}

export interface ManifestWork extends Named {
  spec?: {
    workload?: {
      manifests?: {
        kind?: string;
        metadata?: { name?: string; namespace?: string };
        spec?: { template?: { spec?: { containers?: { name?: string; image?: string }[] } } };
      }[];
    };
  };
  status?: {
    resourceStatus?: {
      manifests?: {
        resourceMeta: { kind?: string; resource?: string; name?: string; namespace?: string };
        statusFeedback?: { values?: FeedbackValue[] };
      }[];
    };
  };
}

export interface Lease extends Named {
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
  };
}

export interface ClusterGateway extends Named {
  spec?: { access?: { endpoint?: { type?: string } } };
  status?: {
    healthy?: boolean;
    healthyReason?: string;
    tunnel?: { connected?: boolean; connectedSince?: string; replica?: string };
  };
}

/** A collection that could not be listed, and what the caller needs to list it. */
export interface ListFailure {
  /** e.g. `managedclusteraddons.addon.open-cluster-management.io` */
  resource: string;
  /** One word for a table cell: forbidden, unauthorized, unavailable, notfound, timeout, error. */
  word: string;
  /** The permission that is missing, when that is the cause: `list managedclusteraddons.addon.open-cluster-management.io (all namespaces)`. */
  missingPermission?: string;
  message: string;
  /** The hub did not answer at all (connection refused, TLS, DNS): the command cannot run. */
  connection: boolean;
}

export type Listed<T> = { items: T[] } | { failure: ListFailure };

export interface StatusSources {
  managedClusters: Listed<ManagedCluster>;
  addons: Listed<ManagedClusterAddOn>;
  works: Listed<ManifestWork>;
  heartbeats: Listed<Lease>;
  tunnelLeases: Listed<Lease>;
  gateways: Listed<ClusterGateway>;
}

interface Collection {
  key: keyof StatusSources;
  group: string;
  resource: string;
  path: string;
}

const selector = (s: string) => `labelSelector=${encodeURIComponent(s)}`;

export const collections: Collection[] = [
  {
    key: 'managedClusters',
    group: 'cluster.open-cluster-management.io',
    resource: 'managedclusters',
    path: '/apis/cluster.open-cluster-management.io/v1/managedclusters',
  },
  {
    key: 'addons',
    group: 'addon.open-cluster-management.io',
    resource: 'managedclusteraddons',
    path: `/apis/addon.open-cluster-management.io/v1alpha1/managedclusteraddons?fieldSelector=${encodeURIComponent(`metadata.name=${addonName}`)}`,
  },
  {
    key: 'works',
    group: 'work.open-cluster-management.io',
    resource: 'manifestworks',
    path: `/apis/work.open-cluster-management.io/v1/manifestworks?${selector(`${addonNameLabel}=${addonName}`)}`,
  },
  {
    // The agent's heartbeat, in its cluster's namespace on the hub (manager/addon/availability).
    key: 'heartbeats',
    group: 'coordination.k8s.io',
    resource: 'leases',
    path: `/apis/coordination.k8s.io/v1/leases?${selector(`${addonNameLabel}=${addonName}`)}`,
  },
  {
    key: 'tunnelLeases',
    group: 'coordination.k8s.io',
    resource: 'leases',
    path: `/apis/coordination.k8s.io/v1/leases?${selector(`${tunnelLeaseLabel}=true`)}`,
  },
  {
    key: 'gateways',
    group: 'cluster.core.oam.dev',
    resource: 'clustergateways',
    path: '/apis/cluster.core.oam.dev/v1alpha1/clustergateways',
  },
];

/** Lists every collection at once; `onGateways` starts as soon as the ClusterGateways are in (the probes need only them). */
export async function listSources(
  client: Pick<KubeClient, 'list'>,
  onGateways?: (gateways: Listed<ClusterGateway>) => void,
): Promise<StatusSources> {
  const entries = await Promise.all(
    collections.map(async (c) => {
      const listed = await listOne(client, c);
      if (c.key === 'gateways') onGateways?.(listed as Listed<ClusterGateway>);
      return [c.key, listed] as const;
    }),
  );
  return Object.fromEntries(entries) as unknown as StatusSources;
}

async function listOne(client: Pick<KubeClient, 'list'>, c: Collection): Promise<Listed<KubeObject>> {
  try {
    const list: KubeList = await client.list(c.path);
    return { items: list.items ?? [] };
  } catch (err) {
    return { failure: listFailure(c, err) };
  }
}

export function listFailure(c: Pick<Collection, 'group' | 'resource'>, err: unknown): ListFailure {
  const resource = `${c.resource}.${c.group}`;
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof StatusError) {
    if (err.code === 403) {
      return {
        resource,
        word: 'forbidden',
        missingPermission: `list ${resource} in all namespaces`,
        message,
        connection: false,
      };
    }
    const word =
      err.code === 401
        ? 'unauthorized'
        : err.code === 404
          ? 'notfound'
          : err.code === 503
            ? 'unavailable'
            : `http-${err.code}`;
    return { resource, word, message, connection: false };
  }
  return { resource, word: 'unreachable', message, connection: true };
}

export function itemsOf<T>(listed: Listed<T>): T[] {
  return 'items' in listed ? listed.items : [];
}

export function failureOf<T>(listed: Listed<T>): ListFailure | undefined {
  return 'failure' in listed ? listed.failure : undefined;
}
