/**
 * The caller's side: may they use the proxy (a SelfSubjectAccessReview, so that a user without the permission is
 * told which one is missing and how to grant it rather than shown a 403), and does a proxied /healthz answer.
 */
import type { Verdict } from './model.ts';
import { fail, pass, skipped } from './model.ts';
import type { Read } from './reads.ts';

export interface AccessReview {
  status?: { allowed?: boolean; denied?: boolean; reason?: string; evaluationError?: string };
}

export interface SelfSubjectReview {
  status?: { userInfo?: { username?: string; groups?: string[] } };
}

export const proxyPermission = 'get clustergateways.cluster.core.oam.dev/proxy';

export function accessReviewBody(cluster: string) {
  return {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SelfSubjectAccessReview',
    spec: {
      resourceAttributes: {
        group: 'cluster.core.oam.dev',
        resource: 'clustergateways',
        subresource: 'proxy',
        verb: 'get',
        name: cluster,
      },
    },
  };
}

/** A name kubectl accepts for a RoleBinding of `user` (lower case, [a-z0-9-.]). */
export function bindingName(user: string): string {
  const safe = user
    .toLowerCase()
    .replace(/[^a-z0-9.-]+/g, '-')
    .replace(/^[-.]+|[-.]+$/g, '');
  return `cluster-gateway-proxy-${safe || 'user'}`.slice(0, 253);
}

/** `--user=`, or `--serviceaccount=` for a ServiceAccount (system:serviceaccount:<ns>:<name>). */
export function subjectFlag(user: string): string {
  const sa = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(user);
  return sa ? `--serviceaccount=${sa[1]}:${sa[2]}` : `--user=${quoteArg(user)}`;
}

function quoteArg(s: string): string {
  return /^[A-Za-z0-9@%+=:,./_-]+$/.test(s) ? s : `'${s.replaceAll("'", "'\\''")}'`;
}

export function grantCommands(user: string | undefined, cluster: string): string {
  const who = user ?? '<your user>';
  // Named after the user, so that an existing role of the same purpose is never replaced or doubled.
  const name = bindingName(who);
  return [
    `# as a hub admin: allow get on clustergateways/proxy (add the verbs of your requests, e.g. list,watch,create; drop --resource-name for every cluster)`,
    `kubectl create clusterrole ${name} --verb=get --resource=clustergateways.cluster.core.oam.dev/proxy --resource-name=${cluster}`,
    `kubectl create clusterrolebinding ${name} --clusterrole=${name} ${subjectFlag(who)}`,
  ].join('\n');
}

export function proxyAllowed(
  cluster: string,
  review: Read<AccessReview>,
  self: Read<SelfSubjectReview>,
): Verdict {
  const object = `clustergateways.cluster.core.oam.dev/${cluster}/proxy`;
  if (review.state === 'forbidden' || review.state === 'missing') {
    return skipped(
      'not checked: the hub does not let you ask what you may do (selfsubjectaccessreviews)',
      object,
    );
  }
  if (review.state === 'error') {
    return fail(`cannot ask the hub what you may do: ${review.message}`, object, 'kubectl auth can-i --list');
  }
  const user = self.state === 'found' ? self.value.status?.userInfo?.username : undefined;
  const status = review.value.status ?? {};
  if (status.allowed) return pass(`${user ?? 'you'} may ${proxyPermission} on ${cluster}`, object);
  return fail(
    `${user ?? 'you'} may not ${proxyPermission} (resourceNames: ${cluster}): every request through the gateway to ${cluster} is refused with 403${status.reason ? ` (${status.reason})` : ''}. Missing permission: get on the subresource clustergateways/proxy of group cluster.core.oam.dev, for ${cluster}`,
    object,
    grantCommands(user, cluster),
  );
}

/** The proxied /healthz: its answer and round trip (read with readPath, whose error carries the gateway's Status). */
export function healthzAnswers(
  cluster: string,
  read: Read<unknown>,
  milliseconds: number,
  gateway?: { status?: { healthy?: boolean; healthyReason?: string } },
): Verdict {
  const object = `clustergateway/${cluster}`;
  const path = `/apis/cluster.core.oam.dev/v1alpha1/clustergateways/${cluster}/proxy/healthz`;
  if (read.state === 'found') {
    const text = typeof read.value === 'string' ? read.value.trim() : JSON.stringify(read.value);
    if (text === 'ok') return pass(`ok in ${milliseconds} ms`, object);
    return fail(
      `/healthz answered "${text.slice(0, 200)}" in ${milliseconds} ms`,
      object,
      `kubectl get --raw ${path}`,
    );
  }
  if (read.state === 'forbidden') {
    return fail(
      `refused (403): ${read.message}`,
      object,
      `kubectl auth can-i get clustergateways.cluster.core.oam.dev/${cluster} --subresource=proxy`,
    );
  }
  const message = read.state === 'missing' ? 'the gateway does not know the cluster (404)' : read.message;
  const offline = /ClusterOffline|offline/i.test(message);
  // The gateway's prober says why, when it knows: the managed kube-apiserver is down or unreachable.
  const prober =
    gateway?.status?.healthy === false
      ? `; the gateway cannot reach ${cluster}'s kube-apiserver (${gateway.status.healthyReason || 'unhealthy'})`
      : '';
  return fail(
    `no answer through the gateway after ${milliseconds} ms: ${message}${prober}`,
    object,
    offline
      ? `kubectl get clustergateway ${cluster} -o wide   # the gateway marks it offline: its health, tunnel, or an operator's mark`
      : `kubectl get clustergateway ${cluster} -o wide\nkubectl get --raw ${path}`,
  );
}
