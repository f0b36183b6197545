/**
 * Keeps the ClusterManagementAddOn as the manager's flags describe it
 * (server-side apply, only when it differs: OCM's status writes do not
 * cause writes of ours) and creates the default AddOnDeploymentConfig when
 * it is missing (never overwrites it: it is the user's to edit).
 *
 * The chart declares the ClusterManagementAddOn itself (so helm and GitOps
 * tools own it): one labelled `app.kubernetes.io/managed-by` is left as it
 * is, never written, and once such a one is deleted (helm uninstall, which
 * also takes this manager away) this process does not make it again: its
 * owner puts it back (helm upgrade, a GitOps sync). A manager run without
 * the chart still creates a missing one and keeps it as its flags say.
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
import {
  clusterManagementAddOn,
  declaredElsewhere,
  defaultDeploymentConfig,
  managedByLabel,
} from './cluster-management-addon.ts';

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
  /** The tool that declared the ClusterManagementAddOn, last seen (its managed-by label); undefined: none. */
  #declaredBy: string | undefined;

  constructor(deps: ClusterManagementAddOnControllerDeps) {
    this.#d = deps;
    const { informers, addon } = deps;
    const isDefaultConfig = (adc: AddOnDeploymentConfig) =>
      adc.metadata.namespace === addon.configNamespace && adc.metadata.name === addon.defaultConfigName;
    // Noted from every event, so that a deletion is known to be of a declared one even when the add and
    // the delete reach the queue together.
    const noted = (cma: ClusterManagementAddOn) => {
      this.#declaredBy = declaredElsewhere(cma) ? cma.metadata.labels?.[managedByLabel] : undefined;
      return key;
    };
    this.controller = new Controller(
      {
        name: 'cluster-management-addon',
        watches: [
          watchAll(informers.clusterManagementAddOns, noted),
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
    if (current && declaredElsewhere(current)) return;
    if (!current && this.#declaredBy) {
      this.controller.log.info(
        { addon: addon.name, declaredBy: this.#declaredBy },
        'the ClusterManagementAddOn declared by another tool is gone (an uninstall?); not making one: its owner declares it again',
      );
      return;
    }
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
