/**
 * One structured log line per proxied request: the hub caller, the identity
 * the managed cluster saw and the rule that chose it, the cluster, verb,
 * path and status code. Requests the gateway refuses itself (local
 * authorization, a failing exchanger, an unusable configuration) get the
 * same line with the gateway's code.
 *
 * Never a credential: the path is logged without its query (selectors and
 * continue tokens are the caller's data), and the identity is names only.
 */

import type { ProxyAccess } from '../../../shared/forward/context.ts';
import type { UserInfo } from '../../../shared/identity/user.ts';
import { proxiedRequestAttributesIfValid } from '../auth/request-attributes.ts';
import type { EffectiveIdentity } from './proxy-identity.ts';

export interface AccessLogger {
  info(fields: object, message: string): void;
}

/** The access fields for `user`; `effective` undefined when the gateway refused before choosing one. */
export function accessRecord(user: UserInfo, effective?: EffectiveIdentity): ProxyAccess {
  return {
    user: user.name,
    as: effective?.mode ?? 'refused',
    ...(effective?.identity ? { clusterUser: effective.identity.name } : {}),
    ...(effective?.identity?.groups.length ? { clusterGroups: effective.identity.groups } : {}),
    ...(effective?.rule ? { rule: effective.rule.name, ruleOrigin: effective.rule.origin } : {}),
  };
}

export interface ProxiedRequest {
  cluster: string;
  method: string;
  /** Path and query relative to the cluster's endpoint; the query is not logged. */
  upstreamPath: string;
  code: number;
  durationMs?: number;
  upgrade?: boolean;
  access: ProxyAccess;
}

export function logProxiedRequest(log: AccessLogger, request: ProxiedRequest): void {
  const q = request.upstreamPath.indexOf('?');
  const path = q === -1 ? request.upstreamPath : request.upstreamPath.slice(0, q);
  const verb = proxiedRequestAttributesIfValid(request.method, request.upstreamPath)?.verb ?? 'other';
  log.info(
    {
      cluster: request.cluster,
      verb,
      method: request.method,
      path: path || '/',
      code: request.code,
      ...(request.durationMs !== undefined ? { durationMs: Math.round(request.durationMs * 10) / 10 } : {}),
      ...(request.upgrade ? { upgrade: true } : {}),
      ...request.access,
    },
    'proxied request',
  );
}
