/**
 * Kept-alive HTTP/1.1 connections to one cluster for the requests whose response body passes
 * through the gateway untouched (shared/forward/passthrough.ts): the caller writes the request and
 * reads the response on the socket itself, so Node's HTTP client (and its Agent) is not in the way.
 *
 * Why a pool of its own and not the pool's https.Agent: an Agent's sockets belong to Node's
 * ClientRequest, whose parser consumes every byte; the pass-through needs the body's bytes as they
 * arrived (measured: a 10 MB LIST relayed this way costs the gateway about a third less CPU than
 * over HTTP/2, docs/benchmarks-log.md "Bodies passed through").
 *
 * Idle connections are kept last-in first-out, at most MAX_IDLE, each for idleTimeoutMs (below
 * kube-apiserver's 90 s), and closed when the server closes them.
 */
import type tls from 'node:tls';

/** Idle connections kept per cluster: enough for the callers of a busy cluster, few at 1,000 clusters. */
const MAX_IDLE = 8;

export interface Http1ConnectionsOptions {
  /** Opens one TLS connection offering ALPN http/1.1 only, resolved after the handshake. */
  connect: () => Promise<tls.TLSSocket>;
  idleTimeoutMs: number;
}

export interface Http1Connection {
  socket: tls.TLSSocket;
  /** It carried a request before: a failure before any answer may be the server having closed it. */
  reused: boolean;
}

export class Http1Connections {
  readonly #o: Http1ConnectionsOptions;
  readonly #idle: { socket: tls.TLSSocket; timer: NodeJS.Timeout; onClose: () => void }[] = [];
  readonly #inUse = new Set<tls.TLSSocket>();
  #connecting = 0;
  #closed = false;

  constructor(options: Http1ConnectionsOptions) {
    this.#o = options;
  }

  /** An idle connection if one is open, else a new one. */
  async acquire(): Promise<Http1Connection> {
    if (this.#closed) throw new Error('the connection pool was closed');
    const idle = this.#idle.pop();
    if (idle) {
      clearTimeout(idle.timer);
      idle.socket.off('close', idle.onClose);
      idle.socket.off('error', idle.onClose);
      idle.socket.off('data', idle.onClose);
      this.#inUse.add(idle.socket);
      return { socket: idle.socket, reused: true };
    }
    this.#connecting++;
    try {
      const socket = await this.#o.connect();
      if (this.#closed) {
        socket.destroy();
        throw new Error('the connection pool was closed');
      }
      this.#inUse.add(socket);
      return { socket, reused: false };
    } finally {
      this.#connecting--;
    }
  }

  /**
   * Gives a connection back after its response was read to the end. `reusable` false (the server
   * said close, or sent more than the response) destroys it.
   */
  release(socket: tls.TLSSocket, reusable: boolean): void {
    this.#inUse.delete(socket);
    if (!reusable || this.#closed || socket.destroyed || this.#idle.length >= MAX_IDLE) {
      socket.destroy();
      return;
    }
    const entry = {
      socket,
      timer: setTimeout(() => socket.destroy(), this.#o.idleTimeoutMs).unref(),
      onClose: () => {
        clearTimeout(entry.timer);
        const at = this.#idle.indexOf(entry);
        if (at >= 0) this.#idle.splice(at, 1);
        socket.destroy();
      },
    };
    // An idle connection that the server closes, that fails, or on which bytes arrive unasked
    // (they would be read as the next request's answer) leaves the pool at once.
    socket.once('close', entry.onClose);
    socket.once('error', entry.onClose);
    socket.once('data', entry.onClose);
    this.#idle.push(entry);
  }

  /** A connection that failed or was abandoned mid-response: destroyed, never reused. */
  discard(socket: tls.TLSSocket): void {
    this.#inUse.delete(socket);
    socket.destroy();
  }

  stats(): { active: number; idle: number } {
    return { active: this.#inUse.size, idle: this.#idle.length };
  }

  /** Whether nothing is open or opening (a retired pool is done). */
  get drained(): boolean {
    return this.#inUse.size === 0 && this.#connecting === 0 && this.#idle.length === 0;
  }

  /** No new requests; idle connections close now, busy ones when their response is done. */
  retire(): void {
    this.#closed = true;
    for (const entry of this.#idle.splice(0)) {
      clearTimeout(entry.timer);
      entry.socket.destroy();
    }
  }

  /** Closes every connection now, busy ones included (the pools are shutting down). */
  destroy(): void {
    this.retire();
    for (const socket of this.#inUse) socket.destroy();
    this.#inUse.clear();
  }
}
