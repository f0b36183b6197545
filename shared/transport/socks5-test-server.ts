/**
 * A small SOCKS5 server (RFC 1928 CONNECT, RFC 1929 username/password) for tests: the unit tests of
 * socks5.ts and the e2e test of a cluster behind a SOCKS5 proxy. It records what each client asked
 * for (offered methods, credentials, the target as sent: a name stays a name) and counts the
 * connections it opened onward and the bytes it relayed, so a test can prove traffic went through
 * it. `resolve` decides where a target really is (a name only the proxy knows) or refuses it.
 * Listens on 127.0.0.1 port 0.
 */
import net, { type AddressInfo, type Socket } from 'node:net';

export interface Socks5Session {
  /** The authentication methods the client offered. */
  methods: number[];
  username?: string;
  password?: string;
  /** Username/password accepted (or none required). */
  authenticated: boolean;
  /** The CONNECT target as the client sent it. */
  addressType?: 'ipv4' | 'ipv6' | 'domain';
  host?: string;
  port?: number;
  /** A connection onward to the target was opened. */
  connected: boolean;
}

export interface Socks5ServerOptions {
  /** Require username/password authentication with one of these name -> password pairs. */
  users?: Record<string, string>;
  /** Where a target really is, or an RFC 1928 reply code (1-8) to refuse it with. */
  resolve?: (host: string, port: number) => { host: string; port: number } | number;
  /** Instead of a reply to CONNECT: write these bytes and close (a truncated or broken reply). */
  brokenReply?: Buffer;
  /** Bytes written right after the success reply, before anything from the target. */
  afterReply?: Buffer;
  /** Accept connections and never answer. */
  silent?: boolean;
}

export interface Socks5TestServer {
  port: number;
  /** One per client connection, in order. */
  sessions: Socks5Session[];
  /** Bytes relayed: client to target (`up`) and back (`down`). */
  bytes: { up: number; down: number };
  /** Client connections currently open. */
  openClients(): number;
  close(): Promise<void>;
}

const SUCCESS_REPLY = Buffer.from([5, 0, 0, 1, 127, 0, 0, 1, 0, 0]);

export async function startSocks5Server(options: Socks5ServerOptions = {}): Promise<Socks5TestServer> {
  const sessions: Socks5Session[] = [];
  const bytes = { up: 0, down: 0 };
  const sockets = new Set<Socket>();
  const clients = new Set<Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    clients.add(client);
    client.once('close', () => {
      sockets.delete(client);
      clients.delete(client);
    });
    client.on('error', () => {});
    // Silent: read and drop everything, so the client closing is seen.
    if (options.silent) return void client.resume();
    const session: Socks5Session = { methods: [], authenticated: false, connected: false };
    sessions.push(session);
    serve(client, session, options, bytes, sockets).catch(() => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    sessions,
    bytes,
    openClients: () => clients.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

async function serve(
  client: Socket,
  session: Socks5Session,
  options: Socks5ServerOptions,
  bytes: { up: number; down: number },
  sockets: Set<Socket>,
): Promise<void> {
  const reader = byteReader(client);
  const [version, count] = await reader.read(2);
  if (version !== 5) return void client.destroy();
  session.methods = [...(await reader.read(count!))];
  const wanted = options.users ? 2 : 0;
  if (!session.methods.includes(wanted)) return void client.end(Buffer.from([5, 0xff]));
  client.write(Buffer.from([5, wanted]));
  if (options.users) {
    const [, nameLength] = await reader.read(2);
    session.username = (await reader.read(nameLength!)).toString();
    const [passwordLength] = await reader.read(1);
    session.password = (await reader.read(passwordLength!)).toString();
    if (options.users[session.username] !== session.password) return void client.end(Buffer.from([1, 1]));
    client.write(Buffer.from([1, 0]));
  }
  session.authenticated = true;
  const [, , , addressType] = await reader.read(4);
  if (addressType === 1) {
    session.addressType = 'ipv4';
    session.host = [...(await reader.read(4))].join('.');
  } else if (addressType === 4) {
    session.addressType = 'ipv6';
    const raw = await reader.read(16);
    session.host = Array.from({ length: 8 }, (_, i) => raw.readUInt16BE(i * 2).toString(16)).join(':');
  } else if (addressType === 3) {
    session.addressType = 'domain';
    const [length] = await reader.read(1);
    session.host = (await reader.read(length!)).toString();
  } else return void client.end(Buffer.from([5, 8, 0, 1, 0, 0, 0, 0, 0, 0]));
  session.port = (await reader.read(2)).readUInt16BE(0);
  if (options.brokenReply) return void client.end(options.brokenReply);
  const where = options.resolve
    ? options.resolve(session.host, session.port)
    : { host: session.host, port: session.port };
  if (typeof where === 'number') return void client.end(Buffer.from([5, where, 0, 1, 0, 0, 0, 0, 0, 0]));
  const upstream = net.connect(where.port, where.host);
  sockets.add(upstream);
  upstream.once('close', () => sockets.delete(upstream));
  upstream.on('error', () => client.destroy());
  client.on('error', () => upstream.destroy());
  upstream.once('connect', () => {
    session.connected = true;
    client.write(options.afterReply ? Buffer.concat([SUCCESS_REPLY, options.afterReply]) : SUCCESS_REPLY);
    const rest = reader.release();
    if (rest.length) {
      bytes.up += rest.length;
      upstream.write(rest);
    }
    client.on('data', (chunk: Buffer) => {
      bytes.up += chunk.length;
    });
    upstream.on('data', (chunk: Buffer) => {
      bytes.down += chunk.length;
    });
    client.pipe(upstream).pipe(client);
  });
}

/** Reads exact byte counts from a socket; release() hands back what was read beyond them. */
function byteReader(socket: Socket): { read(n: number): Promise<Buffer>; release(): Buffer } {
  let buffered = Buffer.alloc(0);
  let closed = false;
  let wake: (() => void) | undefined;
  const onData = (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    wake?.();
  };
  const onClose = () => {
    closed = true;
    wake?.();
  };
  socket.on('data', onData);
  socket.once('close', onClose);
  return {
    async read(n) {
      while (buffered.length < n) {
        if (closed) throw new Error('client closed the connection');
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
      const out = buffered.subarray(0, n);
      buffered = buffered.subarray(n);
      return out;
    },
    release() {
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
      return buffered;
    },
  };
}
