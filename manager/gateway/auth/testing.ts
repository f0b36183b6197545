/**
 * Test fixtures for the auth tests (not imported by production code): a
 * loopback HTTPS server playing the hub's review endpoints, and a loopback
 * HTTPS server that runs an authenticator on each request the way the
 * gateway's server does.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { KubeClient } from '../../../shared/kube/client.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import { type CertificateAuthority, createCertificateAuthority, type KeyPair } from '../../../shared/pki.ts';
import type { Authenticator } from './contracts.ts';

let serverCA: Promise<{ ca: CertificateAuthority; serving: KeyPair }> | undefined;

/** One CA and serving certificate for every loopback server of a test process. */
function servingCertificate() {
  serverCA ??= (async () => {
    const ca = await createCertificateAuthority('test-serving-ca');
    const serving = await ca.issue({ commonName: 'localhost', ipAddresses: ['127.0.0.1'], usage: 'server' });
    return { ca, serving };
  })();
  return serverCA;
}

export interface ReviewReply {
  code?: number;
  body: unknown;
}

export interface FakeKube {
  client: KubeClient;
  /** Review requests received, by path. */
  calls: Map<string, number>;
  /** Parsed bodies of the reviews received, in order. */
  bodies: Array<{ path: string; body: Record<string, unknown> }>;
  close(): Promise<void>;
}

/** An HTTPS server answering POSTs with `reply`; counts calls per path. */
export async function startFakeKube(
  reply: (path: string, body: Record<string, unknown>) => ReviewReply | Promise<ReviewReply>,
): Promise<FakeKube> {
  const { ca, serving } = await servingCertificate();
  const calls = new Map<string, number>();
  const bodies: FakeKube['bodies'] = [];
  const server = https.createServer({ ...serving }, async (req, res) => {
    let text = '';
    for await (const chunk of req) text += chunk;
    const path = req.url ?? '/';
    calls.set(path, (calls.get(path) ?? 0) + 1);
    const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    bodies.push({ path, body });
    const answer = await reply(path, body);
    res.writeHead(answer.code ?? 201, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer.body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const client = KubeClient.fromConnection(`https://127.0.0.1:${port}`, {
    ca: ca.cert,
    headers: { authorization: 'Bearer gateway-token' },
  });
  return {
    client,
    calls,
    bodies,
    async close() {
      client.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface AuthServer {
  port: number;
  /** The serving CA, for clients. */
  ca: string;
  close(): Promise<void>;
}

/**
 * An HTTPS server configured like the gateway's (client certificates
 * requested, not enforced by TLS, trusted CAs given), that answers every
 * request with the authenticated user and the headers left on the request
 * as JSON, or with the Status of the authentication error.
 */
export async function startAuthServer(
  authenticator: Authenticator,
  clientCAs: string[],
): Promise<AuthServer> {
  const { ca, serving } = await servingCertificate();
  const server = https.createServer(
    { ...serving, ca: clientCAs, requestCert: true, rejectUnauthorized: false },
    async (req: IncomingMessage, res: ServerResponse) => {
      try {
        const user = await authenticator.authenticate(req);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ user: user ?? null, headers: req.headers, rawHeaders: req.rawHeaders }));
      } catch (err) {
        const status = err instanceof StatusError ? err.status : failureStatus(500, String(err));
        res.writeHead(status.code, { 'content-type': 'application/json' });
        res.end(JSON.stringify(status));
      }
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    ca: ca.cert,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface ClientRequest {
  path?: string;
  headers?: Record<string, string | string[]>;
  /** Client certificate and key, PEM. */
  cert?: KeyPair;
  /** A keep-alive agent, to send several requests on one connection. */
  agent?: https.Agent;
}

/** One HTTPS request to a test server; resolves with status and parsed JSON body. */
export function request(
  server: AuthServer,
  options: ClientRequest = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port: server.port,
        path: options.path ?? '/apis/cluster.core.oam.dev/v1alpha1/clustergateways',
        method: 'GET',
        ca: server.ca,
        agent: options.agent ?? false,
        headers: options.headers ?? {},
        ...(options.cert ? { cert: options.cert.cert, key: options.cert.key } : {}),
      },
      async (res) => {
        let text = '';
        for await (const chunk of res) text += chunk;
        resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> });
      },
    );
    req.on('error', reject);
    req.end();
  });
}
