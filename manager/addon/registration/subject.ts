/**
 * The addon agent's identity on the hub, as OCM defines it.
 *
 * Defaults from addon-framework v1.3 (`pkg/agent/interface.go` DefaultUser /
 * DefaultGroups): two groups. The v1alpha1 CRD description still lists
 * `system:authenticated` as a third, which addon-framework dropped as
 * deprecated (its DefaultCSRApprover accepts 2 or 3 organizations for
 * backward compatibility); every authenticated user gets that group from the
 * kube-apiserver anyway, so asking for it in the certificate adds nothing.
 */

export const kubeApiserverClientSigner = 'kubernetes.io/kube-apiserver-client';
export const clusterNameLabel = 'open-cluster-management.io/cluster-name';
export const addonNameLabel = 'open-cluster-management.io/addon-name';
/** The prefix of every OCM identity (ocm pkg/registration/hub/user/identity.go). */
export const ocmSubjectPrefix = 'system:open-cluster-management:';

/** The agent name inside the subject (the same as addon.ts registrationSubject's default). */
export const defaultAgentName = 'addon-agent';

export interface Subject {
  user: string;
  groups: string[];
}

export function addonAgentSubject(cluster: string, addon: string, agent = defaultAgentName): Subject {
  return {
    user: `${ocmSubjectPrefix}cluster:${cluster}:addon:${addon}:agent:${agent}`,
    groups: [`${ocmSubjectPrefix}cluster:${cluster}:addon:${addon}`, `${ocmSubjectPrefix}addon:${addon}`],
  };
}

/**
 * The group every credential of the cluster's klusterlet registration agent
 * carries: its certificate's organizations are `system:open-cluster-management:<cluster>`
 * and `system:open-cluster-management:managed-clusters`, its user
 * `system:open-cluster-management:<cluster>:<agent-id>` (ocm
 * pkg/registration/register/csr/csr.go). That agent is the one that creates an
 * addon's CSRs.
 */
export function registrationAgentGroup(cluster: string): string {
  return `${ocmSubjectPrefix}${cluster}`;
}

/** The agent's hub Role and RoleBinding in the cluster namespace. */
export function hubPermissionName(addon: string): string {
  return `open-cluster-management:${addon}:agent`;
}
