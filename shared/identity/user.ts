/** The authenticated caller, as Kubernetes' user.Info. */
export interface UserInfo {
  name: string;
  uid?: string;
  groups: string[];
  extra: Record<string, string[]>;
}

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
  authenticate(req: import('node:http').IncomingMessage): Promise<UserInfo | undefined>;
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
