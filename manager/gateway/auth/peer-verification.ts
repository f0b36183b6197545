/**
 * Client-certificate verification, remembered per TLS connection.
 *
 * A keep-alive connection presents the same certificate on every request
 * (the server disables TLS renegotiation, see serving.ts), so the chain check
 * — an ECDSA/RSA signature verification and subject parsing, about 30% of the
 * gateway's CPU per proxied request when repeated — runs once per connection
 * and per trust configuration. The cached result still expires with the
 * certificate, and a new ConfigMap revision (new `roots` array) misses the
 * cache by identity.
 *
 * A verified certificate is also remembered by its SHA-256 fingerprint, for
 * the next connection that presents it: the aggregator opens a connection per
 * watch it ends, always with the same front-proxy certificate, and the chain
 * check plus parsing the subject cost each new connection about 6 % of a watch
 * start's CPU (profile in docs/benchmarks-log.md, "Watch start"). Sound because
 * the TLS handshake of every connection proves possession of the certificate's
 * key, and whether a certificate chains to the roots does not depend on who
 * presents it. Only successes are remembered, at most MAX_REMEMBERED of them.
 */
import type { IncomingMessage } from 'node:http';
import { peerCertificates, subjectNames, verifyClientChain } from '../../../shared/x509-chain.ts';

export type PeerVerification =
  | { ok: true; commonName: string; organizations: string[] }
  | { ok: false; reason: string };

interface Cached {
  result: PeerVerification;
  /** ms since epoch after which the result must be recomputed (certificate expiry). */
  until: number;
}

const cache = new WeakMap<object, WeakMap<object, Cached>>();

/** Certificates verified on earlier connections, by fingerprint: a few callers (the aggregator's replicas), bounded. */
const MAX_REMEMBERED = 64;
const byFingerprint = new Map<string, Cached & { roots: object }>();

/** Undefined when the connection carries no client certificate. */
export function verifyPeer(
  req: IncomingMessage,
  roots: readonly import('node:crypto').X509Certificate[],
  now: Date,
): PeerVerification | undefined {
  const socket = req.socket as object;
  const byRoots = cache.get(socket);
  const hit = byRoots?.get(roots);
  if (hit && now.getTime() < hit.until) return hit.result;

  const peer = peerCertificates(req);
  if (!peer) return undefined;
  const fingerprint = peer.leaf.fingerprint256;
  const known = byFingerprint.get(fingerprint);
  let cached: Cached;
  if (known && known.roots === roots && now.getTime() < known.until) {
    cached = known;
  } else {
    const verification = verifyClientChain(peer, roots, now);
    const result: PeerVerification = verification.ok
      ? { ok: true, ...subjectNames(peer.leaf) }
      : { ok: false, reason: verification.reason };
    const until = verification.ok ? Date.parse(peer.leaf.validTo) : now.getTime() + 1000;
    cached = { result, until };
    if (verification.ok) {
      if (byFingerprint.size >= MAX_REMEMBERED)
        byFingerprint.delete(byFingerprint.keys().next().value as string);
      byFingerprint.set(fingerprint, { ...cached, roots });
    }
  }
  const entries = byRoots ?? new WeakMap<object, Cached>();
  entries.set(roots, cached);
  if (!byRoots) cache.set(socket, entries);
  return cached.result;
}
