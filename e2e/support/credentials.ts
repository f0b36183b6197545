/** Cluster credential Secrets, in the Go original's format, for e2e tests. */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { credentialNamespace } from '../../hack/localenv/gateway.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { environmentState } from './environment.ts';

export { credentialNamespace };

export type CredentialType = 'ServiceAccountToken' | 'X509Certificate' | 'Dynamic';

/**
 * Creates or updates Secret `name` labelled with `type`; `data` holds plain (not base64) values.
 * `labels` adds more (e.g. `cluster.core.oam.dev/cluster-endpoint-type: ClusterProxy`: through the tunnel).
 */
export async function applyClusterSecret(
  hub: KubeClient,
  name: string,
  type: CredentialType,
  data: Record<string, string>,
  labels: Record<string, string> = {},
): Promise<void> {
  await hub.apply(
    secretPath(name),
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name,
        namespace: credentialNamespace,
        labels: { ...labels, 'cluster.core.oam.dev/cluster-credential-type': type },
      },
      stringData: data,
    },
    'e2e',
  );
}

export function secretPath(name: string): string {
  return `/api/v1/namespaces/${credentialNamespace}/secrets/${name}`;
}

/** `endpoint` and `ca.crt` of a managed cluster of the environment. */
export function clusterEndpoint(cluster: string): { endpoint: string; 'ca.crt': string } {
  const env = environmentState();
  const server = env.managed.find((c) => c.name === cluster)?.server;
  if (!server) throw new Error(`no managed cluster "${cluster}" in the e2e environment`);
  return { endpoint: server, 'ca.crt': readFileSync(path.join(env.stateDir, cluster, 'ca.crt'), 'utf8') };
}

/** The token the gateway uses for `cluster` (from its credential Secret). */
export async function gatewayToken(hub: KubeClient, cluster: string): Promise<string> {
  const secret = await hub.get<{ data: Record<string, string> }>(secretPath(cluster));
  return Buffer.from(secret.data.token ?? '', 'base64').toString();
}
