/**
 * The gateway: an aggregated API server for cluster.core.oam.dev/v1alpha1
 * ClusterGateway, whose proxy subresource forwards requests to managed
 * clusters. Run: node manager/gateway/main.ts --help
 */
import type { X509Certificate } from 'node:crypto';
import { hostname } from 'node:os';
import pino from 'pino';
import { optionsOrExit } from '../../shared/cli-flags.ts';
import type { KubeObject } from '../../shared/kube/client.ts';
import { KubeClient } from '../../shared/kube/client.ts';
import { Informer, type InformerHandlers } from '../../shared/kube/informer.ts';
import { createFreshRead } from './api/fresh-read.ts';
import { parseAuthenticationConfig, trustedClientCAs } from './auth/authentication-config.ts';
import { ClientCertAuthenticator } from './auth/client-cert.ts';
import { proxiedRequestAttributesIfValid } from './auth/request-attributes.ts';
import { RequestHeaderAuthenticator } from './auth/request-header.ts';
import { SubjectAccessReviewAuthorizer } from './auth/sar-authorizer.ts';
import { TokenReviewAuthenticator } from './auth/token-review.ts';
import { UnionAuthenticator } from './auth/union.ts';
import { ExecRefresher } from './clusters/exec-refresher.ts';
import { labelCredentialType, labelEndpointType } from './clusters/keys.ts';
import {
  ManagedClusterSource,
  managedClusterPath,
  trustedManagedClusterHealth,
} from './clusters/managedcluster-source.ts';
import { ClusterRegistry } from './clusters/registry.ts';
import { SecretSource } from './clusters/secret-source.ts';
import { HealthAnnotationStore } from './health/annotation-store.ts';
import { HealthProber } from './health/prober.ts';
import { startProberLeadership } from './health/prober-leader.ts';
import { createVerdictRecorder } from './health/verdict-recorder.ts';
import { logProxiedRequest } from './identity/access-log.ts';
import { startProxyIdentity } from './identity/setup.ts';
import { MemoryTrimmer, takeCollector } from './memory-trim.ts';
import {
  enableProcessMetrics,
  recordHealthProbe,
  recordProxiedRequest,
  setHealthProberSource,
  setUpstreamConnectionsSource,
} from './metrics/gateway-metrics.ts';
import { helpText, parseOptions } from './options.ts';
import { createClusterPools, createClusterProxy } from './proxy/index.ts';
import { createRoutes } from './routes.ts';
import { ServingEndpoint } from './serving.ts';
import { createAttachHandler } from './tunnel/attach.ts';
import { leaseLabel, leaseName, leasesPath } from './tunnel/leases.ts';
import { exposeTunnels } from './tunnel/metrics.ts';
import { TunnelRegistry } from './tunnel/registry.ts';
import { setUpReplicaSharing } from './tunnel/replica-setup.ts';

// At startup, off the global object: the collection --expose-gc provides stays private to the trimmer.
const collectGarbage = takeCollector();
const options = optionsOrExit(() => parseOptions(process.argv.slice(2)), helpText);

// pino's default serializers never print request headers, so tokens and
// certificates cannot reach the log through an error object either.
const log = pino({ level: options.logLevel, base: { component: 'cluster-gateway' } });

const hub = await KubeClient.fromKubeconfig(options.kubeconfig).catch((err: Error) => {
  log.fatal({ err: err.message }, 'cannot load the hub kubeconfig (--kubeconfig, KUBECONFIG or in-cluster)');
  process.exit(1);
});

// Clusters: credential Secrets, OCM ManagedClusters, agent tunnels; all watched, never fetched per request.
const registry = new ClusterRegistry({
  onListenerError: (err) => log.warn({ err }, 'cluster listener failed'),
  policy: {
    insecureSkipTlsVerifyWhenNoCa: options.insecureSkipTlsVerifyWhenNoCa,
    // Before its first probe a cluster's health is unknown, not unhealthy (health/precedence.ts).
    probing: options.featureGates.HealthinessCheck,
  },
});
if (options.insecureSkipTlsVerifyWhenNoCa) {
  log.warn(
    {},
    '--insecure-skip-tls-verify-when-no-ca: clusters whose credential Secret has no ca.crt are not TLS-verified (insecure: true)',
  );
}
const informerErrors = (source: string) => ({
  onError: (err: unknown, phase: string) =>
    log.warn({ source, phase, err: (err as Error).message }, 'watch interrupted; retrying'),
});
// Dynamic credentials run commands from Secrets, so only when asked to (see --help).
const execRefresher = options.enableExecCredentials
  ? new ExecRefresher(registry, {
      onError: (cluster, message) => log.warn({ cluster, err: message }, 'exec credential plugin failed'),
    })
  : undefined;
const secrets = new SecretSource(
  hub,
  { namespace: options.secretNamespace, informer: informerErrors('secrets') },
  execRefresher ?? registry,
);
registry.addSource(secrets);
void secrets.start();
let managedClusters: ManagedClusterSource | undefined;
if (options.ocmIntegration) {
  managedClusters = new ManagedClusterSource(
    hub,
    { informer: informerErrors('managedclusters'), verdictKey: options.probeVerdictKey },
    registry,
  );
  if (!options.probeVerdictKey) {
    log.info(
      {},
      'no --probe-verdict-key-file: prober verdicts of clusters without a credential Secret are not recorded on their ManagedClusters (kept in the probing replica only)',
    );
  }
  registry.addSource(managedClusters);
  void managedClusters.start();
}

// Who may call us: the aggregator (front-proxy certificate), client certificates, bearer tokens.
const requestHeader = new RequestHeaderAuthenticator();
const clientCert = new ClientCertAuthenticator();
const authenticator = new UnionAuthenticator({
  authenticators: [requestHeader, clientCert, new TokenReviewAuthenticator({ client: hub })],
});
const authorizer = new SubjectAccessReviewAuthorizer({
  client: hub,
  allowTtlMs: options.authorizationAllowTtlSeconds * 1000,
  denyTtlMs: options.authorizationDenyTtlSeconds * 1000,
});

const endpoint = await ServingEndpoint.create(
  {
    certFile: options.tlsCertFile,
    keyFile: options.tlsPrivateKeyFile,
    limits: {
      maxConnections: options.maxConnections,
      requestHeaderTimeoutMs: options.requestHeaderTimeoutSeconds * 1000,
      idleConnectionTimeoutMs: options.idleConnectionTimeoutSeconds * 1000,
    },
  },
  log,
);
const authConfig = new Informer<KubeObject & { data?: Record<string, string> }>(hub, {
  path: '/api/v1/namespaces/kube-system/configmaps',
  fieldSelector: 'metadata.name=extension-apiserver-authentication',
  ...informerErrors('extension-apiserver-authentication'),
});
// The hub's client CA is also the trust anchor of the replicas' peer certificates (tunnel/peer-identity.ts).
let hubClientCa: readonly X509Certificate[] | undefined;
const applyAuthConfig = (cm: { data?: Record<string, string> }) => {
  try {
    requestHeader.update(cm.data);
    clientCert.update(cm.data);
    const parsed = parseAuthenticationConfig(cm.data);
    endpoint.setClientCAs(trustedClientCAs(parsed));
    hubClientCa = parsed.clientCA?.roots;
    log.info({}, 'authentication configuration loaded from kube-system/extension-apiserver-authentication');
  } catch (err) {
    log.error(
      { err: (err as Error).message },
      'invalid extension-apiserver-authentication ConfigMap; keeping the previous one',
    );
  }
};
authConfig.on({ onAdd: applyAuthConfig, onUpdate: (_old, cm) => applyAuthConfig(cm) });
void authConfig.start();

// Exchange rules and local authorization per cluster (identity/): file, CRD objects, cluster annotations.
const proxyIdentity = await startProxyIdentity({
  hub,
  clusters: registry,
  log,
  ...(options.clusterGatewayProxyConfig ? { configFile: options.clusterGatewayProxyConfig } : {}),
  globalObjectName: options.proxyConfigurationName,
  watchObjects: options.watchProxyConfigurations,
  cacheSize: options.identityExchangeCacheSize,
  penetrateAll: options.featureGates.ClientIdentityPenetration,
  authorizeProxySubpath: options.authorizeProxySubpath,
  informer: informerErrors('clustergatewayproxyconfigurations'),
}).catch((err: Error) => {
  log.fatal({ err: err.message }, 'cannot load the proxy configuration');
  process.exit(1);
});

// One connection pool per cluster, for proxied requests and health probes alike.
const pools = createClusterPools({ http2: options.upstreamHttp2, passThrough: options.upstreamPassthrough });
const proxy = createClusterProxy({
  pools,
  logger: log,
  onComplete: (event) => {
    // Never throws: this runs in the response's 'close' listener.
    const attributes = proxiedRequestAttributesIfValid(event.method, event.upstreamPath);
    recordProxiedRequest({
      cluster: event.cluster,
      resource: attributes?.kind === 'resource' ? attributes.resource : '',
      verb: attributes?.verb ?? 'other',
      code: event.code,
      seconds: event.durationMs / 1000,
    });
    if (event.error)
      log.debug({ cluster: event.cluster, code: event.code, error: event.error }, 'proxied request failed');
    if (event.access) logProxiedRequest(log, { ...event, access: event.access });
  },
});
registry.subscribe((event) => {
  if (event.type === 'DELETED') proxy.forget(event.cluster.name);
});
setUpstreamConnectionsSource(() => proxy.stats().perCluster);
enableProcessMetrics();

// Health marks (PUT/PATCH clustergateways/{name}/health) and the prober's verdicts: annotations on the
// cluster's Secret (or ManagedCluster), so every replica shows the same (health/annotation-store.ts).
// Both Secret informers: a no-credential tunnel cluster's Secret is in the second.
const clusterSecrets = {
  get: (key: string) => secrets.informer.get(key) ?? secrets.noCredential.get(key),
  on: (handlers: InformerHandlers<KubeObject>) => {
    const offs = [secrets.informer.on(handlers), secrets.noCredential.on(handlers)];
    return () => {
      for (const off of offs) off();
    };
  },
};
const healthStore = new HealthAnnotationStore({
  client: hub,
  secretNamespace: options.secretNamespace,
  secrets: clusterSecrets,
  managedClusters: managedClusters?.informer,
  verdictKey: options.probeVerdictKey,
  log,
});
const recordVerdict = createVerdictRecorder({ store: healthStore, registry, log });
let prober: HealthProber | undefined;
setHealthProberSource(() => ({ tracked: prober?.tracked ?? 0, unprobed: prober?.unprobed ?? 0 }));

function createProber(): HealthProber {
  return new HealthProber({
    list: () => registry.list(),
    setHealth: (name, health) => {
      recordHealthProbe(health.healthy);
      void recordVerdict(name, health);
    },
    // Only an accepted, joined ManagedCluster may mark its cluster unavailable (see managedcluster-source.ts).
    managedClusterHealth: (name) => {
      const mc = managedClusters?.informer.get(name);
      return mc ? trustedManagedClusterHealth(mc) : undefined;
    },
    get: (name) => registry.get(name),
    subscribe: (listener) => registry.subscribe(listener),
    sourcesSynced: () => registry.synced,
    pools,
    sharedPools: true,
    intervalMs: options.healthCheckIntervalSeconds * 1000,
    maxProbesPerSecond: options.healthCheckMaxRate,
    userAgent: options.userAgent,
    log,
  });
}

// Agent tunnels (tunnel/): each connected agent becomes its cluster's ClusterProxy endpoint.
// The replica's name (its pod name: POD_NAME, else the hostname, which is the pod name in a pod) shows
// as the holder of its tunnels (kubectl get clustergateways -o wide).
const replica = options.tunnelPeers?.replicaName || process.env.POD_NAME || hostname();
// Several replicas (--tunnel-peer-port): Leases say who holds which tunnel, the others forward to it.
function replicaSharing() {
  if (!options.agentTunnels || !options.tunnelPeers) return undefined;
  try {
    return setUpReplicaSharing(
      { ...options.tunnelPeers, replicaName: replica },
      { hub, sink: registry, log, hubClientCa: () => hubClientCa },
    );
  } catch (err) {
    // An unreadable peer certificate, key or CA file: say which flag, not a stack trace.
    log.fatal({ err: (err as Error).message }, 'cannot set up tunnel sharing between replicas');
    process.exit(1);
  }
}
const sharing = replicaSharing();
// Several replicas: the holder of the prober Lease probes (health/prober-leader.ts); alone, this one does.
const proberLeadership =
  sharing && options.tunnelPeers
    ? startProberLeadership({
        hub,
        namespace: options.tunnelPeers.leaseNamespace,
        identity: replica,
        log,
        onStartedLeading: (signal) => {
          if (!options.featureGates.HealthinessCheck) return;
          const leading = createProber();
          prober = leading;
          leading.start();
          signal.addEventListener('abort', () => {
            leading.stop();
            if (prober === leading) prober = undefined;
          });
        },
      })
    : undefined;
const tunnels = options.agentTunnels
  ? new TunnelRegistry({ sink: sharing?.sink ?? registry, replica })
  : undefined;
if (tunnels) exposeTunnels(tunnels);
if (sharing && tunnels) {
  await sharing
    .start((cluster) => tunnels.get(cluster), options.bindAddress)
    .catch((err: Error) => {
      log.fatal({ err: err.message }, 'cannot serve the tunnel peer port (--tunnel-peer-port)');
      process.exit(1);
    });
}

// A GET of one ClusterGateway reads what the hub holds now (api/fresh-read.ts), wherever the
// aggregator sends it.
const secretPath = `/api/v1/namespaces/${encodeURIComponent(options.secretNamespace)}/secrets`;
const freshRead = createFreshRead({
  hub,
  sources: [
    {
      path: (name) => `${secretPath}/${encodeURIComponent(name)}`,
      cached: (name) => clusterSecrets.get(`${options.secretNamespace}/${name}`)?.metadata?.resourceVersion,
      selects: (secret) => {
        const labels = secret.metadata?.labels ?? {};
        return labels[labelCredentialType] !== undefined || labels[labelEndpointType] === 'ClusterProxy';
      },
    },
    ...(managedClusters
      ? [
          {
            path: (name: string) => `${managedClusterPath}/${encodeURIComponent(name)}`,
            cached: (name: string) => managedClusters?.informer.get(name)?.metadata?.resourceVersion,
            selects: () => true,
          },
        ]
      : []),
    ...(sharing && options.tunnelPeers
      ? [
          {
            path: (name: string) =>
              `${leasesPath(options.tunnelPeers?.leaseNamespace ?? '')}/${leaseName(name)}`,
            cached: (name: string) =>
              sharing.leases.get(`${options.tunnelPeers?.leaseNamespace}/${leaseName(name)}`)?.metadata
                ?.resourceVersion,
            selects: (lease: KubeObject) => lease.metadata?.labels?.[leaseLabel] !== undefined,
          },
        ]
      : []),
  ],
  onHubError: (err) =>
    log.debug({ err: (err as Error).message }, 'freshness check of a GET failed; answering from the cache'),
});

const routes = createRoutes({
  directory: registry,
  freshRead,
  authenticator,
  authorizer,
  proxy,
  // Several replicas: also the tunnel Leases listed at start, proofs included (bounded), so that a Ready
  // replica routes every cluster whose tunnel another replica holds.
  ready: () => registry.synced && authConfig.hasSynced && proxyIdentity.synced && (sharing?.synced ?? true),
  impersonateAll: options.featureGates.ClientIdentityPenetration,
  authorizeProxySubpath: options.authorizeProxySubpath,
  identity: proxyIdentity.identity,
  accessLog: log,
  rejectUnhealthy: options.rejectUnhealthy,
  ...(options.featureGates.HealthinessCheck
    ? { probeIntervalSeconds: options.healthCheckIntervalSeconds }
    : {}),
  health: healthStore,
  log,
  ...(tunnels
    ? {
        tunnel: createAttachHandler({
          authenticator,
          authorizer,
          tunnels,
          addonName: options.tunnelAddonName,
          log,
        }),
      }
    : {}),
});
const port = await endpoint.listen(options.securePort, options.bindAddress, routes);
log.info(
  { port, secretNamespace: options.secretNamespace, ocmIntegration: options.ocmIntegration },
  'serving',
);
if (!proberLeadership && options.featureGates.HealthinessCheck) {
  prober = createProber();
  prober.start();
}

// V8 keeps the pages a burst freed (a restart, a mass deletion) until a memory-reducing collection.
const memoryTrimmer = new MemoryTrimmer({
  collect: collectGarbage,
  onTrim: (trim) =>
    log.info(
      {
        rssBeforeMiB: Math.round(trim.rssBefore / 1048576),
        rssAfterMiB: Math.round(trim.rssAfter / 1048576),
        durationMs: Math.round(trim.durationMs),
        nextInSeconds: Math.round(trim.nextGapMs / 1000),
      },
      'memory trimmed: V8 gave back the pages it kept',
    ),
});
memoryTrimmer.start();
if (!memoryTrimmer.enabled)
  log.debug({}, 'node runs without --expose-gc: memory is not trimmed after bursts');

const shutdown = async (signal: string) => {
  log.info({ signal }, 'shutting down');
  prober?.stop();
  const handedOver = proberLeadership?.stop();
  memoryTrimmer.stop();
  secrets.stop();
  execRefresher?.stop();
  managedClusters?.stop();
  authConfig.stop();
  proxyIdentity.stop();
  // GOAWAY to every agent, so each reconnects (to another replica when there is one) at once.
  const drained = tunnels?.drainAll(5_000);
  await endpoint.close();
  await drained;
  await handedOver;
  await sharing?.stop();
  proxy.close();
  hub.close();
  process.exit(0);
};
process.once('SIGTERM', () => void shutdown('SIGTERM'));
process.once('SIGINT', () => void shutdown('SIGINT'));
