/**
 * The renewal loop. Each round first checks that the agent is healthy,
 * and renews nothing when it is not: a Lease must only ever say what was
 * true when it was written.
 * - unhealthy: the managed kube-apiserver's /readyz fails, the hub
 *   credential cannot be read, or the hub rejects it (401) or refuses it
 *   (403: a certificate for another identity, or hub RBAC missing);
 * - healthy but degraded: the hub is unreachable or the heartbeat Lease
 *   does not exist yet (the manager creates it): the spoke Lease is still
 *   renewed, since neither is the agent's fault and the klusterlet reports
 *   the spoke side only.
 * The hub read that checks the credential is the same read the renewal
 * needs: one GET and one PUT per round on the hub.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { KubeClient } from '../shared/kube/client.ts';
import { StatusError } from '../shared/kube/status.ts';
import { type Lease, type LeaseIdentity, type OwnerReference, renewLease } from './lease.ts';
import type { AgentMetrics, LeaseSide } from './metrics.ts';

export interface Logger {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface RenewerOptions {
  /** The current client for each side; throws when the credential cannot be read. */
  hub: () => KubeClient;
  spoke: () => KubeClient;
  hubLease: LeaseIdentity;
  spokeLease: LeaseIdentity;
  /** Owner of the spoke Lease, so it goes with the agent's manifests. */
  spokeOwner?: () => OwnerReference | undefined;
  intervalMs: number;
  jitter: number;
  metrics: AgentMetrics;
  log: Logger;
  random?: () => number;
}

export interface Health {
  healthy: boolean;
  /** Machine-readable cause, e.g. ManagedAPIServerNotReady. */
  reason: string;
  message: string;
}

export class Renewer {
  readonly #o: RenewerOptions;
  #health: Health = { healthy: false, reason: 'Starting', message: 'no check has run yet' };
  #lastRoundAt = Date.now();

  constructor(options: RenewerOptions) {
    this.#o = options;
  }

  get health(): Health {
    return this.#health;
  }

  /** When the last round started (ms): /healthz fails when the loop is stuck. */
  get lastRoundAt(): number {
    return this.#lastRoundAt;
  }

  /** The longest wait between two rounds. */
  get maxIntervalMs(): number {
    return this.#o.intervalMs * (1 + this.#o.jitter);
  }

  /** Requests of one round give up after this, so a hung apiserver cannot stall the loop. */
  get requestTimeoutMs(): number {
    return Math.min(10_000, Math.max(2_000, this.#o.intervalMs));
  }

  /** Runs rounds until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const random = this.#o.random ?? Math.random;
    while (!signal.aborted) {
      await this.round(signal);
      const wait = this.#o.intervalMs * (1 + random() * this.#o.jitter);
      await delay(wait, undefined, { signal }).catch(() => undefined);
    }
  }

  /** One round: check, then renew both Leases or skip. */
  async round(stop?: AbortSignal): Promise<void> {
    this.#lastRoundAt = Date.now();
    const timeout = AbortSignal.timeout(this.requestTimeoutMs);
    const signal = stop ? AbortSignal.any([stop, timeout]) : timeout;
    const { metrics, log } = this.#o;

    const check = await this.#check(signal);
    if (!check.health.healthy) {
      this.#setHealth(check.health);
      metrics.skipped(check.health.reason);
      log.debug({ reason: check.health.reason }, 'renewal skipped: agent unhealthy');
      return;
    }
    this.#setHealth(check.health);

    if (check.hub) {
      await this.#renew('hub', () =>
        renewLease(check.hub as KubeClient, this.#o.hubLease, {
          createIfMissing: false,
          ...(check.hubLease ? { current: check.hubLease } : {}),
          signal,
        }),
      );
    }
    await this.#renew('spoke', () => {
      const owner = this.#o.spokeOwner?.();
      return renewLease(this.#o.spoke(), this.#o.spokeLease, {
        createIfMissing: true,
        ...(owner ? { ownerReference: owner } : {}),
        signal,
      });
    });
  }

  async #renew(side: LeaseSide, write: () => Promise<string>): Promise<void> {
    const lease = side === 'hub' ? this.#o.hubLease : this.#o.spokeLease;
    try {
      const result = await write();
      this.#o.metrics.renewed(side);
      this.#o.log.debug({ lease: `${lease.namespace}/${lease.name}`, side, result }, 'lease renewed');
    } catch (err) {
      const reason = failureReason(err);
      this.#o.metrics.failed(side, reason);
      this.#o.log.warn(
        { lease: `${lease.namespace}/${lease.name}`, side, reason, err: (err as Error).message },
        'lease renewal failed',
      );
    }
  }

  async #check(signal: AbortSignal): Promise<{ health: Health; hub?: KubeClient; hubLease?: Lease }> {
    let spoke: KubeClient;
    try {
      spoke = this.#o.spoke();
    } catch (err) {
      return {
        health: {
          healthy: false,
          reason: 'ManagedCredentialUnavailable',
          message: `cannot read the managed cluster credential: ${(err as Error).message}`,
        },
      };
    }
    try {
      await spoke.request('GET', '/readyz', { signal });
    } catch (err) {
      return {
        health: {
          healthy: false,
          reason: 'ManagedAPIServerNotReady',
          message: `the managed cluster's kube-apiserver /readyz failed: ${(err as Error).message}`,
        },
      };
    }
    let hub: KubeClient;
    try {
      hub = this.#o.hub();
    } catch (err) {
      return {
        health: {
          healthy: false,
          reason: 'HubCredentialUnavailable',
          message: `cannot read the hub credential: ${(err as Error).message}`,
        },
      };
    }
    const { namespace, name } = this.#o.hubLease;
    try {
      const hubLease = await hub.request<Lease>(
        'GET',
        `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${name}`,
        { signal },
      );
      return { health: healthy('Healthy', 'renewing both Leases'), hub, hubLease };
    } catch (err) {
      if (err instanceof StatusError && err.code === 401) {
        return {
          health: {
            healthy: false,
            reason: 'HubCredentialRejected',
            message: 'the hub rejected the registration credential (401); OCM renews it through a CSR',
          },
        };
      }
      if (err instanceof StatusError && err.code === 403) {
        return {
          health: {
            healthy: false,
            reason: 'HubAccessForbidden',
            message: `the hub refused access to Lease ${namespace}/${name} (403): ${err.status.message}`,
          },
        };
      }
      if (err instanceof StatusError && err.code === 404) {
        return {
          health: healthy(
            'HubLeaseNotFound',
            `hub heartbeat Lease ${namespace}/${name} does not exist yet (the manager creates it); renewing the spoke Lease`,
          ),
        };
      }
      return {
        health: healthy(
          'HubUnreachable',
          `hub unreachable: ${(err as Error).message}; renewing the spoke Lease`,
        ),
      };
    }
  }

  #setHealth(health: Health): void {
    const before = this.#health;
    this.#health = health;
    this.#o.metrics.setHealthy(health.healthy);
    if (before.healthy !== health.healthy || before.reason !== health.reason) {
      const fields = { reason: health.reason, message: health.message };
      if (health.healthy) this.#o.log.info(fields, 'agent healthy: renewing');
      else this.#o.log.warn(fields, 'agent unhealthy: renewals skipped until it recovers');
    }
  }
}

function healthy(reason: string, message: string): Health {
  return { healthy: true, reason, message };
}

function failureReason(err: unknown): string {
  if (err instanceof StatusError) return err.reason || String(err.code);
  const code = (err as NodeJS.ErrnoException).code;
  if ((err as Error).name === 'TimeoutError' || (err as Error).name === 'AbortError') return 'Timeout';
  return code ?? 'Error';
}
