/**
 * Which exchange rule applies to a caller on a cluster: the cluster's own
 * rules before the global ones, each list already in priority order
 * (validate.ts), the first rule whose source matches wins. Matching is the
 * Go original's: every field set must match; `group` is one of the
 * caller's groups, `groupPattern` matches at least one of them.
 */
import type { UserInfo } from '../../../shared/identity/user.ts';
import type { ExchangeRule, ProxyConfiguration, RuleSource } from './configuration.ts';

export interface MatchedRule {
  rule: ExchangeRule;
  /** The configuration the rule belongs to (for logs and cache keys). */
  configuration: ProxyConfiguration;
}

export function sourceMatches(source: RuleSource, user: UserInfo, cluster: string): boolean {
  if (source.user !== undefined && user.name !== source.user) return false;
  if (source.group !== undefined && !user.groups.includes(source.group)) return false;
  if (source.uid !== undefined && user.uid !== source.uid) return false;
  if (source.cluster !== undefined && cluster !== source.cluster) return false;
  if (source.userPattern && !source.userPattern.test(user.name)) return false;
  const groupPattern = source.groupPattern;
  if (groupPattern && !user.groups.some((group) => groupPattern.test(group))) return false;
  if (source.clusterPattern && !source.clusterPattern.test(cluster)) return false;
  return true;
}

/** `configurations` most specific first: the cluster's, then the global one; absent ones are skipped. */
export function firstMatchingRule(
  configurations: ReadonlyArray<ProxyConfiguration | undefined>,
  user: UserInfo,
  cluster: string,
): MatchedRule | undefined {
  for (const configuration of configurations) {
    if (!configuration) continue;
    for (const rule of configuration.rules) {
      if (sourceMatches(rule.source, user, cluster)) return { rule, configuration };
    }
  }
  return undefined;
}
