/**
 * The ClusterManagementAddOn and the default AddOnDeploymentConfig it
 * points at. Pure builders.
 *
 * No `addon.open-cluster-management.io/lifecycle` annotation: OCM's own
 * addon-manager then manages the addon's lifecycle, i.e. sets the owner of
 * each ManagedClusterAddOn, resolves configs into status.configReferences,
 * reports Progressing and, with installStrategy Placements, creates and
 * deletes the ManagedClusterAddOns of the placed clusters. This manager
 * reacts to those the same way as to `clusteradm addon enable`.
 *
 * The chart renders the same object (charts/cluster-gateway/templates/cluster-management-addon.yaml).
 */
import type { AddonDefinition } from '../core/addon.ts';
import {
  type AddOnDeploymentConfig,
  addonApiVersion,
  addonGroup,
  type ClusterManagementAddOn,
} from '../core/resources.ts';
import { deploymentConfigResource } from '../deploy/deployment-config.ts';

export function clusterManagementAddOn(
  addon: Pick<
    AddonDefinition,
    'name' | 'displayName' | 'description' | 'installPlacements' | 'configNamespace' | 'defaultConfigName'
  >,
): ClusterManagementAddOn {
  return {
    apiVersion: addonApiVersion,
    kind: 'ClusterManagementAddOn',
    metadata: { name: addon.name },
    spec: {
      addOnMeta: { displayName: addon.displayName, description: addon.description },
      supportedConfigs: [
        {
          group: addonGroup,
          resource: deploymentConfigResource,
          defaultConfig: { namespace: addon.configNamespace, name: addon.defaultConfigName },
        },
      ],
      installStrategy:
        addon.installPlacements.length === 0
          ? { type: 'Manual' }
          : {
              type: 'Placements',
              placements: addon.installPlacements.map((p) => ({
                namespace: p.namespace,
                name: p.name,
                rolloutStrategy: { type: 'All' },
              })),
            },
    },
  };
}

/**
 * The label Kubernetes' conventions give the tool that manages an object. The chart renders the
 * ClusterManagementAddOn (so `helm`, Argo CD and Flux see and own it) with `app.kubernetes.io/managed-by:
 * Helm` (helm install, and helm template as GitOps tools run it); the manager's own has no such label.
 */
export const managedByLabel = 'app.kubernetes.io/managed-by';

/**
 * Declared by a tool (the chart): its spec is that tool's, the manager does not write it. The chart and
 * the manager build the same object from the same values (charts/*.test.ts compares them), so leaving
 * it alone loses nothing, and a helm upgrade that changes it is not undone by a manager still running
 * with the old flags.
 */
export function declaredElsewhere(cma: Pick<ClusterManagementAddOn, 'metadata'>): boolean {
  return Boolean(cma.metadata.labels?.[managedByLabel]);
}

/**
 * The config every addon uses unless it names another: created once, never
 * overwritten (it is the user's to edit). agentInstallNamespace is set to ""
 * on purpose: the CRD would default it to open-cluster-management-agent-addon
 * and thereby override `clusteradm addon enable --namespace`.
 */
export function defaultDeploymentConfig(
  addon: Pick<AddonDefinition, 'configNamespace' | 'defaultConfigName'>,
): AddOnDeploymentConfig {
  return {
    apiVersion: addonApiVersion,
    kind: 'AddOnDeploymentConfig',
    metadata: { name: addon.defaultConfigName, namespace: addon.configNamespace },
    spec: {
      agentInstallNamespace: '',
      customizedVariables: [{ name: 'LOG_LEVEL', value: 'info' }],
    },
  };
}
