/**
 * Client-certificate chain verification against one specific CA bundle, and
 * the one rule by which the gateway vouches for a cluster's server
 * certificate itself (isDirectlyTrustedServer).
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
import { isIP } from 'node:net';
import type { DetailedPeerCertificate, TLSSocket } from 'node:tls';

const clientAuthOid = '1.3.6.1.5.5.7.3.2';
const serverAuthOid = '1.3.6.1.5.5.7.3.1';
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
  if (!allowsUsage(leaf, clientAuthOid)) {
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
    if (issues(root, current) && withinValidity(root, now) && allowsUsage(root, clientAuthOid)) {
      return [...chain, root];
    }
  }
  if (chain.length >= maxChainLength - 1) return undefined;
  for (const candidate of peer.intermediates()) {
    if (chain.some((cert) => cert.fingerprint256 === candidate.fingerprint256)) continue;
    if (!candidate.ca || !issues(candidate, current)) continue;
    if (!withinValidity(candidate, now) || !allowsUsage(candidate, clientAuthOid)) continue;
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
function allowsUsage(cert: X509Certificate, usageOid: string): boolean {
  const usages = cert.keyUsage as string[] | undefined;
  if (!usages || usages.length === 0) return true;
  return usages.includes(usageOid) || usages.includes(anyExtendedKeyUsageOid);
}

// The nameConstraints extension's OID (2.5.29.30) as DER encodes it. Found anywhere in a certificate
// (perhaps by chance inside a key or signature), it sends the certificate to OpenSSL.
const nameConstraintsOid = Buffer.from([0x06, 0x03, 0x55, 0x1d, 0x1e]);

/**
 * Whether a server certificate is trusted for `host` by the simplest rule there is, with no chain to
 * build: it is one of `roots`, or a CA among them signed it directly (the usual cluster PKI: the
 * cluster's CA signs its kube-apiserver's certificate). Both valid at `now`, both allowing server
 * authentication, and the leaf naming `host` in its subjectAltNames (Go ignores the common name, so
 * does this); a SHA-2 or Ed25519 signature, RSA keys of 2,048 bits or more, ECDSA on the NIST
 * curves. Any other shape (intermediates, name constraints) answers false, as does a
 * certificate that fails a rule: false means "not vouched for here", and the caller then lets
 * OpenSSL verify the connection, whose verdict and wording stand (shared/transport/one-shot-tls.ts).
 */
export function isDirectlyTrustedServer(
  leaf: X509Certificate,
  roots: readonly X509Certificate[],
  host: string,
  now: Date = new Date(),
): boolean {
  if (!withinValidity(leaf, now) || !allowsUsage(leaf, serverAuthOid)) return false;
  if (leaf.raw.includes(nameConstraintsOid) || !strongSignature(leaf) || !strongKey(leaf)) return false;
  const named = isIP(host)
    ? leaf.checkIP(host) !== undefined
    : leaf.checkHost(host, { subject: 'never', partialWildcards: false }) !== undefined;
  if (!named) return false;
  return roots.some(
    (root) =>
      !root.raw.includes(nameConstraintsOid) &&
      (root.fingerprint256 === leaf.fingerprint256 ||
        (root.ca &&
          withinValidity(root, now) &&
          allowsUsage(root, serverAuthOid) &&
          strongKey(root) &&
          issues(root, leaf))),
  );
}

// Signature algorithms Go's crypto/x509 accepts for a certificate (SHA-1 and MD5 are not among
// them; OpenSSL 3 refuses them too): RSA PKCS#1 v1.5 and PSS with SHA-2, ECDSA with SHA-2, Ed25519.
const strongSignatureOids = new Set([
  '1.2.840.113549.1.1.11',
  '1.2.840.113549.1.1.12',
  '1.2.840.113549.1.1.13',
  '1.2.840.113549.1.1.10',
  '1.2.840.10045.4.3.2',
  '1.2.840.10045.4.3.3',
  '1.2.840.10045.4.3.4',
  '1.3.101.112',
]);
const strongCurves = new Set(['prime256v1', 'secp384r1', 'secp521r1']);

function strongSignature(cert: X509Certificate): boolean {
  return strongSignatureOids.has(cert.signatureAlgorithmOid);
}

/** RSA of 2,048 bits or more, ECDSA on P-256, P-384 or P-521, or Ed25519: anything weaker is OpenSSL's to judge. */
function strongKey(cert: X509Certificate): boolean {
  const key = cert.publicKey;
  const details = key.asymmetricKeyDetails;
  switch (key.asymmetricKeyType) {
    case 'rsa':
    case 'rsa-pss':
      return (details?.modulusLength ?? 0) >= 2048;
    case 'ec':
      return strongCurves.has(details?.namedCurve ?? '');
    case 'ed25519':
      return true;
    default:
      return false;
  }
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
