/**
 * Test fixtures for the proxy: a CA with a serving certificate for
 * 127.0.0.1, HTTPS "managed cluster" servers, a front HTTP server that routes
 * proxy URLs to a ClusterProxy, and a small request helper. Everything listens
 * on 127.0.0.1 port 0 and is torn down with its sockets.
 */
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { createCertificateAuthority, type KeyPair } from '../../../shared/pki.ts';
import type { UserInfo } from '../auth/user.ts';
import type { ClusterTarget, ConstEndpoint, Credential, Endpoint } from '../clusters/cluster.ts';
import { type ClusterProxy, createClusterProxy } from './cluster-proxy.ts';
import { parseProxyPath } from './path.ts';

export const PROXY_PREFIX = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways/';

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

/**
 * The gateway's front door as the API server would wire it: parse the proxy
 * URL, look the cluster up, hand over to the proxy.
 */
export function startFront(
  proxy: ClusterProxy,
  clusters: (name: string) => ClusterTarget | undefined,
  identity?: (req: http.IncomingMessage) => UserInfo | undefined,
): Promise<TestServer> {
  const server = http.createServer((req, res) => {
    const parsed = parseProxyPath(req.url ?? '');
    const target = parsed && clusters(parsed.cluster);
    if (!parsed || !target) {
      res.writeHead(404).end();
      return;
    }
    proxy.handleRequest(req, res, target, parsed.upstreamPath, identity?.(req));
  });
  server.on('upgrade', (req: http.IncomingMessage, socket: Socket, head: Buffer) => {
    const parsed = parseProxyPath(req.url ?? '');
    const target = parsed && clusters(parsed.cluster);
    if (!parsed || !target) {
      socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    proxy.handleUpgrade(req, socket, head, target, parsed.upstreamPath, identity?.(req));
  });
  return listen(server);
}

export interface ProxyFixture {
  proxy: ClusterProxy;
  front: TestServer;
  /** Closes the front server, the proxy and the upstream. */
  close(): Promise<void>;
}

/** A fresh ClusterProxy behind a front server whose one cluster, "c1", is `upstream` (Const endpoint). */
export async function proxyTo(upstream: TestServer): Promise<ProxyFixture> {
  const proxy = createClusterProxy();
  const target = clusterTarget('c1', await constEndpoint(upstream.port));
  const front = await startFront(proxy, (name) => (name === 'c1' ? target : undefined));
  return {
    proxy,
    front,
    close: async () => {
      await front.close();
      proxy.close();
      await upstream.close();
    },
  };
}

export function clusterTarget(
  name: string,
  endpoint: Endpoint,
  credential: Credential = { type: 'ServiceAccountToken', token: 'cluster-token' },
  connectionKey = 'key-1',
): ClusterTarget {
  return {
    name,
    labels: {},
    annotations: {},
    creationTimestamp: '2026-01-01T00:00:00Z',
    resourceVersion: '1',
    endpoint,
    credential,
    health: { healthy: true },
    connectionKey,
  };
}

/** A Const endpoint at the test upstream, trusting the test CA. */
export async function constEndpoint(port: number, path = ''): Promise<ConstEndpoint> {
  return {
    type: 'Const',
    address: `https://127.0.0.1:${port}${path}`,
    caBundle: (await testPki()).ca,
    insecure: false,
  };
}

export interface Reply {
  status: number;
  statusMessage: string;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
}

/** One request with a fresh connection; resolves with the whole response. */
export function send(
  port: number,
  path: string,
  options: { method?: string; headers?: http.OutgoingHttpHeaders | string[]; body?: string | Buffer } = {},
): Promise<Reply> {
  // Raw header arrays are sent as they are: Node adds no Host, and its server requires one.
  const headers = Array.isArray(options.headers)
    ? ['Host', `127.0.0.1:${port}`, ...options.headers]
    : options.headers;
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path, method: options.method ?? 'GET', headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            statusMessage: res.statusMessage ?? '',
            headers: res.headers,
            rawHeaders: res.rawHeaders,
            body: Buffer.concat(chunks).toString(),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** All values of one header in a raw header array, in order. */
export function headerValues(raw: readonly string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) out.push(raw[i + 1]!);
  return out;
}

/** Resolves once `check` returns true, polling; rejects after `ms`. */
export async function eventually(check: () => boolean, ms = 1000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
