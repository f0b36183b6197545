/**
 * Reads (body-less GETs that are neither watches nor followed logs) whose response body goes to the
 * caller as the cluster framed it: over a kept-alive HTTP/1.1 connection of the cluster's pool
 * (shared/transport/http1-connections.ts), the response head is parsed and rewritten here, and the
 * body's bytes, chunk sizes included, are written to the caller's socket as they arrived, without
 * being decoded and re-chunked by Node's HTTP client and server.
 *
 * Why: the body is most of what a LIST costs, and in Node each piece of it otherwise crosses
 * llhttp or nghttp2, a stream, and ServerResponse's chunk framing (a size line, the data and a CRLF
 * written as three buffers that TLS then copies into one). Measured on the 2-core machine
 * (docs/benchmarks-log.md, "Bodies passed through"), the gateway's CPU per LIST from kube-apiserver,
 * means of interleaved runs: 10 MB, 31 ms passed through against 58 over HTTP/2; 514 KB, 6.1 ms
 * against 7.5 (10 ms ticks, 150 LISTs each). Watches
 * and followed logs stay on HTTP/2, where a caller that leaves costs a stream reset instead of a
 * connection; writes stay on the paths of request.ts, which stream a body upward.
 *
 * Safety: every framing byte is checked before the bytes after it are forwarded
 * (http1-response.ts), the last chunk is written by Node's own `res.end()`, and a cluster that
 * breaks the framing gets its response cut, as on the other paths.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type tls from 'node:tls';
import type { UserInfo } from '../identity/user.ts';
import type { Http1Connection, Http1Connections } from '../transport/http1-connections.ts';
import type { Upstream } from '../transport/upstream.ts';
import type { Framing } from './framing.ts';
import { downstreamHeaders } from './headers.ts';
import {
  ChunkedScanner,
  parseResponseHead,
  type ResponseHead,
  UpstreamProtocolError,
} from './http1-response.ts';
import { joinUpstreamPath } from './upstream-path.ts';
import { forwardedHeaders } from './upstream-request.ts';

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** What may not appear in a request target or a header value written by hand (Node's own checks). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is checked for
const UNSAFE_TARGET = /[\x00-\x20\x7f]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is checked for
const UNSAFE_VALUE = /[\x00-\x08\x0a-\x1f\x7f]/;

/** What the forwarder (request.ts) gives this path. */
export interface PassThroughExchange {
  req: IncomingMessage;
  res: ServerResponse;
  upstream: Upstream;
  upstreamPath: string;
  identity: UserInfo | undefined;
  /** Set here: abandons the upstream request (the caller left). */
  cancel?: () => void;
  callerGone: boolean;
  /** The cluster could not be reached, or broke HTTP: a 503 if nothing was answered yet, else a cut response. */
  fail(error: string): void;
}

/**
 * The request head to write, or undefined when this request does not qualify: not a plain read,
 * a caller that does not speak HTTP/1.1 (the body's chunks are passed as they are, so the caller's
 * response must be chunked too), or anything the hand-written head cannot carry safely (the other
 * paths then answer it, and refuse it with their own checks).
 */
export function passThroughHead(
  req: IncomingMessage,
  res: ServerResponse,
  upstream: Upstream,
  upstreamPath: string,
  framing: Framing | undefined,
  identity: UserInfo | undefined,
): Buffer | undefined {
  if (req.method !== 'GET' || framing?.kind !== 'none' || req.httpVersion !== '1.1' || !res.socket)
    return undefined;
  const target = joinUpstreamPath(upstream.basePath, upstreamPath);
  if (UNSAFE_TARGET.test(target)) return undefined;
  const headers = forwardedHeaders(upstream, req, framing, { identity });
  let head = `GET ${target} HTTP/1.1\r\n`;
  for (let i = 0; i + 1 < headers.length; i += 2) {
    const name = headers[i] as string;
    const value = headers[i + 1] as string;
    if (!TOKEN.test(name) || UNSAFE_VALUE.test(value)) return undefined;
    head += `${name}: ${value}\r\n`;
  }
  return Buffer.from(`${head}\r\n`, 'latin1');
}

/** Sends the request on a pooled connection and passes the response through. */
export function passThrough(
  exchange: PassThroughExchange,
  connections: Http1Connections,
  head: Buffer,
): void {
  const attempt = (retried: boolean): void => {
    connections.acquire().then(
      (connection) => {
        if (exchange.callerGone) {
          connections.release(connection.socket, true); // nothing was written on it
          return;
        }
        relay(exchange, connections, connection, head, () => {
          // A kept-alive connection the server had just closed: the GET is sent once more on a new
          // one, as Go's transport does; anything later is the cluster's failure.
          if (connection.reused && !retried) attempt(true);
          else exchange.fail('the cluster closed the connection without answering');
        });
      },
      (err: Error) => {
        if (!exchange.callerGone) exchange.fail(err.message);
      },
    );
  };
  attempt(false);
}

/** One request on one connection; `closedUnanswered` when it ends before any byte of an answer. */
function relay(
  exchange: PassThroughExchange,
  connections: Http1Connections,
  { socket }: Http1Connection,
  head: Buffer,
  closedUnanswered: () => void,
): void {
  const { res } = exchange;
  let received: Buffer | undefined;
  let answer: ResponseHead | undefined;
  let body: BodyRelay | undefined;
  let finished = false;

  // Once this request is done with the connection it may serve another: a caller leaving late must not touch it.
  exchange.cancel = () => {
    if (finished) return;
    finished = true;
    detach();
    connections.discard(socket);
  };
  const finish = (reusable: boolean) => {
    finished = true;
    detach();
    connections.release(socket, reusable);
  };
  const breakOff = (error: string) => {
    if (finished) return;
    finished = true;
    detach();
    connections.discard(socket);
    if (exchange.callerGone) return;
    if (!answer && !received) {
      closedUnanswered();
      return;
    }
    exchange.fail(error);
  };

  const onData = (piece: Buffer) => {
    if (finished) return;
    try {
      if (!answer) {
        received = received ? Buffer.concat([received, piece]) : piece;
        answer = parseResponseHead(received);
        if (!answer) return;
        piece = received.subarray(answer.headBytes);
        received = undefined;
        body = startBody(exchange, answer);
        if (!body) {
          finish(answer.keepAlive && piece.length === 0);
          return;
        }
        if (piece.length === 0) return;
      }
      const outcome = (body as BodyRelay).push(piece);
      if (outcome === 'more') return;
      if (outcome !== 'pause') {
        res.end();
        finish((answer as ResponseHead).keepAlive && outcome === 'done');
        return;
      }
      // The caller reads slower than the cluster sends: wait for its socket to drain.
      socket.pause();
      (res.socket as Socket).once('drain', () => socket.resume());
    } catch (err) {
      const message =
        err instanceof UpstreamProtocolError ? `the cluster broke HTTP/1.1: ${err.message}` : String(err);
      breakOff(message);
    }
  };
  const onEnd = () => {
    if (finished) return;
    if (answer?.framing.kind === 'close' && body) {
      res.end();
      finished = true;
      detach();
      connections.discard(socket);
      return;
    }
    breakOff('the cluster closed the connection mid-response');
  };
  const onError = (err: Error) => breakOff(err.message);
  const detach = () => {
    socket.off('data', onData);
    socket.off('end', onEnd);
    socket.off('close', onEnd);
    socket.off('error', onError);
  };
  socket.on('data', onData);
  socket.on('end', onEnd);
  socket.on('close', onEnd);
  socket.on('error', onError);
  socket.write(head);
}

/**
 * Bytes that may wait for a slow caller before the cluster's connection is paused: the bound the
 * HTTP/2 path gets from its 1 MiB stream window (shared/transport/http2-sessions.ts). Pausing at
 * the socket's own 16 KB mark instead cost a 10 MB LIST 40 ms of CPU against 31 (means of 40
 * interleaved LISTs from kube-apiserver, docs/benchmarks-log.md "Bodies passed through"): a pause
 * and a resume for every few records, and the records piling up between them.
 */
const MAX_WAITING_FOR_CALLER = 1 << 20;

function overLimit(out: tls.TLSSocket): boolean {
  return out.writableLength > MAX_WAITING_FOR_CALLER;
}

/** Where the body of one response stands: 'done' at its end, 'trailing' if bytes followed it. */
type PushOutcome = 'more' | 'pause' | 'done' | 'trailing';

interface BodyRelay {
  push(piece: Buffer): PushOutcome;
}

/** Answers the caller's head; the relay of the body, or undefined when there is none. */
function startBody(exchange: PassThroughExchange, answer: ResponseHead): BodyRelay | undefined {
  const { res } = exchange;
  res.writeHead(answer.status, answer.statusMessage, downstreamHeaders(answer.rawHeaders));
  if (answer.framing.kind === 'none') {
    res.end();
    return undefined;
  }
  if (answer.framing.kind === 'close') {
    // Rare (kube-apiserver always frames its bodies): Node frames it for the caller.
    return { push: (piece) => (res.write(piece) ? 'more' : 'pause') };
  }
  // The head goes out now, so the body's bytes written to the socket below follow it.
  res.flushHeaders();
  const out = res.socket as tls.TLSSocket | null;
  if (!out) throw new Error('the caller left');
  if (answer.framing.kind === 'length') {
    let remaining = answer.framing.length;
    return {
      push(piece) {
        const take = Math.min(remaining, piece.length);
        remaining -= take;
        const drained = out.write(take === piece.length ? piece : piece.subarray(0, take));
        if (remaining > 0) return drained || !overLimit(out) ? 'more' : 'pause';
        return take < piece.length ? 'trailing' : 'done';
      },
    };
  }
  // Chunked: the caller's response must be chunked as well, so the cluster's chunks fit it as they are.
  if (!res.chunkedEncoding) throw new UpstreamProtocolError('the caller cannot take a chunked body');
  const scanner = new ChunkedScanner();
  return {
    push(piece) {
      const { held, forwardEnd, done, trailing } = scanner.scan(piece);
      let drained = true;
      for (const bytes of held) drained = out.write(bytes);
      if (forwardEnd > 0)
        drained = out.write(forwardEnd === piece.length ? piece : piece.subarray(0, forwardEnd));
      if (done) return trailing ? 'trailing' : 'done';
      return drained || !overLimit(out) ? 'more' : 'pause';
    },
  };
}
