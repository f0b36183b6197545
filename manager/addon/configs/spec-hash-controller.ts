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
import type { Logger } from 'pino';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import type { AddonDefinition } from '../addon.ts';
import { controllerQueue, startWhenSynced } from '../controller-queue.ts';
import { deploymentConfigResource } from '../deploy/deployment-config.ts';
import type { AddonMetrics } from '../metrics.ts';
import {
  type AddOnDeploymentConfig,
  addonApi,
  addonGroup,
  type ClusterManagementAddOn,
  type ConfigReference,
  type ManagedClusterAddOn,
} from '../resources.ts';
import type { WorkQueue } from '../work-queue.ts';
import { configSpecHash } from './spec-hash.ts';

const controllerName = 'config-spec-hash';
const cmaKey = '';

export interface SpecHashControllerDeps {
  hub: Pick<KubeClient, 'mergePatch'>;
  addon: Pick<AddonDefinition, 'name'>;
  log: Logger;
  metrics?: AddonMetrics;
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

/** The ClusterManagementAddOn status patch (v1alpha1 field names), or undefined if up to date. */
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
    metadata: { resourceVersion: cma.metadata.resourceVersion },
    status: {
      ...(defaults ? { defaultconfigReferences: defaults } : {}),
      ...(progressionsChanged ? { installProgressions: progressions } : {}),
    },
  };
}

/** The ManagedClusterAddOn status patch for the configs of its own spec.configs, or undefined. */
export function addonStatusPatch(mca: ManagedClusterAddOn, hashOf: HashLookup) {
  const own = (mca.spec?.configs ?? []).filter(isDeploymentConfig);
  const refs = withSpecHashes(mca.status?.configReferences, hashOf, (ref) =>
    own.some(
      (c) =>
        c.name === ref.desiredConfig?.name && (c.namespace ?? '') === (ref.desiredConfig?.namespace ?? ''),
    ),
  );
  if (!refs) return undefined;
  return { metadata: { resourceVersion: mca.metadata.resourceVersion }, status: { configReferences: refs } };
}

export class SpecHashController {
  readonly #d: SpecHashControllerDeps;
  readonly #log: Logger;
  readonly queue: WorkQueue;

  constructor(deps: SpecHashControllerDeps) {
    this.#d = deps;
    this.#log = deps.log.child({ controller: controllerName });
    this.queue = controllerQueue({
      controller: controllerName,
      reconcile: (key) => this.reconcile(key),
      log: this.#log,
      metrics: deps.metrics,
    });
  }

  start(signal: AbortSignal): void {
    const { informers, addon } = this.#d;
    const addMca = (mca: ManagedClusterAddOn) => {
      if (mca.metadata.name === addon.name && mca.metadata.namespace) this.queue.add(mca.metadata.namespace);
    };
    const addCma = (cma: ClusterManagementAddOn) => {
      if (cma.metadata.name === addon.name) this.queue.add(cmaKey);
    };
    // A config's spec changed: every hash that may name it is looked at again.
    const addAll = () => {
      this.queue.add(cmaKey);
      for (const mca of informers.managedClusterAddOns.list()) addMca(mca);
    };
    const off = [
      informers.managedClusterAddOns.on({ onAdd: addMca, onUpdate: (_o, n) => addMca(n) }),
      informers.clusterManagementAddOns.on({ onAdd: addCma, onUpdate: (_o, n) => addCma(n) }),
      informers.addOnDeploymentConfigs.on({
        onAdd: addAll,
        onUpdate: (o, n) => {
          if (o.metadata.generation !== n.metadata.generation || !o.metadata.generation) addAll();
        },
      }),
    ];
    startWhenSynced(this.queue, signal, {
      synced: [
        informers.managedClusterAddOns.synced,
        informers.clusterManagementAddOns.synced,
        informers.addOnDeploymentConfigs.synced,
      ],
      initial: addAll,
      cleanup: off,
    });
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
      const patch = cma && cmaStatusPatch(cma, hashOf);
      if (!patch) return;
      await hub.mergePatch(`${addonApi}/clustermanagementaddons/${addon.name}/status`, patch);
      this.#log.info({ addon: addon.name }, 'wrote the config spec hashes of the ClusterManagementAddOn');
      return;
    }
    const mca = informers.managedClusterAddOns.get(`${key}/${addon.name}`);
    const patch = mca && !mca.metadata.deletionTimestamp && addonStatusPatch(mca, hashOf);
    if (!patch) return;
    await hub.mergePatch(`${addonApi}/namespaces/${key}/managedclusteraddons/${addon.name}/status`, patch);
    this.#log.info({ cluster: key }, 'wrote the config spec hashes of the ManagedClusterAddOn');
  }
}
