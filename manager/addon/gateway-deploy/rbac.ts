/**
 * What the gateway may do on the hub: the one list of its rules, as pure
 * builders. Each rule names the code that needs it (manager/gateway/...).
 * Used by the gateway controller (the gateway it deploys) and by the local
 * environment (hack/localenv/gateway.ts, the gateway it runs), so both run
 * with the same permissions. The manager holds every permission it grants
 * here (RBAC refuses to let it grant more; charts/cluster-gateway.test.ts
 * checks the chart's ClusterRole), and `bind` on the two roles Kubernetes
 * ships for aggregated API servers.
 */
import type { KubeObject } from '../../../shared/kube/client.ts';
import type { GatewayNames } from './names.ts';

const rbacApi = 'rbac.authorization.k8s.io/v1';
const rbacGroup = 'rbac.authorization.k8s.io';

export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  resourceNames?: string[];
  verbs: string[];
}

/** Across the hub (a ClusterRole). */
export const gatewayClusterRules: PolicyRule[] = [
  {
    apiGroups: ['cluster.open-cluster-management.io'],
    resources: ['managedclusters'],
    // get/list/watch: clusters/managedcluster-source.ts (OCM integration). patch: the health mark and the
    // prober's verdict of a cluster without a credential Secret (health/annotation-store.ts, a merge patch of
    // annotations under status.cluster.core.oam.dev/). RBAC cannot narrow it to annotations nor to names
    // (every cluster); the chart's ValidatingAdmissionPolicy <release>-managedcluster-annotations holds this
    // ServiceAccount to those annotations (spec, labels and other annotations unchanged). Reviewed broad
    // grant: docs/install.md, "Permissions: the broad grants and why".
    verbs: ['get', 'list', 'watch', 'patch'],
  },
  {
    apiGroups: ['certificates.k8s.io'],
    resources: ['certificatesigningrequests'],
    // tunnel/peer-certificate.ts: each replica asks for its peer certificate with a kube-apiserver-client
    // CSR and reads it back once issued. The CSR's name is per pod, so `get` cannot be narrowed
    // (resourceNames) and create never can; a CSR holds public data only (a public key, the subject, the
    // issued certificate). Reviewed broad grant (docs/install.md).
    verbs: ['create', 'get'],
  },
  {
    apiGroups: ['gateway.cluster.core.oam.dev'],
    resources: ['clustergatewayproxyconfigurations'],
    // identity/: the identity exchange rules, watched live.
    verbs: ['get', 'list', 'watch'],
  },
  {
    apiGroups: ['gateway.cluster.core.oam.dev'],
    resources: ['clustergatewayproxyconfigurations/status'],
    // identity/object-status.ts: each configuration's validity on its status.
    verbs: ['patch'],
  },
];

/** On the Secrets of the credential namespace (a Role there). */
export const gatewayCredentialRules: PolicyRule[] = [
  {
    apiGroups: [''],
    resources: ['secrets'],
    // get/list/watch: clusters/secret-source.ts. patch: the health mark and the prober's verdict, as
    // annotations (health/annotation-store.ts).
    // A Role: Secrets of the credential namespace only, never create/update/delete. Every Secret there is a
    // cluster's credential the gateway serves, named after a cluster: not narrowable (reviewed, docs/install.md).
    verbs: ['get', 'list', 'watch', 'patch'],
  },
];

/** On the Leases of the gateway's namespace (a Role there). */
export const gatewayTunnelLeaseRules: PolicyRule[] = [
  {
    apiGroups: ['coordination.k8s.io'],
    resources: ['leases'],
    // tunnel/leases.ts: a Lease per tunnelled cluster, written by the replica holding its tunnel and
    // watched by the others (which clear the holder of one no longer renewed); health/prober-leader.ts: the
    // prober's leader election, which is also the replicas' heartbeat. A released Lease is emptied, never
    // deleted: no delete. Tunnel Lease names carry the cluster's, so RBAC cannot narrow these; the chart's
    // ValidatingAdmissionPolicy <release>-tunnel-leases lets only this ServiceAccount write tunnel and prober
    // Leases, whoever else may write Leases here (reviewed, docs/install.md).
    verbs: ['get', 'list', 'watch', 'create', 'update'],
  },
];

/** The names the RBAC objects take; the gateway's ServiceAccount is `name` in `namespace`. */
export type GatewayRbacNames = Pick<
  GatewayNames,
  | 'namespace'
  | 'name'
  | 'credentialNamespace'
  | 'clusterRole'
  | 'authDelegator'
  | 'authReader'
  | 'credentials'
  | 'tunnelLeases'
>;

/** The gateway's roles and bindings, each object carrying `labels`. */
export function gatewayRbac(names: GatewayRbacNames, labels: Record<string, string>): KubeObject[] {
  const subjects = [{ kind: 'ServiceAccount', name: names.name, namespace: names.namespace }];
  const binding = (kind: 'ClusterRoleBinding' | 'RoleBinding', metadata: object, roleRef: object) => ({
    apiVersion: rbacApi,
    kind,
    metadata: { ...metadata, labels },
    roleRef: { apiGroup: rbacGroup, ...roleRef },
    subjects,
  });
  /** A Role and the RoleBinding of the same name that grants it. */
  const role = (name: string, namespace: string, rules: PolicyRule[]) => [
    { apiVersion: rbacApi, kind: 'Role', metadata: { name, namespace, labels }, rules },
    binding('RoleBinding', { name, namespace }, { kind: 'Role', name }),
  ];
  return [
    {
      apiVersion: rbacApi,
      kind: 'ClusterRole',
      metadata: { name: names.clusterRole, labels },
      rules: gatewayClusterRules,
    },
    binding(
      'ClusterRoleBinding',
      { name: names.clusterRole },
      { kind: 'ClusterRole', name: names.clusterRole },
    ),
    // TokenReviews (auth/token-review.ts) and SubjectAccessReviews (auth/sar-authorizer.ts, tunnel/).
    binding(
      'ClusterRoleBinding',
      { name: names.authDelegator },
      { kind: 'ClusterRole', name: 'system:auth-delegator' },
    ),
    // The requestheader CA and allowed names in kube-system/extension-apiserver-authentication (main.ts).
    binding(
      'RoleBinding',
      { name: names.authReader, namespace: 'kube-system' },
      { kind: 'Role', name: 'extension-apiserver-authentication-reader' },
    ),
    ...role(names.credentials, names.credentialNamespace, gatewayCredentialRules),
    ...role(names.tunnelLeases, names.namespace, gatewayTunnelLeaseRules),
  ];
}
