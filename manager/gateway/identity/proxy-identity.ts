/**
 * Who a proxied request runs as on the managed cluster, and whether the
 * hub authorizes its path first. routes.ts asks here for every proxied
 * request (plain or upgrade), after the caller may use the proxy
 * subresource and before anything is sent to the cluster.
 *
 * Without identity penetration (no ?impersonate=true, gate off) the cluster
 * sees the gateway's credential, as before. With it, the exchange rules
 * decide, the cluster's own before the global ones:
 * - PrivilegedIdentityExchanger: the cluster's credential, no impersonation;
 * - StaticMappingIdentityExchanger: the rule's fixed user, groups and uid;
 * - ExternalIdentityExchanger: whatever the rule's service answers (a 502,
 *   503 or 403 instead when it cannot or will not);
 * - no rule matches: the hub identity passes through unchanged.
 * Local authorization of the proxied path is on when the flag, the global
 * configuration or the cluster's configuration turns it on: a narrower
 * scope can add the check, never remove one a wider scope asked for (the
 * cluster annotations are writable by more people than the flag).
 */

import type { UserInfo } from '../../../shared/identity/user.ts';
import { identityToPenetrate } from '../auth/impersonation.ts';
import type {
  AnnotatedCluster,
  ProxyConfigurationStore,
  ResolvedConfigurations,
} from './configuration-store.ts';
import type { ExternalIdentityExchanger } from './external-exchanger.ts';
import { firstMatchingRule } from './match.ts';

export type IdentityMode = 'cluster-credential' | 'caller' | 'privileged' | 'static-mapping' | 'external';

export interface ProxyPlan {
  authorizeProxySubpath: boolean;
  configurations: ResolvedConfigurations;
}

export interface EffectiveIdentity {
  /** The identity impersonated on the cluster; undefined means the cluster's credential as it is. */
  identity?: UserInfo;
  mode: IdentityMode;
  /** The rule that chose the identity, and where it is written. */
  rule?: { name: string; origin: string };
}

export interface ProxyIdentityOptions {
  store: ProxyConfigurationStore;
  external: Pick<ExternalIdentityExchanger, 'exchange'>;
  /** The ClientIdentityPenetration gate: penetrate on every request. */
  penetrateAll: boolean;
  /** --authorize-proxy-subpath. */
  authorizeProxySubpath: boolean;
}

export class ProxyIdentity {
  readonly #options: ProxyIdentityOptions;

  constructor(options: ProxyIdentityOptions) {
    this.#options = options;
  }

  /** Throws a StatusError (500, 503) when the cluster's configuration cannot be known. */
  plan(cluster: AnnotatedCluster): ProxyPlan {
    const configurations = this.#options.store.resolve(cluster);
    return {
      authorizeProxySubpath:
        this.#options.authorizeProxySubpath ||
        configurations.global?.authorizeProxySubpath === true ||
        configurations.cluster?.authorizeProxySubpath === true,
      configurations,
    };
  }

  /** Throws a StatusError (403, 502, 503) when an external exchanger fails or refuses. */
  async identityFor(
    user: UserInfo,
    cluster: string,
    plan: ProxyPlan,
    query: URLSearchParams,
  ): Promise<EffectiveIdentity> {
    const caller = identityToPenetrate(user, query, { always: this.#options.penetrateAll });
    if (!caller) return { mode: 'cluster-credential' };
    const match = firstMatchingRule([plan.configurations.cluster, plan.configurations.global], user, cluster);
    if (!match) return { identity: caller, mode: 'caller' };
    const { rule, configuration } = match;
    const chosenBy = { name: rule.name, origin: configuration.origin };
    switch (rule.type) {
      case 'PrivilegedIdentityExchanger':
        return { mode: 'privileged', rule: chosenBy };
      case 'StaticMappingIdentityExchanger':
        return {
          identity: {
            name: rule.target.user,
            groups: [...rule.target.groups],
            extra: {},
            ...(rule.target.uid ? { uid: rule.target.uid } : {}),
          },
          mode: 'static-mapping',
          rule: chosenBy,
        };
      case 'ExternalIdentityExchanger': {
        const key = `${configuration.origin}#${configuration.revision ?? ''}`;
        const identity = await this.#options.external.exchange(rule, key, user, cluster);
        return { identity, mode: 'external', rule: chosenBy };
      }
    }
  }
}
