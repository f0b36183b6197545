/**
 * Names, labels and API paths of everything the manager makes for the
 * gateway. Cluster-scoped and cross-namespace RBAC names carry a suffix
 * (`<gateway>:gateway`, `<gateway>:auth-reader`, ...) so they never collide
 * with a gateway someone installed by hand under the plain name (the local
 * environment's own gateway is one).
 */
import type { KubeObject } from '../../../shared/kube/client.ts';

/** The aggregated API the gateway serves. */
export const apiGroup = 'cluster.core.oam.dev';
export const apiVersion = 'v1alpha1';
export const apiServiceName = `${apiVersion}.${apiGroup}`;
export const apiServicePath = `/apis/apiregistration.k8s.io/v1/apiservices/${apiServiceName}`;

/** Field manager of every write of the gateway controller. */
export const gatewayFieldManager = 'cluster-gateway-addon-manager-gateway';

const managedBy = 'cluster-gateway-addon-manager';
/** Every object of the gateway carries these; the controller's informers select on them. */
export const gatewayObjectLabels = {
  'app.kubernetes.io/component': 'gateway',
  'app.kubernetes.io/managed-by': managedBy,
  'app.kubernetes.io/part-of': 'cluster-gateway',
} as const;
export const gatewayLabelSelector = `app.kubernetes.io/component=gateway,app.kubernetes.io/managed-by=${managedBy}`;

/** Where the gateway container finds its serving certificate. */
export const servingCertificateDir = '/etc/cluster-gateway/tls';

/**
 * The entry of the TLS Secret (and the file next to the serving certificate) holding the key the
 * replicas sign prober verdicts on ManagedClusters with (the gateway's --probe-verdict-key-file).
 */
export const verdictKeyFile = 'verdict.key';

/**
 * The port on which replicas forward agent-tunnel streams to the replica holding the tunnel (mutual
 * TLS, tunnel/peers.ts). Pod to pod only: no Service exposes it.
 */
export const tunnelPeerPort = 9444;

export interface GatewayNames {
  namespace: string;
  /** Deployment, Service, ServiceAccount, PodDisruptionBudget. */
  name: string;
  /** The CA, the serving certificate and the verdict key (the pod mounts the serving pair and the verdict key, never the CA key). */
  tlsSecret: string;
  credentialNamespace: string;
  /** ClusterRole and ClusterRoleBinding: clusters, proxy configurations. */
  clusterRole: string;
  /** ClusterRoleBinding to system:auth-delegator: TokenReviews and SubjectAccessReviews. */
  authDelegator: string;
  /** RoleBinding in kube-system to extension-apiserver-authentication-reader. */
  authReader: string;
  /** Role and RoleBinding in the credential namespace. */
  credentials: string;
  /** Role and RoleBinding in the gateway's namespace: the per-cluster tunnel Leases (tunnel/leases.ts). */
  tunnelLeases: string;
  /** Pod labels the Deployment, Service and PodDisruptionBudget select on. */
  podSelector: Record<string, string>;
}

export function gatewayNames(namespace: string, name: string, credentialNamespace: string): GatewayNames {
  return {
    namespace,
    name,
    tlsSecret: `${name}-tls`,
    credentialNamespace,
    clusterRole: `${name}:gateway`,
    authDelegator: `${name}:auth-delegator`,
    authReader: `${name}:auth-reader`,
    credentials: `${name}:credentials`,
    tunnelLeases: `${name}:tunnel-leases`,
    podSelector: { 'app.kubernetes.io/name': name, 'app.kubernetes.io/component': 'gateway' },
  };
}

const kinds: Record<string, { prefix: string; plural: string }> = {
  ServiceAccount: { prefix: '/api/v1', plural: 'serviceaccounts' },
  Service: { prefix: '/api/v1', plural: 'services' },
  Secret: { prefix: '/api/v1', plural: 'secrets' },
  Deployment: { prefix: '/apis/apps/v1', plural: 'deployments' },
  PodDisruptionBudget: { prefix: '/apis/policy/v1', plural: 'poddisruptionbudgets' },
  ClusterRole: { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'clusterroles' },
  ClusterRoleBinding: { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'clusterrolebindings' },
  Role: { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'roles' },
  RoleBinding: { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'rolebindings' },
  APIService: { prefix: '/apis/apiregistration.k8s.io/v1', plural: 'apiservices' },
};

/** Collection path of `kind`, in `namespace` if given (informers list it; creates post to it). */
export function collectionPath(kind: string, namespace?: string): string {
  const k = kinds[kind];
  if (!k) throw new Error(`no API path known for kind ${kind}`);
  return `${k.prefix}${namespace ? `/namespaces/${namespace}` : ''}/${k.plural}`;
}

/** The object's own path (GET, apply, DELETE). */
export function objectPath(obj: Pick<KubeObject, 'kind' | 'metadata'>): string {
  return `${collectionPath(obj.kind ?? '', obj.metadata?.namespace)}/${obj.metadata?.name ?? ''}`;
}
