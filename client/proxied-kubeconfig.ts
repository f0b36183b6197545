/**
 * A KubeConfig for one managed cluster, made from the hub's: the same user (so the hub authenticates and
 * authorizes every request as the caller: `get`/`list`/... on `clustergateways/proxy`), the same CA and TLS
 * settings, and a server URL moved to the cluster's ClusterGateway proxy.
 *
 * Why move the server and nothing else: every part of @kubernetes/client-node builds its URLs as
 * `cluster.server + path` (makeApiClient's ServerConfiguration, Watch, Log, the WebSocketHandler behind
 * Exec, Attach and PortForward, and makeInformer through Watch), so one changed string sends all of them
 * through the gateway, including the upgrades (the gateway forwards them), with no wrapper to keep in step
 * with client-node's API.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { assertClusterName, clusterServer } from './cluster-path.ts';

/** Names of the entries the proxied KubeConfig adds; exportConfig() shows them. */
export function proxiedEntryName(cluster: string, hubContext: string): string {
  return `${hubContext}/clustergateways/${cluster}`;
}

/**
 * A KubeConfig whose current context reaches `cluster` through the hub's ClusterGateway proxy.
 * `hub` is not modified; its other contexts are kept (switching to one leaves the gateway).
 */
export function kubeConfigForCluster(hub: KubeConfig, cluster: string): KubeConfig {
  assertClusterName(cluster);
  const context = hub.getContextObject(hub.getCurrentContext());
  const hubCluster = hub.getCurrentCluster();
  if (!context || !hubCluster) {
    throw new Error('the hub KubeConfig has no current context with a cluster: load one first');
  }
  const name = proxiedEntryName(cluster, context.name);
  const proxied = new KubeConfig();
  // The hub's clusters, users and contexts as they are (exec and auth-provider users keep working, and
  // their token caches stay in the user objects the hub shares), plus one cluster and one context.
  proxied.loadFromOptions({
    clusters: [
      ...hub.getClusters().filter((c) => c.name !== name),
      { ...hubCluster, name, server: clusterServer(hubCluster.server, cluster) },
    ],
    users: hub.getUsers(),
    // No namespace: the hub context's default namespace means nothing on the managed cluster.
    contexts: [
      ...hub.getContexts().filter((c) => c.name !== name),
      { name, cluster: name, user: context.user },
    ],
    currentContext: name,
  });
  // Authenticators the program registered on the hub (addAuthenticator) apply here too; the field is
  // private in client-node's types but is the only place they live.
  for (const authenticator of (hub as unknown as { custom_authenticators?: [] }).custom_authenticators ??
    []) {
    proxied.addAuthenticator(authenticator);
  }
  return proxied;
}
