/**
 * OpenAPI for cluster.core.oam.dev/v1alpha1.
 *
 * - /openapi/v2: the aggregator downloads it (with If-None-Match) and merges
 *   it into the hub's spec. Definitions are named like the Go apiserver's;
 *   where a meta/v1 definition differs from the hub's copy the aggregator
 *   renames ours, which is harmless.
 * - /openapi/v3: the index the aggregator reads, one group-version document
 *   at /openapi/v3/apis/cluster.core.oam.dev/v1alpha1, addressed by a content
 *   hash like Kubernetes' own (a stale hash redirects to the current one).
 *   kubectl explain (v3) finds ClusterGateway by its
 *   x-kubernetes-group-version-kind and follows allOf/$ref into nested fields.
 */
import { createHash } from 'node:crypto';
import { group, groupVersion, kind, resource, version } from './names.ts';
import {
  gatewayPrefix,
  gatewaySchemas,
  isRef,
  metaPrefix,
  metaSchemas,
  type Ref,
  type Schema,
} from './openapi-schemas.ts';
import { patchContentTypes } from './patch.ts';
import { type ApiResponse, etagMatches, jsonResponse, notModified } from './response.ts';

type Json = Record<string, unknown>;
type Flavour = 'v2' | 'v3';

function refPath(name: string, flavour: Flavour): string {
  return flavour === 'v2' ? `#/definitions/${name}` : `#/components/schemas/${name}`;
}

/** A referring property: v2 puts $ref next to the description; v3 wraps it in allOf as Kubernetes does. */
function renderRef(ref: Ref, flavour: Flavour): Json {
  const $ref = refPath(ref.ref, flavour);
  if (flavour === 'v2') return { $ref, ...(ref.description ? { description: ref.description } : {}) };
  return { allOf: [{ $ref }], ...(ref.description ? { description: ref.description } : {}) };
}

function renderSchema(schema: Schema, flavour: Flavour): Json {
  const out: Json = {};
  if (schema.description) out.description = schema.description;
  if (schema.type) out.type = schema.type;
  if (schema.format) out.format = schema.format;
  if (schema.enum) out.enum = schema.enum;
  if (schema.required) out.required = schema.required;
  if (schema.properties) {
    out.properties = Object.fromEntries(
      Object.entries(schema.properties).map(([name, value]) => [
        name,
        isRef(value) ? renderRef(value, flavour) : renderSchema(value, flavour),
      ]),
    );
  }
  if (schema.items) {
    // Array items are plain references in both versions.
    out.items = isRef(schema.items)
      ? { $ref: refPath(schema.items.ref, flavour) }
      : renderSchema(schema.items, flavour);
  }
  if (schema.additionalProperties)
    out.additionalProperties = renderSchema(schema.additionalProperties, flavour);
  Object.assign(out, schema.extensions);
  return out;
}

function allSchemas(flavour: Flavour): Json {
  const entries = [
    ...Object.entries(gatewaySchemas).map(([name, s]) => [`${gatewayPrefix}${name}`, s] as const),
    ...Object.entries(metaSchemas).map(([name, s]) => [`${metaPrefix}${name}`, s] as const),
  ];
  return Object.fromEntries(entries.map(([name, schema]) => [name, renderSchema(schema, flavour)]));
}

const base = `/apis/${groupVersion}/${resource}`;
const opSuffix = 'ClusterCoreOamDevV1alpha1ClusterGateway';
const gvkExtension = { 'x-kubernetes-group-version-kind': { group, kind, version } };

interface Param {
  name: string;
  in: 'query' | 'path';
  description: string;
  type: 'string' | 'boolean' | 'integer';
}

const nameParam: Param = {
  name: 'name',
  in: 'path',
  description: 'name of the ClusterGateway',
  type: 'string',
};
const pathParam: Param = { name: 'path', in: 'path', description: 'path to the resource', type: 'string' };
const listParams: Param[] = [
  {
    name: 'labelSelector',
    in: 'query',
    description: 'A selector to restrict the list of returned objects by their labels.',
    type: 'string',
  },
  {
    name: 'fieldSelector',
    in: 'query',
    description: 'A selector to restrict the list of returned objects by their fields (metadata.name).',
    type: 'string',
  },
  {
    name: 'watch',
    in: 'query',
    description:
      'Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.',
    type: 'boolean',
  },
  {
    name: 'allowWatchBookmarks',
    in: 'query',
    description: 'Requests watch events with type "BOOKMARK".',
    type: 'boolean',
  },
  {
    name: 'resourceVersion',
    in: 'query',
    description:
      'Where a watch starts: "" or "0" sends the current state first; a list\'s resourceVersion resumes after it.',
    type: 'string',
  },
  { name: 'timeoutSeconds', in: 'query', description: 'Timeout for the list/watch call.', type: 'integer' },
  {
    name: 'sendInitialEvents',
    in: 'query',
    description:
      'With watch=true, send the current state followed by a bookmark annotated k8s.io/initial-events-end.',
    type: 'boolean',
  },
];

interface Operation {
  method: 'get' | 'put' | 'patch' | 'post' | 'delete' | 'head' | 'options';
  id: string;
  action: string;
  description: string;
  params: Param[];
  /** Response (and for put/patch, request) schema name; undefined means a string payload. */
  schema?: string;
}

interface PathItem {
  path: string;
  params: Param[];
  operations: Operation[];
}

const connectMethods = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options'] as const;
const title = (s: string) => s[0]?.toUpperCase() + s.slice(1);

function connectOperations(suffix: string, description: string): Operation[] {
  return connectMethods.map((method) => ({
    method,
    id: `connect${title(method)}${opSuffix}Proxy${suffix}`,
    action: 'connect',
    description: `connect ${method.toUpperCase()} requests to proxy of ClusterGateway${description}`,
    params: [],
  }));
}

const pathItems: PathItem[] = [
  {
    path: base,
    params: [],
    operations: [
      {
        method: 'get',
        id: `list${opSuffix}`,
        action: 'list',
        description: 'list or watch objects of kind ClusterGateway',
        params: listParams,
        schema: `${gatewayPrefix}ClusterGatewayList`,
      },
    ],
  },
  {
    path: `${base}/{name}`,
    params: [nameParam],
    operations: [
      {
        method: 'get',
        id: `read${opSuffix}`,
        action: 'get',
        description: 'read the specified ClusterGateway',
        params: [],
        schema: `${gatewayPrefix}ClusterGateway`,
      },
    ],
  },
  {
    path: `${base}/{name}/health`,
    params: [nameParam],
    operations: [
      {
        method: 'get',
        id: `read${opSuffix}Health`,
        action: 'get',
        description: 'read health of the specified ClusterGateway',
        params: [],
        schema: `${gatewayPrefix}ClusterGateway`,
      },
      {
        method: 'put',
        id: `replace${opSuffix}Health`,
        action: 'put',
        description: 'replace health of the specified ClusterGateway',
        params: [],
        schema: `${gatewayPrefix}ClusterGateway`,
      },
      {
        method: 'patch',
        id: `patch${opSuffix}Health`,
        action: 'patch',
        description: 'partially update health of the specified ClusterGateway',
        params: [],
        schema: `${gatewayPrefix}ClusterGateway`,
      },
    ],
  },
  { path: `${base}/{name}/proxy`, params: [nameParam], operations: connectOperations('', '') },
  {
    path: `${base}/{name}/proxy/{path}`,
    params: [nameParam, pathParam],
    operations: connectOperations('WithPath', ': the path is forwarded to the cluster'),
  },
];

function v2Paths(): Json {
  const paths: Json = {};
  for (const item of pathItems) {
    const entry: Json = {
      parameters: item.params.map((p) => ({ ...p, required: true, uniqueItems: true })),
    };
    for (const op of item.operations) {
      const schema = op.schema ? { $ref: refPath(op.schema, 'v2') } : { type: 'string' };
      entry[op.method] = {
        description: op.description,
        operationId: op.id,
        // What health-write.ts accepts: a PATCH needs one of the patch types (patch.ts).
        consumes: op.method === 'patch' ? Object.keys(patchContentTypes) : ['*/*'],
        produces: op.action === 'connect' ? ['*/*'] : ['application/json', 'application/json;stream=watch'],
        schemes: ['https'],
        tags: [`cluster${version}`],
        parameters: [
          ...op.params.map((p) => ({ ...p, uniqueItems: true })),
          ...(op.method === 'put' || op.method === 'patch'
            ? [
                {
                  name: 'body',
                  in: 'body',
                  required: true,
                  schema: op.action === 'patch' ? { type: 'object' } : schema,
                },
              ]
            : []),
        ],
        responses: { '200': { description: 'OK', schema }, '401': { description: 'Unauthorized' } },
        'x-kubernetes-action': op.action,
        ...gvkExtension,
      };
    }
    paths[item.path] = entry;
  }
  return paths;
}

function v3Param(p: Param): Json {
  return {
    name: p.name,
    in: p.in,
    description: p.description,
    ...(p.in === 'path' ? { required: true } : {}),
    schema: { type: p.type, uniqueItems: true },
  };
}

function v3Paths(): Json {
  const paths: Json = {};
  for (const item of pathItems) {
    const entry: Json = { parameters: item.params.map(v3Param) };
    for (const op of item.operations) {
      const schema = op.schema ? { $ref: refPath(op.schema, 'v3') } : { type: 'string' };
      const types = op.action === 'connect' ? ['*/*'] : ['application/json'];
      entry[op.method] = {
        tags: [`cluster${version}`],
        description: op.description,
        operationId: op.id,
        parameters: op.params.map(v3Param),
        ...(op.method === 'put' || op.method === 'patch'
          ? {
              requestBody: {
                content: Object.fromEntries(
                  (op.method === 'patch' ? Object.keys(patchContentTypes) : ['application/json']).map((t) => [
                    t,
                    { schema: op.method === 'patch' ? { type: 'object' } : schema },
                  ]),
                ),
                required: true,
              },
            }
          : {}),
        responses: {
          '200': { description: 'OK', content: Object.fromEntries(types.map((t) => [t, { schema }])) },
          '401': { description: 'Unauthorized' },
        },
        'x-kubernetes-action': op.action,
        ...gvkExtension,
      };
    }
    paths[item.path] = entry;
  }
  return paths;
}

export function openApiV2(): Json {
  return {
    swagger: '2.0',
    info: { title: 'cluster-gateway', version: groupVersion },
    paths: v2Paths(),
    definitions: allSchemas('v2'),
  };
}

export function openApiV3GroupVersion(): Json {
  return {
    openapi: '3.0.0',
    info: { title: 'cluster-gateway', version: groupVersion },
    paths: v3Paths(),
    components: { schemas: allSchemas('v3') },
  };
}

interface Serialized {
  body: string;
  hash: string;
}

let v2Cache: Serialized | undefined;
let v3Cache: Serialized | undefined;

function serialize(doc: Json): Serialized {
  const body = JSON.stringify(doc);
  // Kubernetes uses the upper-case hex SHA-512 of the document as its v3 hash and ETag.
  return { body, hash: createHash('sha512').update(body).digest('hex').toUpperCase() };
}

const v2 = () => {
  v2Cache ??= serialize(openApiV2());
  return v2Cache;
};
const v3 = () => {
  v3Cache ??= serialize(openApiV3GroupVersion());
  return v3Cache;
};

export const v3GroupVersionPath = `apis/${groupVersion}`;

export function openApiV3Index(): { paths: Record<string, { serverRelativeURL: string }> } {
  return {
    paths: {
      [v3GroupVersionPath]: { serverRelativeURL: `/openapi/v3/${v3GroupVersionPath}?hash=${v3().hash}` },
    },
  };
}

export interface OpenApiRequest {
  query?: URLSearchParams;
  ifNoneMatch?: string;
  /** For the Expires header of hash-addressed documents. */
  now?: number;
}

function cached(doc: Serialized, request: OpenApiRequest, headers: Record<string, string> = {}): ApiResponse {
  const etag = `"${doc.hash}"`;
  if (etagMatches(etag, request.ifNoneMatch)) return notModified(etag);
  return {
    status: 200,
    headers: { 'content-type': 'application/json', etag, vary: 'Accept', ...headers },
    body: doc.body,
  };
}

/** The OpenAPI document for `path` (without query), or undefined if it is not an OpenAPI path. */
export function openApiResponse(path: string, request: OpenApiRequest = {}): ApiResponse | undefined {
  const normalized = path.replace(/\/+$/, '');
  if (normalized === '/openapi/v2') return cached(v2(), request);
  if (normalized === '/openapi/v3') {
    const index = openApiV3Index();
    return jsonResponse(index, {
      headers: { etag: `"${createHash('sha256').update(JSON.stringify(index)).digest('hex')}"` },
    });
  }
  if (normalized === `/openapi/v3/${v3GroupVersionPath}`) {
    const doc = v3();
    const hash = request.query?.get('hash');
    if (!hash) return cached(doc, request);
    if (hash !== doc.hash) {
      const location = `/openapi/v3/${v3GroupVersionPath}?hash=${doc.hash}`;
      return {
        status: 301,
        headers: { location, 'content-type': 'text/plain' },
        body: `Moved Permanently: ${location}`,
      };
    }
    // A hash-addressed document never changes: let everyone cache it.
    const expires = new Date((request.now ?? Date.now()) + 365 * 24 * 3600 * 1000).toUTCString();
    return cached(doc, request, { 'cache-control': 'public, immutable', expires });
  }
  return undefined;
}
