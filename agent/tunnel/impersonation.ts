/**
 * The no-credential trust model, agent side: the hub holds no credential for this cluster, so the
 * gateway sends plain HTTP on `impersonate` streams (shared/tunnel/protocol.ts) and the agent
 * forwards each request to its own kube-apiserver with its own ServiceAccount token, as the hub
 * caller the gateway asserted (shared/tunnel/identity.ts decodes it). The managed cluster then
 * authorizes the caller with its own RBAC; the agent's ServiceAccount may only impersonate
 * (manager/addon/deploy/agent-manifests.ts).
 *
 * Why this is safe to run:
 * - the only way in is a stream the gateway opened through the tunnel, which the agent dialled to
 *   the hub with its own credential and the gateway authenticated and bound to this cluster; the
 *   agent listens on no port for it;
 * - a request without exactly one Impersonate-User is refused: the agent never lends its own identity;
 * - the request's Authorization and every Impersonate-* or X-Remote-* header are dropped, and the
 *   decoded identity written again (the shared forwarder does it: shared/forward/headers.ts), so
 *   nothing the caller wrote reaches the apiserver as an identity claim. Impersonate-Extra-* is not
 *   passed: the agent's RBAC does not grant `impersonate userextras` (extras are hub-specific claims).
 *
 * The forwarding itself is the gateway's (shared/forward: streaming, watches, exec and port-forward
 * upgrades over WebSocket and SPDY, framing checks) over the connection layer (shared/transport),
 * aimed at this cluster's apiserver and nowhere else.
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { createForwarder, type Forwarder } from '../../shared/forward/forwarder.ts';
import { writeStatus, writeStatusToSocket } from '../../shared/forward/reply.ts';
import type { UserInfo } from '../../shared/identity/user.ts';
import { failureStatus, type KubeStatus } from '../../shared/kube/status.ts';
import { fixedProxyRoute, type ProxyRoute } from '../../shared/transport/env-proxy.ts';
import { type ConnectionPools, createConnectionPools } from '../../shared/transport/pool.ts';
import type { TransportCredential, TransportTarget } from '../../shared/transport/target.ts';
import { decodeTunnelIdentity } from '../../shared/tunnel/identity.ts';
import { asSocket } from '../../shared/tunnel/protocol.ts';
import type { Connection } from '../connection/kubeconfig.ts';

export interface ImpersonationOptions {
  /** This cluster's name on the hub, for the messages the caller sees. */
  cluster: string;
  /** The agent's own managed-cluster connection (in-cluster ServiceAccount); read again every `reloadMs`. */
  spoke: () => Connection;
  /** Through which proxy the apiserver is reached (HTTPS_PROXY/NO_PROXY); the kubeconfig's proxy-url wins. */
  route?: ProxyRoute;
  log: { warn(o: object, m: string): void; debug(o: object, m: string): void };
  /** How long a read credential is used before the files are read again (the kubelet rotates the token). */
  reloadMs?: number;
  /** Counts each request by outcome: forwarded, refused (no identity), error (no credential). */
  onRequest?: (result: 'forwarded' | 'refused' | 'error') => void;
}

/** The apiserver as the connection layer sees it: this agent's connection, its own credential. */
export function spokeTarget(
  cluster: string,
  connection: Connection,
  route?: ProxyRoute,
): TransportTarget | string {
  const o = connection.options;
  const decision = (connection.proxyUrl ? fixedProxyRoute(connection.proxyUrl) : route)?.(
    new URL(connection.server),
  );
  if (decision?.kind === 'invalid') return decision.message;
  let credential: TransportCredential | undefined;
  if (connection.token) credential = { token: connection.token };
  else if (typeof o.cert === 'string' && typeof o.key === 'string') {
    credential = { certificate: o.cert, privateKey: o.key };
  }
  if (!credential) return 'the agent has no credential of its own for its kube-apiserver';
  return {
    name: cluster,
    // The pool is rebuilt when any credential file changes.
    key: connection.fingerprint,
    endpoint: {
      ...(decision?.kind === 'proxy'
        ? { kind: 'egress' as const, proxyUrl: decision.url.href }
        : { kind: 'direct' as const }),
      url: connection.server,
      ...(typeof o.ca === 'string' ? { caBundle: o.ca } : {}),
      insecure: o.rejectUnauthorized === false,
    },
    credential,
  };
}

export class ImpersonatingServer {
  readonly #o: ImpersonationOptions;
  readonly #server: http.Server;
  readonly #pools: ConnectionPools = createConnectionPools();
  readonly #forwarder: Forwarder;
  #target: { value: TransportTarget | string; readAt: number } | undefined;

  constructor(options: ImpersonationOptions) {
    this.#o = options;
    this.#forwarder = createForwarder({ logger: options.log });
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
    this.#pools.close();
  }

  #currentTarget(): TransportTarget | string {
    const now = Date.now();
    const cached = this.#target;
    if (cached && now - cached.readAt < (this.#o.reloadMs ?? 10_000)) return cached.value;
    let value: TransportTarget | string;
    try {
      value = spokeTarget(this.#o.cluster, this.#o.spoke(), this.#o.route);
    } catch (err) {
      // Mid-rotation or unreadable: keep the previous credential if there was one.
      if (cached && typeof cached.value !== 'string') return cached.value;
      value = `the agent cannot read its credential: ${err instanceof Error ? err.message : String(err)}`;
    }
    this.#target = { value, readAt: now };
    return value;
  }

  #decide(req: http.IncomingMessage): { target: TransportTarget; identity: UserInfo } | KubeStatus {
    const identity = decodeTunnelIdentity(req.rawHeaders);
    if ('refusal' in identity) {
      this.#o.onRequest?.('refused');
      this.#o.log.warn(
        { method: req.method },
        'request on an impersonation stream without exactly one Impersonate-User: refused',
      );
      return failureStatus(
        403,
        `the cluster agent forwards requests only as an impersonated hub user (no-credential trust model): ${identity.refusal}`,
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
    const { target, identity } = decision;
    this.#forwarder.request(req, res, target.name, this.#pools.get(target), req.url ?? '/', identity);
  }

  #onUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const decision = this.#decide(req);
    if ('kind' in decision) return void writeStatusToSocket(socket, decision);
    const { target, identity } = decision;
    this.#forwarder.upgrade(
      req,
      socket,
      target.name,
      this.#pools.get(target),
      req.url ?? '/',
      head,
      identity,
    );
  }
}
