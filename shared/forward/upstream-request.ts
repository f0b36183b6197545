/**
 * Opens the request to a cluster for a caller's request: same method, the
 * caller's path on the endpoint's base path, the caller's headers rewritten
 * for the cluster (credential, impersonation, hop-by-hop), and the body's
 * framing declared from what Node parsed, never copied (framing.ts). Shared
 * by plain requests (request.ts) and upgrades (upgrade.ts); forwardedHeaders also by HTTP/2 requests.
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import { appendImpersonation } from '../identity/impersonation-headers.ts';
import type { UserInfo } from '../identity/user.ts';
import type { Upstream } from '../transport/upstream.ts';
import { encodeTunnelIdentity } from '../tunnel/identity.ts';
import { assertNoBody, type Framing, framingHeaders, requestFraming } from './framing.ts';
import { type RawHeaders, upstreamHeaders } from './headers.ts';
import { joinUpstreamPath } from './upstream-path.ts';

/** Throws FramingError for a body the gateway will not forward, and Node's errors for an invalid request. */
export function openUpstreamRequest(
  upstream: Upstream,
  req: IncomingMessage,
  upstreamPath: string,
  options: { identity?: UserInfo; upgrade?: boolean },
): ClientRequest {
  const method = req.method ?? 'GET';
  const framing = requestFraming(req);
  if (options.upgrade) assertNoBody(framing);
  const request = upstream.request({
    agent: upstream.agent,
    host: upstream.hostname,
    port: upstream.port,
    method,
    path: joinUpstreamPath(upstream.basePath, upstreamPath),
    headers: forwardedHeaders(upstream, req, framing, options),
  });
  if (options.upgrade) {
    // A refused upgrade (any answer but 101) must not return its connection to the
    // pool: the cluster may have switched state on it, and the next request would hang.
    request.shouldKeepAlive = false;
  }
  return request;
}

/**
 * The caller's headers as the cluster gets them, on either protocol (the HTTP/2 path converts them,
 * http2-headers.ts): the pool's Host and credential, the framing Node parsed, the identity to
 * impersonate (on an agent's `impersonate` stream, in the tunnel hop's encoding), and the caller's
 * address appended to X-Forwarded-For.
 */
export function forwardedHeaders(
  upstream: Upstream,
  req: IncomingMessage,
  framing: Framing,
  options: { identity?: UserInfo; upgrade?: boolean },
): RawHeaders {
  return upstreamHeaders(req.rawHeaders, {
    host: upstream.hostHeader,
    framing: framingHeaders(framing, req.method ?? 'GET'),
    authorization: upstream.authorization,
    identity: options.identity,
    encodeIdentity: upstream.tunnelStream === 'impersonate' ? encodeTunnelIdentity : appendImpersonation,
    ...(options.upgrade ? { upgrade: true } : {}),
    forwardedFor: req.socket.remoteAddress,
  });
}
