/**
 * Identity penetration: whether a proxied request runs on the managed
 * cluster as the hub caller (through Impersonate-* headers on the gateway's
 * own credential) or as the gateway's credential itself.
 *
 * As in the Go original: per request with `?impersonate=true` (exactly
 * "true"), or for every request with the ClientIdentityPenetration gate.
 * The proxy module applies the headers (shared/forward/headers.ts), after stripping
 * any Impersonate-* header the client sent: only the authenticated identity
 * may be asserted.
 */
import type { UserInfo } from '../../../shared/identity/user.ts';

export interface IdentityPenetrationOptions {
  /** The ClientIdentityPenetration feature gate: penetrate on every proxied request. */
  always?: boolean;
}

/** Whether this request asks for penetration itself (`?impersonate=true`). */
export function penetrationRequested(query: URLSearchParams): boolean {
  return query.get('impersonate') === 'true';
}

/**
 * The identity to impersonate on the managed cluster, or undefined to use
 * the gateway's credential unchanged.
 *
 * The uid is left out, as the Go original leaves it out: a hub uid means
 * nothing on a managed cluster, and asserting one needs an extra
 * `impersonate uids` grant there that existing installations lack.
 */
export function identityToPenetrate(
  user: UserInfo,
  query: URLSearchParams,
  options: IdentityPenetrationOptions = {},
): UserInfo | undefined {
  if (!options.always && !penetrationRequested(query)) return undefined;
  return { name: user.name, groups: [...user.groups], extra: { ...user.extra } };
}
