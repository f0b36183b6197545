/**
 * ClusterTarget -> ClusterGateway API object, in the Go original's JSON
 * shape (clustergateway_types.go), minus every secret.
 *
 * The original returns spec.access.credential.serviceAccountToken and
 * x509.{certificate,privateKey} in plain text to anyone allowed to get
 * clustergateways. Here credential carries only its type: the only
 * material that can appear is the endpoint's CA bundle, which is public.
 * A proxy-url password is redacted.
 */
import type { ClusterTarget, EndpointType } from '../clusters/cluster.ts';
import { labelCredentialType, labelEndpointType } from '../clusters/keys.ts';
import { publicAnnotations } from '../clusters/metadata.ts';
import { redactUrlPassword } from '../clusters/parse-util.ts';
import { groupVersion, kind, listKind } from './names.ts';
import { uidFromName } from './uid.ts';

export interface ObjectMeta {
  name: string;
  uid: string;
  resourceVersion: string;
  creationTimestamp: string | null;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface ClusterGatewayConstEndpoint {
  address: string;
  /** base64 of the PEM bundle, as Go encodes []byte. */
  caBundle?: string;
  insecure?: boolean;
  'proxy-url'?: string;
}

export interface ClusterGateway {
  apiVersion: typeof groupVersion;
  kind: typeof kind;
  metadata: ObjectMeta;
  spec: {
    provider: string;
    access: {
      endpoint: { type: EndpointType; const?: ClusterGatewayConstEndpoint };
      credential?: { type: string };
    };
  };
  status: {
    healthy: boolean;
    healthyReason?: string;
    tunnel?: { connected: boolean; connectedSince?: string; replica?: string };
  };
}

export interface ClusterGatewayList {
  apiVersion: typeof groupVersion;
  kind: typeof listKind;
  metadata: { resourceVersion: string };
  items: ClusterGateway[];
}

export function renderMetadata(cluster: ClusterTarget): ObjectMeta {
  const metadata: ObjectMeta = {
    name: cluster.name,
    uid: uidFromName(cluster.name),
    resourceVersion: cluster.resourceVersion,
    creationTimestamp: cluster.creationTimestamp || null,
  };
  if (Object.keys(cluster.labels).length) metadata.labels = { ...cluster.labels };
  const annotations = publicAnnotations(cluster.annotations);
  if (Object.keys(annotations).length) metadata.annotations = annotations;
  return metadata;
}

export function renderClusterGateway(cluster: ClusterTarget): ClusterGateway {
  const endpoint = cluster.endpoint;
  const declared = cluster.labels[labelEndpointType];
  const endpointType: EndpointType =
    endpoint?.type ?? (declared === 'ClusterProxy' ? 'ClusterProxy' : 'Const');
  const rendered: ClusterGateway['spec']['access']['endpoint'] = { type: endpointType };
  if (endpoint?.type === 'Const') {
    const constEndpoint: ClusterGatewayConstEndpoint = { address: endpoint.address };
    // Like the original: insecure appears only when set, caBundle only when present.
    if (endpoint.caBundle) constEndpoint.caBundle = Buffer.from(endpoint.caBundle).toString('base64');
    if (endpoint.insecure) constEndpoint.insecure = true;
    if (endpoint.proxyUrl) constEndpoint['proxy-url'] = redactUrlPassword(endpoint.proxyUrl);
    rendered.const = constEndpoint;
  }

  const gateway: ClusterGateway = {
    apiVersion: groupVersion,
    kind,
    metadata: renderMetadata(cluster),
    // provider is never filled by the original either.
    spec: { provider: '', access: { endpoint: rendered } },
    status: { healthy: cluster.problem ? false : cluster.health.healthy },
  };
  const credentialType = cluster.credential?.type ?? cluster.labels[labelCredentialType];
  if (credentialType) gateway.spec.access.credential = { type: credentialType };
  // A cluster that cannot be proxied says why, where users look first.
  const reason = cluster.problem ?? cluster.health.reason;
  if (reason) gateway.status.healthyReason = reason;
  if (cluster.tunnel) {
    const { connected, since, replica } = cluster.tunnel;
    gateway.status.tunnel = {
      connected,
      ...(since ? { connectedSince: since } : {}),
      ...(replica ? { replica } : {}),
    };
  }
  return gateway;
}

export function renderClusterGatewayList(
  clusters: ClusterTarget[],
  resourceVersion: string,
): ClusterGatewayList {
  return {
    apiVersion: groupVersion,
    kind: listKind,
    metadata: { resourceVersion },
    items: clusters.map(renderClusterGateway),
  };
}
