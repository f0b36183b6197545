/**
 * Which cluster an attaching agent may serve: the one named in its identity, never the one it asks
 * for. OCM gives every addon agent the user
 * `system:open-cluster-management:cluster:<cluster>:addon:<addon>:agent:<agent>` (its hub client
 * certificate's CN, signed for exactly that cluster by the addon's CSR approval), and the
 * kube-aggregator hands it to the gateway as the front-proxy user. An identity for cluster A asking
 * to attach as B, an identity of another addon, or any other user is refused, whatever the hub's
 * RBAC says: a grant too wide by mistake must not let one cluster's agent capture another's traffic.
 */

import type { UserInfo } from '../../../shared/identity/user.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import { tunnelResource, tunnelSubresource } from '../../../shared/tunnel/protocol.ts';

const subjectPrefix = 'system:open-cluster-management:cluster:';

export interface AgentIdentity {
  cluster: string;
  addon: string;
  agent: string;
}

/** Parses OCM's addon agent subject; undefined for any other user name. */
export function parseAddonAgentUser(user: string): AgentIdentity | undefined {
  if (!user.startsWith(subjectPrefix)) return undefined;
  // Cluster, addon and agent names are DNS labels or subdomains: none holds a colon.
  const parts = user.slice(subjectPrefix.length).split(':');
  if (parts.length !== 5 || parts[1] !== 'addon' || parts[3] !== 'agent') return undefined;
  const [cluster, , addon, , agent] = parts as [string, string, string, string, string];
  if (!cluster || !addon || !agent) return undefined;
  return { cluster, addon, agent };
}

/**
 * The identity of an agent allowed to attach as `cluster`, or a 403 StatusError that says why not
 * (the agent logs it, so the operator reading the agent's log sees the cause).
 */
export function bindAgentIdentity(user: UserInfo, cluster: string, addonName: string): AgentIdentity {
  const identity = parseAddonAgentUser(user.name);
  const refuse = (why: string) =>
    new StatusError(
      failureStatus(403, `${tunnelResource} "${cluster}" is forbidden: ${why}`, {
        group: 'cluster.core.oam.dev',
        kind: tunnelResource,
        name: cluster,
      }),
    );
  if (!identity) {
    throw refuse(
      `User "${user.name}" is not an OCM addon agent (system:open-cluster-management:cluster:<cluster>:addon:<addon>:agent:<agent>): only a cluster's own agent may ${tunnelSubresource}`,
    );
  }
  if (identity.addon !== addonName) {
    throw refuse(
      `User "${user.name}" is an agent of addon "${identity.addon}", not "${addonName}": only the ${addonName} agent may ${tunnelSubresource}`,
    );
  }
  if (identity.cluster !== cluster) {
    throw refuse(
      `User "${user.name}" is the agent of cluster "${identity.cluster}" and may only ${tunnelSubresource} as "${identity.cluster}"`,
    );
  }
  return identity;
}
