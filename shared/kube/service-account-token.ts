import type { KubeClient, KubeObject } from './client.ts';

/** A bound token for a ServiceAccount (TokenRequest API), valid for `expirationSeconds`. */
export async function requestServiceAccountToken(
  client: KubeClient,
  namespace: string,
  serviceAccount: string,
  expirationSeconds = 86400,
): Promise<string> {
  const review = await client.create<KubeObject & { status: { token: string } }>(
    `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`,
    { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds } },
  );
  return review.status.token;
}
