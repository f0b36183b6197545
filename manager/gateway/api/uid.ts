/**
 * metadata.uid for virtual objects: a name-based UUID (RFC 4122 version 5),
 * so every gateway replica and every restart reports the same uid for the
 * same cluster, which clients use to tell objects apart.
 */
import { createHash } from 'node:crypto';

/** A fixed namespace UUID for ClusterGateway names (random, chosen once). */
const namespace = Buffer.from('6f1c2b9e4d8a4f3b9c7e1a2d3b4c5d6e', 'hex');

export function uidFromName(name: string): string {
  const hash = createHash('sha1').update(namespace).update(name, 'utf8').digest();
  hash[6] = ((hash[6] ?? 0) & 0x0f) | 0x50;
  hash[8] = ((hash[8] ?? 0) & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
