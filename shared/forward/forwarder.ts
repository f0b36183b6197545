/**
 * The request forwarding the gateway and the agent share: plain requests (request.ts) and upgrades
 * (upgrade.ts) to an upstream pool of shared/transport, with one set of hooks and in-flight gauges.
 * Which upstream a request goes to, and as whom, is the caller's business: the gateway's
 * (manager/gateway/proxy/cluster-proxy.ts) or the agent's (agent/tunnel/impersonation.ts).
 */
import type { ProxyContext, ProxyEvent, ProxyLogger } from './context.ts';
import { forwardRequest } from './request.ts';
import { forwardUpgrade } from './upgrade.ts';

export interface ForwarderOptions {
  logger?: ProxyLogger;
  /** Called once per finished request or upgraded connection (metrics, access log). */
  onComplete?: (event: ProxyEvent) => void;
}

/** A forwarding function with the forwarder's context bound. */
type Bound<F> = F extends (context: ProxyContext, ...rest: infer A) => void ? (...rest: A) => void : never;

export interface Forwarder {
  /** request.ts; `cluster` names it in messages and events, `upstream` is its pool or why it cannot be reached. */
  request: Bound<typeof forwardRequest>;
  /** upgrade.ts */
  upgrade: Bound<typeof forwardUpgrade>;
  /** Plain requests in flight (watches included), and upgraded connections open now. */
  inflight(): { requests: number; upgrades: number };
}

export function createForwarder(options: ForwarderOptions = {}): Forwarder {
  const context: ProxyContext = {
    logger: options.logger,
    onComplete: options.onComplete,
    inflight: { requests: 0, upgrades: 0 },
  };
  return {
    request: (req, res, cluster, upstream, upstreamPath, identity, access) =>
      forwardRequest(context, req, res, cluster, upstream, upstreamPath, identity, access),
    upgrade: (req, socket, cluster, upstream, upstreamPath, head, identity, access) =>
      forwardUpgrade(context, req, socket, cluster, upstream, upstreamPath, head, identity, access),
    inflight: () => context.inflight,
  };
}
