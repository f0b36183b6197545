/**
 * Keeps the ClusterManagementAddOn as the manager's flags describe it
 * (server-side apply, only when it differs: OCM's status writes do not
 * cause writes of ours) and creates the default AddOnDeploymentConfig when
 * it is missing (never overwrites it: it is the user's to edit).
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import type { AddonDefinition } from '../addon.ts';
import { controllerQueue, startWhenSynced } from '../controller-queue.ts';
import { sameJson } from '../deploy/manifest-work.ts';
import type { AddonMetrics } from '../metrics.ts';
import { type AddOnDeploymentConfig, addonApi, type ClusterManagementAddOn } from '../resources.ts';
import type { WorkQueue } from '../work-queue.ts';
import { clusterManagementAddOn, defaultDeploymentConfig } from './cluster-management-addon.ts';

export const cmaFieldManager = 'cluster-gateway-addon-manager';
const controllerName = 'cluster-management-addon';
const key = 'cma';

export interface ClusterManagementAddOnControllerDeps {
  hub: Pick<KubeClient, 'apply' | 'create'>;
  addon: AddonDefinition;
  log: Logger;
  metrics?: AddonMetrics;
  informers: {
    clusterManagementAddOns: Informer<ClusterManagementAddOn>;
    addOnDeploymentConfigs: Informer<AddOnDeploymentConfig>;
  };
}

export class ClusterManagementAddOnController {
  readonly #d: ClusterManagementAddOnControllerDeps;
  readonly #log: Logger;
  readonly queue: WorkQueue;

  constructor(deps: ClusterManagementAddOnControllerDeps) {
    this.#d = deps;
    this.#log = deps.log.child({ controller: controllerName });
    this.queue = controllerQueue({
      controller: controllerName,
      reconcile: () => this.reconcile(),
      log: this.#log,
      metrics: deps.metrics,
    });
  }

  start(signal: AbortSignal): void {
    const { informers, addon } = this.#d;
    const requeue = () => this.queue.add(key);
    const requeueDefaultConfig = (adc: AddOnDeploymentConfig) => {
      if (adc.metadata.namespace === addon.configNamespace && adc.metadata.name === addon.defaultConfigName) {
        requeue();
      }
    };
    const off = [
      informers.clusterManagementAddOns.on({ onAdd: requeue, onUpdate: requeue, onDelete: requeue }),
      informers.addOnDeploymentConfigs.on({ onDelete: requeueDefaultConfig }),
    ];
    startWhenSynced(this.queue, signal, {
      synced: [informers.clusterManagementAddOns.synced, informers.addOnDeploymentConfigs.synced],
      initial: requeue,
      cleanup: off,
    });
  }

  async reconcile(): Promise<void> {
    const { hub, addon, informers } = this.#d;
    const defaultConfig = defaultDeploymentConfig(addon);
    if (!informers.addOnDeploymentConfigs.get(`${addon.configNamespace}/${addon.defaultConfigName}`)) {
      try {
        await hub.create(
          `${addonApi}/namespaces/${addon.configNamespace}/addondeploymentconfigs`,
          defaultConfig,
        );
        this.#log.info(
          { config: `${addon.configNamespace}/${addon.defaultConfigName}` },
          'created the default AddOnDeploymentConfig',
        );
      } catch (err) {
        if (!(err instanceof StatusError && err.code === 409)) throw err;
      }
    }
    const desired = clusterManagementAddOn(addon);
    const current = informers.clusterManagementAddOns.get(addon.name);
    if (current && sameJson(desired.spec, current.spec) && sameSpecShape(desired, current)) return;
    await hub.apply(`${addonApi}/clustermanagementaddons/${addon.name}`, desired, cmaFieldManager);
    this.#log.info(
      { addon: addon.name, installStrategy: desired.spec?.installStrategy?.type },
      current ? 'updated the ClusterManagementAddOn' : 'created the ClusterManagementAddOn',
    );
  }
}

/** sameJson ignores extra fields; placements we no longer want are extra fields that matter. */
function sameSpecShape(desired: ClusterManagementAddOn, current: ClusterManagementAddOn): boolean {
  const want = desired.spec?.installStrategy;
  const have = current.spec?.installStrategy;
  return want?.type === have?.type && (want?.placements?.length ?? 0) === (have?.placements?.length ?? 0);
}
