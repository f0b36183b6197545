/**
 * Flags for several gateway replicas sharing agent tunnels (replicas.ts, peers.ts, leases.ts).
 * All off unless --tunnel-peer-port is given: a single replica runs exactly as before.
 */
import { type FlagValues, integer, OptionsError } from '../../../shared/cli-flags.ts';

export interface TunnelPeerOptions {
  /** Port of the mutual-TLS server other replicas forward tunnel streams to. */
  port: number;
  certFile: string;
  keyFile: string;
  /** CA that signs every replica's peer certificate, and nothing else. */
  caFile: string;
  /** host:port other replicas dial to reach this one's peer port (written in its Leases). */
  address: string;
  /** This replica's name, the holderIdentity of its Leases; unset: POD_NAME, else the hostname (main.ts). */
  replicaName?: string;
  /** Namespace of the per-cluster tunnel Leases (the gateway's own). */
  leaseNamespace: string;
  leaseDurationSeconds: number;
}

export const peerFlags = {
  'tunnel-peer-port': {
    type: 'string',
    default: '0',
    help: 'several gateway replicas: serve the tunnels this replica holds to the other replicas on this port (mutual TLS), and forward requests for clusters whose tunnel another replica holds (found in a Lease per cluster). 0: off (a single replica)',
  },
  'tunnel-peer-cert': {
    type: 'string',
    help: "this replica's peer certificate (PEM), used as server and as client on the peer port; signed by --tunnel-peer-ca",
  },
  'tunnel-peer-key': { type: 'string', help: 'private key (PEM) of --tunnel-peer-cert' },
  'tunnel-peer-ca': {
    type: 'string',
    help: "CA (PEM) of the replicas' peer certificates: a client with a certificate it signed may use this replica's tunnels as a gateway would, so it must sign gateway replicas only (a dedicated CA, not the hub's)",
  },
  'tunnel-peer-address': {
    type: 'string',
    help: 'host:port at which the other replicas reach this one\'s peer port (in a pod: "$(POD_IP):<port>")',
  },
  'tunnel-replica-name': {
    type: 'string',
    help: "this replica's name, the holder written in its tunnel Leases; default: POD_NAME, else the hostname",
  },
  'tunnel-lease-namespace': {
    type: 'string',
    help: 'namespace of the tunnel Leases (cluster-gateway-tunnel-<cluster>); the gateway needs get, list, watch, create and update on leases there (a released Lease is emptied, never deleted)',
  },
  'tunnel-lease-duration': {
    type: 'string',
    default: '10',
    help: "seconds a replica's tunnel Lease stays valid without renewal (renewed every third of it): how long the others may still forward to a replica that died",
  },
} as const;

/** The peer options, or undefined when --tunnel-peer-port is 0. */
export function parsePeerOptions(values: FlagValues): TunnelPeerOptions | undefined {
  const str = (k: string) => {
    const v = values[k];
    return typeof v === 'string' && v.trim() ? v.trim() : undefined;
  };
  const port = integer('tunnel-peer-port', str('tunnel-peer-port') ?? '0', 0, 65535);
  const given = Object.keys(peerFlags).filter(
    (k) => k !== 'tunnel-peer-port' && k !== 'tunnel-lease-duration' && str(k),
  );
  if (port === 0) {
    if (given.length > 0) {
      throw new OptionsError(
        `--${given[0]} needs --tunnel-peer-port (the replicas' peer port; 0 turns sharing tunnels between replicas off)`,
      );
    }
    return undefined;
  }
  const required = (k: string, why: string) => {
    const v = str(k);
    if (!v) throw new OptionsError(`--tunnel-peer-port needs --${k} (${why})`);
    return v;
  };
  const address = required('tunnel-peer-address', 'where the other replicas reach this one');
  if (
    !/^(\[[0-9a-fA-F:.]+\]|[^\s:/[\]]+):\d{1,5}$/.test(address) ||
    Number(address.split(':').at(-1)) > 65535
  ) {
    throw new OptionsError(`--tunnel-peer-address: "${address}" is not host:port`);
  }
  const replicaName = str('tunnel-replica-name');
  if (replicaName !== undefined && (replicaName.length > 253 || /[\s"]/.test(replicaName))) {
    throw new OptionsError(`--tunnel-replica-name: "${replicaName}" is not a usable replica name`);
  }
  const leaseNamespace = required('tunnel-lease-namespace', 'where the tunnel Leases are kept');
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(leaseNamespace) || leaseNamespace.length > 63) {
    throw new OptionsError(`--tunnel-lease-namespace: "${leaseNamespace}" is not a namespace name`);
  }
  return {
    port,
    certFile: required('tunnel-peer-cert', "this replica's peer certificate"),
    keyFile: required('tunnel-peer-key', 'the key of --tunnel-peer-cert'),
    caFile: required('tunnel-peer-ca', "the CA of the replicas' peer certificates"),
    address,
    ...(replicaName ? { replicaName } : {}),
    leaseNamespace,
    leaseDurationSeconds: integer('tunnel-lease-duration', str('tunnel-lease-duration') ?? '10', 3, 300),
  };
}
