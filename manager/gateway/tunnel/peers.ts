/**
 * Forwarding between gateway replicas: a request for a cluster whose agent tunnel another replica
 * holds is served here as for a local tunnel, except that each tunnel stream is opened through the
 * holder. The unit forwarded is a tunnel stream (TunnelEndpoint.dial), not a request:
 *
 * - this replica authenticates and authorizes the caller, applies the proxy configuration and
 *   (hub-credential) runs TLS to the managed apiserver inside the stream, exactly as for a local
 *   tunnel; the holder only pipes bytes between the stream and its agent's tunnel. GET, watch,
 *   exec and port-forward therefore work unchanged.
 * - identity: with no-credential, the caller's identity travels inside the stream as the
 *   impersonation headers the agent acts on (shared/tunnel/identity.ts). Whoever can open a
 *   stream on the peer port can thus act as anyone on every tunnelled cluster, as a gateway can:
 *   the peer port takes mutual TLS only, clients verified against a CA that signs gateway replicas
 *   alone (--tunnel-peer-ca). The holder trusts nothing else about the caller and reads no
 *   identity of its own from the peer.
 * - a holder only opens streams on tunnels it holds itself, never forwards again: no loops.
 *
 * One HTTP/2 session per peer (mutual TLS, CONNECT streams with their own flow control, as the
 * tunnel itself), pinged so a dead peer is noticed.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type tls from 'node:tls';
import { awaitTunnelStream } from '../../../shared/transport/tunnel-stream.ts';
import { keepAlive } from '../../../shared/tunnel/keepalive.ts';
import {
  connectionWindowBytes,
  defaultKeepalive,
  streamWindowBytes,
  type TunnelStreamKind,
  tunnelErrorHeader,
  tunnelStreamHeader,
} from '../../../shared/tunnel/protocol.ts';

/** The cluster whose tunnel a peer stream is for. */
export const peerClusterHeader = 'x-cluster-gateway-cluster';
const peerAuthority = 'cluster-gateway-peer:443';

export interface PeerTls {
  cert: string;
  key: string;
  /** CA of the replicas' peer certificates. */
  ca: string;
}

export interface PeerServerOptions {
  tls: PeerTls;
  /** This replica's own tunnel of `cluster`, if it holds one. */
  dialLocal: (cluster: string, kind: TunnelStreamKind) => Promise<Duplex> | undefined;
  log: {
    info(fields: object, message: string): void;
    warn(fields: object, message: string): void;
    debug(fields: object, message: string): void;
  };
}

/** The peer port: streams of this replica's tunnels, for the other replicas (mutual TLS only). */
export class PeerServer {
  readonly #server: http2.Http2SecureServer;
  readonly #o: PeerServerOptions;
  readonly #sessions = new Set<http2.ServerHttp2Session>();

  constructor(options: PeerServerOptions) {
    this.#o = options;
    this.#server = http2.createSecureServer({
      cert: options.tls.cert,
      key: options.tls.key,
      ca: options.tls.ca,
      // The TLS handshake itself refuses a client without a certificate signed by the peer CA.
      requestCert: true,
      rejectUnauthorized: true,
      allowHTTP1: false,
      minVersion: 'TLSv1.2',
      settings: { enablePush: false, initialWindowSize: streamWindowBytes },
      maxSessionMemory: 64,
    });
    this.#server.on('tlsClientError', (err, socket) => {
      options.log.warn(
        { remote: (socket as tls.TLSSocket).remoteAddress, err: err.message },
        'peer connection refused: no valid peer client certificate',
      );
    });
    this.#server.on('session', (session) => {
      this.#sessions.add(session);
      session.once('close', () => this.#sessions.delete(session));
      try {
        session.setLocalWindowSize(connectionWindowBytes);
      } catch {
        // closed during the handshake
      }
    });
    this.#server.on('stream', (stream, headers) => this.#onStream(stream, headers));
  }

  async listen(port: number, host: string): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    return (this.#server.address() as AddressInfo).port;
  }

  /** New certificate, key or CA (rotated files): new handshakes use them, open sessions stay. */
  setTls(next: PeerTls): void {
    this.#server.setSecureContext({ cert: next.cert, key: next.key, ca: next.ca });
  }

  /** Stops listening and cuts the peers' sessions (their streams ride tunnels that are going too). */
  close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const session of this.#sessions) session.destroy();
    return closed;
  }

  #onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on('error', () => {});
    const socket = stream.session?.socket as tls.TLSSocket | undefined;
    // Belt and braces: rejectUnauthorized already ended any session without a verified certificate.
    if (!socket?.authorized) return void refuse(stream, 403, 'peer client certificate not verified');
    const cluster = String(headers[peerClusterHeader] ?? '');
    const kindHeader = headers[tunnelStreamHeader];
    const kind: TunnelStreamKind =
      kindHeader === undefined ? 'relay' : (String(kindHeader) as TunnelStreamKind);
    if (headers[':method'] !== 'CONNECT' || !cluster || (kind !== 'relay' && kind !== 'impersonate')) {
      return void refuse(stream, 400, 'expected CONNECT with a cluster and a stream kind');
    }
    const dialing = this.#o.dialLocal(cluster, kind);
    if (!dialing) {
      return void refuse(stream, 503, `this replica holds no tunnel of cluster "${cluster}"`);
    }
    dialing.then(
      (upstream) => {
        if (stream.destroyed) return void upstream.destroy();
        stream.respond({ ':status': 200 });
        pipeBoth(stream, upstream);
      },
      (err: Error) => refuse(stream, 502, err.message),
    );
  }
}

function refuse(stream: http2.ServerHttp2Stream, status: number, why: string): void {
  if (stream.destroyed || stream.headersSent) return;
  // Header values must be printable ASCII: the reason is ours, but a cluster name could be long.
  stream.respond(
    { ':status': status, [tunnelErrorHeader]: why.replace(/[^\x20-\x7e]/g, '?').slice(0, 500) },
    { endStream: true },
  );
}

/** After one side closes, how long the other may take to flush what it still holds. */
const CLOSE_GRACE_MS = 5_000;

/**
 * Bytes both ways; either side closing ends the other, which is destroyed only if it has not
 * closed after CLOSE_GRACE_MS. Destroying an HTTP/2 stream at once resets it (RST_STREAM CANCEL)
 * and drops the DATA still queued: the last bytes of an exec session (its exit status, the
 * WebSocket close frame) forwarded from the agent would be lost on the way to the other replica.
 */
function pipeBoth(a: Duplex, b: Duplex): void {
  a.pipe(b);
  b.pipe(a);
  a.on('error', () => {});
  b.on('error', () => {});
  const closing = (other: Duplex) => () => {
    if (other.destroyed) return;
    other.end();
    const timer = setTimeout(() => other.destroy(), CLOSE_GRACE_MS).unref();
    other.once('close', () => clearTimeout(timer));
  };
  a.once('close', closing(b));
  b.once('close', closing(a));
}

export interface PeerClientOptions {
  tls: PeerTls;
  /** Opening one stream through a peer may take this long (default 5 s). */
  dialTimeoutMs?: number;
  keepalive?: { intervalMs: number; timeoutMs: number };
}

/** Opens tunnel streams through the replica holding them. */
export class PeerClient {
  #o: PeerClientOptions;
  readonly #sessions = new Map<string, http2.ClientHttp2Session>();

  constructor(options: PeerClientOptions) {
    this.#o = options;
  }

  /** One stream of `cluster`'s tunnel held by the replica `replica` at `address` (host:port). */
  dial(address: string, replica: string, cluster: string, kind: TunnelStreamKind): Promise<Duplex> {
    const where = `the gateway replica "${replica}" (${address}) that holds the tunnel of cluster "${cluster}"`;
    let stream: http2.ClientHttp2Stream;
    try {
      stream = this.#session(address).request(
        {
          ':method': 'CONNECT',
          ':authority': peerAuthority,
          [peerClusterHeader]: cluster,
          ...(kind === 'relay' ? {} : { [tunnelStreamHeader]: kind }),
        },
        { endStream: false },
      );
    } catch (err) {
      return Promise.reject(new Error(`cannot reach ${where}: ${(err as Error).message}`));
    }
    return awaitTunnelStream(stream, kind, this.#o.dialTimeoutMs ?? 5_000, {
      timedOut: (ms) => `no answer within ${ms} ms from ${where}`,
      refused: (status, cause) => `${where} could not open a stream (${status}${cause ? `: ${cause}` : ''})`,
      failed: (err) => `cannot reach ${where}: ${err.message}`,
      closed: () => `${where} closed the stream`,
    });
  }

  /** New certificate, key or CA: sessions opened from now on use them (open ones finish as they are). */
  setTls(next: PeerTls): void {
    this.#o = { ...this.#o, tls: next };
    for (const session of this.#sessions.values()) session.close();
    this.#sessions.clear();
  }

  close(): void {
    for (const session of this.#sessions.values()) session.destroy();
    this.#sessions.clear();
  }

  #session(address: string): http2.ClientHttp2Session {
    const existing = this.#sessions.get(address);
    if (existing && !existing.closed && !existing.destroyed) return existing;
    const session = http2.connect(`https://${address}`, {
      cert: this.#o.tls.cert,
      key: this.#o.tls.key,
      ca: this.#o.tls.ca,
      // Replicas are dialled by pod IP, which their certificates need not name: the dedicated peer
      // CA is the trust anchor, any certificate it signed is a replica (see --tunnel-peer-ca).
      checkServerIdentity: () => undefined,
      settings: { enablePush: false, initialWindowSize: streamWindowBytes },
      maxSessionMemory: 64,
    });
    session.on('error', () => {}); // each stream reports its own failure
    session.once('connect', () => {
      try {
        session.setLocalWindowSize(connectionWindowBytes);
      } catch {
        // closed during the handshake
      }
    });
    const stop = keepAlive(session, this.#o.keepalive ?? defaultKeepalive);
    session.once('close', () => {
      stop();
      if (this.#sessions.get(address) === session) this.#sessions.delete(address);
    });
    // Idle peer sessions do not keep the process alive.
    session.unref();
    this.#sessions.set(address, session);
    return session;
  }
}
