/**
 * The addon manager: makes cluster-gateway an OCM addon. It keeps the
 * ClusterManagementAddOn, and for each ManagedClusterAddOn (from
 * `clusteradm addon enable` or from OCM's Placements) deploys the agent with
 * a ManifestWork, registers it and reports its health.
 * Run: node manager/addon/main.ts --help
 *
 * Shape: one shared informer per watched kind (started at once, so a
 * standby replica is warm and ready), controllers started only while this
 * replica holds the leader Lease. Losing leadership exits the process: a
 * fresh start as a standby is simpler and safer than unwinding controllers.
 */
import express from 'express';
import pino from 'pino';
import { optionsOrExit } from '../../shared/cli-flags.ts';
import { KubeClient } from '../../shared/kube/client.ts';
import { Informer } from '../../shared/kube/informer.ts';
import { KubeLeaseLock, LeaderElector, leaderIdentity } from '../../shared/kube/leader-election.ts';
import {
  AvailabilityController,
  clusterGatewaysPath,
  heartbeatLeaseInformerOptions,
} from './availability/availability-controller.ts';
import { admissionHandler, webhookPath } from './availability/lease-not-found-webhook.ts';
import type { ClusterGatewayView, HeartbeatLease } from './availability/observe.ts';
import { WebhookRegistrar, type WebhookTarget, webhookHosts } from './availability/webhook-registrar.ts';
import { ClusterManagementAddOnController } from './cma/cma-controller.ts';
import { SpecHashController } from './configs/spec-hash-controller.ts';
import { defineAddon } from './core/addon.ts';
import type { Controller } from './core/controller.ts';
import { AddonMetrics } from './core/metrics.ts';
import {
  type AddOnDeploymentConfig,
  addonApi,
  type ClusterManagementAddOn,
  type ManagedCluster,
  type ManagedClusterAddOn,
  type ManifestWork,
  workApi,
} from './core/resources.ts';
import { WebhookCertificate } from './core/webhook-certificate.ts';
import type { AgentPodDefinition } from './deploy/agent-manifests.ts';
import { DeployController } from './deploy/deploy-controller.ts';
import { agentValues, deploymentConfigRef, installNamespace } from './deploy/deployment-config.ts';
import { setUpGatewayDeploy } from './gateway-deploy/setup.ts';
import { startHttpServers } from './http.ts';
import { helpText, parseOptions, readWebhookClientCa } from './options.ts';
import type { CertificateSigningRequest } from './registration/csr-approval.ts';
import { CsrApprover, csrCollectionPath, csrLabelSelector } from './registration/csr-approver.ts';
import { RegistrationController } from './registration/registration-controller.ts';
import { setUpReleaseOwner } from './uninstall/release-owner.ts';

const options = optionsOrExit(() => parseOptions(process.argv.slice(2)), helpText);

const log = pino({ level: options.logLevel, base: { component: 'cluster-gateway-addon-manager' } });
const hub = await KubeClient.fromKubeconfig(options.kubeconfig).catch((err: Error) => {
  log.fatal({ err: err.message }, 'cannot load the hub kubeconfig (--kubeconfig, KUBECONFIG or in-cluster)');
  process.exit(1);
});
// The agent's pod settings (--agent-*) ride with the addon to the agent's manifests (deploy/agent-manifests.ts
// reads `agentPod`, deploy/manifest-work.ts passes the addon through).
const addon: ReturnType<typeof defineAddon> & AgentPodDefinition = {
  ...defineAddon({ ...options, credentialNamespace: options.gateway.credentialNamespace }),
  agentPod: options.agentPod,
};
const metrics = new AddonMetrics();
const stop = new AbortController();

// ---- Shared informers: one per watched kind, passed to every controller that reads it.
const informerErrors = (source: string) => ({
  onError: (err: unknown, phase: string) =>
    log.warn({ source, phase, err: (err as Error).message }, 'watch interrupted; retrying'),
});
const informers = {
  managedClusterAddOns: new Informer<ManagedClusterAddOn>(hub, {
    path: `${addonApi}/managedclusteraddons`,
    fieldSelector: `metadata.name=${addon.name}`,
    ...informerErrors('managedclusteraddons'),
  }),
  clusterManagementAddOns: new Informer<ClusterManagementAddOn>(hub, {
    path: `${addonApi}/clustermanagementaddons`,
    fieldSelector: `metadata.name=${addon.name}`,
    ...informerErrors('clustermanagementaddons'),
  }),
  addOnDeploymentConfigs: new Informer<AddOnDeploymentConfig>(hub, {
    path: `${addonApi}/addondeploymentconfigs`,
    ...informerErrors('addondeploymentconfigs'),
  }),
  manifestWorks: new Informer<ManifestWork>(hub, {
    path: `${workApi}/manifestworks`,
    labelSelector: `open-cluster-management.io/addon-name=${addon.name}`,
    ...informerErrors('manifestworks'),
  }),
  managedClusters: new Informer<ManagedCluster>(hub, {
    path: '/apis/cluster.open-cluster-management.io/v1/managedclusters',
    ...informerErrors('managedclusters'),
  }),
  // CSRs of this addon, the agents' hub heartbeat Leases, the gateway's view of each cluster.
  certificateSigningRequests: new Informer<CertificateSigningRequest>(hub, {
    path: csrCollectionPath(),
    labelSelector: csrLabelSelector(addon.name),
    ...informerErrors('certificatesigningrequests'),
  }),
  heartbeatLeases: new Informer<HeartbeatLease>(hub, {
    ...heartbeatLeaseInformerOptions(addon.name),
    ...informerErrors('leases'),
  }),
  // Served by the gateway (aggregated API): absent until it is installed, which then counts as no opinion.
  clusterGateways: new Informer<ClusterGatewayView>(hub, {
    path: clusterGatewaysPath,
    absentRetryMs: 10_000,
    ...informerErrors('clustergateways'),
  }),
};
// ---- The gateway on the hub (--deploy-gateway): its objects' informers and its controller.
const gatewayDeploy = options.gateway.enabled
  ? setUpGatewayDeploy({
      hub,
      addonName: addon.name,
      namespace: options.namespace,
      options: options.gateway,
      log,
      metrics,
      resyncMs: options.resyncSeconds * 1000,
      informerOptions: informerErrors('gateway'),
    })
  : undefined;
// ---- Owned by the release (--owner-cluster-role): the ClusterManagementAddOn and the webhook go with it.
const releaseOwner = options.gateway.ownerClusterRole
  ? setUpReleaseOwner({
      hub,
      addonName: addon.name,
      ownerClusterRole: options.gateway.ownerClusterRole,
      clusterManagementAddOns: informers.clusterManagementAddOns,
      log,
      metrics,
      informerOptions: informerErrors('owner'),
    })
  : undefined;
const allInformers = [
  ...Object.values(informers),
  ...(gatewayDeploy?.informers ?? []),
  ...(releaseOwner?.informers ?? []),
];
for (const informer of allInformers) void informer.start();
const synced = () => allInformers.every((i) => i.hasSynced);

// ---- The AddOnDeploymentConfig in effect for an addon, as the deploy controller resolves it.
function deploymentConfigOf(mca: ManagedClusterAddOn): AddOnDeploymentConfig['spec'] {
  const ref = deploymentConfigRef(mca, informers.clusterManagementAddOns.get(addon.name));
  return ref ? informers.addOnDeploymentConfigs.get(`${ref.namespace}/${ref.name}`)?.spec : undefined;
}
// The install namespace (status.namespace must agree with the deploy controller's).
function resolveInstallNamespace(mca: ManagedClusterAddOn): string {
  return installNamespace(addon, mca, deploymentConfigOf(mca));
}
// The tunnel trust model of a cluster's agent (TUNNEL_TRUST_MODEL): registration grants it its credential Secret.
function resolveTrustModel(mca: ManagedClusterAddOn): string | undefined {
  try {
    return agentValues(addon, mca, deploymentConfigOf(mca)).tunnel?.trustModel;
  } catch {
    return undefined; // an invalid config: the deploy controller reports it; no grant meanwhile
  }
}
// What every controller of the addon is given.
const common = { hub, addon, log, metrics, informers };
const availability = new AvailabilityController({ ...common, installNamespace: resolveInstallNamespace });

// ---- Controllers: constructed now, started on leadership.
const controllers: Controller[] = [
  new ClusterManagementAddOnController(common).controller,
  new DeployController({
    ...common,
    workers: options.workers,
    resyncMs: options.resyncSeconds * 1000,
  }).controller,
  new RegistrationController({
    ...common,
    installNamespace: resolveInstallNamespace,
    trustModel: resolveTrustModel,
  }).controller,
  new CsrApprover(common).controller,
  availability.controller,
  new SpecHashController(common).controller,
  ...(gatewayDeploy?.controllers ?? []),
  ...(releaseOwner ? [releaseOwner.controller] : []),
];

// ---- The LeaseNotFound webhook's serving certificate (one Secret for every replica) and its registration
// (leader only; see availability/webhook-registrar.ts). With --tls-cert-file the certificate, and so the
// registration and its caBundle, are the user's.
const webhookTarget: WebhookTarget =
  'url' in options.webhookTarget
    ? { url: options.webhookTarget.url }
    : { service: { namespace: options.namespace, name: options.webhookTarget.service } };
const webhookCertificate =
  options.webhookPort !== 0 && !options.tlsCertFile
    ? new WebhookCertificate({
        hub,
        namespace: options.namespace,
        secretName: `${addon.name}-addon-manager-webhook`,
        hosts: webhookHosts(webhookTarget),
        log,
      })
    : undefined;
const serving = await webhookCertificate?.ensure().catch((err: Error) => {
  log.fatal({ err: err.message }, 'cannot load or create the webhook serving certificate');
  process.exit(1);
});
const webhookRegistrar = options.tlsCertFile
  ? undefined
  : new WebhookRegistrar({
      hub,
      addonName: addon.name,
      log,
      metrics,
      target: webhookCertificate && addon.healthMode === 'Customized' ? webhookTarget : undefined,
      caBundle: () => webhookCertificate?.current?.caBundle,
    });
if (webhookRegistrar) controllers.push(webhookRegistrar.controller);

// ---- HTTP: probes and metrics (plain), admission webhooks (HTTPS).
const webhookRouter = express.Router();
// Rewrites OCM's Lease-mode Available on our addon (see availability/lease-not-found-webhook.ts).
// Every replica serves it (a standby answers from its last verdict or "waiting").
webhookRouter.post(
  webhookPath,
  admissionHandler({ addonName: addon.name, verdictFor: (c) => availability.verdictFor(c) }),
);
const http = await startHttpServers({
  bindAddress: options.httpBindAddress,
  httpPort: options.httpPort,
  webhookPort: options.webhookPort,
  ...(options.tlsCertFile && options.tlsPrivateKeyFile
    ? { tls: { certFile: options.tlsCertFile, keyFile: options.tlsPrivateKeyFile } }
    : serving
      ? { tls: serving }
      : {}),
  // Only the hub apiserver's client certificate may ask the webhook (lease-not-found-webhook.ts).
  ...(options.webhookClientCaFile
    ? { webhookClientCa: readWebhookClientCa(options.webhookClientCaFile) }
    : {}),
  ready: synced,
  metrics,
  webhookRouter,
  log,
}).catch((err: Error) => {
  log.fatal({ err: err.message }, 'cannot listen');
  process.exit(1);
});
log.info(
  { addon: addon.name, httpPort: http.httpPort, webhookPort: http.webhookPort, healthMode: addon.healthMode },
  'serving probes and metrics',
);
// Every replica picks up a renewed certificate (whichever renewed it); the leader re-registers the bundle.
webhookCertificate?.watch(stop.signal, 10 * 60_000, (renewed) => {
  http.setServingCertificate(renewed);
  webhookRegistrar?.refresh();
});

function startControllers(signal: AbortSignal): void {
  for (const controller of controllers) {
    log.info({ controller: controller.name }, 'starting controller');
    controller.start(signal);
  }
}

let elector: LeaderElector | undefined;
if (options.leaderElect) {
  elector = new LeaderElector({
    lock: new KubeLeaseLock(hub, options.namespace, `${addon.name}-addon-manager`),
    identity: leaderIdentity(),
    leaseDurationMs: options.leaseDurationSeconds * 1000,
    renewDeadlineMs: options.renewDeadlineSeconds * 1000,
    retryPeriodMs: options.retryPeriodSeconds * 1000,
    log,
    onStartedLeading: (signal) => {
      metrics.setLeader(true);
      startControllers(signal);
    },
    onStoppedLeading: () => {
      metrics.setLeader(false);
      if (stop.signal.aborted) return;
      // Another replica may act from now on: stop at once rather than race it.
      log.error({}, 'lost leadership; exiting so that a restart joins as a standby');
      process.exit(1);
    },
  });
  log.info(
    { lease: `${options.namespace}/${addon.name}-addon-manager`, identity: elector.identity },
    'waiting for leadership',
  );
  void elector.run(stop.signal);
} else {
  metrics.setLeader(true);
  startControllers(stop.signal);
}

const shutdown = async (signal: string) => {
  log.info({ signal }, 'shutting down');
  stop.abort();
  // Hand the Lease over at once: a standby takes over on its next retry, not after the lease expires.
  await elector?.release().catch((err: Error) => log.warn({ err: err.message }, 'cannot release the Lease'));
  for (const informer of allInformers) informer.stop();
  await http.close();
  hub.close();
  process.exit(0);
};
process.once('SIGTERM', () => void shutdown('SIGTERM'));
process.once('SIGINT', () => void shutdown('SIGINT'));
