/**
 * What the addon agent may do on the hub, as objects in the cluster namespace
 * owned by the ManagedClusterAddOn (disable the addon and the garbage collector
 * removes them): a Role and RoleBinding for the agent's registered identity,
 * and the heartbeat Lease it renews.
 *
 * Least privilege: get/update/patch on that one Lease, by name. No create:
 * the manager creates the Lease, so a compromised agent cannot litter the
 * cluster namespace; no list/watch: the agent knows the name.
 *
 * The tunnel: `create` on `clustergateways/attach` for the agent's own cluster
 * name only. ClusterGateways are cluster-scoped, so this takes a ClusterRole and
 * a ClusterRoleBinding per cluster (a RoleBinding cannot grant cluster-scoped
 * resources). A cluster-scoped object cannot be owned by the namespaced
 * ManagedClusterAddOn, so both are owned by the ClusterManagementAddOn (gone
 * with the addon) and deleted by the registration controller when the
 * cluster's ManagedClusterAddOn goes (addon disabled for that cluster).
 *
 * The cluster's credential Secret (only when the AddOnDeploymentConfig picks a
 * trust model for the tunnel, agent/hub-credential.ts): get, create and patch
 * on the Secret named after the cluster in the gateway's credential namespace,
 * by name (the agent writes it by server-side apply, whose create is
 * authorized with the name, so `resourceNames` holds for it too). A Role and
 * RoleBinding there, owned by the ClusterManagementAddOn (an owner in another
 * namespace is not possible) and deleted, with the Secret, when the cluster's
 * ManagedClusterAddOn goes.
 */
import type { KubeObject } from '../../../shared/kube/client.ts';
import {
  tunnelGroup,
  tunnelResource,
  tunnelSubresource,
  tunnelVerb,
} from '../../../shared/tunnel/protocol.ts';
import { hubHeartbeatLeaseName } from '../core/addon.ts';
import { hubPermissionName, type Subject } from './subject.ts';

export interface OwnerAddon {
  apiVersion: string;
  name: string;
  namespace: string;
  uid: string;
}

export function ownerReference(addon: OwnerAddon) {
  return {
    apiVersion: addon.apiVersion,
    kind: 'ManagedClusterAddOn',
    name: addon.name,
    uid: addon.uid,
  };
}

/** An object of the agent's in the cluster namespace, owned by the ManagedClusterAddOn (gone with it). */
function clusterNamespaceMetadata(addon: OwnerAddon, name: string) {
  return {
    name,
    namespace: addon.namespace,
    labels: { 'open-cluster-management.io/addon-name': addon.name },
    ownerReferences: [ownerReference(addon)],
  };
}

export function agentHubRole(addon: OwnerAddon): KubeObject {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: clusterNamespaceMetadata(addon, hubPermissionName(addon.name)),
    rules: [
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: [hubHeartbeatLeaseName(addon.name)],
        verbs: ['get', 'update', 'patch'],
      },
    ],
  };
}

/** Binds the Role to the registered user and groups, as addon-framework's BindKubeClientRole does. */
export function agentHubRoleBinding(addon: OwnerAddon, subject: Subject): KubeObject {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: clusterNamespaceMetadata(addon, hubPermissionName(addon.name)),
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: hubPermissionName(addon.name) },
    // The user alone would do; the per-cluster addon group is bound too, as
    // OCM does (system:authenticated never is: that would be everyone).
    subjects: [
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: subject.user },
      ...subject.groups
        .filter((g) => g !== 'system:authenticated' && g.includes(`:cluster:${addon.namespace}:`))
        .map((name) => ({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name })),
    ],
  };
}

/**
 * The heartbeat Lease as the manager creates it: no renewTime, so "never
 * renewed" is visible as such (the availability controller reports it as waiting
 * for the agent's first heartbeat, not as a stale one).
 */
export function agentHubLease(addon: OwnerAddon, subject: Subject, leaseDurationSeconds: number): KubeObject {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: clusterNamespaceMetadata(addon, hubHeartbeatLeaseName(addon.name)),
    spec: { holderIdentity: subject.user, leaseDurationSeconds },
  };
}

/** The ClusterManagementAddOn, owner of the cluster-scoped tunnel permissions. */
export interface ClusterOwner {
  apiVersion: string;
  name: string;
  uid: string;
}

/** ClusterRole and ClusterRoleBinding name of a cluster's attach permission. */
export function attachPermissionName(addon: string, cluster: string): string {
  return `open-cluster-management:${addon}:agent:${cluster}:attach`;
}

function clusterScopedMetadata(addon: OwnerAddon, owner: ClusterOwner | undefined) {
  return {
    name: attachPermissionName(addon.name, addon.namespace),
    labels: {
      'open-cluster-management.io/addon-name': addon.name,
      'open-cluster-management.io/cluster-name': addon.namespace,
    },
    ...(owner
      ? {
          ownerReferences: [
            {
              apiVersion: owner.apiVersion,
              kind: 'ClusterManagementAddOn',
              name: owner.name,
              uid: owner.uid,
            },
          ],
        }
      : {}),
  };
}

/** `create clustergateways/attach` on the cluster's own name: the agent's tunnel, and nothing else. */
export function agentAttachClusterRole(addon: OwnerAddon, owner?: ClusterOwner): KubeObject {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: clusterScopedMetadata(addon, owner),
    rules: [
      {
        apiGroups: [tunnelGroup],
        resources: [`${tunnelResource}/${tunnelSubresource}`],
        resourceNames: [addon.namespace],
        verbs: [tunnelVerb],
      },
    ],
  };
}

/** Binds the attach ClusterRole to the cluster's agent: its user and its per-cluster addon group. */
export function agentAttachClusterRoleBinding(
  addon: OwnerAddon,
  subject: Subject,
  owner?: ClusterOwner,
): KubeObject {
  const name = attachPermissionName(addon.name, addon.namespace);
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: clusterScopedMetadata(addon, owner),
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
    subjects: (agentHubRoleBinding(addon, subject) as { subjects: unknown[] }).subjects,
  };
}

/** Role and RoleBinding name, in the credential namespace, of a cluster's credential Secret grant. */
export function credentialPermissionName(addon: string, cluster: string): string {
  return `open-cluster-management:${addon}:agent:${cluster}:credential`;
}

function credentialMetadata(addon: OwnerAddon, credentialNamespace: string, owner: ClusterOwner | undefined) {
  const { name: _name, ...rest } = clusterScopedMetadata(addon, owner);
  return {
    name: credentialPermissionName(addon.name, addon.namespace),
    namespace: credentialNamespace,
    ...rest,
  };
}

/** get/create/patch on the one Secret named after the cluster, in the gateway's credential namespace. */
export function agentCredentialRole(
  addon: OwnerAddon,
  credentialNamespace: string,
  owner?: ClusterOwner,
): KubeObject {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: credentialMetadata(addon, credentialNamespace, owner),
    rules: [
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: [addon.namespace],
        verbs: ['get', 'create', 'patch'],
      },
    ],
  };
}

export function agentCredentialRoleBinding(
  addon: OwnerAddon,
  subject: Subject,
  credentialNamespace: string,
  owner?: ClusterOwner,
): KubeObject {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: credentialMetadata(addon, credentialNamespace, owner),
    roleRef: {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: credentialPermissionName(addon.name, addon.namespace),
    },
    subjects: (agentHubRoleBinding(addon, subject) as { subjects: unknown[] }).subjects,
  };
}
