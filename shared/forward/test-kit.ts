/**
 * Test helpers for forwarded requests: a front server that forwards to transport targets, one
 * request on a fresh connection, and the values of a header.
 */
import http from 'node:http';
import net, { type Socket } from 'node:net';
import type { UserInfo } from '../identity/user.ts';
import { type ConnectionPools, createConnectionPools, type PoolOptions } from '../transport/pool.ts';
import type { TransportTarget } from '../transport/target.ts';
import { eventually, listen, type TestServer } from '../transport/test-kit.ts';
import { createForwarder } from './forwarder.ts';

export interface Reply {
  status: number;
  statusMessage: string;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
}

/** One request with a fresh connection; resolves with the whole response. */
export function send(
  port: number,
  path: string,
  options: { method?: string; headers?: http.OutgoingHttpHeaders | string[]; body?: string | Buffer } = {},
): Promise<Reply> {
  // Raw header arrays are sent as they are: Node adds no Host, and its server requires one.
  const headers = Array.isArray(options.headers)
    ? ['Host', `127.0.0.1:${port}`, ...options.headers]
    : options.headers;
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path, method: options.method ?? 'GET', headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            statusMessage: res.statusMessage ?? '',
            headers: res.headers,
            rawHeaders: res.rawHeaders,
            body: Buffer.concat(chunks).toString(),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** All values of one header in a raw header array, in order. */
export function headerValues(raw: readonly string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) out.push(raw[i + 1]!);
  return out;
}

export interface ForwardFront {
  front: TestServer;
  pools: ConnectionPools;
  /** Closes the front server and the pools. */
  close(): Promise<void>;
}

/**
 * A front server that forwards `/<name><path>` to the pool of target `<name>`, as the gateway and
 * the agent wire the forwarder and the pools, with the identity `identity` gives a request.
 */
export async function startForwardFront(
  targets: (name: string) => TransportTarget | undefined,
  options: PoolOptions & { identity?: (req: http.IncomingMessage) => UserInfo | undefined } = {},
): Promise<ForwardFront> {
  const pools = createConnectionPools(options);
  const forwarder = createForwarder();
  const route = (url: string) => {
    const slash = url.indexOf('/', 1);
    const target = targets(url.slice(1, slash < 0 ? undefined : slash));
    return target && { target, path: slash < 0 ? '/' : url.slice(slash) };
  };
  const server = http.createServer((req, res) => {
    const routed = route(req.url ?? '/');
    if (!routed) return void res.writeHead(404).end();
    const { target, path } = routed;
    forwarder.request(req, res, target.name, pools.get(target), path, options.identity?.(req));
  });
  server.on('upgrade', (req: http.IncomingMessage, socket: Socket, head: Buffer) => {
    const routed = route(req.url ?? '/');
    if (!routed) return void socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
    const { target, path } = routed;
    forwarder.upgrade(req, socket, target.name, pools.get(target), path, head, options.identity?.(req));
  });
  const front = await listen(server);
  return {
    front,
    pools,
    close: async () => {
      await front.close();
      pools.close();
    },
  };
}

/**
 * Writes an upgrade request's head on a fresh connection and, once the response head is in,
 * `payload`; resolves with all it received once the payload came back (from an echoing upstream).
 */
export async function upgradeAndEcho(port: number, requestHead: string, payload: string): Promise<string> {
  const client = net.connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  client.on('data', (c: Buffer) => chunks.push(c));
  try {
    client.write(requestHead);
    await eventually(() => Buffer.concat(chunks).includes('\r\n\r\n'), 3000);
    client.write(payload);
    await eventually(() => Buffer.concat(chunks).toString().endsWith(payload), 3000);
    return Buffer.concat(chunks).toString();
  } finally {
    client.destroy();
  }
}
