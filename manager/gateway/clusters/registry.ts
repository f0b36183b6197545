/**
 * ClusterRegistry: the in-memory ClusterDirectory the API handlers and the
 * proxy read from. Sources push what they know (Secrets, ManagedClusters,
 * agent tunnels, prober health) and the registry merges it per cluster
 * (merge.ts), so a request never costs a hub API call.
 *
 * resourceVersions: every change to what a cluster looks like gets the next
 * value of one counter, seeded from the wall clock in microseconds. So a
 * restarted replica (or another replica) hands out larger versions than
 * before, a watch from an older one gets 410 Gone and relists, and changes
 * with no visible effect (a ManagedCluster status heartbeat, a re-sent
 * Secret) produce no event at all. A short event history lets a watch
 * resume from a list's resourceVersion without missing deletions.
 */
import { createHash } from 'node:crypto';
import type {
  ClusterDirectory,
  ClusterEvent,
  ClusterHealth,
  ClusterTarget,
  TunnelEndpoint,
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

interface Current {
  target: ClusterTarget;
  fingerprint: string;
}

export class ClusterRegistry implements ClusterDirectory, SecretSink, ManagedClusterSink {
  readonly #inputs = new Map<string, ClusterInputs>();
  readonly #current = new Map<string, Current>();
  readonly #listeners = new Set<(event: ClusterEvent) => void>();
  readonly #sources: SyncedSource[] = [];
  readonly #tunnelGenerations = new Map<string, number>();
  readonly #history: ClusterEvent[] = [];
  readonly #historyLimit: number;
  readonly #now: () => number;
  readonly #onListenerError: (err: unknown) => void;
  readonly #policy: MergePolicy;
  #counter: number;
  /** Versions at or below this are older than the history: a watch from them must relist. */
  #floor: number;

  constructor(options: RegistryOptions = {}) {
    this.#historyLimit = options.historyLimit ?? 1000;
    this.#now = options.now ?? Date.now;
    this.#onListenerError = options.onListenerError ?? (() => {});
    this.#policy = options.policy ?? {};
    this.#counter = this.#now() * 1000;
    this.#floor = this.#counter;
  }

  get version(): string {
    return String(this.#counter);
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

  setSecret(name: string, info: SecretClusterInfo | undefined): void {
    this.#update(name, (inputs) => {
      if (info) inputs.secret = info;
      else delete inputs.secret;
    });
  }

  setManagedCluster(name: string, info: ManagedClusterInfo | undefined): void {
    this.#update(name, (inputs) => {
      if (info) inputs.managed = info;
      else delete inputs.managed;
    });
  }

  /**
   * An agent tunnel connected (endpoint) or went away (undefined); it overrides any other endpoint.
   * `info` says since when and through which gateway replica (shown by `kubectl get -o wide`).
   */
  setTunnel(
    name: string,
    endpoint: TunnelEndpoint | undefined,
    info: { connectedAt?: Date; replica?: string } = {},
  ): void {
    this.#update(name, (inputs) => {
      if (!endpoint) {
        delete inputs.tunnel;
        return;
      }
      if (inputs.tunnel?.endpoint === endpoint) return;
      const generation = (this.#tunnelGenerations.get(name) ?? 0) + 1;
      this.#tunnelGenerations.set(name, generation);
      const tunnel: TunnelInput = {
        endpoint,
        generation,
        connectedAt: isoSeconds(info.connectedAt?.getTime() ?? this.#now()),
        ...(info.replica ? { replica: info.replica } : {}),
      };
      inputs.tunnel = tunnel;
    });
  }

  /**
   * Health from a prober; overrides a healthy mark and ManagedCluster conditions, but not an
   * operator's unhealthy mark (clusters/health-precedence.ts). undefined clears it.
   */
  setHealth(name: string, health: ClusterHealth | undefined): void {
    // A probe that ends after its cluster was deleted must not bring back an entry for it.
    if (!this.#inputs.has(name)) return;
    this.#update(name, (inputs) => {
      if (health) inputs.health = { ...health };
      else delete inputs.health;
    });
  }

  /**
   * Events after `resourceVersion`, for a watch that resumes from a list.
   * [] when it is current (or newer: another replica's), undefined when it
   * is older than the retained history (the client must relist: 410).
   */
  eventsSince(resourceVersion: string): ClusterEvent[] | undefined {
    if (!/^\d+$/.test(resourceVersion)) return undefined;
    const since = Number(resourceVersion);
    if (since >= this.#counter) return [];
    if (since < this.#floor) return undefined;
    return this.#history.filter((event) => Number(event.cluster.resourceVersion) > since);
  }

  #update(name: string, change: (inputs: ClusterInputs) => void): void {
    if (!name) return;
    const inputs = this.#inputs.get(name) ?? { name };
    change(inputs);
    // Probe health alone keeps nothing: a deleted cluster's last probe must not outlive it.
    const empty = !inputs.secret && !inputs.managed && !inputs.tunnel;
    if (empty) this.#inputs.delete(name);
    else this.#inputs.set(name, inputs);
    this.#recompute(name, inputs);
  }

  #recompute(name: string, inputs: ClusterInputs): void {
    const merged = mergeCluster(inputs, this.#policy);
    const previous = this.#current.get(name);
    if (!merged) {
      if (!previous) return;
      this.#current.delete(name);
      this.#emit({ type: 'DELETED', cluster: { ...previous.target, resourceVersion: this.#nextVersion() } });
      return;
    }
    const fingerprint = fingerprintOf(merged);
    if (previous?.fingerprint === fingerprint) return;
    const target: ClusterTarget = { ...merged, resourceVersion: this.#nextVersion() };
    this.#current.set(name, { target, fingerprint });
    this.#emit({ type: previous ? 'MODIFIED' : 'ADDED', cluster: target });
  }

  #nextVersion(): string {
    this.#counter = Math.max(this.#counter + 1, this.#now() * 1000);
    return String(this.#counter);
  }

  #emit(event: ClusterEvent): void {
    this.#history.push(event);
    while (this.#history.length > this.#historyLimit) {
      const dropped = this.#history.shift();
      if (dropped) this.#floor = Number(dropped.cluster.resourceVersion);
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
 * Digest of everything observable about a cluster. Secret material enters
 * only through connectionKey (itself a digest), so rotating a token bumps
 * the resourceVersion (the proxy must notice) without exposing anything.
 */
export function fingerprintOf(cluster: MergedCluster): string {
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
    connectionKey: cluster.connectionKey,
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
