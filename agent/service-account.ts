/**
 * The agent's own ServiceAccount, read from its token's claims (no API call,
 * no extra RBAC): the spoke Lease names it as owner, so the garbage
 * collector removes the Lease with the agent's manifests when the addon is
 * disabled, even when the install namespace is shared and stays.
 */
import type { OwnerReference } from './lease.ts';

interface ServiceAccountClaims {
  'kubernetes.io'?: { namespace?: string; serviceaccount?: { name?: string; uid?: string } };
}

/** The owner reference for a ServiceAccount token's account in `namespace`, if the token is one. */
export function serviceAccountOwner(
  token: string | undefined,
  namespace: string,
): OwnerReference | undefined {
  const payload = token?.split('.')[1];
  if (!payload) return undefined;
  let claims: ServiceAccountClaims;
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as ServiceAccountClaims;
  } catch {
    return undefined;
  }
  const k = claims['kubernetes.io'];
  const sa = k?.serviceaccount;
  // Owner references cannot cross namespaces.
  if (!sa?.name || !sa.uid || k?.namespace !== namespace) return undefined;
  return { apiVersion: 'v1', kind: 'ServiceAccount', name: sa.name, uid: sa.uid };
}
