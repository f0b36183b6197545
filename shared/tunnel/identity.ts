/**
 * The identity a request on an `impersonate` tunnel stream carries (protocol.ts), gateway to agent:
 * the one codec for that hop. The gateway encodes the caller it authenticated; the agent decodes it
 * and forwards the request to its kube-apiserver as that user, with its own credential.
 *
 * The wire format is Kubernetes' impersonation headers as client-go writes them (Impersonate-User,
 * -Uid, -Group, -Extra-*), as gateways and agents have always spoken it: it must not change, or an
 * agent and a gateway of different versions would stop understanding each other. The agent reads
 * user, uid and groups; extras are not passed on (its RBAC does not grant `impersonate userextras`:
 * extras are hub-specific claims).
 *
 * Values are UTF-8 bytes on the wire, as Go writes them (shared/identity/header-encoding.ts): the
 * gateway writes a name's UTF-8 bytes and the agent decodes them before it writes them again, so
 * `h-jösé` on the hub is `h-jösé` on the managed cluster. A value that is not valid UTF-8 is refused.
 *
 * What keeps this safe: a request without exactly one Impersonate-User is refused (the agent never
 * lends its own identity), and the decoded identity is the only one that reaches the apiserver: the
 * forwarder drops every Authorization, Impersonate-* and X-Remote-* header of the request
 * (shared/forward/headers.ts) and writes the decoded identity again.
 */
import { utf8HeaderValue } from '../identity/header-encoding.ts';
import { appendImpersonation } from '../identity/impersonation-headers.ts';
import type { UserInfo } from '../identity/user.ts';

/** Appends the identity's header lines to a raw header array. */
export function encodeTunnelIdentity(out: string[], user: UserInfo): void {
  appendImpersonation(out, user);
}

/** Why a request's identity was refused. */
export interface IdentityRefusal {
  refusal: string;
}

/** The caller the gateway asserted, read from a request's raw headers; a refusal unless there is exactly one user. */
export function decodeTunnelIdentity(raw: readonly string[]): UserInfo | IdentityRefusal {
  let name: string | undefined;
  let uid: string | undefined;
  let users = 0;
  let notUtf8: string | undefined;
  const groups: string[] = [];
  const text = (header: string, value: string | undefined): string | undefined => {
    const decoded = value === undefined ? undefined : utf8HeaderValue(value);
    if (value !== undefined && decoded === undefined) notUtf8 ??= header;
    return decoded;
  };
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const header = raw[i]!.toLowerCase();
    if (header === 'impersonate-user') {
      users++;
      name = text(raw[i]!, raw[i + 1]);
    } else if (header === 'impersonate-uid') uid = text(raw[i]!, raw[i + 1]);
    else if (header === 'impersonate-group') {
      const group = text(raw[i]!, raw[i + 1]);
      if (group !== undefined) groups.push(group);
    }
  }
  if (notUtf8) return { refusal: `the ${notUtf8} header value is not valid UTF-8` };
  // Several users is not something the gateway writes: refuse rather than pick one.
  if (users !== 1 || !name) return { refusal: 'exactly one Impersonate-User header is required' };
  return { name, groups, extra: {}, ...(uid ? { uid } : {}) };
}
