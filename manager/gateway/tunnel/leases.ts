/**
 * Which gateway replica holds which cluster's agent tunnel, kept in the hub as one
 * coordination.k8s.io Lease per cluster (`cluster-gateway-tunnel-<cluster>` in the gateway's
 * namespace): holderIdentity is the replica, an annotation its peer address (peers.ts).
 *
 * - LeaseHolder writes the Leases of the tunnels this replica holds, renews them every third of
 *   their duration while the tunnel is up, and releases them (holder emptied) when it goes, only
 *   while it is still the holder: an agent that moved on has made another replica the holder. The agent's
 *   newest connection is the truth, so a replica that gets a tunnel takes the Lease over whoever
 *   held it: there is no election to win.
 * - LeaseReader watches them and reports the live ones of other replicas. Whether a Lease is live
 *   is judged by this replica's clock from when it last saw the Lease change (as client-go's leader
 *   election does), not by renewTime, so clock skew between replicas does not matter: a replica
 *   that died stops renewing, and within the Lease's duration nobody forwards to it any more.
 *   The first replica to see that clears the holder (a conditional update: one of them wins), so
 *   every replica shows the tunnel disconnected at the same resourceVersion.
 * - What the ClusterGateway shows of a tunnel (connected, since, through which replica) comes from
 *   the Lease alone, the same on every replica (LeaseReader's onRecord), at the revision of the write
 *   that took it: renewals change the Lease's resourceVersion but not what it says, so the holder
 *   records that revision in an annotation on its first renewal (`acquiredRevisionAnnotation`).
 *
 * A Lease is untrusted input: anyone allowed to write Leases in this namespace could write one (the chart's
 * admission policy keeps that to the gateway's ServiceAccount; this file does not rely on it). So a Lease
 * counts only when its cluster is a DNS-1123 subdomain whose Lease name is the one this code derives from it,
 * and another replica's Lease only once its holder has proven over the peer port that it is that replica
 * (LeaseReaderOptions.verifyHolder, a peer certificate from the hub's signer naming it): until then it neither
 * routes nor shows the cluster connected. A holder whose renewal finds another holder stops serving the
 * tunnel (LeaseHolderOptions.onLost): the agent reconnects and takes the Lease again, so a forged update costs
 * a reconnect, never a tunnel that silently stops renewing.
 */
import { createHash } from 'node:crypto';
import type { KubeClient, KubeObject } from '../../../shared/kube/client.ts';
import { Informer, type InformerOptions } from '../../../shared/kube/informer.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import { isClusterName } from '../proxy/path.ts';

export const leaseLabel = 'cluster.core.oam.dev/tunnel-lease';
export const leaseClusterAnnotation = 'cluster.core.oam.dev/cluster-name';
export const leasePeerAddressAnnotation = 'cluster.core.oam.dev/tunnel-peer-address';
/** The resourceVersion of the write that took the Lease (a renewal keeps it). */
export const leaseAcquiredRevisionAnnotation = 'cluster.core.oam.dev/tunnel-acquired-revision';
const leasePrefix = 'cluster-gateway-tunnel-';

export interface Lease extends KubeObject {
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/** A cluster's tunnel as a Lease says: who holds it and where to reach them. */
export interface TunnelHolder {
  cluster: string;
  replica: string;
  address: string;
  durationSeconds: number;
  acquiredAt?: Date;
}

/**
 * The Lease name of `cluster`. A cluster name may be 253 characters, the prefix would push it past
 * the limit: long names are shortened with a hash (the cluster is in an annotation either way).
 */
export function leaseName(cluster: string): string {
  const name = `${leasePrefix}${cluster}`;
  if (name.length <= 253) return name;
  const hash = createHash('sha256').update(cluster).digest('hex').slice(0, 16);
  return `${name.slice(0, 253 - 17).replace(/[-.]+$/, '')}-${hash}`;
}

export function leasesPath(namespace: string): string {
  return `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`;
}

/** MicroTime: RFC 3339 with exactly six fractional digits, as the apiserver expects. */
export function microTime(at: Date): string {
  return at.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/**
 * The Lease `holder` writes, built on `current` (what is stored now, if anything). `acquiredRevision`:
 * the resourceVersion of this holder's write that took the Lease, recorded once known.
 */
export function tunnelLease(
  namespace: string,
  holder: TunnelHolder,
  now: Date,
  current?: Lease,
  acquiredRevision?: string,
): Lease {
  const taken = current?.spec?.holderIdentity !== holder.replica;
  const annotations: Record<string, string> = {
    ...current?.metadata?.annotations,
    [leaseClusterAnnotation]: holder.cluster,
    [leasePeerAddressAnnotation]: holder.address,
  };
  // Taken (or created): the revision this write gets is the new one, the old holder's is void.
  if (taken || !current) delete annotations[leaseAcquiredRevisionAnnotation];
  else if (acquiredRevision && !annotations[leaseAcquiredRevisionAnnotation]) {
    annotations[leaseAcquiredRevisionAnnotation] = acquiredRevision;
  }
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name: leaseName(holder.cluster),
      namespace,
      labels: { ...current?.metadata?.labels, [leaseLabel]: 'true' },
      annotations,
      ...(current?.metadata?.resourceVersion ? { resourceVersion: current.metadata.resourceVersion } : {}),
    },
    spec: {
      holderIdentity: holder.replica,
      leaseDurationSeconds: holder.durationSeconds,
      acquireTime:
        taken || !current?.spec?.acquireTime ? microTime(holder.acquiredAt ?? now) : current.spec.acquireTime,
      renewTime: microTime(now),
      leaseTransitions: (current?.spec?.leaseTransitions ?? 0) + (current && taken ? 1 : 0),
    },
  };
}

/** What a Lease says, or undefined for one that is not a usable tunnel Lease (released, malformed). */
export function readTunnelLease(lease: Lease): TunnelHolder | undefined {
  const cluster = lease.metadata?.annotations?.[leaseClusterAnnotation];
  const address = lease.metadata?.annotations?.[leasePeerAddressAnnotation];
  const replica = lease.spec?.holderIdentity;
  const duration = lease.spec?.leaseDurationSeconds;
  if (!cluster || !address || !replica || !duration || duration <= 0) return undefined;
  if (!isClusterName(cluster)) return undefined;
  // The name must be the cluster's: anyone able to write one Lease must not be able to redirect another cluster.
  if (lease.metadata?.name !== leaseName(cluster)) return undefined;
  const acquired = lease.spec?.acquireTime ? new Date(lease.spec.acquireTime) : undefined;
  return {
    cluster,
    replica,
    address,
    durationSeconds: duration,
    ...(acquired && !Number.isNaN(+acquired) ? { acquiredAt: acquired } : {}),
  };
}

/**
 * What a tunnel Lease shows on the ClusterGateway, identical on every replica: the cluster, who
 * holds it (undefined once released), and the version to show it at. undefined for a Lease that is
 * not a tunnel Lease of its cluster.
 */
export function tunnelLeaseRecord(
  lease: Lease,
): { cluster: string; holder?: { replica: string; since?: string }; version: number } | undefined {
  const cluster = lease.metadata?.annotations?.[leaseClusterAnnotation];
  if (!cluster || !isClusterName(cluster) || lease.metadata?.name !== leaseName(cluster)) return undefined;
  const version = revision(lease.metadata?.resourceVersion);
  const replica = lease.spec?.holderIdentity;
  if (!replica) return { cluster, version };
  const acquired = revision(lease.metadata?.annotations?.[leaseAcquiredRevisionAnnotation]);
  const since = lease.spec?.acquireTime ? new Date(lease.spec.acquireTime) : undefined;
  return {
    cluster,
    holder: {
      replica,
      ...(since && !Number.isNaN(+since) ? { since: isoSeconds(since) } : {}),
    },
    // The recorded revision, when it is one this Lease can have had: never above its own.
    version: acquired > 0 && acquired <= version ? acquired : version,
  };
}

function revision(value: string | undefined): number {
  return value && /^[0-9]{1,15}$/.test(value) ? Number(value) : 0;
}

function isoSeconds(at: Date): string {
  return new Date(Math.floor(at.getTime() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

export interface LeaseHolderOptions {
  client: Pick<KubeClient, 'request'>;
  namespace: string;
  replica: string;
  address: string;
  durationSeconds: number;
  onError?: (cluster: string, err: unknown) => void;
  /**
   * A renewal found another holder: this replica no longer holds `cluster`'s tunnel and stops serving it
   * (replica-setup.ts drains the local tunnel; the agent reconnects and its new connection takes the Lease).
   */
  onLost?: (cluster: string, holder: string) => void;
  now?: () => Date;
}

export class LeaseHolder {
  readonly #o: LeaseHolderOptions;
  /** The clusters held, with when their tunnel connected. */
  readonly #held = new Map<string, Date>();
  /** One write at a time per cluster, in order: a release never races the renewal before it. */
  readonly #queues = new Map<string, Promise<void>>();
  /** The Lease as this replica last stored it, per held cluster. */
  readonly #written = new Map<string, Lease>();
  /** The resourceVersion of the write that took each held Lease. */
  readonly #acquired = new Map<string, string>();
  #timer: NodeJS.Timeout | undefined;

  constructor(options: LeaseHolderOptions) {
    this.#o = options;
  }

  start(): void {
    this.#timer ??= setInterval(
      () => {
        for (const cluster of this.#held.keys()) this.#enqueue(cluster, () => this.#write(cluster, 'renew'));
      },
      Math.max(1000, (this.#o.durationSeconds * 1000) / 3),
    );
    this.#timer.unref();
  }

  hold(cluster: string, connectedAt: Date): void {
    this.#held.set(cluster, connectedAt);
    this.#enqueue(cluster, () => this.#write(cluster, 'take'));
  }

  release(cluster: string): void {
    if (!this.#held.delete(cluster)) return;
    this.#enqueue(cluster, () => this.#release(cluster));
  }

  get held(): string[] {
    return [...this.#held.keys()];
  }

  /** Stops renewing and releases every Lease; resolves when done or after `timeoutMs`. */
  async stop(timeoutMs = 3_000): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    for (const cluster of [...this.#held.keys()]) this.release(cluster);
    const all = Promise.all([...this.#queues.values()]);
    await Promise.race([all, new Promise((r) => setTimeout(r, timeoutMs).unref())]);
  }

  #enqueue(cluster: string, work: () => Promise<void>): void {
    const next = (this.#queues.get(cluster) ?? Promise.resolve())
      .then(work)
      .catch((err: unknown) => this.#o.onError?.(cluster, err));
    this.#queues.set(cluster, next);
    void next.then(() => {
      if (this.#queues.get(cluster) === next) this.#queues.delete(cluster);
    });
  }

  /**
   * `take`: a tunnel just connected here, the agent's newest connection, so the Lease is taken over
   * whoever holds it. `renew`: only while this replica still holds it; a renewal that finds another
   * holder gives up, since the agent has moved there and this replica's tunnel is a dead one not yet
   * noticed (taking the Lease back would route the other replicas into it).
   */
  async #write(cluster: string, intent: 'take' | 'renew'): Promise<void> {
    const connectedAt = this.#held.get(cluster);
    if (!connectedAt) return; // released meanwhile
    const path = `${leasesPath(this.#o.namespace)}/${leaseName(cluster)}`;
    // A renewal updates the Lease last written (one request); a conflict means another replica
    // wrote in between: read it and decide again.
    for (let attempt = 0; ; attempt++) {
      const current =
        attempt === 0 && this.#written.has(cluster) ? this.#written.get(cluster) : await this.#get(path);
      const holder = current?.spec?.holderIdentity;
      if (intent === 'renew' && holder && holder !== this.#o.replica) {
        // Lost: never keep believing it (the Lease would expire while the tunnel is served here) and never
        // take it back (the agent's newest connection is elsewhere, or the holder is forged): let go.
        this.#held.delete(cluster);
        this.#written.delete(cluster);
        this.#acquired.delete(cluster);
        this.#o.onLost?.(cluster, holder);
        return;
      }
      const lease = tunnelLease(
        this.#o.namespace,
        {
          cluster,
          replica: this.#o.replica,
          address: this.#o.address,
          durationSeconds: this.#o.durationSeconds,
          acquiredAt: connectedAt,
        },
        this.#o.now?.() ?? new Date(),
        current,
        this.#acquired.get(cluster),
      );
      const taking = !current || current.spec?.holderIdentity !== this.#o.replica;
      try {
        const stored = current
          ? await this.#o.client.request<Lease>('PUT', path, { body: lease })
          : await this.#o.client.request<Lease>('POST', leasesPath(this.#o.namespace), { body: lease });
        const storedVersion = stored?.metadata?.resourceVersion;
        if (storedVersion && this.#held.has(cluster)) {
          this.#written.set(cluster, stored);
          if (taking) this.#acquired.set(cluster, storedVersion);
        }
        return;
      } catch (err) {
        this.#written.delete(cluster);
        if (attempt < 2 && err instanceof StatusError && (err.code === 409 || err.code === 404)) continue;
        throw err;
      }
    }
  }

  /**
   * A release empties the holder (as client-go's leader election does) rather than deleting the
   * Lease: the gateway then needs no delete on Leases, and the next tunnel of the cluster reuses it.
   */
  async #release(cluster: string): Promise<void> {
    this.#written.delete(cluster);
    this.#acquired.delete(cluster);
    const path = `${leasesPath(this.#o.namespace)}/${leaseName(cluster)}`;
    const current = await this.#get(path);
    if (!current || current.spec?.holderIdentity !== this.#o.replica) return; // another replica holds it now
    const { holderIdentity: _, ...spec } = current.spec;
    try {
      // PUT with the version read: a replica that took it over in between keeps it (409).
      await this.#o.client.request('PUT', path, { body: { ...current, spec } });
    } catch (err) {
      if (err instanceof StatusError && (err.code === 409 || err.code === 404)) return;
      throw err;
    }
  }

  async #get(path: string): Promise<Lease | undefined> {
    try {
      return await this.#o.client.request<Lease>('GET', path);
    } catch (err) {
      if (err instanceof StatusError && err.code === 404) return undefined;
      throw err;
    }
  }
}

export interface LeaseReaderOptions {
  client: KubeClient;
  namespace: string;
  /** This replica: its own Leases are not reported (it knows its tunnels first hand). */
  replica: string;
  /** A cluster's holder changed: another replica's live tunnel, or undefined for none. */
  onChange: (cluster: string, holder: TunnelHolder | undefined) => void;
  /**
   * What every tunnel Lease (this replica's too) shows on its ClusterGateway: the holder, or
   * undefined once released, at `version` (tunnelLeaseRecord).
   */
  onRecord?: (
    cluster: string,
    holder: { replica: string; since?: string } | undefined,
    version: number,
  ) => void;
  /** The Lease informer applied everything up to `resourceVersion` (renewals and the heartbeat too). */
  onSync?: (resourceVersion: string) => void;
  /**
   * Whether another replica's Lease names a live gateway replica that proves it is its holder (PeerClient.verify).
   * A Lease whose holder cannot prove it is treated as released: no route, shown disconnected. Without it
   * every well-formed Lease is believed (single-process tests).
   */
  verifyHolder?: (holder: TunnelHolder) => Promise<boolean>;
  /** A holder's proof is asked again after this long (default 60 s); a failed one after 10 s. */
  verifiedForMs?: number;
  /**
   * How long `synced` waits, from the first list, for that list's Leases to be applied with their holders'
   * proofs (default 15 s): a proof that never settles must not keep the replica unready.
   */
  syncWithinMs?: number;
  /**
   * Clears the holder of a Lease whose holder stopped renewing (a conditional update, so one replica
   * wins and the rest get a 409). Without it, a dead holder's Lease keeps saying connected.
   */
  clearExpired?: (lease: Lease) => Promise<void>;
  informer?: Partial<InformerOptions>;
  now?: () => number;
  /** How often expiry is checked (default 1 s). */
  sweepMs?: number;
}

/** Live tunnel Leases of the other replicas, by cluster. */
export class LeaseReader {
  readonly #o: LeaseReaderOptions;
  readonly informer: Informer<Lease>;
  readonly #live = new Map<string, { holder: TunnelHolder; expiresAt: number; key: string; lease: Lease }>();
  /**
   * Lease events are applied one after the other, each after its holder's proof: a record never overtakes a
   * later one, and onSync (the registry's list version) never passes a record still being checked.
   */
  #queue: Promise<void> = Promise.resolve();
  /** How many queued steps are not done: zero means the next event applies at once. */
  #waiting = 0;
  /** Proofs by holder and address: the pending or settled answer and until when it stands. */
  readonly #proofs = new Map<string, { answer: Promise<boolean>; until: number; settled?: boolean }>();
  #timer: NodeJS.Timeout | undefined;
  /** When the end of the first list was received, and whether everything up to it has been applied. */
  #listedAt: number | undefined;
  #listApplied = false;

  constructor(options: LeaseReaderOptions) {
    this.#o = options;
    this.informer = new Informer<Lease>(options.client, {
      ...options.informer,
      path: leasesPath(options.namespace),
      // Any value: the tunnel Leases (true) and the replicas' heartbeat (health/prober-leader.ts),
      // whose renewals every two seconds keep each replica's applied revision moving.
      labelSelector: leaseLabel,
    });
    this.informer.on({
      onAdd: (lease) => this.receive({ type: 'seen', lease }),
      onUpdate: (_old, lease) => this.receive({ type: 'seen', lease }),
      onDelete: (lease) => this.receive({ type: 'deleted', lease }),
      onSync: (resourceVersion) => this.receive({ type: 'synced', resourceVersion }),
    });
  }

  /**
   * One informer event, applied after those before it (a proof may hold one back). The informer's handlers
   * call it; public for tests.
   */
  receive(
    event: { type: 'seen' | 'deleted'; lease: Lease } | { type: 'synced'; resourceVersion: string },
  ): void {
    if ('lease' in event) {
      const { lease } = event;
      this.#enqueue(() => (event.type === 'seen' ? this.observe(lease) : this.forget(lease)));
    } else {
      // The first one ends the first list: its Leases were received before it, so applied once it is.
      this.#listedAt ??= this.#now();
      this.#enqueue(() => {
        this.#listApplied = true;
        this.#o.onSync?.(event.resourceVersion);
      });
    }
  }

  /**
   * Whether this replica routes every tunnel the other replicas held when it started, as far as it can know:
   * the first list of Leases applied, each after its holder's proof; or `syncWithinMs` passed since that list
   * arrived (a holder that never answers its proof must not keep the replica unready forever). Readiness
   * waits for it: a replica the aggregator sends requests to must not answer 503 for a tunnel held elsewhere.
   */
  get synced(): boolean {
    if (this.#listApplied) return true;
    return this.#listedAt !== undefined && this.#now() - this.#listedAt >= (this.#o.syncWithinMs ?? 15_000);
  }

  start(): void {
    void this.informer.start();
    this.#timer ??= setInterval(() => this.sweep(), this.#o.sweepMs ?? 1000);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.informer.stop();
  }

  get(cluster: string): TunnelHolder | undefined {
    const entry = this.#live.get(cluster);
    return entry && entry.expiresAt > this.#now() ? entry.holder : undefined;
  }

  /** Resolves once every Lease event seen so far has been applied. Public for tests. */
  settled(): Promise<void> {
    return this.#queue;
  }

  /** Runs `work` now when nothing is waiting for a proof, else after what waits (in order). */
  #enqueue(work: () => void | Promise<void>): void {
    if (this.#waiting === 0) {
      const result = work();
      if (!result) return;
      this.#wait(result);
      return;
    }
    this.#wait(this.#queue.then(work));
  }

  #wait(work: Promise<void>): void {
    this.#waiting++;
    const done = work.catch(() => {}).finally(() => this.#waiting--);
    this.#queue = done;
  }

  /**
   * A Lease seen (added or changed): live for its duration from now. Synchronous unless the holder's proof
   * is still to be asked. Public for tests.
   */
  observe(lease: Lease): void | Promise<void> {
    const holder = readTunnelLease(lease);
    // Another replica's claim counts once that replica proved it holds it: a Lease alone is not believed.
    if (!holder || holder.replica === this.#o.replica) return this.#apply(lease, holder);
    const proof = this.#proven(holder);
    if (typeof proof === 'boolean') return this.#apply(lease, proof ? holder : undefined);
    return proof.then((ok) => this.#apply(lease, ok ? holder : undefined));
  }

  /** Applies `lease` with `holder`, its proven holder (undefined: released, malformed or unproven). */
  #apply(lease: Lease, holder: TunnelHolder | undefined): void {
    const key = lease.metadata?.name ?? '';
    let record = tunnelLeaseRecord(lease);
    if (record?.holder && record.holder.replica !== this.#o.replica && !holder) {
      record = { cluster: record.cluster, version: record.version };
    }
    if (record) this.#o.onRecord?.(record.cluster, record.holder, record.version);
    const previous = [...this.#live.entries()].find(([, e]) => e.key === key);
    if (!holder || holder.replica === this.#o.replica) {
      if (previous) this.#drop(previous[0]);
      return;
    }
    const before = this.#live.get(holder.cluster)?.holder;
    this.#live.set(holder.cluster, {
      holder,
      expiresAt: this.#now() + holder.durationSeconds * 1000,
      key,
      lease,
    });
    if (!before || before.replica !== holder.replica || before.address !== holder.address) {
      this.#o.onChange(holder.cluster, holder);
    }
  }

  forget(lease: Lease): void {
    const key = lease.metadata?.name ?? '';
    const record = tunnelLeaseRecord(lease);
    if (record) this.#o.onRecord?.(record.cluster, undefined, revision(this.informer.resourceVersion));
    for (const [cluster, entry] of this.#live) if (entry.key === key) this.#drop(cluster);
  }

  /** Drops the Leases not renewed within their duration (a replica that died). Public for tests. */
  sweep(): void {
    const now = this.#now();
    for (const [cluster, entry] of this.#live) {
      if (entry.expiresAt > now) continue;
      this.#drop(cluster);
      // The next event on this Lease (the cleared holder, or the agent's new holder) says the rest.
      void this.#o.clearExpired?.(entry.lease).catch(() => {});
    }
  }

  /**
   * Whether `holder` proved it is the replica its Lease names (the answer itself once known), asked at most
   * once per period.
   */
  #proven(holder: TunnelHolder): boolean | Promise<boolean> {
    const verify = this.#o.verifyHolder;
    if (!verify) return true;
    const key = `${holder.replica}\n${holder.address}`;
    const now = this.#now();
    const known = this.#proofs.get(key);
    if (known && known.until > now) return known.settled ?? known.answer;
    const answer = verify(holder).catch(() => false);
    const entry: { answer: Promise<boolean>; until: number; settled?: boolean } = {
      answer,
      until: Number.POSITIVE_INFINITY,
    };
    this.#proofs.set(key, entry);
    void answer.then((ok) => {
      entry.settled = ok;
      entry.until = this.#now() + (ok ? (this.#o.verifiedForMs ?? 60_000) : 10_000);
    });
    // Bounded: proofs of replicas long gone are not kept.
    if (this.#proofs.size > 1000) {
      for (const [k, e] of this.#proofs) if (e.until <= now) this.#proofs.delete(k);
    }
    return answer;
  }

  #drop(cluster: string): void {
    this.#live.delete(cluster);
    this.#o.onChange(cluster, undefined);
  }

  #now(): number {
    return this.#o.now?.() ?? Date.now();
  }
}
