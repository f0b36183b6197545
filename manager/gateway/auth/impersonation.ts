/**
 * Identity penetration: whether a proxied request runs on the managed
 * cluster as the hub caller (through Impersonate-* headers on the gateway's
 * own credential) or as the gateway's credential itself.
 *
 * As in the Go original: per request with `?impersonate=true` (exactly
 * "true"), or for every request with the ClientIdentityPenetration gate.
 * The proxy module applies the headers, after stripping any Impersonate-*
 * header the client sent: only the authenticated identity may be asserted.
 */
import type { UserInfo } from './user.ts';

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

/** Impersonate-* headers asserting `user`, as client-go's impersonating transport writes them. */
export function impersonationHeaders(user: UserInfo): Array<[name: string, value: string]> {
  const headers: Array<[string, string]> = [['Impersonate-User', user.name]];
  for (const group of user.groups) headers.push(['Impersonate-Group', group]);
  if (user.uid) headers.push(['Impersonate-Uid', user.uid]);
  for (const [key, values] of Object.entries(user.extra)) {
    for (const value of values) headers.push([`Impersonate-Extra-${escapeExtraKey(key)}`, value]);
  }
  return headers;
}

/** Client-supplied impersonation headers, which the proxy must drop. */
export function isImpersonationHeader(name: string): boolean {
  return name.toLowerCase().startsWith('impersonate-');
}

// RFC 7230 token characters, minus "%": an extra key such as
// "example.com/scopes" is percent-encoded byte by byte, the inverse of the
// apiserver's url.PathUnescape on the header name.
const tokenChars = /^[!#$&'*+\-.^_`|~0-9A-Za-z]$/;

function escapeExtraKey(key: string): string {
  let escaped = '';
  for (const byte of Buffer.from(key, 'utf8')) {
    const char = String.fromCharCode(byte);
    escaped +=
      byte < 0x80 && tokenChars.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return escaped;
}
