/**
 * mergeCluster: one ClusterTarget from everything known about a cluster
 * name. Pure, so the precedence rules are tested in one place:
 *
 * - Existence: a cluster exists when it has a credential Secret (as in the
 *   original, which enumerates Secrets) or a connected agent tunnel. A
 *   ManagedCluster alone is not a ClusterGateway: without credentials it
 *   cannot be proxied, and listing it would change what KubeVela sees.
 * - Trust: a ManagedCluster counts only once the hub accepted it and it
 *   joined (managedcluster-source.ts); an untrusted one contributes nothing.
 * - Endpoint: a cluster opts in to its agent's tunnel with the Secret label
 *   `cluster.core.oam.dev/cluster-endpoint-type: ClusterProxy` (the Go
 *   original's term), or by having no Secret at all; then the connected
 *   tunnel is its endpoint, and without a tunnel it has none (a 503 at once,
 *   never a direct dial). The Secret also picks the trust model: with a
 *   credential, hub-credential (TLS inside the tunnel verified against the
 *   Secret's `ca.crt`, else the trusted ManagedCluster's CA); with no
 *   credential-type label and no credential data, or no Secret at all,
 *   no-credential (the agent adds its own credential and impersonates the
 *   caller). A tunnel of a cluster whose
 *   Secret is Const (the default) is not used: the agent connects everywhere,
 *   and routing changes only when the admin asks. Then the Secret's own `endpoint`
 *   when it names one: the Secret is written by the hub admin in the
 *   credential namespace, while a ManagedCluster's spec may be rewritten
 *   by the spoke's registration agent, so the admin's word wins and the
 *   ManagedCluster's URL *and CA* are ignored. Only a Secret without
 *   `endpoint` (the OCM layout: a token only) takes the trusted
 *   ManagedCluster's https URL; its CA is the Secret's `ca.crt` when there
 *   is one (an admin's pin, so a rewritten URL with a CA of the writer's
 *   choosing fails verification), else the ManagedCluster's, else the
 *   system trust store. No endpoint at all is a problem, and the proxy then
 *   never sends the credential anywhere. The Secret's proxy-url applies to
 *   both.
 * - TLS: a missing CA means the system trust store (Node's default roots,
 *   plus NODE_EXTRA_CA_CERTS, or the OS store with --use-system-ca). Skipping verification
 *   (the original's behaviour for a Secret without a CA) needs the
 *   --insecure-skip-tls-verify-when-no-ca flag, and then shows as
 *   `insecure: true` on the object.
 * - Credential: only ever from the Secret.
 * - Health: resolveHealth (clusters/health-precedence.ts): an operator's unhealthy
 *   mark (status annotations on the Secret, else on the ManagedCluster,
 *   written by the health subresource) wins until cleared; then the
 *   prober's overlay; then the mark; then the ManagedCluster's Available
 *   condition, else unhealthy (the original's default). A
 *   certificate failure of a Secret without a CA says so, and how to fix it.
 * - Offline: from the same mark, probe and tunnel, why the gateway knows the
 *   cluster to be offline (clusters/offline-causes.ts), for the ClusterOffline 503.
 * - Labels and annotations: the ManagedCluster's, overridden by the Secret's.
 *   The ManagedCluster's were screened (managedcluster-source.ts): its
 *   klusterlet may write them, so a proxy configuration or prober verdict
 *   that could send identities elsewhere or pass for the gateway's own is
 *   not among them. A proxy configuration annotation on the Secret (the hub
 *   admin's) also replaces the ManagedCluster's, whichever of the two keys
 *   either uses: a managed cluster must not be able to add the second key
 *   beside the admin's and so turn the admin's configuration into a
 *   conflict. What was ignored is shown in annotationIgnoredSettings,
 *   which only the merge writes.
 */

import {
  CONFIGURATION_REFERENCE_ANNOTATION,
  INLINE_CONFIGURATION_ANNOTATION,
} from '../identity/configuration.ts';
import type { ClusterHealth, ClusterTarget, Endpoint, TunnelEndpoint } from './cluster.ts';
import { connectionKey } from './connection-key.ts';
import { healthFromAnnotations, resolveHealth } from './health-precedence.ts';
import { annotationIgnoredSettings } from './keys.ts';
import type { ManagedClusterInfo } from './managedcluster-source.ts';
import { offlineCauses } from './offline-causes.ts';
import type { SecretClusterInfo } from './secret-source.ts';

export interface TunnelInput {
  endpoint: TunnelEndpoint;
  /** Increases with every new tunnel of this cluster (see connectionKey). */
  generation: number;
  connectedAt: string;
  /** The gateway replica holding the tunnel. */
  replica?: string;
}

export interface ClusterInputs {
  name: string;
  secret?: SecretClusterInfo;
  managed?: ManagedClusterInfo;
  tunnel?: TunnelInput;
  /** This replica's prober verdict, for a cluster with no hub object to record it on (registry.setHealth). */
  health?: ClusterHealth;
}

export type MergedCluster = Omit<ClusterTarget, 'resourceVersion'>;

/** Gateway-wide settings that change how clusters are merged. */
export interface MergePolicy {
  /** --insecure-skip-tls-verify-when-no-ca: a Secret endpoint without a CA skips TLS verification. */
  insecureSkipTlsVerifyWhenNoCa?: boolean;
  /** A health prober runs: until it has probed a cluster, its health is unknown, not unhealthy. */
  probing?: boolean;
}

export const insecureWhenNoCaFlag = '--insecure-skip-tls-verify-when-no-ca';

export function mergeCluster(inputs: ClusterInputs, policy: MergePolicy = {}): MergedCluster | undefined {
  const { name, secret, tunnel } = inputs;
  if (!secret && !tunnel) return undefined;
  const managed = inputs.managed?.distrust ? undefined : inputs.managed;

  const { endpoint, problem: endpointProblem, systemTrust } = resolveEndpoint(inputs, policy);
  const problems: string[] = [];
  if (endpointProblem) problems.push(endpointProblem);
  // Without a Secret the cluster exists only through its tunnel: the no-credential model, no problem.
  if (secret?.credentialProblem) problems.push(secret.credentialProblem);

  const credential = secret?.credential;
  // The prober's verdict as recorded on the Secret (or the ManagedCluster) by whichever replica
  // probes, else this replica's own (a cluster with neither object); ignored with the prober off, so
  // a verdict left from when it ran does not linger.
  const probe = policy.probing ? (inputs.health ?? secret?.probe ?? managed?.probe) : inputs.health;
  const mark = secret?.health ?? healthFromAnnotations(managed?.annotations);
  // Precedence (an operator's unhealthy mark wins over the prober): clusters/health-precedence.ts.
  const health = explainHealth(
    resolveHealth({
      mark,
      probe,
      condition: managed?.health,
      probePending: policy.probing === true && !probe,
    }),
    systemTrust,
  );
  // What the gateway knows to be offline, answered at once with a ClusterOffline cause: offline-causes.ts.
  const offline = offlineCauses({
    mark,
    probe,
    health,
    tunnelDown: !tunnel && secret?.endpointType === 'ClusterProxy' && !secret.endpointTypeProblem,
  });
  const merged: MergedCluster = {
    name,
    labels: { ...managed?.labels, ...secret?.labels },
    annotations: mergeAnnotations(managed, secret),
    creationTimestamp: secret?.creationTimestamp || managed?.creationTimestamp || tunnel?.connectedAt || '',
    health,
    connectionKey: connectionKey(endpoint, credential, tunnel?.generation),
  };
  if (endpoint) merged.endpoint = endpoint;
  if (credential) merged.credential = credential;
  if (offline.length) merged.offline = offline;
  if (tunnel) {
    merged.tunnel = {
      connected: true,
      since: tunnel.connectedAt,
      ...(tunnel.replica ? { replica: tunnel.replica } : {}),
    };
  } else if (secret?.endpointType === 'ClusterProxy') {
    merged.tunnel = { connected: false };
  }
  if (problems.length) merged.problem = problems.join('; ');
  return merged;
}

const configurationKeys = [INLINE_CONFIGURATION_ANNOTATION, CONFIGURATION_REFERENCE_ANNOTATION];

function mergeAnnotations(
  managed: ManagedClusterInfo | undefined,
  secret: SecretClusterInfo | undefined,
): Record<string, string> {
  const fromManaged = { ...managed?.annotations };
  const ignored = [...(managed?.ignoredSettings ?? [])];
  const secretConfiguration = configurationKeys.find((key) => secret?.annotations[key] !== undefined);
  if (secretConfiguration) {
    for (const key of configurationKeys) {
      if (fromManaged[key] === undefined) continue;
      delete fromManaged[key];
      ignored.push(
        `annotation ${key} on ManagedCluster ${JSON.stringify(managed?.name ?? '')} is not used: the credential Secret's annotation ${secretConfiguration} applies`,
      );
    }
  }
  const merged: Record<string, string> = { ...fromManaged, ...secret?.annotations };
  // Only the merge says what it ignored: a copy on either source object is not believed.
  delete merged[annotationIgnoredSettings];
  if (ignored.length) merged[annotationIgnoredSettings] = ignored.join('; ');
  return merged;
}

interface ResolvedEndpoint {
  endpoint?: Endpoint;
  problem?: string;
  /** Set when a Secret's https endpoint has no CA and is verified against the system trust store. */
  systemTrust?: string;
}

function resolveEndpoint({ secret, managed, tunnel }: ClusterInputs, policy: MergePolicy): ResolvedEndpoint {
  if (secret?.endpointTypeProblem) return { problem: secret.endpointTypeProblem };
  if (tunnel && (!secret || secret.endpointType === 'ClusterProxy')) {
    // No Secret, or a ClusterProxy Secret without a credential: the agent adds its own and
    // impersonates the caller; the gateway runs no TLS of its own inside the stream.
    if (!secret || secret.noCredential) {
      return { endpoint: { ...tunnel.endpoint, trustModel: 'no-credential' } };
    }
    if (secret.caProblem) return { problem: secret.caProblem };
    const caBundle = secret.caBundle ?? (managed?.distrust ? undefined : managed?.caBundle);
    return {
      endpoint: {
        ...tunnel.endpoint,
        trustModel: 'hub-credential',
        ...(caBundle !== undefined ? { caBundle } : {}),
      },
    };
  }
  if (secret?.endpointType === 'ClusterProxy') {
    return { problem: 'endpoint type is ClusterProxy but no agent tunnel is connected for this cluster' };
  }

  const problems: string[] = [];
  let address: string | undefined;
  let caBundle: string | undefined;
  let insecure = false;
  let systemTrust: string | undefined;
  if (secret?.endpointGiven) {
    if (secret.address) address = secret.address;
    else problems.push(secret.addressProblem ?? 'data key endpoint is not usable');
    caBundle = secret.caBundle;
    if (secret.caProblem) problems.push(secret.caProblem);
    else if (caBundle === undefined && address?.toLowerCase().startsWith('https://')) {
      if (policy.insecureSkipTlsVerifyWhenNoCa) insecure = true;
      else
        systemTrust = `no ca.crt in Secret ${secret.namespace}/${secret.name}: verified against the system trust store`;
    }
  } else if (managed?.address && !managed.distrust) {
    address = managed.address;
    // The admin's CA pins the cluster even when its address comes from the ManagedCluster.
    caBundle = secret?.caBundle ?? managed.caBundle;
    if (secret?.caProblem) problems.push(secret.caProblem);
  } else {
    const why = managed?.distrust ?? managed?.addressProblem;
    problems.push(
      why
        ? `no endpoint: data key endpoint is missing in the Secret and ${withArticle(why)}`
        : (secret?.addressProblem ?? 'data key endpoint is missing'),
    );
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
    ...(systemTrust ? { systemTrust } : {}),
  };
}

/** "ManagedCluster is not accepted…" reads as "… and the ManagedCluster is not accepted…". */
function withArticle(text: string): string {
  return text.startsWith('ManagedCluster') ? `the ${text}` : text;
}

// OpenSSL's and Node's wording for a certificate the client refused.
const certificateFailure =
  /self[- ]signed certificate|unable to (verify the first certificate|get (local )?issuer certificate)|certificate (has expired|is not yet valid|signature failure|not trusted|rejected)|does not match certificate's altnames|unsuitable certificate purpose/i;

/**
 * A Secret endpoint without a CA that fails certificate verification: say
 * that no CA was given, which store was used, and the two ways out.
 */
function explainHealth(health: ClusterHealth, systemTrust: string | undefined): ClusterHealth {
  if (!systemTrust || health.healthy || !health.reason || !certificateFailure.test(health.reason)) {
    return health;
  }
  return {
    healthy: false,
    reason: `${systemTrust}: ${health.reason}; add the cluster's CA to the Secret as ca.crt, or start the gateway with ${insecureWhenNoCaFlag} to skip verification as the original did`,
  };
}
