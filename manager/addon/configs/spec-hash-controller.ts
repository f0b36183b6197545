/**
 * Writes the spec hashes of the AddOnDeploymentConfigs in effect, as
 * addon-framework's cmaconfig and addonconfig controllers do for a Go addon
 * (OCM's own addon-manager only copies them, addonconfiguration/graph.go):
 * - ClusterManagementAddOn `status.defaultconfigReferences[].desiredConfig`
 *   and `status.installProgressions[].configReferences[].desiredConfig`
 *   (v1alpha1 spelling; OCM copies these into each ManagedClusterAddOn);
 * - ManagedClusterAddOn `status.configReferences[].desiredConfig` for the
 *   configs named in its own `spec.configs` (OCM copies nothing there).
 * The deploy work then carries the same hashes (config-spec-hash
 * annotation) and OCM's addonprogressing controller can say `Progressing
 * False / Completed`.
 *
 * The lists are atomic in the CRDs, so they are written whole with a merge
 * patch that carries the resourceVersion read: a concurrent write of OCM's
 * makes ours fail with a conflict and the retry starts from its version.
 */
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import type { AddonDefinition } from '../core/addon.ts';
import { patchClusterManagementAddOnStatus, patchConfigReferences } from '../core/addon-status.ts';
import { Controller, type ControllerDeps } from '../core/controller.ts';
import {
  type AddOnDeploymentConfig,
  addonGroup,
  type ClusterManagementAddOn,
  type ConfigReference,
  type ManagedClusterAddOn,
} from '../core/resources.ts';
import { deploymentConfigResource } from '../deploy/deployment-config.ts';
import { configSpecHash } from './spec-hash.ts';

const cmaKey = '';

export interface SpecHashControllerDeps extends ControllerDeps {
  hub: Pick<KubeClient, 'mergePatch'>;
  addon: Pick<AddonDefinition, 'name'>;
  informers: {
    clusterManagementAddOns: Informer<ClusterManagementAddOn>;
    managedClusterAddOns: Informer<ManagedClusterAddOn>;
    addOnDeploymentConfigs: Informer<AddOnDeploymentConfig>;
  };
}

type HashLookup = (namespace: string | undefined, name: string) => string | undefined;
type Ref = Pick<ConfigReference, 'group' | 'resource' | 'desiredConfig'>;

const isDeploymentConfig = (r: { group?: string; resource?: string }) =>
  r.group === addonGroup && r.resource === deploymentConfigResource;

/**
 * `refs` with each AddOnDeploymentConfig desiredConfig's specHash set to the
 * config's current hash (only where `include` says so and the config
 * exists); undefined when nothing changes.
 */
export function withSpecHashes<T extends Ref>(
  refs: readonly T[] | undefined,
  hashOf: HashLookup,
  include: (ref: T) => boolean = () => true,
): T[] | undefined {
  let changed = false;
  const next = (refs ?? []).map((ref) => {
    const desired = ref.desiredConfig;
    if (!desired?.name || !isDeploymentConfig(ref) || !include(ref)) return ref;
    const hash = hashOf(desired.namespace, desired.name);
    if (hash === undefined || hash === desired.specHash) return ref;
    changed = true;
    return { ...ref, desiredConfig: { ...desired, specHash: hash } };
  });
  return changed ? next : undefined;
}

/** The ClusterManagementAddOn status fields to write (v1alpha1 names), or undefined if up to date. */
export function cmaStatusPatch(cma: ClusterManagementAddOn, hashOf: HashLookup) {
  const status = (cma.status ?? {}) as {
    defaultconfigReferences?: Ref[];
    installProgressions?: { configReferences?: Ref[] }[];
  };
  const defaults = withSpecHashes(status.defaultconfigReferences, hashOf);
  let progressionsChanged = false;
  const progressions = (status.installProgressions ?? []).map((p) => {
    const refs = withSpecHashes(p.configReferences, hashOf);
    if (!refs) return p;
    progressionsChanged = true;
    return { ...p, configReferences: refs };
  });
  if (!defaults && !progressionsChanged) return undefined;
  return {
    ...(defaults ? { defaultconfigReferences: defaults } : {}),
    ...(progressionsChanged ? { installProgressions: progressions } : {}),
  };
}

/** The ManagedClusterAddOn's configReferences with the hashes of its own spec.configs, or undefined if up to date. */
export function addonConfigReferences(
  mca: ManagedClusterAddOn,
  hashOf: HashLookup,
): ConfigReference[] | undefined {
  const own = (mca.spec?.configs ?? []).filter(isDeploymentConfig);
  const refs = withSpecHashes(mca.status?.configReferences, hashOf, (ref) =>
    own.some(
      (c) =>
        c.name === ref.desiredConfig?.name && (c.namespace ?? '') === (ref.desiredConfig?.namespace ?? ''),
    ),
  );
  return refs;
}

export class SpecHashController {
  readonly #d: SpecHashControllerDeps;
  readonly controller: Controller;

  constructor(deps: SpecHashControllerDeps) {
    this.#d = deps;
    const { informers, addon } = deps;
    const ofAddon = (mca: ManagedClusterAddOn) =>
      mca.metadata.name === addon.name && mca.metadata.namespace ? mca.metadata.namespace : undefined;
    const ofCma = (cma: ClusterManagementAddOn) => (cma.metadata.name === addon.name ? cmaKey : undefined);
    // A config's spec changed: every hash that may name it is looked at again.
    const all = () => [cmaKey, ...informers.managedClusterAddOns.list().flatMap((mca) => ofAddon(mca) ?? [])];
    this.controller = new Controller(
      {
        name: 'config-spec-hash',
        watches: [
          { informer: informers.managedClusterAddOns, add: ofAddon, update: ofAddon },
          { informer: informers.clusterManagementAddOns, add: ofCma, update: ofCma },
          {
            informer: informers.addOnDeploymentConfigs,
            add: all,
            update: (n, o) =>
              o.metadata.generation !== n.metadata.generation || !o.metadata.generation ? all() : undefined,
          },
        ],
        keys: all,
        sync: (key) => this.reconcile(key),
      },
      deps,
    );
  }

  /** `key`: '' for the ClusterManagementAddOn, else a cluster name. */
  async reconcile(key: string): Promise<void> {
    const { hub, addon, informers } = this.#d;
    const hashOf: HashLookup = (namespace, name) => {
      const config = informers.addOnDeploymentConfigs.get(namespace ? `${namespace}/${name}` : name);
      return config ? configSpecHash(config as unknown as Record<string, unknown>) : undefined;
    };
    if (key === cmaKey) {
      const cma = informers.clusterManagementAddOns.get(addon.name);
      const status = cma && cmaStatusPatch(cma, hashOf);
      if (!cma || !status) return;
      await patchClusterManagementAddOnStatus(hub, cma, status);
      this.controller.log.info(
        { addon: addon.name },
        'wrote the config spec hashes of the ClusterManagementAddOn',
      );
      return;
    }
    const mca = informers.managedClusterAddOns.get(`${key}/${addon.name}`);
    const refs = mca && !mca.metadata.deletionTimestamp ? addonConfigReferences(mca, hashOf) : undefined;
    if (!mca || !refs) return;
    await patchConfigReferences(hub, mca, refs);
    this.controller.log.info({ cluster: key }, 'wrote the config spec hashes of the ManagedClusterAddOn');
  }
}
