/**
 * A prober verdict recorded on a ManagedCluster, made checkable.
 *
 * The ManagedCluster is the only hub object of a cluster without a credential Secret, so the prober
 * keeps its verdict there (health/annotation-store.ts) for every gateway replica to show the same
 * health at the same resourceVersion. But OCM gives each managed cluster's klusterlet `update` on its
 * own ManagedCluster (registration's ClusterRole open-cluster-management:managedcluster:<name>), and
 * neither RBAC nor OCM's ManagedCluster webhook restricts its annotations: the cluster could write
 * `probed-healthy: "true"` for itself. Who last wrote an annotation cannot be told from the object
 * (managedFields' manager names are the writer's choice), so the verdict carries an HMAC under a key
 * that every replica holds and no klusterlet can read; a verdict without a valid one is not shown.
 *
 * The MAC binds the verdict to the ManagedCluster's uid and name (no copying it to another cluster, or
 * to a cluster re-created under the same name). An older verdict of the same cluster can be replayed
 * by the klusterlet; the prober rewrites the recorded verdict whenever it differs from what it finds,
 * so a replay lasts at most one probe interval.
 *
 * Without a key (the gateway was not given one) a ManagedCluster's verdict is never trusted, and the
 * prober keeps the verdicts of such clusters in the probing replica's memory instead.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

const context = 'cluster-gateway probe verdict v1';

export interface SignedVerdict {
  uid: string;
  name: string;
  /** The annotation values as written: "true"/"false" and the reason ('' for none). */
  healthy: string;
  reason: string;
}

export function signVerdict(key: Uint8Array, verdict: SignedVerdict): string {
  return createHmac('sha256', key)
    .update([context, verdict.uid, verdict.name, verdict.healthy, verdict.reason].join('\0'))
    .digest('base64url');
}

export function verdictSignatureValid(
  key: Uint8Array | undefined,
  verdict: SignedVerdict,
  signature: string | undefined,
): boolean {
  if (!key || !signature || !verdict.uid) return false;
  const expected = Buffer.from(signVerdict(key, verdict));
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
