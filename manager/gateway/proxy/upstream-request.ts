/**
 * Opens the request to a cluster for a caller's request: same method, the
 * caller's path on the endpoint's base path, the caller's headers rewritten
 * for the cluster (credential, impersonation, hop-by-hop). Shared by plain
 * requests (handler.ts) and upgrades (upgrade.ts).
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { UserInfo } from '../auth/user.ts';
import { upstreamHeaders } from './headers.ts';
import { joinUpstreamPath } from './path.ts';
import type { Upstream } from './pool.ts';

export function openUpstreamRequest(
  upstream: Upstream,
  req: IncomingMessage,
  upstreamPath: string,
  options: { identity?: UserInfo; upgrade?: boolean },
): ClientRequest {
  return upstream.request({
    agent: upstream.agent,
    host: upstream.hostname,
    port: upstream.port,
    method: req.method,
    path: joinUpstreamPath(upstream.basePath, upstreamPath),
    headers: upstreamHeaders(req.rawHeaders, {
      host: upstream.hostHeader,
      authorization: upstream.authorization,
      identity: options.identity,
      ...(options.upgrade ? { upgrade: true } : {}),
      forwardedFor: req.socket.remoteAddress,
    }),
  });
}
