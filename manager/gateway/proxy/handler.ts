/**
 * Proxies one plain HTTP request (every method, any body) to a managed
 * cluster, in the spirit of apimachinery's UpgradeAwareHandler:
 *
 * - bodies stream both ways and nothing is buffered or parsed, so a watch
 *   event or a followed log line reaches the caller as soon as the cluster
 *   sends it (Nagle is off; Node writes each chunk straight to the socket);
 * - there is no body timeout: a watch lasts as long as both ends want;
 * - when the caller goes away, the upstream request is destroyed at once, so
 *   the cluster stops serving an abandoned watch;
 * - the cluster's answer, errors included, is passed on untouched; only when
 *   the cluster cannot be reached does the gateway answer itself, with a 503
 *   metav1.Status naming the cluster and the cause.
 */
import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { UserInfo } from '../auth/user.ts';
import type { ClusterTarget } from '../clusters/cluster.ts';
import type { ProxyAccess, ProxyContext } from './context.ts';
import { downstreamHeaders } from './headers.ts';
import { isStreamingRequest } from './path.ts';
import { errorMessage, refusal, unreachable, writeStatus } from './reply.ts';
import { openUpstreamRequest } from './upstream-request.ts';

/**
 * @param upstreamPath path and raw query relative to the cluster's endpoint (parseProxyPath)
 * @param identity when given, the request is made as this user (Impersonate-* headers)
 * @param access passed through to onComplete for the access log
 */
export function proxyRequest(
  req: IncomingMessage,
  res: ServerResponse,
  target: ClusterTarget,
  upstreamPath: string,
  context: ProxyContext,
  identity?: UserInfo,
  access?: ProxyAccess,
): void {
  const started = performance.now();
  let error: string | undefined;
  let up: ClientRequest | undefined;
  let callerGone = false;

  context.inflight.requests++;
  res.once('close', () => {
    context.inflight.requests--;
    // Closed before the response was complete: the caller left.
    if (!res.writableFinished) {
      callerGone = true;
      up?.destroy();
    }
    context.onComplete?.({
      cluster: target.name,
      method: req.method ?? 'GET',
      upstreamPath,
      code: res.headersSent ? res.statusCode : 499,
      durationMs: performance.now() - started,
      upgrade: false,
      ...(error ? { error } : {}),
      ...(access ? { access } : {}),
    });
  });

  const upstream = target.problem ?? context.pools.get(target);
  if (typeof upstream === 'string') {
    error = upstream;
    writeStatus(res, unreachable(target.name, upstream));
    return;
  }

  let request: ClientRequest;
  try {
    request = openUpstreamRequest(upstream, req, upstreamPath, { identity });
  } catch (err) {
    // Framing is checked, and Node validates the request line and headers, synchronously.
    error = errorMessage(err);
    writeStatus(res, refusal(target.name, err));
    return;
  }
  up = request;
  // Go sets TCP_NODELAY on every connection; watches need it most.
  request.setNoDelay(true);
  const streaming = isStreamingRequest(upstreamPath);
  if (streaming) req.socket.setNoDelay(true);

  request.once('response', (upRes) => {
    try {
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, downstreamHeaders(upRes.rawHeaders));
    } catch (err) {
      error = errorMessage(err);
      upRes.destroy();
      res.destroy();
      return;
    }
    // Headers of a watch go out now, not with the first event (which may be minutes away).
    if (streaming) res.flushHeaders();
    // An upstream that dies mid-body destroys res: the caller sees a truncated
    // response rather than a clean end that would pass for a complete one.
    // pipe plus explicit error handling rather than stream.pipeline: pipeline
    // allocates an AbortController (and a DOMException on completion) per
    // request, measurable on this hot path (docs/benchmarks.md).
    upRes.once('error', () => {
      if (!res.destroyed) res.destroy();
    });
    upRes.once('aborted', () => {
      if (!res.destroyed) res.destroy();
    });
    upRes.once('close', () => {
      if (!upRes.complete && !res.destroyed) res.destroy();
    });
    upRes.pipe(res);
  });

  request.on('error', (err) => {
    if (callerGone) return; // destroyed by us, because the caller left
    error = errorMessage(err);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    context.logger?.warn({ cluster: target.name, err: error }, 'cluster unreachable');
    writeStatus(res, unreachable(target.name, error));
  });

  // The caller's body streams up; pipe (not pipeline) so an upstream failure
  // leaves the caller's connection alone and the 503 can still be written.
  req.once('error', () => request.destroy());
  req.pipe(request);
}
