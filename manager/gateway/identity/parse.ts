/**
 * Reads a ClusterGatewayProxyConfiguration document as the Go original
 * accepts it (the --cluster-gateway-proxy-config file, the
 * cluster.core.oam.dev/cluster-gateway-proxy-configuration annotation):
 * YAML or JSON, apiVersion and kind optional, and when given either the
 * original's cluster.core.oam.dev/v1alpha1 or this project's CRD group.
 *
 * YAML 1.1 scalars, as Go's sigs.k8s.io/yaml reads them (`yes` is true),
 * so a document means the same here as there.
 */
import { readFile } from 'node:fs/promises';
import { load, YAML11_SCHEMA } from 'js-yaml';
import {
  CONFIGURATION_API_VERSION,
  CONFIGURATION_KIND,
  type FieldProblem,
  InvalidConfigurationError,
  ORIGINAL_API_VERSION,
  type ProxyConfiguration,
} from './configuration.ts';
import { validateSpec } from './validate.ts';

/** Kubernetes caps all annotations of an object at 256 KiB together. */
const MAX_DOCUMENT_BYTES = 256 * 1024;
const TOP_LEVEL_FIELDS = ['apiVersion', 'kind', 'metadata', 'spec'];

/** Throws InvalidConfigurationError naming the field (or the YAML position) at fault. */
export function parseConfiguration(text: string, origin: string): ProxyConfiguration {
  if (Buffer.byteLength(text) > MAX_DOCUMENT_BYTES) {
    throw new InvalidConfigurationError(origin, [
      { field: '(document)', message: `larger than ${MAX_DOCUMENT_BYTES} bytes` },
    ]);
  }
  let doc: unknown;
  try {
    // Aliases are bounded: each one is a shared reference that validation walks again.
    doc = load(text, { schema: YAML11_SCHEMA, maxAliases: 100, maxDepth: 20 });
  } catch (err) {
    const message = (err as Error).message.split('\n')[0] ?? 'cannot be parsed';
    throw new InvalidConfigurationError(origin, [
      { field: '(document)', message: `not valid YAML or JSON: ${message}` },
    ]);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw new InvalidConfigurationError(origin, [
      { field: '(document)', message: `must be a ${CONFIGURATION_KIND} object` },
    ]);
  }
  const obj = doc as Record<string, unknown>;
  const problems: FieldProblem[] = [];
  for (const key of Object.keys(obj)) {
    if (!TOP_LEVEL_FIELDS.includes(key))
      problems.push({ field: key, message: `unknown field; known fields: ${TOP_LEVEL_FIELDS.join(', ')}` });
  }
  if (
    obj.apiVersion !== undefined &&
    obj.apiVersion !== ORIGINAL_API_VERSION &&
    obj.apiVersion !== CONFIGURATION_API_VERSION
  ) {
    problems.push({
      field: 'apiVersion',
      message: `${JSON.stringify(obj.apiVersion)}: must be ${ORIGINAL_API_VERSION} or ${CONFIGURATION_API_VERSION}`,
    });
  }
  if (obj.kind !== undefined && obj.kind !== CONFIGURATION_KIND) {
    problems.push({ field: 'kind', message: `${JSON.stringify(obj.kind)}: must be ${CONFIGURATION_KIND}` });
  }
  try {
    const config = validateSpec(obj.spec, origin);
    if (problems.length === 0) return config;
  } catch (err) {
    if (!(err instanceof InvalidConfigurationError)) throw err;
    problems.push(...err.problems);
  }
  throw new InvalidConfigurationError(origin, problems);
}

/** The --cluster-gateway-proxy-config file; throws with the path and every problem. */
export async function loadConfigurationFile(path: string): Promise<ProxyConfiguration> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read --cluster-gateway-proxy-config ${path}: ${(err as Error).message}`);
  }
  return parseConfiguration(text, `--cluster-gateway-proxy-config ${path}`);
}
