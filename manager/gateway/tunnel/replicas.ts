/**
 * Any replica serves any cluster: the cluster registry's route to a cluster's tunnel is this
 * replica's own tunnel when it holds one, else a forwarding endpoint through the replica whose
 * live Lease says it holds it (peers.ts), else none (requests then fail at once with 503).
 *
 * Sits between the TunnelRegistry (local tunnels) and the cluster registry: it is the TunnelRegistry's
 * sink, and it holds a Lease for each local tunnel (leases.ts). It gives the cluster registry routes
 * only: what the ClusterGateway shows of a tunnel comes from its Lease, the same on every replica
 * (LeaseReader's onRecord).
 */

import type { Duplex } from 'node:stream';
import type { TunnelStreamKind } from '../../../shared/tunnel/protocol.ts';
import type { TunnelEndpoint } from '../clusters/cluster.ts';
import type { TunnelHolder } from './leases.ts';
import { type TunnelSink, tunnelServerName } from './registry.ts';

type Info = { connectedAt?: Date; replica?: string };

/** The cluster registry's side: routes only (clusters/registry.ts setTunnelRoute). */
export interface TunnelRouteSink {
  setTunnelRoute(cluster: string, endpoint: TunnelEndpoint | undefined): void;
}

export interface ReplicaRouterOptions {
  /** The cluster registry. */
  sink: TunnelRouteSink;
  /** Leases of this replica's tunnels. */
  leases: { hold(cluster: string, connectedAt: Date): void; release(cluster: string): void };
  /** The live holder of a cluster's tunnel among the other replicas (LeaseReader.get). */
  remote: (cluster: string) => TunnelHolder | undefined;
  /** One stream through the holding replica (PeerClient.dial). */
  dialPeer: (address: string, replica: string, cluster: string, kind: TunnelStreamKind) => Promise<Duplex>;
}

export class ReplicaRouter implements TunnelSink {
  readonly #o: ReplicaRouterOptions;
  readonly #local = new Map<string, TunnelEndpoint>();
  /** The forwarding endpoint last given per cluster: the same object while the holder stays, so pools stay. */
  readonly #forwarding = new Map<string, { key: string; endpoint: TunnelEndpoint }>();

  constructor(options: ReplicaRouterOptions) {
    this.#o = options;
  }

  /** From the TunnelRegistry: this replica's tunnel of `cluster` came or went. */
  setTunnel(cluster: string, endpoint: TunnelEndpoint | undefined, info: Info = {}): void {
    if (endpoint) {
      this.#local.set(cluster, endpoint);
      this.#o.leases.hold(cluster, info.connectedAt ?? new Date());
    } else if (this.#local.delete(cluster)) {
      this.#o.leases.release(cluster);
    }
    this.update(cluster);
  }

  /** Recomputes `cluster`'s endpoint: call when its Lease changed (LeaseReader's onChange). */
  update(cluster: string): void {
    const local = this.#local.get(cluster);
    if (local) {
      this.#forwarding.delete(cluster);
      this.#o.sink.setTunnelRoute(cluster, local);
      return;
    }
    const holder = this.#o.remote(cluster);
    if (!holder) {
      this.#forwarding.delete(cluster);
      this.#o.sink.setTunnelRoute(cluster, undefined);
      return;
    }
    const key = `${holder.replica}\n${holder.address}`;
    let forwarding = this.#forwarding.get(cluster);
    if (forwarding?.key !== key) {
      const { address, replica } = holder;
      forwarding = {
        key,
        endpoint: {
          type: 'ClusterProxy',
          serverName: tunnelServerName,
          insecure: false,
          dial: (kind = 'relay') => this.#o.dialPeer(address, replica, cluster, kind),
        },
      };
      this.#forwarding.set(cluster, forwarding);
    }
    this.#o.sink.setTunnelRoute(cluster, forwarding.endpoint);
  }
}
