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
// Type only: pki.ts loads @peculiar/x509 (about 17 MB of RSS), needed only for a self-signed certificate.
import type { KeyPair } from '../../shared/pki.ts';
import {
  type ConnectionLimits,
  defaultConnectionLimits,
  guardConnections,
  serverTimeouts,
} from './connection-guard.ts';

export interface ServingOptions {
  certFile?: string;
  keyFile?: string;
  /** Names for a self-signed certificate when no files are given. */
  selfSignedNames?: string[];
  limits?: ConnectionLimits;
  /** How often the certificate files are checked for a change (default 5 s). */
  reloadIntervalMs?: number;
}

export class ServingEndpoint {
  readonly server: https.Server;
  #pair: KeyPair;
  #clientCAs: string[] = [];

  private constructor(pair: KeyPair, limits: ConnectionLimits) {
    this.#pair = pair;
    this.server = https.createServer({
      ...pair,
      // Client certificates are optional (tokens work too) and verified per
      // request against the right CA: the front-proxy CA for X-Remote-* headers.
      requestCert: true,
      rejectUnauthorized: false,
      ...serverTimeouts(limits),
    });
    // A connection's client certificate is verified once and remembered
    // (auth/peer-verification.ts): renegotiation could swap it mid-connection.
    this.server.on('secureConnection', (socket) => socket.disableRenegotiation());
    guardConnections(this.server, limits);
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
      const reload = () => {
        try {
          const pair = read();
          if (pair.cert === endpoint.#pair.cert && pair.key === endpoint.#pair.key) return;
          endpoint.#apply(pair); // throws on a certificate and key that do not match: nothing changes
          endpoint.#pair = pair;
          log.info({ certFile }, 'serving certificate reloaded');
        } catch {
          // Half written, or the certificate replaced and its key not yet (they are two files): the other
          // file's change event retries, so both are watched.
        }
      };
      const interval = options.reloadIntervalMs ?? 5000;
      for (const file of [certFile, keyFile]) watchFile(file, { interval, persistent: false }, reload);
      return endpoint;
    }
    const { createCertificateAuthority } = await import('../../shared/pki.ts');
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

  #apply(pair: KeyPair = this.#pair): void {
    this.server.setSecureContext({
      ...pair,
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
