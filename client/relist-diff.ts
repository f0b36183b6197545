/**
 * What changed between an informer's cache and a fresh list: after a 410 Gone the watch cannot resume
 * from the informer's resourceVersion (the server compacted past it), so the informer relists and emits
 * these differences instead, so that its handlers still see every object's final state: added, updated
 * (the resourceVersion differs) and deleted (in the cache, not in the list).
 */
import type { KubernetesObject } from '@kubernetes/client-node';

/** Cache key: "namespace/name", or "name" for a cluster-scoped object. */
export function objectKey(obj: KubernetesObject): string {
  const name = obj.metadata?.name ?? '';
  const namespace = obj.metadata?.namespace;
  return namespace ? `${namespace}/${name}` : name;
}

export interface RelistDiff<T> {
  added: T[];
  updated: T[];
  deleted: T[];
}

export function diffRelist<T extends KubernetesObject>(
  cache: ReadonlyMap<string, T>,
  items: readonly T[],
): RelistDiff<T> {
  const diff: RelistDiff<T> = { added: [], updated: [], deleted: [] };
  const listed = new Set<string>();
  for (const item of items) {
    const key = objectKey(item);
    listed.add(key);
    const cached = cache.get(key);
    if (!cached) {
      diff.added.push(item);
    } else if (cached.metadata?.uid && item.metadata?.uid && cached.metadata.uid !== item.metadata.uid) {
      // Deleted and created again under the same name while the watch was gone: two events, not an update.
      diff.deleted.push(cached);
      diff.added.push(item);
    } else if (
      // Same resourceVersion: the same object state; a missing one cannot be compared, so it counts as new.
      !cached.metadata?.resourceVersion ||
      cached.metadata.resourceVersion !== item.metadata?.resourceVersion
    ) {
      diff.updated.push(item);
    }
  }
  for (const [key, cached] of cache) if (!listed.has(key)) diff.deleted.push(cached);
  return diff;
}
