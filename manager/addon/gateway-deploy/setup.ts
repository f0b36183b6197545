/**
 * Wires the gateway controllers for main.ts: their informers (started by every
 * replica, with the manager's others) and the controllers (started on
 * leadership), from the manager's options: the gateway's objects, and the
 * approver of its replicas' peer certificates (peer-certificates.ts).
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { Informer, InformerOptions } from '../../../shared/kube/informer.ts';
import type { Controller } from '../core/controller.ts';
import type { AddonMetrics } from '../core/metrics.ts';
import { EventRecorder } from './events.ts';
import { GatewayController } from './gateway-controller.ts';
import { allInformers, gatewayInformers } from './informers.ts';
import { gatewayNames } from './names.ts';
import type { GatewayDeployOptions } from './options.ts';
import { PeerCertificateApprover, peerCsrInformer } from './peer-certificates.ts';

export interface GatewayDeploySetup {
  // biome-ignore lint/suspicious/noExplicitAny: informers of several object types.
  informers: Informer<any>[];
  controllers: Controller[];
}

export function setUpGatewayDeploy(deps: {
  hub: KubeClient;
  addonName: string;
  namespace: string;
  options: GatewayDeployOptions;
  log: Logger;
  metrics: AddonMetrics;
  resyncMs: number;
  informerOptions: Pick<InformerOptions, 'onError'>;
}): GatewayDeploySetup {
  const names = gatewayNames(deps.namespace, deps.options.name, deps.options.credentialNamespace);
  const informers = gatewayInformers(deps.hub, names, deps.options.ownerClusterRole, deps.informerOptions);
  const gateway = new GatewayController({
    hub: deps.hub,
    addonName: deps.addonName,
    namespace: deps.namespace,
    options: deps.options,
    informers,
    log: deps.log,
    metrics: deps.metrics,
    events: new EventRecorder(deps.hub, deps.log, 'cluster-gateway-addon-manager'),
    resyncMs: deps.resyncMs,
  });
  const peerCsrs = peerCsrInformer(deps.hub, deps.informerOptions);
  const peerCertificates = new PeerCertificateApprover({
    hub: deps.hub,
    csrs: peerCsrs,
    namespace: names.namespace,
    serviceAccount: names.name,
    log: deps.log,
    metrics: deps.metrics,
  });
  return {
    informers: [...allInformers(informers), peerCsrs],
    controllers: [gateway.controller, peerCertificates.controller],
  };
}
