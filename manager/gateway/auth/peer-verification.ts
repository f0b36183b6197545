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
  const verification = verifyClientChain(peer, roots, now);
  const result: PeerVerification = verification.ok
    ? { ok: true, ...subjectNames(peer.leaf) }
    : { ok: false, reason: verification.reason };
  const until = verification.ok ? Date.parse(peer.leaf.validTo) : now.getTime() + 1000;
  const entries = byRoots ?? new WeakMap<object, Cached>();
  entries.set(roots, { result, until });
  if (!byRoots) cache.set(socket, entries);
  return result;
}
