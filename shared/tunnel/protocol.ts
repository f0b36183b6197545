import { type Duplex, duplexPair } from 'node:stream';

/**
 * The agent tunnel's wire contract, shared by the gateway (manager/gateway/tunnel)
 * and the agent (agent/tunnel). Kept free of imports beyond node: builtins so the
 * agent pays nothing extra for it.
 *
 * 1. The agent sends `POST /apis/cluster.core.oam.dev/v1alpha1/clustergateways/<cluster>/attach`
 *    with `Connection: Upgrade` and `Upgrade: cluster-gateway-tunnel` to the hub's kube-apiserver,
 *    authenticated with its addon credential. `attach` is a subresource the kube-apiserver treats
 *    as long-running (its LongRunningFunc: verb watch/proxy or subresource attach, exec, proxy, log,
 *    portforward), so the held connection takes no in-flight or priority-and-fairness seat and no
 *    request timeout applies. The kube-aggregator relays the upgrade to the gateway.
 * 2. The gateway answers 101 and runs an HTTP/2 *client* session on the connection; the agent
 *    serves HTTP/2 on it (roles reversed: the gateway is the one with requests to make).
 * 3. Each upstream connection of the gateway is one `CONNECT` stream; the agent pipes it to its own
 *    kube-apiserver and nowhere else (the `:authority` is ignored). TLS to that apiserver runs inside
 *    the stream, end to end from the gateway.
 */

export const tunnelGroup = 'cluster.core.oam.dev';
export const tunnelVersion = 'v1alpha1';
export const tunnelResource = 'clustergateways';
export const tunnelSubresource = 'attach';
/** The RBAC verb the hub and the gateway check: the agent attaches with POST, as `kubectl attach` does. */
export const tunnelVerb = 'create';

/** The `Upgrade` token. The kube-aggregator relays any token; the gateway accepts only this one. */
export const tunnelUpgradeProtocol = 'cluster-gateway-tunnel';

/** `:authority` of the CONNECT streams: informational, the agent always dials its own apiserver. */
export const tunnelConnectAuthority = 'kube-apiserver:443';

/**
 * Request header of a CONNECT stream: what the stream carries (absent means `relay`).
 *
 * - `relay`: bytes for the cluster's kube-apiserver. The gateway runs TLS to that apiserver inside the
 *   stream with the credential the hub holds (the hub-credential model); the agent pipes ciphertext.
 * - `impersonate`: plain HTTP/1.1 that the agent itself serves (the no-credential model): it forwards
 *   each request to its kube-apiserver with its own ServiceAccount token and the Impersonate-User,
 *   -Uid and -Group headers the gateway set for the hub caller, and refuses a request without them.
 *   Only streams the gateway opens through the tunnel reach this server: the agent listens nowhere
 *   else for it, so no one but the gateway can ask it to act as someone.
 */
export const tunnelStreamHeader = 'x-cluster-gateway-stream';
export type TunnelStreamKind = 'relay' | 'impersonate';

/** Response header the agent sets when it cannot open the stream's connection (no credential in it). */
export const tunnelErrorHeader = 'x-cluster-gateway-tunnel-error';

/** Path of the attach subresource for a cluster name (a DNS-1123 subdomain, so no escaping needed). */
export function attachPath(cluster: string): string {
  return `/apis/${tunnelGroup}/${tunnelVersion}/${tunnelResource}/${cluster}/${tunnelSubresource}`;
}

/**
 * Liveness: each side pings every `intervalMs` and gives up on a peer that has not answered within
 * `timeoutMs`, so a frozen or partitioned peer is noticed within interval + timeout (8 s).
 */
export const defaultKeepalive = { intervalMs: 2_000, timeoutMs: 6_000 };

/**
 * HTTP/2 flow-control windows. Per stream: a slow watch fills only its own window and never stalls
 * the other streams (Node returns connection-window credit as data arrives, stream credit as it is
 * read). 1 MiB per stream keeps a single stream near line rate on a path of a few ms round trip;
 * the connection window lets several streams run at once.
 */
export const streamWindowBytes = 1 << 20;
export const connectionWindowBytes = 32 << 20;
/** Concurrent streams the agent accepts: every pooled gateway connection (a watch, say) is one. */
export const maxConcurrentStreams = 10_000;

/**
 * An HTTP/2 stream of the tunnel as the socket of an HTTP/1.1 client or server (the `impersonate`
 * streams, where neither side runs TLS inside the stream).
 *
 * Not the stream itself: Node's HTTP/1.1 code writes headers as latin1 strings, and an Http2Stream
 * corrupts strings handed to it in a batch (writev) when its session runs over TLS, as the tunnel's
 * does (measured on Node 24: the first 17 bytes of a response, its status line, arrived as garbage).
 * Through the pipe below only Buffers reach the stream. Also, HTTP code tunes its sockets (Nagle,
 * keepalive, ref/unref): a stream has no such knobs, so they are no-ops here.
 */
export function asSocket(stream: Duplex): Duplex {
  const [socket, inner] = duplexPair();
  inner.pipe(stream);
  stream.pipe(inner);
  // Either side gone takes the other with it: no half-dead HTTP connection stays pooled.
  stream.once('close', () => socket.destroy());
  socket.once('close', () => stream.destroy());
  stream.on('error', () => {});
  inner.on('error', () => {});
  const s = socket as Duplex &
    Record<'setNoDelay' | 'setKeepAlive' | 'ref' | 'unref' | 'setTimeout', unknown>;
  s.setNoDelay = () => socket;
  s.setKeepAlive = () => socket;
  // A pooled keep-alive connection is unref'd by http.Agent; the tunnel's own socket decides liveness.
  s.ref = () => socket;
  s.unref = () => socket;
  s.setTimeout = (ms: number, cb?: () => void) => {
    (stream as Duplex & { setTimeout?(ms: number, cb?: () => void): void }).setTimeout?.(ms, cb);
    return socket;
  };
  return socket;
}
