/**
 * The attach subresource: `clustergateways/<cluster>/attach`, upgraded by a cluster's agent
 * through the hub's kube-aggregator. In order:
 *
 * 1. authenticate (the aggregator's front-proxy user: the agent's hub identity);
 * 2. bind: the identity must be OCM's addon agent subject for this very cluster (identity.ts);
 * 3. authorize: SubjectAccessReview `create clustergateways/attach` on that name, as the hub's
 *    own authorizer did before relaying, so a gateway reached directly decides the same way;
 * 4. answer 101 and run the HTTP/2 session (session.ts), registered for the cluster (registry.ts);
 * 5. review the grant again every `reauthorizeMs` for as long as the tunnel lives: RBAC is how an
 *    agent's access is revoked (OCM cannot revoke its certificate), so a removed grant (the addon
 *    disabled for the cluster, an operator's decision) ends the tunnel within that time.
 *
 * Every refusal is a metav1.Status on the socket (the agent logs its message) and a warning here
 * with the user and the reason: a refused attach is either a misconfiguration or an attack.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { UserInfo } from '../../../shared/identity/user.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import {
  tunnelGroup,
  tunnelResource,
  tunnelSubresource,
  tunnelUpgradeProtocol,
  tunnelVerb,
  tunnelVersion,
} from '../../../shared/tunnel/protocol.ts';
import type { Authenticator, Authorizer } from '../auth/contracts.ts';
import { matchClusterGatewayPath } from '../proxy/path.ts';
import { bindAgentIdentity } from './identity.ts';
import { type AttachResult, recordAttach, recordDisconnect, recordRoundTrip } from './metrics.ts';
import type { TunnelRegistry } from './registry.ts';
import { TunnelSession } from './session.ts';

export interface AttachLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface AttachDeps {
  authenticator: Authenticator;
  authorizer: Authorizer;
  tunnels: TunnelRegistry;
  /** Only this addon's agents may attach (the addon name in their OCM subject). */
  addonName: string;
  log: AttachLogger;
  keepalive?: { intervalMs: number; timeoutMs: number };
  /** How often a live tunnel's grant is reviewed again (default 60 s). */
  reauthorizeMs?: number;
}

/** The cluster of an attach URL (`clustergateways/<cluster>/attach`, any query), else undefined. */
export function matchAttachPath(url: string): string | undefined {
  const route = matchClusterGatewayPath(url);
  if (!route || route.subresource !== tunnelSubresource || !/^\/*$/.test(route.rest)) return undefined;
  return route.name;
}

export function createAttachHandler(deps: AttachDeps) {
  /** Throws a StatusError for every refusal; the caller writes it to the socket. */
  async function attach(req: IncomingMessage, socket: Duplex, head: Buffer, cluster: string): Promise<void> {
    let user: UserInfo | undefined;
    let result: AttachResult = 'error';
    // While the agent is authenticated and reviewed its connection may fail: that is its leaving, not a crash.
    socket.on('error', () => {});
    try {
      const upgrade = (req.headers.upgrade ?? '').toLowerCase();
      if (upgrade !== tunnelUpgradeProtocol) {
        result = 'bad-request';
        throw new StatusError(
          failureStatus(
            400,
            `${tunnelResource}/${tunnelSubresource} upgrades to "${tunnelUpgradeProtocol}" only (got "${req.headers.upgrade ?? ''}"); it is the cluster agents' tunnel`,
          ),
        );
      }
      result = 'unauthenticated';
      user = await deps.authenticator.authenticate(req);
      if (!user) throw new StatusError(failureStatus(401, 'Unauthorized'));
      result = 'not-agent';
      const identity = bindAgentIdentity(user, cluster, deps.addonName);
      result = 'forbidden';
      const attributes = {
        kind: 'resource',
        verb: tunnelVerb,
        group: tunnelGroup,
        version: tunnelVersion,
        resource: tunnelResource,
        subresource: tunnelSubresource,
        name: cluster,
      } as const;
      const decision = await deps.authorizer.authorize(user, attributes);
      if (!decision.allowed) {
        throw new StatusError(
          failureStatus(
            403,
            `${tunnelResource} "${cluster}" is forbidden: User "${user.name}" cannot ${tunnelVerb} resource "${tunnelResource}/${tunnelSubresource}" in API group "${tunnelGroup}" at the cluster scope${decision.reason ? `: ${decision.reason}` : ''}`,
            { group: tunnelGroup, kind: tunnelResource, name: cluster },
          ),
        );
      }
      result = 'error';
      await switchProtocols(socket);
      if (head.length > 0) socket.unshift(head);
      tuneSocket(socket);
      const session = new TunnelSession(socket, {
        cluster,
        agent: user.name,
        onRoundTrip: recordRoundTrip,
        ...(deps.keepalive ? { keepalive: deps.keepalive } : {}),
      });
      deps.tunnels.add(session);
      recordAttach('accepted');
      const agentUser = user;
      const review = setInterval(() => {
        deps.authorizer.authorize(agentUser, attributes).then(
          (again) => {
            if (again.allowed) return;
            deps.log.warn(
              { cluster, user: agentUser.name, reason: again.reason },
              'agent tunnel closed: its attach grant was revoked',
            );
            session.drain('revoked', 10_000);
          },
          // A review that cannot be made says nothing about the grant: the tunnel stays.
          () => {},
        );
      }, deps.reauthorizeMs ?? 60_000);
      review.unref();
      void session.ended.then(() => clearInterval(review));
      deps.log.info({ cluster, agent: identity.agent, user: user.name }, 'agent tunnel connected');
      void session.ended.then((reason) => {
        recordDisconnect(session, reason);
        deps.log.info(
          {
            cluster,
            user: user?.name,
            reason,
            seconds: Math.round((Date.now() - +session.connectedAt) / 1000),
          },
          'agent tunnel ended',
        );
      });
    } catch (err) {
      const status = err instanceof StatusError ? err.status : undefined;
      // A review that could not be made is the gateway's problem, not a refusal of the agent.
      if (result === 'forbidden' && status?.code !== 403) result = 'error';
      recordAttach(result);
      deps.log.warn(
        {
          cluster,
          user: user?.name,
          code: status?.code,
          reason: status?.message ?? (err instanceof Error ? err.message : String(err)),
        },
        'agent tunnel attach refused',
      );
      throw err;
    }
  }
  return { attach };
}

/** Writes the 101 and resolves once it is written (see TunnelSession's constructor for why). */
function switchProtocols(socket: Duplex): Promise<void> {
  return new Promise((resolve, reject) => {
    if (socket.destroyed || !socket.writable) {
      reject(new Error('the connection closed before the tunnel was accepted'));
      return;
    }
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${tunnelUpgradeProtocol}\r\n\r\n`,
      (err) => (err ? reject(err) : resolve()),
    );
  });
}

/** A tunnel lives for hours: no idle timeout, no Nagle delay, and TCP keepalive under the pings. */
function tuneSocket(socket: Duplex): void {
  const s = socket as Partial<import('node:net').Socket>;
  s.setTimeout?.(0);
  s.setNoDelay?.(true);
  s.setKeepAlive?.(true, 30_000);
}
