/**
 * The addon in the local environment, installed the way a user's cluster
 * runs it: a process runner (hack/runner, the kubelet here) on the hub and
 * on every managed cluster; the addon manager's Deployment on the hub
 * (addon-manager.ts); the agents from the ManifestWork that OCM's real work
 * agent applies on each managed cluster once the addon is enabled.
 *
 * Ports are remapped per pod (hack/runner/pod-spec.ts): the agents of two
 * managed clusters share this machine's network.
 */
import path from 'node:path';
import { DeploymentRunner } from '../runner/deployment-runner.ts';
import { imagePrefix, installAddonManager, type ManagerSettings } from './addon-manager.ts';
import type { LocalCluster } from './apiserver.ts';
import { repoRoot } from './binaries.ts';
import { warmCompileCache } from './compile-cache.ts';
import { Supervisor } from './supervisor.ts';
import { waitFor } from './wait.ts';

export interface LocalAddon {
  runners: DeploymentRunner[];
  /** The pods' processes (the manager's, the agents'): tests find and kill them here. */
  supervisor: Supervisor;
  stop(): Promise<void>;
}

/** What the runners need of a cluster (a test file builds it from the environment's state). */
export type AddonCluster = Pick<LocalCluster, 'name' | 'client' | 'server'> & {
  pki: { ca: { cert: string } };
};

export async function startAddon(
  hub: AddonCluster,
  managed: AddonCluster[],
  stateDir: string,
  settings: ManagerSettings & { log?: (line: string) => void } = {},
): Promise<LocalAddon> {
  const pods = startPodRunners(hub, managed, stateDir, settings.log);
  await installAddonManager(hub.client, settings);
  // `clusteradm addon enable` refuses an addon without its ClusterManagementAddOn: the manager creates it.
  const addonName = settings.addonName ?? 'cluster-gateway';
  await waitFor(
    `the addon manager to declare ClusterManagementAddOn ${addonName}`,
    () =>
      hub.client.getOptional(
        `/apis/addon.open-cluster-management.io/v1alpha1/clustermanagementaddons/${addonName}`,
      ),
    { timeoutMs: 60_000 },
  );
  return pods;
}

/**
 * The process runners alone (the kubelets of this machine): what runs this project's Deployments on the
 * hub and on every managed cluster, whoever installs them (installAddonManager, or helm in e2e/install).
 */
export function startPodRunners(
  hub: AddonCluster,
  managed: AddonCluster[],
  stateDir: string,
  log?: (line: string) => void,
): LocalAddon {
  // What the image build does, for the Deployments' NODE_COMPILE_CACHE=/app/.cache/node-compile-cache.
  for (const entry of ['agent/main.ts', 'manager/addon/main.ts', 'manager/gateway/main.ts'])
    warmCompileCache(entry);
  // The pods' own supervisor: a crashed agent is the runner's to restart (as a kubelet would), not a
  // reason for the environment's watchdog (local-up.ts) to stop everything.
  const supervisor = new Supervisor(path.join(stateDir, 'pods'), { handleSignals: false });
  const runners = [hub, ...managed].map(
    (cluster) =>
      new DeploymentRunner({
        clusterName: cluster.name,
        client: cluster.client,
        server: cluster.server,
        caCert: cluster.pki.ca.cert,
        supervisor,
        stateDir: path.join(stateDir, 'runner'),
        images: [imagePrefix],
        pathMap: { '/app': repoRoot },
        remapPorts: true,
        intervalMs: 500,
        ...(log ? { log } : {}),
      }),
  );
  for (const runner of runners) runner.start();
  const stop = async () => {
    process.off('SIGINT', stopOnSignal);
    process.off('SIGTERM', stopOnSignal);
    await Promise.all(runners.map((r) => r.stop()));
    await supervisor.stop();
  };
  // On Ctrl-C the runners stop first: they would otherwise restart pods while the apiservers go away.
  const stopOnSignal = () => void stop();
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  return { runners, supervisor, stop };
}
