/**
 * Wiring of several replicas sharing agent tunnels (--tunnel-peer-port): the Lease holder and
 * reader, the peer server and client, and the router that is the TunnelRegistry's sink.
 */
import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import type { TunnelStreamKind } from '../../../shared/tunnel/protocol.ts';
import { type Lease, LeaseHolder, LeaseReader, leasesPath } from './leases.ts';
import type { TunnelPeerOptions } from './peer-options.ts';
import { PeerClient, PeerServer } from './peers.ts';
import type { TunnelSink } from './registry.ts';
import { ReplicaRouter, type TunnelRouteSink } from './replicas.ts';
import type { TunnelSession } from './session.ts';

export interface ReplicaSharing {
  /** The TunnelRegistry's sink. */
  sink: TunnelSink;
  /** The tunnel Leases as this replica has them (api/fresh-read.ts compares them with the hub's). */
  leases: Pick<Informer<Lease>, 'get'>;
  /** Starts the peer port; `local` looks up this replica's tunnels. */
  start(local: (cluster: string) => TunnelSession | undefined, bindAddress: string): Promise<number>;
  /** Releases this replica's Leases and closes the peer port. */
  stop(): Promise<void>;
}

export interface ReplicaSharingLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  debug(fields: object, message: string): void;
}

/** The cluster registry, as replica sharing feeds it: routes, the Leases' records, progress. */
export interface ClusterTunnelSink extends TunnelRouteSink {
  setTunnelRecord(
    cluster: string,
    record: { replica: string; since?: string } | undefined,
    version: number,
  ): void;
  advance(resourceVersion: string): void;
}

export function setUpReplicaSharing(
  options: TunnelPeerOptions & { replicaName: string },
  deps: { hub: KubeClient; sink: ClusterTunnelSink; log: ReplicaSharingLog },
): ReplicaSharing {
  const read = (file: string, flag: string) => {
    try {
      return readFileSync(file, 'utf8');
    } catch (err) {
      throw new Error(`--${flag}: cannot read ${file}: ${(err as Error).message}`);
    }
  };
  const readAll = () => ({
    cert: read(options.certFile, 'tunnel-peer-cert'),
    key: read(options.keyFile, 'tunnel-peer-key'),
    ca: read(options.caFile, 'tunnel-peer-ca'),
  });
  let tls = readAll();
  const holder = new LeaseHolder({
    client: deps.hub,
    namespace: options.leaseNamespace,
    replica: options.replicaName,
    address: options.address,
    durationSeconds: options.leaseDurationSeconds,
    onError: (cluster, err) =>
      deps.log.warn({ cluster, err: (err as Error).message }, 'cannot write the tunnel Lease; retrying'),
  });
  const client = new PeerClient({ tls });
  let router: ReplicaRouter | undefined;
  const reader = new LeaseReader({
    client: deps.hub,
    namespace: options.leaseNamespace,
    replica: options.replicaName,
    onChange: (cluster, holding) => {
      deps.log.info(
        { cluster, replica: holding?.replica, address: holding?.address },
        holding ? 'tunnel held by another replica: forwarding to it' : 'no other replica holds the tunnel',
      );
      router?.update(cluster);
    },
    onRecord: (cluster, record, version) => deps.sink.setTunnelRecord(cluster, record, version),
    onSync: (resourceVersion) => deps.sink.advance(resourceVersion),
    clearExpired: async (lease: Lease) => {
      const { holderIdentity, ...spec } = lease.spec ?? {};
      if (!holderIdentity) return;
      try {
        // Conditional on the version seen: a holder that renewed meanwhile keeps its Lease (409).
        await deps.hub.request('PUT', `${leasesPath(options.leaseNamespace)}/${lease.metadata?.name}`, {
          body: { ...lease, spec },
        });
        deps.log.info(
          { lease: lease.metadata?.name, replica: holderIdentity },
          'tunnel Lease not renewed within its duration: holder cleared',
        );
      } catch (err) {
        if (err instanceof StatusError && (err.code === 409 || err.code === 404)) return;
        throw err;
      }
    },
    informer: {
      onError: (err, phase) =>
        deps.log.warn(
          { source: 'leases', phase, err: (err as Error).message },
          'watch interrupted; retrying',
        ),
    },
  });
  router = new ReplicaRouter({
    sink: deps.sink,
    leases: holder,
    remote: (cluster) => reader.get(cluster),
    dialPeer: (address, replica, cluster, kind) => client.dial(address, replica, cluster, kind),
  });
  let server: PeerServer | undefined;
  const watched = [options.certFile, options.keyFile, options.caFile];
  return {
    sink: router,
    leases: reader.informer,
    async start(local, bindAddress) {
      server = new PeerServer({
        tls,
        dialLocal: (cluster: string, kind: TunnelStreamKind) => {
          const session = local(cluster);
          return session?.usable ? session.dial(kind) : undefined;
        },
        log: deps.log,
      });
      const port = await server.listen(options.port, bindAddress);
      // Rotated peer files (a mounted Secret) are picked up without a restart, as the serving pair is.
      const reload = () => {
        try {
          const next = readAll();
          if (next.cert === tls.cert && next.key === tls.key && next.ca === tls.ca) return;
          server?.setTls(next); // throws on a certificate and key that do not match: nothing changes
          client.setTls(next);
          tls = next;
          deps.log.info({ certFile: options.certFile }, 'tunnel peer certificate reloaded');
        } catch {
          // half written, or one file replaced before the other: the next change retries
        }
      };
      for (const file of watched) watchFile(file, { interval: 5000, persistent: false }, reload);
      holder.start();
      reader.start();
      deps.log.info(
        {
          port,
          replica: options.replicaName,
          address: options.address,
          leaseNamespace: options.leaseNamespace,
        },
        'sharing agent tunnels with the other gateway replicas',
      );
      return port;
    },
    async stop() {
      for (const file of watched) unwatchFile(file);
      reader.stop();
      await holder.stop();
      client.close();
      await server?.close();
    },
  };
}
