/**
 * What the request and upgrade forwarders share: the hooks through which the gateway (or the
 * agent) logs and measures forwarded traffic, and the in-flight gauges.
 */
import type { IncomingMessage } from 'node:http';

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
  /** Who asked and as whom the cluster saw it, as the gateway's routes.ts passed it in (for the access log). */
  access?: ProxyAccess;
}

/** Names only, never credentials: built by manager/gateway/identity/access-log.ts, carried through untouched. */
export interface ProxyAccess {
  /** The hub caller. */
  user: string;
  /** How the identity on the cluster was chosen (manager/gateway/identity/proxy-identity.ts). */
  as: string;
  clusterUser?: string;
  clusterGroups?: string[];
  rule?: string;
  ruleOrigin?: string;
}

export interface ProxyContext {
  logger?: ProxyLogger;
  onComplete?: (event: ProxyEvent) => void;
  /** In-flight gauges, updated by the handlers. */
  inflight: { requests: number; upgrades: number };
}

/**
 * Reports one finished request or upgraded connection to onComplete, if anyone listens. Positional
 * arguments: this runs once per request, and builds no object but the event.
 */
export function reportCompletion(
  context: ProxyContext,
  cluster: string,
  req: IncomingMessage,
  upstreamPath: string,
  started: number,
  code: number,
  upgrade: boolean,
  error: string | undefined,
  access: ProxyAccess | undefined,
): void {
  context.onComplete?.({
    cluster,
    method: req.method ?? 'GET',
    upstreamPath,
    code,
    durationMs: performance.now() - started,
    upgrade,
    ...(error ? { error } : {}),
    ...(access ? { access } : {}),
  });
}
