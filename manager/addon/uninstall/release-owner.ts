/**
 * What the manager makes across the hub goes when it is uninstalled: the
 * ClusterManagementAddOn and the LeaseNotFound webhook's
 * MutatingWebhookConfiguration get an owner reference to --owner-cluster-role
 * (the chart passes its own ClusterRole, which `helm uninstall` deletes).
 * The garbage collector then deletes the ClusterManagementAddOn, which takes
 * every ManagedClusterAddOn with it (OCM's addon-manager makes them owned by
 * it), which takes each cluster's ManifestWork, so the work agents remove the
 * agents from the managed clusters; and the webhook registration, so no
 * apiserver keeps calling a manager that is gone.
 *
 * Only the owner reference is written, by server-side apply under a field
 * manager of its own: the controllers that own these objects keep applying
 * their fields without removing it. With the owner missing or being deleted
 * (an uninstall in progress) nothing is written.
 */
import type { KubeClient, KubeObject } from '../../../shared/kube/client.ts';
import { Informer, type InformerOptions } from '../../../shared/kube/informer.ts';
import { Controller, type ControllerDeps } from '../core/controller.ts';
import { addonApiVersion, clusterManagementAddOnPath, type OwnerReference } from '../core/resources.ts';
import type { ProcessResult } from '../core/work-queue.ts';

export const releaseOwnerFieldManager = 'cluster-gateway-addon-manager-release-owner';
const key = 'owners';

export interface ReleaseOwnerDeps extends ControllerDeps {
  hub: Pick<KubeClient, 'apply' | 'getOptional'>;
  addonName: string;
  ownerClusterRole: string;
  informers: { owner: Informer<KubeObject>; clusterManagementAddOns: Informer<KubeObject> };
  /** Looked at again this often: the webhook configuration has no informer (default 1 min). */
  resyncMs?: number;
}

/** The objects to own: path, and the apply body's identity. */
export function ownedObjects(addonName: string) {
  return [
    {
      path: clusterManagementAddOnPath(addonName),
      apiVersion: addonApiVersion,
      kind: 'ClusterManagementAddOn',
      name: addonName,
    },
    {
      path: `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${addonName}-addon-available`,
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      name: `${addonName}-addon-available`,
    },
  ];
}

export class ReleaseOwner {
  readonly #d: ReleaseOwnerDeps;
  readonly controller: Controller;

  constructor(deps: ReleaseOwnerDeps) {
    this.#d = deps;
    const { owner, clusterManagementAddOns } = deps.informers;
    const owned = { add: () => key, update: () => key };
    this.controller = new Controller(
      {
        name: 'release-owner',
        watches: [
          { informer: owner, ...owned },
          { informer: clusterManagementAddOns, ...owned },
        ],
        keys: () => key,
        sync: () => this.reconcile(),
      },
      deps,
    );
  }

  async reconcile(): Promise<ProcessResult> {
    const { hub, informers, ownerClusterRole } = this.#d;
    const again = { requeueAfterMs: this.#d.resyncMs ?? 60_000 };
    const owner = informers.owner.get(ownerClusterRole);
    if (!owner?.metadata?.uid || owner.metadata.deletionTimestamp) return again;
    const reference: OwnerReference = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      name: ownerClusterRole,
      uid: String(owner.metadata.uid),
    };
    for (const target of ownedObjects(this.#d.addonName)) {
      const current = await hub.getOptional(target.path);
      if (!current) continue;
      const refs = (current.metadata?.ownerReferences ?? []) as OwnerReference[];
      if (refs.some((r) => r.uid === reference.uid)) continue;
      await hub.apply(
        target.path,
        {
          apiVersion: target.apiVersion,
          kind: target.kind,
          metadata: { name: target.name, ownerReferences: [reference] },
        },
        releaseOwnerFieldManager,
      );
      this.controller.log.info(
        { kind: target.kind, name: target.name, owner: ownerClusterRole },
        'owned by the release: removed with it',
      );
    }
    return again;
  }
}

/** For main.ts: the owner ClusterRole's informer (started with the others) and the controller. */
export function setUpReleaseOwner(
  deps: Omit<ReleaseOwnerDeps, 'informers'> & {
    hub: KubeClient;
    clusterManagementAddOns: Informer<KubeObject>;
    informerOptions: Pick<InformerOptions, 'onError'>;
  },
): { informers: Informer[]; controller: Controller } {
  const owner = new Informer<KubeObject>(deps.hub, {
    path: '/apis/rbac.authorization.k8s.io/v1/clusterroles',
    fieldSelector: `metadata.name=${deps.ownerClusterRole}`,
    ...deps.informerOptions,
  });
  const releaseOwner = new ReleaseOwner({
    ...deps,
    informers: { owner, clusterManagementAddOns: deps.clusterManagementAddOns },
  });
  return { informers: [owner], controller: releaseOwner.controller };
}
