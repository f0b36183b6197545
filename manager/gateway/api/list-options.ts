/**
 * metav1.ListOptions from a query string, validated the way the apiserver
 * does, so a bad request is a 400 before anything is streamed.
 *
 * Whether a request is a watch is not read here: routes.ts serves the verb
 * the request was authorized as (auth/request-attributes.ts decides list or
 * watch), so what is served cannot differ from what was authorized.
 */

import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import { badRequest } from './response.ts';
import {
  type FieldSelector,
  type LabelSelector,
  parseFieldSelector,
  parseLabelSelector,
} from './selectors.ts';

export interface ListOptions {
  labelSelector: LabelSelector;
  fieldSelector: FieldSelector;
  resourceVersion: string;
  resourceVersionMatch: ResourceVersionMatch;
  allowWatchBookmarks: boolean;
  /** undefined when not given (the watch-list feature's opt-in). */
  sendInitialEvents?: boolean;
  timeoutSeconds?: number;
}

/** Go's query-to-bool conversion: present and not "false"/"0" means true. */
function queryBool(query: URLSearchParams, name: string): boolean | undefined {
  const value = query.get(name);
  if (value === null) return undefined;
  return !['false', '0'].includes(value.toLowerCase());
}

/** How `resourceVersion` is to be read (metav1.ResourceVersionMatch); '' when not given. */
export type ResourceVersionMatch = '' | 'NotOlderThan' | 'Exact';

/**
 * `watch`: the request is a watch (routes.ts decides from the authorized verb). The checks and
 * their messages are the apiserver's (ValidateListOptions), a 422 naming ListOptions, so clients
 * branch on them as they do against the hub.
 */
export function parseListOptions(query: URLSearchParams, watch = false): ListOptions {
  const options: ListOptions = {
    labelSelector: parseLabelSelector(query.get('labelSelector')),
    fieldSelector: parseFieldSelector(query.get('fieldSelector')),
    resourceVersion: query.get('resourceVersion') ?? '',
    resourceVersionMatch: '',
    allowWatchBookmarks: queryBool(query, 'allowWatchBookmarks') ?? false,
  };
  const sendInitialEvents = queryBool(query, 'sendInitialEvents');
  if (sendInitialEvents !== undefined) options.sendInitialEvents = sendInitialEvents;
  const timeout = query.get('timeoutSeconds');
  if (timeout !== null && timeout !== '') {
    if (!/^\d+$/.test(timeout))
      throw badRequest(`timeoutSeconds must be a non-negative integer, got ${JSON.stringify(timeout)}`);
    options.timeoutSeconds = Number(timeout);
  }
  const match = query.get('resourceVersionMatch') ?? '';
  const errors: FieldError[] = [];
  if (watch) {
    if (sendInitialEvents !== undefined && match !== 'NotOlderThan') {
      errors.push(forbidden('sendInitialEvents requires setting resourceVersionMatch to NotOlderThan'));
    }
    if (match) {
      if (sendInitialEvents === undefined) {
        errors.push(
          forbidden('resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided'),
        );
      }
      if (match !== 'NotOlderThan') errors.push(notSupported(match, ['NotOlderThan']));
    }
  } else {
    if (match) {
      if (!options.resourceVersion) {
        errors.push(forbidden('resourceVersionMatch is forbidden unless resourceVersion is provided'));
      }
      if (match !== 'Exact' && match !== 'NotOlderThan')
        errors.push(notSupported(match, ['Exact', 'NotOlderThan', '']));
      if (match === 'Exact' && options.resourceVersion === '0') {
        errors.push(forbidden('resourceVersionMatch "exact" is forbidden for resourceVersion "0"'));
      }
    }
    if (sendInitialEvents !== undefined) {
      errors.push({
        field: 'sendInitialEvents',
        reason: 'FieldValueForbidden',
        detail: 'Forbidden: sendInitialEvents is forbidden for list',
      });
    }
  }
  if (errors.length) throw invalidListOptions(errors);
  if (match === 'Exact' || match === 'NotOlderThan') options.resourceVersionMatch = match;
  return options;
}

interface FieldError {
  field: string;
  reason: string;
  /** "Forbidden: ..." or "Unsupported value: ...", as field.Error prints it after the field. */
  detail: string;
}

function forbidden(message: string): FieldError {
  return { field: 'resourceVersionMatch', reason: 'FieldValueForbidden', detail: `Forbidden: ${message}` };
}

function notSupported(value: string, supported: string[]): FieldError {
  return {
    field: 'resourceVersionMatch',
    reason: 'FieldValueNotSupported',
    detail: `Unsupported value: ${JSON.stringify(value)}: supported values: ${supported.map((v) => JSON.stringify(v)).join(', ')}`,
  };
}

/** errors.NewInvalid(meta.k8s.io ListOptions): one error inline, several in brackets. */
function invalidListOptions(errors: FieldError[]): StatusError {
  const texts = errors.map((e) => `${e.field}: ${e.detail}`);
  const summary = texts.length === 1 ? texts[0] : `[${texts.join(', ')}]`;
  return new StatusError(
    failureStatus(422, `ListOptions.meta.k8s.io "" is invalid: ${summary}`, {
      group: 'meta.k8s.io',
      kind: 'ListOptions',
      causes: errors.map((e) => ({ reason: e.reason, message: e.detail, field: e.field })),
    }),
  );
}
