/**
 * What the gateway asks of an authenticator and an authorizer: the contracts its request-header,
 * client-certificate and token authenticators, its union of them and its SubjectAccessReview authorizer
 * implement (the caller they produce, UserInfo, is shared: shared/identity/user.ts).
 */
import type { IncomingMessage } from 'node:http';
import type { UserInfo } from '../../../shared/identity/user.ts';

/** Kubernetes authorization attributes (SubjectAccessReview spec.resourceAttributes / nonResourceAttributes). */
export type AuthorizationAttributes =
  | {
      kind: 'resource';
      verb: string;
      group: string;
      version: string;
      resource: string;
      subresource?: string;
      name?: string;
      namespace?: string;
    }
  | { kind: 'nonResource'; verb: string; path: string };

export interface Decision {
  allowed: boolean;
  /** Human-readable reason from the authorizer, shown in 403 messages. */
  reason: string;
}

export interface Authenticator {
  /**
   * Returns the caller, or undefined when the request carries no credentials
   * this authenticator understands. Throws a StatusError(401) when it
   * carries credentials that are invalid.
   */
  authenticate(req: IncomingMessage): Promise<UserInfo | undefined>;
}

export interface Authorizer {
  /**
   * `proxied`: the attributes are those of a request forwarded to a managed
   * cluster (--authorize-proxy-subpath), whose paths are not this server's:
   * its always-allowed paths (/healthz) do not apply, the hub decides.
   */
  authorize(
    user: UserInfo,
    attributes: AuthorizationAttributes,
    context?: { proxied?: boolean },
  ): Promise<Decision>;
}
