/**
 * Discovery documents for cluster.core.oam.dev/v1alpha1.
 *
 * The aggregator (1.30+) first asks this server for `GET /apis` with
 * `Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`
 * (v2beta1 as a second choice) and no plain JSON fallback, and only if the
 * response's Content-Type does not carry that GVK does it fall back to the
 * legacy `GET /apis/<group>/<version>` APIResourceList. Both are served; the
 * aggregated one with an ETag so its once-a-minute refresh can be a 304.
 *
 * Resource facts as the Go apiserver would report them:
 * - clustergateways: cluster-scoped, get/list (the original) + watch (new);
 * - clustergateways/proxy: a connecter with methods GET, POST, PUT, PATCH,
 *   DELETE, HEAD, OPTIONS, which the installer maps to the verbs
 *   create, delete, get, patch, update (HEAD and OPTIONS have no verb), and
 *   whose kind is the connect options type, ClusterGatewayProxyOptions;
 * - clustergateways/health: getter + updater: get, patch, update.
 * The original registers no short names or categories.
 */
import { createHash } from 'node:crypto';
import { acceptsJson, parseAccept } from './accept.ts';
import { group, groupVersion, kind, proxyOptionsKind, resource, singular, version } from './names.ts';
import { type ApiResponse, etagMatches, jsonResponse, notModified } from './response.ts';

interface SubresourceFacts {
  name: string;
  kind: string;
  verbs: string[];
}

const resourceVerbs = ['get', 'list', 'watch'];
const subresources: SubresourceFacts[] = [
  { name: 'health', kind, verbs: ['get', 'patch', 'update'] },
  { name: 'proxy', kind: proxyOptionsKind, verbs: ['create', 'delete', 'get', 'patch', 'update'] },
];

const groupVersionForDiscovery = { groupVersion, version };

export function apiGroup() {
  return {
    kind: 'APIGroup',
    apiVersion: 'v1',
    name: group,
    versions: [groupVersionForDiscovery],
    preferredVersion: groupVersionForDiscovery,
  };
}

export function apiGroupList() {
  const { kind: _kind, apiVersion: _apiVersion, ...entry } = apiGroup();
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: [entry] };
}

export function apiResourceList() {
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion,
    resources: [
      { name: resource, singularName: singular, namespaced: false, kind, verbs: resourceVerbs },
      ...subresources.map((s) => ({
        name: `${resource}/${s.name}`,
        singularName: '',
        namespaced: false,
        kind: s.kind,
        verbs: s.verbs,
      })),
    ],
  };
}

export type DiscoveryVersion = 'v2' | 'v2beta1';

export function apiGroupDiscoveryList(discoveryVersion: DiscoveryVersion) {
  const gvk = (k: string) => ({ group, version, kind: k });
  return {
    kind: 'APIGroupDiscoveryList',
    apiVersion: `apidiscovery.k8s.io/${discoveryVersion}`,
    metadata: {},
    items: [
      {
        metadata: { name: group },
        versions: [
          {
            version,
            resources: [
              {
                resource,
                responseKind: gvk(kind),
                scope: 'Cluster',
                singularResource: singular,
                verbs: resourceVerbs,
                subresources: subresources.map((s) => ({
                  subresource: s.name,
                  responseKind: gvk(s.kind),
                  verbs: s.verbs,
                })),
              },
            ],
            freshness: 'Current',
          },
        ],
      },
    ],
  };
}

/** The aggregated discovery version the Accept header asks for, if any (in its order of preference). */
export function wantsAggregatedDiscovery(accept: string | undefined): DiscoveryVersion | undefined {
  for (const range of parseAccept(accept)) {
    if (!acceptsJson(range)) continue;
    const { g, v, as } = range.params;
    if (as === undefined) return undefined; // plain JSON preferred: the legacy document
    if (g === 'apidiscovery.k8s.io' && as === 'APIGroupDiscoveryList' && (v === 'v2' || v === 'v2beta1'))
      return v;
  }
  return undefined;
}

function etagOf(body: unknown): string {
  return `"${createHash('sha256').update(JSON.stringify(body)).digest('hex').slice(0, 32)}"`;
}

export interface DiscoveryRequest {
  accept?: string;
  ifNoneMatch?: string;
}

/**
 * The discovery document for `path`, or undefined when the path is not a
 * discovery path (the caller routes elsewhere). Paths are without query.
 */
export function discoveryResponse(path: string, request: DiscoveryRequest = {}): ApiResponse | undefined {
  const normalized = path.replace(/\/+$/, '') || '/';
  if (normalized === '/apis') {
    const aggregated = wantsAggregatedDiscovery(request.accept);
    if (!aggregated) return jsonResponse(apiGroupList());
    const body = apiGroupDiscoveryList(aggregated);
    const etag = etagOf(body);
    if (etagMatches(etag, request.ifNoneMatch)) return notModified(etag);
    // The aggregator only accepts the document if the Content-Type names its GVK.
    return jsonResponse(body, {
      contentType: `application/json;g=apidiscovery.k8s.io;v=${aggregated};as=APIGroupDiscoveryList`,
      headers: { etag, vary: 'Accept' },
    });
  }
  if (normalized === `/apis/${group}`) return jsonResponse(apiGroup());
  if (normalized === `/apis/${groupVersion}`) return jsonResponse(apiResourceList());
  return undefined;
}
