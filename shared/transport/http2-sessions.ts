/**
 * HTTP/2 to a cluster, for every proxied request that is not an upgrade, as
 * Go's transport (and so the Go original) talks to kube-apiserver.
 *
 * Why, measured (docs/benchmarks-log.md, "HTTP/2 to the cluster"): on HTTP/1.1 a
 * response in flight can only be abandoned by closing its connection, so
 * every watch its caller ends costs the next one a TCP + TLS handshake (about
 * 2 ms of CPU); on HTTP/2 it is a stream reset (about 0.2 ms). A large body
 * also costs less to receive as DATA frames than as chunks through llhttp.
 * Upgrades (exec, attach, port-forward over SPDY or WebSocket) need HTTP/1.1
 * and keep the pool's Agent.
 *
 * The protocol is the cluster's choice: the first connection offers ALPN
 * `h2` and `http/1.1`, and a cluster that answers `http/1.1` (or nothing) is
 * remembered as such for the life of the pool, whose requests then go to the
 * Agent. Sessions are opened on demand, one more whenever every open one has
 * reached the server's SETTINGS_MAX_CONCURRENT_STREAMS (a thousand watches
 * never queue behind each other), and closed once idle.
 */
import http2 from 'node:http2';
import type tls from 'node:tls';

/**
 * Per-stream receive window: a 514 KB LIST arrives without waiting for a WINDOW_UPDATE, and a
 * caller that stops reading holds at most this much of the gateway's memory per stream.
 */
const STREAM_WINDOW_BYTES = 1 << 20;
/** Connection receive window, shared by every stream of the session: 16 stalled readers' worth. */
const CONNECTION_WINDOW_BYTES = 16 << 20;
/**
 * Node refuses new streams (ENHANCE_YOUR_CALM) once a session buffers more than this (in MB; its
 * default, 10, is below the connection window): above it, so the windows are the bound.
 */
const MAX_SESSION_MEMORY_MB = 32;
/** Streams assumed per session until the server's SETTINGS arrive (RFC 9113 §6.5.2 recommends at least 100). */
const INITIAL_MAX_STREAMS = 100;
/**
 * How long a session that has stopped taking streams and has none left may wait for the server to
 * close the connection. Node ends its side gracefully and then waits for the peer's close, which a
 * server that sent GOAWAY may never send (measured with Node's own http2 server): without this
 * bound the socket and the session's entry would stay for as long as the process runs.
 */
const CLOSE_LINGER_MS = 2_000;

export type UpstreamProtocol = 'unknown' | 'h2' | 'http/1.1';

export type StreamResult =
  | { stream: http2.ClientHttp2Stream }
  /** The cluster does not speak HTTP/2: use the pool's Agent. */
  | { http1: true }
  | { error: Error };

export interface Http2SessionsOptions {
  /** `https://host:port` of the cluster (or of the tunnel's TLS peer). */
  authority: string;
  /** Opens a TLS connection offering ALPN h2 and http/1.1, resolved after the handshake. */
  connect: () => Promise<tls.TLSSocket>;
  /** A session without streams for this long is closed. */
  idleTimeoutMs: number;
}

interface Session {
  session: http2.ClientHttp2Session;
  socket: tls.TLSSocket;
  streams: number;
  maxStreams: number;
  /** False once the session is going away (GOAWAY, closing): its streams finish, no new ones. */
  usable: boolean;
  idle?: NodeJS.Timeout;
  /** Set once the connection has been given CLOSE_LINGER_MS to close. */
  lingering?: boolean;
}

export interface Http2SessionStats {
  sessions: number;
  streams: number;
}

export class Http2Sessions {
  readonly #o: Http2SessionsOptions;
  #protocol: UpstreamProtocol = 'unknown';
  /** Every session until it has closed, going-away ones included (they still carry streams). */
  readonly #open = new Set<Session>();
  /** Requests waiting for a session being connected. */
  #waiting: { headers: http2.OutgoingHttpHeaders; endStream: boolean; done: (r: StreamResult) => void }[] =
    [];
  #connecting = false;
  #closed = false;

  constructor(options: Http2SessionsOptions) {
    this.#o = options;
  }

  get protocol(): UpstreamProtocol {
    return this.#protocol;
  }

  /**
   * Opens a stream for a request on a session with a free slot, connecting one if needed. Calls
   * back synchronously when a session is open (the hot path), else once the connection is made.
   */
  request(headers: http2.OutgoingHttpHeaders, endStream: boolean, done: (r: StreamResult) => void): void {
    if (this.#closed) {
      done({ error: new Error('the connection pool was closed') });
      return;
    }
    if (this.#protocol === 'http/1.1') {
      done({ http1: true });
      return;
    }
    const entry = this.#free();
    if (entry) {
      done(this.#openStream(entry, headers, endStream));
      return;
    }
    this.#waiting.push({ headers, endStream, done });
    if (!this.#connecting) this.#connect();
  }

  /** Whether a session with a free slot is open: a health probe then costs a stream, not a connection. */
  hasFreeSession(): boolean {
    return this.#free() !== undefined;
  }

  stats(): Http2SessionStats {
    let streams = 0;
    for (const entry of this.#open) streams += entry.streams;
    return { sessions: this.#open.size, streams };
  }

  /** Whether no session is open and none is being opened (a retired pool is done). */
  get drained(): boolean {
    return this.#open.size === 0 && !this.#connecting;
  }

  /** Takes no new streams; each session closes once its streams have finished. */
  retire(): void {
    this.#closed = true;
    for (const entry of this.#open) {
      entry.session.close();
      stopTaking(entry);
    }
    this.#fail(new Error('the connection pool was replaced'));
  }

  /** Destroys every session and its streams at once. */
  destroy(): void {
    this.#closed = true;
    for (const entry of this.#open) entry.session.destroy();
    this.#open.clear();
    this.#fail(new Error('the connection pool was closed'));
  }

  #free(): Session | undefined {
    for (const entry of this.#open) {
      if (
        entry.usable &&
        entry.streams < entry.maxStreams &&
        !entry.session.closed &&
        !entry.session.destroyed
      )
        return entry;
    }
    return undefined;
  }

  #openStream(entry: Session, headers: http2.OutgoingHttpHeaders, endStream: boolean): StreamResult {
    try {
      return { stream: this.#start(entry, headers, endStream) };
    } catch (err) {
      // An invalid header block, or a session that went away this very tick: never a throw out of a
      // callback (the waiting requests are served from a promise).
      return { error: err instanceof Error ? err : new Error(String(err)) };
    }
  }

  #start(entry: Session, headers: http2.OutgoingHttpHeaders, endStream: boolean): http2.ClientHttp2Stream {
    const stream = entry.session.request(headers, { endStream });
    entry.streams++;
    if (entry.idle) {
      clearTimeout(entry.idle);
      entry.idle = undefined;
    }
    stream.once('close', () => {
      entry.streams--;
      if (entry.streams > 0) return;
      if (!entry.usable) lingerThenDestroy(entry);
      else
        entry.idle = setTimeout(() => {
          entry.session.close();
          stopTaking(entry);
        }, this.#o.idleTimeoutMs).unref();
    });
    return stream;
  }

  #connect(): void {
    this.#connecting = true;
    this.#o.connect().then(
      (socket) => {
        this.#connecting = false;
        if (this.#closed) {
          socket.destroy();
          return;
        }
        if (socket.alpnProtocol !== 'h2') {
          // One handshake spent learning it; from now on the Agent's own connections serve this pool.
          socket.destroy();
          this.#protocol = 'http/1.1';
          for (const waiting of this.#waiting.splice(0)) waiting.done({ http1: true });
          return;
        }
        this.#protocol = 'h2';
        this.#adopt(socket);
      },
      (err: Error) => {
        this.#connecting = false;
        this.#fail(err);
      },
    );
  }

  #adopt(socket: tls.TLSSocket): void {
    const session = http2.connect(this.#o.authority, {
      createConnection: () => socket,
      settings: { enablePush: false, initialWindowSize: STREAM_WINDOW_BYTES },
      maxSessionMemory: MAX_SESSION_MEMORY_MB,
    });
    const entry: Session = { session, socket, streams: 0, maxStreams: INITIAL_MAX_STREAMS, usable: true };
    this.#open.add(entry);
    const widen = () => session.setLocalWindowSize(CONNECTION_WINDOW_BYTES);
    if (session.connecting) session.once('connect', widen);
    else widen();
    session.on('remoteSettings', (settings) => {
      entry.maxStreams = settings.maxConcurrentStreams ?? INITIAL_MAX_STREAMS;
      this.#serveWaiting();
    });
    const goingAway = () => {
      stopTaking(entry);
      // Requests that were waiting for a slot on this one get a new session.
      if (this.#waiting.length > 0 && !this.#connecting && !this.#closed) this.#serveWaiting();
    };
    // A GOAWAY (kube-apiserver's --goaway-chance, or its shutdown) lets streams in flight finish
    // and sends new ones to another session.
    session.once('goaway', goingAway);
    session.once('close', () => {
      goingAway();
      this.#open.delete(entry);
    });
    // Session errors reach every stream as its own error, answered there.
    session.on('error', () => {});
    // The socket is already connected: settings and the first streams go out in one write.
    this.#serveWaiting();
  }

  #serveWaiting(): void {
    while (this.#waiting.length > 0) {
      const entry = this.#free();
      if (!entry) {
        if (!this.#connecting && !this.#closed) this.#connect();
        return;
      }
      const waiting = this.#waiting.shift()!;
      waiting.done(this.#openStream(entry, waiting.headers, waiting.endStream));
    }
  }

  #fail(err: Error): void {
    for (const waiting of this.#waiting.splice(0)) waiting.done({ error: err });
  }
}

/** No new streams on this session; once it has none, the server gets CLOSE_LINGER_MS to close it. */
function stopTaking(entry: Session): void {
  entry.usable = false;
  if (entry.idle) clearTimeout(entry.idle);
  if (entry.streams === 0) lingerThenDestroy(entry);
}

/** Gives the server CLOSE_LINGER_MS to close a finished session's connection, then closes it here. */
function lingerThenDestroy(entry: Session): void {
  if (entry.lingering || entry.socket.destroyed) return;
  entry.lingering = true;
  const timer = setTimeout(() => entry.socket.destroy(), CLOSE_LINGER_MS).unref();
  entry.socket.once('close', () => clearTimeout(timer));
}
