/**
 * The gateway's Prometheus metrics. The proxied-request series keep the Go
 * original's names and labels (pkg/metrics/proxy.go), so existing
 * dashboards and alerts keep working; the gauges are new.
 *
 * A registry of its own rather than prom-client's global one, so that
 * libraries registering into the global registry cannot collide with these
 * names, and tests can read exactly what the gateway exposes.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { registerProcessMetrics } from '../../../shared/process-metrics.ts';

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

/**
 * Every label value comes from a fixed set, whatever the caller puts in the
 * proxied path: a label taken from the path as is let 2,000 requests to
 * random paths add 30,000 series, kept until restart. `cluster` is bounded
 * already: only a cluster the gateway knows reaches the proxy.
 */
export function recordProxiedRequest(request: ProxiedRequest): void {
  const resource = resourceLabel(request.resource);
  const verb = verbLabel(request.verb);
  const code = codeLabel(request.code);
  proxiedByResource.inc({ resource, verb, code });
  proxiedByCluster.inc({ cluster: request.cluster, code });
  proxiedDuration.observe({ resource, verb, cluster: request.cluster, code }, request.seconds);
}

/**
 * The resources of Kubernetes' built-in API groups keep their name; any
 * other (custom resources, typos, garbage) is "other", and "" stays the
 * non-resource request it stands for.
 */
const builtinResources = new Set([
  // core
  'bindings',
  'componentstatuses',
  'configmaps',
  'endpoints',
  'events',
  'limitranges',
  'namespaces',
  'nodes',
  'persistentvolumeclaims',
  'persistentvolumes',
  'pods',
  'podtemplates',
  'replicationcontrollers',
  'resourcequotas',
  'secrets',
  'serviceaccounts',
  'services',
  // apps, batch, autoscaling, policy, coordination, discovery, scheduling, node
  'controllerrevisions',
  'daemonsets',
  'deployments',
  'replicasets',
  'statefulsets',
  'cronjobs',
  'jobs',
  'horizontalpodautoscalers',
  'poddisruptionbudgets',
  'leases',
  'leasecandidates',
  'endpointslices',
  'priorityclasses',
  'runtimeclasses',
  // networking, rbac, storage
  'ingresses',
  'ingressclasses',
  'networkpolicies',
  'ipaddresses',
  'servicecidrs',
  'clusterroles',
  'clusterrolebindings',
  'roles',
  'rolebindings',
  'storageclasses',
  'volumeattachments',
  'csidrivers',
  'csinodes',
  'csistoragecapacities',
  'volumeattributesclasses',
  'storageversionmigrations',
  // admission, certificates, authentication, authorization, flow control, resource, internal
  'mutatingwebhookconfigurations',
  'validatingwebhookconfigurations',
  'validatingadmissionpolicies',
  'validatingadmissionpolicybindings',
  'mutatingadmissionpolicies',
  'mutatingadmissionpolicybindings',
  'certificatesigningrequests',
  'clustertrustbundles',
  'podcertificaterequests',
  'tokenreviews',
  'selfsubjectreviews',
  'subjectaccessreviews',
  'selfsubjectaccessreviews',
  'localsubjectaccessreviews',
  'selfsubjectrulesreviews',
  'flowschemas',
  'prioritylevelconfigurations',
  'deviceclasses',
  'resourceclaims',
  'resourceclaimtemplates',
  'resourceslices',
  'devicetaintrules',
  'storageversions',
  // apiextensions, apiregistration
  'customresourcedefinitions',
  'apiservices',
]);

export function resourceLabel(resource: string): string {
  return resource === '' || builtinResources.has(resource) ? resource : 'other';
}

/** The verbs a request can be authorized as (the legacy `proxy` included); anything else is "other". */
const verbs = new Set([
  'get',
  'list',
  'watch',
  'create',
  'update',
  'patch',
  'delete',
  'deletecollection',
  'proxy',
  // no verb: a resource request with another method (OPTIONS), which only a "*" rule allows
  '',
  // non-resource requests: the lower-cased method
  'head',
  'post',
  'put',
  'options',
]);

export function verbLabel(verb: string): string {
  return verbs.has(verb) ? verb : 'other';
}

/**
 * Status codes the API server and the gateway answer with keep their value
 * (499: the caller left); any other (a service proxied through the cluster
 * may answer anything) becomes its class, "2xx" to "5xx", or "other".
 */
const codes = new Set([
  101, 200, 201, 202, 204, 206, 301, 302, 304, 307, 308, 400, 401, 403, 404, 405, 406, 409, 410, 413, 415,
  422, 429, 499, 500, 502, 503, 504,
]);

export function codeLabel(code: number): string {
  if (codes.has(code)) return String(code);
  return code >= 100 && code <= 599 ? `${Math.floor(code / 100)}xx` : 'other';
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

const healthProbes = new Counter({
  name: 'cluster_gateway_health_probes_total',
  help: 'Health probes of managed clusters (GET /healthz, or the ManagedCluster found unavailable), by verdict',
  labelNames: ['result'] as const,
  registers: [registry],
});

/** Counts one health probe by its verdict. */
export function recordHealthProbe(healthy: boolean): void {
  healthProbes.inc({ result: healthy ? 'healthy' : 'unhealthy' });
}

type ProberCounts = () => { tracked: number; unprobed: number };
let proberCounts: ProberCounts = () => ({ tracked: 0, unprobed: 0 });

new Gauge({
  name: 'cluster_gateway_health_clusters',
  help: 'Clusters the health prober tracks (state="tracked"), and of those the ones it has not probed yet (state="unprobed": new, or since the gateway started)',
  labelNames: ['state'] as const,
  registers: [registry],
  collect() {
    const { tracked, unprobed } = proberCounts();
    this.set({ state: 'tracked' }, tracked);
    this.set({ state: 'unprobed' }, unprobed);
  },
});

/** Where cluster_gateway_health_clusters reads its values at scrape time. */
export function setHealthProberSource(source: ProberCounts): void {
  proberCounts = source;
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
  registerProcessMetrics(registry);
}

export const metricsContentType = registry.contentType;

export function metricsText(): Promise<string> {
  return registry.metrics();
}
