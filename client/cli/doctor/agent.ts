/**
 * One managed cluster's addon, as the hub sees it: the ManagedClusterAddOn, the ManifestWork that carries the
 * agent, the agent Deployment's status (the work's status feedback) and the agent's heartbeat Lease.
 *
 * The rules mirror the manager's (manager/addon/availability/observe.ts and available.ts), which the CLI does not
 * import: the package ships the client and the CLI without the manager. Keep them in step.
 */
import { humanAge } from '../output.ts';
import type { Condition } from './apiservice.ts';
import type { AddonLayout, Verdict } from './model.ts';
import { fail, pass, skipped } from './model.ts';
import type { Read } from './reads.ts';
import { unreadable } from './unreadable.ts';

/** The manager's default --heartbeat-stale-seconds (manager/addon/availability/availability-controller.ts). */
export const heartbeatStaleSeconds = 12;

export interface ManagedClusterAddOn {
  metadata: { name: string; namespace: string };
  status?: { conditions?: Condition[]; namespace?: string; healthCheck?: { mode?: string } };
}

export interface ManifestWork {
  metadata: { name: string; namespace?: string; generation?: number };
  spec?: { workload?: { manifests?: { kind?: string; metadata?: { name?: string; namespace?: string } }[] } };
  status?: {
    conditions?: (Condition & { observedGeneration?: number })[];
    resourceStatus?: {
      manifests?: {
        resourceMeta: { kind?: string; resource?: string; name?: string; namespace?: string };
        statusFeedback?: { values?: { name: string; fieldValue: { integer?: number; string?: string } }[] };
      }[];
    };
  };
}

export interface HeartbeatLease {
  metadata: { name: string; namespace?: string };
  spec?: { holderIdentity?: string; renewTime?: string };
}

export interface ClusterGateway {
  metadata: { name: string };
  spec?: { access?: { endpoint?: { type?: string } } };
  status?: {
    healthy?: boolean;
    healthyReason?: string;
    tunnel?: { connected?: boolean; connectedSince?: string; replica?: string };
  };
}

/** Where the agent runs on `cluster`: the addon's install namespace, the Deployment the work carries. */
export function agentLocation(
  addon: ManagedClusterAddOn | undefined,
  work: ManifestWork | undefined,
  l: AddonLayout,
): { namespace: string; name: string } {
  const deployment = work?.spec?.workload?.manifests?.find((m) => m.kind === 'Deployment');
  return {
    namespace: deployment?.metadata?.namespace ?? addon?.status?.namespace ?? l.agentNamespace,
    name: deployment?.metadata?.name ?? l.agentDeployment,
  };
}

const onCluster = (cluster: string, command: string) => `${command}   # on ${cluster}`;

export function addonExists(
  cluster: string,
  addon: Read<ManagedClusterAddOn>,
  gateway: ClusterGateway | undefined,
  l: AddonLayout,
): Verdict {
  const object = `managedclusteraddon ${cluster}/${l.addonName}`;
  const cannot = unreadable(addon, `ManagedClusterAddOn ${cluster}/${l.addonName}`, object);
  if (cannot) return cannot;
  if (addon.state === 'missing') {
    // A cluster reached with an admin's credential Secret needs no agent (docs/install.md, way (a)).
    if (gateway && gateway.spec?.access?.endpoint?.type !== 'ClusterProxy') {
      return {
        ...skipped(
          `the addon is not enabled on ${cluster}: the gateway reaches it with its credential Secret, no agent runs there`,
          object,
        ),
        cascade: true,
      };
    }
    return fail(
      `the addon is not enabled on ${cluster}: no agent runs there${gateway ? ', and the gateway reaches it only through an agent (endpoint type ClusterProxy)' : ''}`,
      object,
      `clusteradm addon enable --names ${l.addonName} --clusters ${cluster}`,
    );
  }
  return pass('enabled', object);
}

export function workApplied(
  cluster: string,
  works: Read<{ items: ManifestWork[] }>,
  l: AddonLayout,
): Verdict {
  const object = `manifestwork ${cluster} -l open-cluster-management.io/addon-name=${l.addonName}`;
  const cannot = unreadable(works, `the ManifestWorks in ${cluster}`, object);
  if (cannot) return cannot;
  const work = works.state === 'found' ? works.value.items[0] : undefined;
  if (!work) {
    return fail(
      `no ManifestWork of the addon in ${cluster}: the addon manager creates it for every enabled addon within seconds; it is not running, or cannot write there`,
      object,
      `kubectl -n ${l.managerNamespace} logs -l ${l.managerSelector} --tail=50`,
    );
  }
  const named = `manifestwork ${cluster}/${work.metadata.name}`;
  const applied = work.status?.conditions?.find((c) => c.type === 'Applied');
  if (applied?.status === 'False') {
    return fail(
      `the work agent of ${cluster} failed to apply it: ${applied.reason}: ${applied.message}`,
      named,
      `kubectl -n ${cluster} get manifestwork ${work.metadata.name} -o yaml   # status.resourceStatus names the manifest that failed`,
    );
  }
  const generation = work.metadata.generation;
  const stale =
    applied?.status === 'True' &&
    generation !== undefined &&
    applied.observedGeneration !== undefined &&
    applied.observedGeneration < generation;
  if (applied?.status !== 'True' || stale) {
    return fail(
      `not applied yet${stale ? ' (its latest change)' : ''}: the work agent of ${cluster} has not applied it${applied?.message ? ` (${applied.message})` : ''}; it runs in the klusterlet there`,
      named,
      onCluster(cluster, 'kubectl -n open-cluster-management-agent get pods'),
    );
  }
  return pass('applied', named);
}

export type AgentState =
  | { state: 'no-feedback' }
  | { state: 'available'; available: number; replicas: number }
  | { state: 'unavailable'; available: number; replicas: number; message?: string };

/** The agent Deployment from the work's status feedback (observeDeployment in the manager). */
export function agentState(work: ManifestWork | undefined, namespace: string, name: string): AgentState {
  const manifest = work?.status?.resourceStatus?.manifests?.find(
    (m) =>
      (m.resourceMeta.kind === 'Deployment' || m.resourceMeta.resource === 'deployments') &&
      m.resourceMeta.name === name &&
      (m.resourceMeta.namespace ?? namespace) === namespace,
  );
  const values = manifest?.statusFeedback?.values ?? [];
  if (values.length === 0) return { state: 'no-feedback' };
  const integer = (key: string) => values.find((v) => v.name === key)?.fieldValue.integer;
  const text = (key: string) => values.find((v) => v.name === key)?.fieldValue.string;
  const replicas = integer('Replicas') ?? 0;
  const available = integer('AvailableReplicas') ?? 0;
  if (available >= 1 && available >= replicas) return { state: 'available', available, replicas };
  const message = [text('AvailableMessage'), text('ProgressingMessage'), text('ReplicaFailureMessage')]
    .filter(Boolean)
    .join('; ');
  return { state: 'unavailable', available, replicas, ...(message ? { message } : {}) };
}

/** Seconds since the heartbeat was renewed, by the hub's clock; undefined when never renewed. */
export function heartbeatAge(lease: HeartbeatLease, hubTime: number): number | undefined {
  const renewed = Date.parse(lease.spec?.renewTime ?? '');
  return Number.isNaN(renewed) ? undefined : Math.max(0, (hubTime - renewed) / 1000);
}

export function agentRuns(
  cluster: string,
  works: Read<{ items: ManifestWork[] }>,
  addon: ManagedClusterAddOn | undefined,
  heartbeat: Read<HeartbeatLease>,
  l: AddonLayout,
): Verdict {
  const work = works.state === 'found' ? works.value.items[0] : undefined;
  const at = agentLocation(addon, work, l);
  const object = `deployment ${at.namespace}/${at.name} on ${cluster}`;
  const cannot = unreadable(works, `the ManifestWorks in ${cluster} (their status feedback)`, object);
  if (cannot) return cannot;
  const s = agentState(work, at.namespace, at.name);
  const fresh =
    heartbeat.state === 'found' &&
    (heartbeatAge(heartbeat.value, heartbeat.hubTime) ?? Infinity) <= heartbeatStaleSeconds;
  const pods = onCluster(cluster, `kubectl -n ${at.namespace} get pods,deployment/${at.name}`);
  if (s.state === 'no-feedback') {
    return fail(
      `no status of the agent Deployment has come back from ${cluster} (the work's status feedback): the work agent there has not reported it yet`,
      object,
      `${pods}\n${onCluster(cluster, 'kubectl -n open-cluster-management-agent logs deploy/klusterlet-work-agent --tail=50')}`,
    );
  }
  if (s.state === 'unavailable') {
    // As the manager: a fresh heartbeat means an agent runs (a rollout, a restart before its probe passes).
    if (fresh)
      return pass(
        `the heartbeat is fresh, though the Deployment shows ${s.available}/${s.replicas} available (a rollout or a restart)`,
        object,
      );
    if (s.replicas === 0) {
      return fail(
        `the agent Deployment on ${cluster} is scaled to 0: no agent runs (its ManifestWork asks for 1 replica; the work agent puts it back on its next resync)`,
        object,
        onCluster(cluster, `kubectl -n ${at.namespace} scale deployment/${at.name} --replicas=1`),
      );
    }
    return fail(
      `the agent Deployment on ${cluster} has ${s.available}/${s.replicas} available replicas${s.message ? ` (${s.message})` : ''}: look for an image pull error or a crash loop`,
      object,
      `${pods}\n${onCluster(cluster, `kubectl -n ${at.namespace} logs deploy/${at.name} --tail=50`)}`,
    );
  }
  return pass(`${s.available}/${s.replicas} agent replicas available`, object);
}

export function heartbeatFresh(
  cluster: string,
  heartbeat: Read<HeartbeatLease>,
  agent: { namespace: string; name: string },
  gateway: ClusterGateway | undefined,
  l: AddonLayout,
): Verdict {
  const object = `lease ${cluster}/${l.addonName}`;
  const cannot = unreadable(heartbeat, `the heartbeat Lease ${cluster}/${l.addonName}`, object);
  if (cannot) return cannot;
  const logs = onCluster(cluster, `kubectl -n ${agent.namespace} logs deploy/${agent.name} --tail=50`);
  if (heartbeat.state === 'missing') {
    return fail(
      `the agent's heartbeat Lease is missing on the hub: the addon manager creates it within seconds`,
      object,
      `kubectl -n ${l.managerNamespace} logs -l ${l.managerSelector} --tail=50`,
    );
  }
  if (heartbeat.state !== 'found') return skipped('not checked', object);
  const age = heartbeatAge(heartbeat.value, heartbeat.hubTime);
  if (age === undefined) {
    return fail(`the agent has not renewed its heartbeat yet`, object, logs);
  }
  if (age > heartbeatStaleSeconds) {
    // The agent renews nothing while its own kube-apiserver fails /readyz; the gateway's prober sees the same
    // cluster from the hub side: when both are down, the managed kube-apiserver is the likely cause.
    const apiserverDown = gateway?.status?.healthy === false;
    return fail(
      apiserverDown
        ? `the agent last renewed its heartbeat ${humanAge(age)} ago (stale after ${heartbeatStaleSeconds}s), and the gateway cannot reach ${cluster}'s kube-apiserver either (${gateway?.status?.healthyReason || 'unhealthy'}): the managed kube-apiserver is down or unreachable`
        : `the agent last renewed its heartbeat ${humanAge(age)} ago (stale after ${heartbeatStaleSeconds}s): it is stopped or frozen, cannot reach the hub, its hub credential is refused, or it finds its kube-apiserver unhealthy${gateway?.status?.healthy === true ? ` (the gateway reaches ${cluster}'s kube-apiserver: look at the agent and its route to the hub first)` : ''}`,
      apiserverDown ? `the kube-apiserver of ${cluster}` : object,
      apiserverDown
        ? `${onCluster(cluster, 'kubectl get --raw /readyz?verbose')}\nkubectl get clustergateway ${cluster} -o wide`
        : logs,
    );
  }
  return pass(
    `renewed ${humanAge(age)} ago by ${heartbeat.value.spec?.holderIdentity ?? 'the agent'}`,
    object,
  );
}

/** The tunnel, where the gateway has no other way in (endpoint type ClusterProxy). */
export function tunnelUp(
  cluster: string,
  gateways: Read<ClusterGateway>,
  agent: { namespace: string; name: string },
): Verdict {
  const object = `clustergateway/${cluster}`;
  const cannot = unreadable(gateways, `ClusterGateway ${cluster}`, object);
  if (cannot) return cannot;
  if (gateways.state === 'missing') {
    return fail(
      `the gateway does not serve ${cluster}: it has no credential Secret for it and no tunnel of a Secret-less cluster`,
      object,
      `${onCluster(cluster, `kubectl -n ${agent.namespace} logs deploy/${agent.name} --tail=50`)}\nkubectl get clustergateways   # with the trust model None, write the cluster's credential Secret (docs/install.md)`,
    );
  }
  if (gateways.state !== 'found') return skipped('not checked', object);
  const g = gateways.value;
  const type = g.spec?.access?.endpoint?.type ?? 'Const';
  const t = g.status?.tunnel;
  if (type !== 'ClusterProxy') {
    return pass(
      `not needed (endpoint type ${type}: the gateway dials the cluster)${t?.connected ? `; connected to ${t.replica ?? 'a replica'}` : ''}`,
      object,
    );
  }
  if (t?.connected !== true) {
    return fail(
      `the agent's tunnel is not connected, and the gateway reaches ${cluster} only through it (endpoint type ClusterProxy)${g.status?.healthyReason ? `: ${g.status.healthyReason}` : ''}`,
      object,
      `${onCluster(cluster, `kubectl -n ${agent.namespace} logs deploy/${agent.name} --tail=50 | grep -i tunnel`)}\nkubectl get clustergateway ${cluster} -o wide`,
    );
  }
  return pass(`connected to ${t.replica ?? 'a gateway replica'}`, object);
}
