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
 *   the peer port serves replicas only, each proven by its peer certificate (peer-identity.ts: a
 *   certificate of the hub's kube-apiserver-client signer naming the replica, checked by both ends
 *   right after the handshake, before any stream is served or opened). The holder trusts nothing
 *   else about the caller and reads no identity of its own from the peer.
 * - the dialling replica checks that the server is the replica the tunnel Lease names, so a Lease
 *   that names an address of someone else's choosing never receives a stream.
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
import { type PeerTrust, verifyPeerSocket } from './peer-identity.ts';

/** The cluster whose tunnel a peer stream is for. */
export const peerClusterHeader = 'x-cluster-gateway-cluster';
const peerAuthority = 'cluster-gateway-peer:443';

/** This replica's peer certificate and its key (PEM), used as server and as client on the peer port. */
export interface PeerTls {
  cert: string;
  key: string;
}

export interface PeerServerOptions {
  /** Absent until this replica holds a peer certificate: until then every handshake fails. */
  tls?: PeerTls;
  /** What a client must prove (read per connection: the hub's client CA may change). */
  trust: () => PeerTrust | undefined;
  /** This replica's own tunnel of `cluster`, if it holds one. */
  dialLocal: (cluster: string, kind: TunnelStreamKind) => Promise<Duplex> | undefined;
  log: {
    info(fields: object, message: string): void;
    warn(fields: object, message: string): void;
    debug(fields: object, message: string): void;
  };
}

/** The peer port: streams of this replica's tunnels, for the other replicas (verified peers only). */
export class PeerServer {
  readonly #server: http2.Http2SecureServer;
  readonly #o: PeerServerOptions;
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  /** Sessions whose client proved to be a replica; a stream on any other is refused. */
  readonly #verified = new WeakSet<http2.Http2Session>();

  constructor(options: PeerServerOptions) {
    this.#o = options;
    this.#server = http2.createSecureServer({
      ...(options.tls ? { cert: options.tls.cert, key: options.tls.key } : {}),
      // A client certificate is required, but verified here (peer-identity.ts), not by OpenSSL: the
      // hub signer's certificates are client-only, and the CN must name a replica.
      requestCert: true,
      rejectUnauthorized: false,
      allowHTTP1: false,
      minVersion: 'TLSv1.2',
      settings: { enablePush: false, initialWindowSize: streamWindowBytes },
      maxSessionMemory: 64,
    });
    this.#server.on('tlsClientError', (err, socket) => {
      options.log.debug(
        { remote: (socket as tls.TLSSocket).remoteAddress, err: err.message },
        'peer connection failed during the TLS handshake',
      );
    });
    // Emitted synchronously once the handshake is done, before the session reads a single frame:
    // a session refused here never has a stream served.
    this.#server.on('session', (session) => {
      const socket = session.socket as tls.TLSSocket;
      const check = verifyPeerSocket(socket, options.trust());
      if (!check.ok) {
        options.log.warn(
          { remote: socket.remoteAddress, err: check.reason },
          'peer connection refused: no valid peer client certificate',
        );
        session.destroy();
        return;
      }
      this.#verified.add(session);
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

  /** A new (renewed) certificate and key: new handshakes use them, open sessions stay. */
  setTls(next: PeerTls): void {
    this.#server.setSecureContext({ cert: next.cert, key: next.key });
  }

  /** Stops listening and cuts the peers' sessions (their streams ride tunnels that are going too). */
  close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const session of this.#sessions) session.destroy();
    return closed;
  }

  #onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on('error', () => {});
    // Belt and braces: an unverified session was destroyed before it could read this stream.
    if (!stream.session || !this.#verified.has(stream.session)) {
      return void refuse(stream, 403, 'peer client certificate not verified');
    }
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
  /** Absent until this replica holds a peer certificate: until then every dial fails. */
  tls?: PeerTls;
  /** What a server must prove (read per session). */
  trust: () => PeerTrust | undefined;
  /** Opening one stream through a peer, handshake and proof included, may take this long (default 5 s). */
  dialTimeoutMs?: number;
  keepalive?: { intervalMs: number; timeoutMs: number };
}

/** Why a peer could not be used: short, and never the network error of an address a Lease named. */
export type PeerRefusal = 'unreachable' | 'not a gateway replica' | 'no peer certificate yet';

/** A session to a peer that proved which replica it is. */
interface VerifiedSession {
  session: http2.ClientHttp2Session;
  replica: string;
}

/** Opens tunnel streams through the replica holding them, once it proved to be that replica. */
export class PeerClient {
  #o: PeerClientOptions;
  readonly #sessions = new Map<string, Promise<VerifiedSession>>();
  readonly #open = new Set<http2.ClientHttp2Session>();

  constructor(options: PeerClientOptions) {
    this.#o = options;
  }

  /**
   * Resolves once the server at `address` (host:port) proved, by its peer certificate, to be the
   * replica `replica` (opening a session to it, or reusing one); rejects with a short reason
   * ('unreachable', 'not a gateway replica') otherwise, and closes a session to anyone else.
   */
  async verify(address: string, replica: string): Promise<void> {
    await this.#verified(address, replica);
  }

  /** One stream of `cluster`'s tunnel held by the replica `replica` at `address` (host:port). */
  async dial(address: string, replica: string, cluster: string, kind: TunnelStreamKind): Promise<Duplex> {
    // The address came from a Lease: errors name the replica, never what the address answered.
    const where = `the gateway replica "${replica}" that holds the tunnel of cluster "${cluster}"`;
    let session: http2.ClientHttp2Session;
    try {
      session = await this.#verified(address, replica);
    } catch (err) {
      throw new Error(`cannot reach ${where}: ${(err as Error).message}`);
    }
    let stream: http2.ClientHttp2Stream;
    try {
      stream = session.request(
        {
          ':method': 'CONNECT',
          ':authority': peerAuthority,
          [peerClusterHeader]: cluster,
          ...(kind === 'relay' ? {} : { [tunnelStreamHeader]: kind }),
        },
        { endStream: false },
      );
    } catch {
      throw new Error(`cannot reach ${where}: unreachable`);
    }
    return awaitTunnelStream(stream, kind, this.#o.dialTimeoutMs ?? 5_000, {
      timedOut: (ms) => `no answer within ${ms} ms from ${where}`,
      refused: (status, cause) => `${where} could not open a stream (${status}${cause ? `: ${cause}` : ''})`,
      failed: () => `${where} failed the stream`,
      closed: () => `${where} closed the stream`,
    });
  }

  /** A renewed certificate and key: sessions opened from now on use them (open ones finish as they are). */
  setTls(next: PeerTls): void {
    this.#o = { ...this.#o, tls: next };
    for (const session of this.#open) session.close();
    this.#open.clear();
    this.#sessions.clear();
  }

  close(): void {
    for (const session of this.#open) session.destroy();
    this.#open.clear();
    this.#sessions.clear();
  }

  async #verified(address: string, replica: string): Promise<http2.ClientHttp2Session> {
    const verified = await this.#session(address);
    if (verified.replica !== replica) {
      // Another replica (a stale Lease, a reused pod IP) or a Lease naming someone else's address.
      verified.session.close();
      this.#forget(address, verified.session);
      throw new Error('not a gateway replica');
    }
    return verified.session;
  }

  #forget(address: string, session: http2.ClientHttp2Session): void {
    this.#open.delete(session);
    void this.#sessions.get(address)?.then(
      (v) => {
        if (v.session === session) this.#sessions.delete(address);
      },
      () => {},
    );
  }

  /** The session to `address`, once its server proved which replica it is. */
  #session(address: string): Promise<VerifiedSession> {
    const existing = this.#sessions.get(address);
    if (existing) return existing;
    const opening = this.#connect(address);
    this.#sessions.set(address, opening);
    // A failed attempt is not remembered: the next dial tries again.
    opening.catch(() => {
      if (this.#sessions.get(address) === opening) this.#sessions.delete(address);
    });
    return opening;
  }

  #connect(address: string): Promise<VerifiedSession> {
    const pair = this.#o.tls;
    if (!pair) return Promise.reject(new Error('no peer certificate yet' satisfies PeerRefusal));
    return new Promise((resolve, reject) => {
      const session = http2.connect(`https://${address}`, {
        cert: pair.cert,
        key: pair.key,
        // The server's certificate is verified below (peer-identity.ts), not by OpenSSL: a peer
        // certificate is client-only and names a replica, not the pod IP it is dialled at.
        rejectUnauthorized: false,
        checkServerIdentity: () => undefined,
        settings: { enablePush: false, initialWindowSize: streamWindowBytes },
        maxSessionMemory: 64,
      });
      let settled = false;
      const fail = (why: PeerRefusal) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        session.destroy();
        reject(new Error(why));
      };
      const timer = setTimeout(() => fail('unreachable'), this.#o.dialTimeoutMs ?? 5_000);
      session.on('error', () => fail('unreachable')); // later: each stream reports its own failure
      session.once('close', () => {
        fail('unreachable');
        this.#forget(address, session);
      });
      session.once('connect', () => {
        const check = verifyPeerSocket(session.socket as tls.TLSSocket, this.#o.trust());
        if (!check.ok) return fail('not a gateway replica');
        settled = true;
        clearTimeout(timer);
        try {
          session.setLocalWindowSize(connectionWindowBytes);
        } catch {
          // closed meanwhile: the first stream reports it
        }
        const stop = keepAlive(session, this.#o.keepalive ?? defaultKeepalive);
        session.once('close', stop);
        // Idle peer sessions do not keep the process alive.
        session.unref();
        this.#open.add(session);
        resolve({ session, replica: check.replica });
      });
    });
  }
}
