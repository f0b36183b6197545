/**
 * Forwards one plain HTTP request (every method, any body) to a managed
 * cluster's upstream pool, in the spirit of apimachinery's UpgradeAwareHandler:
 *
 * - bodies stream both ways and nothing is buffered or parsed, so a watch
 *   event or a followed log line reaches the caller as soon as the cluster
 *   sends it (Nagle is off; Node writes each chunk straight to the socket);
 * - there is no body timeout: a watch lasts as long as both ends want;
 * - when the caller goes away, the upstream request is destroyed at once, so
 *   the cluster stops serving an abandoned watch;
 * - the cluster's answer, errors included, is passed on untouched; only when
 *   the cluster cannot be reached does the gateway answer itself, with a 503
 *   metav1.Status naming the cluster and the cause;
 * - a plain read (a body-less GET, not a watch) goes over a kept-alive HTTP/1.1 connection and its
 *   body passes through as the cluster framed it (passthrough.ts: the cheapest way to move bytes);
 * - any other request to a cluster that speaks HTTP/2 is a stream on a shared session
 *   (shared/transport/http2-sessions.ts), else it goes over the pool's HTTP/1.1 Agent.
 */
import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import http2 from 'node:http2';
import type { UserInfo } from '../identity/user.ts';
import type { Http2Sessions } from '../transport/http2-sessions.ts';
import type { Upstream } from '../transport/upstream.ts';
import { type ProxyAccess, type ProxyContext, reportCompletion } from './context.ts';
import { type Framing, requestFraming } from './framing.ts';
import { downstreamHeaders } from './headers.ts';
import { http1ResponseHeaders, http2RequestHeaders } from './http2-headers.ts';
import { passThrough, passThroughHead } from './passthrough.ts';
import { errorMessage, refusal, unreachable, writeStatus } from './reply.ts';
import { isStreamingRequest, joinUpstreamPath } from './upstream-path.ts';
import { forwardedHeaders, openUpstreamRequest } from './upstream-request.ts';

/** What the two protocol paths share about one proxied request. */
interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  /** The cluster's name, for messages and events. */
  cluster: string;
  upstream: Upstream;
  upstreamPath: string;
  context: ProxyContext;
  identity: UserInfo | undefined;
  /** A watch or a followed log: headers go out at once, Nagle off on the caller's socket. */
  streaming: boolean;
  /** Set when the cluster could not be reached or the request could not be sent (access log). */
  error?: string;
  /** Abandons the upstream request (the caller left). */
  cancel?: () => void;
  callerGone: boolean;
}

/**
 * @param upstream the cluster's pool, or why it cannot be reached (answered as a 503)
 * @param upstreamPath path and raw query relative to the cluster's endpoint (parseProxyPath)
 * @param identity when given, the request is made as this user (Impersonate-* headers)
 * @param access passed through to onComplete for the access log
 */
export function forwardRequest(
  context: ProxyContext,
  req: IncomingMessage,
  res: ServerResponse,
  cluster: string,
  upstream: Upstream | string,
  upstreamPath: string,
  identity?: UserInfo,
  access?: ProxyAccess,
): void {
  const started = performance.now();
  const exchange: Partial<Exchange> & { callerGone: boolean } = { callerGone: false };

  context.inflight.requests++;
  res.once('close', () => {
    context.inflight.requests--;
    // Closed before the response was complete: the caller left.
    if (!res.writableFinished) {
      exchange.callerGone = true;
      exchange.cancel?.();
    }
    const code = res.headersSent ? res.statusCode : 499;
    reportCompletion(context, cluster, req, upstreamPath, started, code, false, exchange.error, access);
  });

  if (typeof upstream === 'string') {
    exchange.error = upstream;
    writeStatus(res, unreachable(cluster, upstream));
    return;
  }
  const streaming = isStreamingRequest(upstreamPath);
  if (streaming) req.socket.setNoDelay(true);
  Object.assign(exchange, { req, res, cluster, upstream, upstreamPath, context, identity, streaming });
  const ready = exchange as Exchange;
  // A plain read's body passes through as the cluster framed it (passthrough.ts); watches stay on HTTP/2.
  if (upstream.http1 && !streaming && req.method === 'GET') {
    const head = passThroughHead(req, res, upstream, upstreamPath, bodyFraming(req), identity);
    if (head) {
      passThrough(
        Object.assign(ready, { fail: (error: string) => failed(ready, error) }),
        upstream.http1,
        head,
      );
      return;
    }
  }
  // CONNECT means something else on HTTP/2 (RFC 9113 §8.5); kube-apiserver serves no such verb anyway.
  if (upstream.http2 && upstream.http2.protocol !== 'http/1.1' && req.method !== 'CONNECT') {
    overHttp2(ready, upstream.http2);
  } else {
    overHttp1(ready);
  }
}

function overHttp1(exchange: Exchange): void {
  const { req, res, cluster, upstream } = exchange;
  let request: ClientRequest;
  try {
    request = openUpstreamRequest(upstream, req, exchange.upstreamPath, { identity: exchange.identity });
  } catch (err) {
    // Framing is checked, and Node validates the request line and headers, synchronously.
    exchange.error = errorMessage(err);
    writeStatus(res, refusal(cluster, err));
    return;
  }
  exchange.cancel = () => request.destroy();
  // Go sets TCP_NODELAY on every connection; watches need it most.
  request.setNoDelay(true);

  request.once('response', (upRes) => {
    try {
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, downstreamHeaders(upRes.rawHeaders));
    } catch (err) {
      exchange.error = errorMessage(err);
      upRes.destroy();
      res.destroy();
      return;
    }
    // Headers of a watch go out now, not with the first event (which may be minutes away).
    if (exchange.streaming) res.flushHeaders();
    // An upstream that dies mid-body destroys res: the caller sees a truncated
    // response rather than a clean end that would pass for a complete one.
    // pipe plus explicit error handling rather than stream.pipeline: pipeline
    // allocates an AbortController (and a DOMException on completion) per
    // request, measurable on this hot path (docs/benchmarks-log.md).
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
    if (exchange.callerGone) return; // destroyed by us, because the caller left
    failed(exchange, errorMessage(err));
  });

  // The caller's body streams up; pipe (not pipeline) so an upstream failure
  // leaves the caller's connection alone and the 503 can still be written.
  req.once('error', () => request.destroy());
  req.pipe(request);
}

/** Methods a request may be sent again for when its stream failed before any answer (RFC 9110 §9.2.2). */
const RETRIABLE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
/** Stream failures that mean the request may not have reached the cluster: its session went away. */
const SESSION_GONE = new Set([
  'ERR_HTTP2_GOAWAY_SESSION',
  'ERR_HTTP2_STREAM_CANCEL',
  'ERR_HTTP2_SESSION_ERROR',
]);

function overHttp2(exchange: Exchange, sessions: Http2Sessions): void {
  const { req, res, cluster, upstream } = exchange;
  const method = req.method ?? 'GET';
  let framing: Framing;
  let headers: http2.OutgoingHttpHeaders;
  try {
    framing = requestFraming(req);
    const raw = forwardedHeaders(upstream, req, framing, { identity: exchange.identity });
    headers = http2RequestHeaders(raw, method, joinUpstreamPath(upstream.basePath, exchange.upstreamPath));
  } catch (err) {
    exchange.error = errorMessage(err);
    writeStatus(res, refusal(cluster, err));
    return;
  }
  const endStream = framing.kind === 'none';
  // A pooled session can go away (GOAWAY, a dead connection) just as a request is put on it: a
  // body-less idempotent request is sent once more on a fresh one, as Go's transport does.
  let retries = endStream && RETRIABLE_METHODS.has(method) ? 1 : 0;

  const send = (): void =>
    sessions.request(headers, endStream, (result) => {
      if ('http1' in result) {
        overHttp1(exchange); // the cluster answered ALPN with http/1.1
        return;
      }
      if ('error' in result) {
        if (!exchange.callerGone) failed(exchange, errorMessage(result.error));
        return;
      }
      const { stream } = result;
      if (exchange.callerGone) {
        stream.close(http2.constants.NGHTTP2_CANCEL);
        return;
      }
      exchange.cancel = () => stream.close(http2.constants.NGHTTP2_CANCEL);
      // Answered, failed or retried: what the stream's close means depends on it.
      let settled = false;
      stream.once('close', () => {
        // Closed without an answer or an error (RST_STREAM NO_ERROR): never leave the caller waiting.
        if (!settled && !exchange.callerGone)
          failed(exchange, 'the cluster closed the stream without answering');
      });
      stream.once('response', (responseHeaders, _flags, rawHeaders) => {
        settled = true;
        try {
          res.writeHead(Number(responseHeaders[':status']), http1ResponseHeaders(rawHeaders));
        } catch (err) {
          exchange.error = errorMessage(err);
          stream.close(http2.constants.NGHTTP2_CANCEL);
          res.destroy();
          return;
        }
        if (exchange.streaming) res.flushHeaders();
        // Node ends a stream's readable side even when its session dies mid-body, so the end of the
        // caller's response is decided on close: a clean one (RST code NO_ERROR, after END_STREAM)
        // ends it; any other truncates it rather than passing for a complete body.
        stream.once('close', () => {
          if (res.destroyed) return;
          if (stream.rstCode === http2.constants.NGHTTP2_NO_ERROR && stream.readableEnded) res.end();
          else res.destroy();
        });
        stream.pipe(res, { end: false });
      });
      stream.on('error', (err: Error & { code?: string }) => {
        if (settled || exchange.callerGone) {
          if (!res.destroyed && res.headersSent) res.destroy();
          return;
        }
        settled = true;
        if (!res.headersSent && retries > 0 && SESSION_GONE.has(err.code ?? '')) {
          retries--;
          send();
          return;
        }
        failed(exchange, errorMessage(err));
      });
      if (!endStream) {
        req.once('error', () => stream.close(http2.constants.NGHTTP2_CANCEL));
        req.pipe(stream);
      }
    });
  send();
}

/** The request's framing, or undefined when the other paths must refuse it (framing.ts). */
function bodyFraming(req: IncomingMessage): Framing | undefined {
  try {
    return requestFraming(req);
  } catch {
    return undefined;
  }
}

/** The upstream failed: a 503 if nothing was answered yet, else a truncated response. */
function failed(exchange: Exchange, error: string): void {
  const { res, cluster, context } = exchange;
  exchange.error = error;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  context.logger?.warn({ cluster, err: error }, 'cluster unreachable');
  writeStatus(res, unreachable(cluster, error));
}
