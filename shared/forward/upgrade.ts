/**
 * Forwards protocol upgrades — exec, attach and port-forward — for the HTTP
 * server's 'upgrade' event, like apimachinery's UpgradeAwareHandler.
 *
 * Any method and any upgrade token are forwarded as they came: kubectl 1.30+
 * sends `GET` + `Upgrade: websocket` (`v5.channel.k8s.io`,
 * `SPDY/3.1+portforward.k8s.io`) and falls back to `POST` + `Upgrade: SPDY/3.1`
 * when the cluster refuses. That fallback only works if a refusal (400, 403)
 * reaches kubectl as an ordinary HTTP response, which is why non-101 answers
 * are relayed verbatim instead of turned into a gateway error.
 *
 * After a 101 the gateway is a byte pipe: it never parses WebSocket or SPDY
 * frames, so every channel and subprotocol works unchanged.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { UserInfo } from '../identity/user.ts';
import type { Upstream } from '../transport/upstream.ts';
import { type ProxyAccess, type ProxyContext, reportCompletion } from './context.ts';
import { downstreamHeaders } from './headers.ts';
import { errorMessage, refusal, unreachable, writeStatusToSocket } from './reply.ts';
import { openUpstreamRequest } from './upstream-request.ts';

/** Refusals are small Status objects; anything bigger than this is not relayed. */
const MAX_REFUSAL_BODY = 1 << 20;
/** After one side closes, how long the other may take to flush what it still holds. */
const CLOSE_GRACE_MS = 5_000;

/**
 * @param upstream the cluster's pool, or why it cannot be reached (answered as a 503)
 * @param upstreamPath path and raw query relative to the cluster's endpoint (parseProxyPath)
 * @param head the first bytes after the request headers, from the 'upgrade' event
 */
export function forwardUpgrade(
  context: ProxyContext,
  req: IncomingMessage,
  socket: Duplex,
  cluster: string,
  upstream: Upstream | string,
  upstreamPath: string,
  head: Buffer,
  identity?: UserInfo,
  access?: ProxyAccess,
): void {
  const started = performance.now();
  const done = (code: number, error?: string) =>
    reportCompletion(context, cluster, req, upstreamPath, started, code, true, error, access);
  // Until the upstream answers, a caller error only means the caller left.
  const ignore = () => {};
  socket.on('error', ignore);

  if (typeof upstream === 'string') {
    writeStatusToSocket(socket, unreachable(cluster, upstream));
    done(503, upstream);
    return;
  }

  let up: ReturnType<typeof upstream.request>;
  try {
    up = openUpstreamRequest(upstream, req, upstreamPath, { identity, upgrade: true });
  } catch (err) {
    const status = refusal(cluster, err);
    writeStatusToSocket(socket, status);
    done(status.code, errorMessage(err));
    return;
  }

  const abandon = () => up.destroy();
  socket.once('close', abandon);

  up.once('upgrade', (upRes, upSocket, upHead) => {
    socket.off('close', abandon);
    socket.off('error', ignore);
    if (socket.destroyed) {
      upSocket.destroy();
      done(499);
      return;
    }
    // The agent's idle timeout no longer applies: this is a long-lived stream now.
    upSocket.setTimeout(0);
    socket.write(responseHead(upRes, upRes.rawHeaders));
    if (upHead.length > 0) socket.write(upHead);
    // Bytes the caller sent right behind its request go first, in order.
    if (head.length > 0) socket.unshift(head);
    context.inflight.upgrades++;
    splice(socket, upSocket, () => {
      context.inflight.upgrades--;
      done(101);
    });
  });

  up.once('response', (upRes) => {
    socket.off('close', abandon);
    relayRefusal(upRes, socket);
    done(upRes.statusCode ?? 502);
  });

  up.on('error', (err) => {
    if (socket.destroyed) return; // the caller left and we aborted
    const message = errorMessage(err);
    context.logger?.warn({ cluster, err: message }, 'cluster unreachable for upgrade');
    writeStatusToSocket(socket, unreachable(cluster, message));
    done(503, message);
  });

  up.end();
}

/** The status line and headers, rebuilt from the raw header array (names and order as received). */
function responseHead(res: IncomingMessage, raw: readonly string[]): string {
  let head = `HTTP/1.1 ${res.statusCode} ${res.statusMessage}\r\n`;
  for (let i = 0; i + 1 < raw.length; i += 2) head += `${raw[i]}: ${raw[i + 1]}\r\n`;
  return head + '\r\n';
}

/**
 * Relays a refused upgrade (the cluster answered with anything but 101) as a
 * complete response with an exact Content-Length, then closes the connection.
 * The body is collected first because Node has already decoded any chunked
 * framing, and the refusal is a small Status object.
 */
function relayRefusal(res: IncomingMessage, socket: Duplex): void {
  const chunks: Buffer[] = [];
  let size = 0;
  res.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_REFUSAL_BODY) {
      res.destroy();
      socket.destroy();
      return;
    }
    chunks.push(chunk);
  });
  res.once('error', () => socket.destroy());
  res.once('end', () => {
    if (socket.destroyed) return;
    const body = Buffer.concat(chunks, size);
    const headers = downstreamHeaders(res.rawHeaders);
    const pairs: string[] = [];
    for (let i = 0; i + 1 < headers.length; i += 2) {
      if (headers[i]!.toLowerCase() === 'content-length') continue;
      pairs.push(headers[i]!, headers[i + 1]!);
    }
    pairs.push('Content-Length', String(body.length), 'Connection', 'close');
    socket.write(responseHead(res, pairs));
    socket.end(body);
  });
}

/**
 * Pipes two sockets into each other until either side is done. An end is
 * passed on as an end (so buffered bytes are flushed); an error or a close
 * tears both down, as UpgradeAwareHandler closes both connections when one
 * copy loop stops.
 */
function splice(a: Duplex, b: Duplex, onClosed: () => void): void {
  let open = 2;
  const closed = (other: Duplex) => () => {
    if (!other.destroyed) {
      other.end();
      const timer = setTimeout(() => other.destroy(), CLOSE_GRACE_MS);
      timer.unref();
      other.once('close', () => clearTimeout(timer));
    }
    if (--open === 0) onClosed();
  };
  const fail = () => {
    a.destroy();
    b.destroy();
  };
  a.on('error', fail);
  b.on('error', fail);
  a.once('close', closed(b));
  b.once('close', closed(a));
  setNoDelay(a);
  setNoDelay(b);
  a.pipe(b);
  b.pipe(a);
}

function setNoDelay(socket: Duplex): void {
  (socket as Partial<import('node:net').Socket>).setNoDelay?.(true);
}
