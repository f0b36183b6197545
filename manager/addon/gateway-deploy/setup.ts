/**
 * Wires the gateway controller for main.ts: its informers (started by every
 * replica, with the manager's others) and the controller (started on
 * leadership), from the manager's options.
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

export interface GatewayDeploySetup {
  informers: Informer[];
  controller: Controller;
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
  return { informers: allInformers(informers), controller: gateway.controller };
}
