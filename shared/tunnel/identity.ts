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
 * What keeps this safe: a request without exactly one Impersonate-User is refused (the agent never
 * lends its own identity), and the decoded identity is the only one that reaches the apiserver: the
 * forwarder drops every Authorization, Impersonate-* and X-Remote-* header of the request
 * (shared/forward/headers.ts) and writes the decoded identity again.
 */
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
  const groups: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const header = raw[i]!.toLowerCase();
    if (header === 'impersonate-user') {
      users++;
      name = raw[i + 1];
    } else if (header === 'impersonate-uid') uid = raw[i + 1];
    else if (header === 'impersonate-group') groups.push(raw[i + 1]!);
  }
  // Several users is not something the gateway writes: refuse rather than pick one.
  if (users !== 1 || !name) return { refusal: 'exactly one Impersonate-User header is required' };
  return { name, groups, extra: {}, ...(uid ? { uid } : {}) };
}
