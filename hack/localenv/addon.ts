/**
 * The addon in the local environment on its real nodes (node.ts), installed the
 * way a user's cluster runs it: the addon manager's Deployment on the hub
 * (addon-manager.ts), run by the hub's kubelet from the project's image; the
 * agents from the ManifestWork that OCM's real work agent applies on each
 * managed cluster once the addon is enabled, run by that cluster's kubelet.
 *
 * Also what a test needs to see those pods as the node does: the host
 * processes of a container (the host shares its process table with every
 * node's containers).
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';
import {
  installAddonManager,
  type ManagerSettings,
  managerName,
  managerNamespace,
  uninstallAddonManager,
} from './addon-manager.ts';
import type { LocalCluster } from './apiserver.ts';
import { waitFor } from './wait.ts';

/** What installing the chart needs of a cluster (a test file builds it from the environment's state). */
export type AddonCluster = Pick<LocalCluster, 'name' | 'client' | 'server'> & {
  pki: { ca: { cert: string } };
};

export interface LocalAddon {
  /** Re-applies the manager's manifests with other settings (a changed argument rolls its Deployment). */
  reinstall(settings?: ManagerSettings): Promise<void>;
  /** Deletes the manager's objects and waits until its pods are gone from the hub's node. */
  stop(): Promise<void>;
}

export type Pod = KubeObject & {
  metadata: { name: string; namespace: string; uid?: string; deletionTimestamp?: string };
  spec: { nodeName?: string };
  status?: {
    phase?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: {
      name: string;
      ready: boolean;
      restartCount: number;
      containerID?: string;
      state?: { running?: { startedAt?: string } };
    }[];
  };
};

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

/** The pods of `namespace` (matching `selector`), terminating ones included. */
export async function podsOf(client: KubeClient, namespace: string, selector = ''): Promise<Pod[]> {
  const query = selector ? `?labelSelector=${encodeURIComponent(selector)}` : '';
  return (await client.list<Pod>(`/api/v1/namespaces/${namespace}/pods${query}`)).items;
}

/** Running, not being deleted, every container ready. */
export function podReady(pod: Pod): boolean {
  return (
    pod.status?.phase === 'Running' &&
    !pod.metadata.deletionTimestamp &&
    (pod.status.containerStatuses ?? []).length > 0 &&
    (pod.status.containerStatuses ?? []).every((s) => s.ready)
  );
}

/**
 * The host pids of a container (containerd's id, with or without its `containerd://` prefix): every
 * process whose cgroup path names it. Empty when it runs no more.
 */
export function containerPids(containerId: string): number[] {
  const id = containerId.replace(/^[a-z]+:\/\//, '');
  if (!/^[0-9a-f]{16,}$/.test(id)) throw new Error(`not a container id: ${containerId}`);
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cgroup`, 'utf8').includes(id)) pids.push(Number(entry));
    } catch {} // gone meanwhile
  }
  return pids;
}

/**
 * The host pid of a process of the environment (its pid file, written by the supervisor of another
 * process: the global setup's) whose command line matches `match`.
 */
export function environmentPid(stateDir: string, what: string, match: (args: string[]) => boolean): number {
  const pids = readFileSync(`${stateDir}/pids`, 'utf8').split('\n').filter(Boolean).map(Number);
  for (const pid of pids) {
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (match(cmdline.split('\0'))) return pid;
  }
  throw new Error(`${what} is not among the environment's processes`);
}
