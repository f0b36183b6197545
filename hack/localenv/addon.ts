/**
 * The addon in the local environment on its real nodes (node.ts), installed the
 * way a user's cluster runs it: the addon manager's Deployment on the hub
 * (addon-manager.ts), run by the hub's kubelet from the project's image; the
 * agents from the ManifestWork that OCM's real work agent applies on each
 * managed cluster once the addon is enabled, run by that cluster's kubelet.
 *
 * Pods themselves (listing, readiness, a container's host processes): pods.ts.
 */
import type { KubeClient } from '../../shared/kube/client.ts';
import {
  installAddonManager,
  type ManagerSettings,
  managerName,
  managerNamespace,
  uninstallAddonManager,
} from './addon-manager.ts';
import { podReady, podsOf } from './pods.ts';
import { waitFor } from './wait.ts';

export interface LocalAddon {
  /** Re-applies the manager's manifests with other settings (a changed argument rolls its Deployment). */
  reinstall(settings?: ManagerSettings): Promise<void>;
  /** Deletes the manager's objects and waits until its pods are gone from the hub's node. */
  stop(): Promise<void>;
}

export const managerSelector = `app.kubernetes.io/name=${managerName}`;

/**
 * Installs the manager's Deployment on the hub and returns once its pod is Ready and it has declared the
 * ClusterManagementAddOn (`clusteradm addon enable` refuses an addon without it).
 */
export async function startAddon(
  hub: KubeClient,
  settings: ManagerSettings & { image: string },
): Promise<LocalAddon> {
  const current = { ...settings };
  await installAddonManager(hub, current);
  const addonName = settings.addonName ?? 'cluster-gateway';
  const stop = async () => {
    await uninstallAddonManager(hub, current);
    await waitFor(
      'the addon manager pods gone from the hub',
      async () => (await podsOf(hub, managerNamespace, managerSelector)).length === 0,
      { timeoutMs: 60_000, intervalMs: 250 },
    );
  };
  try {
    await waitFor(
      'the addon manager pod Ready on the hub',
      async () => (await podsOf(hub, managerNamespace, managerSelector)).some(podReady),
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    await waitFor(
      `the addon manager to declare ClusterManagementAddOn ${addonName}`,
      () =>
        hub.getOptional(
          `/apis/addon.open-cluster-management.io/v1alpha1/clustermanagementaddons/${addonName}`,
        ),
      { timeoutMs: 60_000 },
    );
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
  return {
    reinstall: (next = {}) => installAddonManager(hub, { ...next, image: settings.image }),
    stop,
  };
}
