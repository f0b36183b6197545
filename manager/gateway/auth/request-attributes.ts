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
 *   This verb is also what routes.ts serves on the clustergateways
 *   collection (a watch stream or a list): one decision, so the gateway
 *   never serves a list it authorized as a watch, or the reverse.
 * - `/<version>/watch/...` and `/<version>/proxy/...` set the verb from
 *   the path (the legacy special verbs).
 *
 * A proxied request is read as the managed cluster (a Go server) reads it:
 * path and query through go-url.ts, list options as
 * metainternalversionscheme.ParameterCodec decodes them. For the gateway's
 * own API the query is the one its handlers read (URLSearchParams).
 */

import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import { parseLabelSelector } from '../api/selectors.ts';
import type { AuthorizationAttributes } from './contracts.ts';
import { goPathUnescape, parseGoQuery } from './go-url.ts';

/** Query parameters as the server executing the request reads them: every value of each key, in order. */
export type QueryValues = ReadonlyMap<string, readonly string[]>;

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
export function parseRequestInfo(method: string, rawPath: string, query: QueryValues): RequestInfo {
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
    const list = listOptions(query);
    info.verb = list.watch ? 'watch' : 'list';
    if (list.name !== undefined) info.name = list.name;
  }
  if (!info.name && info.verb === 'delete') info.verb = 'deletecollection';
  return info;
}

/** Authorization attributes for a request to this server (`req.method`, `req.url`). */
export function requestAttributes(method: string, url: string): AuthorizationAttributes {
  const mark = url.indexOf('?');
  const path = (mark < 0 ? url : url.slice(0, mark)) || '/';
  const query = new URLSearchParams(mark < 0 ? '' : url.slice(mark + 1));
  const values = new Map<string, string[]>();
  for (const [key, value] of query) values.set(key, [...(values.get(key) ?? []), value]);
  return toAttributes(parseRequestInfo(method, path, values));
}

/**
 * Authorization attributes for the request a proxy call forwards to a
 * managed cluster (`/api/v1/namespaces/default/pods/x/log` -> get pods/log
 * x in default), for the `--authorize-proxy-subpath` check on the hub.
 * Unlike the Go original, which reused the outer connect verb, a proxied
 * collection GET is a list (or watch), as the managed cluster itself
 * would see it. `upstreamPath` may carry its own raw query
 * (`/api/v1/pods?watch=1`) when `rawQuery` is not given.
 *
 * The query is read as Go reads it; the gateway forwards only the segments
 * Go keeps (parseGoQuery's `accepted`), so a segment another parser would
 * read differently never reaches the cluster.
 */
export function proxiedRequestAttributes(
  method: string,
  upstreamPath: string,
  rawQuery?: string,
): AuthorizationAttributes {
  const q = rawQuery === undefined ? upstreamPath.indexOf('?') : -1;
  const rawPath = q === -1 ? upstreamPath : upstreamPath.slice(0, q);
  const query = q !== -1 ? upstreamPath.slice(q + 1) : (rawQuery ?? '');
  const path = rawPath.startsWith('/') ? rawPath : `/${rawPath}`;
  return toAttributes(parseRequestInfo(method, path, parseGoQuery(query).values));
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

// Go matches on URL.Path, which is already percent-decoded (%2F included);
// a malformed escape makes Go's server refuse the request.
function decodePath(rawPath: string): string {
  const path = goPathUnescape(rawPath);
  if (path === undefined) throw new StatusError(failureStatus(400, `malformed URL path ${rawPath}`));
  return path;
}

function splitPath(path: string): string[] {
  const trimmed = path.replace(/^\/+|\/+$/g, '');
  return trimmed === '' ? [] : trimmed.split('/');
}

/**
 * What RequestInfoFactory takes from the list options of a nameless GET:
 * watch or list, and the name a field selector pins. As in Kubernetes, a
 * query whose list options do not decode (a bad limit, timeoutSeconds or
 * selector) names nothing, and only `watch` is still read: the cluster
 * answers such a request with 400, whatever it was authorized as.
 */
function listOptions(query: QueryValues): { watch: boolean; name?: string } {
  const first = (key: string) => query.get(key)?.[0];
  const watch = first('watch');
  const fieldSelector = first('fieldSelector');
  const terms = fieldSelector === undefined ? [] : parseFieldSelector(fieldSelector);
  if (!terms || !decodesAsListOptions(first)) {
    // requestinfo.go's fallback compares strings.ToLower(value): ASCII only
    // for "false", unlike the EqualFold below.
    return { watch: watch !== undefined && watch !== '0' && asciiLower(watch) !== 'false' };
  }
  // runtime.Convert_Slice_string_To_bool: "0" or strings.EqualFold(value, "false").
  const result: { watch: boolean; name?: string } = {
    watch: watch !== undefined && watch !== '0' && !equalFoldFalse(watch),
  };
  // fields.Selector.RequiresExactMatch, over the terms in sorted order.
  const term = terms.find((t) => t.field === 'metadata.name' && t.operator !== '!=');
  if (term && isPathSegmentName(term.value)) result.name = term.value;
  return result;
}

function decodesAsListOptions(first: (key: string) => string | undefined): boolean {
  for (const key of ['limit', 'timeoutSeconds']) {
    const value = first(key);
    if (value !== undefined && !isGoInt64(value)) return false;
  }
  const labelSelector = first('labelSelector');
  if (labelSelector !== undefined) {
    try {
      parseLabelSelector(labelSelector);
    } catch {
      return false;
    }
  }
  return true;
}

/** strconv.ParseInt(value, 10, 64) succeeds. */
function isGoInt64(value: string): boolean {
  if (!/^[+-]?[0-9]+$/.test(value)) return false;
  const n = BigInt(value);
  return n >= -(2n ** 63n) && n < 2n ** 63n;
}

function asciiLower(value: string): string {
  return value.replace(/[A-Z]/g, (c) => c.toLowerCase());
}

/** strings.EqualFold(value, "false"): Unicode simple folding, where "ſ" (U+017F) is an "s". */
function equalFoldFalse(value: string): boolean {
  if (value.length !== 5) return false;
  return [...value].every((c, i) => {
    const target = 'false'[i]!;
    return c.toLowerCase() === target || (target === 's' && c === '\u017f');
  });
}

// content.IsPathSegmentName: a name that can be a path segment.
function isPathSegmentName(name: string): boolean {
  return name !== '.' && name !== '..' && !name.includes('/') && !name.includes('%');
}

interface FieldTerm {
  field: string;
  operator: '=' | '==' | '!=';
  value: string;
}

/**
 * fields.ParseSelector's reading, term by term, or undefined where it fails:
 * terms split on unescaped commas and sorted (byte order), each split at its
 * first operator (no escapes, no trimming), values unescaped with only
 * `\\`, `\,` and `\=` allowed.
 */
function parseFieldSelector(selector: string): FieldTerm[] | undefined {
  const parts = splitTerms(selector).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const terms: FieldTerm[] = [];
  for (const part of parts) {
    if (part === '') continue;
    const term = splitTerm(part);
    const value = term && unescapeFieldValue(term.value);
    if (!term || value === undefined) return undefined;
    terms.push({ ...term, value });
  }
  return terms;
}

function splitTerms(selector: string): string[] {
  if (selector === '') return [];
  const terms: string[] = [];
  let start = 0;
  let inSlash = false;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (inSlash) inSlash = false;
    else if (c === '\\') inSlash = true;
    else if (c === ',') {
      terms.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(selector.slice(start));
  return terms;
}

function splitTerm(term: string): FieldTerm | undefined {
  for (let i = 0; i < term.length; i++) {
    for (const operator of ['!=', '==', '='] as const) {
      if (term.startsWith(operator, i)) {
        return { field: term.slice(0, i), operator, value: term.slice(i + operator.length) };
      }
    }
  }
  return undefined;
}

function unescapeFieldValue(value: string): string | undefined {
  let out = '';
  let inSlash = false;
  for (const c of value) {
    if (inSlash) {
      if (c !== '\\' && c !== ',' && c !== '=') return undefined;
      out += c;
      inSlash = false;
    } else if (c === '\\') {
      inSlash = true;
    } else if (c === ',' || c === '=') {
      return undefined;
    } else {
      out += c;
    }
  }
  return inSlash ? undefined : out;
}

/**
 * proxiedRequestAttributes for metrics and logs, after the request was
 * proxied: undefined instead of an exception for a path a Go server would
 * refuse (`/api/v1/watch`), which the gateway forwards as is when it does
 * not authorize proxied requests itself.
 */
export function proxiedRequestAttributesIfValid(
  method: string,
  upstreamPath: string,
): AuthorizationAttributes | undefined {
  try {
    return proxiedRequestAttributes(method, upstreamPath);
  } catch {
    return undefined;
  }
}
