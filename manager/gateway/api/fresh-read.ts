/**
 * A GET of one ClusterGateway reads what the hub holds now, as a GET from the apiserver does, not
 * what this replica's watch has delivered so far. Another replica may have answered a health write
 * a moment ago; the aggregator may send the next GET here, and a cached answer would carry the
 * version before that write, so a client that writes next gets a 409 it did not earn.
 *
 * So before the answer, the hub objects the cluster is built from (its credential Secret, its
 * ManagedCluster, its tunnel Lease: one GET each, by name, in parallel) are compared with this
 * replica's informer caches, and the answer waits until the caches hold those versions (at most
 * three seconds, then a 504 as the apiserver gives when its cache lags). LIST and watch read the
 * cache (api/versions.ts): they carry a version a later request can name.
 *
 * When the hub cannot be asked, the cache answers: the gateway's API must not fail when only its
 * freshness check does.
 */
import type { KubeClient, KubeObject } from '../../../shared/kube/client.ts';
import { parseResourceVersion } from '../clusters/health-precedence.ts';
import { blockTimeoutMs, tooLarge } from './versions.ts';

/** One kind of hub object clusters are built from, as its informer holds it. */
export interface WatchedSource {
  /** The object of cluster `name` on the hub. */
  path(name: string): string;
  /** The version this replica's informer holds of that object, undefined when it holds none. */
  cached(name: string): string | undefined;
  /** Whether the informer would hold `object` (its label selector). */
  selects(object: KubeObject): boolean;
}

export interface FreshReadOptions {
  hub: Pick<KubeClient, 'getOptional'>;
  sources: WatchedSource[];
  /** How often the caches are checked while waiting. */
  pollMs?: number;
  onHubError?: (err: unknown) => void;
}

/**
 * Resolves once this replica's caches hold what the hub held for cluster `name` when the call was
 * made. Concurrent reads of one cluster share the hub's answer: a read that arrives while a check is
 * under way waits for the next one (which starts after it arrived, so it sees every write finished
 * before), and everyone waiting then shares that one. Under load a cluster costs the hub one round of
 * GETs per round trip, not one per request (`npm run bench:replicas`).
 */
export function createFreshRead(options: FreshReadOptions): (name: string) => Promise<void> {
  const pollMs = options.pollMs ?? 5;
  const rounds = new Map<string, { running: Promise<void>; next?: Promise<void> }>();

  const check = async (name: string): Promise<void> => {
    let wanted: Array<{ source: WatchedSource; version: number | 'absent' }>;
    try {
      wanted = await Promise.all(
        options.sources.map(async (source) => {
          const object = await options.hub.getOptional<KubeObject>(source.path(name));
          const version =
            object && source.selects(object) ? parseResourceVersion(object.metadata?.resourceVersion) : 0;
          return { source, version: version > 0 ? version : ('absent' as const) };
        }),
      );
    } catch (err) {
      options.onHubError?.(err);
      return;
    }
    const caughtUp = () =>
      wanted.every(({ source, version }) => {
        const cached = source.cached(name);
        if (version === 'absent') return cached === undefined;
        return cached !== undefined && parseResourceVersion(cached) >= version;
      });
    const deadline = Date.now() + blockTimeoutMs;
    while (!caughtUp()) {
      if (Date.now() >= deadline) {
        const newest = Math.max(0, ...wanted.map((w) => (w.version === 'absent' ? 0 : w.version)));
        throw tooLarge(newest, 'not yet applied by this gateway replica');
      }
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  };

  const start = (name: string): Promise<void> => {
    const running = check(name);
    const round: { running: Promise<void>; next?: Promise<void> } = { running };
    rounds.set(name, round);
    const settle = () => {
      if (rounds.get(name) === round && !round.next) rounds.delete(name);
    };
    running.then(settle, settle);
    return running;
  };

  return (name) => {
    const round = rounds.get(name);
    if (!round) return start(name);
    // A check under way may have read the hub before this request arrived: join the next one.
    round.next ??= round.running.then(
      () => start(name),
      () => start(name),
    );
    return round.next;
  };
}
