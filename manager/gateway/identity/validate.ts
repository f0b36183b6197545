/**
 * Validates a ClusterGatewayProxyConfiguration spec from any source (file,
 * annotation, CRD object) into the evaluated form, or reports every problem
 * with the field it is in. The whole configuration is accepted or refused:
 * a rule is never dropped on its own, because a configuration missing one
 * rule can hand a caller another rule's identity.
 *
 * Stricter than the Go original on purpose, each time for a rule that could
 * never have worked or that would silently widen who matches:
 * - unknown fields are errors (a misspelt `userPatern` would otherwise leave
 *   a source that matches everyone);
 * - a source needs at least one matcher, and every pattern must compile;
 * - a StaticMappingIdentityExchanger needs target.user (kube-apiserver refuses
 *   Impersonate-Group or -Uid without Impersonate-User);
 * - `target` only on StaticMapping, `url` and its settings only on External,
 *   and the url must be https (the request carries the caller's identity).
 * Rule names must be present and unique: the access log names the rule that
 * chose each identity.
 */
import { X509Certificate } from 'node:crypto';
import {
  EXCHANGER_TYPES,
  type ExchangeRule,
  type ExchangerType,
  type ExternalService,
  type FieldProblem,
  InvalidConfigurationError,
  type ProxyConfiguration,
  type RuleSource,
  type StaticTarget,
} from './configuration.ts';
import { compilePattern } from './patterns.ts';

export const MAX_RULES = 128;
const MAX_STRING = 1024;
const MAX_GROUPS = 64;
const MAX_CA_BUNDLE = 64 * 1024;
export const DEFAULT_TIMEOUT_SECONDS = 5;
export const MAX_TIMEOUT_SECONDS = 30;
export const DEFAULT_CACHE_TTL_SECONDS = 60;
export const MAX_CACHE_TTL_SECONDS = 3600;
const INT32 = 2 ** 31;

const SPEC_FIELDS = ['clientIdentityExchanger', 'authorizeProxySubpath'];
const RULE_FIELDS = [
  'name',
  'type',
  'priority',
  'source',
  'target',
  'url',
  'caBundle',
  'timeoutSeconds',
  'cacheTTLSeconds',
];
const SOURCE_STRINGS = ['user', 'group', 'uid', 'cluster'] as const;
const SOURCE_PATTERNS = ['userPattern', 'groupPattern', 'clusterPattern'] as const;
const EXTERNAL_ONLY = ['url', 'caBundle', 'timeoutSeconds', 'cacheTTLSeconds'] as const;

/** Throws InvalidConfigurationError listing every problem found. */
export function validateSpec(spec: unknown, origin: string, field = 'spec'): ProxyConfiguration {
  const problems: FieldProblem[] = [];
  const problem = (at: string, message: string) => problems.push({ field: at, message });
  const config: ProxyConfiguration = { origin, rules: [] };
  if (spec === undefined || spec === null) return config;
  if (!isObject(spec)) {
    problem(field, 'must be an object');
    throw new InvalidConfigurationError(origin, problems);
  }
  unknownFields(spec, SPEC_FIELDS, field, problem);
  if (spec.authorizeProxySubpath !== undefined) {
    if (typeof spec.authorizeProxySubpath === 'boolean')
      config.authorizeProxySubpath = spec.authorizeProxySubpath;
    else problem(`${field}.authorizeProxySubpath`, 'must be true or false');
  }
  const exchanger = spec.clientIdentityExchanger;
  const exchangerField = `${field}.clientIdentityExchanger`;
  if (exchanger !== undefined && exchanger !== null) {
    if (!isObject(exchanger)) problem(exchangerField, 'must be an object');
    else {
      unknownFields(exchanger, ['rules'], exchangerField, problem);
      const rules = exchanger.rules;
      if (rules !== undefined && rules !== null) {
        if (!Array.isArray(rules)) problem(`${exchangerField}.rules`, 'must be a list');
        else if (rules.length > MAX_RULES)
          problem(`${exchangerField}.rules`, `at most ${MAX_RULES} rules, got ${rules.length}`);
        else {
          const seen = new Map<string, number>();
          rules.forEach((raw, index) => {
            const at = `${exchangerField}.rules[${index}]`;
            const name = isObject(raw) && typeof raw.name === 'string' ? raw.name : undefined;
            const earlier = name === undefined ? undefined : seen.get(name);
            if (earlier !== undefined)
              problem(`${at}.name`, `"${name}" is already the name of rules[${earlier}]`);
            else if (name !== undefined) seen.set(name, index);
            const rule = validateRule(raw, index, at, problem);
            if (rule) config.rules.push(rule);
          });
        }
      }
    }
  }
  if (problems.length > 0) throw new InvalidConfigurationError(origin, problems);
  // Highest priority first; Array.prototype.sort is stable, so ties keep the written order.
  config.rules.sort((a, b) => b.priority - a.priority);
  return config;
}

type Report = (field: string, message: string) => void;

function validateRule(raw: unknown, index: number, at: string, report: Report): ExchangeRule | undefined {
  if (!isObject(raw)) {
    report(at, 'must be an object');
    return undefined;
  }
  let failed = false;
  const problem: Report = (field, message) => {
    failed = true;
    report(field, message);
  };
  unknownFields(raw, RULE_FIELDS, at, problem);
  const name = requiredString(raw.name, `${at}.name`, problem);
  let type: ExchangerType | undefined;
  if (raw.type === undefined) problem(`${at}.type`, `required: one of ${EXCHANGER_TYPES.join(', ')}`);
  else if (typeof raw.type !== 'string' || !(EXCHANGER_TYPES as readonly string[]).includes(raw.type))
    problem(`${at}.type`, `unknown type ${JSON.stringify(raw.type)}; one of ${EXCHANGER_TYPES.join(', ')}`);
  else type = raw.type as ExchangerType;
  let priority = 0;
  if (raw.priority !== undefined) {
    if (typeof raw.priority === 'number' && Number.isInteger(raw.priority) && Math.abs(raw.priority) < INT32)
      priority = raw.priority;
    else problem(`${at}.priority`, 'must be a whole number (32-bit); higher runs first');
  }
  const source = validateSource(raw.source, `${at}.source`, problem);

  if (type !== 'StaticMappingIdentityExchanger' && raw.target !== undefined)
    problem(`${at}.target`, 'only a StaticMappingIdentityExchanger has a target');
  if (type !== 'ExternalIdentityExchanger') {
    for (const key of EXTERNAL_ONLY) {
      if (raw[key] !== undefined) problem(`${at}.${key}`, 'only an ExternalIdentityExchanger has this field');
    }
  }
  let target: StaticTarget | undefined;
  if (type === 'StaticMappingIdentityExchanger') target = validateTarget(raw.target, `${at}.target`, problem);
  let external: ExternalService | undefined;
  if (type === 'ExternalIdentityExchanger') external = validateExternal(raw, at, problem);

  if (failed || name === undefined || !type || !source) return undefined;
  const base = { name, priority, index, source };
  if (type === 'PrivilegedIdentityExchanger') return { ...base, type };
  if (type === 'StaticMappingIdentityExchanger') return target ? { ...base, type, target } : undefined;
  return external ? { ...base, type, external } : undefined;
}

function validateSource(raw: unknown, at: string, problem: Report): RuleSource | undefined {
  if (raw === undefined || raw === null) {
    problem(
      at,
      'required: a rule without a source never matches (to match every caller, use userPattern: ".*")',
    );
    return undefined;
  }
  if (!isObject(raw)) {
    problem(at, 'must be an object');
    return undefined;
  }
  unknownFields(raw, [...SOURCE_STRINGS, ...SOURCE_PATTERNS], at, problem);
  const source: RuleSource = {};
  let matchers = 0;
  for (const key of SOURCE_STRINGS) {
    if (raw[key] === undefined) continue;
    const value = requiredString(raw[key], `${at}.${key}`, problem);
    if (value !== undefined) source[key] = value;
    matchers++;
  }
  for (const key of SOURCE_PATTERNS) {
    if (raw[key] === undefined) continue;
    matchers++;
    const text = requiredString(raw[key], `${at}.${key}`, problem);
    if (text === undefined) continue;
    const compiled = compilePattern(text);
    if (typeof compiled === 'string') problem(`${at}.${key}`, `${JSON.stringify(text)}: ${compiled}`);
    else source[key] = compiled;
  }
  if (matchers === 0) {
    problem(
      at,
      `needs at least one of ${[...SOURCE_STRINGS, ...SOURCE_PATTERNS].join(', ')} (to match every caller, use userPattern: ".*")`,
    );
  }
  return source;
}

function validateTarget(raw: unknown, at: string, problem: Report): StaticTarget | undefined {
  if (!isObject(raw)) {
    problem(
      at,
      raw === undefined
        ? 'required: the identity to impersonate (target.user, optional groups and uid)'
        : 'must be an object',
    );
    return undefined;
  }
  unknownFields(raw, ['user', 'groups', 'uid'], at, problem);
  let user: string | undefined;
  if (raw.user === undefined) {
    problem(`${at}.user`, 'required: Kubernetes refuses to impersonate groups or a uid without a user');
  } else {
    user = requiredString(raw.user, `${at}.user`, problem);
  }
  const groups: string[] = [];
  if (raw.groups !== undefined && raw.groups !== null) {
    if (!Array.isArray(raw.groups)) problem(`${at}.groups`, 'must be a list of group names');
    else if (raw.groups.length > MAX_GROUPS) problem(`${at}.groups`, `at most ${MAX_GROUPS} groups`);
    else {
      raw.groups.forEach((group, i) => {
        const value = requiredString(group, `${at}.groups[${i}]`, problem);
        if (value !== undefined) groups.push(value);
      });
    }
  }
  const uid = raw.uid === undefined ? undefined : requiredString(raw.uid, `${at}.uid`, problem);
  if (user === undefined) return undefined;
  return { user, groups, ...(uid !== undefined ? { uid } : {}) };
}

function validateExternal(
  raw: Record<string, unknown>,
  at: string,
  problem: Report,
): ExternalService | undefined {
  let url: URL | undefined;
  if (raw.url === undefined) problem(`${at}.url`, 'required: the https:// URL of the exchange service');
  else {
    const text = requiredString(raw.url, `${at}.url`, problem, 2048);
    if (text !== undefined) {
      const parsed = URL.canParse(text) ? new URL(text) : undefined;
      if (!parsed) problem(`${at}.url`, `${JSON.stringify(text)} is not a URL`);
      else if (parsed.protocol !== 'https:')
        problem(`${at}.url`, 'must be an https:// URL: the request carries the caller identity');
      else if (parsed.username || parsed.password)
        problem(`${at}.url`, 'must not hold credentials (user:password@); they would be logged and shown');
      else if (parsed.hash) problem(`${at}.url`, 'must not have a #fragment');
      else url = parsed;
    }
  }
  let caBundle: string | undefined;
  if (raw.caBundle !== undefined) {
    const text = requiredString(raw.caBundle, `${at}.caBundle`, problem, MAX_CA_BUNDLE);
    if (text !== undefined) {
      const invalid = caBundleProblem(text);
      if (invalid) problem(`${at}.caBundle`, invalid);
      else caBundle = text;
    }
  }
  const timeout = seconds(raw.timeoutSeconds, DEFAULT_TIMEOUT_SECONDS, 1, MAX_TIMEOUT_SECONDS);
  if (timeout === undefined)
    problem(`${at}.timeoutSeconds`, `must be a whole number from 1 to ${MAX_TIMEOUT_SECONDS}`);
  const ttl = seconds(raw.cacheTTLSeconds, DEFAULT_CACHE_TTL_SECONDS, 0, MAX_CACHE_TTL_SECONDS);
  if (ttl === undefined)
    problem(`${at}.cacheTTLSeconds`, `must be a whole number from 0 to ${MAX_CACHE_TTL_SECONDS}`);
  if (!url || timeout === undefined || ttl === undefined) return undefined;
  return { url, ...(caBundle ? { caBundle } : {}), timeoutMs: timeout * 1000, cacheTtlMs: ttl * 1000 };
}

/** Why a PEM bundle cannot be used as trust roots, or undefined when every block is a certificate. */
function caBundleProblem(pem: string): string | undefined {
  const blocks = pem.match(/-----BEGIN [^-]+-----[\s\S]*?-----END [^-]+-----/g) ?? [];
  if (blocks.length === 0) return 'holds no PEM certificate';
  for (const block of blocks) {
    if (!block.startsWith('-----BEGIN CERTIFICATE-----')) return 'must hold only CERTIFICATE blocks';
    try {
      new X509Certificate(block);
    } catch {
      return 'holds a certificate that cannot be parsed';
    }
  }
  return undefined;
}

function seconds(raw: unknown, fallback: number, min: number, max: number): number | undefined {
  if (raw === undefined) return fallback;
  return typeof raw === 'number' && Number.isInteger(raw) && raw >= min && raw <= max ? raw : undefined;
}

function requiredString(raw: unknown, at: string, problem: Report, max = MAX_STRING): string | undefined {
  if (raw === undefined || raw === null) {
    problem(at, 'required');
    return undefined;
  }
  if (typeof raw !== 'string') {
    problem(at, `must be a string, got ${typeof raw} (quote it in YAML)`);
    return undefined;
  }
  if (raw.length === 0) {
    problem(at, 'must not be empty');
    return undefined;
  }
  if (raw.length > max) {
    problem(at, `longer than ${max} characters`);
    return undefined;
  }
  return raw;
}

function unknownFields(obj: Record<string, unknown>, known: string[], at: string, problem: Report): void {
  for (const key of Object.keys(obj)) {
    if (!known.includes(key)) problem(`${at}.${key}`, `unknown field; known fields: ${known.join(', ')}`);
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
