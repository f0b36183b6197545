/**
 * What the HTTP and upgrade handlers share: the connection pools, and the
 * hooks through which the gateway logs and measures proxied traffic.
 */
import type { ConnectionPools } from './pool.ts';

/** The subset of pino's API the proxy uses. */
export interface ProxyLogger {
  debug(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/** One finished proxied request or upgraded connection, for metrics and access logs. */
export interface ProxyEvent {
  cluster: string;
  method: string;
  /** Path and query as sent to the cluster, relative to its endpoint. */
  upstreamPath: string;
  /**
   * Status sent to the caller: the cluster's, or the gateway's own 503.
   * 499 when the caller left before any response was sent.
   */
  code: number;
  durationMs: number;
  /** True for WebSocket and SPDY connections (code 101 when upgraded). */
  upgrade: boolean;
  /** Set when the cluster could not be reached. */
  error?: string;
  /** Who asked and as whom the cluster saw it, as routes.ts passed it in (for the access log). */
  access?: ProxyAccess;
}

/** Names only, never credentials: built by identity/access-log.ts, carried through untouched. */
export interface ProxyAccess {
  /** The hub caller. */
  user: string;
  /** How the identity on the cluster was chosen (identity/proxy-identity.ts). */
  as: string;
  clusterUser?: string;
  clusterGroups?: string[];
  rule?: string;
  ruleOrigin?: string;
}

export interface ProxyContext {
  pools: ConnectionPools;
  logger?: ProxyLogger;
  onComplete?: (event: ProxyEvent) => void;
  /** In-flight gauges, updated by the handlers. */
  inflight: { requests: number; upgrades: number };
}
