/**
 * URL handling for the proxy subresource: which cluster a request is for,
 * and which path on that cluster's kube-apiserver it goes to.
 *
 * Everything works on the raw request URL (`req.url`) with string slicing, not
 * `new URL()`: the query string must reach the cluster byte for byte (field and
 * label selectors, `dryRun`, `impersonate`, continue tokens), and this runs on
 * every proxied request.
 */

import { parseGoQuery } from '../auth/go-url.ts';

export const CLUSTER_GATEWAYS_PREFIX = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways/';

/** A DNS-1123 subdomain, as Kubernetes requires for Secret and ManagedCluster names: dots allowed. */
const CLUSTER_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Whether `name` can name a cluster: a DNS-1123 subdomain of at most 253 characters. */
export function isClusterName(name: string): boolean {
  return name.length <= 253 && CLUSTER_NAME.test(name);
}

/** Anything that may need cleaning: empty or dot segments, or an encoded `/` or `.`. */
const NEEDS_CLEANING = /\/\/|\/\.|%2[eEfF]/;
const ENCODED_SLASH = /%2[fF]/g;
const ENCODED_DOT = /%2[eE]/g;

export interface ClusterGatewayPath {
  name: string;
  /** The subresource (`proxy`, `health`, ...), or '' for the object itself. */
  subresource: string;
  /** Raw path after the subresource, '' or starting with '/'. */
  rest: string;
  /** Raw query string including the leading '?', or ''. */
  query: string;
}

/**
 * Splits `/apis/cluster.core.oam.dev/v1alpha1/clustergateways/<name>[/<subresource>[/<rest>]][?query]`.
 * Returns undefined for any other URL, and for names that are not valid cluster names.
 */
export function matchClusterGatewayPath(url: string): ClusterGatewayPath | undefined {
  if (!url.startsWith(CLUSTER_GATEWAYS_PREFIX)) return undefined;
  const q = url.indexOf('?');
  const pathEnd = q === -1 ? url.length : q;
  const query = q === -1 ? '' : url.slice(q);

  const nameStart = CLUSTER_GATEWAYS_PREFIX.length;
  let nameEnd = url.indexOf('/', nameStart);
  if (nameEnd === -1 || nameEnd > pathEnd) nameEnd = pathEnd;
  const name = url.slice(nameStart, nameEnd);
  if (name.length === 0 || name.length > 253 || !CLUSTER_NAME.test(name)) return undefined;

  if (nameEnd === pathEnd) return { name, subresource: '', rest: '', query };
  let subEnd = url.indexOf('/', nameEnd + 1);
  if (subEnd === -1 || subEnd > pathEnd) subEnd = pathEnd;
  const subresource = url.slice(nameEnd + 1, subEnd);
  const rest = url.slice(subEnd, pathEnd);
  // As Kubernetes' router (go-restful's CurlyRouter) matches: trailing
  // slashes are ignored (`<name>/` is the object), but an empty segment in
  // the middle (`<name>//proxy/...`) matches no route.
  if (subresource === '' && !/^\/*$/.test(rest)) return undefined;
  return { name, subresource, rest: subresource === '' ? '' : rest, query };
}

export interface ProxyPath {
  cluster: string;
  /**
   * Path on the cluster's kube-apiserver, relative to the endpoint address,
   * followed by the raw query: `/api/v1/pods?watch=true`. Empty path when the
   * request addressed `.../proxy` itself (then it is just the query, or '').
   */
  upstreamPath: string;
}

/**
 * Parses a proxy subresource URL; undefined when the URL is not one.
 *
 * With `goQuery` (--authorize-proxy-subpath, where the hub authorizes the
 * proxied request itself) the query forwarded is rebuilt from the segments
 * a Go server keeps (auth/go-url.ts): the cluster then reads exactly the
 * parameters that were authorized, whichever Go version it runs. Otherwise
 * the query goes through byte for byte (service proxies may need it so).
 */
export function parseProxyPath(url: string, options: { goQuery?: boolean } = {}): ProxyPath | undefined {
  const match = matchClusterGatewayPath(url);
  if (match?.subresource !== 'proxy') return undefined;
  let query = match.query;
  if (options.goQuery && query) {
    const { accepted } = parseGoQuery(query.slice(1));
    query = accepted ? `?${accepted}` : '';
  }
  return { cluster: match.name, upstreamPath: cleanPath(match.rest) + query };
}

/**
 * Removes empty, `.` and `..` segments, so a request can never climb out of an
 * endpoint's sub-path (`https://rancher/k8s/clusters/c-1` must not reach
 * `/k8s/clusters/c-2`). Encoded slashes and dots are decoded first, as the Go
 * gateway does (it works on the decoded URL path), so `..%2F` cannot sneak
 * past. Unlike Go's path.Join, a trailing slash is kept: it is the caller's
 * intent and some servers distinguish it.
 */
export function cleanPath(rest: string): string {
  if (!NEEDS_CLEANING.test(rest)) return rest;
  const decoded = rest.replace(ENCODED_SLASH, '/').replace(ENCODED_DOT, '.');
  const out: string[] = [];
  for (const segment of decoded.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') out.pop();
    else out.push(segment);
  }
  const trailing = decoded.endsWith('/') || decoded.endsWith('/.') || decoded.endsWith('/..');
  if (out.length === 0) return trailing || decoded.length > 0 ? '/' : '';
  return '/' + out.join('/') + (trailing ? '/' : '');
}
