/**
 * With several gateway replicas, one of them probes: the holder of the `cluster-gateway-prober`
 * Lease in the gateway's namespace (leader election as the addon manager does it,
 * shared/kube/leader-election.ts). Its verdicts are annotations on the clusters' hub objects
 * (health/annotation-store.ts recordProbe), so every replica shows the same health at the same
 * resourceVersion; replicas probing on their own would each show their own view, at versions of
 * their own. When the leader goes, another takes over within the Lease's duration and the recorded
 * verdicts stay shown meanwhile.
 *
 * The Lease also serves as the replicas' heartbeat: it carries the tunnel Leases' label, so every
 * replica's Lease informer sees its renewal every two seconds, and with it the hub's current
 * revision. That keeps the list resourceVersion each replica hands out moving while nothing else
 * changes, so a watch started on another replica from that version never waits long for it
 * (clusters/registry.ts, api/watch.ts). It runs with the prober off too.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { KubeClient } from '../../../shared/kube/client.ts';
import { KubeLeaseLock, LeaderElector } from '../../../shared/kube/leader-election.ts';
import { leaseLabel } from '../tunnel/leases.ts';

export const proberLeaseName = 'cluster-gateway-prober';
/** The label value that tells the heartbeat from the tunnel Leases (`true`). */
export const heartbeatLabelValue = 'heartbeat';

export interface ProberLeadershipOptions {
  hub: Pick<KubeClient, 'getOptional' | 'create' | 'request'>;
  namespace: string;
  /** This replica (its pod name). */
  identity: string;
  /** Called when this replica becomes the prober; `signal` aborts when it stops being it. */
  onStartedLeading(signal: AbortSignal): void;
  log: Pick<Logger, 'info' | 'warn' | 'debug'>;
}

export interface ProberLeadership {
  readonly leading: boolean;
  /** Stops competing and hands the Lease over if held. */
  stop(): Promise<void>;
}

export function startProberLeadership(options: ProberLeadershipOptions): ProberLeadership {
  const retryPeriodMs = 2_000;
  const elector = new LeaderElector({
    lock: new KubeLeaseLock(options.hub, options.namespace, proberLeaseName, {
      [leaseLabel]: heartbeatLabelValue,
    }),
    identity: options.identity,
    leaseDurationMs: 15_000,
    renewDeadlineMs: 10_000,
    retryPeriodMs,
    log: options.log,
    onStartedLeading: (signal) => options.onStartedLeading(signal),
  });
  const stopping = new AbortController();
  const running = (async () => {
    while (!stopping.signal.aborted) {
      await elector.run(stopping.signal);
      if (!stopping.signal.aborted) await delay(retryPeriodMs, undefined, { ref: false }).catch(() => {});
    }
  })();
  return {
    get leading() {
      return elector.isLeader;
    },
    async stop() {
      stopping.abort();
      await running;
      await elector
        .release()
        .catch((err: Error) =>
          options.log.warn({ err: err.message }, 'cannot release the prober Lease; it expires on its own'),
        );
    },
  };
}
