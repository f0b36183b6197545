/**
 * Authorization delegated to the hub through SubjectAccessReview, as every
 * aggregated API server does it: the hub's RBAC (or whatever authorizers it
 * runs) decides who may get, list or proxy ClusterGateways.
 *
 * Decisions are cached per complete review (user, groups, extra, uid and
 * attributes) for a few seconds, granted ones longer than refused ones so
 * a freshly bound role takes effect quickly; identical reviews in flight
 * are coalesced. A review that cannot be made is an error (500/503), never
 * a deny: a hub outage must not look like a permission problem.
 */
import { createHash } from 'node:crypto';
import type { UserInfo } from '../../../shared/identity/user.ts';
import type { KubeClient } from '../../../shared/kube/client.ts';
import { reviewFailure } from './auth-errors.ts';
import type { AuthorizationAttributes, Authorizer, Decision } from './contracts.ts';
import { matchesPath } from './path-patterns.ts';
import { TtlCache } from './ttl-cache.ts';

export interface SubjectAccessReviewAuthorizerOptions {
  client: Pick<KubeClient, 'request'>;
  allowTtlMs?: number;
  denyTtlMs?: number;
  maxEntries?: number;
  timeoutMs?: number;
  /**
   * Groups allowed everything without a review. Kubernetes' delegated
   * authorization defaults to system:masters, which the hub would allow
   * anyway; pass [] to review every request.
   */
  alwaysAllowGroups?: string[];
  /** Non-resource paths allowed without a review (exact, or prefix ending in "*"). */
  alwaysAllowPaths?: string[];
  /** Milliseconds clock for the cache, injectable for tests. */
  now?: () => number;
}

export interface SubjectAccessReviewSpec {
  user: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
  resourceAttributes?: {
    namespace?: string;
    verb: string;
    group?: string;
    version?: string;
    resource?: string;
    subresource?: string;
    name?: string;
  };
  nonResourceAttributes?: { path: string; verb: string };
}

interface SubjectAccessReviewStatus {
  allowed?: boolean;
  denied?: boolean;
  reason?: string;
  evaluationError?: string;
}

export const subjectAccessReviewPath = '/apis/authorization.k8s.io/v1/subjectaccessreviews';

export class SubjectAccessReviewAuthorizer implements Authorizer {
  readonly #client: Pick<KubeClient, 'request'>;
  readonly #allowTtlMs: number;
  readonly #denyTtlMs: number;
  readonly #timeoutMs: number;
  readonly #alwaysAllowGroups: string[];
  readonly #alwaysAllowPaths: string[];
  readonly #cache: TtlCache<string, Decision>;

  constructor(options: SubjectAccessReviewAuthorizerOptions) {
    this.#client = options.client;
    this.#allowTtlMs = options.allowTtlMs ?? 10_000;
    this.#denyTtlMs = options.denyTtlMs ?? 5_000;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#alwaysAllowGroups = options.alwaysAllowGroups ?? ['system:masters'];
    this.#alwaysAllowPaths = options.alwaysAllowPaths ?? ['/healthz', '/readyz', '/livez'];
    this.#cache = new TtlCache({
      maxEntries: options.maxEntries ?? 10_000,
      ...(options.now ? { now: options.now } : {}),
    });
  }

  async authorize(
    user: UserInfo,
    attributes: AuthorizationAttributes,
    context: { proxied?: boolean } = {},
  ): Promise<Decision> {
    if (
      !context.proxied &&
      attributes.kind === 'nonResource' &&
      matchesPath(this.#alwaysAllowPaths, attributes.path)
    ) {
      return { allowed: true, reason: `path ${attributes.path} is always allowed` };
    }
    const privileged = user.groups.find((group) => this.#alwaysAllowGroups.includes(group));
    if (privileged) return { allowed: true, reason: `group ${privileged} is always allowed` };

    const spec = subjectAccessReviewSpec(user, attributes);
    const key = createHash('sha256').update(JSON.stringify(spec)).digest('hex');
    return this.#cache.getOrLoad(
      key,
      () => this.#review(spec),
      (decision) => (decision.allowed ? this.#allowTtlMs : this.#denyTtlMs),
    );
  }

  /** Drops every cached decision, e.g. after RBAC changes the caller knows about. */
  clearCache(): void {
    this.#cache.clear();
  }

  async #review(spec: SubjectAccessReviewSpec): Promise<Decision> {
    let review: { status?: SubjectAccessReviewStatus };
    try {
      review = await this.#client.request('POST', subjectAccessReviewPath, {
        body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview', spec },
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (err) {
      throw reviewFailure('subject access review', err);
    }
    const status = review?.status ?? {};
    // "Not allowed" and "denied" both refuse here: this is the only
    // authorizer, so a no-opinion answer has nobody else to fall through to.
    const reason = [status.reason, status.evaluationError].filter(Boolean).join('; ');
    return { allowed: status.allowed === true && status.denied !== true, reason };
  }
}

/**
 * The review spec for a user and attributes. Fields are written in a fixed
 * order and extra keys sorted, so the JSON doubles as the cache key.
 */
export function subjectAccessReviewSpec(
  user: UserInfo,
  attributes: AuthorizationAttributes,
): SubjectAccessReviewSpec {
  const spec: SubjectAccessReviewSpec = { user: user.name, groups: [...user.groups] };
  if (user.uid) spec.uid = user.uid;
  const extraKeys = Object.keys(user.extra).sort();
  if (extraKeys.length > 0) {
    spec.extra = Object.fromEntries(extraKeys.map((key) => [key, [...(user.extra[key] ?? [])]]));
  }
  if (attributes.kind === 'nonResource') {
    spec.nonResourceAttributes = { path: attributes.path, verb: attributes.verb };
  } else {
    spec.resourceAttributes = {
      verb: attributes.verb,
      ...(attributes.namespace ? { namespace: attributes.namespace } : {}),
      ...(attributes.group ? { group: attributes.group } : {}),
      ...(attributes.version ? { version: attributes.version } : {}),
      ...(attributes.resource ? { resource: attributes.resource } : {}),
      ...(attributes.subresource ? { subresource: attributes.subresource } : {}),
      ...(attributes.name ? { name: attributes.name } : {}),
    };
  }
  return spec;
}
