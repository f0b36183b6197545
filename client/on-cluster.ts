/**
 * The cluster chosen per call, as the Go original's context-carried cluster name
 * (`multicluster.WithMultiClusterContext(ctx, "cluster2")` read by its round tripper): one typed API client
 * made from the hub's KubeConfig, and each call says where it goes:
 *
 *   const core = hub.makeApiClient(CoreV1Api);
 *   await core.listNamespacedPod({ namespace: 'default' }, onCluster('cluster2'));
 *
 * It is per-call ConfigurationOptions carrying one middleware that rewrites the request's URL to the
 * cluster's proxy path after client-node built it (with the hub's server, credentials and TLS dispatcher,
 * which are exactly what the proxy needs: same host, the caller's identity).
 */
import {
  type ConfigurationOptions,
  type KubeConfig,
  Observable,
  type ObservableMiddleware,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';
import { assertClusterName, rewriteToCluster } from './cluster-path.ts';

export interface OnClusterOptions {
  /**
   * The hub KubeConfig (or its server URL) the API was made from. Needed only when the hub's server URL has a
   * path of its own (a reverse proxy in front of the hub) that itself starts like a Kubernetes API path;
   * without it, the prefix is whatever precedes the API path (/api, /apis, /version, ...).
   */
  hub?: KubeConfig | string;
  /** Options of the call to merge with (its middleware runs before the rewrite). */
  options?: ConfigurationOptions;
}

/** A middleware that sends each request it sees to `cluster` through the hub's ClusterGateway proxy. */
export function clusterMiddleware(cluster: string, hub?: KubeConfig | string): ObservableMiddleware {
  assertClusterName(cluster);
  const hubServer = typeof hub === 'string' ? hub : hub?.getCurrentCluster()?.server;
  if (hub !== undefined && !hubServer)
    throw new Error('onCluster: the hub KubeConfig has no current cluster');
  return {
    pre(context: RequestContext) {
      context.setUrl(rewriteToCluster(context.getUrl(), cluster, hubServer));
      // The object APIs (client-node's default exports) run Observable middleware: its stub Observable
      // wraps a promise, and is exported by client-node so the exact class is used.
      return new Observable(Promise.resolve(context));
    },
    post(context: ResponseContext) {
      return new Observable(Promise.resolve(context));
    },
  };
}

/**
 * Per-call options that send that one call to `cluster`:
 * `api.readNamespacedPod({ name, namespace }, onCluster('cluster2'))`.
 */
export function onCluster(cluster: string, opts: OnClusterOptions = {}): ConfigurationOptions {
  const earlier = opts.options?.middleware ?? [];
  return {
    ...opts.options,
    middleware: [...earlier, clusterMiddleware(cluster, opts.hub)],
    // 'append': the API's own middleware (client-node's User-Agent) still runs; the default 'replace' would
    // drop it. The rewrite runs last, after anything else that looked at the hub URL.
    middlewareMergeStrategy: 'append',
  };
}
