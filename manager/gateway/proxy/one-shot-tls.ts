/**
 * TLS for one-shot connections (a health probe of a cluster without traffic) with no TLS context of
 * the cluster's own.
 *
 * A pool's context (OpenSSL's SSL_CTX, holding the cluster's CA) costs 37.8 KB of native memory to
 * keep and 260 µs or more of CPU to build, so a pool drops it 30 s after its last new connection
 * (pool.ts, heldContext). At 1,000 clusters each is probed every 40 s, so every probe built one and
 * threw it away: about 450 µs of the probe's CPU (docs/benchmarks.md, "One TLS context for every
 * probe"), and a plateau of native memory from the churn of contexts that the process never returns.
 *
 * Instead, every one-shot connection of a cluster whose trust is its CA bundle alone (no client
 * certificate, verification not skipped) uses one shared context without a CA and
 * `rejectUnauthorized: false`, and the gateway decides trust itself, before anything is written:
 * - a full handshake is accepted when isDirectlyTrustedServer says so (x509-chain.ts: the leaf is
 *   in the bundle, or signed directly by a CA in it; valid; serverAuth; the host in its SANs);
 * - a resumed handshake is accepted: the only sessions offered are the ones this cluster's pool
 *   stored after a handshake it accepted, and resuming one proves the server holds its secret.
 * Anything else (a chain with intermediates, name constraints, a certificate that fails a rule) is
 * not judged here: the connection is closed unused and this pool's one-shot connections go through
 * OpenSSL with the cluster's CA from then on, as before, so a refusal always carries OpenSSL's
 * verdict and wording. This code can only say yes to a subset of what OpenSSL accepts.
 */
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { isDirectlyTrustedServer, parsePemBundle } from '../auth/x509-chain.ts';

/**
 * A connection option (a symbol, so it never reaches the wire) that gives a connection its TLS
 * context, instead of the pool's (pool.ts, limitConnect and dialWith).
 */
export const connectionContext: unique symbol = Symbol('connectionContext');

/** What an opened one-shot connection is given on top of the pool's own options. */
export interface OneShotTlsOptions {
  [connectionContext]: tls.SecureContext;
  rejectUnauthorized: false;
  session?: Buffer;
}

let sharedContext: tls.SecureContext | undefined;

/** One context for every such connection: OpenSSL's verdict on it is not used. */
function sharedOneShotContext(): tls.SecureContext {
  sharedContext ??= tls.createSecureContext({});
  return sharedContext;
}

export class OneShotTrust {
  readonly #caBundle: string;
  readonly #host: string;
  /** The last session of a connection this pool accepted, offered to the next one. */
  #session: Buffer | undefined;
  #deferred = false;

  /** `host`: the name the cluster's certificate must carry (the TLS server name, or the IP address). */
  constructor(caBundle: string, host: string) {
    this.#caBundle = caBundle;
    this.#host = host;
  }

  /** False once a handshake was not vouched for here: OpenSSL verifies this pool's connections. */
  get active(): boolean {
    return !this.#deferred;
  }

  /**
   * Opens a connection with the shared context and resolves once its handshake is accepted, or
   * with undefined (the connection closed, nothing written) when OpenSSL must decide. Rejects with
   * the connection's error (refused, timed out, reset).
   */
  async connect(open: (options: OneShotTlsOptions) => Promise<Duplex>): Promise<Duplex | undefined> {
    const socket = (await open({
      [connectionContext]: sharedOneShotContext(),
      rejectUnauthorized: false,
      ...(this.#session ? { session: this.#session } : {}),
    })) as tls.TLSSocket;
    let accepted = false;
    let early: Buffer | undefined;
    // TLS 1.3 tickets may come before or after 'secureConnect': keep one only once accepted.
    socket.on('session', (session: Buffer) => {
      if (accepted) this.#session = session;
      else early = session;
    });
    await handshake(socket);
    if (socket.isSessionReused() || this.#vouchFor(socket)) {
      accepted = true;
      if (early) this.#session = early;
      return socket;
    }
    this.#deferred = true;
    this.#session = undefined;
    socket.destroy();
    return undefined;
  }

  #vouchFor(socket: tls.TLSSocket): boolean {
    const leaf = socket.getPeerX509Certificate();
    if (!leaf) return false;
    try {
      return isDirectlyTrustedServer(leaf, parsePemBundle(this.#caBundle), this.#host);
    } catch {
      return false; // a bundle Node cannot parse: OpenSSL says what is wrong with it
    }
  }
}

/** Resolves on 'secureConnect'; rejects with the socket's error, or if it closes first. */
function handshake(socket: tls.TLSSocket): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (err?: Error) => {
      socket.removeListener('secureConnect', ok);
      socket.removeListener('error', done);
      socket.removeListener('close', closed);
      if (err) reject(err);
      else resolve();
    };
    const ok = () => done();
    const closed = () => done(new Error('the connection closed during the TLS handshake'));
    socket.once('secureConnect', ok);
    socket.once('error', done);
    socket.once('close', closed);
  });
}
