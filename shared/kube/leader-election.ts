/**
 * Leader election over a coordination.k8s.io/v1 Lease, after client-go's
 * leaderelection package, so that two manager replicas never both act:
 * - a standby takes over only when the holder has not renewed for a full
 *   lease duration, measured on the standby's own clock from the moment it
 *   last saw the record change (clock skew between replicas cannot shorten it);
 * - every write is an optimistic update on the Lease's resourceVersion, so
 *   two standbys racing for an expired Lease cannot both win;
 * - the leader gives up after failing to renew for `renewDeadline` (shorter
 *   than the lease duration), or at once when it sees another holder, before
 *   anyone else may take over;
 * - on shutdown the leader releases the Lease (empty holder), so the standby
 *   takes over on its next retry instead of after the lease expires.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { KubeClient } from './client.ts';
import { StatusError } from './status.ts';

export interface LeaderRecord {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

export interface LockState {
  record: LeaderRecord;
  resourceVersion: string;
}

/** Where the record lives; a conflicting write rejects (409), as the API server does. */
export interface LeaseLock {
  describe(): string;
  get(): Promise<LockState | undefined>;
  create(record: LeaderRecord): Promise<void>;
  update(record: LeaderRecord, resourceVersion: string): Promise<void>;
}

/** A Kubernetes MicroTime: RFC 3339 with exactly six fractional digits (Go parses no other width). */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export function leaderIdentity(): string {
  return `${hostname()}_${randomUUID()}`;
}

export class KubeLeaseLock implements LeaseLock {
  readonly #client: Pick<KubeClient, 'getOptional' | 'create' | 'request'>;
  readonly #path: string;
  readonly #namespace: string;
  readonly #name: string;
  readonly #labels: Record<string, string> | undefined;

  /** `labels` are written with every update, so an informer that selects on them sees each renewal. */
  constructor(
    client: Pick<KubeClient, 'getOptional' | 'create' | 'request'>,
    namespace: string,
    name: string,
    labels?: Record<string, string>,
  ) {
    this.#client = client;
    this.#labels = labels;
    this.#namespace = namespace;
    this.#name = name;
    this.#path = `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${name}`;
  }

  describe(): string {
    return `${this.#namespace}/${this.#name}`;
  }

  async get(): Promise<LockState | undefined> {
    const lease = await this.#client.getOptional<{
      metadata: { resourceVersion?: string };
      spec?: LeaderRecord;
    }>(this.#path);
    if (!lease) return undefined;
    return { record: lease.spec ?? {}, resourceVersion: lease.metadata.resourceVersion ?? '' };
  }

  async create(record: LeaderRecord): Promise<void> {
    await this.#client.create(`/apis/coordination.k8s.io/v1/namespaces/${this.#namespace}/leases`, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: this.#name,
        namespace: this.#namespace,
        ...(this.#labels ? { labels: this.#labels } : {}),
      },
      spec: record,
    });
  }

  async update(record: LeaderRecord, resourceVersion: string): Promise<void> {
    await this.#client.request('PUT', this.#path, {
      body: {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: {
          name: this.#name,
          namespace: this.#namespace,
          resourceVersion,
          ...(this.#labels ? { labels: this.#labels } : {}),
        },
        spec: record,
      },
    });
  }
}

export interface LeaderElectorOptions {
  lock: LeaseLock;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  log?: Pick<Logger, 'info' | 'warn' | 'debug'>;
  /** Called once leadership is acquired; `signal` aborts when it is lost or the elector stops. */
  onStartedLeading(signal: AbortSignal): void;
  /** Called when leadership ends (lost, or released on stop). */
  onStoppedLeading?(): void;
  /** Injected for tests. */
  now?: () => number;
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  random?: () => number;
}

const sleepUnlessAborted = async (ms: number, signal: AbortSignal) => {
  try {
    await delay(ms, undefined, { signal });
  } catch {
    // aborted: callers check the signal
  }
};

export class LeaderElector {
  readonly identity: string;
  readonly #options: LeaderElectorOptions;
  readonly #now: () => number;
  readonly #sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  readonly #random: () => number;
  #observed: { record: LeaderRecord; resourceVersion: string } | undefined;
  /** Our clock when the observed record last changed. */
  #observedAt = 0;
  #leading: AbortController | undefined;

  constructor(options: LeaderElectorOptions) {
    if (!(options.renewDeadlineMs < options.leaseDurationMs)) {
      throw new Error('renewDeadline must be shorter than the lease duration');
    }
    this.#options = options;
    this.identity = options.identity;
    this.#now = options.now ?? Date.now;
    this.#sleep = options.sleep ?? sleepUnlessAborted;
    this.#random = options.random ?? Math.random;
  }

  get isLeader(): boolean {
    return Boolean(this.#leading && !this.#leading.signal.aborted);
  }

  /** The holder this replica last saw ('' when none). */
  get observedLeader(): string {
    return this.#observed?.record.holderIdentity ?? '';
  }

  /** Acquires, leads while renewals succeed, and returns when leadership ends or `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const { retryPeriodMs, renewDeadlineMs, log } = this.#options;
    // Acquire: retry with jitter so that standbys do not hammer the Lease in step.
    while (!signal.aborted) {
      if (await this.#tryAcquireOrRenew()) break;
      await this.#sleep(retryPeriodMs * (1 + 0.2 * this.#random()), signal);
    }
    if (signal.aborted) return;
    const leading = new AbortController();
    this.#leading = leading;
    log?.info({ lease: this.#options.lock.describe(), identity: this.identity }, 'acquired leadership');
    this.#options.onStartedLeading(leading.signal);

    // Renew: give up after renewDeadline without a successful renewal.
    let lastRenew = this.#now();
    while (!signal.aborted && !leading.signal.aborted) {
      await this.#sleep(retryPeriodMs, signal);
      if (signal.aborted) break;
      const renewed = await this.#tryAcquireOrRenew();
      if (renewed) {
        lastRenew = this.#now();
        continue;
      }
      const stolen = this.observedLeader !== '' && this.observedLeader !== this.identity;
      if (stolen || this.#now() - lastRenew >= renewDeadlineMs) {
        log?.warn(
          { lease: this.#options.lock.describe(), holder: this.observedLeader, stolen },
          'lost leadership',
        );
        break;
      }
    }
    if (!leading.signal.aborted) {
      leading.abort();
      // On stop, `release()` reports the end once the Lease is handed over.
      if (!signal.aborted) this.#options.onStoppedLeading?.();
    }
  }

  /** Hands the Lease over (empty holder) if this replica holds it; stops leading. */
  async release(): Promise<void> {
    const leading = this.#leading;
    if (!leading) return;
    leading.abort();
    this.#leading = undefined;
    try {
      const state = await this.#options.lock.get();
      if (!state || state.record.holderIdentity !== this.identity) return;
      await this.#options.lock.update(
        {
          ...state.record,
          holderIdentity: '',
          leaseDurationSeconds: 1,
          renewTime: microTime(this.#now()),
        },
        state.resourceVersion,
      );
      this.#options.log?.info({ lease: this.#options.lock.describe() }, 'released leadership');
    } finally {
      this.#options.onStoppedLeading?.();
    }
  }

  async #tryAcquireOrRenew(): Promise<boolean> {
    const { lock, leaseDurationMs, log } = this.#options;
    const now = this.#now();
    const fresh: LeaderRecord = {
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
      acquireTime: microTime(now),
      renewTime: microTime(now),
      leaseTransitions: 0,
    };
    let state: LockState | undefined;
    try {
      state = await lock.get();
      if (!state) {
        await lock.create(fresh);
        this.#observe({ record: fresh, resourceVersion: '' }, now);
        return true;
      }
    } catch (err) {
      log?.debug({ err: (err as Error).message }, 'leader election: cannot read or create the Lease');
      return false;
    }
    if (
      !this.#observed ||
      this.#observed.resourceVersion !== state.resourceVersion ||
      this.#observed.record.renewTime !== state.record.renewTime ||
      this.#observed.record.holderIdentity !== state.record.holderIdentity
    ) {
      this.#observe(state, now);
    }
    const holder = state.record.holderIdentity ?? '';
    const heldByOther = holder !== '' && holder !== this.identity;
    const durationMs = (state.record.leaseDurationSeconds ?? 0) * 1000;
    if (heldByOther && this.#observedAt + durationMs > now) return false;

    const next: LeaderRecord =
      holder === this.identity
        ? {
            ...fresh,
            acquireTime: state.record.acquireTime ?? fresh.acquireTime,
            leaseTransitions: state.record.leaseTransitions ?? 0,
          }
        : { ...fresh, leaseTransitions: (state.record.leaseTransitions ?? 0) + 1 };
    try {
      await lock.update(next, state.resourceVersion);
      this.#observe({ record: next, resourceVersion: '' }, now);
      return true;
    } catch (err) {
      if (!(err instanceof StatusError && err.code === 409)) {
        log?.debug({ err: (err as Error).message }, 'leader election: cannot update the Lease');
      }
      return false;
    }
  }

  #observe(state: LockState, at: number): void {
    this.#observed = state;
    this.#observedAt = at;
  }
}
