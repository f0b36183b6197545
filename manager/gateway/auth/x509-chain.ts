/**
 * Client-certificate chain verification against one specific CA bundle.
 *
 * The TLS server trusts the front-proxy CA and the client CA together (the
 * aggregator only presents its proxy certificate when the server names that
 * CA in its CertificateRequest), with `rejectUnauthorized: false`, so
 * OpenSSL's verdict (`socket.authorized`) cannot tell which CA signed a
 * certificate. Each authenticator re-verifies the chain against its own
 * bundle here, as Go's x509.Verify does with `Roots` set to that bundle:
 * signatures, issuer names, validity dates, CA flags of intermediates and
 * the clientAuth extended key usage along the whole chain.
 *
 * Limitation: Node (24) does not expose the intermediates a client sends on
 * a server-side socket (getPeerCertificate(true) stops at the leaf), so in
 * practice the leaf's issuer must be in the bundle. Any certificate in a
 * bundle is a trust anchor, as in Go's Roots pool, and the usual front-proxy
 * and client CAs sign their leaves directly. A client relying on an
 * intermediate that only it sends is refused, never accepted unchecked.
 */
import { X509Certificate } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { DetailedPeerCertificate, TLSSocket } from 'node:tls';

const clientAuthOid = '1.3.6.1.5.5.7.3.2';
const anyExtendedKeyUsageOid = '2.5.29.37.0';
// Deep enough for any real PKI, small enough to bound the search.
const maxChainLength = 8;

/** Parses every CERTIFICATE block of a PEM bundle; throws on a malformed one. */
export function parsePemBundle(pem: string): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((block) => new X509Certificate(block));
}

/** The certificates a client presented on this request's TLS connection. */
export interface PeerCertificates {
  leaf: X509Certificate;
  /** Further certificates from the handshake, built lazily: most clients send none. */
  intermediates(): X509Certificate[];
}

export function peerCertificates(req: IncomingMessage): PeerCertificates | undefined {
  const socket = req.socket as Partial<TLSSocket>;
  if (typeof socket.getPeerX509Certificate !== 'function') return undefined;
  const leaf = socket.getPeerX509Certificate();
  if (!leaf) return undefined;
  let intermediates: X509Certificate[] | undefined;
  return {
    leaf,
    intermediates() {
      intermediates ??= handshakeChain(socket as TLSSocket).slice(1);
      return intermediates;
    },
  };
}

function handshakeChain(socket: TLSSocket): X509Certificate[] {
  const chain: X509Certificate[] = [];
  const seen = new Set<DetailedPeerCertificate>();
  let current: DetailedPeerCertificate | undefined = socket.getPeerCertificate(true);
  // A self-signed certificate is its own issuerCertificate: stop on repeats.
  while (current?.raw && !seen.has(current) && chain.length < maxChainLength) {
    seen.add(current);
    chain.push(new X509Certificate(current.raw));
    current = current.issuerCertificate;
  }
  return chain;
}

export type ChainVerification = { ok: true; chain: X509Certificate[] } | { ok: false; reason: string };

/**
 * Verifies that `leaf` chains up to one of `roots`, possibly through
 * `intermediates`, and that every certificate on the way is valid at `now`
 * and allows client authentication.
 */
export function verifyClientChain(
  peer: PeerCertificates,
  roots: readonly X509Certificate[],
  now: Date = new Date(),
): ChainVerification {
  const { leaf } = peer;
  if (!withinValidity(leaf, now)) {
    return { ok: false, reason: `certificate ${describe(leaf)} has expired or is not yet valid` };
  }
  if (!allowsClientAuth(leaf)) {
    return { ok: false, reason: `certificate ${describe(leaf)} is not valid for client authentication` };
  }
  if (roots.length === 0) return { ok: false, reason: 'no certificate authority configured' };
  // Like Go, a leaf that is itself one of the roots is trusted as is.
  if (roots.some((root) => root.fingerprint256 === leaf.fingerprint256)) return { ok: true, chain: [leaf] };

  const chain = search([leaf], peer, roots, now);
  if (chain) return { ok: true, chain };
  return { ok: false, reason: `certificate ${describe(leaf)} is not signed by a trusted authority` };
}

/** Depth-first search with backtracking: two candidate issuers may share a subject name. */
function search(
  chain: X509Certificate[],
  peer: PeerCertificates,
  roots: readonly X509Certificate[],
  now: Date,
): X509Certificate[] | undefined {
  const current = chain[chain.length - 1]!;
  for (const root of roots) {
    if (issues(root, current) && withinValidity(root, now) && allowsClientAuth(root)) {
      return [...chain, root];
    }
  }
  if (chain.length >= maxChainLength - 1) return undefined;
  for (const candidate of peer.intermediates()) {
    if (chain.some((cert) => cert.fingerprint256 === candidate.fingerprint256)) continue;
    if (!candidate.ca || !issues(candidate, current)) continue;
    if (!withinValidity(candidate, now) || !allowsClientAuth(candidate)) continue;
    const found = search([...chain, candidate], peer, roots, now);
    if (found) return found;
  }
  return undefined;
}

function issues(issuer: X509Certificate, subject: X509Certificate): boolean {
  // `subject.checkIssued(issuer)` asks "was subject issued by issuer?":
  // names, key identifiers and the issuer's keyCertSign usage. Only the
  // signature check proves that the issuer's key signed it.
  return subject.checkIssued(issuer) && subject.verify(issuer.publicKey);
}

function withinValidity(cert: X509Certificate, now: Date): boolean {
  const time = now.getTime();
  return cert.validFromDate.getTime() <= time && time <= cert.validToDate.getTime();
}

// No extendedKeyUsage extension means any usage (RFC 5280 4.2.1.12), as in Go.
function allowsClientAuth(cert: X509Certificate): boolean {
  const usages = cert.keyUsage as string[] | undefined;
  if (!usages || usages.length === 0) return true;
  return usages.includes(clientAuthOid) || usages.includes(anyExtendedKeyUsageOid);
}

/** Subject common name and organizations (Kubernetes' user name and groups). */
export function subjectNames(cert: X509Certificate): { commonName: string; organizations: string[] } {
  const subject = cert.toLegacyObject().subject as unknown as Record<string, string | string[] | undefined>;
  const cn = subject['CN'];
  // Go keeps the last CN of a multi-valued subject; OpenSSL lists them in order.
  const commonName = Array.isArray(cn) ? (cn[cn.length - 1] ?? '') : (cn ?? '');
  const o = subject['O'];
  const organizations = o === undefined ? [] : Array.isArray(o) ? o : [o];
  return { commonName, organizations };
}

function describe(cert: X509Certificate): string {
  const { commonName } = subjectNames(cert);
  return `"${commonName}" (serial ${cert.serialNumber})`;
}
