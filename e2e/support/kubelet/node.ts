/**
 * The API objects that make kube-apiserver send logs, exec and port-forward
 * to the stand-in kubelet: a Node whose address is loopback and whose
 * kubeletEndpoint port is the stand-in's, and Pods bound to it that look
 * Running to kubectl (which refuses exec into a finished pod and port-forward
 * into one that is not Running).
 *
 * No kubelet maintains these objects, so:
 * - A kube-controller-manager, if one runs, marks a Node without heartbeats
 *   NotReady after its grace period (40 s) and taints it; startNodeHeartbeat
 *   renews the node Lease and the Ready condition to prevent that, and the
 *   Pods tolerate the not-ready/unreachable taints forever in case it lapses.
 * - Graceful pod deletion waits for a kubelet to confirm; the Pods have
 *   terminationGracePeriodSeconds 0 so that deleting them is immediate.
 * - The Node declares no status.declaredFeatures: declaring
 *   ExtendWebSocketsToKubelet would make kube-apiserver forward WebSockets to
 *   the stand-in, which speaks SPDY only (see server.ts).
 */
import type { KubeClient, KubeObject } from '../../../shared/kube/client.ts';
import { StatusError } from '../../../shared/kube/status.ts';

export const STAND_IN_LABEL = 'cluster-gateway.e2e/stand-in-kubelet';
const FIELD_MANAGER = 'stand-in-kubelet';

export interface StandInNodeOptions {
  name: string;
  /** The stand-in kubelet's port (status.daemonEndpoints.kubeletEndpoint.Port). */
  port: number;
  /** InternalIP address; loopback, where the stand-in listens. */
  address?: string;
  /** Hostname address (default localhost). */
  hostname?: string;
  labels?: Record<string, string>;
}

/** Creates or updates the Node and its Lease; returns the Node as stored. */
export async function registerStandInNode(
  client: KubeClient,
  options: StandInNodeOptions,
): Promise<KubeObject> {
  const { name } = options;
  const path = `/api/v1/nodes/${encodeURIComponent(name)}`;
  const labels = {
    'kubernetes.io/hostname': name,
    'kubernetes.io/os': 'linux',
    'kubernetes.io/arch': 'amd64',
    [STAND_IN_LABEL]: 'true',
    ...options.labels,
  };
  const status = nodeStatus(options);
  try {
    // Status given on create is kept for Nodes (node strategy PrepareForCreate keeps it).
    await client.create('/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name, labels },
      spec: {},
      status,
    });
  } catch (err) {
    if (!(err instanceof StatusError && err.code === 409)) throw err;
    await client.mergePatch(path, { metadata: { labels } });
  }
  // Updates ignore status outside the subresource; patch it there in both cases so a re-run
  // (another port, say) takes effect.
  const node = await client.mergePatch(`${path}/status`, { status });
  await renewLease(client, name);
  return node;
}

function nodeStatus(options: StandInNodeOptions) {
  const now = new Date().toISOString();
  return {
    addresses: [
      { type: 'InternalIP', address: options.address ?? '127.0.0.1' },
      { type: 'Hostname', address: options.hostname ?? 'localhost' },
    ],
    daemonEndpoints: { kubeletEndpoint: { Port: options.port } },
    conditions: [readyCondition(now, now)],
    capacity: { cpu: '4', memory: '8Gi', pods: '110' },
    allocatable: { cpu: '4', memory: '8Gi', pods: '110' },
    nodeInfo: {
      machineID: 'stand-in',
      systemUUID: 'stand-in',
      bootID: 'stand-in',
      kernelVersion: 'stand-in',
      osImage: 'stand-in kubelet',
      containerRuntimeVersion: 'stand-in://0',
      kubeletVersion: 'v1.36.3',
      kubeProxyVersion: '',
      operatingSystem: 'linux',
      architecture: 'amd64',
    },
  };
}

function readyCondition(heartbeat: string, transition: string) {
  return {
    type: 'Ready',
    status: 'True',
    reason: 'KubeletReady',
    message: 'stand-in kubelet is posting ready status',
    lastHeartbeatTime: heartbeat,
    lastTransitionTime: transition,
  };
}

/** The node Lease that the node lifecycle controller reads as the kubelet's heartbeat. */
async function renewLease(client: KubeClient, nodeName: string): Promise<void> {
  const lease = {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: nodeName, namespace: 'kube-node-lease' },
    spec: { holderIdentity: nodeName, leaseDurationSeconds: 40, renewTime: microTime(new Date()) },
  };
  try {
    await client.apply(
      `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${encodeURIComponent(nodeName)}`,
      lease,
      FIELD_MANAGER,
    );
  } catch (err) {
    // kube-apiserver creates kube-node-lease itself shortly after start; without it, the
    // Ready condition's heartbeat still counts.
    if (!(err instanceof StatusError && err.code === 404)) throw err;
  }
}

/** metav1.MicroTime: RFC 3339 with microseconds. */
function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export interface Heartbeat {
  stop(): Promise<void>;
}

/**
 * Keeps the Node looking alive, as a kubelet's status and lease updates do.
 * Only needed when a kube-controller-manager runs (its node lifecycle
 * controller watches heartbeats); errors are retried on the next beat.
 */
export function startNodeHeartbeat(
  client: KubeClient,
  nodeName: string,
  options: { intervalMs?: number; onError?: (err: unknown) => void } = {},
): Heartbeat {
  let inFlight: Promise<void> = Promise.resolve();
  const beat = async () => {
    const now = new Date().toISOString();
    const path = `/api/v1/nodes/${encodeURIComponent(nodeName)}/status`;
    const node = await client.get<
      KubeObject & { status?: { conditions?: { type: string; lastTransitionTime?: string }[] } }
    >(`/api/v1/nodes/${encodeURIComponent(nodeName)}`);
    const conditions = (node.status?.conditions ?? []).filter((c) => c.type !== 'Ready');
    const transition = node.status?.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime ?? now;
    await client.mergePatch(path, {
      status: { conditions: [...conditions, readyCondition(now, transition)] },
    });
    await renewLease(client, nodeName);
  };
  const timer = setInterval(() => {
    inFlight = beat().catch((err) => options.onError?.(err));
  }, options.intervalMs ?? 10_000);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await inFlight;
    },
  };
}

export interface RunningPodOptions {
  namespace: string;
  name: string;
  container: string;
  nodeName: string;
  image?: string;
  /** containerPort entries, for port-forward by name or for show. */
  ports?: { containerPort: number; name?: string }[];
  labels?: Record<string, string>;
}

/**
 * Creates a Pod bound to the node (spec.nodeName, no scheduler involved) and
 * reports it Running and Ready through the status subresource, the way a
 * kubelet would after starting the container. Creates the namespace and its
 * default ServiceAccount if missing: the ServiceAccount admission plugin
 * refuses pods whose ServiceAccount does not exist, and without a
 * kube-controller-manager nobody else creates it.
 */
export async function createRunningPod(client: KubeClient, options: RunningPodOptions): Promise<KubeObject> {
  const { namespace, name, container, nodeName } = options;
  await createIgnoringConflict(client, '/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: namespace },
  });
  await createIgnoringConflict(
    client,
    `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts`,
    {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'default', namespace },
    },
  );
  const image = options.image ?? 'registry.invalid/stand-in:latest';
  const podPath = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`;
  await client.create(podPath, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels: { [STAND_IN_LABEL]: 'true', ...options.labels } },
    spec: {
      nodeName,
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 0,
      containers: [{ name: container, image, ...(options.ports ? { ports: options.ports } : {}) }],
      tolerations: [
        { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute' },
        { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute' },
      ],
    },
  });
  const now = new Date().toISOString();
  const condition = (type: string) => ({
    type,
    status: 'True',
    lastProbeTime: null,
    lastTransitionTime: now,
  });
  return client.mergePatch(`${podPath}/${encodeURIComponent(name)}/status`, {
    status: {
      phase: 'Running',
      hostIP: '127.0.0.1',
      hostIPs: [{ ip: '127.0.0.1' }],
      startTime: now,
      conditions: [
        'PodReadyToStartContainers',
        'Initialized',
        'Ready',
        'ContainersReady',
        'PodScheduled',
      ].map(condition),
      containerStatuses: [
        {
          name: container,
          image,
          imageID: `${image}@sha256:${'0'.repeat(64)}`,
          containerID: `containerd://stand-in-${namespace}-${name}-${container}`,
          ready: true,
          started: true,
          restartCount: 0,
          state: { running: { startedAt: now } },
        },
      ],
    },
  });
}

async function createIgnoringConflict(client: KubeClient, path: string, body: KubeObject): Promise<void> {
  try {
    await client.create(path, body);
  } catch (err) {
    if (!(err instanceof StatusError && err.code === 409)) throw err;
  }
}
