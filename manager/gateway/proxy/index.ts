/** Public surface of the proxy path. */
export type { ClusterProxy, ClusterProxyOptions, ClusterProxyStats } from './cluster-proxy.ts';
export { createClusterProxy } from './cluster-proxy.ts';
export type { ProxyAccess, ProxyEvent, ProxyLogger } from './context.ts';
export type { ClusterGatewayPath, ProxyPath } from './path.ts';
export {
  CLUSTER_GATEWAYS_PREFIX,
  isStreamingRequest,
  matchClusterGatewayPath,
  parseProxyPath,
} from './path.ts';
export { writeStatusToSocket } from './reply.ts';
