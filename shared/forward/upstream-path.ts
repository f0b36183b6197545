/**
 * The request target sent to a cluster, and what it says about the response: both read on every
 * forwarded request, with string operations only.
 */

/** `watch=true` or `follow=true` (Kubernetes parses booleans with Go's strconv.ParseBool), or a /watch/ path. */
const STREAMING = /[?&](?:watch|follow)=(?:1|t|T|true|True|TRUE)(?:&|$)|\/watch(?:\/|\?|$)/;

/**
 * Joins an endpoint's base path (no trailing slash, '' for none) and an
 * upstream path from parseProxyPath into the request target sent upstream.
 */
export function joinUpstreamPath(basePath: string, upstreamPath: string): string {
  if (upstreamPath.startsWith('/')) return basePath + upstreamPath;
  return (basePath || '/') + upstreamPath;
}

/**
 * True for watches and followed logs: their response headers must reach the
 * client at once and every chunk must be sent without delay.
 */
export function isStreamingRequest(upstreamPath: string): boolean {
  return STREAMING.test(upstreamPath);
}
