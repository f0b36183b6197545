/**
 * Where a request for a managed cluster goes on the hub: the `proxy` subresource of its ClusterGateway,
 * `/apis/cluster.core.oam.dev/v1alpha1/clustergateways/<cluster>/proxy` followed by the path the request
 * would have had on the cluster itself. Pure string work, shared by the proxied KubeConfig (which moves a
 * kubeconfig's `server`) and by `onCluster` (which moves one request's URL, as the Go original's round
 * tripper does with the cluster name it reads from the request's context).
 */

export const clusterGatewayGroupVersion = 'cluster.core.oam.dev/v1alpha1';
const gatewaysPath = `/apis/${clusterGatewayGroupVersion}/clustergateways`;

// A ClusterGateway is named after a ManagedCluster or a credential Secret: both are DNS-1123 subdomains
// (lowercase alphanumerics, '-' and '.', at most 253 characters). Checking here gives a clear error at the
// call site instead of a 404 from the hub for a name that can never exist.
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Throws a clear error unless `cluster` can be the name of a ClusterGateway. */
export function assertClusterName(cluster: unknown): asserts cluster is string {
  if (typeof cluster !== 'string' || cluster === '') {
    throw new TypeError(`a cluster name must be a non-empty string, not ${JSON.stringify(cluster)}`);
  }
  if (cluster.length > 253 || !dns1123Subdomain.test(cluster)) {
    throw new TypeError(
      `"${cluster}" is not a cluster name: ClusterGateway names are DNS-1123 subdomains (lowercase letters, digits, '-' and '.', at most 253 characters)`,
    );
  }
}

/**
 * The proxy path of `cluster` on the hub, without a trailing slash. Dots are legal inside a path segment
 * (only "." and ".." alone are special, and the name check rules those out); encodeURIComponent is still
 * applied so the segment stays one segment whatever the name check lets through in the future.
 */
export function clusterProxyPath(cluster: string): string {
  assertClusterName(cluster);
  return `${gatewaysPath}/${encodeURIComponent(cluster)}/proxy`;
}

/** `server` (a hub kubeconfig's server URL, possibly with a path prefix) moved to `cluster`'s proxy. */
export function clusterServer(hubServer: string, cluster: string): string {
  const url = new URL(hubServer);
  if (url.search || url.hash) throw new TypeError(`a server URL has no query or fragment: ${hubServer}`);
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}${clusterProxyPath(cluster)}`;
}

// The proxy prefix of a URL that already goes to some cluster; the cluster's segment is replaced, so that
// choosing a cluster per call also works on an API made from a proxied KubeConfig (the per-call choice wins,
// as the context-carried name does over the transport's in the original).
const existingProxy = /\/apis\/cluster\.core\.oam\.dev\/v1alpha1\/clustergateways\/[^/]+\/proxy(?=\/|$)/;

// The first segments of every path a Kubernetes API server serves (the generated APIs use the first five).
// A hub server URL with a path prefix (a reverse proxy in front of the hub) keeps its prefix: only what
// starts at one of these moves under the cluster's proxy.
const apiRoot = /\/(api|apis|version|logs|\.well-known|openid|openapi|healthz|livez|readyz|metrics)(?=\/|$)/;

/**
 * `requestUrl` (a URL the client built against the hub) sent to `cluster` instead. With `hubServer`, the
 * prefix is exactly that server's path; without, it is whatever precedes the API path (see apiRoot).
 */
export function rewriteToCluster(requestUrl: string, cluster: string, hubServer?: string): string {
  const proxy = clusterProxyPath(cluster);
  const url = new URL(requestUrl);
  const path = url.pathname;
  let prefix: string;
  let rest: string;
  const proxied = existingProxy.exec(path);
  if (hubServer !== undefined) {
    prefix = new URL(hubServer).pathname.replace(/\/+$/, '');
    if (!path.startsWith(`${prefix}/`) && path !== prefix) {
      throw new Error(`${requestUrl} is not a URL of the hub server ${hubServer}`);
    }
    rest = path.slice(prefix.length);
    const again = existingProxy.exec(rest);
    if (again?.index === 0) rest = rest.slice(again[0].length);
  } else if (proxied) {
    prefix = path.slice(0, proxied.index);
    rest = path.slice(proxied.index + proxied[0].length);
  } else {
    const root = apiRoot.exec(path);
    if (!root)
      throw new Error(`cannot tell the Kubernetes API path in ${requestUrl}: pass the hub to onCluster`);
    prefix = path.slice(0, root.index);
    rest = path.slice(root.index);
  }
  url.pathname = `${prefix}${proxy}${rest}`;
  return url.toString();
}
