/** The API this gateway serves, as registered by the Go original (pkg/config). */
export const group = 'cluster.core.oam.dev';
export const version = 'v1alpha1';
export const groupVersion = `${group}/${version}`;
export const resource = 'clustergateways';
export const singular = 'clustergateway';
export const kind = 'ClusterGateway';
export const listKind = 'ClusterGatewayList';
/** The proxy connecter's options type: its kind in discovery, as the Go apiserver reports it. */
export const proxyOptionsKind = 'ClusterGatewayProxyOptions';
