/**
 * The addon agent, one per managed cluster: renews Lease <addon> in its
 * install namespace (what a klusterlet in Lease mode reads) and the hub
 * heartbeat Lease <addon> in its cluster namespace (what the manager reads),
 * only while it is healthy. Run: node agent/main.ts --help
 *
 * Memory matters here (it runs on every managed cluster, often on edge
 * nodes): nothing below may import @kubernetes/client-node or prom-client
 * (docs/benchmarks-log.md, "Agent footprint", has the figures).
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { optionsOrExit } from '../shared/cli-flags.ts';
import {
  describeDecision,
  fixedProxyRoute,
  type ProxyRoute,
  proxyEnvironment,
  proxyRouteFromEnvironment,
  redactProxyUrl,
} from '../shared/transport/env-proxy.ts';
import { type Connection, loadInCluster, loadKubeconfig } from './connection/kubeconfig.ts';
import { ReloadingClient } from './connection/reloading-client.ts';
import { createAgentServer, createMetricsServer } from './http.ts';
import { HubCredentialWriter } from './hub-credential.ts';
import { createLogger } from './log.ts';
import { AgentMetrics } from './metrics.ts';
import { type AgentOptions, helpText, parseOptions } from './options.ts';
import { Renewer } from './renewer.ts';
import { serviceAccountOwner } from './service-account.ts';
import { TunnelMetrics } from './tunnel/metrics.ts';
import { relayTargetOf } from './tunnel/relay.ts';
import { TunnelClient } from './tunnel/tunnel-client.ts';

const readOptional = (file: string): string | undefined => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
};
const options: AgentOptions = optionsOrExit(
  () => parseOptions(process.argv.slice(2), { env: process.env, readFile: readOptional }),
  helpText,
);

// Log lines carry names and reasons only: no kubeconfig, token or key is ever passed to the logger.
const log = createLogger({
  level: options.logLevel,
  base: { component: 'cluster-gateway-agent', cluster: options.clusterName },
});
const metrics = new AgentMetrics();

// HTTPS_PROXY/NO_PROXY (the AddOnDeploymentConfig's proxyConfig, rendered into the pod's environment)
// apply to every connection of the agent: to the hub (leases, the credential Secret, the tunnel's attach)
// and to its own managed apiserver (in-cluster, that one is usually in NO_PROXY). A kubeconfig's
// proxy-url wins for its server. Read once: the environment of a process does not change.
const proxySettings = proxyEnvironment(process.env);
const proxyRoute: ProxyRoute = proxyRouteFromEnvironment(proxySettings);
/** The proxy variables as read, for the start-up line (userinfo redacted); undefined when none is set. */
const proxyVariables =
  proxySettings.httpsProxy || proxySettings.httpProxy
    ? {
        ...(proxySettings.httpsProxy ? { HTTPS_PROXY: redactProxyUrl(proxySettings.httpsProxy) } : {}),
        ...(proxySettings.httpProxy ? { HTTP_PROXY: redactProxyUrl(proxySettings.httpProxy) } : {}),
        ...(proxySettings.noProxy ? { NO_PROXY: proxySettings.noProxy } : {}),
      }
    : undefined;
/** The route to a connection's server, for the start-up log line (no credential: userinfo redacted). */
const routeOf = (c: Connection | undefined): string => {
  if (!c) return 'unknown (its kubeconfig cannot be read yet)';
  const route = c.proxyUrl ? fixedProxyRoute(c.proxyUrl) : proxyRoute;
  return describeDecision(route(new URL(c.server)));
};
const tryLoad = (load: () => Connection): Connection | undefined => {
  try {
    return load();
  } catch {
    return undefined;
  }
};

/** The expiry of a connection's client certificate, for the metrics. */
const notAfter = (c: Connection) =>
  typeof c.options.cert === 'string'
    ? Math.floor(Date.parse(new X509Certificate(c.options.cert).validTo) / 1000)
    : undefined;

const hub = new ReloadingClient({
  load: () => loadKubeconfig(options.hubKubeconfig),
  route: proxyRoute,
  onConnection: (c) => metrics.setCertificateNotAfter('hub', notAfter(c)),
  onReload: () => {
    metrics.credentialReloaded('hub');
    log.info({ file: options.hubKubeconfig }, 'hub credential changed: using it from now on');
  },
});
const spokeKubeconfig = options.kubeconfig ?? process.env.KUBECONFIG?.split(':')[0];
const loadSpoke = (): Connection => (spokeKubeconfig ? loadKubeconfig(spokeKubeconfig) : loadInCluster());
const spoke = new ReloadingClient({
  load: loadSpoke,
  route: proxyRoute,
  onConnection: (c) => metrics.setCertificateNotAfter('spoke', notAfter(c)),
  onReload: () => {
    metrics.credentialReloaded('spoke');
    log.info({}, 'managed cluster credential changed: using it from now on');
  },
});

const holderIdentity = process.env.POD_NAME || hostname();
// leaseDurationSeconds: twice the longest wait between two renewals, so a Lease older than that missed one.
const leaseDurationSeconds = Math.ceil(2 * options.renewIntervalSeconds * (1 + options.renewJitter) || 1);
const renewer = new Renewer({
  hub: () => hub.get(),
  spoke: () => spoke.get(),
  hubLease: { namespace: options.clusterName, name: options.addonName, holderIdentity, leaseDurationSeconds },
  spokeLease: {
    namespace: options.installNamespace,
    name: options.addonName,
    holderIdentity,
    leaseDurationSeconds,
  },
  spokeOwner: () => serviceAccountOwner(spoke.connection?.token, options.installNamespace),
  intervalMs: options.renewIntervalSeconds * 1000,
  jitter: options.renewJitter,
  metrics,
  log,
});

// The reverse tunnel (agent/tunnel). Imported statically although it can be turned off: the image
// warms Node's compile cache with `--help`, which a dynamic import would miss, and a module stripped
// at run time keeps Node's TypeScript stripper in memory (about 22 MB, docs/benchmarks-log.md); node:http2
// itself costs about 4 MB.
/** The hub connection, or with --tunnel-server the same identity aimed straight at the gateway. */
function tunnelConnection(hubConnection: Connection): Connection {
  if (!options.tunnelServer) return hubConnection;
  const ca = options.tunnelCaFile ? readFileSync(options.tunnelCaFile, 'utf8') : hubConnection.options.ca;
  return {
    ...hubConnection,
    server: options.tunnelServer,
    options: { ...hubConnection.options, ca },
    // A renewed gateway CA is read on the next attach; the certificate's rotation drives reconnects.
    fingerprint: hubConnection.fingerprint,
  };
}
const tunnelMetrics = new TunnelMetrics();
const stop = new AbortController();
let tunnelLoop: Promise<void> | undefined;
// The no-credential trust model: requests the gateway sends on impersonation streams run with this
// agent's own credential, as the hub caller (tunnel/impersonation.ts). Off: such streams are refused.
// Imported only for that model: its module graph (shared/forward) costs the default model about 1.5 MiB
// of RSS (npm run bench:image, issue 33). The image's compile cache holds it all the same
// (the Dockerfile warms it by running tunnel/impersonation.ts), so this import never loads Node's stripper.
const impersonation =
  options.trustModel === 'no-credential'
    ? new (await import('./tunnel/impersonation.ts')).ImpersonatingServer({
        cluster: options.clusterName,
        spoke: loadSpoke,
        route: proxyRoute,
        log: log.child({ loop: 'impersonation' }),
        onRequest: (result) => tunnelMetrics.impersonated(result),
      })
    : undefined;
if (options.tunnel) {
  tunnelLoop = new TunnelClient({
    ...(impersonation ? { impersonation } : {}),
    cluster: options.clusterName,
    // Read fresh for every attach and compared every few seconds: OCM rotates the certificate.
    loadHub: () => tunnelConnection(loadKubeconfig(options.hubKubeconfig)),
    // The managed apiserver as this agent reaches it (kubeconfig or in-cluster), and nothing else.
    target: () => {
      const spokeConnection = loadSpoke();
      return relayTargetOf(
        spokeConnection.server,
        spokeConnection.proxyUrl ? fixedProxyRoute(spokeConnection.proxyUrl) : proxyRoute,
      );
    },
    route: proxyRoute,
    metrics: tunnelMetrics,
    log: log.child({ loop: 'tunnel' }),
  }).run(stop.signal);
}

// The cluster's credential Secret on the hub (hub-credential: a token of our ServiceAccount; no-credential:
// the labels alone), when the addon's configuration asks for it.
const credentialLoop = options.hubCredentialNamespace
  ? new HubCredentialWriter({
      cluster: options.clusterName,
      trustModel: options.trustModel,
      namespace: options.hubCredentialNamespace,
      hub: () => hub.get(),
      spoke: () => spoke.get(),
      spokeCa: () => {
        const ca = loadSpoke().options.ca;
        return typeof ca === 'string' ? ca : undefined;
      },
      ...(options.hubCredentialServiceAccount
        ? {
            serviceAccount: {
              namespace: options.installNamespace,
              name: options.hubCredentialServiceAccount,
            },
          }
        : {}),
      tokenSeconds: options.hubCredentialTokenSeconds,
      rotateSeconds: options.hubCredentialRotateSeconds,
      checkSeconds: options.hubCredentialCheckSeconds,
      log: log.child({ loop: 'hub-credential' }),
      onResult: (result, expiresAt) => tunnelMetrics.credentialWrite(result, expiresAt),
    }).run(stop.signal)
  : undefined;

const metricsSource = {
  render: () =>
    metrics.render() + (options.tunnel || options.hubCredentialNamespace ? tunnelMetrics.render() : ''),
};
const metricsTogether = options.metricsBindAddress === options.bindAddress;
const server = createAgentServer(
  {
    live: () => {
      // A round may take its request timeout; three missed rounds mean the loop is stuck.
      const limit = 3 * (renewer.maxIntervalMs + renewer.requestTimeoutMs);
      const age = Date.now() - renewer.lastRoundAt;
      return age <= limit
        ? { ok: true, message: 'ok' }
        : { ok: false, message: `renewal loop stuck: last round ${Math.round(age / 1000)} s ago` };
    },
    ready: () => renewer.health,
  },
  metricsTogether ? metricsSource : { elsewhere: `${options.metricsBindAddress}:${options.metricsPort}` },
);
// /metrics on its own listener (loopback by default: agent/http.ts), unless it shares the probes'.
const metricsServer = metricsTogether ? undefined : createMetricsServer(metricsSource);
metricsServer?.listen(options.metricsPort, options.metricsBindAddress);
metricsServer?.on('error', (err) => {
  log.fatal({ err: err.message }, 'cannot serve /metrics');
  process.exit(1);
});
server.listen(options.port, options.bindAddress, () => {
  const address = server.address();
  log.info(
    {
      port: typeof address === 'object' && address ? address.port : options.port,
      hubLease: `${options.clusterName}/${options.addonName}`,
      spokeLease: `${options.installNamespace}/${options.addonName}`,
      intervalSeconds: options.renewIntervalSeconds,
      jitter: options.renewJitter,
      tunnel: options.tunnel,
      trustModel: options.trustModel,
      hubCredentialNamespace: options.hubCredentialNamespace || undefined,
      proxy: proxyVariables,
      hubRoute: routeOf(tryLoad(() => loadKubeconfig(options.hubKubeconfig))),
      tunnelRoute: options.tunnel
        ? routeOf(tryLoad(() => tunnelConnection(loadKubeconfig(options.hubKubeconfig))))
        : undefined,
      managedClusterRoute: routeOf(tryLoad(loadSpoke)),
      metrics: metricsTogether ? 'with the probes' : `${options.metricsBindAddress}:${options.metricsPort}`,
    },
    'agent started',
  );
});
server.on('error', (err) => {
  log.fatal({ err: err.message }, 'cannot serve /healthz, /readyz and /metrics');
  process.exit(1);
});

const loop = renewer.run(stop.signal);
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, async () => {
    log.info({ signal }, 'stopping');
    stop.abort();
    server.close();
    metricsServer?.close();
    await loop;
    await tunnelLoop;
    await credentialLoop;
    impersonation?.close();
    hub.close();
    spoke.close();
    process.exit(0);
  });
}
