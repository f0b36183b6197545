/**
 * GET and LIST of clustergateways (and GET of the health subresource),
 * from the in-memory directory, in whatever representation the client
 * negotiated. Watches go to watch.ts: routes.ts sends a collection GET there
 * when it was authorized as a watch (auth/request-attributes.ts).
 *
 * Before every source has synced, a missing name or a list would be a lie
 * ("that cluster does not exist"), so those answer 503 and clients retry.
 */
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import type { ClusterDirectory, ClusterTarget } from '../clusters/cluster.ts';
import { renderClusterGateway, renderClusterGatewayList } from './clustergateway.ts';
import { parseListOptions } from './list-options.ts';
import { group, resource } from './names.ts';
import { negotiateRepresentation, type Representation } from './negotiate.ts';
import { type ApiResponse, errorResponse, jsonResponse } from './response.ts';
import { parseIncludeObject, partialObjectMetadata, renderTable } from './table.ts';
import { awaitVersion, invalidVersion, parseVersion, tooOld } from './versions.ts';

export interface ReadRequest {
  query: URLSearchParams;
  accept?: string;
  /** For Age cells; defaults to the clock. */
  now?: number;
}

export function notFound(name: string): StatusError {
  return new StatusError(
    failureStatus(404, `${resource}.${group} ${JSON.stringify(name)} not found`, {
      name,
      group,
      kind: resource,
    }),
  );
}

export function notSynced(): StatusError {
  return new StatusError(
    failureStatus(503, 'the cluster gateway has not finished loading clusters; retry shortly'),
  );
}

/** GET /apis/cluster.core.oam.dev/v1alpha1/clustergateways/{name} (and .../{name}/health). */
export function getClusterGateway(
  directory: ClusterDirectory,
  name: string,
  request: ReadRequest,
): ApiResponse {
  try {
    const representation = negotiateRepresentation(request.accept, 'object');
    const cluster = directory.get(name);
    if (!cluster) throw directory.synced ? notFound(name) : notSynced();
    return render([cluster], cluster.resourceVersion, representation, request, 'object');
  } catch (err) {
    return errorResponse(err);
  }
}

/**
 * GET /apis/cluster.core.oam.dev/v1alpha1/clustergateways (without watch), from the cache, at a
 * version a watch on any replica can start from. A resourceVersion given is "not older than" (the
 * default and NotOlderThan: waited for, api/versions.ts) or Exact (served only when it is the
 * current one: there is no older state to serve, so an older one is 410 Gone).
 */
export async function listClusterGateways(
  directory: ClusterDirectory,
  request: ReadRequest,
): Promise<ApiResponse> {
  try {
    const representation = negotiateRepresentation(request.accept, 'list');
    const options = parseListOptions(request.query);
    if (!directory.synced) throw notSynced();
    const rv = options.resourceVersion;
    if (rv !== '' && rv !== '0') {
      const wanted = parseVersion(rv);
      if (wanted === undefined) throw invalidVersion(rv);
      await awaitVersion(directory, wanted);
      if (options.resourceVersionMatch === 'Exact' && Number(directory.version) !== wanted) {
        throw tooOld(rv, directory.version);
      }
    }
    // Read the version first: a concurrent change then shows up as an event after it.
    const version = directory.version;
    const clusters = directory
      .list()
      .filter(
        (c) =>
          options.labelSelector.matches(c.labels) &&
          options.fieldSelector.matches({ 'metadata.name': c.name }),
      );
    return render(clusters, version, representation, request, 'list');
  } catch (err) {
    return errorResponse(err);
  }
}

function render(
  clusters: ClusterTarget[],
  resourceVersion: string,
  representation: Representation,
  request: ReadRequest,
  shape: 'object' | 'list',
): ApiResponse {
  switch (representation.as) {
    case 'Table':
      return jsonResponse(
        renderTable(clusters, {
          version: representation.version,
          includeObject: parseIncludeObject(request.query.get('includeObject')),
          resourceVersion,
          ...(request.now !== undefined ? { now: request.now } : {}),
        }),
      );
    case 'PartialObjectMetadata': {
      const items = clusters.map((c) => partialObjectMetadata(c, representation.version));
      if (shape === 'object' && items[0]) return jsonResponse(items[0]);
      return jsonResponse({
        kind: 'PartialObjectMetadataList',
        apiVersion: `meta.k8s.io/${representation.version}`,
        metadata: { resourceVersion },
        items,
      });
    }
    default: {
      const [first] = clusters;
      if (shape === 'object' && first) return jsonResponse(renderClusterGateway(first));
      return jsonResponse(renderClusterGatewayList(clusters, resourceVersion));
    }
  }
}
