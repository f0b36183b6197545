/**
 * ClusterRegistry: the in-memory ClusterDirectory the API handlers and the
 * proxy read from. Sources push what they know (Secrets, ManagedClusters,
 * agent tunnels, prober health) and the registry merges it per cluster
 * (merge.ts), so a request never costs a hub API call.
 *
 * resourceVersions are the hub's own: every replica gives the same
 * ClusterGateway the same version, so a client may read from one replica
 * and write, or watch, through another (the aggregator picks any).
 * - An object's version is the largest resourceVersion among the hub
 *   objects it is built from: its credential Secret, its ManagedCluster,
 *   and its tunnel Lease's acquisition (tunnel/leases.ts records that
 *   revision on the Lease, so renewals do not count). The hub's objects
 *   share one etcd revision counter, so this is a pure function of the
 *   hub's state. The prober's verdict is an annotation on the Secret (or
 *   the ManagedCluster): it moves the version like any other change.
 * - A source removed while the cluster stays (a ManagedCluster deleted, a
 *   Secret left) counts with the revision that removed it, so versions
 *   never go back. (A replica started after such a removal does not know
 *   it, and gives a lower version until the cluster next changes.)
 * - The list version is the newest revision this replica has applied from
 *   any source (the "watermark", as a list from the apiserver carries the
 *   current revision): bookmarks and the replicas' heartbeat Lease
 *   (tunnel/leases.ts) keep it moving while nothing changes.
 * - The event history starts at the watermark of the first complete sync;
 *   a watch from an older version gets 410 Gone and relists, one from a
 *   version this replica has not reached yet waits for it (api/watch.ts).
 * - Changes only this replica sees (an exec plugin's fresh token, the route
 *   to a tunnel) update the object without a new version and reach the
 *   API's watchers not at all: `internal` events are for the proxy and the
 *   prober. Without --tunnel-peer-port the registry is the only writer of
 *   its tunnels and probe results and numbers those changes itself, above
 *   every revision it has seen.
 */
import { createHash } from 'node:crypto';
import type {
  ClusterEvent,
  ClusterHealth,
  ClusterTarget,
  HistoryAnswer,
  TunnelEndpoint,
  VersionedDirectory,
} from './cluster.ts';
import type { ManagedClusterInfo, ManagedClusterSink } from './managedcluster-source.ts';
import {
  type ClusterInputs,
  type MergedCluster,
  type MergePolicy,
  mergeCluster,
  type TunnelInput,
} from './merge.ts';
import type { SecretClusterInfo, SecretSink } from './secret-source.ts';

export interface RegistryOptions {
  /** How many recent events a watch can resume from. */
  historyLimit?: number;
  now?: () => number;
  /** A listener threw; the registry carries on. */
  onListenerError?: (err: unknown) => void;
  /** Gateway-wide merge settings (flags). */
  policy?: MergePolicy;
}

/** Anything with an initial sync, e.g. SecretSource or ManagedClusterSource. */
export interface SyncedSource {
  readonly hasSynced: boolean;
}

/** A cluster's tunnel as its Lease on the hub says (tunnel/leases.ts), the same on every replica. */
export interface TunnelRecord {
  /** The gateway replica holding it. */
  replica: string;
  /** RFC 3339, second precision. */
  since?: string;
}

interface Current {
  target: ClusterTarget;
  /** What the API shows (metadata, spec, status), without resourceVersion. */
  visible: string;
  /** What the proxy connects with: endpoint and credential. */
  connection: string;
}

interface Entry {
  inputs: ClusterInputs;
  /** The revision that removed a source while the cluster stayed. */
  removedAt: number;
  /** Versions the registry numbered itself (a local tunnel, an in-memory probe). */
  localAt: number;
  /** From the tunnel Lease (replica sharing): who holds the tunnel, and the revision it was taken at. */
  record?: { record: TunnelRecord; version: number };
  /** This replica's way to the tunnel: its own, or forwarding through the holder. */
  route?: { endpoint: TunnelEndpoint; generation: number };
}

export class ClusterRegistry implements VersionedDirectory, SecretSink, ManagedClusterSink {
  readonly #entries = new Map<string, Entry>();
  readonly #current = new Map<string, Current>();
  readonly #listeners = new Set<(event: ClusterEvent) => void>();
  readonly #sources: SyncedSource[] = [];
  readonly #history: ClusterEvent[] = [];
  readonly #historyLimit: number;
  readonly #now: () => number;
  readonly #onListenerError: (err: unknown) => void;
  readonly #policy: MergePolicy;
  readonly #waiters = new Set<{ version: number; resolve: (reached: boolean) => void }>();
  #generations = 0;
  /** The newest revision applied from any source. */
  #watermark = 0;
  /** The last version this registry numbered itself. */
  #local = 0;
  /** Set at the first complete sync: a watch from an older version cannot be served (410). */
  #floor: number | undefined;
  /** Tunnel state from Leases (setTunnelRecord) rather than from this replica's own tunnels. */
  #recordsFromLeases = false;

  constructor(options: RegistryOptions = {}) {
    this.#historyLimit = options.historyLimit ?? 1000;
    this.#now = options.now ?? Date.now;
    this.#onListenerError = options.onListenerError ?? (() => {});
    this.#policy = options.policy ?? {};
  }

  /** The list resourceVersion: the newest revision applied. */
  get version(): string {
    return String(Math.max(this.#watermark, this.#local));
  }

  get synced(): boolean {
    return this.#sources.every((source) => source.hasSynced);
  }

  /** Registers a source whose initial sync `synced` waits for. */
  addSource(source: SyncedSource): void {
    this.#sources.push(source);
  }

  get(name: string): ClusterTarget | undefined {
    return this.#current.get(name)?.target;
  }

  list(): ClusterTarget[] {
    return [...this.#current.values()].map((c) => c.target).sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  subscribe(listener: (event: ClusterEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** A source applied everything up to `resourceVersion` (a list, an event, a bookmark, a heartbeat). */
  advance(resourceVersion: string | number): void {
    const version = Number(resourceVersion);
    if (!Number.isSafeInteger(version) || version <= this.#watermark) {
      this.#noteSynced();
      return;
    }
    this.#watermark = version;
    this.#noteSynced();
    for (const waiter of this.#waiters) {
      if (waiter.version <= this.#watermark) {
        this.#waiters.delete(waiter);
        waiter.resolve(true);
      }
    }
  }

  /** Resolves true once the watermark reaches `version`, false after `timeoutMs`. */
  waitForVersion(version: number, timeoutMs: number): Promise<boolean> {
    if (version <= Number(this.version)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const waiter = {
        version,
        resolve: (reached: boolean) => {
          clearTimeout(timer);
          resolve(reached);
        },
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(waiter);
        resolve(false);
      }, timeoutMs);
      timer.unref();
      this.#waiters.add(waiter);
    });
  }

  setSecret(name: string, info: SecretClusterInfo | undefined, version = 0): void {
    this.#update(name, version, (entry) => {
      if (info) entry.inputs.secret = info;
      else if (entry.inputs.secret) {
        delete entry.inputs.secret;
        entry.removedAt = Math.max(entry.removedAt, version);
      }
    });
  }

  setManagedCluster(name: string, info: ManagedClusterInfo | undefined, version = 0): void {
    this.#update(name, version, (entry) => {
      if (info) entry.inputs.managed = info;
      else if (entry.inputs.managed) {
        delete entry.inputs.managed;
        entry.removedAt = Math.max(entry.removedAt, version);
      }
    });
  }

  /**
   * Without replica sharing: this replica's agent tunnel of `name` connected (endpoint) or went
   * away (undefined). It is the cluster's endpoint and its visible tunnel state at once, numbered by
   * the registry. `info` says since when and through which replica (`kubectl get -o wide`).
   */
  setTunnel(
    name: string,
    endpoint: TunnelEndpoint | undefined,
    info: { connectedAt?: Date; replica?: string } = {},
  ): void {
    if (this.#recordsFromLeases) {
      this.setTunnelRoute(name, endpoint);
      return;
    }
    const entry = this.#entries.get(name);
    if (!endpoint && !entry?.record) return;
    if (endpoint && entry?.route?.endpoint === endpoint) return;
    const version = this.#nextLocal();
    this.#update(name, 0, (e) => {
      e.localAt = version;
      if (!endpoint) {
        delete e.record;
        delete e.route;
        return;
      }
      e.route = { endpoint, generation: ++this.#generations };
      e.record = {
        record: {
          since: isoSeconds(info.connectedAt?.getTime() ?? this.#now()),
          ...(info.replica ? { replica: info.replica } : { replica: '' }),
        },
        version,
      };
    });
  }

  /**
   * With replica sharing: how this replica reaches the tunnel of `name` (its own tunnel, or the
   * holder through the peer port), or undefined. Routing only: what clients see comes from the
   * tunnel's Lease (setTunnelRecord), which every replica reads the same.
   */
  setTunnelRoute(name: string, endpoint: TunnelEndpoint | undefined): void {
    this.#recordsFromLeases = true;
    const entry = this.#entries.get(name);
    if (entry?.route?.endpoint === endpoint) return;
    if (!endpoint && !entry?.route) return;
    this.#update(name, 0, (e) => {
      if (endpoint) e.route = { endpoint, generation: ++this.#generations };
      else delete e.route;
    });
  }

  /** With replica sharing: the tunnel Lease of `name` says who holds it (record) or that nobody does. */
  setTunnelRecord(name: string, record: TunnelRecord | undefined, version: number): void {
    this.#recordsFromLeases = true;
    this.#update(name, version, (entry) => {
      if (record) entry.record = { record, version };
      else if (entry.record) {
        delete entry.record;
        entry.removedAt = Math.max(entry.removedAt, version);
      }
    });
  }

  /**
   * Health from a prober that has no hub object to record it on (a cluster known only by its
   * tunnel): this replica's own view, numbered by the registry. undefined clears it. Overrides a
   * healthy mark and ManagedCluster conditions, but not an operator's unhealthy mark
   * (clusters/health-precedence.ts).
   */
  setHealth(name: string, health: ClusterHealth | undefined): void {
    // A probe that ends after its cluster was deleted must not bring back an entry for it.
    if (!this.#entries.has(name)) return;
    const previous = this.#entries.get(name)?.inputs.health;
    if (sameHealth(previous, health)) return;
    const version = this.#nextLocal();
    this.#update(name, 0, (entry) => {
      entry.localAt = version;
      if (health) entry.inputs.health = { ...health };
      else delete entry.inputs.health;
    });
  }

  /**
   * Events after `resourceVersion`, for a watch that resumes from a list or an earlier watch:
   * 'expired' when older than the history (410: relist), 'ahead' when not applied yet.
   */
  eventsSince(resourceVersion: string): HistoryAnswer {
    // Synced without a version to note it at (every list empty or absent): the history starts now.
    this.#noteSynced();
    if (!/^\d{1,15}$/.test(resourceVersion)) return { kind: 'expired' };
    const since = Number(resourceVersion);
    if (since > Number(this.version)) return { kind: 'ahead' };
    if (this.#floor === undefined || since < this.#floor) return { kind: 'expired' };
    return {
      kind: 'events',
      events: this.#history.filter((event) => Number(event.cluster.resourceVersion) > since),
    };
  }

  #nextLocal(): number {
    this.#local = Math.max(this.#local, this.#watermark) + 1;
    return this.#local;
  }

  #noteSynced(): void {
    if (this.#floor === undefined && this.synced) this.#floor = Number(this.version);
  }

  #update(name: string, version: number, change: (entry: Entry) => void): void {
    if (!name) return;
    const entry = this.#entries.get(name) ?? { inputs: { name }, removedAt: 0, localAt: 0 };
    change(entry);
    // Probe health alone keeps nothing: a deleted cluster's last probe must not outlive it.
    const empty = !entry.inputs.secret && !entry.inputs.managed && !entry.record && !entry.route;
    if (empty) this.#entries.delete(name);
    else this.#entries.set(name, entry);
    this.#recompute(name, entry, version);
    this.advance(version);
  }

  #recompute(name: string, entry: Entry, eventVersion: number): void {
    const inputs: ClusterInputs = { ...entry.inputs };
    const tunnel = tunnelInput(name, entry);
    if (tunnel) inputs.tunnel = tunnel;
    else delete inputs.tunnel;
    const merged = mergeCluster(inputs, this.#policy);
    const previous = this.#current.get(name);
    if (!merged) {
      if (!previous) return;
      this.#current.delete(name);
      const version = Math.max(
        eventVersion,
        entry.removedAt,
        entry.localAt,
        Number(previous.target.resourceVersion),
      );
      entry.removedAt = 0;
      this.#emit({ type: 'DELETED', cluster: { ...previous.target, resourceVersion: String(version) } });
      return;
    }
    const visible = visibleFingerprint(merged);
    const connection = merged.connectionKey;
    const version = Math.max(
      entry.inputs.secret?.resourceVersion ?? 0,
      entry.inputs.managed?.resourceVersion ?? 0,
      entry.record?.version ?? 0,
      entry.removedAt,
      entry.localAt,
      previous ? Number(previous.target.resourceVersion) : 0,
    );
    const target: ClusterTarget = { ...merged, resourceVersion: String(version) };
    if (
      previous &&
      previous.visible === visible &&
      previous.target.resourceVersion === target.resourceVersion
    ) {
      if (previous.connection === connection) return;
      this.#current.set(name, { target, visible, connection });
      this.#emit({ type: 'MODIFIED', cluster: target, internal: true });
      return;
    }
    this.#current.set(name, { target, visible, connection });
    this.#emit({ type: previous ? 'MODIFIED' : 'ADDED', cluster: target });
  }

  #emit(event: ClusterEvent): void {
    if (!event.internal && this.#floor !== undefined) {
      this.#history.push(event);
      while (this.#history.length > this.#historyLimit) {
        const dropped = this.#history.shift();
        if (dropped) this.#floor = Math.max(this.#floor, Number(dropped.cluster.resourceVersion));
      }
    }
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch (err) {
        this.#onListenerError(err);
      }
    }
  }
}

/**
 * The tunnel as merge.ts takes it: present while the visible record says a replica holds it. The
 * endpoint is this replica's route; without one (the holder's Lease is no longer renewed, or the
 * route is not set up yet) requests fail at once, saying why.
 */
function tunnelInput(name: string, entry: Entry): TunnelInput | undefined {
  const record = entry.record?.record;
  if (!record) return undefined;
  return {
    endpoint: entry.route?.endpoint ?? unreachableTunnel(name, record.replica),
    generation: entry.route?.generation ?? 0,
    connectedAt: record.since ?? '',
    ...(record.replica ? { replica: record.replica } : {}),
  };
}

function unreachableTunnel(cluster: string, replica: string): TunnelEndpoint {
  return {
    type: 'ClusterProxy',
    serverName: 'kubernetes.default.svc',
    insecure: false,
    dial: () =>
      Promise.reject(
        new Error(
          `the agent tunnel of ${cluster} is held by gateway replica ${replica || '(unknown)'}, which this replica cannot reach (its Lease is not renewed); the agent reconnects to a live replica`,
        ),
      ),
  };
}

function sameHealth(a: ClusterHealth | undefined, b: ClusterHealth | undefined): boolean {
  return a?.healthy === b?.healthy && a?.reason === b?.reason && a?.unknown === b?.unknown;
}

/**
 * Digest of everything the API shows about a cluster (api/clustergateway.ts renders from the same
 * fields). Credentials enter only through connectionKey, which is not part of it: a rotated
 * token changes the Secret's version anyway, and an exec plugin's new token is this replica's own.
 */
export function visibleFingerprint(cluster: MergedCluster): string {
  const endpoint = cluster.endpoint;
  const visible = {
    labels: sorted(cluster.labels),
    annotations: sorted(cluster.annotations),
    creationTimestamp: cluster.creationTimestamp,
    endpoint:
      endpoint?.type === 'Const'
        ? [
            endpoint.type,
            endpoint.address,
            endpoint.caBundle ?? '',
            endpoint.insecure,
            endpoint.proxyUrl ?? '',
          ]
        : endpoint
          ? [
              endpoint.type,
              endpoint.serverName,
              endpoint.caBundle ?? '',
              endpoint.insecure,
              endpoint.trustModel,
            ]
          : null,
    tunnel: cluster.tunnel ?? null,
    credentialType: cluster.credential?.type ?? null,
    problem: cluster.problem ?? null,
    health: [cluster.health.healthy, cluster.health.reason ?? ''],
  };
  return createHash('sha256').update(JSON.stringify(visible)).digest('hex');
}

function sorted(record: Record<string, string>): [string, string][] {
  return Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Kubernetes timestamps have second precision (RFC 3339, no fraction). */
function isoSeconds(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}
