/**
 * The PATCH flavours a Kubernetes API server accepts, applied to a JSON
 * object: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic
 * merge patch, which `kubectl patch` sends by default.
 *
 * A strategic merge patch differs from a merge patch only on lists with a
 * merge key and on `$`-directives. The objects patched here (the health
 * subresource's ClusterGateway) have no such lists, so it is applied as a
 * merge patch and any `$`-directive is refused rather than misread.
 *
 * Errors follow the Go apiserver: a patch that cannot be decoded is a 400, a
 * well-formed one that cannot be applied (a failed `test`, a missing path)
 * is a 422.
 */
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';

export type PatchType = 'json' | 'merge' | 'strategic';

export const patchContentTypes: Record<string, PatchType> = {
  'application/json-patch+json': 'json',
  'application/merge-patch+json': 'merge',
  'application/strategic-merge-patch+json': 'strategic',
};

/** The patch type of a Content-Type header (parameters ignored), or undefined when unsupported. */
export function patchTypeOf(contentType: string | undefined): PatchType | undefined {
  const mediaType = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  return patchContentTypes[mediaType];
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const badRequest = (message: string) => new StatusError(failureStatus(400, message));
const unprocessable = (message: string) => new StatusError(failureStatus(422, message));

function parse(body: string, what: string): Json {
  try {
    return JSON.parse(body) as Json;
  } catch (err) {
    throw badRequest(`the ${what} is not valid JSON: ${(err as Error).message}`);
  }
}

const isObject = (value: unknown): value is { [key: string]: Json } =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Applies `body`, a patch of `type`, to `document` (which is not modified). */
export function applyPatch(type: PatchType, document: unknown, body: string): unknown {
  switch (type) {
    case 'json':
      return applyJsonPatch(document, parse(body, 'JSON patch'));
    case 'merge': {
      const patch = parse(body, 'merge patch');
      if (!isObject(patch)) throw badRequest('a merge patch must be a JSON object');
      return mergePatch(document as Json, patch);
    }
    case 'strategic': {
      const patch = parse(body, 'strategic merge patch');
      if (!isObject(patch)) throw badRequest('a strategic merge patch must be a JSON object');
      const directive = findDirective(patch, '');
      if (directive) {
        throw badRequest(
          `strategic merge patch directive ${directive} is not supported here; send a merge patch (application/merge-patch+json) or a JSON patch`,
        );
      }
      return mergePatch(document as Json, patch);
    }
  }
}

function findDirective(value: Json, path: string): string | undefined {
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = findDirective(item, `${path}/${i}`);
      if (found) return found;
    }
  } else if (isObject(value)) {
    for (const [key, item] of Object.entries(value)) {
      if (key.startsWith('$')) return `"${key}" at ${path || '/'}`;
      const found = findDirective(item, `${path}/${key}`);
      if (found) return found;
    }
  }
  return undefined;
}

/** RFC 7386: objects merge recursively, null deletes, anything else replaces. */
export function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return structuredClone(patch);
  const result: { [key: string]: Json } = isObject(target) ? structuredClone(target) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key] ?? null, value);
  }
  return result;
}

interface Operation {
  op: string;
  path: string;
  value?: Json;
  from?: string;
}

/** RFC 6902 on a copy of `document`. */
export function applyJsonPatch(document: unknown, patch: Json): unknown {
  if (!Array.isArray(patch)) throw badRequest('a JSON patch must be a JSON array of operations');
  const operations = patch.map(decodeOperation);
  // A root holder, so operations on "" (the whole document) need no special case.
  const root: { [key: string]: Json } = { '': structuredClone(document as Json) };
  for (const [i, operation] of operations.entries()) {
    try {
      applyOperation(root, operation);
    } catch (err) {
      if (err instanceof PatchFailure) {
        throw unprocessable(`JSON patch operation ${i} (${operation.op} ${operation.path}): ${err.message}`);
      }
      throw err;
    }
  }
  return root[''];
}

class PatchFailure extends Error {}

const operationNames = new Set(['add', 'remove', 'replace', 'move', 'copy', 'test']);

function decodeOperation(raw: Json, i: number): Operation {
  if (!isObject(raw)) throw badRequest(`JSON patch operation ${i} is not an object`);
  const { op, path, from } = raw;
  if (typeof op !== 'string' || !operationNames.has(op)) {
    throw badRequest(
      `JSON patch operation ${i} has an invalid "op" ${JSON.stringify(op)} (use add, remove, replace, move, copy or test)`,
    );
  }
  if (typeof path !== 'string') throw badRequest(`JSON patch operation ${i} has no "path" string`);
  pointerTokens(path, i);
  const operation: Operation = { op, path };
  if (op === 'add' || op === 'replace' || op === 'test') {
    if (!('value' in raw)) throw badRequest(`JSON patch operation ${i} (${op}) has no "value"`);
    operation.value = raw.value as Json;
  }
  if (op === 'move' || op === 'copy') {
    if (typeof from !== 'string') throw badRequest(`JSON patch operation ${i} (${op}) has no "from" string`);
    pointerTokens(from, i);
    operation.from = from;
  }
  return operation;
}

/** RFC 6901 reference tokens, with "" prepended for the root holder. */
function pointerTokens(pointer: string, i = 0): string[] {
  if (pointer === '') return [''];
  if (!pointer.startsWith('/')) {
    throw badRequest(`JSON patch operation ${i}: path ${JSON.stringify(pointer)} must start with "/"`);
  }
  return [
    '',
    ...pointer
      .slice(1)
      .split('/')
      .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~')),
  ];
}

type Container = { [key: string]: Json } | Json[];

/** The container holding the last token of `pointer`, and that token. */
function locate(root: Container, pointer: string): { parent: Container; key: string } {
  const tokens = pointerTokens(pointer);
  let parent: Json = root as Json;
  for (const token of tokens.slice(0, -1)) {
    const next: Json | undefined = child(parent, token);
    if (next === undefined) throw new PatchFailure(`path ${pointer} does not exist`);
    parent = next;
  }
  if (!Array.isArray(parent) && !isObject(parent)) {
    throw new PatchFailure(`path ${pointer} does not exist (its parent is not an object or array)`);
  }
  return { parent, key: tokens[tokens.length - 1] ?? '' };
}

function child(value: Json, token: string): Json | undefined {
  if (Array.isArray(value)) {
    const index = arrayIndex(token, value.length - 1);
    return index === undefined ? undefined : value[index];
  }
  if (isObject(value)) return Object.hasOwn(value, token) ? value[token] : undefined;
  return undefined;
}

function arrayIndex(token: string, max: number): number | undefined {
  if (!/^(0|[1-9]\d*)$/.test(token)) return undefined;
  const index = Number(token);
  return index <= max ? index : undefined;
}

function get(root: Container, pointer: string): Json {
  const { parent, key } = locate(root, pointer);
  const value = child(parent as Json, key);
  if (value === undefined) throw new PatchFailure(`path ${pointer} does not exist`);
  return value;
}

function remove(root: Container, pointer: string): Json {
  const { parent, key } = locate(root, pointer);
  const value = get(root, pointer);
  if (Array.isArray(parent)) parent.splice(Number(key), 1);
  else delete parent[key];
  return value;
}

function add(root: Container, pointer: string, value: Json): void {
  const { parent, key } = locate(root, pointer);
  if (Array.isArray(parent)) {
    const index = key === '-' ? parent.length : arrayIndex(key, parent.length);
    if (index === undefined) throw new PatchFailure(`array index ${key} is out of range`);
    parent.splice(index, 0, value);
  } else {
    parent[key] = value;
  }
}

function applyOperation(root: { [key: string]: Json }, operation: Operation): void {
  const { op, path } = operation;
  switch (op) {
    case 'add':
      add(root, path, structuredClone(operation.value as Json));
      return;
    case 'remove':
      if (path === '') throw new PatchFailure('the whole document cannot be removed');
      remove(root, path);
      return;
    case 'replace': {
      const { parent, key } = locate(root, path);
      get(root, path);
      if (Array.isArray(parent)) parent[Number(key)] = structuredClone(operation.value as Json);
      else parent[key] = structuredClone(operation.value as Json);
      return;
    }
    case 'move': {
      const from = operation.from ?? '';
      if (path !== from && path.startsWith(`${from}/`)) {
        throw new PatchFailure(`cannot move ${from} into its own child ${path}`);
      }
      add(root, path, remove(root, from));
      return;
    }
    case 'copy':
      add(root, path, structuredClone(get(root, operation.from ?? '')));
      return;
    case 'test':
      if (!deepEqual(get(root, path), operation.value as Json)) {
        throw new PatchFailure(`test failed: the value is not ${JSON.stringify(operation.value)}`);
      }
      return;
  }
}

function deepEqual(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return (
      Array.isArray(a) &&
      Array.isArray(b) &&
      a.length === b.length &&
      a.every((x, i) => deepEqual(x, b[i] as Json))
    );
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return (
      keys.length === Object.keys(b).length &&
      keys.every((k) => Object.hasOwn(b, k) && deepEqual(a[k] as Json, b[k] as Json))
    );
  }
  return false;
}
