/**
 * Flags for several gateway replicas sharing agent tunnels (replicas.ts, peers.ts, leases.ts).
 * All off unless --tunnel-peer-port is given: a single replica runs exactly as before.
 */
import { type FlagValues, integer, OptionsError } from '../../../shared/cli-flags.ts';

/**
 * A peer certificate and its trust from files, instead of one from the hub's signer: for gateways run
 * outside a pod (the e2e harness), which have no pod-bound ServiceAccount token to request one with.
 */
export interface PeerFiles {
  certFile: string;
  keyFile: string;
  /** A CA that signs replicas' peer certificates and nothing else; a certificate's CN is its replica. */
  caFile: string;
}

export interface TunnelPeerOptions {
  /** Port of the mutual-TLS server other replicas forward tunnel streams to. */
  port: number;
  /**
   * Namespace in this replica's peer certificate CN (`cluster-gateway-peer:<namespace>:<replica>`):
   * its pod's; unset: the Lease namespace (the gateway's own).
   */
  namespace: string;
  /** Harness only: peer certificate and trust from files (default: the hub's signer and client CA). */
  files?: PeerFiles;
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
  'tunnel-peer-namespace': {
    type: 'string',
    help: "the gateway's namespace, in this replica's peer certificate (CN cluster-gateway-peer:<namespace>:<replica>, from the hub's kubernetes.io/kube-apiserver-client signer through a CertificateSigningRequest the addon manager approves; the gateway needs create and get on certificatesigningrequests); default: --tunnel-lease-namespace",
  },
  'tunnel-peer-cert': {
    type: 'string',
    help: 'for a gateway run outside a pod only (tests): a peer certificate (PEM) instead of one from the hub, used as server and as client on the peer port; with --tunnel-peer-key and --tunnel-peer-ca',
  },
  'tunnel-peer-key': { type: 'string', help: 'private key (PEM) of --tunnel-peer-cert' },
  'tunnel-peer-ca': {
    type: 'string',
    help: "with --tunnel-peer-cert: the CA (PEM) of the replicas' peer certificates instead of the hub's client CA, each certificate's CN its replica's name. Whoever holds its key may use every tunnel as a gateway would: never a CA whose key sits in the cluster",
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
  const fileFlags = ['tunnel-peer-cert', 'tunnel-peer-key', 'tunnel-peer-ca'];
  const filesGiven = fileFlags.filter((k) => str(k));
  if (filesGiven.length > 0 && filesGiven.length < fileFlags.length) {
    const missing = fileFlags.find((k) => !str(k));
    throw new OptionsError(
      `--${filesGiven[0]} needs --${missing} (a peer certificate from files needs all of --tunnel-peer-cert, --tunnel-peer-key and --tunnel-peer-ca)`,
    );
  }
  const namespace = str('tunnel-peer-namespace') ?? leaseNamespace;
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(namespace) || namespace.length > 63) {
    throw new OptionsError(`--tunnel-peer-namespace: "${namespace}" is not a namespace name`);
  }
  return {
    port,
    namespace,
    ...(filesGiven.length > 0
      ? {
          files: {
            certFile: required('tunnel-peer-cert', "this replica's peer certificate"),
            keyFile: required('tunnel-peer-key', 'the key of --tunnel-peer-cert'),
            caFile: required('tunnel-peer-ca', "the CA of the replicas' peer certificates"),
          },
        }
      : {}),
    address,
    ...(replicaName ? { replicaName } : {}),
    leaseNamespace,
    leaseDurationSeconds: integer('tunnel-lease-duration', str('tunnel-lease-duration') ?? '10', 3, 300),
  };
}
