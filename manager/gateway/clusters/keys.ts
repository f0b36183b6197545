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
