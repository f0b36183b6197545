/**
 * The live agent tunnels of this gateway replica, one per cluster. A new connection from a
 * cluster's agent replaces the previous one (the agent reconnects make-before-break when its
 * credential rotates, and a half-dead old connection must not keep the cluster); the replaced one
 * drains: no new streams, open watches and exec sessions finish or are cut after a grace period.
 *
 * Every change is pushed to the cluster registry as the cluster's tunnel endpoint (setTunnel), so
 * the proxy routes by it from memory and a cluster whose tunnel went away fails at once with 503.
 */
import type { TunnelEndpoint } from '../clusters/cluster.ts';
import type { CloseReason, TunnelSession } from './session.ts';

/** The TLS server name used inside the tunnel: every kube-apiserver certificate carries it. */
export const tunnelServerName = 'kubernetes.default.svc';

export interface TunnelSink {
  setTunnel(
    cluster: string,
    endpoint: TunnelEndpoint | undefined,
    info?: { connectedAt?: Date; replica?: string },
  ): void;
}

export interface TunnelRegistryOptions {
  sink: TunnelSink;
  /** This gateway replica's name (its pod name), shown as the holder of its tunnels. */
  replica?: string;
  /** How long a replaced or shut-down tunnel may keep its open streams. */
  drainGraceMs?: number;
  onConnected?: (session: TunnelSession) => void;
  onDisconnected?: (session: TunnelSession, reason: CloseReason) => void;
}

export interface TunnelInfo {
  cluster: string;
  agent: string;
  connectedAt: Date;
  openStreams: number;
  lastRoundTripMs?: number;
}

export class TunnelRegistry {
  readonly #sessions = new Map<string, TunnelSession>();
  readonly #draining = new Set<TunnelSession>();
  readonly #options: TunnelRegistryOptions;
  readonly #drainGraceMs: number;

  constructor(options: TunnelRegistryOptions) {
    this.#options = options;
    this.#drainGraceMs = options.drainGraceMs ?? 60_000;
  }

  add(session: TunnelSession): void {
    const { cluster } = session;
    const previous = this.#sessions.get(cluster);
    this.#sessions.set(cluster, session);
    this.#options.sink.setTunnel(
      cluster,
      {
        type: 'ClusterProxy',
        serverName: tunnelServerName,
        insecure: false,
        dial: (kind) => session.dial(kind),
      },
      {
        connectedAt: session.connectedAt,
        ...(this.#options.replica ? { replica: this.#options.replica } : {}),
      },
    );
    this.#options.onConnected?.(session);
    if (previous) {
      this.#draining.add(previous);
      previous.drain('replaced', this.#drainGraceMs);
    }
    void session.ended.then((reason) => {
      if (this.#sessions.get(cluster) === session) {
        this.#sessions.delete(cluster);
        this.#options.sink.setTunnel(cluster, undefined);
      }
      this.#options.onDisconnected?.(session, reason);
    });
    void session.closed.then(() => this.#draining.delete(session));
  }

  get(cluster: string): TunnelSession | undefined {
    return this.#sessions.get(cluster);
  }

  list(): TunnelInfo[] {
    return [...this.#sessions.values()].map((s) => ({
      cluster: s.cluster,
      agent: s.agent,
      connectedAt: s.connectedAt,
      openStreams: s.openStreams,
      ...(s.lastRoundTripMs !== undefined ? { lastRoundTripMs: s.lastRoundTripMs } : {}),
    }));
  }

  /** Every session, the draining ones included (metrics). */
  all(): TunnelSession[] {
    return [...this.#sessions.values(), ...this.#draining];
  }

  /**
   * Shutdown: GOAWAY to every agent (they reconnect, to another replica when there is one) and
   * give open streams `graceMs` to finish. Resolves when all are closed.
   */
  async drainAll(graceMs: number): Promise<void> {
    const sessions = this.all();
    for (const session of sessions) session.drain('shutdown', graceMs);
    await Promise.all(sessions.map((s) => s.closed));
  }
}
