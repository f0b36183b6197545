/**
 * Denying and removing a CertificateSigningRequest labelled for our addon that
 * its labelled cluster's registration agent did not ask for (csr-approval.ts
 * says which).
 *
 * Denying is a PUT of the object to its `/approval` subresource with a
 * `Denied` condition added, as `kubectl certificate deny` does; it needs the
 * same `approve` verb on the signer as approving. The denial stays visible in
 * the watch stream and in our log, then the CSR is deleted: OCM's registration
 * agent counts every CSR carrying a cluster/addon label pair, whatever its
 * state, and the hub's CSR cleaner would only remove a denied one after an
 * hour.
 */
import type { KubeClient } from '../../../shared/kube/client.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import type { CertificateSigningRequest } from './csr-approval.ts';

const csrCollectionPath = '/apis/certificates.k8s.io/v1/certificatesigningrequests';

/** The condition's reason: the CSR's labels and its request disagree. */
export const denialReason = 'RequestDisagreesWithLabels';

/** The longest `why` quoted in a condition message: the requester and subject are the requester's own text. */
const maxWhyLength = 1024;

/** The message of the Denied condition: what was wrong, who may ask instead, and what happens next. */
export function denialMessage(addonName: string, cluster: string | undefined, why: string): string {
  const quoted = why.length > maxWhyLength ? `${why.slice(0, maxWhyLength)}...` : why;
  const who = cluster
    ? `only the registration agent of cluster ${cluster} may request the ${addonName} addon agent's certificate for it, with the subject its ManagedClusterAddOn publishes in status.registrations`
    : `a CSR for the ${addonName} addon must name its cluster in label open-cluster-management.io/cluster-name`;
  return `Denied by the ${addonName} addon manager: ${quoted}; ${who}. Denied CSRs of this addon are deleted, so that they do not count against the cluster's CSR quota.`;
}

export type DenialOutcome = 'denied' | 'not-permitted';

/**
 * Adds the Denied condition. A 403 (no `approve` on this CSR's signer: the
 * manager may approve kube-apiserver-client CSRs only) is returned, not
 * thrown: the CSR is deleted all the same, it still counts against the quota.
 */
export async function denyCertificateSigningRequest(
  hub: KubeClient,
  csr: CertificateSigningRequest,
  reason: string,
  message: string,
): Promise<DenialOutcome> {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  try {
    await hub.request('PUT', `${csrCollectionPath}/${encodeURIComponent(csr.metadata.name)}/approval`, {
      body: {
        ...csr,
        status: {
          ...csr.status,
          conditions: [
            ...(csr.status?.conditions ?? []),
            { type: 'Denied', status: 'True', reason, message, lastUpdateTime: now },
          ],
        },
      },
    });
    return 'denied';
  } catch (err) {
    if (err instanceof StatusError && err.code === 403) return 'not-permitted';
    throw err;
  }
}

/**
 * Deletes this CSR, not a later one of the same name: the uid is a
 * precondition. Gone already, or replaced (409), is fine.
 */
export async function deleteCertificateSigningRequest(
  hub: KubeClient,
  csr: CertificateSigningRequest,
): Promise<'deleted' | 'gone'> {
  const uid = csr.metadata.uid;
  try {
    await hub.request('DELETE', `${csrCollectionPath}/${encodeURIComponent(csr.metadata.name)}`, {
      body: {
        apiVersion: 'v1',
        kind: 'DeleteOptions',
        ...(typeof uid === 'string' && uid ? { preconditions: { uid } } : {}),
      },
    });
    return 'deleted';
  } catch (err) {
    if (err instanceof StatusError && (err.code === 404 || err.code === 409)) return 'gone';
    throw err;
  }
}
