/**
 * The config spec hash OCM compares to tell whether an addon runs with the
 * config it should (addon-framework pkg/utils/helpers.go GetSpecHash): the
 * sha256, in hex, of Go's `json.Marshal` of every top-level field of the
 * config except apiVersion, kind, metadata and status — for an
 * AddOnDeploymentConfig, `{"spec":{...}}`.
 *
 * OCM's addon-manager copies these hashes around (ClusterManagementAddOn ->
 * ManagedClusterAddOn) but does not compute them: each addon's own manager
 * does, so the hash must be byte-for-byte what Go writes, or the deploy
 * work's config-spec-hash annotation never matches and OCM's Progressing
 * condition never completes. Pure.
 */
import { createHash } from 'node:crypto';

const skipped = new Set(['apiVersion', 'kind', 'metadata', 'status']);

export function configSpecHash(config: Record<string, unknown>): string {
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(config)) if (!skipped.has(key)) fields[key] = value;
  return createHash('sha256').update(goJson(fields)).digest('hex');
}

/**
 * Go's encoding/json output for a value decoded from JSON (maps, slices,
 * strings, numbers, booleans, null): map keys sorted by their UTF-8 bytes,
 * no whitespace, `<`, `>`, `&`, U+2028 and U+2029 escaped as \uXXXX, invalid
 * UTF-16 (a lone surrogate) written as U+FFFD, numbers as strconv writes a
 * float64 (JavaScript's shortest round-trip form, the same digits, with Go's
 * exponent spelling).
 */
export function goJson(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return goString(value);
  if (typeof value === 'number') return goNumber(value);
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (Array.isArray(value)) return `[${value.map(goJson).join(',')}]`;
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
    return `{${entries.map(([k, v]) => `${goString(k)}:${goJson(v)}`).join(',')}}`;
  }
  throw new TypeError(`cannot encode a ${typeof value} as JSON`);
}

function goString(text: string): string {
  // toWellFormed: a lone surrogate becomes U+FFFD, as Go writes invalid UTF-8.
  return JSON.stringify(text.toWellFormed()).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

function goNumber(n: number): string {
  if (!Number.isFinite(n)) throw new TypeError(`json: unsupported value: ${n}`);
  // Same shortest digits, same switch to exponent form (at 1e21 and 1e-6), same exponent spelling
  // (encoding/json trims Go's e-07 to e-7, as JavaScript writes it).
  return Object.is(n, -0) ? '-0' : String(n);
}
