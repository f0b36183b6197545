/**
 * The gateway's proxy configuration: identity exchange rules and local
 * authorization, as the Go original's `ClusterGatewayProxyConfiguration`
 * (a YAML file or a cluster annotation there) and as this project's CRD of
 * the same kind and spec in a group of its own (the original's
 * cluster.core.oam.dev/v1alpha1 is the aggregated API the gateway serves,
 * so a CRD cannot live there).
 *
 * This file holds the names and the validated, ready-to-evaluate form;
 * validate.ts builds it from untrusted input.
 */

/** The CRD's group, version and kind; a file converts by changing apiVersion (and adding metadata.name). */
export const CONFIGURATION_GROUP = 'gateway.cluster.core.oam.dev';
export const CONFIGURATION_VERSION = 'v1alpha1';
export const CONFIGURATION_KIND = 'ClusterGatewayProxyConfiguration';
export const CONFIGURATION_RESOURCE = 'clustergatewayproxyconfigurations';
export const CONFIGURATION_API_VERSION = `${CONFIGURATION_GROUP}/${CONFIGURATION_VERSION}`;
/** The original's apiVersion, accepted in files and annotations. */
export const ORIGINAL_API_VERSION = 'cluster.core.oam.dev/v1alpha1';
export const CONFIGURATIONS_PATH = `/apis/${CONFIGURATION_API_VERSION}/${CONFIGURATION_RESOURCE}`;

/** The original's per-cluster annotation: a whole configuration as YAML or JSON. */
export const INLINE_CONFIGURATION_ANNOTATION = 'cluster.core.oam.dev/cluster-gateway-proxy-configuration';
/** This project's per-cluster annotation: the name of a ClusterGatewayProxyConfiguration object. */
export const CONFIGURATION_REFERENCE_ANNOTATION = `${CONFIGURATION_GROUP}/proxy-configuration`;
/**
 * What the gateway did not use of a ManagedCluster's annotations, and why (a managed cluster's klusterlet
 * may write them): written on the ClusterGateway by clusters/merge.ts, logged by configuration-store.ts.
 */
export const IGNORED_SETTINGS_ANNOTATION = `${CONFIGURATION_GROUP}/ignored-managedcluster-settings`;

export const EXCHANGER_TYPES = [
  'PrivilegedIdentityExchanger',
  'StaticMappingIdentityExchanger',
  'ExternalIdentityExchanger',
] as const;
export type ExchangerType = (typeof EXCHANGER_TYPES)[number];

/** Who a rule applies to. Every field set must match; patterns are unanchored, as Go's regexp.Match. */
export interface RuleSource {
  user?: string;
  group?: string;
  uid?: string;
  cluster?: string;
  userPattern?: RegExp;
  groupPattern?: RegExp;
  clusterPattern?: RegExp;
}

export interface StaticTarget {
  user: string;
  groups: string[];
  uid?: string;
}

export interface ExternalService {
  url: URL;
  /** PEM; absent means the system trust store. */
  caBundle?: string;
  timeoutMs: number;
  /** How long an answer is reused; 0 asks the service every time. */
  cacheTtlMs: number;
}

interface RuleBase {
  name: string;
  priority: number;
  /** Position in its list, for ties and messages. */
  index: number;
  source: RuleSource;
}

export type ExchangeRule =
  | (RuleBase & { type: 'PrivilegedIdentityExchanger' })
  | (RuleBase & { type: 'StaticMappingIdentityExchanger'; target: StaticTarget })
  | (RuleBase & { type: 'ExternalIdentityExchanger'; external: ExternalService });

/** A validated configuration from one place (file, object, annotation). */
export interface ProxyConfiguration {
  /** Where it came from, for logs and messages: 'ClusterGatewayProxyConfiguration "x" generation 3'. */
  origin: string;
  /**
   * Changes whenever the content may have (object uid and generation, a
   * digest of annotation text): cached exchange answers are keyed by it.
   */
  revision?: string;
  /** Rules in evaluation order: highest priority first, ties in the order written. */
  rules: ExchangeRule[];
  /** Local authorization of the proxied path; undefined leaves the decision to the wider scope. */
  authorizeProxySubpath?: boolean;
}

/** One problem with a configuration, naming the field as kubectl would (spec.clientIdentityExchanger.rules[1].url). */
export interface FieldProblem {
  field: string;
  message: string;
}

export class InvalidConfigurationError extends Error {
  readonly problems: FieldProblem[];

  constructor(origin: string, problems: FieldProblem[]) {
    super(`${origin} is invalid: ${describeProblems(problems)}`);
    this.name = 'InvalidConfigurationError';
    this.problems = problems;
  }
}

export function describeProblems(problems: FieldProblem[]): string {
  return problems.map((p) => `${p.field}: ${p.message}`).join('; ');
}
