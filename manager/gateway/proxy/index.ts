/** Public surface of the proxy path. */
export type { ProxyAccess, ProxyEvent, ProxyLogger } from '../../../shared/forward/context.ts';
export { writeStatusToSocket } from '../../../shared/forward/reply.ts';
export type { ClusterPools } from './cluster-pools.ts';
export { createClusterPools } from './cluster-pools.ts';
export type { ClusterProxy, ClusterProxyOptions, ClusterProxyStats } from './cluster-proxy.ts';
export { createClusterProxy } from './cluster-proxy.ts';
export type { ClusterGatewayPath, ProxyPath } from './path.ts';
export { CLUSTER_GATEWAYS_PREFIX, matchClusterGatewayPath, parseProxyPath } from './path.ts';
