/**
 * Telling "the gateway knows this cluster is offline" from any other failure: the gateway answers such
 * a cluster at once with 503 and a Status whose details.causes carry the reason `ClusterOffline`
 * (shared/kube/cluster-offline.ts, docs/client.md).
 *
 * Works on what @kubernetes/client-node throws without loading it (an optional peer dependency):
 * - an ApiException of its typed APIs: `code` and `body` (the parsed Status, or its text);
 * - what its Watch reports: a Status object passed to the event callback with type ERROR, or an error
 *   carrying a Status as `body`/`status`. Note: client-node 2.0.1's Watch rejects a non-200 answer
 *   with an Error holding only `statusCode` (the body is dropped), which cannot be told from any other
 *   503; then ask once more with a typed API call to learn why;
 * - a StatusError of this project's own client (shared/kube/status.ts);
 * - a Status object or its JSON text.
 * Anything else, another 503 included, is not an offline cluster.
 */
import { clusterOfflineCause, offlineCauseOfStatus } from '../shared/kube/cluster-offline.ts';

export { clusterOfflineCause };

/** True when `err` is the gateway's answer for a cluster it knows to be offline. */
export function isClusterOffline(err: unknown): boolean {
  return clusterOfflineReason(err) !== undefined;
}

/** The offline cause in words (e.g. "no agent tunnel is connected …"), or undefined when not offline. */
export function clusterOfflineReason(err: unknown): string | undefined {
  for (const candidate of statusCandidates(err)) {
    const reason = offlineCauseOfStatus(candidate);
    if (reason !== undefined) return reason;
  }
  return undefined;
}

/** Where a Status may sit in the errors and values clients hand over, nearest first. */
function statusCandidates(err: unknown, depth = 0): unknown[] {
  if (typeof err === 'string') return [err];
  if (typeof err !== 'object' || err === null) return [];
  const value = err as Record<string, unknown>;
  // An HTTP code that is not 503 rules the value out whatever its body says.
  for (const key of ['code', 'statusCode'] as const) {
    if (typeof value[key] === 'number' && value[key] !== 503) return [];
  }
  const candidates: unknown[] = [err];
  // ApiException.body (client-node), StatusError.status (shared/kube/status.ts), a wrapped `cause`.
  for (const key of ['body', 'status', 'object'] as const) {
    if (value[key] !== undefined) candidates.push(value[key]);
  }
  // Bounded: a cause chain may loop.
  if (value.cause !== undefined && depth < 3) candidates.push(...statusCandidates(value.cause, depth + 1));
  return candidates;
}
