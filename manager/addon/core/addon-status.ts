/**
 * The one writer of the addon's status subresources: every field the manager
 * writes on a ManagedClusterAddOn's status (and the ClusterManagementAddOn's)
 * goes through here. The controllers decide what to write and when; this
 * module knows how, and under which field manager.
 *
 * Server-side apply, for the fields that are maps or map lists: the CRD
 * declares status.conditions a map list keyed by type, so each field manager
 * owns only the condition types it applies. Each writer below has a field
 * manager of its own and always applies the same set of fields: applying
 * without a field (or a condition type) the same manager applied before
 * removes it. OCM's own controllers co-own the status the same way, so the
 * names and the sets are part of the contract and never change.
 *
 * Merge patch with the resourceVersion read, for the lists the CRDs declare
 * atomic (configReferences, and the ClusterManagementAddOn's config lists):
 * they are written whole, and a concurrent write of OCM's makes ours fail
 * with a conflict, so the retry starts from its version.
 */
import type { KubeClient } from '../../../shared/kube/client.ts';
import {
  availableType,
  type NewCondition,
  registrationAppliedType,
  withTransitionTime,
} from './conditions.ts';
import {
  addonApiVersion,
  type ClusterManagementAddOn,
  type ConfigReference,
  clusterManagementAddOnPath,
  findCondition,
  type ManagedClusterAddOn,
  managedClusterAddOnPath,
} from './resources.ts';

/** Who owns which fields of a ManagedClusterAddOn's status. */
export const statusFieldManagers = {
  /** The ManifestApplied condition (deploy/deploy-controller.ts). */
  deploy: 'cluster-gateway-addon-manager-deploy',
  /** registrations, namespace and the RegistrationApplied condition (registration/registration-controller.ts). */
  registration: 'cluster-gateway-addon-manager-registration',
  /** healthCheck.mode Customized and the Available condition (availability/availability-controller.ts). */
  availability: 'cluster-gateway-addon-manager-health',
  /**
   * healthCheck.mode Lease and nothing else (availability/availability-controller.ts, --health-mode=Lease):
   * the availability field manager's apply would drop the Available it owned.
   */
  leaseMode: 'cluster-gateway-addon-manager-lease-mode',
} as const;

type Applier = Pick<KubeClient, 'apply'>;
type Patcher = Pick<KubeClient, 'mergePatch'>;

/** The deploy controller's conditions (ManifestApplied); an empty list drops what it wrote. */
export async function applyDeployConditions(
  hub: Applier,
  mca: ManagedClusterAddOn,
  conditions: NewCondition[],
  now = Date.now(),
): Promise<void> {
  await applyStatus(hub, mca, statusFieldManagers.deploy, {}, conditions, now);
}

/** The registration the klusterlet acts on, the install namespace, and RegistrationApplied. */
export async function applyRegistrationStatus(
  hub: Applier,
  mca: ManagedClusterAddOn,
  registration: { registrations: unknown[]; namespace: string },
  condition: Omit<NewCondition, 'type'>,
  now = Date.now(),
): Promise<void> {
  const { registrations, namespace } = registration;
  await applyStatus(
    hub,
    mca,
    statusFieldManagers.registration,
    { registrations, namespace },
    [{ type: registrationAppliedType, ...condition }],
    now,
  );
}

/** Customized health mode and the manager's Available verdict. */
export async function applyAvailable(
  hub: Applier,
  mca: ManagedClusterAddOn,
  condition: Omit<NewCondition, 'type'>,
  now = Date.now(),
): Promise<void> {
  const customized = { healthCheck: { mode: 'Customized' } };
  await applyStatus(
    hub,
    mca,
    statusFieldManagers.availability,
    customized,
    [{ type: availableType, ...condition }],
    now,
  );
}

/** Lease health mode: OCM's registration agent writes Available from the agent's spoke Lease. */
export async function applyLeaseMode(hub: Applier, mca: ManagedClusterAddOn): Promise<void> {
  await applyStatus(hub, mca, statusFieldManagers.leaseMode, { healthCheck: { mode: 'Lease' } });
}

/** The addon's configReferences, whole (the list is atomic), guarded by the resourceVersion read. */
export async function patchConfigReferences(
  hub: Patcher,
  mca: ManagedClusterAddOn,
  configReferences: ConfigReference[],
): Promise<void> {
  await hub.mergePatch(managedClusterAddOnPath(mca.metadata.namespace ?? '', mca.metadata.name, 'status'), {
    metadata: { resourceVersion: mca.metadata.resourceVersion },
    status: { configReferences },
  });
}

/** Fields of the ClusterManagementAddOn's status (v1alpha1 names), guarded by the resourceVersion read. */
export async function patchClusterManagementAddOnStatus(
  hub: Patcher,
  cma: ClusterManagementAddOn,
  status: Record<string, unknown>,
): Promise<void> {
  await hub.mergePatch(clusterManagementAddOnPath(cma.metadata.name, 'status'), {
    metadata: { resourceVersion: cma.metadata.resourceVersion },
    status,
  });
}

/**
 * Applies `fields` and, when given, `conditions` (with their lastTransitionTime from the addon as read) as
 * everything `fieldManager` owns in the addon's status.
 */
async function applyStatus(
  hub: Applier,
  mca: ManagedClusterAddOn,
  fieldManager: string,
  fields: Record<string, unknown>,
  conditions?: NewCondition[],
  now = Date.now(),
): Promise<void> {
  const namespace = mca.metadata.namespace ?? '';
  const name = mca.metadata.name;
  const current = mca.status?.conditions;
  const status = conditions
    ? {
        ...fields,
        conditions: conditions.map((c) => withTransitionTime(findCondition(current, c.type), c, now)),
      }
    : fields;
  await hub.apply(
    managedClusterAddOnPath(namespace, name, 'status'),
    { apiVersion: addonApiVersion, kind: 'ManagedClusterAddOn', metadata: { name, namespace }, status },
    fieldManager,
  );
}
