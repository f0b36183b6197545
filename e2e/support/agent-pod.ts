/**
 * The addon agent's pod on a managed cluster: the kubelet of the cluster's node runs it from the
 * Deployment the addon manager renders into its ManifestWork (manager/addon/deploy/agent-manifests.ts),
 * found here by that Deployment's selector. Its probes answer at the pod's IP (this host reaches the
 * pods' bridge) on the container's `http` port; its /metrics only on the pod's loopback.
 */
import { type Pod, podReady, podsOf } from '../../hack/localenv/pods.ts';
import { waitFor } from '../../hack/localenv/wait.ts';
import { kubectlResult } from './kubectl.ts';

export type { Pod };

import { agentLabels } from '../../manager/addon/deploy/agent-manifests.ts';
import type { KubeClient } from '../../shared/kube/client.ts';

export const defaultInstallNamespace = 'open-cluster-management-agent-addon';

/** The Deployment's selector (app.kubernetes.io/name and instance), as a labelSelector. */
export function agentSelector(addon: string): string {
  const labels = agentLabels({ name: addon });
  return ['app.kubernetes.io/name', 'app.kubernetes.io/instance'].map((k) => `${k}=${labels[k]}`).join(',');
}

/** Every pod of the agent Deployment, terminating ones included. */
export async function agentPods(
  spoke: KubeClient,
  addon: string,
  namespace = defaultInstallNamespace,
): Promise<Pod[]> {
  return podsOf(spoke, namespace, agentSelector(addon));
}

/** Waits for the one agent pod that is Running, Ready and not terminating (others may still terminate). */
export function readyAgentPod(
  spoke: KubeClient,
  addon: string,
  { namespace = defaultInstallNamespace, timeoutMs = 120_000 } = {},
): Promise<Pod> {
  return waitFor(
    `a Ready ${addon} agent pod in ${namespace}`,
    async () => {
      const ready = (await agentPods(spoke, addon, namespace)).filter(podReady);
      if (ready.length > 1)
        throw new Error(`${ready.length} Ready agent pods: ${ready.map((p) => p.metadata.name)}`);
      return ready[0];
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/** Waits until no pod of the agent Deployment is left, terminating ones included. */
export function agentPodsGone(
  spoke: KubeClient,
  addon: string,
  { namespace = defaultInstallNamespace, timeoutMs = 120_000 } = {},
): Promise<true> {
  return waitFor(
    `every ${addon} agent pod in ${namespace} to be gone`,
    async () => (await agentPods(spoke, addon, namespace)).length === 0,
    { timeoutMs, intervalMs: 500 },
  );
}

/**
 * The pod's /metrics. The agent serves them on loopback only (--metrics-bind-address, agent/options.ts): read
 * from inside the pod, with the agent image's own node, through a real exec of the cluster's kubelet.
 */
export async function agentMetrics(pod: Pod, kubeconfig: string, port = 8081): Promise<string> {
  const script = `fetch('http://127.0.0.1:${port}/metrics').then(async (r) => { if (r.status !== 200) throw new Error('HTTP ' + r.status); process.stdout.write(await r.text()); })`;
  const { code, stdout, stderr } = await kubectlResult(
    kubeconfig,
    ['exec', '-n', pod.metadata.namespace ?? '', pod.metadata.name ?? '', '--', 'node', '-e', script],
    { timeoutMs: 30_000 },
  );
  if (code !== 0) throw new Error(`GET /metrics inside pod ${pod.metadata.name}: ${stderr.trim() || code}`);
  return stdout;
}

/** The pod's IP and the container port named `http` (the probes' port, the one other pods may reach). */
export function agentHttpAddress(pod: Pod): { ip: string; port: number } {
  const port = pod.spec?.containers
    ?.flatMap((c) => c.ports ?? [])
    .find((p) => p.name === 'http')?.containerPort;
  if (!pod.status?.podIP || !port) throw new Error(`pod ${pod.metadata.name} has no IP or no http port`);
  return { ip: pod.status.podIP, port };
}

/** One series' value in Prometheus text (`name` with its labels, as written); NaN when absent. */
export function seriesValue(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return Number(line?.split(' ').at(-1) ?? Number.NaN);
}
