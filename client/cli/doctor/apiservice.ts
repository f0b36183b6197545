/**
 * The hub's front door: the APIService that sends /apis/cluster.core.oam.dev/v1alpha1 to the gateway, the
 * gateway pods behind its Service, the aggregator's Available verdict, and whether the APIService's caBundle
 * verifies the certificate the gateway serves.
 *
 * That last one is asked of the aggregator itself rather than by dialling a gateway pod: a laptop with the hub
 * kubeconfig cannot reach pod IPs, and the service proxy (services/proxy) does not show the certificate. The
 * aggregator verifies the serving certificate against spec.caBundle, with the server name
 * `<service>.<namespace>.svc`, on every request it proxies (and in its discovery check behind Available), so a
 * GET of the group-version through the hub answering 200 proves the caBundle verifies the certificate of the
 * replica that answered, and a TLS failure comes back as a 503 naming x509.
 */
import { humanAge } from '../output.ts';
import type { AddonLayout, Verdict } from './model.ts';
import { fail, pass, skipped } from './model.ts';
import type { Read } from './reads.ts';
import { unreadable } from './unreadable.ts';

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

export interface APIService {
  metadata: { name: string };
  spec?: {
    service?: { name?: string; namespace?: string; port?: number };
    caBundle?: string;
    insecureSkipTLSVerify?: boolean;
  };
  status?: { conditions?: Condition[] };
}

export interface Deployment {
  metadata: { name: string; namespace?: string };
  spec?: { replicas?: number; selector?: { matchLabels?: Record<string, string> } };
  status?: { replicas?: number; readyReplicas?: number; availableReplicas?: number };
}

export interface Pod {
  metadata: { name: string; namespace?: string; deletionTimestamp?: string };
  status?: {
    phase?: string;
    conditions?: Condition[];
    containerStatuses?: {
      name: string;
      ready?: boolean;
      restartCount?: number;
      state?: { waiting?: { reason?: string; message?: string }; terminated?: { reason?: string } };
    }[];
  };
}

const managerRestart = (l: AddonLayout) =>
  `kubectl -n ${l.managerNamespace} get pods -l ${l.managerSelector}\nkubectl -n ${l.managerNamespace} logs -l ${l.managerSelector} --tail=50`;

export function apiServiceExists(read: Read<APIService>, l: AddonLayout): Verdict {
  const object = `apiservice/${l.apiServiceName}`;
  const cannot = unreadable(read, `APIService ${l.apiServiceName}`, object);
  if (cannot) return cannot;
  if (read.state === 'missing') {
    return fail(
      `APIService ${l.apiServiceName} does not exist: the hub serves no clustergateways. The addon manager registers it once a gateway replica serves; it is not running, or it was uninstalled`,
      object,
      `${managerRestart(l)}\nhelm status cluster-gateway -n ${l.managerNamespace}   # reinstall with helm if the release is gone`,
    );
  }
  const svc = read.state === 'found' ? read.value.spec?.service : undefined;
  return pass(
    svc
      ? `registered; served by Service ${svc.namespace}/${svc.name}`
      : 'registered (served by the kube-apiserver itself: no gateway Service)',
    object,
  );
}

/** Why a pod is not ready, in a word or two (the waiting reason kubectl shows in STATUS). */
export function podProblem(pod: Pod): string {
  if (pod.metadata.deletionTimestamp) return 'Terminating';
  for (const c of pod.status?.containerStatuses ?? []) {
    const waiting = c.state?.waiting?.reason;
    if (waiting) return waiting;
    if (c.state?.terminated?.reason) return c.state.terminated.reason;
  }
  const ready = pod.status?.conditions?.find((c) => c.type === 'Ready');
  if (pod.status?.phase && pod.status.phase !== 'Running') return pod.status.phase;
  return ready?.status === 'True' ? 'Ready' : 'not ready (readiness probe)';
}

export function podReady(pod: Pod): boolean {
  return (
    !pod.metadata.deletionTimestamp &&
    pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true
  );
}

export function gatewayPodsReady(
  deployment: Read<Deployment>,
  pods: Read<{ items: Pod[] }>,
  l: AddonLayout,
): Verdict {
  const object = `deployment ${l.gatewayNamespace}/${l.gatewayName}`;
  const cannot = unreadable(deployment, `Deployment ${l.gatewayNamespace}/${l.gatewayName}`, object);
  if (cannot) return cannot;
  if (deployment.state === 'missing') {
    return fail(
      `the gateway Deployment ${l.gatewayNamespace}/${l.gatewayName} does not exist: the addon manager deploys it (unless the chart's gateway.enabled is false)`,
      object,
      managerRestart(l),
    );
  }
  if (deployment.state !== 'found') return skipped('not checked', object);
  const d = deployment.value;
  const desired = d.spec?.replicas ?? 1;
  const list = pods.state === 'found' ? pods.value.items : [];
  const ready = pods.state === 'found' ? list.filter(podReady).length : (d.status?.readyReplicas ?? 0);
  if (desired === 0) {
    return fail(
      `the gateway Deployment is scaled to 0 replicas: nothing serves clustergateways. The addon manager sets its replicas from the chart's gateway.replicas and puts them back within seconds while it runs`,
      object,
      `kubectl -n ${l.gatewayNamespace} scale deployment/${l.gatewayName} --replicas=2   # if it stays at 0, the manager is not running:\n${managerRestart(l)}`,
    );
  }
  if (ready === 0 || ready < desired) {
    const notReady = list.filter((p) => !podReady(p));
    const detail = notReady.length
      ? `; not ready: ${notReady.map((p) => `${p.metadata.name} (${podProblem(p)})`).join(', ')}`
      : '';
    const first = notReady[0]?.metadata.name;
    return fail(
      `${ready}/${desired} gateway pods ready${detail}`,
      first ? `pod ${l.gatewayNamespace}/${first}` : object,
      first
        ? `kubectl -n ${l.gatewayNamespace} describe pod ${first}\nkubectl -n ${l.gatewayNamespace} logs ${first} --tail=50`
        : `kubectl -n ${l.gatewayNamespace} describe deployment ${l.gatewayName}`,
    );
  }
  return pass(`${ready}/${desired} gateway pods ready`, object);
}

export function apiServiceAvailable(read: Read<APIService>, l: AddonLayout, hubTime?: number): Verdict {
  const object = `apiservice/${l.apiServiceName}`;
  if (read.state !== 'found') return skipped('not checked', object);
  const available = read.value.status?.conditions?.find((c) => c.type === 'Available');
  if (available?.status === 'True') return pass('Available: the aggregator reaches the gateway', object);
  const since =
    available?.lastTransitionTime && hubTime !== undefined
      ? ` for ${humanAge((hubTime - Date.parse(available.lastTransitionTime)) / 1000)}`
      : '';
  const reason = available
    ? `${available.reason ?? available.status}: ${available.message ?? ''}`
    : 'no condition yet';
  const tls = /x509|certificate/i.test(available?.message ?? '');
  return fail(
    `not Available${since} (${reason.trim()})${tls ? ': the aggregator does not trust the certificate the gateway serves' : ''}`,
    object,
    tls
      ? `the manager writes spec.caBundle from the gateway's CA; restart it to rewrite it:\nkubectl -n ${l.managerNamespace} rollout restart deployment -l ${l.managerSelector}`
      : `kubectl get apiservice ${l.apiServiceName} -o yaml\nkubectl -n ${l.gatewayNamespace} get endpointslices -l kubernetes.io/service-name=${l.gatewayName}`,
  );
}

/** The aggregator's answer to GET /apis/<group>/<version> (see the file comment). */
export function caBundleVerifies(
  apiService: Read<APIService>,
  discovery: Read<unknown>,
  l: AddonLayout,
): Verdict {
  const object = `apiservice/${l.apiServiceName}`;
  if (apiService.state !== 'found') return skipped('not checked', object);
  const spec = apiService.value.spec ?? {};
  if (spec.insecureSkipTLSVerify) {
    return fail(
      'spec.insecureSkipTLSVerify is true: the aggregator does not verify the gateway, so anything answering at its Service is trusted',
      object,
      `kubectl patch apiservice ${l.apiServiceName} --type=merge -p '{"spec":{"insecureSkipTLSVerify":false}}'   # the manager then writes the caBundle`,
    );
  }
  if (!spec.caBundle) {
    return fail(
      'spec.caBundle is empty: the aggregator cannot verify the gateway',
      object,
      `kubectl -n ${l.managerNamespace} rollout restart deployment -l ${l.managerSelector}   # the manager writes the caBundle`,
    );
  }
  if (discovery.state === 'found') {
    return pass("the aggregator verified the gateway's serving certificate against spec.caBundle", object);
  }
  if (discovery.state === 'forbidden')
    return skipped(`not checked: you may not ${discovery.permission}`, object);
  const message = discovery.state === 'error' ? discovery.message : 'the group-version is not served';
  const tls = /x509|certificate|tls/i.test(message);
  return fail(
    tls
      ? `the aggregator does not trust the gateway's serving certificate with spec.caBundle: ${message}`
      : `the aggregator could not get an answer from the gateway: ${message}`,
    object,
    tls
      ? `the manager writes spec.caBundle from the gateway's CA; restart it to rewrite it:\nkubectl -n ${l.managerNamespace} rollout restart deployment -l ${l.managerSelector}`
      : `kubectl -n ${l.gatewayNamespace} logs deploy/${l.gatewayName} --tail=50`,
  );
}
