/**
 * Bearer-token authentication through the hub's TokenReview API, for
 * callers that talk to the gateway directly with a service-account or OIDC
 * token (through the aggregator, users arrive as front-proxy headers).
 *
 * Results are cached by sha256(token), never by the token itself, so a heap
 * dump does not hand out credentials: briefly for refusals (a token that is
 * being created may become valid in a moment), longer for acceptances.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { UserInfo } from '../../../shared/identity/user.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import { reviewFailure, unauthorized } from './auth-errors.ts';
import type { Authenticator } from './contracts.ts';
import { removeHeaders } from './header-utils.ts';
import { TtlCache } from './ttl-cache.ts';

export interface TokenReviewAuthenticatorOptions {
  client: Pick<KubeClient, 'request'>;
  /** Audiences to request; the review must confirm one of them. Empty: the apiserver's own. */
  audiences?: string[];
  successTtlMs?: number;
  failureTtlMs?: number;
  maxEntries?: number;
  /** Per-review timeout: an unanswered review must not hold requests forever. */
  timeoutMs?: number;
  /** Milliseconds clock for the cache, injectable for tests. */
  now?: () => number;
}

interface TokenReviewStatus {
  authenticated?: boolean;
  user?: {
    username?: string;
    uid?: string;
    groups?: string[] | null;
    extra?: Record<string, string[]> | null;
  };
  audiences?: string[] | null;
  error?: string;
}

type Outcome = { user: UserInfo } | { error: string };

export const tokenReviewPath = '/apis/authentication.k8s.io/v1/tokenreviews';

export class TokenReviewAuthenticator implements Authenticator {
  readonly #client: Pick<KubeClient, 'request'>;
  readonly #audiences: string[];
  readonly #successTtlMs: number;
  readonly #failureTtlMs: number;
  readonly #timeoutMs: number;
  readonly #cache: TtlCache<string, Outcome>;

  constructor(options: TokenReviewAuthenticatorOptions) {
    this.#client = options.client;
    this.#audiences = options.audiences ?? [];
    this.#successTtlMs = options.successTtlMs ?? 10_000;
    this.#failureTtlMs = options.failureTtlMs ?? 2_000;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#cache = new TtlCache({
      maxEntries: options.maxEntries ?? 10_000,
      ...(options.now ? { now: options.now } : {}),
    });
  }

  async authenticate(req: IncomingMessage): Promise<UserInfo | undefined> {
    const token = bearerToken(req.headers.authorization);
    if (token === undefined) return undefined;
    const user = await this.reviewToken(token);
    // As Kubernetes does: the hub credential must not travel further (to a
    // managed cluster) once it has served its purpose.
    removeHeaders(req, (name) => name === 'authorization');
    return user;
  }

  /** The token's user; throws a 401 StatusError for an invalid token, 500/503 if the review fails. */
  async reviewToken(token: string): Promise<UserInfo> {
    const key = createHash('sha256').update(token).digest('hex');
    const outcome = await this.#cache.getOrLoad(
      key,
      () => this.#review(token),
      (result) => ('user' in result ? this.#successTtlMs : this.#failureTtlMs),
    );
    if ('error' in outcome) throw unauthorized(outcome.error);
    return outcome.user;
  }

  async #review(token: string): Promise<Outcome> {
    let review: { status?: TokenReviewStatus };
    try {
      review = await this.#client.request('POST', tokenReviewPath, {
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          spec: { token, ...(this.#audiences.length > 0 ? { audiences: this.#audiences } : {}) },
        },
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (err) {
      throw reviewFailure('token review', err);
    }
    const status = review?.status ?? {};
    if (!status.authenticated || !status.user?.username) {
      return { error: `invalid bearer token${status.error ? `: ${status.error}` : ''}` };
    }
    if (this.#audiences.length > 0 && !this.#audiences.some((aud) => status.audiences?.includes(aud))) {
      return { error: `invalid bearer token: token audiences do not include ${this.#audiences.join(', ')}` };
    }
    const { username, uid, groups, extra } = status.user;
    return {
      user: { name: username, groups: groups ?? [], extra: extra ?? {}, ...(uid ? { uid } : {}) },
    };
  }
}

/**
 * The token of an `Authorization: Bearer <token>` header, parsed like
 * Kubernetes' bearertoken authenticator: scheme case-insensitive, anything
 * else (Basic, an empty token) means "no bearer credentials".
 */
export function bearerToken(header: string | undefined): string | undefined {
  const parts = header?.trim().split(' ');
  if (!parts || parts.length < 2 || parts[0]!.toLowerCase() !== 'bearer') return undefined;
  return parts[1] || undefined;
}
