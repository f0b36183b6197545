/**
 * The requests the Go original's clients send to the hub, written out from their source, for
 * e2e/migration.test.ts (the Go clients themselves are not built by npm test):
 *
 * - oam-dev/cluster-gateway pkg/apis/cluster/transport/roundtripper.go, NewClusterGatewayRoundTripper
 *   (and NewProxyPathPrependingClusterGatewayRoundTripper, for informers): the request's path, its leading
 *   `/` trimmed, joined after `/apis/cluster.core.oam.dev/v1alpha1/clustergateways/<cluster>/proxy/`; the
 *   query (client-go's `?timeout=32s`, `limit`, `dryRun`) kept as is;
 * - its generated clientset's expansion (clustergateway_expansion.go): the same path for RESTClient(cluster)
 *   and GetKubernetesClient; GetHealthiness is `GET clustergateways/<cluster>/health`;
 * - kubevela/pkg multicluster/transport.go (KubeVela's controller and CLI): the same join, then Go's
 *   path.Clean; a request for cluster `local` is left to the hub. With vela-core's default
 *   `multicluster.clusterGateway.direct: true` these go straight to the gateway's Service; with
 *   `direct: false` (what docs/migration.md sets) through the hub's aggregator, as here.
 *
 * Headers are client-go's for a typed JSON client (`Accept: application/json, *\/*`, its User-Agent).
 */
import path from 'node:path';
import type { KubeClient } from '../../shared/kube/client.ts';

export const clusterGatewaysPath = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';

/** formatProxyURL of both round trippers (kubevela/pkg adds path.Clean, which these paths pass unchanged). */
export function proxyPath(cluster: string, requestPath: string): string {
  const [pathPart = '', query] = requestPath.split('?', 2);
  const joined = path.posix.normalize(
    [clusterGatewaysPath, cluster, 'proxy', pathPart.replace(/^\//, '')].join('/'),
  );
  return query === undefined ? joined : `${joined}?${query}`;
}

/** What client-go sends on every request of a typed JSON client built by vela-core. */
export const clientGoHeaders = {
  accept: 'application/json, */*',
  'user-agent': 'vela-core/v1.10.0 (linux/amd64) kubevela/e2e',
};

/** The answer's status code and body (JSON parsed; a Status for errors). */
export interface Answer<T = unknown> {
  code: number;
  body: T;
}

/** Sends one request through `hub` (the hub's kube-apiserver: its aggregator) and reports its outcome. */
export async function send<T = unknown>(
  hub: KubeClient,
  method: string,
  requestPath: string,
  options: { body?: unknown; headers?: Record<string, string> } = {},
): Promise<Answer<T>> {
  const res = await hub.send(method, requestPath, {
    headers: { ...clientGoHeaders, ...options.headers },
    ...(options.body === undefined ? {} : { body: options.body }),
    signal: AbortSignal.timeout(30_000),
  });
  res.setEncoding('utf8');
  let text = '';
  for await (const chunk of res) text += chunk;
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON (an aggregator error may be plain text): kept as text
  }
  return { code: res.statusCode ?? 0, body: body as T };
}
