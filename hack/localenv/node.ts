/**
 * A real node for one cluster of the environment: its own containerd (with the project's image and the
 * pause image imported), a kubelet, and the cluster's kube-scheduler. kube-controller-manager runs every
 * usual controller when the cluster has a node (apiserver.ts), so Deployments become ReplicaSets and
 * pods, Services get endpoints and namespaces their ServiceAccount and root CA, as on any cluster.
 */
import path from 'node:path';
import type { LocalCluster } from './apiserver.ts';
import { binaryPath } from './binaries.ts';
import { type Containerd, importImages, removeAllContainers, startContainerd } from './containerd.ts';
import { type HostChanges, kubernetesServiceIp } from './host-changes.ts';
import type { BuiltImages } from './images.ts';
import { startKubelet } from './kubelet.ts';
import { freePort } from './ports.ts';
import type { ManagedProcess, Supervisor } from './supervisor.ts';
import { waitFor } from './wait.ts';

export interface LocalNode {
  name: string;
  containerd: Containerd;
  kubelet: ManagedProcess;
  scheduler: ManagedProcess;
  /** Stops the kubelet, then every container, then containerd: nothing of the node keeps running. */
  stop(): Promise<void>;
}

export async function startNode(
  supervisor: Supervisor,
  host: HostChanges,
  cluster: LocalCluster,
  options: { index: number; stateDir: string; images: BuiltImages },
): Promise<LocalNode> {
  const name = `${cluster.name}-node`;
  const dir = path.join(options.stateDir, 'nodes', cluster.name);
  const containerd = await startContainerd(supervisor, {
    name: cluster.name,
    dir: path.join(dir, 'containerd'),
    sandboxImage: options.images.pause,
    podRange: options.index + 1,
  });
  await importImages(containerd, [options.images.pauseArchive, options.images.archive]);
  host.routeKubernetesService(kubernetesServiceIp(cluster.serviceCidr), Number(new URL(cluster.server).port));
  const kubelet = await startKubelet(supervisor, {
    cluster,
    nodeName: name,
    dir: path.join(dir, 'kubelet'),
    containerdSocket: containerd.socket,
    cgroupRoot: host.createCgroupRoot(`cgw-${cluster.name}`),
  });
  const scheduler = supervisor.start(`${cluster.name}-kube-scheduler`, binaryPath('kube-scheduler'), {
    args: [
      `--kubeconfig=${cluster.kubeconfig}`,
      `--authentication-kubeconfig=${cluster.kubeconfig}`,
      `--authorization-kubeconfig=${cluster.kubeconfig}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${await freePort()}`,
      '--leader-elect=false',
      '--v=1',
    ],
  });
  await waitFor(
    `node ${name} Ready on ${cluster.name}`,
    async () => {
      const node = await cluster.client.getOptional<{
        status?: { conditions?: { type: string; status: string }[] };
      }>(`/api/v1/nodes/${name}`);
      return node?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    },
    {
      timeoutMs: 60_000,
      intervalMs: 200,
      failFast: () => {
        kubelet.assertRunning();
        containerd.process.assertRunning();
      },
    },
  );
  return {
    name,
    containerd,
    kubelet,
    scheduler,
    stop: async () => {
      await scheduler.stop();
      await kubelet.stop();
      await removeAllContainers(containerd);
      await containerd.process.stop();
    },
  };
}
