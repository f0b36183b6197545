/**
 * The proxy as the gateway's server sees it: one object holding the
 * connection pools, with a handler for plain requests and one for upgrades.
 * It maps the ClusterTarget to its pool (cluster-pools.ts: a transport target
 * once per connectionKey) and hands the request to the forwarder
 * (shared/forward), which the agent uses too.
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
import type { ProxyAccess, ProxyEvent, ProxyLogger } from '../../../shared/forward/context.ts';
import { createForwarder } from '../../../shared/forward/forwarder.ts';
import type { UserInfo } from '../../../shared/identity/user.ts';
import type { PoolOptions, PoolStats } from '../../../shared/transport/pool.ts';
import type { ClusterTarget } from '../clusters/cluster.ts';
import { type ClusterPools, createClusterPools } from './cluster-pools.ts';

export interface ClusterProxyOptions extends PoolOptions {
  logger?: ProxyLogger;
  /** Called once per finished request or upgraded connection (metrics, access log). */
  onComplete?: (event: ProxyEvent) => void;
  /** Pools shared with the health prober (one connection budget); created from the options when absent. */
  pools?: ClusterPools;
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
  const pools = options.pools ?? createClusterPools(options);
  const forwarder = createForwarder({ logger: options.logger, onComplete: options.onComplete });
  return {
    handleRequest: (req, res, target, upstreamPath, identity, access) =>
      forwarder.request(
        req,
        res,
        target.name,
        target.problem ?? pools.get(target),
        upstreamPath,
        identity,
        access,
      ),
    handleUpgrade: (req, socket, head, target, upstreamPath, identity, access) =>
      forwarder.upgrade(
        req,
        socket,
        target.name,
        target.problem ?? pools.get(target),
        upstreamPath,
        head,
        identity,
        access,
      ),
    forget: (cluster) => pools.forget(cluster),
    stats: () => {
      const inflight = forwarder.inflight();
      return { ...pools.stats(), inflightRequests: inflight.requests, openUpgrades: inflight.upgrades };
    },
    close: () => pools.close(),
  };
}
