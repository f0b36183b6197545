/**
 * Which gateway peer CertificateSigningRequests the manager approves (manager/gateway/tunnel/
 * peer-certificate.ts makes them): a peer certificate lets its holder use every agent tunnel as a
 * gateway replica would, so this check is a security boundary. Approved only when every point holds:
 *
 * - the signer is `kubernetes.io/kube-apiserver-client` (the hub signs; no key of ours is involved);
 * - the requester, which the kube-apiserver records itself (spec.username, spec.extra), is the
 *   gateway's ServiceAccount, with a token bound to a pod (extra `authentication.kubernetes.io/pod-name`
 *   and `pod-uid`, which only the kubelet's projected token carries, or an impersonation that only a
 *   hub admin may make);
 * - the subject is exactly CN `cluster-gateway-peer:<gateway namespace>:<that pod's name>`, no O (no
 *   group on the hub), no other subject field, no subject alternative name;
 * - usages: client auth, with digital signature and key encipherment at most; never server auth;
 * - a validity asked for (expirationSeconds) no longer than the bound.
 *
 * Anything else carrying the gateway-peer label is denied, with the reason, so that it is neither left
 * pending nor mistaken for a replica's.
 */
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import {
  type CertificateSigningRequest,
  gatewayPeerCsrLabel,
  kubeApiserverClientSigner,
} from '../../gateway/tunnel/peer-certificate.ts';
import { parsePeerCommonName } from '../../gateway/tunnel/peer-identity.ts';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export const podNameExtra = 'authentication.kubernetes.io/pod-name';
export const podUidExtra = 'authentication.kubernetes.io/pod-uid';
/** The longest validity approved: the gateway asks for a day (peer-certificate.ts). */
export const maxPeerCertificateSeconds = 24 * 3600;

const allowedUsages = new Set(['client auth', 'digital signature', 'key encipherment']);
const subjectAltNameOid = '2.5.29.17';

export interface PeerCsrContext {
  /** The gateway's namespace and ServiceAccount name. */
  namespace: string;
  serviceAccount: string;
  maxExpirationSeconds?: number;
}

export type PeerCsrDecision =
  | { approve: true; replica: string }
  | { approve: false; why: string }
  | { ignore: true };

export function decidePeerCsr(csr: CertificateSigningRequest, context: PeerCsrContext): PeerCsrDecision {
  const label = csr.metadata.labels?.[gatewayPeerCsrLabel];
  // Not ours: the addon agents' CSRs (registration/csr-approver.ts) and everyone else's are left alone.
  if (label === undefined) return { ignore: true };
  const deny = (why: string): PeerCsrDecision => ({ approve: false, why });
  if (label !== 'true') return deny(`label ${gatewayPeerCsrLabel} is ${JSON.stringify(label)}, not "true"`);
  if (csr.spec.signerName !== kubeApiserverClientSigner) {
    return deny(`signer ${JSON.stringify(csr.spec.signerName)} is not ${kubeApiserverClientSigner}`);
  }

  const gatewayUser = `system:serviceaccount:${context.namespace}:${context.serviceAccount}`;
  if (csr.spec.username !== gatewayUser) {
    return deny(
      `requester ${JSON.stringify(csr.spec.username ?? '')} is not the gateway's ServiceAccount ${gatewayUser}`,
    );
  }
  const podNames = csr.spec.extra?.[podNameExtra] ?? [];
  const podUids = csr.spec.extra?.[podUidExtra] ?? [];
  if (podNames.length !== 1 || podUids.length !== 1 || !podNames[0] || !podUids[0]) {
    return deny(`requester's credential is not bound to one pod (no ${podNameExtra} and ${podUidExtra})`);
  }
  const podName = podNames[0];

  let request: x509.Pkcs10CertificateRequest;
  try {
    request = new x509.Pkcs10CertificateRequest(Buffer.from(csr.spec.request, 'base64').toString('utf8'));
  } catch (err) {
    return deny(`spec.request is not a PEM certificate request: ${(err as Error).message}`);
  }
  const subject = request.subjectName.toJSON();
  const commonNames = request.subjectName.getField('CN');
  const fields = subject.flatMap((rdn) => Object.keys(rdn));
  if (commonNames.length !== 1 || fields.length !== 1) {
    return deny(`subject ${JSON.stringify(request.subject)} is not a single CN (no O: no group on the hub)`);
  }
  const peer = parsePeerCommonName(commonNames[0] ?? '');
  if (!peer) {
    return deny(
      `subject CN ${JSON.stringify(commonNames[0])} is not cluster-gateway-peer:<namespace>:<replica>`,
    );
  }
  if (peer.namespace !== context.namespace) {
    return deny(`subject CN names namespace ${peer.namespace}, not the gateway's ${context.namespace}`);
  }
  if (peer.replica !== podName) {
    return deny(`subject CN names replica ${peer.replica}, but the request came from pod ${podName}`);
  }
  if (request.extensions.some((e) => e.type === subjectAltNameOid)) {
    return deny('asks for subject alternative names');
  }

  const usages = csr.spec.usages ?? [];
  if (!usages.includes('client auth') || usages.some((u) => !allowedUsages.has(u))) {
    return deny(
      `usages ${JSON.stringify(usages)} are not client auth (with digital signature, key encipherment)`,
    );
  }
  const max = context.maxExpirationSeconds ?? maxPeerCertificateSeconds;
  const seconds = csr.spec.expirationSeconds;
  if (seconds === undefined || seconds > max) {
    return deny(`expirationSeconds ${seconds ?? '(unset: the signer default)'} is over ${max}`);
  }
  return { approve: true, replica: peer.replica };
}
