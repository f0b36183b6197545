/**
 * The gateway's Prometheus metrics. The proxied-request series keep the Go
 * original's names and labels (pkg/metrics/proxy.go), so existing
 * dashboards and alerts keep working; the gauges are new.
 *
 * A registry of its own rather than prom-client's global one, so that
 * libraries registering into the global registry cannot collide with these
 * names, and tests can read exactly what the gateway exposes.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export const registry = new Registry();

const proxiedByResource = new Counter({
  name: 'ocm_proxy_proxied_resource_requests_by_resource_total',
  help: 'Number of requests proxied to managed clusters, by proxied resource and verb',
  labelNames: ['resource', 'verb', 'code'] as const,
  registers: [registry],
});

const proxiedByCluster = new Counter({
  name: 'ocm_proxy_proxied_requests_by_cluster_total',
  help: 'Number of requests proxied to managed clusters, by cluster',
  labelNames: ['cluster', 'code'] as const,
  registers: [registry],
});

// The Go original's buckets without its 0 bucket, which can never hold a
// real request; 30 s covers slow lists, while watches and exec streams
// land in +Inf.
export const proxiedRequestDurationBuckets = [0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30];

const proxiedDuration = new Histogram({
  name: 'ocm_proxy_proxied_request_duration_seconds',
  help: 'Duration of requests proxied to managed clusters, in seconds',
  labelNames: ['resource', 'verb', 'cluster', 'code'] as const,
  buckets: proxiedRequestDurationBuckets,
  registers: [registry],
});

const inflightRequests = new Gauge({
  name: 'cluster_gateway_inflight_requests',
  help: 'Requests the gateway is currently serving',
  registers: [registry],
});

type ConnectionCounts = () => Iterable<[cluster: string, connections: number]>;
let upstreamConnections: ConnectionCounts = () => [];

new Gauge({
  name: 'cluster_gateway_upstream_connections',
  help: 'Open connections from the gateway to each managed cluster',
  labelNames: ['cluster'] as const,
  registers: [registry],
  // Read at scrape time from the proxy's pools: no counter to keep in
  // sync, and clusters that went away drop out of the output.
  collect() {
    this.reset();
    for (const [cluster, connections] of upstreamConnections()) this.set({ cluster }, connections);
  },
});

export interface ProxiedRequest {
  cluster: string;
  /** The proxied resource ("pods"), or "" for a non-resource path. */
  resource: string;
  verb: string;
  /** HTTP status returned to the client. */
  code: number;
  seconds: number;
}

export function recordProxiedRequest(request: ProxiedRequest): void {
  const code = String(request.code);
  proxiedByResource.inc({ resource: request.resource, verb: request.verb, code });
  proxiedByCluster.inc({ cluster: request.cluster, code });
  proxiedDuration.observe(
    { resource: request.resource, verb: request.verb, cluster: request.cluster, code },
    request.seconds,
  );
}

const upgradeRequests = new Counter({
  name: 'cluster_gateway_upgrade_requests_total',
  help: 'Upgrade requests (exec, attach, port-forward) to the proxy, by protocol: websocket or spdy.',
  labelNames: ['protocol'],
  registers: [registry],
});

/** Counts an upgrade request by the protocol the client asked for. */
export function recordUpgradeRequest(upgradeHeader: string | undefined): void {
  const value = (upgradeHeader ?? '').toLowerCase();
  upgradeRequests.inc({
    protocol: value.startsWith('spdy') ? 'spdy' : value === 'websocket' ? 'websocket' : 'other',
  });
}

/** Counts one request as in flight; call the returned function exactly once when it ends. */
export function trackInflightRequest(): () => void {
  inflightRequests.inc();
  let done = false;
  return () => {
    if (done) return;
    done = true;
    inflightRequests.dec();
  };
}

/** Where cluster_gateway_upstream_connections reads its values at scrape time. */
export function setUpstreamConnectionsSource(source: ConnectionCounts): void {
  upstreamConnections = source;
}

/** Adds prom-client's process and Node runtime metrics; the server calls this once at start. */
let processMetricsEnabled = false;
export function enableProcessMetrics(): void {
  // prom-client throws on a second registration of the same names.
  if (processMetricsEnabled) return;
  processMetricsEnabled = true;
  collectDefaultMetrics({ register: registry });
}

export const metricsContentType = registry.contentType;

export function metricsText(): Promise<string> {
  return registry.metrics();
}
