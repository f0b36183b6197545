/** Shared test fixtures: Secrets and ManagedClusters shaped like the real objects. */
import type { ManagedClusterObject } from './managedcluster-source.ts';
import type { SecretObject } from './secret-source.ts';

export const caPem = '-----BEGIN CERTIFICATE-----\nMIIBfakeCA\n-----END CERTIFICATE-----\n';
export const certPem = '-----BEGIN CERTIFICATE-----\nMIIBfakeLeaf\n-----END CERTIFICATE-----\n';
export const keyPem = '-----BEGIN EC PRIVATE KEY-----\nMHcfakeKey\n-----END EC PRIVATE KEY-----\n';

const b64 = (text: string) => Buffer.from(text).toString('base64');

export function secret(
  name: string,
  data: Record<string, string>,
  labels: Record<string, string> = { 'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken' },
  annotations: Record<string, string> = {},
): SecretObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name,
      namespace: 'vela-system',
      resourceVersion: '1',
      creationTimestamp: '2026-01-02T03:04:05Z',
      labels,
      annotations,
    },
    type: 'Opaque',
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)])),
  };
}

export function managedCluster(
  name: string,
  options: {
    url?: string;
    ca?: string;
    available?: 'True' | 'False' | 'Unknown';
    labels?: Record<string, string>;
    /** Default true: an accepted, joined cluster, as most tests want. */
    hubAcceptsClient?: boolean;
    /** ManagedClusterJoined status; default 'True', 'missing' for no condition. */
    joined?: 'True' | 'False' | 'Unknown' | 'missing';
  } = {},
): ManagedClusterObject {
  const joined = options.joined ?? 'True';
  return {
    apiVersion: 'cluster.open-cluster-management.io/v1',
    kind: 'ManagedCluster',
    metadata: {
      name,
      resourceVersion: '1',
      creationTimestamp: '2025-12-01T00:00:00Z',
      labels: options.labels ?? {},
    },
    spec: {
      hubAcceptsClient: options.hubAcceptsClient ?? true,
      managedClusterClientConfigs: options.url
        ? [{ url: options.url, ...(options.ca ? { caBundle: b64(options.ca) } : {}) }]
        : [],
    },
    status: {
      conditions: [
        ...(joined === 'missing'
          ? []
          : [{ type: 'ManagedClusterJoined', status: joined, reason: 'ManagedClusterJoined', message: '' }]),
        ...(options.available
          ? [
              {
                type: 'ManagedClusterConditionAvailable',
                status: options.available,
                reason:
                  options.available === 'True'
                    ? 'ManagedClusterAvailable'
                    : 'ManagedClusterLeaseUpdateStopped',
                message:
                  options.available === 'True' ? 'ok' : 'Registration agent stopped updating its lease.',
              },
            ]
          : []),
      ],
    },
  };
}
