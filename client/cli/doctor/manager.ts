/**
 * The addon manager: one replica holds its leader-election Lease (shared/kube/leader-election.ts, identity
 * `<pod name>_<uuid>`) and renews it within leaseDurationSeconds; only the leader writes (the APIService, the
 * gateway Deployment, the agents' ManifestWorks, the addons' Available). It registers the LeaseNotFound webhook
 * (health mode Customized) and declares the ClusterManagementAddOn.
 */
import { humanAge } from '../output.ts';
import type { Pod } from './apiservice.ts';
import { podProblem, podReady } from './apiservice.ts';
import type { AddonLayout, Verdict } from './model.ts';
import { fail, pass, skipped } from './model.ts';
import type { Read } from './reads.ts';
import { unreadable } from './unreadable.ts';

export interface Lease {
  metadata: { name: string; namespace?: string };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; renewTime?: string; acquireTime?: string };
}

const managerLogs = (l: AddonLayout) =>
  `kubectl -n ${l.managerNamespace} get pods -l ${l.managerSelector}\nkubectl -n ${l.managerNamespace} logs -l ${l.managerSelector} --tail=50`;

/** The pod that holds a leader Lease: the identity is `<hostname>_<uuid>`, and a pod's hostname is its name. */
export function holderPod(identity: string): string {
  const at = identity.lastIndexOf('_');
  return at > 0 ? identity.slice(0, at) : identity;
}

export function managerLeader(lease: Read<Lease>, pods: Read<{ items: Pod[] }>, l: AddonLayout): Verdict {
  const object = `lease ${l.managerNamespace}/${l.managerLeaseName}`;
  const cannot = unreadable(lease, `the manager's leader Lease`, object);
  if (cannot) return cannot;
  const list = pods.state === 'found' ? pods.value.items : undefined;
  const readyPods = list?.filter(podReady) ?? [];
  if (lease.state === 'missing') {
    // --leader-elect=false: no Lease, and a single running manager is the leader.
    if (list && readyPods.length === 1) {
      return pass(
        `no leader Lease (leader election off); 1 manager pod ready: ${readyPods[0]?.metadata.name}`,
      );
    }
    return fail(
      list?.length === 0
        ? `no addon manager pod runs in ${l.managerNamespace}, and no manager holds the leader Lease: nothing deploys the gateway, registers the APIService or reports the addons' health`
        : `no manager holds the leader Lease ${l.managerNamespace}/${l.managerLeaseName}`,
      list?.length === 0 ? `deployment ${l.managerNamespace} -l ${l.managerSelector}` : object,
      list?.length === 0
        ? `kubectl -n ${l.managerNamespace} scale deployment -l ${l.managerSelector} --replicas=1\n${managerLogs(l)}`
        : managerLogs(l),
    );
  }
  if (lease.state !== 'found') return skipped('not checked', object);
  const spec = lease.value.spec ?? {};
  const holder = spec.holderIdentity;
  if (!holder) {
    return fail(
      'the leader Lease has no holder: the last leader released it and no replica took over',
      object,
      managerLogs(l),
    );
  }
  const duration = spec.leaseDurationSeconds ?? 15;
  const renewed = Date.parse(spec.renewTime ?? spec.acquireTime ?? '');
  const age = Number.isNaN(renewed) ? Number.POSITIVE_INFINITY : (lease.hubTime - renewed) / 1000;
  const podName = holderPod(holder);
  const pod = list?.find((p) => p.metadata.name === podName);
  if (list && !pod) {
    return fail(
      `the leader Lease is held by ${podName}, which is not a manager pod in ${l.managerNamespace}${list.length === 0 ? ' (no manager pod runs)' : ''}: a standby takes over after ${duration}s`,
      object,
      list.length === 0
        ? `kubectl -n ${l.managerNamespace} scale deployment -l ${l.managerSelector} --replicas=1\n${managerLogs(l)}`
        : managerLogs(l),
    );
  }
  if (age > duration) {
    return fail(
      `the leader ${podName} last renewed its Lease ${humanAge(age)} ago (expires after ${duration}s): it is stuck or cannot reach the hub`,
      object,
      managerLogs(l),
    );
  }
  if (pod && !podReady(pod)) {
    return fail(
      `the leader ${podName} is not ready (${podProblem(pod)})`,
      `pod ${l.managerNamespace}/${podName}`,
      managerLogs(l),
    );
  }
  return pass(`${podName} leads (renewed ${humanAge(Math.max(0, age))} ago)`, object);
}

export interface WebhookConfiguration {
  metadata: { name: string };
  webhooks?: {
    clientConfig?: { caBundle?: string; service?: { namespace?: string; name?: string }; url?: string };
  }[];
}

/**
 * The LeaseNotFound webhook matters in health mode Customized (the chart's default), which each
 * ManagedClusterAddOn's status.healthCheck.mode shows; in Lease mode the manager removes it on purpose.
 */
export function webhookRegistered(
  webhook: Read<WebhookConfiguration>,
  healthModes: string[],
  l: AddonLayout,
): Verdict {
  const object = `mutatingwebhookconfiguration/${l.webhookName}`;
  const cannot = unreadable(webhook, `MutatingWebhookConfiguration ${l.webhookName}`, object);
  if (cannot) return cannot;
  const customized = healthModes.length === 0 || healthModes.includes('Customized');
  if (webhook.state === 'missing') {
    if (!customized) return pass('not registered, as health mode Lease wants');
    return fail(
      `the manager's LeaseNotFound webhook is not registered: OCM's "lease not found" verdicts are not replaced by the manager's reasons. The leader registers it within seconds of starting`,
      object,
      managerLogs(l),
    );
  }
  if (webhook.state !== 'found') return skipped('not checked', object);
  const config = webhook.value.webhooks?.[0]?.clientConfig;
  if (!config?.caBundle) {
    return fail(
      'registered without a caBundle: the hub cannot call it',
      object,
      `kubectl -n ${l.managerNamespace} rollout restart deployment -l ${l.managerSelector}`,
    );
  }
  const at = config.service
    ? `Service ${config.service.namespace}/${config.service.name}`
    : (config.url ?? 'its URL');
  return pass(`registered, calling ${at}`, object);
}

export interface ClusterManagementAddOn {
  metadata: { name: string; annotations?: Record<string, string> };
  spec?: { installStrategy?: { type?: string } };
}

export function cmaExists(read: Read<ClusterManagementAddOn>, l: AddonLayout): Verdict {
  const object = `clustermanagementaddon/${l.addonName}`;
  const cannot = unreadable(read, `ClusterManagementAddOn ${l.addonName}`, object);
  if (cannot) return cannot;
  if (read.state === 'missing') {
    return fail(
      `ClusterManagementAddOn ${l.addonName} does not exist: OCM knows no addon of that name, so no cluster can enable it. The chart installs it`,
      object,
      `helm status cluster-gateway -n ${l.managerNamespace}\nhelm upgrade --install cluster-gateway charts/cluster-gateway -n ${l.managerNamespace} --reuse-values`,
    );
  }
  if (read.state !== 'found') return skipped('not checked', object);
  return pass(`exists; install strategy ${read.value.spec?.installStrategy?.type ?? 'Manual'}`, object);
}
