/**
 * One upstream's connection pool as its users see it (the forwarder, the gateway's health prober),
 * and what the connectors (connect-direct.ts, connect-egress.ts, connect-tunnel.ts) hand the pool.
 *
 * Everything a request needs that can be computed once per pool is computed by the connector
 * (parsed address, base path, Host and Authorization values), so the hot path only reads fields.
 */
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { TunnelStreamKind } from '../tunnel/protocol.ts';
import type { Http1Connections } from './http1-connections.ts';
import type { Http2Sessions } from './http2-sessions.ts';
import type { OneShotTrust } from './one-shot-tls.ts';
import type { TunnelDialEndpoint } from './target.ts';

export interface Upstream {
  /** The target's name, for messages. */
  name: string;
  key: string;
  agent: http.Agent;
  request: typeof http.request;
  /** Connect target for http.request (for tunnels: the TLS server name). */
  hostname: string;
  port: number;
  /** The endpoint's sub-path: '' or '/prefix' without trailing slash. */
  basePath: string;
  hostHeader: string;
  authorization?: string;
  /** Set for tunnel endpoints: the kind of stream each connection is (shared/tunnel/protocol.ts). */
  tunnelStream?: TunnelStreamKind;
  /**
   * HTTP/2 sessions for the requests that are not upgrades, on every TLS endpoint (direct, through
   * an egress proxy, inside a relay tunnel); the Agent serves upgrades, and everything once the
   * cluster has answered ALPN with http/1.1. Absent for plain-HTTP endpoints.
   */
  http2?: Http2Sessions;
  /**
   * Kept-alive HTTP/1.1 connections for the reads whose body passes through untouched
   * (shared/forward/passthrough.ts), on every TLS endpoint but tunnels. Absent for plain-HTTP ones.
   */
  http1?: Http1Connections;
  /**
   * Opens one connection of this pool's kind (direct, through the egress proxy or the agent tunnel,
   * TLS with the pool's context, resuming the TLS session the pool last had) for a single request
   * that the caller writes and reads itself, outside the Agent: a health probe of an idle cluster.
   * Counted in stats() while open.
   */
  connectOnce(): Promise<Duplex>;
}

/** An Upstream as a connector builds it, before the pool adds what needs its bookkeeping. */
export type UpstreamParts = Omit<Upstream, 'connectOnce'>;

/** What a connector returns: the upstream, and what the pool keeps beside it. */
export interface ConnectedUpstream {
  upstream: UpstreamParts;
  /** Tunnel endpoints: the latest dial(), so a reconnected agent tunnel is used at once. */
  tunnel?: { dial: TunnelDialEndpoint['dial'] };
  /** One-shot connections of a pool trusted by its CA bundle alone (one-shot-tls.ts). */
  trust?: OneShotTrust;
}

export interface PoolOptions {
  /** Limit for opening one connection: TCP (or tunnel dial, or CONNECT) plus TLS handshake. */
  connectTimeoutMs?: number;
  /** How long an idle keep-alive socket is kept; below kube-apiserver's 90 s idle timeout. */
  idleTimeoutMs?: number;
  /** Offer HTTP/2 to TLS endpoints (default true); false keeps every request on the Agents. */
  http2?: boolean;
  /**
   * Pass the bodies of plain reads through over kept-alive HTTP/1.1 connections to TLS endpoints
   * (shared/forward/passthrough.ts; default false here, on in the gateway: --upstream-passthrough).
   */
  passThrough?: boolean;
}

/** The pools' options with their defaults applied, as every connector reads them. */
export interface PoolSettings {
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  http2: boolean;
  passThrough: boolean;
}

/** Options of every pool's Agent. */
export function agentOptions(settings: PoolSettings): http.AgentOptions {
  return { keepAlive: true, timeout: settings.idleTimeoutMs, scheduling: 'lifo' };
}
