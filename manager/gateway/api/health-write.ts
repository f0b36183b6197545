/**
 * PUT and PATCH of clustergateways/{name}/health: how an operator (or the
 * original's clients: its generated clientset's UpdateHealthiness, its
 * addon health prober, its e2e suite) marks a cluster healthy or not.
 *
 * As in the original (clustergateway_health.go), only status.healthy and
 * status.healthyReason are taken from the object; they are recorded as the
 * `status.cluster.core.oam.dev/healthy` and `.../healthy-reason`
 * annotations (HealthMarkStore, health/annotation-store.ts). Like any
 * Kubernetes status subresource, other changes in the body are ignored.
 *
 * Unlike the original, which overwrote whatever it found:
 * - a stale metadata.resourceVersion is a 409 (optimistic concurrency, and
 *   the write itself is conditional on the Secret the object was built from);
 * - PATCH works (JSON, merge and strategic merge patch) on the object GET
 *   returns, so a client patches what it sees;
 * - a name, kind or apiVersion that does not match, or a body that is not a
 *   ClusterGateway, is a 400 and a too long reason a 422, each saying what to fix;
 * - dryRun=All validates without recording.
 * The response is the ClusterGateway once this replica's directory shows
 * the change (its new resourceVersion), with the status that was written,
 * as the original answers: its own e2e suite PUTs `healthy: true` and
 * expects to read `true` back. A later GET shows the merged view, where an
 * operator's unhealthy mark wins over the prober and the prober over a
 * healthy mark (clusters/health-precedence.ts, docs/install.md "Health").
 * The caller checks the resourceVersion after api/fresh-read.ts, so a version
 * another replica handed out is compared with what the hub holds now.
 */
import type { IncomingMessage } from 'node:http';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import type { ClusterDirectory } from '../clusters/cluster.ts';
import { renderClusterGateway } from './clustergateway.ts';
import { group, groupVersion, kind, resource } from './names.ts';
import { negotiateRepresentation } from './negotiate.ts';
import { applyPatch, patchContentTypes, patchTypeOf } from './patch.ts';
import { getClusterGateway, notFound, notSynced } from './read.ts';
import { type ApiResponse, errorResponse, jsonResponse } from './response.ts';

/** What a health write records: the original's ClusterGatewayStatus. */
export interface HealthMark {
  healthy: boolean;
  /** Written as given, even empty (the original writes the annotation either way). */
  reason: string;
}

export interface HealthMarkStore {
  /**
   * Records `mark` for cluster `name` and resolves once the directory shows it.
   * `conditional`: fail with a 409 StatusError if the cluster's source object
   * changed since the directory last saw it (the client sent a resourceVersion).
   */
  record(name: string, mark: HealthMark, options: { conditional: boolean }): Promise<void>;
}

export interface HealthWriteRequest {
  method: string;
  name: string;
  contentType?: string | undefined;
  body: string;
  query: URLSearchParams;
  accept?: string | undefined;
}

/** Longer reasons would be repeated in every list, watch event and table row. */
export const maxReasonLength = 1024;
/** Far above any ClusterGateway; Kubernetes allows 3 MiB for any object. */
export const maxBodyBytes = 256 * 1024;

const writeContentTypes = ['application/json'];

export async function writeClusterGatewayHealth(
  directory: ClusterDirectory,
  store: HealthMarkStore,
  request: HealthWriteRequest,
): Promise<ApiResponse> {
  try {
    const { name } = request;
    const dryRun = parseDryRun(request.query);
    const target = directory.get(name);
    if (!target) throw directory.synced ? notFound(name) : notSynced();
    const current = renderClusterGateway(target);

    let updated: unknown;
    let conditional: boolean;
    if (request.method === 'PUT') {
      updated = parsePutBody(request.contentType, request.body);
      conditional = hasResourceVersion(updated);
    } else if (request.method === 'PATCH') {
      const type = patchTypeOf(request.contentType);
      if (!type) throw unsupportedMediaType(request.contentType, Object.keys(patchContentTypes));
      updated = applyPatch(type, current, request.body);
      conditional = patchNamesResourceVersion(request.body);
    } else {
      throw new StatusError(
        failureStatus(405, `${request.method} is not supported on clustergateways/health`),
      );
    }

    const mark = validate(updated, name);
    const resourceVersion = (updated as { metadata?: { resourceVersion?: string } }).metadata
      ?.resourceVersion;
    if (resourceVersion && resourceVersion !== target.resourceVersion) throw conflict(name);

    if (dryRun) {
      current.status = { healthy: mark.healthy, ...(mark.reason ? { healthyReason: mark.reason } : {}) };
      return jsonResponse(current);
    }
    await store.record(name, mark, { conditional });
    const written = directory.get(name);
    if (!written || negotiateRepresentation(request.accept, 'object').as !== 'object') {
      return getClusterGateway(directory, name, { query: request.query, accept: request.accept });
    }
    const answer = renderClusterGateway(written);
    answer.status = {
      ...answer.status,
      healthy: mark.healthy,
      ...(mark.reason ? { healthyReason: mark.reason } : {}),
    };
    if (!mark.reason) delete answer.status.healthyReason;
    return jsonResponse(answer);
  } catch (err) {
    return errorResponse(err);
  }
}

/** Reads a request body of at most `limit` bytes; a larger one is a 413. */
export async function readRequestBody(req: IncomingMessage, limit = maxBodyBytes): Promise<string> {
  const declared = Number(req.headers['content-length']);
  if (declared > limit) throw tooLarge(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      req.resume();
      throw tooLarge(limit);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function tooLarge(limit: number): StatusError {
  return new StatusError(
    failureStatus(413, `the request body is larger than ${limit} bytes`, undefined, 'RequestEntityTooLarge'),
  );
}

function parseDryRun(query: URLSearchParams): boolean {
  const values = query.getAll('dryRun');
  for (const value of values) {
    if (value !== 'All') {
      throw new StatusError(
        failureStatus(422, `dryRun: Unsupported value: ${JSON.stringify(value)}: supported values: "All"`),
      );
    }
  }
  return values.length > 0;
}

function parsePutBody(contentType: string | undefined, body: string): unknown {
  const mediaType = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  // No Content-Type is read as JSON, which is what every client of this API sends.
  if (mediaType && !writeContentTypes.includes(mediaType)) {
    throw unsupportedMediaType(contentType, writeContentTypes);
  }
  try {
    return JSON.parse(body);
  } catch (err) {
    throw badRequest(`the request body is not valid JSON: ${(err as Error).message}`);
  }
}

/**
 * Whether a patch itself sets metadata.resourceVersion: only then is it a
 * precondition. Otherwise the patched object merely carries the current
 * one, and the patch applies to whatever is current (Kubernetes retries an
 * unconditional patch on conflicts rather than failing it).
 */
function patchNamesResourceVersion(body: string): boolean {
  const patch = JSON.parse(body) as unknown;
  if (Array.isArray(patch)) {
    return patch.some(
      (op) => isObject(op) && typeof op.path === 'string' && /^\/metadata(\/resourceVersion)?$/.test(op.path),
    );
  }
  return isObject(patch) && isObject(patch.metadata) && patch.metadata.resourceVersion !== undefined;
}

function hasResourceVersion(object: unknown): boolean {
  return Boolean((object as { metadata?: { resourceVersion?: unknown } } | null)?.metadata?.resourceVersion);
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Checks the object as the Go apiserver's decoding and update handler would; returns the mark. */
export function validate(object: unknown, name: string): HealthMark {
  if (!isObject(object))
    throw badRequest(`the request body must be a ${kind} object, got ${describe(object)}`);
  const { apiVersion, kind: objectKind, metadata, status } = object;
  if (apiVersion !== undefined && apiVersion !== groupVersion) {
    throw badRequest(
      `the API version in the data (${String(apiVersion)}) does not match the expected API version (${groupVersion})`,
    );
  }
  if (objectKind !== undefined && objectKind !== kind) {
    throw badRequest(
      `the object provided is unrecognized (must be of type ${kind}): kind ${JSON.stringify(objectKind)}`,
    );
  }
  if (metadata !== undefined && !isObject(metadata)) {
    throw badRequest(`metadata must be an object, got ${describe(metadata)}`);
  }
  const objectName = metadata?.name;
  if (objectName !== undefined && typeof objectName !== 'string') {
    throw badRequest(`metadata.name must be a string, got ${describe(objectName)}`);
  }
  if ((objectName ?? '') !== name) {
    throw badRequest(
      `the name of the object (${objectName ?? ''}) does not match the name on the URL (${name})`,
    );
  }
  const resourceVersion = metadata?.resourceVersion;
  if (resourceVersion !== undefined && typeof resourceVersion !== 'string') {
    throw badRequest(`metadata.resourceVersion must be a string, got ${describe(resourceVersion)}`);
  }
  if (status !== undefined && status !== null && !isObject(status)) {
    throw badRequest(`status must be an object, got ${describe(status)}`);
  }
  // Go's zero values: no status.healthy is false, no reason is "" (the original's decoding).
  const healthy = status?.healthy ?? false;
  const reason = status?.healthyReason ?? '';
  if (typeof healthy !== 'boolean') {
    throw badRequest(`status.healthy must be a boolean (true or false), got ${describe(healthy)}`);
  }
  if (typeof reason !== 'string') {
    throw badRequest(`status.healthyReason must be a string, got ${describe(reason)}`);
  }
  if (reason.length > maxReasonLength) {
    throw new StatusError(
      failureStatus(
        422,
        `${kind}.${group} ${JSON.stringify(name)} is invalid: status.healthyReason: Too long: may not be more than ${maxReasonLength} characters`,
        { name, group, kind },
      ),
    );
  }
  return { healthy, reason };
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${JSON.stringify(value)}`;
}

function badRequest(message: string): StatusError {
  return new StatusError(failureStatus(400, message));
}

function unsupportedMediaType(contentType: string | undefined, accepted: string[]): StatusError {
  return new StatusError(
    failureStatus(
      415,
      `the body of the request was in an unknown format (${contentType || 'no Content-Type'}) - accepted media types include: ${accepted.join(', ')}`,
    ),
  );
}

/** The apiserver's optimistic-concurrency failure, word for word, so clients retry on it. */
export function conflict(name: string): StatusError {
  return new StatusError(
    failureStatus(
      409,
      `Operation cannot be fulfilled on ${resource}.${group} ${JSON.stringify(name)}: the object has been modified; please apply your changes to the latest version and try again`,
      { name, group, kind: resource },
    ),
  );
}
