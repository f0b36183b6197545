/**
 * What the connection layer needs to know about one upstream (a kube-apiserver), and nothing more:
 * a name for messages, the key its pool is kept under, how it is reached and with which credential.
 * The gateway builds one from a ClusterTarget (manager/gateway/proxy/cluster-pools.ts), the agent
 * from its own connection (agent/tunnel/impersonation.ts).
 */
import type { Duplex } from 'node:stream';
import type { TunnelStreamKind } from '../tunnel/protocol.ts';

export interface TransportTarget {
  /** The cluster's name, for messages and stats. */
  name: string;
  /**
   * A digest of endpoint and credential. Pools are keyed by it, so a rotated token or certificate,
   * a new CA or a reconnected tunnel gets a fresh pool on the next request.
   */
  key: string;
  endpoint: TransportEndpoint;
  credential?: TransportCredential;
}

export type TransportEndpoint = DirectEndpoint | EgressEndpoint | TunnelDialEndpoint;

/** How the upstream's certificate is checked (TLS endpoints only). */
interface ServerTrust {
  /** PEM CA bundle; absent means the system trust store. */
  caBundle?: string;
  /** Skip TLS verification. */
  insecure: boolean;
}

/** TCP to the upstream itself: TLS for an https:// URL, plain HTTP for http:// (connect-direct.ts). */
export interface DirectEndpoint extends ServerTrust {
  kind: 'direct';
  /** The kube-apiserver, possibly with a sub-path (https://host:6443/prefix). */
  url: string;
}

/**
 * Through a proxy (connect-egress.ts): an HTTP(S) forward proxy's CONNECT or a SOCKS5 proxy
 * (socks5.ts), TLS to the upstream inside the stream it opens.
 */
export interface EgressEndpoint extends ServerTrust {
  kind: 'egress';
  url: string;
  /**
   * http:// or https:// (HTTP CONNECT), socks5:// or socks5h:// (SOCKS5, the host name sent
   * unresolved). Userinfo is the proxy's credential; it never appears in a message.
   */
  proxyUrl: string;
}

/** One stream of an agent's reverse tunnel per connection (connect-tunnel.ts). */
export interface TunnelDialEndpoint extends ServerTrust {
  kind: 'tunnel';
  /** Server name (and Host) for the TLS session run inside `relay` streams. */
  serverName: string;
  /**
   * `relay`: a raw byte stream to the apiserver, TLS with the credential run inside it.
   * `impersonate`: plain HTTP that the agent serves with its own credential (shared/tunnel/protocol.ts).
   */
  stream: TunnelStreamKind;
  /** Opens one stream of the tunnel. */
  dial: (kind: TunnelStreamKind) => Promise<Duplex>;
}

/** A bearer token, a client certificate, or both (an exec plugin's result may carry either). */
export interface TransportCredential {
  token?: string;
  certificate?: string;
  privateKey?: string;
}

/** The Authorization header value that presents a credential, if it carries a token. */
export function authorizationOf(credential: TransportCredential | undefined): string | undefined {
  const token = credential?.token?.trim();
  return token ? `Bearer ${token}` : undefined;
}

/** The client certificate a credential presents in the TLS handshake, if any. */
export function clientCertificateOf(
  credential: TransportCredential | undefined,
): { cert: string; key?: string } | undefined {
  return credential?.certificate ? { cert: credential.certificate, key: credential.privateKey } : undefined;
}
