/**
 * The addon describes itself: what the ClusterManagementAddOn says, what
 * the agent is, where it goes and who it is on the hub. Every controller
 * takes its names from here, so a renamed addon (--addon-name) stays
 * consistent across the ManifestWork, the registration Secret, the Leases
 * and RBAC on both sides.
 */
import type { ManagedClusterAddOn } from './resources.ts';

/**
 * Who writes the addon's `Available` condition: the manager (Customized), or
 * OCM's registration agent from the agent's spoke Lease (Lease).
 */
export type HealthMode = 'Customized' | 'Lease';

export interface AddonDefinition {
  name: string;
  displayName: string;
  description: string;
  /** Before AddOnDeploymentConfig registry overrides. */
  agentImage: string;
  /** When neither the AddOnDeploymentConfig nor the ManagedClusterAddOn names one. */
  defaultInstallNamespace: string;
  /** Where the default AddOnDeploymentConfig lives (the manager's namespace). */
  configNamespace: string;
  /** Name of the default AddOnDeploymentConfig the ClusterManagementAddOn points at. */
  defaultConfigName: string;
  healthMode: HealthMode;
  /** Empty: installStrategy Manual. */
  installPlacements: { namespace: string; name: string }[];
  /** The deploy ManifestWork in the cluster namespace (addon-framework's name, so OCM tools recognise it). */
  deployWorkName: string;
  /** Written by OCM's registration agent into the install namespace (kubeClient registration). */
  hubKubeconfigSecretName: string;
  /** The agent's Deployment and ServiceAccount on the managed cluster. */
  agentName: string;
  /** The Lease the agent renews on the managed cluster (OCM's Lease mode reads this name). */
  spokeLeaseName: string;
  /** OCM's default kube-apiserver-client subject for an addon agent (addon-framework agent.DefaultUser/Groups). */
  registrationSubject(cluster: string, agent?: string): { user: string; groups: string[] };
  /** The gateway's credential namespace (its --secret-namespace), where agents write their cluster's Secret. */
  credentialNamespace: string;
}

export interface AddonSettings {
  addonName: string;
  displayName: string;
  description: string;
  agentImage: string;
  agentInstallNamespace: string;
  namespace: string;
  healthMode: HealthMode;
  installPlacements: { namespace: string; name: string }[];
  /** Default: open-cluster-management-credentials, the gateway's default --secret-namespace. */
  credentialNamespace?: string;
}

export function defineAddon(settings: AddonSettings): AddonDefinition {
  const name = settings.addonName;
  return {
    name,
    displayName: settings.displayName,
    description: settings.description,
    agentImage: settings.agentImage,
    defaultInstallNamespace: settings.agentInstallNamespace,
    configNamespace: settings.namespace,
    defaultConfigName: `${name}-default`,
    healthMode: settings.healthMode,
    installPlacements: settings.installPlacements,
    deployWorkName: `addon-${name}-deploy-0`,
    hubKubeconfigSecretName: `${name}-hub-kubeconfig`,
    agentName: `${name}-agent`,
    spokeLeaseName: name,
    credentialNamespace: settings.credentialNamespace ?? 'open-cluster-management-credentials',
    registrationSubject(cluster, agent = 'addon-agent') {
      return {
        user: `system:open-cluster-management:cluster:${cluster}:addon:${name}:agent:${agent}`,
        groups: [
          `system:open-cluster-management:cluster:${cluster}:addon:${name}`,
          `system:open-cluster-management:addon:${name}`,
        ],
      };
    },
  };
}

/** The agent's heartbeat Lease on the hub, in the cluster namespace: the manager creates it, the agent renews it. */
export function hubHeartbeatLeaseName(addon: string): string {
  return addon;
}

/**
 * The install namespace when no resolver (AddOnDeploymentConfig aware) is
 * given: v1alpha1 `spec.installNamespace` (what `clusteradm addon enable
 * --namespace` sets), else the addon's default.
 */
export function specInstallNamespace(addon: ManagedClusterAddOn, fallback: string): string {
  return addon.spec?.installNamespace || fallback;
}
