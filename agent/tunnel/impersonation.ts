/**
 * The no-credential trust model, agent side: the hub holds no credential for this cluster, so the
 * gateway sends plain HTTP on `impersonate` streams (shared/tunnel/protocol.ts) and the agent
 * forwards each request to its own kube-apiserver with its own ServiceAccount token, as the hub
 * caller: Impersonate-User, -Uid and -Group as the gateway set them. The managed cluster then
 * authorizes the caller with its own RBAC; the agent's ServiceAccount may only impersonate
 * (manager/addon/deploy/agent-manifests.ts).
 *
 * Why this is safe to run:
 * - the only way in is a stream the gateway opened through the tunnel, which the agent dialled to
 *   the hub with its own credential and the gateway authenticated and bound to this cluster; the
 *   agent listens on no port for it;
 * - a request without Impersonate-User is refused: the agent never lends its own identity;
 * - the request's Authorization and every other Impersonate-* or X-Remote-* header are dropped and
 *   rebuilt (the gateway's proxy code does it: manager/gateway/proxy/headers.ts), so nothing the
 *   caller wrote reaches the apiserver as an identity claim. Impersonate-Extra-* is not passed: the
 *   agent's RBAC does not grant `impersonate userextras` (extras are hub-specific claims).
 *
 * The forwarding itself is the gateway's proxy (streaming, watches, exec and port-forward upgrades
 * over WebSocket and SPDY, framing checks), aimed at this cluster's apiserver and nowhere else.
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { UserInfo } from '../../manager/gateway/auth/user.ts';
import type { ClusterTarget, Credential } from '../../manager/gateway/clusters/cluster.ts';
import { type ClusterProxy, createClusterProxy } from '../../manager/gateway/proxy/cluster-proxy.ts';
import { writeStatus, writeStatusToSocket } from '../../manager/gateway/proxy/reply.ts';
import { failureStatus, type KubeStatus } from '../../shared/kube/status.ts';
import { asSocket } from '../../shared/tunnel/protocol.ts';
import type { Connection } from '../kubeconfig.ts';

export interface ImpersonationOptions {
  /** This cluster's name on the hub, for the messages the caller sees. */
  cluster: string;
  /** The agent's own managed-cluster connection (in-cluster ServiceAccount); read again every `reloadMs`. */
  spoke: () => Connection;
  log: { warn(o: object, m: string): void; debug(o: object, m: string): void };
  /** How long a read credential is used before the files are read again (the kubelet rotates the token). */
  reloadMs?: number;
  /** Counts each request by outcome: forwarded, refused (no identity), error (no credential). */
  onRequest?: (result: 'forwarded' | 'refused' | 'error') => void;
}

/** The caller the gateway asserted, from its Impersonate-* headers; undefined without Impersonate-User. */
export function impersonatedIdentity(raw: readonly string[]): UserInfo | undefined {
  let name: string | undefined;
  let uid: string | undefined;
  let users = 0;
  const groups: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const header = raw[i]!.toLowerCase();
    if (header === 'impersonate-user') {
      users++;
      name = raw[i + 1];
    } else if (header === 'impersonate-uid') uid = raw[i + 1];
    else if (header === 'impersonate-group') groups.push(raw[i + 1]!);
  }
  // Several users is not something the gateway writes: refuse rather than pick one.
  if (users !== 1 || !name) return undefined;
  return { name, groups, extra: {}, ...(uid ? { uid } : {}) };
}

/** The apiserver as the proxy sees a cluster: this agent's connection, its own token. */
export function spokeTarget(cluster: string, connection: Connection): ClusterTarget | string {
  const o = connection.options;
  let credential: Credential | undefined;
  if (connection.token) credential = { type: 'ServiceAccountToken', token: connection.token };
  else if (typeof o.cert === 'string' && typeof o.key === 'string') {
    credential = { type: 'X509Certificate', certificate: o.cert, privateKey: o.key };
  }
  if (!credential) return 'the agent has no credential of its own for its kube-apiserver';
  return {
    name: cluster,
    labels: {},
    annotations: {},
    creationTimestamp: '',
    resourceVersion: '0',
    endpoint: {
      type: 'Const',
      address: connection.server,
      ...(typeof o.ca === 'string' ? { caBundle: o.ca } : {}),
      insecure: o.rejectUnauthorized === false,
    },
    credential,
    health: { healthy: true },
    // The pool is rebuilt when any credential file changes.
    connectionKey: connection.fingerprint,
  };
}

export class ImpersonatingServer {
  readonly #o: ImpersonationOptions;
  readonly #server: http.Server;
  readonly #proxy: ClusterProxy;
  #target: { value: ClusterTarget | string; readAt: number } | undefined;

  constructor(options: ImpersonationOptions) {
    this.#o = options;
    this.#proxy = createClusterProxy({ logger: options.log });
    // Never listens: connections come only from serve(), i.e. from streams of the gateway's tunnel.
    this.#server = http.createServer({
      // The gateway holds requests open (watches, logs -f) and keeps idle connections 30 s.
      requestTimeout: 0,
      keepAliveTimeout: 65_000,
    });
    this.#server.on('request', (req, res) => this.#onRequest(req, res));
    this.#server.on('upgrade', (req, socket, head) => this.#onUpgrade(req, socket, head));
    this.#server.on('clientError', (_err, socket) => socket.destroy());
  }

  /** Serves HTTP/1.1 on one `impersonate` stream of the tunnel. */
  serve(stream: Duplex): void {
    this.#server.emit('connection', asSocket(stream));
  }

  close(): void {
    this.#proxy.close();
  }

  #currentTarget(): ClusterTarget | string {
    const now = Date.now();
    const cached = this.#target;
    if (cached && now - cached.readAt < (this.#o.reloadMs ?? 10_000)) return cached.value;
    let value: ClusterTarget | string;
    try {
      value = spokeTarget(this.#o.cluster, this.#o.spoke());
    } catch (err) {
      // Mid-rotation or unreadable: keep the previous credential if there was one.
      if (cached && typeof cached.value !== 'string') return cached.value;
      value = `the agent cannot read its credential: ${err instanceof Error ? err.message : String(err)}`;
    }
    this.#target = { value, readAt: now };
    return value;
  }

  #decide(req: http.IncomingMessage): { target: ClusterTarget; identity: UserInfo } | KubeStatus {
    const identity = impersonatedIdentity(req.rawHeaders);
    if (!identity) {
      this.#o.onRequest?.('refused');
      this.#o.log.warn(
        { method: req.method },
        'request on an impersonation stream without exactly one Impersonate-User: refused',
      );
      return failureStatus(
        403,
        'the cluster agent forwards requests only as an impersonated hub user (no-credential trust model): exactly one Impersonate-User header is required',
      );
    }
    const target = this.#currentTarget();
    if (typeof target === 'string') {
      this.#o.onRequest?.('error');
      return failureStatus(503, target);
    }
    this.#o.onRequest?.('forwarded');
    return { target, identity };
  }

  #onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    const decision = this.#decide(req);
    if ('kind' in decision) return void writeStatus(res, decision);
    this.#proxy.handleRequest(req, res, decision.target, req.url ?? '/', decision.identity);
  }

  #onUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const decision = this.#decide(req);
    if ('kind' in decision) return void writeStatusToSocket(socket, decision);
    this.#proxy.handleUpgrade(req, socket, head, decision.target, req.url ?? '/', decision.identity);
  }
}
