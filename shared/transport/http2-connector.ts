/**
 * The HTTP/2 sessions of a TLS pool (http2-sessions.ts) and the connections they run on.
 */
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { type Dial, deadline, dialWithin } from './deadline.ts';
import { Http1Connections } from './http1-connections.ts';
import { Http2Sessions } from './http2-sessions.ts';
import type { PoolSettings } from './upstream.ts';

/**
 * The pool's HTTP/2 sessions to `authority`, each connection made with `connection` and the pool's
 * context, directly or over `dial`; none when the pools do not offer HTTP/2.
 */
export function http2Over(
  settings: PoolSettings,
  authority: string,
  connection: tls.ConnectionOptions,
  context: () => tls.SecureContext,
  dial?: Dial,
): Http2Sessions | undefined {
  return settings.http2
    ? new Http2Sessions({
        authority,
        connect: tlsConnector(connection, context, dial, settings.connectTimeoutMs, ['h2', 'http/1.1']),
        idleTimeoutMs: settings.idleTimeoutMs,
      })
    : undefined;
}

/** The pool's kept-alive HTTP/1.1 connections for bodies passed through, made as the sessions' are. */
export function http1Over(
  settings: PoolSettings,
  connection: tls.ConnectionOptions,
  context: () => tls.SecureContext,
  dial?: Dial,
): Http1Connections {
  return new Http1Connections({
    connect: tlsConnector(connection, context, dial, settings.connectTimeoutMs, ['http/1.1']),
    idleTimeoutMs: settings.idleTimeoutMs,
  });
}

/**
 * Opens one TLS connection offering `alpn` (h2 and http/1.1 for an HTTP/2 session, http/1.1 alone
 * for a pass-through connection): directly, or over a dialled stream (egress proxy, agent tunnel). The deadline covers the dial and the handshake.
 * Each connection offers the TLS session of the last one that completed its handshake (verified),
 * as https.Agent does for its own: a cluster whose session idled out resumes instead of paying a
 * full handshake and the certificate check again.
 */
function tlsConnector(
  connection: tls.ConnectionOptions,
  context: () => tls.SecureContext,
  dial: Dial | undefined,
  timeoutMs: number,
  alpn: string[],
): () => Promise<tls.TLSSocket> {
  let lastSession: Buffer | undefined;
  const handshake = (stream: Duplex | undefined, waitMs: number) =>
    new Promise<tls.TLSSocket>((resolve, reject) => {
      const opened = tls.connect({
        ...connection,
        ...(stream ? { socket: stream } : {}),
        ...(lastSession ? { session: lastSession } : {}),
        secureContext: context(),
        ALPNProtocols: alpn,
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
