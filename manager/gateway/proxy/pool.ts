/**
 * One keep-alive connection pool (an http(s).Agent) per cluster.
 *
 * A pool is keyed by `ClusterTarget.connectionKey`, a digest of endpoint and
 * credential: when a token or certificate rotates, the next request gets a new
 * pool, and the old one is retired — its idle sockets closed at once, its
 * busy ones (a long watch, say) allowed to finish and then closed.
 *
 * Everything a request needs that can be computed once per pool is computed
 * here (parsed address, base path, Host and Authorization values), so the hot
 * path only reads fields.
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import type { ClusterTarget, Endpoint, TunnelEndpoint } from '../clusters/cluster.ts';
import { connectThroughProxy, parseProxyUrl } from './egress.ts';
import { authorizationFor } from './headers.ts';
import { Http2Sessions } from './http2-sessions.ts';
import { connectionContext, type OneShotTlsOptions, OneShotTrust } from './one-shot-tls.ts';
import { basePathOf } from './path.ts';

const BRACKETS = /^\[|\]$/g;

export interface Upstream {
  cluster: string;
  key: string;
  agent: http.Agent;
  request: typeof http.request;
  /** Connect target for http.request (for tunnels: the TLS server name). */
  hostname: string;
  port: number;
  /** The endpoint's sub-path: '' or '/prefix' without trailing slash. */
  basePath: string;
  hostHeader: string;
  authorization?: string;
  /**
   * HTTP/2 sessions for the requests that are not upgrades, on every TLS endpoint (direct, through
   * an egress proxy, inside a relay tunnel); the Agent serves upgrades, and everything once the
   * cluster has answered ALPN with http/1.1. Absent for plain-HTTP endpoints.
   */
  http2?: Http2Sessions;
  /**
   * Opens one connection of this pool's kind (direct, through the egress proxy or the agent tunnel,
   * TLS with the pool's context, resuming the TLS session the pool last had) for a single request
   * that the caller writes and reads itself, outside the Agent: a health probe of an idle cluster.
   * Counted in stats() while open.
   */
  connectOnce(): Promise<Duplex>;
}

/**
 * A request option (a symbol, so it never reaches the wire) that marks a request whose connection is
 * used once, e.g. a health probe of a cluster without traffic: it takes the pool's TLS context if
 * one is held, and otherwise builds one that is not kept (see heldContext).
 */
export const oneShotConnection: unique symbol = Symbol('oneShotConnection');

/** The pool's TLS context; `oneShot` for a connection that will not be followed by others soon. */
type ContextGetter = (oneShot?: boolean) => tls.SecureContext;

export interface PoolOptions {
  /** Limit for opening one connection: TCP (or tunnel dial, or CONNECT) plus TLS handshake. */
  connectTimeoutMs?: number;
  /** How long an idle keep-alive socket is kept; below kube-apiserver's 90 s idle timeout. */
  idleTimeoutMs?: number;
  /** Offer HTTP/2 to TLS endpoints (default true); false keeps every request on the Agents. */
  http2?: boolean;
}

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
  /** The pool for a cluster, or a problem string when its endpoint cannot be used. */
  get(target: ClusterTarget): Upstream | string;
  /** Retires a cluster's pool (cluster deleted). */
  forget(cluster: string): void;
  stats(): PoolStats;
  /** Destroys every socket of every pool. */
  close(): void;
}

interface Entry {
  upstream: Upstream;
  /** Connections open through connectOnce(), for stats(). */
  oneShot: { open: number };
  /** Tunnel endpoints: the latest dial(), so a reconnected agent tunnel is used at once. */
  tunnel?: { dial: TunnelEndpoint['dial'] };
}

type Dial = () => Promise<Duplex>;

/** An Upstream as create() builds it, before get() adds what needs the pool's bookkeeping. */
type UpstreamParts = Omit<Upstream, 'connectOnce'>;

export function createConnectionPools(options: PoolOptions = {}): ConnectionPools {
  const connectTimeoutMs = options.connectTimeoutMs ?? 30_000;
  const idleTimeoutMs = options.idleTimeoutMs ?? 30_000;
  const entries = new Map<string, Entry>();
  const retired = new Set<Upstream>();

  function create(
    target: ClusterTarget,
    endpoint: Endpoint,
  ): { upstream: UpstreamParts; tunnel?: Entry['tunnel']; trust?: OneShotTrust } | string {
    const base: http.AgentOptions = { keepAlive: true, timeout: idleTimeoutMs, scheduling: 'lifo' };
    const credential = target.credential;
    // Only for the TLS branches below: plain-HTTP pools need no context. `host`: the name the
    // cluster's certificate must carry.
    const tlsSetupOf = (
      host: string,
    ): { options: https.AgentOptions; context: ContextGetter; trust?: OneShotTrust } | string => {
      let context: ContextGetter;
      try {
        context = heldContext(secureContextFor(endpoint, credential), () =>
          secureContextFor(endpoint, credential),
        );
      } catch (err) {
        // What every connection would have failed with, said once per pool instead (answered as a 503).
        return `cannot load the TLS configuration of cluster "${target.name}": ${err instanceof Error ? err.message : String(err)}`;
      }
      const trust =
        endpoint.caBundle && !endpoint.insecure && !clientCertificateOf(credential)
          ? new OneShotTrust(endpoint.caBundle, host)
          : undefined;
      return {
        options: { ...base, rejectUnauthorized: !endpoint.insecure },
        context,
        ...(trust ? { trust } : {}),
      };
    };
    const http2Over = (
      authority: string,
      connection: tls.ConnectionOptions,
      context: () => tls.SecureContext,
      dial?: Dial,
    ) =>
      options.http2 === false
        ? undefined
        : new Http2Sessions({
            authority,
            connect: tlsConnector(connection, context, dial, connectTimeoutMs),
            idleTimeoutMs,
          });
    const common = {
      cluster: target.name,
      key: target.connectionKey,
      authorization: authorizationFor(credential),
    };

    if (endpoint.type === 'ClusterProxy' && endpoint.trustModel === 'no-credential') {
      // The agent serves HTTP on these streams and authenticates itself (shared/tunnel/protocol.ts):
      // no TLS and no credential from here; the caller's identity goes as Impersonate-* (routes.ts).
      const tunnel = { dial: endpoint.dial };
      const agent = new http.Agent(base);
      dialWith(agent, () => tunnel.dial('impersonate'), undefined, connectTimeoutMs);
      const upstream: UpstreamParts = {
        cluster: target.name,
        key: target.connectionKey,
        agent,
        request: http.request,
        hostname: endpoint.serverName,
        port: 80,
        basePath: '',
        hostHeader: endpoint.serverName,
      };
      return { upstream, tunnel };
    }
    if (endpoint.type === 'ClusterProxy') {
      const secure = tlsSetupOf(endpoint.serverName);
      if (typeof secure === 'string') return secure;
      const tunnel = { dial: endpoint.dial };
      const agent = new https.Agent({ ...secure.options, servername: endpoint.serverName });
      const dial = () => tunnel.dial('relay');
      dialWith(agent, dial, secure.context, connectTimeoutMs);
      const upstream: UpstreamParts = {
        ...common,
        agent,
        request: https.request,
        hostname: endpoint.serverName,
        port: 443,
        basePath: '',
        hostHeader: endpoint.serverName,
      };
      const http2 = http2Over(
        `https://${endpoint.serverName}`,
        { ...serverNameOf(endpoint.serverName), rejectUnauthorized: !endpoint.insecure },
        secure.context,
        dial,
      );
      if (http2) upstream.http2 = http2;
      return { upstream, tunnel, ...(secure.trust ? { trust: secure.trust } : {}) };
    }

    let url: URL;
    try {
      url = new URL(endpoint.address);
    } catch {
      return `endpoint address "${endpoint.address}" is not a valid URL`;
    }
    const secure = url.protocol === 'https:';
    if (!secure && url.protocol !== 'http:') {
      return `endpoint address "${endpoint.address}" must be an https:// or http:// URL`;
    }
    const hostname = url.hostname.replace(BRACKETS, '');
    const port = Number(url.port) || (secure ? 443 : 80);
    const tlsSetup = secure ? tlsSetupOf(hostname) : undefined;
    if (typeof tlsSetup === 'string') return tlsSetup;
    const agent = tlsSetup ? new https.Agent(tlsSetup.options) : new http.Agent(base);
    let dial: Dial | undefined;
    if (endpoint.proxyUrl) {
      const proxy = parseProxyUrl(endpoint.proxyUrl);
      if (typeof proxy === 'string') return proxy;
      dial = () => connectThroughProxy(proxy, hostname, port);
      dialWith(agent, dial, tlsSetup?.context, connectTimeoutMs);
    } else {
      limitConnect(agent, tlsSetup?.context, connectTimeoutMs);
    }
    const http2 = tlsSetup
      ? http2Over(
          `https://${url.host}`,
          { host: hostname, port, ...serverNameOf(hostname), rejectUnauthorized: !endpoint.insecure },
          tlsSetup.context,
          dial,
        )
      : undefined;
    const upstream: UpstreamParts = {
      ...common,
      agent,
      request: secure ? https.request : http.request,
      hostname,
      port,
      basePath: basePathOf(url.pathname),
      hostHeader: url.host,
      ...(http2 ? { http2 } : {}),
    };
    return { upstream, ...(tlsSetup?.trust ? { trust: tlsSetup.trust } : {}) };
  }

  /** Destroys retired agents whose last request has finished. */
  function sweep(): void {
    for (const upstream of retired) {
      const { agent } = upstream;
      if (countSockets(agent.sockets) === 0 && countSockets(agent.requests) === 0) {
        agent.destroy();
        if (upstream.http2?.drained ?? true) retired.delete(upstream);
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
    if (countSockets(agent.sockets) > 0 || !(upstream.http2?.drained ?? true)) retired.add(upstream);
    else agent.destroy();
  }

  return {
    get(target) {
      const entry = entries.get(target.name);
      if (entry && entry.upstream.key === target.connectionKey) {
        if (entry.tunnel && target.endpoint?.type === 'ClusterProxy')
          entry.tunnel.dial = target.endpoint.dial;
        return entry.upstream;
      }
      if (!target.endpoint) return target.problem ?? `cluster "${target.name}" has no endpoint`;
      const created = create(target, target.endpoint);
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
    forget(cluster) {
      const entry = entries.get(cluster);
      if (!entry) return;
      entries.delete(cluster);
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
      const add = ({ agent, http2 }: Upstream, oneShotOpen = 0): number => {
        stats.activeSockets += countSockets(agent.sockets) + oneShotOpen;
        stats.idleSockets += countSockets(agent.freeSockets);
        stats.queuedRequests += countSockets(agent.requests);
        const sessions = http2?.stats() ?? { sessions: 0, streams: 0 };
        stats.http2Sessions += sessions.sessions;
        stats.http2Streams += sessions.streams;
        return (
          countSockets(agent.sockets) + countSockets(agent.freeSockets) + sessions.sessions + oneShotOpen
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
      }
      entries.clear();
      retired.clear();
    },
  };
}

/**
 * The TLS context of a pool: its CA bundle (else the system roots) and the client certificate, if any.
 * Throws for a CA, certificate or key OpenSSL cannot load.
 */
function secureContextFor(endpoint: Endpoint, credential: ClusterTarget['credential']): tls.SecureContext {
  const clientCert = clientCertificateOf(credential) ?? {};
  const ca = endpoint.caBundle;
  return tls.createSecureContext({ ...(ca ? { ca } : {}), ...clientCert });
}

// A Dynamic credential may also be a client certificate (an exec plugin's clientCertificateData).
function clientCertificateOf(
  credential: ClusterTarget['credential'],
): { cert: string; key?: string } | undefined {
  return (credential?.type === 'X509Certificate' || credential?.type === 'Dynamic') && credential.certificate
    ? { cert: credential.certificate, key: credential.privateKey }
    : undefined;
}

function countSockets(dict: NodeJS.ReadOnlyDict<readonly unknown[]>): number {
  let n = 0;
  for (const list of Object.values(dict)) n += list?.length ?? 0;
  return n;
}

/** How long a pool keeps its TLS context after its last new connection. */
const CONTEXT_IDLE_MS = 30_000;

/**
 * A pool's TLS context, built once and reused by every connection the pool opens, rather than built
 * by each connection from ca/cert/key as an Agent does: a SecureContext (OpenSSL's SSL_CTX) costs
 * about 210 to 260 µs of CPU to build, and a watch ended by its caller takes its connection with it,
 * so each watch start paid it (docs/benchmarks.md). It is dropped after CONTEXT_IDLE_MS without a new
 * connection (and rebuilt on the next), because each holds about 37 KB of native memory.
 *
 * A one-shot connection (a probe of a cluster without traffic) of a pool trusted by its CA bundle alone
 * uses one context shared by all such pools (one-shot-tls.ts). Of any other pool (a client
 * certificate, the system trust store, or a certificate the gateway did not vouch for), it uses the
 * held context if there is one and otherwise a fresh one that is not kept: a cluster probed every
 * 40 s (1,000 clusters at 25 probes a second) would rebuild its context at every probe anyway, and
 * holding it 30 s of every 40 kept about 750 of them, 28 MB, alive for nothing.
 *
 * `first`, the context built when the pool was created (to find a CA or key OpenSSL cannot load at
 * once), is kept only if a regular connection takes it in the same turn of the event loop: a proxied
 * request creates its pool and connects at once, while a pool created by a health probe may never
 * open a regular connection. Holding those for 30 s meant, after a restart with 1,000 clusters,
 * 1,000 contexts built within a minute and held together (38 MB), memory the process then kept.
 */
function heldContext(first: tls.SecureContext, build: () => tls.SecureContext): ContextGetter {
  let context: tls.SecureContext | undefined = first;
  let held = false;
  const timer = setTimeout(() => {
    context = undefined;
  }, CONTEXT_IDLE_MS).unref();
  setImmediate(() => {
    if (!held) context = undefined;
  }).unref();
  return (oneShot = false) => {
    // A CA or key that loaded once loads again; should it not, the connection fails with the error.
    if (oneShot) return context ?? build();
    context ??= build();
    held = true;
    timer.refresh();
    return context;
  };
}

/**
 * Bounds a direct connection's TCP connect plus TLS handshake: without it a
 * black-holed address would hang for the kernel's SYN retry time (minutes).
 * Reused keep-alive sockets never come through here. For https, also hands
 * the pool's TLS context to the connection.
 */
function limitConnect(agent: http.Agent, context: ContextGetter | undefined, timeoutMs: number): void {
  const createConnection = agent.createConnection.bind(agent);
  agent.createConnection = (options, callback) => {
    if (context) (options as tls.ConnectionOptions).secureContext = contextOf(options, context);
    const socket = createConnection(options, callback);
    if (socket) deadline(socket, context ? 'secureConnect' : 'connect', timeoutMs);
    return socket;
  };
}

/**
 * Makes the agent open its connections with an async dialer (agent tunnel or
 * CONNECT proxy) and, for https (a TLS context given), run TLS over the dialled
 * stream. Node's Agent accepts the `(err, socket)` callback form for exactly this.
 */
function dialWith(
  agent: http.Agent,
  dial: Dial,
  context: ContextGetter | undefined,
  timeoutMs: number,
): void {
  agent.createConnection = (options, callback) => {
    dialWithin(dial, timeoutMs).then(
      (stream) => {
        if (!context) {
          callback?.(null, stream);
          return;
        }
        const socket = tls.connect({
          ...(options as tls.ConnectionOptions),
          secureContext: contextOf(options, context),
          socket: stream,
        });
        deadline(socket, 'secureConnect', timeoutMs);
        callback?.(null, socket);
      },
      (err: Error) => callback?.(err, undefined as unknown as Duplex),
    );
    return undefined;
  };
}

/** Runs a dial with a deadline; a stream that arrives after it is closed unused. */
function dialWithin(dial: Dial, timeoutMs: number): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(timeoutError(timeoutMs));
    }, timeoutMs);
    dial().then(
      (stream) => {
        if (late) {
          stream.destroy();
          return;
        }
        clearTimeout(timer);
        resolve(stream);
      },
      (err: Error) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/** TLS's server name for a host: none for an IP address (RFC 6066 forbids it), as https.Agent does. */
function serverNameOf(host: string): { servername?: string } {
  return net.isIP(host) ? {} : { servername: host };
}

/**
 * Opens one TLS connection for an HTTP/2 session, offering ALPN h2 and http/1.1: directly, or over
 * a dialled stream (egress proxy, agent tunnel). The deadline covers the dial and the handshake.
 * Each connection offers the TLS session of the last one that completed its handshake (verified),
 * as https.Agent does for its own: a cluster whose session idled out resumes instead of paying a
 * full handshake and the certificate check again.
 */
function tlsConnector(
  connection: tls.ConnectionOptions,
  context: () => tls.SecureContext,
  dial: Dial | undefined,
  timeoutMs: number,
): () => Promise<tls.TLSSocket> {
  let lastSession: Buffer | undefined;
  const handshake = (stream: Duplex | undefined, waitMs: number) =>
    new Promise<tls.TLSSocket>((resolve, reject) => {
      const opened = tls.connect({
        ...connection,
        ...(stream ? { socket: stream } : {}),
        ...(lastSession ? { session: lastSession } : {}),
        secureContext: context(),
        ALPNProtocols: ['h2', 'http/1.1'],
      });
      deadline(opened, 'secureConnect', waitMs, timeoutMs);
      // Kept only from a connection whose handshake (and so its certificate check) succeeded.
      let early: Buffer | undefined;
      let verified = false;
      opened.on('session', (session: Buffer) => {
        if (verified) lastSession = session;
        else early = session;
      });
      const fail = (err: Error) => {
        opened.destroy();
        reject(err);
      };
      opened.once('error', fail);
      opened.once('secureConnect', () => {
        opened.removeListener('error', fail);
        verified = true;
        if (early) lastSession = early;
        if (!stream) {
          // Go sets TCP_NODELAY on every connection (watch events go out as they come), and
          // keepalive probes find a peer that vanished.
          opened.setNoDelay(true);
          opened.setKeepAlive(true, 15_000);
        }
        resolve(opened);
      });
    });
  return async () => {
    if (!dial) return handshake(undefined, timeoutMs);
    const started = performance.now();
    const stream = await dialWithin(dial, timeoutMs);
    // One deadline for the dial and the handshake together.
    return handshake(stream, Math.max(1, timeoutMs - (performance.now() - started)));
  };
}

/**
 * Opens a connection the way the pool's Agent opens its own (its createConnection, with the dial,
 * TLS context and deadline the pool set up), without a request of the Agent's: the caller writes
 * one request and reads its answer by hand (health/healthz-once.ts says why that is cheaper).
 * The options are those the Agent would pass, its own merged over the request's, and carry the
 * Agent's key for them: https.Agent resumes the TLS session it cached under that key and caches
 * the new one, as for the connections it opens itself (a resumed handshake costs about 400 µs
 * less, docs/benchmarks.md). `tlsOptions` replace the pool's TLS context and verification, and
 * their session the Agent's (one-shot-tls.ts).
 */
function connectOnce(
  agent: http.Agent,
  host: string,
  port: number,
  count: { open: number },
  tlsOptions?: OneShotTlsOptions,
): Promise<Duplex> {
  const agentOptions = (agent as http.Agent & { options: http.AgentOptions }).options;
  const options: net.NetConnectOpts & Record<string | symbol, unknown> = {
    host,
    port,
    ...serverNameOf(host),
    ...agentOptions,
    ...tlsOptions,
    [oneShotConnection]: true,
  };
  // With tlsOptions, the caller keeps the TLS session (one-shot-tls.ts): the Agent must not.
  if (!tlsOptions) options._agentKey = agent.getName(options as http.ClientRequestArgs);
  return new Promise((resolve, reject) => {
    const opened = (socket: Duplex) => {
      count.open++;
      socket.once('close', () => count.open--);
      resolve(socket);
    };
    // Returned at once for a direct connection (then the callback is net's 'connect' listener,
    // called without arguments); called back for a dialled one (dialWith).
    let returned: Duplex | undefined;
    returned =
      agent.createConnection(options, (err, socket) => {
        if (returned) return;
        if (err) reject(err);
        else opened(socket);
      }) ?? undefined;
    if (returned) opened(returned);
  });
}

/** The context a connection was given (one-shot-tls.ts), else the pool's. */
function contextOf(options: object | undefined, context: ContextGetter): tls.SecureContext {
  const own = options as
    | { [oneShotConnection]?: boolean; [connectionContext]?: tls.SecureContext }
    | undefined;
  return own?.[connectionContext] ?? context(own?.[oneShotConnection] === true);
}

/**
 * Destroys the socket with a timeout error unless `readyEvent` comes first. `reportedMs` is the
 * deadline the error names when this wait is the rest of a longer one.
 */
function deadline(socket: Duplex, readyEvent: string, waitMs: number, reportedMs = waitMs): void {
  const timer = setTimeout(() => socket.destroy(timeoutError(reportedMs)), waitMs);
  const clear = () => clearTimeout(timer);
  socket.once(readyEvent, clear);
  socket.once('close', clear);
}

function timeoutError(timeoutMs: number): Error {
  return Object.assign(new Error(`timed out after ${timeoutMs} ms opening a connection`), {
    code: 'ETIMEDOUT',
  });
}
