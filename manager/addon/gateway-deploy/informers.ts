/**
 * The watches that let the gateway controller repair drift within seconds:
 * one informer per kind it writes, each narrowed to the gateway's objects
 * (its labels, or its one name where RBAC grants read by name only: the
 * Secret with the CA key, the APIService, the owner ClusterRole). Started
 * by every replica with the manager's other informers, so a standby that
 * takes over has a warm cache.
 */
import type { KubeObject } from '../../../shared/kube/client.ts';
import { Informer, type InformerClient, type InformerOptions } from '../../../shared/kube/informer.ts';
import { apiServiceName, collectionPath, type GatewayNames, gatewayLabelSelector } from './names.ts';

export interface GatewayInformers {
  deployments: Informer<KubeObject>;
  services: Informer<KubeObject>;
  podDisruptionBudgets: Informer<KubeObject>;
  serviceAccounts: Informer<KubeObject>;
  secrets: Informer<KubeObject>;
  clusterRoles: Informer<KubeObject>;
  clusterRoleBindings: Informer<KubeObject>;
  /** Roles and RoleBindings live in the credential namespace and kube-system: watched across namespaces. */
  roles: Informer<KubeObject>;
  roleBindings: Informer<KubeObject>;
  apiServices: Informer<KubeObject>;
  /** The --owner-cluster-role (absent when none is configured). */
  owner?: Informer<KubeObject>;
}

/** Which informer holds objects of `kind`. */
export const informerOfKind = {
  Deployment: 'deployments',
  Service: 'services',
  PodDisruptionBudget: 'podDisruptionBudgets',
  ServiceAccount: 'serviceAccounts',
  Secret: 'secrets',
  ClusterRole: 'clusterRoles',
  ClusterRoleBinding: 'clusterRoleBindings',
  Role: 'roles',
  RoleBinding: 'roleBindings',
  APIService: 'apiServices',
} as const satisfies Record<string, keyof GatewayInformers>;

export function gatewayInformers(
  hub: InformerClient,
  names: GatewayNames,
  ownerClusterRole: string,
  common: Pick<InformerOptions, 'onError'> = {},
): GatewayInformers {
  const labelled = (kind: string, namespace?: string) =>
    new Informer<KubeObject>(hub, {
      path: collectionPath(kind, namespace),
      labelSelector: gatewayLabelSelector,
      ...common,
    });
  const named = (kind: string, name: string, namespace?: string) =>
    new Informer<KubeObject>(hub, {
      path: collectionPath(kind, namespace),
      fieldSelector: `metadata.name=${name}`,
      ...common,
    });
  return {
    deployments: labelled('Deployment', names.namespace),
    services: labelled('Service', names.namespace),
    podDisruptionBudgets: labelled('PodDisruptionBudget', names.namespace),
    serviceAccounts: labelled('ServiceAccount', names.namespace),
    secrets: named('Secret', names.tlsSecret, names.namespace),
    clusterRoles: labelled('ClusterRole'),
    clusterRoleBindings: labelled('ClusterRoleBinding'),
    roles: labelled('Role'),
    roleBindings: labelled('RoleBinding'),
    apiServices: named('APIService', apiServiceName),
    ...(ownerClusterRole ? { owner: named('ClusterRole', ownerClusterRole) } : {}),
  };
}

export function allInformers(informers: GatewayInformers): Informer<KubeObject>[] {
  return Object.values(informers).filter((i): i is Informer<KubeObject> => i !== undefined);
}
