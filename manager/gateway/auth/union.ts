/**
 * The gateway's authenticator chain, with Kubernetes' union semantics: the
 * first authenticator that recognises the caller wins; errors from the
 * others are remembered and only reported when nobody succeeds; and a
 * request that presented bad credentials fails even where anonymous access
 * is allowed (union.NewFailOnError before the anonymous authenticator).
 *
 * Anonymous access is off except for the paths the caller lists (discovery,
 * openapi, health): ClusterGateway objects and their proxy always need an
 * identity, since authorization and identity penetration depend on it.
 */
import type { IncomingMessage } from 'node:http';
import type { UserInfo } from '../../../shared/identity/user.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import { RejectedCredentialsError } from './auth-errors.ts';
import type { Authenticator } from './contracts.ts';
import { matchesPath } from './path-patterns.ts';

export const anonymousUser = 'system:anonymous';
export const unauthenticatedGroup = 'system:unauthenticated';
export const authenticatedGroup = 'system:authenticated';

export interface UnionAuthenticatorOptions {
  /** Tried in order; typically front-proxy headers, client certificate, bearer token. */
  authenticators: Authenticator[];
  /**
   * Request paths served as system:anonymous when no credentials are
   * presented: exact paths, or prefixes ending in "*" (as Kubernetes'
   * always-allow paths).
   */
  anonymousPaths?: string[];
}

export class UnionAuthenticator implements Authenticator {
  readonly #authenticators: Authenticator[];
  readonly #anonymousPaths: string[];

  constructor(options: UnionAuthenticatorOptions) {
    this.#authenticators = options.authenticators;
    this.#anonymousPaths = options.anonymousPaths ?? [];
  }

  /** The caller, or throws a StatusError: 401 for missing or bad credentials, 5xx if a review failed. */
  async authenticate(req: IncomingMessage): Promise<UserInfo> {
    const errors: unknown[] = [];
    for (const authenticator of this.#authenticators) {
      let user: UserInfo | undefined;
      try {
        user = await authenticator.authenticate(req);
      } catch (err) {
        if (err instanceof RejectedCredentialsError) throw err;
        errors.push(err);
        continue;
      }
      if (user) return withAuthenticatedGroup(user);
    }
    if (errors.length > 0) throw combine(errors);
    if (matchesPath(this.#anonymousPaths, requestPath(req))) {
      return { name: anonymousUser, groups: [unauthenticatedGroup], extra: {} };
    }
    throw new StatusError(failureStatus(401, 'Unauthorized'));
  }
}

/** Every authenticated user is in system:authenticated (Kubernetes' AuthenticatedGroupAdder). */
function withAuthenticatedGroup(user: UserInfo): UserInfo {
  if (user.name === anonymousUser) return user;
  if (user.groups.includes(authenticatedGroup) || user.groups.includes(unauthenticatedGroup)) return user;
  return { ...user, groups: [...user.groups, authenticatedGroup] };
}

/**
 * A failed review (5xx) outranks bad credentials: the caller should retry
 * rather than re-authenticate. Otherwise all 401 messages are joined.
 */
function combine(errors: unknown[]): StatusError {
  for (const err of errors) {
    if (err instanceof StatusError && err.code !== 401) return err;
    if (!(err instanceof StatusError)) {
      return new StatusError(failureStatus(500, `authentication failed: ${(err as Error)?.message ?? err}`));
    }
  }
  const messages = errors.map((err) => (err as StatusError).status.message);
  return new StatusError(failureStatus(401, [...new Set(messages)].join('; ')));
}

function requestPath(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  return query >= 0 ? url.slice(0, query) : url;
}
