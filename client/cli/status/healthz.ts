/**
 * The proxied `/healthz` of each cluster (GET clustergateways/<c>/proxy/healthz), timed from request to the whole
 * answer. At most `concurrency` at a time and each bounded by `timeoutMs`, so 1,000 clusters cost at most
 * ceil(1000/32) x 2 s in the worst case (every cluster hanging) and a few hundred milliseconds when they answer.
 */
import type { KubeClient } from '../../../shared/kube/client.ts';
import { offlineCauseOfStatus } from '../../../shared/kube/cluster-offline.ts';
import { StatusError } from '../../../shared/kube/status.ts';

import { healthzConcurrency, healthzTimeoutMs } from './limits.ts';

export { healthzConcurrency, healthzTimeoutMs };

export interface HealthzResult {
  ok: boolean;
  /** Round trip in milliseconds, also for a failure that answered (e.g. a 503). */
  milliseconds?: number;
  /** One word for a table cell when not ok: timeout, offline, forbidden, unavailable, http-502, refused, error. */
  error?: string;
  /** The full reason, for -o json|yaml. */
  message?: string;
  /** The HTTP status, when the gateway answered. */
  code?: number;
}

export function healthzPath(cluster: string): string {
  return `/apis/cluster.core.oam.dev/v1alpha1/clustergateways/${encodeURIComponent(cluster)}/proxy/healthz`;
}

export async function probeHealthz(
  client: Pick<KubeClient, 'request'>,
  cluster: string,
  timeoutMs = healthzTimeoutMs,
  now: () => number = performance.now.bind(performance),
): Promise<HealthzResult> {
  const signal = AbortSignal.timeout(timeoutMs);
  const start = now();
  try {
    const body = await client.request<unknown>('GET', healthzPath(cluster), { signal, timeoutMs });
    const milliseconds = Math.round(now() - start);
    const text = typeof body === 'string' ? body.trim() : JSON.stringify(body);
    return text === 'ok'
      ? { ok: true, milliseconds, code: 200 }
      : {
          ok: false,
          milliseconds,
          code: 200,
          error: 'not-ok',
          message: `/healthz answered ${text.slice(0, 200)}`,
        };
  } catch (err) {
    const milliseconds = Math.round(now() - start);
    if (signal.aborted) {
      return { ok: false, error: 'timeout', message: `no answer within ${timeoutMs / 1000} s` };
    }
    if (err instanceof StatusError) {
      return { ok: false, milliseconds, code: err.code, error: statusWord(err), message: err.message };
    }
    const code = (err as NodeJS.ErrnoException).code;
    return {
      ok: false,
      error: code === 'ECONNREFUSED' ? 'refused' : code === 'ECONNRESET' ? 'reset' : 'error',
      message: err instanceof Error ? err.message : String(err),
    };
  }
}

function statusWord(err: StatusError): string {
  // The gateway's answer for a cluster it knows to be offline (shared/kube/cluster-offline.ts).
  if (offlineCauseOfStatus(err.status) !== undefined) return 'offline';
  if (err.code === 403) return 'forbidden';
  if (err.code === 401) return 'unauthorized';
  if (err.code === 404) return 'notfound';
  if (err.code === 503) return 'unavailable';
  if (err.code === 504) return 'timeout';
  return `http-${err.code}`;
}

/** Runs `work` over `items`, at most `limit` at a time; results in the order of `items`. */
export async function mapBounded<T, R>(
  items: T[],
  limit: number,
  work: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

export async function probeAll(
  client: Pick<KubeClient, 'request'>,
  clusters: string[],
  options: { concurrency?: number; timeoutMs?: number } = {},
): Promise<Map<string, HealthzResult>> {
  const results = await mapBounded(clusters, options.concurrency ?? healthzConcurrency, (c) =>
    probeHealthz(client, c, options.timeoutMs ?? healthzTimeoutMs),
  );
  return new Map(clusters.map((c, i) => [c, results[i] as HealthzResult]));
}
