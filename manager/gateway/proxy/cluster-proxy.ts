/**
 * The proxy as the gateway's server sees it: one object holding the
 * connection pools, with a handler for plain requests and one for upgrades.
 *
 * Routing, authentication and authorization happen before these are called;
 * the caller passes the resolved ClusterTarget, the upstream path from
 * parseProxyPath, and — when the caller's identity should reach the cluster
 * (`?impersonate=true`, the ClientIdentityPenetration gate, or an exchanged
 * identity) — the UserInfo to impersonate.
 *
 * Why no proxy library (http-proxy-middleware, httpxy, http-proxy): all of
 * them forward only `GET` + `Upgrade: websocket`, while kubectl falls back to
 * `POST` + `Upgrade: SPDY/3.1` for exec, attach and port-forward; and their
 * per-request overhead sits on the hot path (docs/benchmarks.md). Nor an
 * HTTP framework (express): the gateway has a handful of routes, and raw
 * node:https serves about 1.7x the requests of express on the same machine
 * class (fastify/benchmarks). Both stay out of the dependencies until a part
 * of the project is served better by them.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { UserInfo } from '../auth/user.ts';
import type { ClusterTarget } from '../clusters/cluster.ts';
import type { ProxyAccess, ProxyContext, ProxyEvent, ProxyLogger } from './context.ts';
import { proxyRequest } from './handler.ts';
import { type ConnectionPools, createConnectionPools, type PoolOptions, type PoolStats } from './pool.ts';
import { proxyUpgrade } from './upgrade.ts';

export interface ClusterProxyOptions extends PoolOptions {
  logger?: ProxyLogger;
  /** Called once per finished request or upgraded connection (metrics, access log). */
  onComplete?: (event: ProxyEvent) => void;
  /** Pools shared with the health prober (one connection budget); created from the options when absent. */
  pools?: ConnectionPools;
}

export interface ClusterProxyStats extends PoolStats {
  /** Plain requests in flight (watches included). */
  inflightRequests: number;
  /** Upgraded connections (exec, attach, port-forward) open now. */
  openUpgrades: number;
}

export interface ClusterProxy {
  handleRequest(
    req: IncomingMessage,
    res: ServerResponse,
    target: ClusterTarget,
    upstreamPath: string,
    identity?: UserInfo,
    access?: ProxyAccess,
  ): void;
  handleUpgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    target: ClusterTarget,
    upstreamPath: string,
    identity?: UserInfo,
    access?: ProxyAccess,
  ): void;
  /** Drops a deleted cluster's pool (in-flight requests finish first). */
  forget(cluster: string): void;
  stats(): ClusterProxyStats;
  /** Closes every pooled connection. Upgraded connections are left to their owners. */
  close(): void;
}

export function createClusterProxy(options: ClusterProxyOptions = {}): ClusterProxy {
  const context: ProxyContext = {
    pools: options.pools ?? createConnectionPools(options),
    logger: options.logger,
    onComplete: options.onComplete,
    inflight: { requests: 0, upgrades: 0 },
  };
  return {
    handleRequest: (req, res, target, upstreamPath, identity, access) =>
      proxyRequest(req, res, target, upstreamPath, context, identity, access),
    handleUpgrade: (req, socket, head, target, upstreamPath, identity, access) =>
      proxyUpgrade(req, socket, head, target, upstreamPath, context, identity, access),
    forget: (cluster) => context.pools.forget(cluster),
    stats: () => ({
      ...context.pools.stats(),
      inflightRequests: context.inflight.requests,
      openUpgrades: context.inflight.upgrades,
    }),
    close: () => context.pools.close(),
  };
}
