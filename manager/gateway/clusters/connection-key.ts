/**
 * connectionKey: a sha256 digest of everything that defines an upstream
 * connection (endpoint and credential). The proxy keys its keep-alive
 * agents by it, so a rotated token or certificate, a new CA or a
 * reconnected tunnel gets a fresh pool on the next request, with no
 * restart, while unchanged clusters keep their warm connections.
 */
import { createHash } from 'node:crypto';
import type { Credential, Endpoint } from './cluster.ts';

/** `tunnelGeneration` distinguishes successive tunnels of one cluster: the old one's sockets are dead. */
export function connectionKey(
  endpoint: Endpoint | undefined,
  credential: Credential | undefined,
  tunnelGeneration = 0,
): string {
  let ep: unknown[] | null = null;
  if (endpoint?.type === 'Const') {
    ep = ['Const', endpoint.address, endpoint.caBundle ?? '', endpoint.insecure, endpoint.proxyUrl ?? ''];
  } else if (endpoint?.type === 'ClusterProxy') {
    ep = [
      'ClusterProxy',
      endpoint.serverName,
      endpoint.caBundle ?? '',
      endpoint.insecure,
      tunnelGeneration,
      endpoint.trustModel ?? 'hub-credential',
    ];
  }
  let cred: unknown[] | null = null;
  if (credential?.type === 'ServiceAccountToken') cred = [credential.type, credential.token];
  else if (credential?.type === 'X509Certificate') {
    cred = [credential.type, credential.certificate, credential.privateKey];
  } else if (credential?.type === 'Dynamic') {
    cred = [
      credential.type,
      credential.token ?? '',
      credential.certificate ?? '',
      credential.privateKey ?? '',
    ];
  }
  return createHash('sha256')
    .update(JSON.stringify([ep, cred]))
    .digest('hex');
}
