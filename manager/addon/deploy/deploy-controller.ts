/**
 * ManagedClusterAddOn -> ManifestWork `addon-<addon>-deploy-0` in the
 * cluster namespace, and the addon's ManifestApplied condition.
 *
 * Level-triggered: a reconcile reads the addon, its AddOnDeploymentConfig
 * and its work from the shared informers, renders the work, applies it only
 * when it differs (server-side apply, our own field manager) and writes
 * ManifestApplied only when it changes. So it is idempotent, and a crash at
 * any point is repaired by the next reconcile (events, or the periodic
 * resync), which also deletes works whose addon is gone (the owner
 * reference lets the garbage collector do the same while no manager runs).
 */
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import type { AddonDefinition } from '../core/addon.ts';
import { applyDeployConditions } from '../core/addon-status.ts';
import {
  manifestAppliedType,
  type NewCondition,
  registrationAppliedType,
  sameVerdict,
} from '../core/conditions.ts';
import { Controller, type ControllerDeps, watchAll } from '../core/controller.ts';
import {
  type AddOnDeploymentConfig,
  type ClusterManagementAddOn,
  findCondition,
  type ManagedClusterAddOn,
  type ManifestWork,
  workApi,
} from '../core/resources.ts';
import {
  agentValues,
  deploymentConfigRef,
  InvalidConfigError,
  ignoredConfigReference,
} from './deployment-config.ts';
import {
  deployWork,
  manifestAppliedCondition,
  workApplyFailedCondition,
  workUpToDate,
} from './manifest-work.ts';

/** Field manager of the ManifestWorks (ManifestApplied has its own: core/addon-status.ts). */
export const workFieldManager = 'cluster-gateway-addon-manager';

export interface DeployControllerDeps extends ControllerDeps {
  hub: Pick<KubeClient, 'apply' | 'delete'>;
  addon: AddonDefinition;
  informers: {
    managedClusterAddOns: Informer<ManagedClusterAddOn>;
    clusterManagementAddOns: Informer<ClusterManagementAddOn>;
    addOnDeploymentConfigs: Informer<AddOnDeploymentConfig>;
    manifestWorks: Informer<ManifestWork>;
  };
  workers?: number;
  resyncMs?: number;
  now?: () => number;
}

export class DeployController {
  readonly #d: DeployControllerDeps;
  readonly #now: () => number;
  readonly controller: Controller;
  /** The ignored status reference last logged per cluster: logged when it changes, not at every sync. */
  readonly #ignoredLogged = new Map<string, string>();

  constructor(deps: DeployControllerDeps) {
    this.#d = deps;
    this.#now = deps.now ?? Date.now;
    const { informers, addon } = deps;
    const ofAddon = (mca: ManagedClusterAddOn) =>
      mca.metadata.name === addon.name && mca.metadata.namespace ? mca.metadata.namespace : undefined;
    const ofWork = (work: ManifestWork) =>
      work.metadata.name === addon.deployWorkName && work.metadata.namespace
        ? work.metadata.namespace
        : undefined;
    const all = () => [
      ...informers.managedClusterAddOns.list().flatMap((mca) => ofAddon(mca) ?? []),
      ...informers.manifestWorks.list().flatMap((work) => ofWork(work) ?? []),
    ];
    // A config change concerns the addons it is in effect for.
    const users = (adc: AddOnDeploymentConfig) => {
      const cma = informers.clusterManagementAddOns.get(addon.name);
      return informers.managedClusterAddOns.list().flatMap((mca) => {
        const ref = deploymentConfigRef(mca, cma);
        const uses = ref && ref.namespace === adc.metadata.namespace && ref.name === adc.metadata.name;
        return (uses && ofAddon(mca)) || [];
      });
    };
    this.controller = new Controller(
      {
        name: 'deploy',
        workers: deps.workers ?? 4,
        watches: [
          watchAll(informers.managedClusterAddOns, ofAddon),
          watchAll(informers.manifestWorks, ofWork),
          watchAll(informers.addOnDeploymentConfigs, users),
          watchAll(informers.clusterManagementAddOns, all),
        ],
        keys: all,
        resyncMs: deps.resyncMs ?? 300_000,
        sync: (cluster) => this.reconcile(cluster),
        afterSync: () => this.#countConditions(),
      },
      deps,
    );
  }

  /** One cluster: make its deploy work match its addon (or delete it), then report ManifestApplied. */
  async reconcile(cluster: string): Promise<void> {
    const { hub, addon, informers } = this.#d;
    const log = this.controller.log.child({ cluster });
    const workPath = `${workApi}/namespaces/${cluster}/manifestworks/${addon.deployWorkName}`;
    const mca = informers.managedClusterAddOns.get(`${cluster}/${addon.name}`);
    const existing = informers.manifestWorks.get(`${cluster}/${addon.deployWorkName}`);

    if (!mca || mca.metadata.deletionTimestamp) {
      if (existing) {
        // The work agent then deletes what the work applied on the managed cluster.
        await hub.delete(workPath);
        log.info({ work: addon.deployWorkName }, 'addon disabled: deleted the deploy ManifestWork');
      }
      return;
    }
    // As addon-framework (agentdeploy): deploy once registration is configured. The agent mounts the
    // hub kubeconfig Secret that registration produces, in the namespace status.namespace names; the
    // registration controller writes RegistrationApplied within milliseconds of the addon's creation,
    // and that status write requeues this addon, so the wait costs one round trip, not a resync.
    if (!findCondition(mca.status?.conditions, registrationAppliedType)) {
      log.debug({}, 'waiting for RegistrationApplied before deploying the agent');
      return;
    }

    const cma = informers.clusterManagementAddOns.get(addon.name);
    const ref = deploymentConfigRef(mca, cma);
    // A status reference the hub did not configure (the klusterlet may write the status) is not followed: say so.
    const ignored = ignoredConfigReference(mca, cma);
    if (ignored && this.#ignoredLogged.get(cluster) !== ignored) {
      this.#ignoredLogged.set(cluster, ignored);
      log.warn({ config: ref ? `${ref.namespace}/${ref.name}` : 'defaults' }, ignored);
    } else if (!ignored) this.#ignoredLogged.delete(cluster);
    let spec: AddOnDeploymentConfig['spec'];
    const where = ref ? `AddOnDeploymentConfig ${ref.namespace}/${ref.name}` : 'the defaults';
    if (ref) {
      const adc = informers.addOnDeploymentConfigs.get(`${ref.namespace}/${ref.name}`);
      if (!adc) {
        // Keep the agent as it runs; the config's creation requeues this addon.
        await this.#setCondition(
          mca,
          workApplyFailedCondition(
            `${where} (referenced by ${ref.source}) does not exist: create it, or reference an existing one`,
          ),
        );
        return;
      }
      spec = adc.spec;
    }
    let values: ReturnType<typeof agentValues>;
    try {
      values = agentValues(addon, mca, spec, where);
    } catch (err) {
      if (!(err instanceof InvalidConfigError)) throw err;
      await this.#setCondition(
        mca,
        workApplyFailedCondition(`${err.message}; the agent keeps its previous configuration`),
      );
      return;
    }
    if (values.ignoredVariables.length > 0) {
      log.debug(
        { variables: values.ignoredVariables, config: where },
        'customizedVariables unknown to the agent are ignored',
      );
    }

    const desired = deployWork(addon, mca, values, ref);
    let work = existing;
    if (!workUpToDate(existing, desired)) {
      try {
        work = await hub.apply<ManifestWork>(workPath, desired, workFieldManager);
      } catch (err) {
        await this.#setCondition(
          mca,
          workApplyFailedCondition(`failed to apply manifestWork: ${(err as Error).message}`),
        ).catch(() => {});
        throw err;
      }
      log.info(
        {
          work: addon.deployWorkName,
          installNamespace: values.installNamespace,
          config: where,
          created: !existing,
        },
        existing ? 'updated the deploy ManifestWork' : 'created the deploy ManifestWork',
      );
    }
    const condition = manifestAppliedCondition(work);
    if (condition) {
      await this.#setCondition(mca, condition);
    } else if (findCondition(mca.status?.conditions, manifestAppliedType)?.status === 'False') {
      // The work agent has not reported on the new work yet: a stale failure must not linger (as addon-framework).
      await this.#setConditions(mca, []);
    }
  }

  async #setCondition(mca: ManagedClusterAddOn, condition: NewCondition): Promise<void> {
    if (sameVerdict(findCondition(mca.status?.conditions, condition.type), condition)) return;
    await this.#setConditions(mca, [condition]);
    this.controller.log.info(
      {
        cluster: mca.metadata.namespace,
        type: condition.type,
        status: condition.status,
        reason: condition.reason,
      },
      condition.message,
    );
  }

  async #setConditions(mca: ManagedClusterAddOn, conditions: NewCondition[]): Promise<void> {
    await applyDeployConditions(this.#d.hub, mca, conditions, this.#now());
  }

  #countConditions(): void {
    const metrics = this.#d.metrics;
    if (!metrics) return;
    const counts = new Map<string, number>();
    for (const mca of this.#d.informers.managedClusterAddOns.list()) {
      const c = findCondition(mca.status?.conditions, manifestAppliedType);
      const key = c ? `${c.status}/${c.reason}` : 'Unknown/NotReported';
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    metrics.setAddonsByReason(manifestAppliedType, counts);
  }
}
