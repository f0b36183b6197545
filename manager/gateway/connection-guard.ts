/**
 * Bounds on the gateway's client connections, so that no client, however
 * many connections it opens, can hold memory the gateway cannot get back or
 * keep the kube-aggregator out:
 *
 * - at most `maxConnections` are open (Node closes further ones at accept);
 * - a connection that completes its TLS handshake must send a whole request
 *   within `requestHeaderTimeoutMs`. Node bounds a request's headers once
 *   its first byte has arrived (headersTimeout) and the idle time after a
 *   response (keepAliveTimeout), but nothing bounds a connection that never
 *   sends anything;
 * - once nine in ten of the slots are taken, each new connection evicts the
 *   oldest one that has not sent a request yet. A flood of idle connections
 *   then churns among itself, while callers that send a request at once (the
 *   aggregator, kubectl) keep getting in: without eviction, the cap itself
 *   would be the denial of service.
 *
 * Requests are noticed through the server's 'request' and 'upgrade' events;
 * watching the socket's 'data' instead would turn off the HTTP parser's
 * direct reads from the TLS handle for every connection.
 */
import type { IncomingMessage } from 'node:http';
import type { Server } from 'node:https';
import type { TLSSocket } from 'node:tls';

export interface ConnectionLimits {
  /** Open connections at most. */
  maxConnections: number;
  /** TLS handshake, the wait for a first request, and the headers of each request. */
  requestHeaderTimeoutMs: number;
  /** Keep-alive idle time between requests. */
  idleConnectionTimeoutMs: number;
}

export const defaultConnectionLimits: ConnectionLimits = {
  maxConnections: 4096,
  requestHeaderTimeoutMs: 32_000,
  idleConnectionTimeoutMs: 65_000,
};

/** The https.Server options that carry the limits; pass them to createServer. */
export function serverTimeouts(limits: ConnectionLimits) {
  return {
    handshakeTimeout: limits.requestHeaderTimeoutMs,
    headersTimeout: limits.requestHeaderTimeoutMs,
    keepAliveTimeout: limits.idleConnectionTimeoutMs,
    // Watches and logs -f stay open for as long as the client wants.
    requestTimeout: 0,
    // How often Node looks for requests past headersTimeout (default 30 s).
    connectionsCheckingInterval: Math.min(limits.requestHeaderTimeoutMs, 1000),
  };
}

export function guardConnections(server: Server, limits: ConnectionLimits): void {
  server.maxConnections = limits.maxConnections;
  const evictAt = Math.max(1, Math.floor(limits.maxConnections * 0.9));
  let open = 0;
  // Connections that have not sent a request yet, oldest first (Map keeps insertion order).
  const waiting = new Map<TLSSocket, NodeJS.Timeout>();
  const stopWaiting = (socket: TLSSocket) => {
    const timer = waiting.get(socket);
    if (timer === undefined) return;
    clearTimeout(timer);
    waiting.delete(socket);
  };

  server.on('connection', (socket) => {
    open++;
    socket.once('close', () => open--);
  });
  server.on('secureConnection', (socket: TLSSocket) => {
    if (open >= evictAt) {
      const oldest = waiting.keys().next().value;
      if (oldest) {
        stopWaiting(oldest);
        oldest.destroy();
      }
    }
    const timer = setTimeout(() => {
      waiting.delete(socket);
      socket.destroy();
    }, limits.requestHeaderTimeoutMs);
    timer.unref();
    waiting.set(socket, timer);
    socket.once('close', () => stopWaiting(socket));
  });
  const requested = (req: IncomingMessage) => stopWaiting(req.socket as TLSSocket);
  server.on('request', requested);
  server.on('upgrade', requested);
}
