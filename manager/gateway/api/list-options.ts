/**
 * metav1.ListOptions from a query string, validated the way the apiserver
 * does, so a bad request is a 400 before anything is streamed.
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
  watch: boolean;
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

export function isWatchRequest(query: URLSearchParams): boolean {
  return queryBool(query, 'watch') ?? false;
}

export function parseListOptions(query: URLSearchParams): ListOptions {
  const options: ListOptions = {
    labelSelector: parseLabelSelector(query.get('labelSelector')),
    fieldSelector: parseFieldSelector(query.get('fieldSelector')),
    watch: queryBool(query, 'watch') ?? false,
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
