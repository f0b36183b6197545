/**
 * The gateway's view of one managed cluster: where its kube-apiserver is and
 * how to authenticate to it. Built from informer caches (Secrets,
 * ManagedClusters, agent tunnels), never from a hub API call per request.
 *
 * Credentials live only here and in the proxy's connection pools: API
 * responses are rendered from `ClusterTarget` by api/clustergateway.ts,
 * which omits every secret field.
 */
import type { Duplex } from 'node:stream';
import type { TunnelStreamKind } from '../../../shared/tunnel/protocol.ts';

export type EndpointType = 'Const' | 'ClusterProxy';

export interface ConstEndpoint {
  type: 'Const';
  /** The managed kube-apiserver, possibly with a sub-path (https://host:6443/prefix). */
  address: string;
  /** PEM CA bundle; absent means the system trust store. */
  caBundle?: string;
  /** Skip TLS verification: only with --insecure-skip-tls-verify-when-no-ca (see merge.ts). */
  insecure: boolean;
  /** Optional egress proxy (http://, https:// or socks5://). */
  proxyUrl?: string;
}

/**
 * The cluster is reached through its agent's reverse tunnel (or, for
 * compatibility with the Go original's ClusterProxy type, through a
 * tunnel provider). `dial` opens one raw byte stream to the managed
 * kube-apiserver; TLS to that apiserver runs end to end inside it.
 */
export interface TunnelEndpoint {
  type: 'ClusterProxy';
  /** Server name and CA for the TLS session run inside the tunnel. */
  serverName: string;
  caBundle?: string;
  insecure: boolean;
  /**
   * hub-credential (default): the gateway runs TLS to the managed apiserver inside each stream with
   * the cluster's credential. no-credential: the hub holds none; each stream is plain HTTP served by
   * the agent, which adds its own credential and impersonates the caller (the gateway always sends
   * the caller's identity). merge.ts decides from the cluster's Secret.
   */
  trustModel?: TrustModel;
  dial(kind?: TunnelStreamKind): Promise<Duplex>;
}

export type TrustModel = 'hub-credential' | 'no-credential';

/** The state of a cluster's agent tunnel, as `kubectl get clustergateways -o wide` shows it. */
export interface TunnelState {
  connected: boolean;
  /** RFC 3339, second precision: when the current tunnel connected. */
  since?: string;
  /** The gateway replica holding it (its pod name). */
  replica?: string;
}

export type Endpoint = ConstEndpoint | TunnelEndpoint;

export type Credential =
  | { type: 'ServiceAccountToken'; token: string }
  | { type: 'X509Certificate'; certificate: string; privateKey: string }
  // Filled in by the exec plugin's result (exec-refresher.ts): a token or a client certificate.
  | { type: 'Dynamic'; token?: string; certificate?: string; privateKey?: string };

export interface ClusterHealth {
  healthy: boolean;
  reason?: string;
  /** Not probed yet (clusters/health-precedence.ts): shown as not healthy, but not rejected by --reject-unhealthy. */
  unknown?: boolean;
}

/**
 * One reason the gateway knows a cluster to be offline (merge.ts), answered at once with 503 and a
 * ClusterOffline cause (routes.ts, shared/kube/cluster-offline.ts):
 * - tunnel: its endpoint is its agent's tunnel (ClusterProxy) and none is connected: nothing to try,
 *   always answered at once;
 * - mark: an operator marked it unhealthy through the health subresource;
 * - probe: the gateway's prober's last probe of it failed (never a cluster not probed yet).
 * The last two are answered at once only with --reject-unhealthy (the chart's default).
 */
export interface OfflineCause {
  kind: 'tunnel' | 'mark' | 'probe';
  /** The cause in words, as the caller reads it in details.causes[].message. */
  message: string;
}

export interface ClusterTarget {
  name: string;
  /** Labels and annotations copied from the source object (Secret or ManagedCluster). */
  labels: Record<string, string>;
  annotations: Record<string, string>;
  creationTimestamp: string;
  /** Changes whenever anything observable about the cluster changes (used as resourceVersion). */
  resourceVersion: string;
  endpoint?: Endpoint;
  credential?: Credential;
  /** Why the cluster cannot be reached, when endpoint or credential is missing. */
  problem?: string;
  health: ClusterHealth;
  /** Why the gateway knows it to be offline, most decisive first; absent when it does not. */
  offline?: OfflineCause[];
  /** Set for clusters that use or have an agent tunnel (ClusterProxy, or an attached agent). */
  tunnel?: TunnelState;
  /**
   * A digest of endpoint + credential. Connection pools are keyed by it, so a
   * rotated token or certificate takes effect on the next request.
   */
  connectionKey: string;
}

export type ClusterEvent = {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  cluster: ClusterTarget;
  /**
   * A change only this replica sees (a new route or credential, same resourceVersion): for the
   * proxy and the prober, never shown to the API's watchers.
   */
  internal?: boolean;
};

/** Read side of the cluster registry, as the API handlers and the proxy see it. */
export interface ClusterDirectory {
  get(name: string): ClusterTarget | undefined;
  list(): ClusterTarget[];
  /** The list resourceVersion: the newest hub revision this replica has applied (clusters/registry.ts). */
  readonly version: string;
  /** Subscribe to changes; returns an unsubscribe function. */
  subscribe(listener: (event: ClusterEvent) => void): () => void;
  /** True once every source has completed its initial list. */
  readonly synced: boolean;
}

/** What resuming a watch from a version finds. */
export type HistoryAnswer =
  | { kind: 'events'; events: ClusterEvent[] }
  /** Older than the history: the client must relist (410). */
  | { kind: 'expired' }
  /** Newer than anything this replica has applied: wait for it (waitForVersion). */
  | { kind: 'ahead' };

/** A directory that keeps a history of its events and can wait for a version (ClusterRegistry). */
export interface VersionedDirectory extends ClusterDirectory {
  eventsSince(resourceVersion: string): HistoryAnswer;
  /** Resolves true once the list version reaches `version`, false after `timeoutMs`. */
  waitForVersion(version: number, timeoutMs: number): Promise<boolean>;
}
