/**
 * Label and annotation keys of the Go original's credential Secrets
 * (pkg/common, clustergateway_types_secret.go). They are part of the
 * wire contract: KubeVela and OCM tooling write these exact keys.
 */
export const labelCredentialType = 'cluster.core.oam.dev/cluster-credential-type';
export const labelEndpointType = 'cluster.core.oam.dev/cluster-endpoint-type';
export const annotationHealthy = 'status.cluster.core.oam.dev/healthy';
export const annotationHealthyReason = 'status.cluster.core.oam.dev/healthy-reason';
/**
 * The gateway prober's verdict, kept beside the mark on the same object so that every replica shows
 * the same health at the same resourceVersion (health/probe-store.ts writes them, one replica at a time).
 */
export const annotationProbedHealthy = 'status.cluster.core.oam.dev/probed-healthy';
export const annotationProbedReason = 'status.cluster.core.oam.dev/probed-reason';
/**
 * Set by the gateway on a ClusterGateway (never read from a source object: merge.ts removes any copy)
 * when an annotation of its ManagedCluster was not used because the managed cluster may have written
 * it (managedcluster-source.ts). Defined beside the proxy configuration annotations, whose store logs it
 * (identity/ may not import clusters/).
 */
export { IGNORED_SETTINGS_ANNOTATION as annotationIgnoredSettings } from '../identity/configuration.ts';
/**
 * HMAC of a prober verdict recorded on a ManagedCluster (health/verdict-signature.ts): a managed cluster's
 * klusterlet may rewrite its ManagedCluster's annotations, so a verdict there counts only when the
 * gateway can tell that it wrote it.
 */
export const annotationProbedSignature = 'status.cluster.core.oam.dev/probed-signature';
