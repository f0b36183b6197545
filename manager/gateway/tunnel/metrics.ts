/**
 * Tunnel metrics of the gateway, in its own registry (../metrics.ts). Per-cluster series are read at
 * scrape time from the tunnel registry, so a cluster whose tunnel went away drops out, and their
 * label values are bounded by the clusters that attached (each one authorized).
 */
import { Counter, Gauge, Histogram } from 'prom-client';
import { registry } from '../metrics/gateway-metrics.ts';
import type { TunnelRegistry } from './registry.ts';
import type { CloseReason, TunnelSession } from './session.ts';

/** Outcome of an attach request; a fixed set of label values. */
export type AttachResult =
  | 'accepted'
  | 'unauthenticated'
  | 'not-agent'
  | 'forbidden'
  | 'bad-request'
  | 'error';

const attaches = new Counter({
  name: 'cluster_gateway_tunnel_attach_requests_total',
  help: "Agent tunnel attach requests, by result (accepted, unauthenticated, not-agent: identity is not this cluster's agent, forbidden: SubjectAccessReview denied, bad-request, error)",
  labelNames: ['result'] as const,
  registers: [registry],
});

const disconnects = new Counter({
  name: 'cluster_gateway_tunnel_disconnects_total',
  help: 'Agent tunnels that ended, by reason (closed by the agent or its connection, ping-timeout, replaced by a newer connection, shutdown, revoked: the agent lost its RBAC grant, error)',
  labelNames: ['reason'] as const,
  registers: [registry],
});

const roundTrip = new Histogram({
  name: 'cluster_gateway_tunnel_ping_round_trip_seconds',
  help: 'Round trip of keepalive pings through agent tunnels (gateway -> kube-aggregator -> agent and back)',
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  registers: [registry],
});

/** Bytes of sessions that have closed, so the byte counters never go backwards. */
const closedBytes = new Map<string, { received: number; sent: number }>();

export function recordAttach(result: AttachResult): void {
  attaches.inc({ result });
}

export function recordRoundTrip(ms: number): void {
  roundTrip.observe(ms / 1000);
}

export function recordDisconnect(session: TunnelSession, reason: CloseReason): void {
  disconnects.inc({ reason });
  void session.closed.then(() => {
    const total = closedBytes.get(session.cluster) ?? { received: 0, sent: 0 };
    const bytes = session.bytes;
    total.received += bytes.received;
    total.sent += bytes.sent;
    closedBytes.set(session.cluster, total);
  });
}

/** Registers the gauges that read the tunnel registry; call once. */
export function exposeTunnels(tunnels: TunnelRegistry): void {
  new Gauge({
    name: 'cluster_gateway_tunnel_connected',
    help: 'Clusters whose agent tunnel is connected to this replica (1 each)',
    labelNames: ['cluster'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const t of tunnels.list()) this.set({ cluster: t.cluster }, 1);
    },
  });
  new Gauge({
    name: 'cluster_gateway_tunnel_connected_since_seconds',
    help: 'Unix time at which the current agent tunnel of each cluster connected',
    labelNames: ['cluster'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const t of tunnels.list()) this.set({ cluster: t.cluster }, t.connectedAt.getTime() / 1000);
    },
  });
  new Gauge({
    name: 'cluster_gateway_tunnel_open_streams',
    help: 'Open streams (upstream connections) in the agent tunnels of each cluster, draining ones included',
    labelNames: ['cluster'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const sums = new Map<string, number>();
      for (const s of tunnels.all()) sums.set(s.cluster, (sums.get(s.cluster) ?? 0) + s.openStreams);
      for (const [cluster, n] of sums) this.set({ cluster }, n);
    },
  });
  new Counter({
    name: 'cluster_gateway_tunnel_bytes_total',
    help: "Bytes through each cluster's agent tunnels (HTTP/2 framing and TLS included), by direction: received from or sent to the agent",
    labelNames: ['cluster', 'direction'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const sums = new Map<string, { received: number; sent: number }>();
      for (const [cluster, bytes] of closedBytes) sums.set(cluster, { ...bytes });
      for (const s of tunnels.all()) {
        const sum = sums.get(s.cluster) ?? { received: 0, sent: 0 };
        const bytes = s.bytes;
        sum.received += bytes.received;
        sum.sent += bytes.sent;
        sums.set(s.cluster, sum);
      }
      for (const [cluster, { received, sent }] of sums) {
        this.inc({ cluster, direction: 'received' }, received);
        this.inc({ cluster, direction: 'sent' }, sent);
      }
    },
  });
}
