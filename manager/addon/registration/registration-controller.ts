/**
 * Registration, for every ManagedClusterAddOn of this addon:
 * - `status.registrations`: one kube-apiserver-client registration with OCM's
 *   default addon subject, which tells the klusterlet registration agent to
 *   request a hub certificate for our agent (Secret `<addon>-hub-kubeconfig`
 *   in the install namespace);
 * - `status.namespace`: the agent install namespace (where OCM's Lease mode
 *   and the registration agent look);
 * - the agent's hub permissions (Role, RoleBinding) and its heartbeat Lease
 *   in the cluster namespace, all owned by the ManagedClusterAddOn; its tunnel
 *   permission (ClusterRole, ClusterRoleBinding: attach as this cluster only),
 *   owned by the ClusterManagementAddOn and deleted here with the
 *   ManagedClusterAddOn; when the addon's configuration picks a trust model
 *   for the tunnel, its grant on the cluster's credential Secret in the
 *   gateway's credential namespace, deleted here with the ManagedClusterAddOn
 *   together with the Secret the agent wrote;
 * - condition `RegistrationApplied` with OCM's reasons.
 *
 * Status is written with server-side apply under a field manager of its own,
 * so only these fields are ours: the klusterlet's `kubeClientDriver`, OCM's
 * conditions and the availability controller's `Available` are never touched.
 */
import type { KubeClient, KubeObject } from '../../../shared/kube/client.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import { objectKey } from '../../../shared/kube/informer.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import { type AddonDefinition, hubHeartbeatLeaseName, specInstallNamespace } from '../core/addon.ts';
import { applyRegistrationStatus, statusFieldManagers } from '../core/addon-status.ts';
import {
  type ConditionVerdict,
  findCondition,
  registrationAppliedType,
  sameVerdict,
} from '../core/conditions.ts';
import { Controller, type ControllerDeps } from '../core/controller.ts';
import { addonApiVersion, type ClusterManagementAddOn, type ManagedClusterAddOn } from '../core/resources.ts';
import {
  agentAttachClusterRole,
  agentAttachClusterRoleBinding,
  agentCredentialRole,
  agentCredentialRoleBinding,
  agentHubLease,
  agentHubRole,
  agentHubRoleBinding,
  attachPermissionName,
  type ClusterOwner,
  credentialPermissionName,
  type OwnerAddon,
  ownerReference,
} from './hub-permissions.ts';
import { kubeApiserverClientSigner, type Subject } from './subject.ts';

/** Field manager of the agent's permissions and Lease, and of the status fields this controller owns. */
export const registrationFieldManager = statusFieldManagers.registration;

/** OCM's reasons (api addon/v1alpha1 types_managedclusteraddon.go; messages as addon-framework writes them). */
export const registrationApplied: ConditionVerdict = {
  status: 'True',
  reason: 'SetPermissionApplied',
  message: 'Registration of the addon agent is configured',
};
export function registrationFailed(err: unknown): ConditionVerdict {
  return {
    status: 'False',
    reason: 'SetPermissionFailed',
    message: `Failed to set permission for hub agent: ${err instanceof Error ? err.message : String(err)}`,
  };
}

export interface RegistrationControllerDeps extends ControllerDeps {
  hub: KubeClient;
  addon: Pick<AddonDefinition, 'name' | 'registrationSubject' | 'defaultInstallNamespace'> &
    Partial<Pick<AddonDefinition, 'credentialNamespace'>>;
  informers: {
    managedClusterAddOns: Informer<ManagedClusterAddOn>;
    /** Owner of the cluster-scoped tunnel permissions; without it they have no owner. */
    clusterManagementAddOns?: Informer<ClusterManagementAddOn>;
    /** The agents' hub heartbeat Leases: one deleted is recreated at once, not on the next resync. */
    heartbeatLeases?: Informer<OwnedObject>;
  };
  /** The resolved agent install namespace (AddOnDeploymentConfig aware); default: spec or OCM's default. */
  installNamespace?: (addon: ManagedClusterAddOn) => string | Promise<string>;
  /** leaseDurationSeconds written into the heartbeat Lease (informational; the availability controller decides staleness). */
  heartbeatLeaseDurationSeconds?: number;
  /**
   * The tunnel trust model the addon's configuration picks for this cluster (deploy/deployment-config.ts,
   * TUNNEL_TRUST_MODEL); a model means the agent writes the cluster's credential Secret on the hub.
   */
  trustModel?: (addon: ManagedClusterAddOn) => string | undefined | Promise<string | undefined>;
}

/** The label the agent puts on the credential Secret it writes (agent/hub-credential.ts). */
const agentWrittenSecret = { label: 'app.kubernetes.io/managed-by', value: 'cluster-gateway-agent' };

/** The status fields this controller owns, as they should be. */
export function desiredRegistrationStatus(subject: Subject, namespace: string) {
  return { registrations: [{ signerName: kubeApiserverClientSigner, subject }], namespace };
}

type OwnedObject = KubeObject & { metadata?: { ownerReferences?: { uid?: string }[] } };

export class RegistrationController {
  readonly #deps: RegistrationControllerDeps;
  readonly controller: Controller;
  /** Clusters known to hold no credential Secret grant: not deleted again on every resync. */
  readonly #noCredentialGrant = new Set<string>();

  constructor(deps: RegistrationControllerDeps) {
    this.#deps = deps;
    const { managedClusterAddOns: addons, heartbeatLeases } = deps.informers;
    const addonName = deps.addon.name;
    // A deleted ManagedClusterAddOn too: its cluster-scoped tunnel permission is ours to remove.
    const ofAddon = (obj: ManagedClusterAddOn) =>
      obj.metadata.name === addonName ? objectKey(obj) : undefined;
    // A heartbeat Lease deleted, or naming another owner than the live addon, is repaired at once (not on the
    // next resync), before the garbage collector deletes it. Renewals alone enqueue nothing.
    const leaseName = hubHeartbeatLeaseName(addonName);
    const ofLease = (lease: OwnedObject) =>
      lease.metadata?.namespace && lease.metadata.name === leaseName
        ? `${lease.metadata.namespace}/${addonName}`
        : undefined;
    const ifStaleOwner = (lease: OwnedObject) => {
      const key = ofLease(lease);
      const uid = key ? addons.get(key)?.metadata.uid : undefined;
      return key && uid && !lease.metadata?.ownerReferences?.some((r) => r.uid === uid) ? key : undefined;
    };
    this.controller = new Controller(
      {
        name: 'registration',
        workers: 4,
        watches: [
          { informer: addons, add: ofAddon, update: ofAddon, delete: ofAddon },
          ...(heartbeatLeases
            ? [{ informer: heartbeatLeases, add: ifStaleOwner, update: ifStaleOwner, delete: ofLease }]
            : []),
        ],
        keys: () => addons.list().flatMap((obj) => ofAddon(obj) ?? []),
        // Someone deleting the Role or RoleBinding is repaired on this resync.
        resyncMs: 60_000,
        sync: (key) => this.reconcile(key),
      },
      deps,
    );
  }

  async reconcile(key: string): Promise<undefined> {
    const { hub } = this.#deps;
    const log = this.controller.log;
    const addonName = this.#deps.addon.name;
    const addon = this.#deps.informers.managedClusterAddOns.get(key);
    if (!addon || addon.metadata.name !== addonName || addon.metadata.deletionTimestamp) {
      const [namespace, name] = key.split('/');
      if (namespace && name === addonName) {
        await this.#removeAttachPermission(namespace);
        await this.#removeCredentialGrant(namespace, true);
      }
      return;
    }
    const cluster = addon.metadata.namespace ?? '';
    const uid = addon.metadata.uid;
    if (!cluster || !uid) return;
    const owner: OwnerAddon = { apiVersion: addonApiVersion, name: addonName, namespace: cluster, uid };
    const subject = this.#deps.addon.registrationSubject(cluster);
    const namespace =
      (await this.#deps.installNamespace?.(addon)) ??
      specInstallNamespace(addon, this.#deps.addon.defaultInstallNamespace);
    const desired = desiredRegistrationStatus(subject, namespace);

    let verdict = registrationApplied;
    let failure: unknown;
    try {
      const rbac = '/apis/rbac.authorization.k8s.io/v1/namespaces';
      const role = agentHubRole(owner);
      const binding = agentHubRoleBinding(owner, subject);
      await hub.apply(`${rbac}/${cluster}/roles/${role.metadata?.name}`, role, registrationFieldManager);
      await hub.apply(
        `${rbac}/${cluster}/rolebindings/${binding.metadata?.name}`,
        binding,
        registrationFieldManager,
      );
      await this.#ensureHeartbeatLease(owner, subject);
      const cma = this.#deps.informers.clusterManagementAddOns?.get(addonName);
      const clusterOwner: ClusterOwner | undefined = cma?.metadata?.uid
        ? { apiVersion: addonApiVersion, name: addonName, uid: String(cma.metadata.uid) }
        : undefined;
      const attachRole = agentAttachClusterRole(owner, clusterOwner);
      const attachBinding = agentAttachClusterRoleBinding(owner, subject, clusterOwner);
      const clusterRbac = '/apis/rbac.authorization.k8s.io/v1';
      await hub.apply(
        `${clusterRbac}/clusterroles/${attachRole.metadata?.name}`,
        attachRole,
        registrationFieldManager,
      );
      await hub.apply(
        `${clusterRbac}/clusterrolebindings/${attachBinding.metadata?.name}`,
        attachBinding,
        registrationFieldManager,
      );
      const trustModel = await this.#deps.trustModel?.(addon);
      const credentialNamespace = this.#deps.addon.credentialNamespace;
      if (trustModel && credentialNamespace) {
        const role = agentCredentialRole(owner, credentialNamespace, clusterOwner);
        const binding = agentCredentialRoleBinding(owner, subject, credentialNamespace, clusterOwner);
        await hub.apply(
          `${rbac}/${credentialNamespace}/roles/${role.metadata?.name}`,
          role,
          registrationFieldManager,
        );
        await hub.apply(
          `${rbac}/${credentialNamespace}/rolebindings/${binding.metadata?.name}`,
          binding,
          registrationFieldManager,
        );
        this.#noCredentialGrant.delete(cluster);
      } else if (!this.#noCredentialGrant.has(cluster)) {
        // No trust model (any more): the agent may not write the Secret; one it wrote stays for the admin.
        await this.#removeCredentialGrant(cluster, false);
      }
    } catch (err) {
      failure = err;
      verdict = registrationFailed(err);
    }

    const current = addon.status;
    const condition = findCondition(current?.conditions, registrationAppliedType);
    const upToDate =
      JSON.stringify(current?.registrations ?? []) === JSON.stringify(desired.registrations) &&
      current?.namespace === namespace &&
      sameVerdict(condition, verdict);
    if (!upToDate) {
      await applyRegistrationStatus(hub, addon, desired, verdict);
      log.info(
        { cluster, addon: addonName, reason: verdict.reason, namespace },
        'registration status written',
      );
    }
    if (failure) throw failure;
    return undefined;
  }

  /** The addon was disabled for `cluster`: its agent may no longer attach. */
  async #removeAttachPermission(cluster: string): Promise<void> {
    const name = attachPermissionName(this.#deps.addon.name, cluster);
    const clusterRbac = '/apis/rbac.authorization.k8s.io/v1';
    await this.#deps.hub.delete(`${clusterRbac}/clusterrolebindings/${name}`);
    await this.#deps.hub.delete(`${clusterRbac}/clusterroles/${name}`);
    this.controller.log.info({ cluster, addon: this.#deps.addon.name }, 'agent tunnel permission removed');
  }

  /**
   * The agent's grant on its cluster's credential Secret; with `secretToo` (the addon disabled) also
   * the Secret, when the agent wrote it (an admin's Secret of the same name is never deleted).
   */
  async #removeCredentialGrant(cluster: string, secretToo: boolean): Promise<void> {
    const namespace = this.#deps.addon.credentialNamespace;
    if (!namespace) return;
    const name = credentialPermissionName(this.#deps.addon.name, cluster);
    const rbac = `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}`;
    await this.#deps.hub.delete(`${rbac}/rolebindings/${name}`);
    await this.#deps.hub.delete(`${rbac}/roles/${name}`);
    this.#noCredentialGrant.add(cluster);
    if (!secretToo) return;
    const secretPath = `/api/v1/namespaces/${namespace}/secrets/${cluster}`;
    const secret = await this.#deps.hub.getOptional(secretPath);
    if (secret?.metadata?.labels?.[agentWrittenSecret.label] === agentWrittenSecret.value) {
      await this.#deps.hub.delete(secretPath);
      this.controller.log.info(
        { cluster, secret: `${namespace}/${cluster}` },
        'the cluster credential Secret its agent wrote is removed with the addon',
      );
    }
  }

  /**
   * Creates the heartbeat Lease once; never rewrites its spec, which is the agent's
   * to renew (a create that loses a race is fine). A Lease left by an earlier
   * ManagedClusterAddOn of the same name (disabled and enabled again before the
   * garbage collector came by) still names the old owner's uid: the collector
   * would delete it under the live agent, so it is handed to the current owner.
   */
  async #ensureHeartbeatLease(owner: OwnerAddon, subject: Subject) {
    const path = `/apis/coordination.k8s.io/v1/namespaces/${owner.namespace}/leases`;
    const leasePath = `${path}/${hubHeartbeatLeaseName(owner.name)}`;
    const existing = await this.#deps.hub.getOptional<OwnedObject>(leasePath);
    if (existing) {
      if (!existing.metadata?.ownerReferences?.some((r) => r.uid === owner.uid)) {
        // JSON merge patch replaces the list: the stale reference goes.
        await this.#deps.hub.mergePatch(leasePath, {
          metadata: { ownerReferences: [ownerReference(owner)] },
        });
        this.controller.log.info(
          { cluster: owner.namespace, lease: leasePath },
          'heartbeat Lease handed to the current ManagedClusterAddOn (it named a deleted one)',
        );
      }
      return;
    }
    try {
      await this.#deps.hub.create(
        path,
        agentHubLease(owner, subject, this.#deps.heartbeatLeaseDurationSeconds ?? 10),
      );
    } catch (err) {
      if (!(err instanceof StatusError && err.code === 409)) throw err;
    }
  }
}
