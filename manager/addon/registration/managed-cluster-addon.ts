/** Paths and defaults for the ManagedClusterAddOns that registration and health write (types: ../resources.ts). */
import { addonApi, type ManagedClusterAddOn } from '../resources.ts';

export type { ManagedClusterAddOn } from '../resources.ts';

export function addonPath(cluster: string, addon: string, subresource?: 'status'): string {
  return `${addonApi}/namespaces/${encodeURIComponent(cluster)}/managedclusteraddons/${encodeURIComponent(addon)}${subresource ? `/${subresource}` : ''}`;
}

/**
 * The install namespace when no resolver (AddOnDeploymentConfig aware) is
 * given: v1alpha1 `spec.installNamespace` (what `clusteradm addon enable
 * --namespace` sets), else the addon's default.
 */
export function specInstallNamespace(addon: ManagedClusterAddOn, fallback: string): string {
  return addon.spec?.installNamespace || fallback;
}
