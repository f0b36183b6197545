/**
 * The connection pools (shared/transport) as the gateway uses them: by ClusterTarget. Each cluster's
 * ClusterTarget is mapped to a TransportTarget once per connectionKey (a new endpoint or credential
 * is a new key), not per request; the proxy and the health prober share one ClusterPools (one
 * connection budget).
 */
import { createConnectionPools, type PoolOptions, type PoolStats } from '../../../shared/transport/pool.ts';
import type { TransportCredential, TransportTarget } from '../../../shared/transport/target.ts';
import type { Upstream } from '../../../shared/transport/upstream.ts';
import type { ClusterTarget, Credential } from '../clusters/cluster.ts';

export interface ClusterPools {
  /** The pool for a cluster, or a problem string when its endpoint cannot be used. */
  get(target: ClusterTarget): Upstream | string;
  /** Retires a cluster's pool (cluster deleted). */
  forget(cluster: string): void;
  stats(): PoolStats;
  /** Destroys every socket of every pool. */
  close(): void;
}

export function createClusterPools(options: PoolOptions = {}): ClusterPools {
  const pools = createConnectionPools(options);
  /** Each cluster's transport target, for the connectionKey it was built from. */
  const targets = new Map<string, { key: string; transport: TransportTarget }>();
  return {
    get(target) {
      const mapped = targets.get(target.name);
      if (mapped?.key === target.connectionKey) {
        // The latest dial(), as the pool takes it (shared/transport/pool.ts): no allocation here.
        const { endpoint } = mapped.transport;
        if (endpoint.kind === 'tunnel' && target.endpoint?.type === 'ClusterProxy')
          endpoint.dial = target.endpoint.dial;
        return pools.get(mapped.transport);
      }
      const transport = transportTargetOf(target);
      // Not kept: a cluster without an endpoint has one key whatever its problem says.
      if (typeof transport === 'string') return transport;
      targets.set(target.name, { key: target.connectionKey, transport });
      return pools.get(transport);
    },
    forget(cluster) {
      targets.delete(cluster);
      pools.forget(cluster);
    },
    stats: () => pools.stats(),
    close() {
      targets.clear();
      pools.close();
    },
  };
}

/** How the connection layer reaches a cluster, or why it cannot. */
export function transportTargetOf(target: ClusterTarget): TransportTarget | string {
  const { endpoint } = target;
  if (!endpoint) return target.problem ?? `cluster "${target.name}" has no endpoint`;
  const credential = transportCredentialOf(target.credential);
  const common = {
    name: target.name,
    key: target.connectionKey,
    ...(credential ? { credential } : {}),
  };
  const trust = {
    ...(endpoint.caBundle ? { caBundle: endpoint.caBundle } : {}),
    insecure: endpoint.insecure,
  };
  if (endpoint.type === 'ClusterProxy') {
    return {
      ...common,
      endpoint: {
        kind: 'tunnel',
        serverName: endpoint.serverName,
        ...trust,
        // no-credential: the agent serves plain HTTP on `impersonate` streams and adds its own credential.
        stream: endpoint.trustModel === 'no-credential' ? 'impersonate' : 'relay',
        dial: endpoint.dial,
      },
    };
  }
  return {
    ...common,
    endpoint: endpoint.proxyUrl
      ? { kind: 'egress', url: endpoint.address, proxyUrl: endpoint.proxyUrl, ...trust }
      : { kind: 'direct', url: endpoint.address, ...trust },
  };
}

// A Dynamic credential may also be a client certificate (an exec plugin's clientCertificateData).
function transportCredentialOf(credential: Credential | undefined): TransportCredential | undefined {
  switch (credential?.type) {
    case undefined:
      return undefined;
    case 'ServiceAccountToken':
      return { token: credential.token };
    case 'X509Certificate':
      return { certificate: credential.certificate, privateKey: credential.privateKey };
    case 'Dynamic':
      return {
        token: credential.token,
        certificate: credential.certificate,
        privateKey: credential.privateKey,
      };
  }
}
