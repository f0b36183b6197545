/**
 * The certificates of one local cluster. Each cluster has its own CA (serving
 * and client certificates, and the CSR signer of kube-controller-manager) and
 * its own front-proxy CA (the aggregator's client certificate), as a real
 * cluster does: a certificate from one cluster means nothing to another.
 */
import {
  type CertificateAuthority,
  createCertificateAuthority,
  createSigningKey,
  type KeyPair,
} from '../../shared/pki.ts';

export interface ClusterPki {
  ca: CertificateAuthority;
  frontProxyCa: CertificateAuthority;
  serving: KeyPair;
  admin: KeyPair;
  frontProxyClient: KeyPair;
  kubeletClient: KeyPair;
  /** Service-account token signing key (PKCS#8 PEM) and its public key (SPKI PEM). */
  serviceAccountKey: string;
  serviceAccountPublicKey: string;
}

export const frontProxyClientName = 'front-proxy-client';

/** `kubernetesServiceIp`: the first address of the cluster's service range, which pods dial in-cluster. */
export async function createClusterPki(name: string, kubernetesServiceIp: string): Promise<ClusterPki> {
  const [ca, frontProxyCa] = await Promise.all([
    createCertificateAuthority(`${name}-ca`),
    createCertificateAuthority(`${name}-front-proxy-ca`),
  ]);
  const [serving, admin, frontProxyClient, kubeletClient] = await Promise.all([
    ca.issue({
      commonName: 'kube-apiserver',
      dnsNames: ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc'],
      // 10.244.0.1: the host's address on the pods' bridge (host-changes.ts), where pods reach the apiserver.
      ipAddresses: ['127.0.0.1', '10.244.0.1', kubernetesServiceIp],
      usage: 'server',
    }),
    ca.issue({ commonName: 'admin', organizations: ['system:masters'], usage: 'client' }),
    frontProxyCa.issue({ commonName: frontProxyClientName, usage: 'client' }),
    ca.issue({
      commonName: 'kube-apiserver-kubelet-client',
      organizations: ['system:masters'],
      usage: 'client',
    }),
  ]);
  const { privateKey: serviceAccountKey, publicKey: serviceAccountPublicKey } = await createSigningKey();
  return {
    ca,
    frontProxyCa,
    serving,
    admin,
    frontProxyClient,
    kubeletClient,
    serviceAccountKey,
    serviceAccountPublicKey,
  };
}
