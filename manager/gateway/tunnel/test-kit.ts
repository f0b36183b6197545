/**
 * Test fixtures for the tunnel: a TLS gateway server whose upgrades go to the attach handler (with a
 * stand-in authenticator that reads the user from a header, and a stand-in authorizer), and the
 * agent's hub connection to it. The agent side is the real one (agent/tunnel).
 */
import type http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import type { Connection } from '../../../agent/connection/kubeconfig.ts';
import { writeStatusToSocket } from '../../../shared/forward/reply.ts';
import type { UserInfo } from '../../../shared/identity/user.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import type { Authenticator, AuthorizationAttributes, Authorizer } from '../auth/contracts.ts';
import type { TunnelEndpoint } from '../clusters/cluster.ts';
import { listen, type TestServer, testPki } from '../proxy/test-kit.ts';
import { createAttachHandler, matchAttachPath } from './attach.ts';
import { TunnelRegistry } from './registry.ts';

export const agentUser = (cluster: string, addon = 'cluster-gateway') =>
  `system:open-cluster-management:cluster:${cluster}:addon:${addon}:agent:addon-agent`;

/** The user is whatever the x-test-user header says (the front-proxy authenticator's stand-in). */
export const headerAuthenticator: Authenticator = {
  async authenticate(req: http.IncomingMessage): Promise<UserInfo | undefined> {
    const name = req.headers['x-test-user'];
    return typeof name === 'string' ? { name, groups: [], extra: {} } : undefined;
  },
};

/** Allows what `allow` returns true for, and records every question. */
export function recordingAuthorizer(allow: (user: UserInfo, a: AuthorizationAttributes) => boolean) {
  const asked: AuthorizationAttributes[] = [];
  const authorizer: Authorizer = {
    async authorize(user, attributes) {
      asked.push(attributes);
      return allow(user, attributes)
        ? { allowed: true, reason: '' }
        : { allowed: false, reason: 'no RBAC rule' };
    },
  };
  return { authorizer, asked };
}

export interface TestGateway {
  server: TestServer<https.Server>;
  tunnels: TunnelRegistry;
  /** Tunnel endpoints as the cluster registry received them. */
  endpoints: Map<string, TunnelEndpoint>;
  logs: { level: string; fields: object; message: string }[];
  /** The agent's hub connection to this gateway, as the given user. */
  connection(user: string): Promise<Connection>;
  close(): Promise<void>;
}

export async function startTestGateway(
  options: {
    authorizer?: Authorizer;
    keepalive?: { intervalMs: number; timeoutMs: number };
    reauthorizeMs?: number;
  } = {},
): Promise<TestGateway> {
  const pki = await testPki();
  const endpoints = new Map<string, TunnelEndpoint>();
  const logs: TestGateway['logs'] = [];
  const tunnels = new TunnelRegistry({
    sink: {
      setTunnel: (cluster, endpoint) =>
        endpoint ? endpoints.set(cluster, endpoint) : endpoints.delete(cluster),
    },
    drainGraceMs: 1_000,
  });
  const handler = createAttachHandler({
    authenticator: headerAuthenticator,
    authorizer: options.authorizer ?? recordingAuthorizer(() => true).authorizer,
    tunnels,
    addonName: 'cluster-gateway',
    log: {
      info: (fields, message) => logs.push({ level: 'info', fields, message }),
      warn: (fields, message) => logs.push({ level: 'warn', fields, message }),
    },
    ...(options.keepalive ? { keepalive: options.keepalive } : {}),
    ...(options.reauthorizeMs ? { reauthorizeMs: options.reauthorizeMs } : {}),
  });
  const httpsServer = https.createServer({ cert: pki.server.cert, key: pki.server.key }, (_req, res) =>
    res.writeHead(404).end(),
  );
  httpsServer.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const cluster = matchAttachPath(req.url ?? '');
    if (cluster === undefined) return void socket.destroy();
    handler.attach(req, socket, head, cluster).catch((err: unknown) => {
      writeStatusToSocket(socket, err instanceof StatusError ? err.status : failureStatus(500, String(err)));
    });
  });
  const server = await listen(httpsServer);
  return {
    server,
    tunnels,
    endpoints,
    logs,
    async connection(user) {
      return {
        server: `https://127.0.0.1:${server.port}`,
        options: { ca: pki.ca, headers: { 'x-test-user': user } },
        fingerprint: user,
      };
    },
    async close() {
      await tunnels.drainAll(100);
      await server.close();
    },
  };
}
