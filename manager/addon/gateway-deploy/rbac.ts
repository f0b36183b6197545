/**
 * What the gateway may do on the hub, as pure builders. Each rule names the
 * code that needs it (manager/gateway/...). The manager holds every
 * permission it grants here (RBAC refuses to let it grant more), and
 * `bind` on the two roles Kubernetes ships for aggregated API servers.
 */
import type { KubeObject } from '../../../shared/kube/client.ts';
import type { GatewayNames } from './names.ts';
import { labelsOf } from './workload.ts';

const rbacApi = 'rbac.authorization.k8s.io/v1';
const rbacGroup = 'rbac.authorization.k8s.io';

export function gatewayRbac(names: GatewayNames): KubeObject[] {
  const labels = labelsOf(names);
  const subjects = [{ kind: 'ServiceAccount', name: names.name, namespace: names.namespace }];
  return [
    {
      apiVersion: rbacApi,
      kind: 'ClusterRole',
      metadata: { name: names.clusterRole, labels },
      rules: [
        {
          apiGroups: ['cluster.open-cluster-management.io'],
          resources: ['managedclusters'],
          // get/list/watch: clusters/managedcluster-source.ts (OCM integration). patch: the health mark of a
          // cluster without a credential Secret (health/annotation-store.ts, a merge patch of annotations).
          verbs: ['get', 'list', 'watch', 'patch'],
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
      ],
    },
    {
      apiVersion: rbacApi,
      kind: 'ClusterRoleBinding',
      metadata: { name: names.clusterRole, labels },
      roleRef: { apiGroup: rbacGroup, kind: 'ClusterRole', name: names.clusterRole },
      subjects,
    },
    {
      apiVersion: rbacApi,
      kind: 'ClusterRoleBinding',
      metadata: { name: names.authDelegator, labels },
      // TokenReviews (auth/token-review.ts) and SubjectAccessReviews (auth/sar-authorizer.ts, tunnel/).
      roleRef: { apiGroup: rbacGroup, kind: 'ClusterRole', name: 'system:auth-delegator' },
      subjects,
    },
    {
      apiVersion: rbacApi,
      kind: 'RoleBinding',
      metadata: { name: names.authReader, namespace: 'kube-system', labels },
      // The requestheader CA and allowed names in kube-system/extension-apiserver-authentication (main.ts).
      roleRef: { apiGroup: rbacGroup, kind: 'Role', name: 'extension-apiserver-authentication-reader' },
      subjects,
    },
    {
      apiVersion: rbacApi,
      kind: 'Role',
      metadata: { name: names.credentials, namespace: names.credentialNamespace, labels },
      rules: [
        {
          apiGroups: [''],
          resources: ['secrets'],
          // get/list/watch: clusters/secret-source.ts. patch: the health mark (health/annotation-store.ts).
          // A Role: Secrets of the credential namespace only, never create/update/delete.
          verbs: ['get', 'list', 'watch', 'patch'],
        },
      ],
    },
    {
      apiVersion: rbacApi,
      kind: 'RoleBinding',
      metadata: { name: names.credentials, namespace: names.credentialNamespace, labels },
      roleRef: { apiGroup: rbacGroup, kind: 'Role', name: names.credentials },
      subjects,
    },
    {
      apiVersion: rbacApi,
      kind: 'Role',
      metadata: { name: names.tunnelLeases, namespace: names.namespace, labels },
      rules: [
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          // tunnel/leases.ts: a Lease per tunnelled cluster, written by the replica holding its tunnel and
          // watched by the others. A released Lease is emptied, never deleted: no delete.
          verbs: ['get', 'list', 'watch', 'create', 'update'],
        },
      ],
    },
    {
      apiVersion: rbacApi,
      kind: 'RoleBinding',
      metadata: { name: names.tunnelLeases, namespace: names.namespace, labels },
      roleRef: { apiGroup: rbacGroup, kind: 'Role', name: names.tunnelLeases },
      subjects,
    },
  ];
}
