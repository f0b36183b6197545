/**
 * A forward proxy for tests: answers HTTP CONNECT, pipes bytes, and counts per target (host:port) the
 * CONNECTs it took and the bytes it carried each way. Plain HTTP, or HTTPS with a certificate of the
 * test's own CA (an https:// proxy URL). Anything but CONNECT gets 405: a client that sent a plain
 * request to it would be a client that did not tunnel.
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

export interface TargetCount {
  connects: number;
  /** Bytes from the client to the target, and back. */
  sent: number;
  received: number;
}

export interface CountingProxy {
  /** The proxy URL (http:// or https://) at the address it listens on. */
  url: string;
  port: number;
  counts: Map<string, TargetCount>;
  /** Proxy-Authorization headers seen (to check credentials are sent, and only to the proxy). */
  authorizations: string[];
  /** Every request that was not a CONNECT (method and target). */
  refused: string[];
  /** Stops listening and cuts every tunnel it carries. */
  close(): Promise<void>;
}

export async function startCountingProxy(
  options: { host?: string; port?: number; tls?: { cert: string; key: string } } = {},
): Promise<CountingProxy> {
  const counts = new Map<string, TargetCount>();
  const authorizations: string[] = [];
  const refused: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = options.tls ? https.createServer(options.tls) : http.createServer();
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    refused.push(`${req.method} ${req.url}`);
    res.writeHead(405).end('CONNECT only');
  });
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    const target = req.url ?? '';
    if (req.headers['proxy-authorization']) authorizations.push(String(req.headers['proxy-authorization']));
    const count = counts.get(target) ?? { connects: 0, sent: 0, received: 0 };
    counts.set(target, count);
    count.connects++;
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    const match = /^\[?([^\]]+?)\]?:(\d+)$/.exec(target);
    if (!match) {
      client.end('HTTP/1.1 400 Bad Request\r\n\r\n');
      return;
    }
    const upstream = net.connect({ host: match[1], port: Number(match[2]) });
    sockets.add(upstream);
    upstream.once('close', () => sockets.delete(upstream));
    upstream.once('connect', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) {
        count.sent += head.length;
        upstream.write(head);
      }
      client.on('data', (chunk: Buffer) => {
        count.sent += chunk.length;
      });
      upstream.on('data', (chunk: Buffer) => {
        count.received += chunk.length;
      });
      client.pipe(upstream);
      upstream.pipe(client);
    });
    upstream.once('error', () => {
      if (client.writable) client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
      client.destroy();
    });
    client.once('error', () => upstream.destroy());
    client.once('close', () => upstream.destroy());
  });
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  const host = options.host ?? '127.0.0.1';
  return {
    url: `${options.tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    counts,
    authorizations,
    refused,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}
