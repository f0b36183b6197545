/**
 * The addon's availability: the manager is the single writer of the
 * ManagedClusterAddOn's `Available` condition (`status.healthCheck.mode:
 * Customized`, which OCM's registration agent reads and then leaves
 * `Available` alone). It gathers observations (ManagedCluster, ManifestWork
 * and its Deployment feedback, the hub heartbeat Lease, the gateway's
 * ClusterGateway), computes the verdict (available.ts) and writes it only
 * when it changes, merged by type through server-side apply under a field
 * manager of its own (core/addon-status.ts): OCM's conditions are never
 * touched.
 *
 * Heartbeat age is re-evaluated on a timer, not only on events: a dead agent
 * produces no event, so each addon is looked at again the moment its last
 * heartbeat would turn stale.
 *
 * In Lease mode (--health-mode=Lease) it writes `healthCheck.mode: Lease`
 * and nothing else, under a field manager of its own: the availability field
 * manager's apply would drop the `Available` it owned, and a watcher then saw
 * no Available at all until the registration agent's next look (measured 29 s,
 * its 30 s resync). So the last verdict stays until OCM's Lease verdict
 * replaces it.
 */
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import { type AddonDefinition, hubHeartbeatLeaseName, specInstallNamespace } from '../core/addon.ts';
import { applyAvailable, applyLeaseMode } from '../core/addon-status.ts';
import { availableType, type ConditionVerdict, findCondition, sameVerdict } from '../core/conditions.ts';
import { Controller, type ControllerDeps, watchAll } from '../core/controller.ts';
import type { ManagedCluster, ManagedClusterAddOn, ManifestWork } from '../core/resources.ts';
import { computeAvailable, type HealthObservations } from './available.ts';
import {
  type ClusterGatewayView,
  HeartbeatClock,
  type HeartbeatLease,
  observeCluster,
  observeDeployment,
  observeGateway,
  observeWork,
} from './observe.ts';

export interface AvailabilityControllerDeps extends ControllerDeps {
  hub: KubeClient;
  addon: Pick<
    AddonDefinition,
    'name' | 'healthMode' | 'deployWorkName' | 'agentName' | 'defaultInstallNamespace'
  >;
  informers: {
    managedClusterAddOns: Informer<ManagedClusterAddOn>;
    manifestWorks: Informer<ManifestWork>;
    managedClusters: Informer<ManagedCluster>;
    heartbeatLeases: Informer<HeartbeatLease>;
    /** Optional: without it (or while the API is not served) the gateway's view is not held against the agent. */
    clusterGateways?: Informer<ClusterGatewayView>;
  };
  /** A heartbeat older than this is stale (default 12 s: the agent renews every 5 s, jitter up to 20 %). */
  heartbeatStaleSeconds?: number;
  installNamespace?: (addon: ManagedClusterAddOn) => string | Promise<string>;
}

/** Informer settings for the hub heartbeat Leases (every cluster namespace, our label only). */
export function heartbeatLeaseInformerOptions(addonName: string) {
  return {
    path: '/apis/coordination.k8s.io/v1/leases',
    labelSelector: `open-cluster-management.io/addon-name=${addonName}`,
  };
}
export const clusterGatewaysPath = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';

export class AvailabilityController {
  readonly #deps: AvailabilityControllerDeps;
  readonly controller: Controller;
  readonly #clock = new HeartbeatClock();
  readonly #staleSeconds: number;
  /** The latest verdict per "cluster/addon", for the admission webhook. */
  readonly #verdicts = new Map<string, ConditionVerdict>();
  readonly #leaseModeWritten = new Set<string>();

  constructor(deps: AvailabilityControllerDeps) {
    this.#deps = deps;
    this.#staleSeconds = deps.heartbeatStaleSeconds ?? 12;
    const name = deps.addon.name;
    const i = deps.informers;
    const byNamespace = (obj: { metadata?: { namespace?: string } }) =>
      obj.metadata?.namespace ? `${obj.metadata.namespace}/${name}` : undefined;
    const byName = (obj: { metadata?: { name?: string } }) =>
      obj.metadata?.name ? `${obj.metadata.name}/${name}` : undefined;
    const ofAddon = (obj: ManagedClusterAddOn) => (obj.metadata.name === name ? byNamespace(obj) : undefined);
    this.controller = new Controller(
      {
        // The name its metrics and logs have always carried.
        name: 'health',
        workers: 4,
        watches: [
          watchAll(i.managedClusterAddOns, ofAddon),
          watchAll(i.manifestWorks, byNamespace),
          watchAll(i.managedClusters, byName),
          watchAll(i.heartbeatLeases, byNamespace),
          // Served by the gateway: absent or unavailable until it is installed, which counts as no opinion.
          ...(i.clusterGateways ? [watchAll(i.clusterGateways, byName, { optional: true })] : []),
        ],
        keys: () => i.managedClusterAddOns.list().flatMap((obj) => ofAddon(obj) ?? []),
        resyncMs: 30_000,
        sync: (key) => this.reconcile(key),
      },
      deps,
    );
  }

  /** The verdict the manager holds for `cluster` (undefined before its first reconcile). */
  verdictFor(cluster: string): ConditionVerdict | undefined {
    return this.#verdicts.get(`${cluster}/${this.#deps.addon.name}`);
  }

  /** Observations for one addon, from the informer caches. */
  async observations(addon: ManagedClusterAddOn, now = Date.now()): Promise<HealthObservations> {
    const { informers: i, addon: def } = this.#deps;
    const cluster = addon.metadata.namespace ?? '';
    const namespace =
      (await this.#deps.installNamespace?.(addon)) ??
      specInstallNamespace(addon, def.defaultInstallNamespace);
    const work = i.manifestWorks.get(`${cluster}/${def.deployWorkName}`);
    const gatewayServed = i.clusterGateways
      ? i.clusterGateways.hasSynced && !i.clusterGateways.absent
      : false;
    return {
      addonName: def.name,
      cluster,
      workName: def.deployWorkName,
      agentDeployment: `${namespace}/${def.agentName}`,
      managedCluster: observeCluster(i.managedClusters.get(cluster)),
      work: observeWork(work),
      deployment: observeDeployment(work, namespace, def.agentName),
      heartbeat: this.#clock.observe(
        i.heartbeatLeases.get(`${cluster}/${hubHeartbeatLeaseName(def.name)}`),
        now,
      ),
      gateway: observeGateway(i.clusterGateways?.get(cluster), gatewayServed),
      credential: addon.status?.conditions?.find((c) => c.type === 'ClusterCertificateRotated'),
      heartbeatStaleSeconds: this.#staleSeconds,
    };
  }

  async reconcile(key: string): Promise<{ requeueAfterMs?: number } | undefined> {
    const { hub, addon: def } = this.#deps;
    const log = this.controller.log;
    const addon = this.#deps.informers.managedClusterAddOns.get(key);
    if (!addon || addon.metadata.name !== def.name || addon.metadata.deletionTimestamp) {
      this.#verdicts.delete(key);
      this.#updateMetrics();
      return undefined;
    }
    const cluster = addon.metadata.namespace ?? '';
    if (def.healthMode === 'Lease') {
      if (addon.status?.healthCheck?.mode !== 'Lease' || !this.#leaseModeWritten.has(key)) {
        await applyLeaseMode(hub, addon);
        this.#leaseModeWritten.add(key);
      }
      return undefined;
    }

    const now = Date.now();
    const observations = await this.observations(addon, now);
    const verdict = computeAvailable(observations);
    this.#verdicts.set(key, verdict);
    this.#updateMetrics();
    const current = findCondition(addon.status?.conditions, availableType);
    if (addon.status?.healthCheck?.mode !== 'Customized' || !sameVerdict(current, verdict)) {
      await applyAvailable(hub, addon, verdict, now);
      log.info({ cluster, addon: def.name, status: verdict.status, reason: verdict.reason }, verdict.message);
    }
    // Look again when a fresh heartbeat would turn stale.
    const h = observations.heartbeat;
    if (h.state === 'renewed' && h.ageSeconds <= this.#staleSeconds) {
      return { requeueAfterMs: Math.ceil((this.#staleSeconds - h.ageSeconds) * 1000) + 200 };
    }
    return undefined;
  }

  #updateMetrics(): void {
    if (!this.#deps.metrics) return;
    const counts = new Map<string, number>();
    for (const v of this.#verdicts.values()) {
      const k = `${v.status}/${v.reason}`;
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    this.#deps.metrics.setAddonsByReason(availableType, counts);
  }
}
