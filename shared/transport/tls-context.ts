/**
 * A pool's TLS: the context every connection of the pool takes (built once per pool, held while it
 * is used), the Agent's verification options, and the one-shot trust of a pool trusted by its CA
 * bundle alone (one-shot-tls.ts).
 */
import type http from 'node:http';
import type https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { connectionContext, OneShotTrust } from './one-shot-tls.ts';
import { clientCertificateOf, type TransportCredential, type TransportTarget } from './target.ts';

/**
 * A request option (a symbol, so it never reaches the wire) that marks a request whose connection is
 * used once, e.g. a health probe of a cluster without traffic: it takes the pool's TLS context if
 * one is held, and otherwise builds one that is not kept (see heldContext).
 */
export const oneShotConnection: unique symbol = Symbol('oneShotConnection');

/** The pool's TLS context; `oneShot` for a connection that will not be followed by others soon. */
export type ContextGetter = (oneShot?: boolean) => tls.SecureContext;

/** What a TLS pool is set up with, once. */
export interface PoolTls {
  /** The Agent's options: the pool's own, with verification as the endpoint asks. */
  options: https.AgentOptions;
  context: ContextGetter;
  trust?: OneShotTrust;
}

/**
 * The TLS setup of a pool whose server must present a certificate for `host` (the name the
 * cluster's certificate must carry), or the problem every connection would have failed with,
 * said once per pool instead (answered as a 503).
 */
export function poolTls(
  target: TransportTarget,
  server: { caBundle?: string; insecure: boolean },
  host: string,
  base: http.AgentOptions,
): PoolTls | string {
  const credential = target.credential;
  let context: ContextGetter;
  try {
    context = heldContext(secureContextFor(server.caBundle, credential), () =>
      secureContextFor(server.caBundle, credential),
    );
  } catch (err) {
    return `cannot load the TLS configuration of cluster "${target.name}": ${err instanceof Error ? err.message : String(err)}`;
  }
  const trust =
    server.caBundle && !server.insecure && !clientCertificateOf(credential)
      ? new OneShotTrust(server.caBundle, host)
      : undefined;
  return {
    options: { ...base, rejectUnauthorized: !server.insecure },
    context,
    ...(trust ? { trust } : {}),
  };
}

/**
 * The TLS context of a pool: its CA bundle (else the system roots) and the client certificate, if any.
 * Throws for a CA, certificate or key OpenSSL cannot load.
 */
function secureContextFor(
  ca: string | undefined,
  credential: TransportCredential | undefined,
): tls.SecureContext {
  const clientCert = clientCertificateOf(credential) ?? {};
  return tls.createSecureContext({ ...(ca ? { ca } : {}), ...clientCert });
}

/** How long a pool keeps its TLS context after its last new connection. */
const CONTEXT_IDLE_MS = 30_000;

/**
 * A pool's TLS context, built once and reused by every connection the pool opens, rather than built
 * by each connection from ca/cert/key as an Agent does: a SecureContext (OpenSSL's SSL_CTX) costs
 * about 210 to 260 µs of CPU to build, and a watch ended by its caller takes its connection with it,
 * so each watch start paid it (docs/benchmarks-log.md). It is dropped after CONTEXT_IDLE_MS without a new
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

/** The context a connection was given (one-shot-tls.ts), else the pool's. */
export function contextOf(options: object | undefined, context: ContextGetter): tls.SecureContext {
  const own = options as
    | { [oneShotConnection]?: boolean; [connectionContext]?: tls.SecureContext }
    | undefined;
  return own?.[connectionContext] ?? context(own?.[oneShotConnection] === true);
}

/** TLS's server name for a host: none for an IP address (RFC 6066 forbids it), as https.Agent does. */
export function serverNameOf(host: string): { servername?: string } {
  return net.isIP(host) ? {} : { servername: host };
}
