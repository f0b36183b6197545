/**
 * TLS for one-shot connections (a health probe of a cluster without traffic) with no TLS context of
 * the cluster's own.
 *
 * A pool's context (OpenSSL's SSL_CTX, holding the cluster's CA) costs 37.8 KB of native memory to
 * keep and 260 µs or more of CPU to build, so a pool drops it 30 s after its last new connection
 * (tls-context.ts, heldContext). At 1,000 clusters each is probed every 40 s, so every probe built one and
 * threw it away: about 450 µs of the probe's CPU (docs/benchmarks-log.md, "One TLS context for every
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
 *
 * These connections offer TLS 1.2 at most, while the server accepts it. Resuming a TLS 1.3 session
 * still runs a key exchange (Go's servers only resume with psk_dhe_ke, and the default group is
 * X25519MLKEM768); resuming a TLS 1.2 session is symmetric cryptography only. Measured against the
 * environment's kube-apiserver, one resumed connection with a GET /healthz: 1,311 µs of the
 * gateway's CPU with TLS 1.3, 731 µs with TLS 1.2 (docs/benchmarks-log.md), and the cluster's
 * apiserver is spared the same. The full handshake is ECDHE with the suite the server picks (Go's:
 * AES-GCM or ChaCha20-Poly1305) and the extended master secret; what a resumed 1.2 session gives up
 * is forward secrecy against theft of the server's session-ticket key, which Go rotates daily, for
 * one GET /healthz carrying the gateway's token for that very server. A server that refuses TLS 1.2
 * (--tls-min-version=VersionTLS13) is answered at once with TLS 1.3, and from then on.
 */
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { isDirectlyTrustedServer, parsePemBundle } from '../x509-chain.ts';

/**
 * A connection option (a symbol, so it never reaches the wire) that gives a connection its TLS
 * context, instead of the pool's (connect-direct.ts, limitConnect; dialed-agent.ts, dialWith).
 */
export const connectionContext: unique symbol = Symbol('connectionContext');

/** What an opened one-shot connection is given on top of the pool's own options. */
export interface OneShotTlsOptions {
  [connectionContext]: tls.SecureContext;
  rejectUnauthorized: false;
  session?: Buffer;
}

const sharedContexts: { tls12?: tls.SecureContext; tls13?: tls.SecureContext } = {};

/** One context for every such connection (two: TLS 1.2 at most, or any): OpenSSL's verdict on it is not used. */
function sharedOneShotContext(upToTls12: boolean): tls.SecureContext {
  const which = upToTls12 ? 'tls12' : 'tls13';
  sharedContexts[which] ??= tls.createSecureContext(upToTls12 ? { maxVersion: 'TLSv1.2' } : {});
  return sharedContexts[which];
}

// OpenSSL's codes for a server that would not speak TLS 1.2 (its protocol_version alert, or no common version).
const NO_TLS12 = new Set(['ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION', 'ERR_SSL_UNSUPPORTED_PROTOCOL']);

export class OneShotTrust {
  readonly #caBundle: string;
  readonly #host: string;
  /** The last session of a connection this pool accepted, offered to the next one. */
  #session: Buffer | undefined;
  #deferred = false;
  #upToTls12 = true;

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
    try {
      return await this.#connect(open);
    } catch (err) {
      if (!this.#upToTls12 || !NO_TLS12.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
      this.#upToTls12 = false;
      this.#session = undefined;
      return this.#connect(open);
    }
  }

  async #connect(open: (options: OneShotTlsOptions) => Promise<Duplex>): Promise<Duplex | undefined> {
    const socket = (await open({
      [connectionContext]: sharedOneShotContext(this.#upToTls12),
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
