/**
 * HTTP request -> authorization attributes, ported from Kubernetes'
 * RequestInfoFactory (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go)
 * so a SubjectAccessReview from the gateway asks exactly what the Go
 * original (a generic apiserver) asked:
 *
 * - `/apis/<group>/<version>/...` and `/api/<version>/...` are resource
 *   requests; everything else (discovery roots, /healthz, /openapi/v2) is
 *   a non-resource request with the lower-cased HTTP method as verb.
 * - The verb comes from the method: POST create, GET and HEAD get, PUT
 *   update, PATCH patch, DELETE delete, and any other method (OPTIONS
 *   included) the empty verb, which only a "*" RBAC rule matches. Connect
 *   subresources such as `clustergateways/<name>/proxy` and `.../health`
 *   use the same mapping.
 * - Without a name, get becomes list, or watch when `watch` is set to
 *   anything but "false"/"0", and delete becomes deletecollection; a
 *   `fieldSelector=metadata.name=<n>` on a list or watch fills in the name.
 * - `/<version>/watch/...` and `/<version>/proxy/...` set the verb from
 *   the path (the legacy special verbs).
 */
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import type { AuthorizationAttributes } from './user.ts';

export interface RequestInfo {
  isResourceRequest: boolean;
  /** The decoded URL path. */
  path: string;
  verb: string;
  apiPrefix: string;
  apiGroup: string;
  apiVersion: string;
  namespace: string;
  resource: string;
  subresource: string;
  name: string;
  /** Path parts from the resource on: resource, name, subresource, rest of a connect path. */
  parts: string[];
}

const apiPrefixes = new Set(['api', 'apis']);
const grouplessApiPrefixes = new Set(['api']);
const specialVerbs = new Set(['proxy', 'watch']);
const specialVerbsNoSubresources = new Set(['proxy']);
const namespaceSubresources = new Set(['status', 'finalize']);

const methodVerbs: Record<string, string> = {
  POST: 'create',
  GET: 'get',
  HEAD: 'get',
  PUT: 'update',
  PATCH: 'patch',
  DELETE: 'delete',
};

/** Parses a request the way Kubernetes does; throws a 400 StatusError for a malformed path. */
export function parseRequestInfo(method: string, rawPath: string, query: URLSearchParams): RequestInfo {
  const path = decodePath(rawPath);
  const info: RequestInfo = {
    isResourceRequest: false,
    path,
    verb: method.toLowerCase(),
    apiPrefix: '',
    apiGroup: '',
    apiVersion: '',
    namespace: '',
    resource: '',
    subresource: '',
    name: '',
    parts: [],
  };

  let parts = splitPath(path);
  if (parts.length < 3 || !apiPrefixes.has(parts[0]!)) return info;
  info.apiPrefix = parts[0]!;
  parts = parts.slice(1);
  if (!grouplessApiPrefixes.has(info.apiPrefix)) {
    if (parts.length < 3) return info;
    info.apiGroup = parts[0]!;
    parts = parts.slice(1);
  }
  info.isResourceRequest = true;
  info.apiVersion = parts[0]!;
  parts = parts.slice(1);

  if (specialVerbs.has(parts[0]!)) {
    if (parts.length < 2) {
      throw new StatusError(failureStatus(400, `unable to determine kind and namespace from url ${rawPath}`));
    }
    info.verb = parts[0]!;
    parts = parts.slice(1);
  } else {
    info.verb = methodVerbs[method.toUpperCase()] ?? '';
  }

  if (parts[0] === 'namespaces') {
    if (parts.length > 1) {
      info.namespace = parts[1]!;
      // /namespaces/<ns>/<resource>/... unless <resource> is a subresource
      // of the namespace itself (/namespaces/<ns>/status).
      if (parts.length > 2 && !namespaceSubresources.has(parts[2]!)) parts = parts.slice(2);
    }
  }
  info.parts = parts;

  if (parts.length >= 3 && !specialVerbsNoSubresources.has(info.verb)) info.subresource = parts[2]!;
  if (parts.length >= 2) info.name = parts[1]!;
  if (parts.length >= 1) info.resource = parts[0]!;

  if (!info.name && info.verb === 'get') {
    info.verb = isWatch(query) ? 'watch' : 'list';
    const selected = nameFromFieldSelector(query.get('fieldSelector'));
    if (selected !== undefined) info.name = selected;
  }
  if (!info.name && info.verb === 'delete') info.verb = 'deletecollection';
  return info;
}

/** Authorization attributes for a request to this server (`req.method`, `req.url`). */
export function requestAttributes(method: string, url: string): AuthorizationAttributes {
  const { path, query } = splitUrl(url);
  return toAttributes(parseRequestInfo(method, path, query));
}

/**
 * Authorization attributes for the request a proxy call forwards to a
 * managed cluster (`/api/v1/namespaces/default/pods/x/log` -> get pods/log
 * x in default), for the `--authorize-proxy-subpath` check on the hub.
 * Unlike the Go original, which reused the outer connect verb, a proxied
 * collection GET is a list (or watch), as the managed cluster itself
 * would see it. `upstreamPath` may carry its own query (`/api/v1/pods?watch=1`)
 * when `query` is not given.
 */
export function proxiedRequestAttributes(
  method: string,
  upstreamPath: string,
  query: URLSearchParams | string = '',
): AuthorizationAttributes {
  const q = query === '' ? upstreamPath.indexOf('?') : -1;
  const rawPath = q === -1 ? upstreamPath : upstreamPath.slice(0, q);
  const params =
    q !== -1
      ? new URLSearchParams(upstreamPath.slice(q + 1))
      : typeof query === 'string'
        ? new URLSearchParams(query)
        : query;
  const path = rawPath.startsWith('/') ? rawPath : `/${rawPath}`;
  return toAttributes(parseRequestInfo(method, path, params));
}

export function toAttributes(info: RequestInfo): AuthorizationAttributes {
  if (!info.isResourceRequest) return { kind: 'nonResource', verb: info.verb, path: info.path };
  return {
    kind: 'resource',
    verb: info.verb,
    group: info.apiGroup,
    version: info.apiVersion,
    resource: info.resource,
    ...(info.subresource ? { subresource: info.subresource } : {}),
    ...(info.name ? { name: info.name } : {}),
    ...(info.namespace ? { namespace: info.namespace } : {}),
  };
}

function splitUrl(url: string): { path: string; query: URLSearchParams } {
  const mark = url.indexOf('?');
  if (mark < 0) return { path: url || '/', query: new URLSearchParams() };
  return { path: url.slice(0, mark) || '/', query: new URLSearchParams(url.slice(mark + 1)) };
}

// Go matches on URL.Path, which is already percent-decoded (%2F included).
function decodePath(rawPath: string): string {
  try {
    return decodeURIComponent(rawPath);
  } catch {
    throw new StatusError(failureStatus(400, `malformed URL path ${rawPath}`));
  }
}

function splitPath(path: string): string[] {
  const trimmed = path.replace(/^\/+|\/+$/g, '');
  return trimmed === '' ? [] : trimmed.split('/');
}

// Go's bool conversion for query parameters: only "0" and "false" are false.
function isWatch(query: URLSearchParams): boolean {
  const value = query.getAll('watch')[0];
  if (value === undefined) return false;
  return value !== '0' && value.toLowerCase() !== 'false';
}

/**
 * The name a field selector pins with `metadata.name=<n>` or `==<n>`
 * (fields.Selector.RequiresExactMatch), if it is a valid path segment.
 */
function nameFromFieldSelector(selector: string | null): string | undefined {
  if (!selector) return undefined;
  for (const term of splitUnescaped(selector, ',')) {
    const parsed = splitTerm(term);
    if (parsed?.field !== 'metadata.name' || parsed.operator === '!=') continue;
    const name = unescapeSelectorValue(parsed.value);
    if (name === '.' || name === '..' || name.includes('/') || name.includes('%')) return undefined;
    return name;
  }
  return undefined;
}

function splitUnescaped(input: string, separator: string): string[] {
  const parts: string[] = [];
  let current = '';
  for (let i = 0; i < input.length; i++) {
    const char = input[i]!;
    if (char === '\\' && i + 1 < input.length) {
      current += char + input[i + 1];
      i++;
    } else if (char === separator) {
      parts.push(current);
      current = '';
    } else {
      current += char;
    }
  }
  parts.push(current);
  return parts;
}

function splitTerm(term: string): { field: string; operator: string; value: string } | undefined {
  for (let i = 0; i < term.length; i++) {
    if (term[i] === '\\') {
      i++;
      continue;
    }
    for (const operator of ['!=', '==', '=']) {
      if (term.startsWith(operator, i)) {
        return { field: term.slice(0, i).trim(), operator, value: term.slice(i + operator.length) };
      }
    }
  }
  return undefined;
}

function unescapeSelectorValue(value: string): string {
  return value.replace(/\\(.)/g, '$1');
}
