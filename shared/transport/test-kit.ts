/**
 * Test fixtures for the connection layer: a CA with a serving certificate for 127.0.0.1 and a
 * client certificate, HTTPS servers standing in for a managed kube-apiserver, and a poll helper.
 * Everything listens on 127.0.0.1 port 0 and is torn down with its sockets.
 */
import type http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { createCertificateAuthority, type KeyPair } from '../pki.ts';
import type { TransportTarget } from './target.ts';

export interface TestPki {
  ca: string;
  server: KeyPair;
  client: KeyPair;
}

let pki: Promise<TestPki> | undefined;

/** One CA and its certificates per test process (ECDSA: milliseconds). */
export function testPki(): Promise<TestPki> {
  pki ??= (async () => {
    const ca = await createCertificateAuthority('proxy-test-ca');
    const server = await ca.issue({
      commonName: 'kube-apiserver',
      dnsNames: ['localhost', 'kubernetes.default.svc'],
      ipAddresses: ['127.0.0.1'],
      usage: 'server',
    });
    const client = await ca.issue({
      commonName: 'gateway',
      organizations: ['system:masters'],
      usage: 'client',
    });
    return { ca: ca.cert, server, client };
  })();
  return pki;
}

export interface TestServer<S extends http.Server = http.Server> {
  server: S;
  port: number;
  /** Destroys every open connection (HTTP/1.1 sockets and HTTP/2 sessions alike), keeps listening. */
  dropConnections(): void;
  close(): Promise<void>;
}

/** Listens on 127.0.0.1:0 and tracks sockets, so close() also ends upgraded connections. */
export async function listen<S extends http.Server>(server: S): Promise<TestServer<S>> {
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('secureConnection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    port: (server.address() as AddressInfo).port,
    dropConnections: () => {
      for (const socket of sockets) socket.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * An HTTPS server standing in for a managed kube-apiserver. Like kube-apiserver it offers HTTP/2
 * (ALPN h2) and serves HTTP/1.1 too, upgrades included; `http1Only` is a server without h2.
 */
export async function startUpstream(
  handler: http.RequestListener,
  options: { requestCert?: boolean; http1Only?: boolean } = {},
): Promise<TestServer<https.Server>> {
  const { ca, server } = await testPki();
  const tlsOptions = { cert: server.cert, key: server.key, ca, requestCert: options.requestCert };
  if (options.http1Only) return listen(https.createServer(tlsOptions, handler));
  const both = http2.createSecureServer(
    { ...tlsOptions, allowHTTP1: true },
    handler as unknown as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
  );
  // The same listen/close plumbing: the two servers share net.Server's API.
  return listen(both as unknown as https.Server);
}

/** Resolves once `check` returns true, polling; rejects after `ms`. */
export async function eventually(check: () => boolean, ms = 1000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A direct endpoint at a test upstream, trusting the test CA, with a token. */
export async function directTarget(name: string, port: number, key = 'key-1'): Promise<TransportTarget> {
  return {
    name,
    key,
    endpoint: {
      kind: 'direct',
      url: `https://127.0.0.1:${port}`,
      caBundle: (await testPki()).ca,
      insecure: false,
    },
    credential: { token: 'cluster-token' },
  };
}
