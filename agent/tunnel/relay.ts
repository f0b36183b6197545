/**
 * The agent's end of one tunnel: an HTTP/2 server on the upgraded hub connection (the gateway is
 * the client). Each CONNECT stream is piped to this cluster's kube-apiserver, at the address of
 * the agent's own managed-cluster connection, and nowhere else: the `:authority` the gateway sends
 * is ignored, so a compromised hub can reach the apiserver (with the credentials it holds anyway)
 * but not dial around the cluster's network. TLS to the apiserver runs inside the stream, from the
 * gateway: the agent sees only ciphertext and adds no credential.
 */
import http2 from 'node:http2';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { ProxyDecision, ProxyRoute } from '../../shared/transport/env-proxy.ts';
import { dialRoute } from '../../shared/transport/proxy-agent.ts';
import { keepAlive } from '../../shared/tunnel/keepalive.ts';
import {
  connectionWindowBytes,
  defaultKeepalive,
  maxConcurrentStreams,
  streamWindowBytes,
  tunnelErrorHeader,
  tunnelStreamHeader,
} from '../../shared/tunnel/protocol.ts';
import type { TunnelFailure, TunnelMetrics } from './metrics.ts';

export interface RelayTarget {
  host: string;
  port: number;
  /** Through a proxy's CONNECT (HTTPS_PROXY, a kubeconfig's proxy-url); absent or direct: TCP. */
  route?: ProxyDecision;
}

/** The apiserver address of a kubeconfig or in-cluster server URL (https://host:port), and its route. */
export function relayTargetOf(server: string, route?: ProxyRoute): RelayTarget {
  const url = new URL(server);
  const decision = route?.(url);
  return {
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: Number(url.port) || (url.protocol === 'http:' ? 80 : 443),
    ...(decision && decision.kind !== 'direct' ? { route: decision } : {}),
  };
}

export interface RelayOptions {
  /** The managed kube-apiserver's address, fixed for this tunnel's life. */
  target: RelayTarget;
  metrics: TunnelMetrics;
  log: { debug(o: object, m: string): void; warn(o: object, m: string): void };
  keepalive?: { intervalMs: number; timeoutMs: number };
  connectTimeoutMs?: number;
  /**
   * Serves `impersonate` streams (the no-credential trust model, impersonation.ts). Absent: the agent
   * runs the hub-credential model and refuses them, so it never acts with its own credential.
   */
  impersonation?: { serve(stream: Duplex): void };
}

/** Why the tunnel stopped taking streams: the gateway's GOAWAY says why in its opaque data. */
export interface RelayEnd {
  reason: TunnelFailure;
  /** The gateway's word, when it sent one (replaced, shutdown). */
  detail?: string;
}

export class Relay {
  readonly #session: http2.ServerHttp2Session;
  readonly #options: RelayOptions;
  #end: RelayEnd | undefined;
  #markEnded: (end: RelayEnd) => void = () => {};
  /** Settles when no new streams will come: the gateway sent GOAWAY, or the connection is gone. */
  readonly ended: Promise<RelayEnd>;
  /** Settles when the session and its connection are closed. */
  readonly closed: Promise<void>;

  constructor(socket: Duplex, head: Buffer, options: RelayOptions) {
    this.#options = options;
    const server = http2.createServer({
      settings: { enablePush: false, initialWindowSize: streamWindowBytes, maxConcurrentStreams },
      maxSessionMemory: 32,
    });
    // The hub connection is TLS without ALPN (an h2 connection could not have been upgraded); Node's
    // HTTP/2 server would take it for HTTP/1.1 and refuse it as "unknown protocol".
    const tlsSocket = socket as Duplex & { alpnProtocol?: string | false };
    if (tlsSocket.alpnProtocol !== undefined) tlsSocket.alpnProtocol = 'h2';
    if (head.length > 0) socket.unshift(head);
    let taken: http2.ServerHttp2Session | undefined;
    server.once('session', (s) => {
      taken = s;
    });
    server.on('stream', (stream, headers) => this.#onStream(stream, headers));
    server.emit('connection', socket);
    if (!taken) throw new Error('the HTTP/2 server did not take the tunnel connection');
    const session: http2.ServerHttp2Session = taken;
    this.#session = session;
    session.on('error', () => {}); // 'close' follows, which is what matters
    session.once('connect', () => {
      try {
        session.setLocalWindowSize(connectionWindowBytes);
      } catch {
        // closed during the handshake
      }
    });
    const stopKeepalive = keepAlive(session, {
      ...(options.keepalive ?? defaultKeepalive),
      onRoundTrip: (ms) => options.metrics.roundTrip(ms),
      onTimeout: () => this.#markEnded({ reason: 'ping-timeout' }),
    });
    this.ended = new Promise((resolve) => {
      this.#markEnded = (end) => {
        this.#end ??= end;
        resolve(this.#end);
      };
    });
    session.once('goaway', (_code: number, _last: number, opaque?: Buffer) => {
      const detail = opaque && opaque.length > 0 ? opaque.toString('utf8').slice(0, 64) : undefined;
      this.#markEnded({ reason: 'goaway', ...(detail ? { detail } : {}) });
    });
    this.closed = new Promise((resolve) => {
      session.once('close', () => {
        stopKeepalive();
        socket.destroy();
        this.#markEnded({ reason: 'closed' });
        resolve();
      });
    });
  }

  /** No new streams (GOAWAY); open ones may finish for `graceMs`, then the connection is cut. */
  drain(graceMs: number, why: string): void {
    this.#markEnded({ reason: 'goaway', detail: why });
    const session = this.#session;
    if (session.closed || session.destroyed) return;
    try {
      session.goaway(http2.constants.NGHTTP2_NO_ERROR, 0, Buffer.from(why));
    } catch {
      // already going away
    }
    session.close();
    const timer = setTimeout(() => session.destroy(), graceMs);
    timer.unref();
    session.once('close', () => clearTimeout(timer));
  }

  destroy(): void {
    this.#session.destroy();
  }

  #onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on('error', () => {}); // a reset stream; 'close' cleans up
    if (headers[':method'] !== 'CONNECT') {
      respond(stream, 405, 'the tunnel carries CONNECT streams only');
      return;
    }
    const { metrics, log, target } = this.#options;
    const kind = headers[tunnelStreamHeader] ?? 'relay';
    if (kind === 'impersonate') {
      const server = this.#options.impersonation;
      if (!server) {
        metrics.streamFailed();
        respond(
          stream,
          403,
          'this agent runs the hub-credential trust model (--trust-model): it does not act with its own credential',
        );
        return;
      }
      metrics.streamOpened();
      stream.respond({ ':status': 200 });
      stream.once('close', () => metrics.streamClosed({ toCluster: 0, fromCluster: 0 }));
      server.serve(stream);
      return;
    }
    if (kind !== 'relay') {
      respond(stream, 400, `unknown stream kind "${String(kind).slice(0, 40)}"`);
      return;
    }
    metrics.streamOpened();
    if (target.route) {
      this.#relayThroughProxy(stream, target, target.route);
      return;
    }
    const upstream = net.connect({ host: target.host, port: target.port });
    upstream.setNoDelay(true);
    let connected = false;
    const timer = setTimeout(
      () => upstream.destroy(new Error(`connect to ${target.host}:${target.port} timed out`)),
      this.#options.connectTimeoutMs ?? 10_000,
    );
    upstream.once('connect', () => {
      clearTimeout(timer);
      connected = true;
      if (stream.destroyed) return void upstream.destroy();
      stream.respond({ ':status': 200 });
      stream.pipe(upstream);
      upstream.pipe(stream);
    });
    upstream.once('error', (err) => {
      clearTimeout(timer);
      if (!connected) {
        metrics.streamFailed();
        log.warn(
          { target: `${target.host}:${target.port}`, err: err.message },
          'cannot reach the kube-apiserver',
        );
        respond(stream, 502, err.message);
        return;
      }
      stream.close(http2.constants.NGHTTP2_CONNECT_ERROR);
    });
    upstream.once('close', () => {
      clearTimeout(timer);
      if (connected && !stream.destroyed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
    });
    stream.once('close', () => {
      upstream.destroy();
      metrics.streamClosed({ toCluster: upstream.bytesWritten, fromCluster: upstream.bytesRead });
    });
  }

  /** The same relay, the apiserver reached through a proxy's CONNECT (the bytes counted are the stream's). */
  #relayThroughProxy(stream: http2.ServerHttp2Stream, target: RelayTarget, route: ProxyDecision): void {
    const { metrics, log } = this.#options;
    let upstream: Duplex | undefined;
    let toCluster = 0;
    let fromCluster = 0;
    stream.once('close', () => {
      upstream?.destroy();
      metrics.streamClosed({ toCluster, fromCluster });
    });
    dialRoute(route, target.host, target.port, { timeoutMs: this.#options.connectTimeoutMs ?? 10_000 }).then(
      (socket) => {
        if (stream.destroyed) return void socket.destroy();
        upstream = socket;
        stream.on('data', (chunk: Buffer) => {
          toCluster += chunk.length;
        });
        socket.on('data', (chunk: Buffer) => {
          fromCluster += chunk.length;
        });
        socket.on('error', () => stream.close(http2.constants.NGHTTP2_CONNECT_ERROR));
        socket.once('close', () => {
          if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
        });
        stream.respond({ ':status': 200 });
        stream.pipe(socket);
        socket.pipe(stream);
      },
      (err: Error) => {
        metrics.streamFailed();
        log.warn(
          { target: `${target.host}:${target.port}`, err: err.message },
          'cannot reach the kube-apiserver',
        );
        respond(stream, 502, err.message);
      },
    );
  }
}

function respond(stream: http2.ServerHttp2Stream, status: number, error: string): void {
  if (stream.destroyed || stream.headersSent) return void stream.destroy();
  // Header values must be printable: a connect error's message always is, but bound its length.
  stream.respond(
    { ':status': status, [tunnelErrorHeader]: error.replace(/[^\x20-\x7e]/g, ' ').slice(0, 200) },
    { endStream: true },
  );
}
