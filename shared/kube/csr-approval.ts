/**
 * Approving a CertificateSigningRequest: a PUT of the object to its
 * `/approval` subresource with an `Approved` condition added, as kubectl
 * certificate approve does. Used by the addon manager's CSR approver and by the
 * local environment (which approves the klusterlets' registration CSRs).
 */
import type { KubeClient, KubeObject } from './client.ts';

export interface CertificateSigningRequestObject extends KubeObject {
  metadata: { name: string; labels?: Record<string, string> };
  status?: { conditions?: { type: string; status: string }[] };
}

export async function approveCertificateSigningRequest(
  hub: KubeClient,
  csr: CertificateSigningRequestObject,
  reason: string,
  message: string,
): Promise<void> {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  await hub.request(
    'PUT',
    `/apis/certificates.k8s.io/v1/certificatesigningrequests/${encodeURIComponent(csr.metadata.name)}/approval`,
    {
      body: {
        ...csr,
        status: {
          ...csr.status,
          conditions: [
            ...(csr.status?.conditions ?? []),
            { type: 'Approved', status: 'True', reason, message, lastUpdateTime: now },
          ],
        },
      },
    },
  );
}
