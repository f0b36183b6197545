/**
 * The gateway's defined answer for a cluster it knows to be offline (issue 32), shared by the gateway,
 * which writes it (manager/gateway/routes.ts), and the client library, which recognises it
 * (client/offline.ts): HTTP 503 and a metav1.Status whose `details` name the ClusterGateway and whose
 * `details.causes` each carry the stable reason `ClusterOffline` and the cause in words.
 *
 * A cause type rather than a new Status `reason`: the top-level reason stays `ServiceUnavailable`, so
 * every Kubernetes client (client-go's IsServiceUnavailable, kubectl) still reads the answer as the
 * 503 it is, and only a client that knows the cause type looks further.
 *
 * No runtime import beyond status.ts: the client library loads this file.
 */
import { failureStatus, type KubeStatus } from './status.ts';

/** StatusCause.reason of every cause of an offline answer. Stable: clients branch on it. */
export const clusterOfflineCause = 'ClusterOffline';

export const clusterGatewayGroup = 'cluster.core.oam.dev';
export const clusterGatewayResource = 'clustergateways';

export interface ClusterOfflineAnswer {
  cluster: string;
  /** Status.message, as the gateway words it for people (kept as before issue 32: tests and users match it). */
  message: string;
  /** Each cause in words, most decisive first: "no agent tunnel is connected", "marked unhealthy …". */
  causes: string[];
  /** When asking again may find it back (the next probe); absent when only an operator or an agent can change it. */
  retryAfterSeconds?: number;
}

export function clusterOfflineStatus(answer: ClusterOfflineAnswer): KubeStatus {
  return failureStatus(503, answer.message, {
    name: answer.cluster,
    group: clusterGatewayGroup,
    kind: clusterGatewayResource,
    causes: answer.causes.map((message) => ({ reason: clusterOfflineCause, message })),
    ...(answer.retryAfterSeconds !== undefined ? { retryAfterSeconds: answer.retryAfterSeconds } : {}),
  });
}

/**
 * The first ClusterOffline cause's message of a Status-shaped value, or undefined when it is not the
 * gateway's offline answer (any other 503 included). Accepts a parsed object or its JSON text.
 */
export function offlineCauseOfStatus(value: unknown): string | undefined {
  let status = value;
  if (typeof status === 'string') {
    // Only what looks like a JSON object is parsed: error texts and HTML pages are not Statuses.
    if (!status.trimStart().startsWith('{')) return undefined;
    try {
      status = JSON.parse(status);
    } catch {
      return undefined;
    }
  }
  if (!isRecord(status) || status.kind !== 'Status') return undefined;
  if (status.code !== undefined && status.code !== 503) return undefined;
  const details = status.details;
  if (!isRecord(details) || !Array.isArray(details.causes)) return undefined;
  for (const cause of details.causes) {
    if (isRecord(cause) && cause.reason === clusterOfflineCause) {
      return typeof cause.message === 'string' ? cause.message : '';
    }
  }
  return undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
