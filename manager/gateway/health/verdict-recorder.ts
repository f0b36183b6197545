/**
 * Where a probe verdict goes: onto the cluster's hub object (annotation-store.ts recordProbe), so that
 * every replica shows it; into this replica's registry only when there is no such object (a cluster
 * known by its tunnel alone) or the write failed (the gateway may not patch it, the hub is away). A
 * verdict kept in memory wins over a recorded one, so it is cleared as soon as one is recorded: a
 * cluster whose Secret appears after it was probed as tunnel-only must not keep the old verdict.
 *
 * A verdict whose object was deleted meanwhile ('gone') is dropped, not kept in memory: the registry
 * numbers a verdict in memory above the newest hub revision it has seen, and the hub's next revision
 * (very likely the deletion's own) would then carry the same resourceVersion as that verdict, two
 * events of one object with one version. The deletion decides what the cluster is anyway.
 */
import type { ClusterHealth } from '../clusters/cluster.ts';

export interface VerdictRecorderOptions {
  store: {
    recordProbe(name: string, health: ClusterHealth): Promise<'written' | 'unchanged' | 'nowhere' | 'gone'>;
  };
  registry: { setHealth(name: string, health: ClusterHealth | undefined): void };
  log?: { warn(o: object, m: string): void };
}

export function createVerdictRecorder(options: VerdictRecorderOptions) {
  return async (name: string, health: ClusterHealth): Promise<void> => {
    try {
      const outcome = await options.store.recordProbe(name, health);
      if (outcome === 'gone') return;
      options.registry.setHealth(name, outcome === 'nowhere' ? health : undefined);
    } catch (err) {
      options.registry.setHealth(name, health);
      options.log?.warn(
        { cluster: name, err: (err as Error).message },
        'cannot record the probe verdict on the hub; this replica shows it, the next probe retries',
      );
    }
  };
}
