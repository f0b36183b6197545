/**
 * mergeCluster: one ClusterTarget from everything known about a cluster
 * name. Pure, so the precedence rules are tested in one place:
 *
 * - Existence: a cluster exists when it has a credential Secret (as in the
 *   original, which enumerates Secrets) or a connected agent tunnel. A
 *   ManagedCluster alone is not a ClusterGateway: without credentials it
 *   cannot be proxied, and listing it would change what KubeVela sees.
 * - Endpoint: a connected tunnel wins; a Secret declaring ClusterProxy
 *   without a tunnel has no endpoint; otherwise the ManagedCluster's
 *   client config (OCM integration, CA falling back to the Secret's), then
 *   the Secret's own `endpoint`. The Secret's proxy-url applies to both.
 * - Credential: only ever from the Secret.
 * - Health: the prober's overlay, then the Secret's status annotations
 *   (what the health subresource writes), then the ManagedCluster's
 *   Available condition, else unhealthy (the original's default).
 * - Labels and annotations: the ManagedCluster's, overridden by the Secret's.
 */
import type { ClusterHealth, ClusterTarget, Endpoint, TunnelEndpoint } from './cluster.ts';
import { connectionKey } from './connection-key.ts';
import type { ManagedClusterInfo } from './managedcluster-source.ts';
import type { SecretClusterInfo } from './secret-source.ts';

export interface TunnelInput {
  endpoint: TunnelEndpoint;
  /** Increases with every new tunnel of this cluster (see connectionKey). */
  generation: number;
  connectedAt: string;
}

export interface ClusterInputs {
  name: string;
  secret?: SecretClusterInfo;
  managed?: ManagedClusterInfo;
  tunnel?: TunnelInput;
  /** Overlay from a health prober. */
  health?: ClusterHealth;
}

export type MergedCluster = Omit<ClusterTarget, 'resourceVersion'>;

export function mergeCluster(inputs: ClusterInputs): MergedCluster | undefined {
  const { name, secret, managed, tunnel } = inputs;
  if (!secret && !tunnel) return undefined;

  const { endpoint, problem: endpointProblem } = resolveEndpoint(inputs);
  const problems: string[] = [];
  if (endpointProblem) problems.push(endpointProblem);
  if (!secret) problems.push(`no credential Secret named ${JSON.stringify(name)} in the secret namespace`);
  else if (secret.credentialProblem) problems.push(secret.credentialProblem);

  const credential = secret?.credential;
  const merged: MergedCluster = {
    name,
    labels: { ...managed?.labels, ...secret?.labels },
    annotations: { ...managed?.annotations, ...secret?.annotations },
    creationTimestamp: secret?.creationTimestamp || managed?.creationTimestamp || tunnel?.connectedAt || '',
    health: inputs.health ?? secret?.health ?? managed?.health ?? { healthy: false },
    connectionKey: connectionKey(endpoint, credential, tunnel?.generation),
  };
  if (endpoint) merged.endpoint = endpoint;
  if (credential) merged.credential = credential;
  if (problems.length) merged.problem = problems.join('; ');
  return merged;
}

function resolveEndpoint({ secret, managed, tunnel }: ClusterInputs): {
  endpoint?: Endpoint;
  problem?: string;
} {
  if (tunnel) return { endpoint: tunnel.endpoint };
  if (secret?.endpointTypeProblem) return { problem: secret.endpointTypeProblem };
  if (secret?.endpointType === 'ClusterProxy') {
    return { problem: 'endpoint type is ClusterProxy but no agent tunnel is connected for this cluster' };
  }

  const problems: string[] = [];
  let address: string | undefined;
  let caBundle: string | undefined;
  let insecure: boolean;
  if (managed?.address) {
    // The original never marks an OCM endpoint insecure: no CA means the system roots.
    address = managed.address;
    caBundle = managed.caBundle ?? secret?.caBundle;
    if (!caBundle && secret?.caProblem) problems.push(secret.caProblem);
    insecure = false;
  } else {
    if (secret?.address) address = secret.address;
    else problems.push(secret?.addressProblem ?? managed?.addressProblem ?? 'no endpoint address');
    caBundle = secret?.caBundle;
    if (secret?.caProblem) problems.push(secret.caProblem);
    // No CA means no verification: the original's behaviour for Secrets, kept for compatibility.
    insecure = caBundle === undefined;
  }
  if (secret?.proxyProblem) problems.push(secret.proxyProblem);
  if (problems.length || !address) return { problem: problems.join('; ') };
  return {
    endpoint: {
      type: 'Const',
      address,
      insecure,
      ...(caBundle !== undefined ? { caBundle } : {}),
      ...(secret?.proxyUrl !== undefined ? { proxyUrl: secret.proxyUrl } : {}),
    },
  };
}
