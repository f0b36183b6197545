/**
 * Pods as the environment's nodes run them, seen from a cluster's API and from this host: listing them,
 * telling a Ready one, and the host processes of a container (the host shares its process table with
 * every node's containers).
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { KubeClient, KubeObject } from '../../shared/kube/client.ts';

export type Pod = KubeObject & {
  metadata: { name: string; namespace: string; uid?: string; deletionTimestamp?: string };
  spec?: {
    nodeName?: string;
    containers?: { name: string; ports?: { name?: string; containerPort: number }[] }[];
  };
  status?: {
    phase?: string;
    podIP?: string;
    conditions?: { type: string; status: string; reason?: string }[];
    containerStatuses?: {
      name: string;
      ready: boolean;
      restartCount: number;
      containerID?: string;
      state?: { running?: { startedAt?: string } };
    }[];
  };
};

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
