/**
 * One keep-alive connection pool (an http(s).Agent, and HTTP/2 sessions) per upstream.
 *
 * A pool is keyed by `TransportTarget.key`, a digest of endpoint and credential: when a token or
 * certificate rotates, the next request gets a new pool, and the old one is retired — its idle
 * sockets closed at once, its busy ones (a long watch, say) allowed to finish and then closed.
 *
 * Each kind of endpoint has its connector, which builds the pool once (connect-direct.ts,
 * connect-egress.ts, connect-tunnel.ts); this file keeps the pools' bookkeeping.
 */
import { connectDirect } from './connect-direct.ts';
import { connectEgress } from './connect-egress.ts';
import { connectOnce } from './connect-once.ts';
import { connectTunnel } from './connect-tunnel.ts';
import type { TransportTarget } from './target.ts';
import type { ConnectedUpstream, PoolOptions, PoolSettings, Upstream } from './upstream.ts';

export type { PoolOptions, Upstream } from './upstream.ts';

export interface PoolStats {
  /** Current pools, one per cluster that has been proxied to. */
  pools: number;
  /** Replaced pools that still carry in-flight requests. */
  retired: number;
  /** Sockets serving a request right now. */
  activeSockets: number;
  /** Idle keep-alive sockets. */
  idleSockets: number;
  /** Requests waiting for a socket. */
  queuedRequests: number;
  /** Open HTTP/2 sessions (each one connection) and the streams they carry. */
  http2Sessions: number;
  http2Streams: number;
  /** Open connections (HTTP/1.1 sockets, active and idle, and HTTP/2 sessions) of each cluster's current pool. */
  perCluster: [cluster: string, sockets: number][];
}

export interface ConnectionPools {
  /** The pool for a target, or a problem string when its endpoint cannot be used. */
  get(target: TransportTarget): Upstream | string;
  /** Retires a target's pool (cluster deleted). */
  forget(name: string): void;
  stats(): PoolStats;
  /** Destroys every socket of every pool. */
  close(): void;
}

interface Entry extends ConnectedUpstream {
  upstream: Upstream;
  /** Connections open through connectOnce(), for stats(). */
  oneShot: { open: number };
}

export function createConnectionPools(options: PoolOptions = {}): ConnectionPools {
  const settings: PoolSettings = {
    connectTimeoutMs: options.connectTimeoutMs ?? 30_000,
    idleTimeoutMs: options.idleTimeoutMs ?? 30_000,
    http2: options.http2 !== false,
    passThrough: options.passThrough === true,
  };
  const entries = new Map<string, Entry>();
  const retired = new Set<Upstream>();

  /** One connector per kind of endpoint. */
  function create(target: TransportTarget): ConnectedUpstream | string {
    const { endpoint } = target;
    switch (endpoint.kind) {
      case 'direct':
        return connectDirect(target, endpoint, settings);
      case 'egress':
        return connectEgress(target, endpoint, settings);
      case 'tunnel':
        return connectTunnel(target, endpoint, settings);
    }
  }

  /** Destroys retired agents whose last request has finished. */
  function sweep(): void {
    for (const upstream of retired) {
      const { agent } = upstream;
      if (countSockets(agent.sockets) === 0 && countSockets(agent.requests) === 0) {
        agent.destroy();
        if ((upstream.http2?.drained ?? true) && (upstream.http1?.drained ?? true)) retired.delete(upstream);
      }
    }
  }

  function retire(upstream: Upstream): void {
    sweep(); // rotations are rare: a good moment to drop the ones that are done
    const { agent } = upstream;
    // Sockets freed from now on are destroyed instead of pooled (Node's
    // Agent checks freeSockets.length >= maxFreeSockets on 'free').
    agent.maxFreeSockets = 0;
    for (const list of Object.values(agent.freeSockets)) for (const socket of list ?? []) socket.destroy();
    // Each session closes (GOAWAY) once its last stream is done.
    upstream.http2?.retire();
    upstream.http1?.retire();
    if (
      countSockets(agent.sockets) > 0 ||
      !(upstream.http2?.drained ?? true) ||
      !(upstream.http1?.drained ?? true)
    ) {
      retired.add(upstream);
    } else agent.destroy();
  }

  return {
    get(target) {
      const entry = entries.get(target.name);
      if (entry && entry.upstream.key === target.key) {
        if (entry.tunnel && target.endpoint.kind === 'tunnel') entry.tunnel.dial = target.endpoint.dial;
        return entry.upstream;
      }
      const created = create(target);
      if (typeof created === 'string') return created;
      if (entry) retire(entry.upstream);
      const oneShot = { open: 0 };
      const { agent, hostname, port } = created.upstream;
      const { trust } = created;
      const viaOpenSsl = () => connectOnce(agent, hostname, port, oneShot);
      const upstream: Upstream = {
        ...created.upstream,
        connectOnce: () =>
          trust?.active
            ? trust
                .connect((extra) => connectOnce(agent, hostname, port, oneShot, extra))
                .then((socket) => socket ?? viaOpenSsl())
            : viaOpenSsl(),
      };
      entries.set(target.name, { ...created, upstream, oneShot });
      return upstream;
    },
    forget(name) {
      const entry = entries.get(name);
      if (!entry) return;
      entries.delete(name);
      retire(entry.upstream);
    },
    stats() {
      const stats: PoolStats = {
        pools: entries.size,
        retired: 0,
        activeSockets: 0,
        idleSockets: 0,
        queuedRequests: 0,
        http2Sessions: 0,
        http2Streams: 0,
        perCluster: [],
      };
      const add = ({ agent, http2, http1 }: Upstream, oneShotOpen = 0): number => {
        const passThrough = http1?.stats() ?? { active: 0, idle: 0 };
        stats.activeSockets += countSockets(agent.sockets) + oneShotOpen + passThrough.active;
        stats.idleSockets += countSockets(agent.freeSockets) + passThrough.idle;
        stats.queuedRequests += countSockets(agent.requests);
        const sessions = http2?.stats() ?? { sessions: 0, streams: 0 };
        stats.http2Sessions += sessions.sessions;
        stats.http2Streams += sessions.streams;
        return (
          countSockets(agent.sockets) +
          countSockets(agent.freeSockets) +
          sessions.sessions +
          oneShotOpen +
          passThrough.active +
          passThrough.idle
        );
      };
      for (const [cluster, entry] of entries)
        stats.perCluster.push([cluster, add(entry.upstream, entry.oneShot.open)]);
      sweep();
      for (const upstream of retired) add(upstream);
      stats.retired = retired.size;
      return stats;
    },
    close() {
      for (const upstream of [...[...entries.values()].map((entry) => entry.upstream), ...retired]) {
        upstream.agent.destroy();
        upstream.http2?.destroy();
        upstream.http1?.destroy();
      }
      entries.clear();
      retired.clear();
    },
  };
}

function countSockets(dict: NodeJS.ReadOnlyDict<readonly unknown[]>): number {
  let n = 0;
  for (const list of Object.values(dict)) n += list?.length ?? 0;
  return n;
}
