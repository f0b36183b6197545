/**
 * The cluster-gateway client library: use the gateway from TypeScript programs
 * built on @kubernetes/client-node (an optional peer dependency: only this
 * entry point loads it). docs/client.md shows how.
 */
export { type BackoffPolicy, backoffDelay, defaultBackoff } from './backoff.ts';
export {
  ClusterInformer,
  type ClusterInformerOptions,
  type ConnectHandler,
  clusterInformer,
  type ErrorHandler,
  type InformerEvent,
  type InformerHandlers,
  type ObjectHandler,
  type WatchLike,
} from './cluster-informer.ts';
export {
  assertClusterName,
  clusterGatewayGroupVersion,
  clusterProxyPath,
  clusterServer,
  rewriteToCluster,
} from './cluster-path.ts';
export { type ClusterObject, FanInInformer, fanInInformer, type MemberInformer } from './fan-in-informer.ts';
export { clusterOfflineCause, clusterOfflineReason, isClusterOffline } from './offline.ts';
export { clusterMiddleware, type OnClusterOptions, onCluster } from './on-cluster.ts';
export { kubeConfigForCluster, proxiedEntryName } from './proxied-kubeconfig.ts';
export { diffRelist, objectKey, type RelistDiff } from './relist-diff.ts';
