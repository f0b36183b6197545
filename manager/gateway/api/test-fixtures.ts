/** ClusterTargets for API tests, including secret material that must never be rendered. */
import type { ClusterEvent, ClusterTarget } from '../clusters/cluster.ts';
import { caPem, certPem, keyPem } from '../clusters/test-fixtures.ts';

export { caPem, certPem, keyPem };
export const token = 'eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXRva2Vu.c2ln';

export function target(name: string, overrides: Partial<ClusterTarget> = {}): ClusterTarget {
  return {
    name,
    labels: { 'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken' },
    annotations: {},
    creationTimestamp: '2026-01-01T00:00:00Z',
    resourceVersion: '100',
    endpoint: { type: 'Const', address: `https://${name}:6443`, caBundle: caPem, insecure: false },
    credential: { type: 'ServiceAccountToken', token },
    health: { healthy: true },
    connectionKey: 'k',
    ...overrides,
  };
}

/** A ClusterDirectory over a fixed set of clusters, with manual events. */
export class FakeDirectory {
  clusters = new Map<string, ClusterTarget>();
  version = '100';
  synced = true;
  readonly listeners = new Set<(event: ClusterEvent) => void>();

  constructor(clusters: ClusterTarget[] = []) {
    for (const c of clusters) this.clusters.set(c.name, c);
  }

  get(name: string) {
    return this.clusters.get(name);
  }

  list() {
    return [...this.clusters.values()];
  }

  subscribe(listener: (event: ClusterEvent) => void) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(type: ClusterEvent['type'], cluster: ClusterTarget) {
    this.version = cluster.resourceVersion;
    if (type === 'DELETED') this.clusters.delete(cluster.name);
    else this.clusters.set(cluster.name, cluster);
    for (const listener of this.listeners) listener({ type, cluster });
  }
}
