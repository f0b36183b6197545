/**
 * metav1.ListOptions from a query string, validated the way the apiserver
 * does, so a bad request is a 400 before anything is streamed.
 *
 * Whether a request is a watch is not read here: routes.ts serves the verb
 * the request was authorized as (auth/request-attributes.ts decides list or
 * watch), so what is served cannot differ from what was authorized.
 */

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

export function parseListOptions(query: URLSearchParams): ListOptions {
  const options: ListOptions = {
    labelSelector: parseLabelSelector(query.get('labelSelector')),
    fieldSelector: parseFieldSelector(query.get('fieldSelector')),
    resourceVersion: query.get('resourceVersion') ?? '',
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
  const match = query.get('resourceVersionMatch');
  if (match && !['NotOlderThan', 'Exact'].includes(match)) {
    throw badRequest(
      `resourceVersionMatch: Unsupported value: ${JSON.stringify(match)}: supported values: "Exact", "NotOlderThan"`,
    );
  }
  return options;
}
