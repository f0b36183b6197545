/**
 * Wiring of several replicas sharing agent tunnels (--tunnel-peer-port): the Lease holder and
 * reader, the peer server and client, this replica's peer certificate (from the hub's signer,
 * peer-certificate.ts; or files, for a gateway outside a pod), and the router that is the
 * TunnelRegistry's sink.
 */
import type { X509Certificate } from 'node:crypto';
import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import type { KubeClient } from '../../../shared/kube/client.ts';
import type { Informer } from '../../../shared/kube/informer.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import type { TunnelStreamKind } from '../../../shared/tunnel/protocol.ts';
import { parsePemBundle } from '../../../shared/x509-chain.ts';
import { type Lease, LeaseHolder, LeaseReader, leasesPath } from './leases.ts';
import { PeerCertificateSource } from './peer-certificate.ts';
import { dedicatedCaPeerTrust, hubPeerTrust, type PeerTrust } from './peer-identity.ts';
import type { PeerFiles, TunnelPeerOptions } from './peer-options.ts';
import { PeerClient, PeerServer, type PeerTls } from './peers.ts';
import type { TunnelSink } from './registry.ts';
import { ReplicaRouter, type TunnelRouteSink } from './replicas.ts';
import type { TunnelSession } from './session.ts';

export interface ReplicaSharing {
  /** The TunnelRegistry's sink. */
  sink: TunnelSink;
  /** The tunnel Leases as this replica has them (api/fresh-read.ts compares them with the hub's). */
  leases: Pick<Informer<Lease>, 'get'>;
  /** Opens tunnel streams through other replicas; `verify` proves an address is a given replica. */
  peers: PeerClient;
  /** Starts the peer port; `local` looks up this replica's tunnels. */
  start(local: (cluster: string) => TunnelSession | undefined, bindAddress: string): Promise<number>;
  /** Releases this replica's Leases and closes the peer port. */
  stop(): Promise<void>;
  /**
   * The tunnel Leases listed at start are applied, their holders' proofs included (bounded: LeaseReader.synced):
   * readiness waits for it, so that a Ready replica routes every cluster the other replicas route.
   */
  readonly synced: boolean;
}

/**
 * How long a holder's proof waits for this replica's own first peer certificate (the hub signs it within a
 * second when the addon manager is up): without one every proof fails at once and is not asked again for 10 s.
 */
const certificateWaitMs = 10_000;
/** PeerClient's default dial timeout: a proof to a holder that does not answer fails after it. */
const proofDialMs = 5_000;
/**
 * Readiness waits at most this long for the Leases listed at start: as long as a proof can legitimately take
 * (the certificate wait, then one dial), so the bound only cuts short a proof that hangs past both.
 */
const leasesSyncWithinMs = certificateWaitMs + proofDialMs;

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
  deps: {
    hub: KubeClient;
    sink: ClusterTunnelSink;
    log: ReplicaSharingLog;
    /** The hub's client CA (client-ca-file of kube-system/extension-apiserver-authentication), as watched. */
    hubClientCa: () => readonly X509Certificate[] | undefined;
  },
): ReplicaSharing {
  const files = options.files;
  // From files (harness): read now, so that a bad path stops the start with the flag's name.
  let fromFiles = files ? readPeerFiles(files) : undefined;
  let tls: PeerTls | undefined = fromFiles && { cert: fromFiles.cert, key: fromFiles.key };
  let fileTrust = fromFiles && dedicatedCaPeerTrust(parsePemBundle(fromFiles.ca));
  // The hub's client CA changes rarely: one PeerTrust per bundle, so verifications cache by it.
  let hubTrust: { roots: readonly X509Certificate[]; trust: PeerTrust } | undefined;
  const trust = (): PeerTrust | undefined => {
    if (files) return fileTrust;
    const roots = deps.hubClientCa();
    if (!roots) return undefined;
    if (hubTrust?.roots !== roots) hubTrust = { roots, trust: hubPeerTrust(roots, options.namespace) };
    return hubTrust.trust;
  };
  // This replica's first peer certificate (at once from files): a proof needs it (PeerClient refuses without).
  const certificate = firstCertificateGate(certificateWaitMs);
  if (tls) certificate.issued();
  const holder = new LeaseHolder({
    client: deps.hub,
    namespace: options.leaseNamespace,
    replica: options.replicaName,
    address: options.address,
    durationSeconds: options.leaseDurationSeconds,
    onError: (cluster, err) =>
      deps.log.warn({ cluster, err: (err as Error).message }, 'cannot write the tunnel Lease; retrying'),
    // Another holder is named: stop serving the tunnel as its holder. The agent's reconnection (here or on
    // another replica) takes the Lease again, so a forged holder costs one reconnect.
    onLost: (cluster, other) => {
      deps.log.warn(
        { cluster, holder: other },
        "tunnel Lease names another holder: draining this replica's tunnel of the cluster",
      );
      localOf?.(cluster)?.drain('lease-lost', 10_000);
    },
  });
  /** This replica's own tunnels (set by start). */
  let localOf: ((cluster: string) => TunnelSession | undefined) | undefined;
  const client = new PeerClient({ ...(tls ? { tls } : {}), trust });
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
    // A Lease is a claim: its holder must prove on the peer port that it is that replica (leases.ts).
    // Asked before this replica has its own certificate (just started), the proof waits for it (bounded):
    // failed for want of it, the holder's tunnel would not route here for the next 10 s.
    verifyHolder: (claim) =>
      certificate
        .wait()
        .then(() => client.verify(claim.address, claim.replica))
        .then(
          () => true,
          (err: Error) => {
            deps.log.warn(
              { cluster: claim.cluster, replica: claim.replica, address: claim.address, err: err.message },
              'tunnel Lease ignored: its holder did not prove it is that gateway replica',
            );
            return false;
          },
        ),
    onSync: (resourceVersion) => deps.sink.advance(resourceVersion),
    syncWithinMs: leasesSyncWithinMs,
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
  const watched = files ? [files.certFile, files.keyFile, files.caFile] : [];
  const certificates = files
    ? undefined
    : new PeerCertificateSource({
        hub: deps.hub,
        namespace: options.namespace,
        replica: options.replicaName,
        log: deps.log,
        onCertificate: (pair) => {
          tls = pair;
          server?.setTls(pair);
          client.setTls(pair);
          certificate.issued();
        },
      });
  return {
    sink: router,
    leases: reader.informer,
    get synced() {
      return reader.synced;
    },
    peers: client,
    async start(local, bindAddress) {
      localOf = local;
      server = new PeerServer({
        ...(tls ? { tls } : {}),
        trust,
        dialLocal: (cluster: string, kind: TunnelStreamKind) => {
          const session = local(cluster);
          return session?.usable ? session.dial(kind) : undefined;
        },
        log: deps.log,
      });
      // Listening at once; until this replica holds a peer certificate every handshake fails.
      const port = await server.listen(options.port, bindAddress);
      certificates?.start();
      // Rotated peer files are picked up without a restart, as the serving pair is.
      const reload = () => {
        if (!files) return;
        try {
          const next = readPeerFiles(files);
          if (next.cert === fromFiles?.cert && next.key === fromFiles.key && next.ca === fromFiles.ca) return;
          const nextTrust = dedicatedCaPeerTrust(parsePemBundle(next.ca));
          const pair = { cert: next.cert, key: next.key };
          server?.setTls(pair); // throws on a certificate and key that do not match: nothing changes
          client.setTls(pair);
          fromFiles = next;
          fileTrust = nextTrust;
          tls = pair;
          deps.log.info({ certFile: files.certFile }, 'tunnel peer certificate reloaded');
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
          peerCertificate: files ? 'files' : 'hub signer',
        },
        'sharing agent tunnels with the other gateway replicas',
      );
      return port;
    },
    async stop() {
      certificates?.stop();
      for (const file of watched) unwatchFile(file);
      reader.stop();
      await holder.stop();
      client.close();
      await server?.close();
    },
  };
}

/**
 * Waits for this replica's first peer certificate: `wait` resolves once `issued` was called, or after `waitMs`
 * (the proof then fails as it would have, rather than hold the Lease events behind it any longer).
 */
export function firstCertificateGate(waitMs: number): { issued(): void; wait(): Promise<void> } {
  let have = false;
  let resolveIssued: () => void = () => {};
  const issued = new Promise<void>((resolve) => {
    resolveIssued = resolve;
  });
  return {
    issued() {
      have = true;
      resolveIssued();
    },
    wait() {
      if (have) return Promise.resolve();
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, waitMs).unref();
      });
      return Promise.race([issued, bound]).finally(() => clearTimeout(timer));
    },
  };
}

function readPeerFiles(files: PeerFiles): { cert: string; key: string; ca: string } {
  const read = (file: string, flag: string) => {
    try {
      return readFileSync(file, 'utf8');
    } catch (err) {
      throw new Error(`--${flag}: cannot read ${file}: ${(err as Error).message}`);
    }
  };
  return {
    cert: read(files.certFile, 'tunnel-peer-cert'),
    key: read(files.keyFile, 'tunnel-peer-key'),
    ca: read(files.caFile, 'tunnel-peer-ca'),
  };
}
