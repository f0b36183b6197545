/**
 * Who is a gateway replica on the peer port, and how either end proves it.
 *
 * A replica's peer identity is a client certificate of the hub's own `kubernetes.io/kube-apiserver-client`
 * signer with the subject CN `cluster-gateway-peer:<namespace>:<replica>` (peer-certificate.ts obtains it,
 * the addon manager approves it only for the gateway's ServiceAccount from the pod `<replica>`). Nobody
 * who merely reads Secrets in the release namespace can mint one: the signing key is the hub's.
 *
 * That signer's certificates carry the clientAuth extended key usage alone, so OpenSSL's purpose check
 * would refuse one as a server certificate: both ends therefore run TLS with `rejectUnauthorized: false`
 * and verify the other's certificate themselves, right after the handshake and before any stream is
 * served or opened, against the hub's client CA (`client-ca-file` of kube-system/
 * extension-apiserver-authentication): validity, signature chain, the clientAuth usage, and the CN.
 */
import type { X509Certificate } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { verifyPeer } from '../auth/peer-verification.ts';

/** The subject CN prefix of every replica's peer certificate. */
export const peerCommonNamePrefix = 'cluster-gateway-peer:';

/** The CN of `replica`'s peer certificate in `namespace`. */
export function peerCommonName(namespace: string, replica: string): string {
  return `${peerCommonNamePrefix}${namespace}:${replica}`;
}

/**
 * The namespace and replica a peer CN names, or undefined when it names none: exactly three parts,
 * the namespace a DNS label, the replica a DNS subdomain (a pod name).
 */
export function parsePeerCommonName(cn: string): { namespace: string; replica: string } | undefined {
  if (!cn.startsWith(peerCommonNamePrefix)) return undefined;
  const parts = cn.slice(peerCommonNamePrefix.length).split(':');
  if (parts.length !== 2) return undefined;
  const [namespace = '', replica = ''] = parts;
  if (!isDnsLabel(namespace) || !isDnsSubdomain(replica)) return undefined;
  return { namespace, replica };
}

function isDnsLabel(s: string): boolean {
  return s.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(s);
}

function isDnsSubdomain(s: string): boolean {
  return s.length <= 253 && s.split('.').every(isDnsLabel);
}

/** What a replica trusts on the peer port. */
export interface PeerTrust {
  /** Trust anchors of peer certificates (the hub's client CA bundle). */
  roots: readonly X509Certificate[];
  /** The replica a verified certificate's CN names, or undefined when it names no replica of ours. */
  replicaOf(commonName: string, organizations: readonly string[]): string | undefined;
}

/** Trust in the hub's client CA: CN `cluster-gateway-peer:<namespace>:<replica>`, no organization. */
export function hubPeerTrust(roots: readonly X509Certificate[], namespace: string): PeerTrust {
  return {
    roots,
    replicaOf(commonName, organizations) {
      // An O would be a group on the hub: the manager approves none, so a certificate with one is not ours.
      if (organizations.length > 0) return undefined;
      const parsed = parsePeerCommonName(commonName);
      return parsed?.namespace === namespace ? parsed.replica : undefined;
    },
  };
}

/**
 * Trust in a dedicated peer CA from files (--tunnel-peer-ca, for gateways run outside a pod, as the
 * e2e harness does): that CA signs replicas only, and a certificate's CN is the replica's name.
 */
export function dedicatedCaPeerTrust(roots: readonly X509Certificate[]): PeerTrust {
  return { roots, replicaOf: (commonName) => commonName || undefined };
}

export type PeerCheck = { ok: true; replica: string } | { ok: false; reason: string };

/** Verifies the certificate the other end of `socket` presented: the replica it proves to be, or why not. */
export function verifyPeerSocket(
  socket: TLSSocket,
  trust: PeerTrust | undefined,
  now = new Date(),
): PeerCheck {
  if (!trust) return { ok: false, reason: 'no trust anchor for peer certificates yet' };
  // verifyPeer reads only the request's socket: a session's socket stands in for it.
  const verification = verifyPeer({ socket } as unknown as IncomingMessage, trust.roots, now);
  if (!verification) return { ok: false, reason: 'no certificate presented' };
  if (!verification.ok) return { ok: false, reason: verification.reason };
  const replica = trust.replicaOf(verification.commonName, verification.organizations);
  if (!replica) {
    return {
      ok: false,
      reason: `certificate subject ${JSON.stringify(verification.commonName)} names no replica`,
    };
  }
  return { ok: true, replica };
}
