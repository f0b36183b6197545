/**
 * Which source annotations may be shown on a ClusterGateway.
 *
 * Annotations are copied from credential Secrets, and a Secret created with
 * `kubectl apply` carries its whole manifest, token and key included, in
 * `kubectl.kubernetes.io/last-applied-configuration`. Anything that looks
 * like secret material, by key or by value, is dropped here so that no API
 * response and no log line built from a ClusterTarget can leak it.
 */

const droppedKeys = new Set(['kubectl.kubernetes.io/last-applied-configuration']);

/** Key names (after any prefix) that suggest a secret, e.g. "token", "tls.key", "client-password". */
const secretishName = /(token|passw(or)?d|secret|private|credential|(^|[._-])key$)/i;

/** Values that are secret material whatever their key: PEM private keys and JWTs. */
const secretishValue = [/-----BEGIN [A-Z ]*PRIVATE KEY-----/, /\beyJ[\w-]{5,}\.eyJ[\w-]{5,}\.[\w-]+/];

export function isSecretishAnnotation(key: string, value: string): boolean {
  if (droppedKeys.has(key)) return true;
  const name = key.slice(key.lastIndexOf('/') + 1);
  if (secretishName.test(name)) return true;
  return secretishValue.some((pattern) => pattern.test(value));
}

export function publicAnnotations(annotations: Record<string, string> | undefined): Record<string, string> {
  const result: Record<string, string> = {};
  for (const [key, value] of Object.entries(annotations ?? {})) {
    if (!isSecretishAnnotation(key, value)) result[key] = value;
  }
  return result;
}
