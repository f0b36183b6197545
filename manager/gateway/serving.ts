/**
 * The gateway's TLS endpoint. Its serving certificate comes from files
 * (reloaded when they change, so cert-manager rotation needs no restart) or
 * is made at start-up; the client CAs it asks certificates for come from
 * kube-system/extension-apiserver-authentication and change with it.
 */
import { readFileSync, watchFile } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { createCertificateAuthority, type KeyPair } from '../../shared/pki.ts';

export interface ServingOptions {
  certFile?: string;
  keyFile?: string;
  /** Names for a self-signed certificate when no files are given. */
  selfSignedNames?: string[];
  limits?: ConnectionLimits;
}

/** Bounds on client connections, so that no client can hold memory the gateway cannot get back. */
export interface ConnectionLimits {
  /** Open connections at most; Node closes further ones at accept. */
  maxConnections: number;
  /** TLS handshake, the wait for a first request, and the headers of each request. */
  requestHeaderTimeoutMs: number;
  /** Keep-alive idle time between requests. */
  idleConnectionTimeoutMs: number;
}

export const defaultConnectionLimits: ConnectionLimits = {
  maxConnections: 4096,
  requestHeaderTimeoutMs: 32_000,
  idleConnectionTimeoutMs: 65_000,
};

export class ServingEndpoint {
  readonly server: https.Server;
  #pair: KeyPair;
  #clientCAs: string[] = [];

  private constructor(pair: KeyPair, limits: ConnectionLimits) {
    this.#pair = pair;
    const headerTimeout = limits.requestHeaderTimeoutMs;
    this.server = https.createServer({
      ...pair,
      // Client certificates are optional (tokens work too) and verified per
      // request against the right CA: the front-proxy CA for X-Remote-* headers.
      requestCert: true,
      rejectUnauthorized: false,
      handshakeTimeout: headerTimeout,
      // Watches and logs -f stay open for as long as the client wants.
      requestTimeout: 0,
      headersTimeout: headerTimeout,
      keepAliveTimeout: limits.idleConnectionTimeoutMs,
      // How often Node looks for requests past headersTimeout (default 30 s).
      connectionsCheckingInterval: Math.min(headerTimeout, 1000),
    });
    this.server.maxConnections = limits.maxConnections;
    this.server.on('secureConnection', (socket) => {
      // A connection's client certificate is verified once and remembered
      // (auth/peer-verification.ts): renegotiation could swap it mid-connection.
      socket.disableRenegotiation();
      this.#awaitFirstRequest(socket, headerTimeout);
    });
    const requested = (req: IncomingMessage) => this.#firstRequestTimers.get(req.socket)?.();
    this.server.on('request', requested);
    this.server.on('upgrade', requested);
  }

  /**
   * Node bounds the headers of a request once its first byte has arrived
   * (headersTimeout) and the idle time after a response (keepAliveTimeout),
   * but nothing bounds a connection that completes its handshake and then
   * sends nothing: thousands of those would hold their memory for ever. Such
   * a connection gets the time of a request's headers to send a whole
   * request. (Watching the socket's 'data' instead would turn off the
   * parser's direct read from the TLS handle for every connection.)
   */
  #firstRequestTimers = new WeakMap<object, () => void>();

  #awaitFirstRequest(socket: TLSSocket, timeoutMs: number): void {
    const timer = setTimeout(() => socket.destroy(), timeoutMs);
    timer.unref();
    const clear = () => {
      clearTimeout(timer);
      this.#firstRequestTimers.delete(socket);
    };
    this.#firstRequestTimers.set(socket, clear);
    socket.once('close', clear);
  }

  static async create(
    options: ServingOptions,
    log: { info(o: object, m: string): void },
  ): Promise<ServingEndpoint> {
    const limits = options.limits ?? defaultConnectionLimits;
    if (options.certFile && options.keyFile) {
      const { certFile, keyFile } = options;
      const read = () => ({ cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') });
      const endpoint = new ServingEndpoint(read(), limits);
      watchFile(certFile, { interval: 5000, persistent: false }, () => {
        try {
          endpoint.#pair = read();
          endpoint.#apply();
          log.info({ certFile }, 'serving certificate reloaded');
        } catch {
          // half-written file: the next change event retries
        }
      });
      return endpoint;
    }
    const ca = await createCertificateAuthority('cluster-gateway-self-signed');
    const pair = await ca.issue({
      commonName: 'cluster-gateway',
      dnsNames: options.selfSignedNames ?? ['localhost'],
      ipAddresses: ['127.0.0.1'],
      usage: 'server',
    });
    log.info({}, 'no --tls-cert-file: serving with a self-signed certificate');
    return new ServingEndpoint(pair, limits);
  }

  /** CAs whose client certificates the TLS handshake requests and accepts. */
  setClientCAs(cas: string[]): void {
    this.#clientCAs = cas;
    this.#apply();
  }

  #apply(): void {
    this.server.setSecureContext({
      ...this.#pair,
      ...(this.#clientCAs.length > 0 ? { ca: this.#clientCAs } : {}),
    });
  }

  listen(
    port: number,
    host: string,
    handlers: {
      request: (req: IncomingMessage, res: ServerResponse) => void;
      upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
    },
  ): Promise<number> {
    this.server.on('request', handlers.request);
    this.server.on('upgrade', handlers.upgrade);
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        const address = this.server.address();
        resolve(typeof address === 'object' && address ? address.port : port);
      });
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
