/**
 * Keeps the ClusterManagementAddOn as the manager's flags describe it
 * (server-side apply, only when it differs: OCM's status writes do not
 * cause writes of ours) and creates the default AddOnDeploymentConfig when
 * it is missing (never overwrites it: it is the user's to edit).
 */
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import type { AddonDefinition } from '../core/addon.ts';
import { Controller, type ControllerDeps, watchAll } from '../core/controller.ts';
import {
  type AddOnDeploymentConfig,
  addonApi,
  type ClusterManagementAddOn,
  clusterManagementAddOnPath,
} from '../core/resources.ts';
import { sameJson } from '../deploy/manifest-work.ts';
import { clusterManagementAddOn, defaultDeploymentConfig } from './cluster-management-addon.ts';

export const cmaFieldManager = 'cluster-gateway-addon-manager';

export interface ClusterManagementAddOnControllerDeps extends ControllerDeps {
  addon: AddonDefinition;
  hub: Pick<KubeClient, 'apply' | 'create'>;
  informers: {
    clusterManagementAddOns: Informer<ClusterManagementAddOn>;
    addOnDeploymentConfigs: Informer<AddOnDeploymentConfig>;
  };
}

/** One key: the ClusterManagementAddOn and the default config are looked at together. */
const key = 'cma';

export class ClusterManagementAddOnController {
  readonly #d: ClusterManagementAddOnControllerDeps;
  readonly controller: Controller;

  constructor(deps: ClusterManagementAddOnControllerDeps) {
    this.#d = deps;
    const { informers, addon } = deps;
    const isDefaultConfig = (adc: AddOnDeploymentConfig) =>
      adc.metadata.namespace === addon.configNamespace && adc.metadata.name === addon.defaultConfigName;
    this.controller = new Controller(
      {
        name: 'cluster-management-addon',
        watches: [
          watchAll(informers.clusterManagementAddOns, () => key),
          // Deleted: created again (the default config is never overwritten, only recreated).
          {
            informer: informers.addOnDeploymentConfigs,
            delete: (adc) => (isDefaultConfig(adc) ? key : undefined),
          },
        ],
        keys: () => key,
        sync: () => this.reconcile(),
      },
      deps,
    );
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
        this.controller.log.info(
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
    await hub.apply(clusterManagementAddOnPath(addon.name), desired, cmaFieldManager);
    this.controller.log.info(
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
