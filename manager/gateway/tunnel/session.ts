/**
 * The gateway's end of one agent tunnel: an HTTP/2 client session run over the connection the
 * kube-aggregator relayed (roles reversed: the agent serves). `dial()` opens one CONNECT stream,
 * which the agent pipes to its cluster's kube-apiserver; the proxy's connection pool runs TLS and
 * HTTP/1.1 inside it (shared/transport/connect-tunnel.ts), so proxied requests, watches and upgrades (exec,
 * port-forward) travel as they would over TCP, each on a stream with its own flow control.
 */
import http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import { awaitTunnelStream } from '../../../shared/transport/tunnel-stream.ts';
import { keepAlive } from '../../../shared/tunnel/keepalive.ts';
import {
  connectionWindowBytes,
  defaultKeepalive,
  streamWindowBytes,
  type TunnelStreamKind,
  tunnelConnectAuthority,
  tunnelStreamHeader,
} from '../../../shared/tunnel/protocol.ts';

export interface TunnelSessionOptions {
  cluster: string;
  /** The agent's user name, for logs and the ClusterGateway status. */
  agent: string;
  keepalive?: { intervalMs: number; timeoutMs: number };
  /** How long opening a stream may take before dial() fails (the agent then connects to its apiserver). */
  dialTimeoutMs?: number;
  onRoundTrip?: (ms: number) => void;
}

/** Why a session ended, for logs and metrics (a fixed set). */
/** lease-lost: another holder is named in its Lease (leases.ts onLost); the agent reconnects and takes it back. */
export type CloseReason =
  | 'closed'
  | 'ping-timeout'
  | 'replaced'
  | 'shutdown'
  | 'revoked'
  | 'lease-lost'
  | 'error';

export class TunnelSession {
  readonly cluster: string;
  readonly agent: string;
  readonly connectedAt = new Date();
  readonly #session: http2.ClientHttp2Session;
  readonly #socket: Duplex & { bytesRead?: number; bytesWritten?: number };
  readonly #dialTimeoutMs: number;
  #openStreams = 0;
  #closeReason: CloseReason | undefined;
  #lastRoundTripMs: number | undefined;
  #markEnded: (reason: CloseReason) => void = () => {};
  /** Settles when the session stops taking new streams: GOAWAY either way, or closed. */
  readonly ended: Promise<CloseReason>;
  /** Settles when the session and its connection are gone. */
  readonly closed: Promise<CloseReason>;

  /**
   * Starts the HTTP/2 session on `socket`, which must already carry the 101 response: Node aborts
   * (Http2Session::OnStreamAfterWrite, is_write_in_progress) when the session takes over a socket
   * with a write still in flight, so the caller waits for that write's callback first.
   */
  constructor(socket: Duplex, options: TunnelSessionOptions) {
    this.cluster = options.cluster;
    this.agent = options.agent;
    this.#socket = socket;
    this.#dialTimeoutMs = options.dialTimeoutMs ?? 10_000;
    // The authority is never used to connect (createConnection hands over the socket); it only
    // fills :authority of requests, and every request here sets its own.
    this.#session = http2.connect('http://agent.tunnel.invalid', {
      createConnection: () => socket,
      settings: { enablePush: false, initialWindowSize: streamWindowBytes },
      // Many watches buffer a little each; Node's 10 MB default would refuse streams too early.
      maxSessionMemory: 64,
    });
    this.#session.on('error', () => {}); // reported through 'close' below
    this.#session.once('connect', () => {
      try {
        this.#session.setLocalWindowSize(connectionWindowBytes);
      } catch {
        // the session closed during the handshake; 'close' follows
      }
    });
    const stopKeepalive = keepAlive(this.#session, {
      ...(options.keepalive ?? defaultKeepalive),
      onRoundTrip: (ms) => {
        this.#lastRoundTripMs = ms;
        options.onRoundTrip?.(ms);
      },
      onTimeout: () => {
        this.#closeReason ??= 'ping-timeout';
      },
    });
    this.ended = new Promise((resolve) => {
      this.#markEnded = (reason) => {
        this.#closeReason ??= reason;
        resolve(this.#closeReason);
      };
    });
    this.closed = new Promise((resolve) => {
      this.#session.once('close', () => {
        stopKeepalive();
        socket.destroy();
        this.#markEnded('closed');
        resolve(this.#closeReason ?? 'closed');
      });
    });
    // The agent's GOAWAY (it drains to reconnect elsewhere, or shuts down): no new streams here.
    this.#session.once('goaway', () => this.#markEnded('closed'));
  }

  /** True while new streams can be opened. */
  get usable(): boolean {
    return !this.#session.closed && !this.#session.destroyed && this.#closeReason === undefined;
  }

  get openStreams(): number {
    return this.#openStreams;
  }

  get lastRoundTripMs(): number | undefined {
    return this.#lastRoundTripMs;
  }

  /** Bytes through the tunnel's connection so far (framing and TLS included). */
  get bytes(): { received: number; sent: number } {
    return { received: this.#socket.bytesRead ?? 0, sent: this.#socket.bytesWritten ?? 0 };
  }

  /**
   * One stream to the cluster: `relay` is a raw byte stream to its kube-apiserver (the gateway runs
   * TLS inside it); `impersonate` is plain HTTP that the agent serves with its own credential.
   */
  dial(kind: TunnelStreamKind = 'relay'): Promise<Duplex> {
    if (!this.usable) {
      return Promise.reject(new Error(`the tunnel of cluster "${this.cluster}" is closing`));
    }
    let stream: http2.ClientHttp2Stream;
    try {
      stream = this.#session.request(
        {
          ':method': 'CONNECT',
          ':authority': tunnelConnectAuthority,
          ...(kind === 'relay' ? {} : { [tunnelStreamHeader]: kind }),
        },
        { endStream: false },
      );
    } catch (err) {
      return Promise.reject(
        new Error(`cannot open a stream in the tunnel of cluster "${this.cluster}": ${message(err)}`),
      );
    }
    this.#openStreams++;
    stream.once('close', () => this.#openStreams--);
    const cluster = this.cluster;
    return awaitTunnelStream(stream, kind, this.#dialTimeoutMs, {
      timedOut: (ms) => `the agent of cluster "${cluster}" did not open a stream within ${ms} ms`,
      refused: (status, cause) =>
        status === 403
          ? `the agent of cluster "${cluster}" refused the stream: ${cause ? cause : 'forbidden'}`
          : `the agent of cluster "${cluster}" could not reach its kube-apiserver${cause ? `: ${cause}` : ` (status ${status})`}`,
      failed: (err) => `tunnel stream of cluster "${cluster}" failed: ${err.message}`,
      closed: () => `the tunnel of cluster "${cluster}" closed`,
    });
  }

  /**
   * Stops new streams (GOAWAY) and lets the open ones finish; `graceMs` later whatever is left is
   * cut. Used when the agent's newer connection replaces this one, and on shutdown.
   */
  drain(reason: CloseReason, graceMs: number): void {
    this.#markEnded(reason);
    if (this.#session.closed || this.#session.destroyed) return;
    try {
      // The reason travels in GOAWAY's opaque data: the agent reconnects at once after a shutdown.
      this.#session.goaway(http2.constants.NGHTTP2_NO_ERROR, 0, Buffer.from(reason));
    } catch {
      // already going away
    }
    this.#session.close();
    // Not unref'd: a shutdown awaits `closed`, which this timer guarantees.
    const timer = setTimeout(() => this.#session.destroy(), graceMs);
    this.#session.once('close', () => clearTimeout(timer));
  }

  /** Cuts the session now. */
  destroy(reason: CloseReason): void {
    this.#markEnded(reason);
    this.#session.destroy();
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
