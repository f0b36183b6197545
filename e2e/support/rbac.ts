/**
 * Hub RBAC for e2e tests: a ClusterRole and a ClusterRoleBinding of the same
 * name, so that a test grants exactly what it needs and takes it back after.
 */
import type { KubeClient } from '../../shared/kube/client.ts';

const rbac = '/apis/rbac.authorization.k8s.io/v1';

export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
  verbs: string[];
}

export type Subject =
  | { apiGroup: 'rbac.authorization.k8s.io'; kind: 'User' | 'Group'; name: string }
  | { kind: 'ServiceAccount'; name: string; namespace: string };

export const hubUser = (name: string): Subject => ({
  apiGroup: 'rbac.authorization.k8s.io',
  kind: 'User',
  name,
});
export const hubGroup = (name: string): Subject => ({
  apiGroup: 'rbac.authorization.k8s.io',
  kind: 'Group',
  name,
});
export const serviceAccount = (namespace: string, name: string): Subject => ({
  kind: 'ServiceAccount',
  name,
  namespace,
});

/**
 * Applies ClusterRole `name` with `rules` and binds it to `subjects` (a
 * ClusterRoleBinding also called `name`). Undo with revokeOnHub, which an
 * after hook can call whether or not the grant got this far.
 */
export async function grantOnHub(
  hub: KubeClient,
  name: string,
  subjects: Subject[],
  rules: PolicyRule[],
): Promise<void> {
  await hub.apply(
    `${rbac}/clusterroles/${name}`,
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name }, rules },
    'e2e',
  );
  await hub.apply(
    `${rbac}/clusterrolebindings/${name}`,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects,
    },
    'e2e',
  );
}

/** Deletes the ClusterRoleBinding and ClusterRole `name`; either may already be gone. */
export async function revokeOnHub(hub: KubeClient, name: string): Promise<void> {
  await hub.delete(`${rbac}/clusterrolebindings/${name}`);
  await hub.delete(`${rbac}/clusterroles/${name}`);
}

/**
 * Applies Role `name` with `rules` in `namespace` and binds it to `subjects`
 * (a RoleBinding also called `name`), on any cluster: permissions limited to
 * one namespace. Deleting the namespace takes both away.
 */
export async function grantInNamespace(
  client: KubeClient,
  namespace: string,
  name: string,
  subjects: Subject[],
  rules: PolicyRule[],
): Promise<void> {
  await client.apply(
    `${rbac}/namespaces/${namespace}/roles/${name}`,
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name, namespace }, rules },
    'e2e',
  );
  await client.apply(
    `${rbac}/namespaces/${namespace}/rolebindings/${name}`,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name, namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects,
    },
    'e2e',
  );
}
