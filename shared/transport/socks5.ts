/**
 * A SOCKS5 client (RFC 1928) for an egress endpoint whose `proxy-url` is socks5:// or socks5h://,
 * doing what the Go original does: its client-go transport hands the proxy URL to net/http, whose
 * SOCKS5 dialer (golang.org/x/net/internal/socks) sends the target's host name to the proxy
 * unresolved (the proxy resolves it: names that only resolve behind it work), and, when the URL has
 * userinfo, offers "no authentication" and username/password (RFC 1929) and answers whichever the
 * proxy picks. socks5h:// behaves the same, as in Go. The default port is 1080.
 *
 * Our own ~200 lines rather than a dependency: only CONNECT is needed, and the handshake's failures
 * become messages a cluster admin can act on (the proxy's reply code in words), never naming the
 * password. After the reply the socket is a raw byte stream to the cluster; TLS runs inside it.
 */
import net from 'node:net';
import type { Duplex } from 'node:stream';

const VERSION = 0x05;
const NO_AUTHENTICATION = 0x00;
const USERNAME_PASSWORD = 0x02;
const NO_ACCEPTABLE_METHODS = 0xff;
const USERNAME_PASSWORD_VERSION = 0x01;
const CONNECT = 0x01;
const IPV4 = 0x01;
const DOMAIN_NAME = 0x03;
const IPV6 = 0x04;
const DEFAULT_PORT = 1080;
const BRACKETS = /^\[|\]$/g;

export interface Socks5Proxy {
  /** The proxy's host:port as in the URL, for messages: never the userinfo. */
  address: string;
  host: string;
  port: number;
  /** RFC 1929 credentials from the URL's userinfo, percent-decoded. */
  credentials?: { username: string; password: string };
}

/** The RFC 1928 reply codes in words (the words Go's socks package uses). */
const REPLIES: Record<number, string> = {
  1: 'general SOCKS server failure',
  2: 'connection not allowed by ruleset',
  3: 'network unreachable',
  4: 'host unreachable',
  5: 'connection refused',
  6: 'TTL expired',
  7: 'command not supported',
  8: 'address type not supported',
};

/** A SOCKS5 reply code in words, with the code itself for a search. */
export function replyInWords(code: number): string {
  const hex = `0x${code.toString(16).padStart(2, '0')}`;
  return `${REPLIES[code] ?? 'unknown reply code'} (reply ${hex})`;
}

/** A socks5:// or socks5h:// URL as the dialer needs it; a problem string if it cannot be used. */
export function parseSocks5Url(url: URL): Socks5Proxy | string {
  if (url.protocol !== 'socks5:' && url.protocol !== 'socks5h:') {
    return `proxy-url scheme "${url.protocol.slice(0, -1)}" is not a SOCKS5 scheme`;
  }
  if (!url.hostname) return 'proxy-url has no host';
  const proxy: Socks5Proxy = {
    address: url.host,
    host: url.hostname.replace(BRACKETS, ''),
    port: Number(url.port) || DEFAULT_PORT,
  };
  if (url.username || url.password) {
    const username = percentDecoded(url.username);
    const password = percentDecoded(url.password);
    if (username === undefined || password === undefined) {
      return 'proxy-url user name or password is not valid percent-encoding';
    }
    // RFC 1929 sends each as one length byte and the bytes: 1-255 for the name. Like Go, an empty
    // password is sent as such.
    const nameBytes = Buffer.byteLength(username);
    if (nameBytes === 0 || nameBytes > 255) {
      return 'proxy-url user name must be 1 to 255 bytes for SOCKS5 username/password authentication';
    }
    if (Buffer.byteLength(password) > 255) {
      return 'proxy-url password must be at most 255 bytes for SOCKS5 username/password authentication';
    }
    proxy.credentials = { username, password };
  }
  return proxy;
}

function percentDecoded(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

/**
 * The CONNECT request for host:port: an IP literal as an address, anything else as a domain name
 * the proxy resolves (Go's net.ParseIP decides the same way; an IPv4-mapped IPv6 address goes as
 * IPv4, and a zoned one as a name, as there).
 */
export function connectRequest(host: string, port: number): Buffer {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`port ${port} is out of range`);
  const portBytes = [port >> 8, port & 0xff];
  if (net.isIPv4(host)) {
    return Buffer.from([VERSION, CONNECT, 0, IPV4, ...ipv4Bytes(host), ...portBytes]);
  }
  const v6 = host.includes('%') ? undefined : ipv6Bytes(host);
  if (v6) {
    const mapped = v6.subarray(0, 12).equals(Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]));
    if (mapped) return Buffer.from([VERSION, CONNECT, 0, IPV4, ...v6.subarray(12), ...portBytes]);
    return Buffer.from([VERSION, CONNECT, 0, IPV6, ...v6, ...portBytes]);
  }
  const name = Buffer.from(host);
  if (name.length === 0 || name.length > 255) {
    throw new Error(`host name "${host}" must be 1 to 255 bytes to be sent to a SOCKS5 proxy`);
  }
  return Buffer.concat([
    Buffer.from([VERSION, CONNECT, 0, DOMAIN_NAME, name.length]),
    name,
    Buffer.from(portBytes),
  ]);
}

function ipv4Bytes(address: string): number[] {
  return address.split('.').map(Number);
}

/** The 16 bytes of an IPv6 literal (with `::` and a dotted IPv4 tail), or undefined if it is none. */
function ipv6Bytes(address: string): Buffer | undefined {
  if (!net.isIPv6(address)) return undefined;
  let text = address;
  const tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    tail.push(...ipv4Bytes(dotted[1]));
    text = text.slice(0, -dotted[1].length) + '0:0';
  }
  const [head = '', rest] = text.split('::');
  const groups = (part: string) => (part ? part.split(':') : []);
  const left = groups(head);
  const right = rest === undefined ? [] : groups(rest);
  const zeros = Array<string>(8 - left.length - right.length).fill('0');
  const all = [...left, ...zeros, ...right];
  const bytes = Buffer.alloc(16);
  for (const [i, group] of all.entries()) bytes.writeUInt16BE(Number.parseInt(group, 16), i * 2);
  if (tail.length) Buffer.from(tail).copy(bytes, 12);
  return bytes;
}

/**
 * Opens a byte stream to host:port through the SOCKS5 proxy. `timeoutMs` bounds the whole
 * handshake: a proxy that accepts the TCP connection and then says nothing would otherwise keep
 * the socket for ever (the caller's own deadline only stops waiting for it).
 */
export function connectThroughSocks5(
  proxy: Socks5Proxy,
  host: string,
  port: number,
  timeoutMs?: number,
): Promise<Duplex> {
  const target = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  const what = `SOCKS5 proxy ${proxy.address}`;
  let request: Buffer;
  try {
    request = connectRequest(host, port);
  } catch (err) {
    return Promise.reject(new Error(`${what}: cannot ask for ${target}: ${(err as Error).message}`));
  }
  const socket = net.connect({ host: proxy.host, port: proxy.port });
  socket.setNoDelay(true);
  const timer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(
          () => socket.destroy(new Error(`did not finish the handshake within ${timeoutMs} ms`)),
          timeoutMs,
        );
  const reader = new HandshakeReader(socket);
  const handshake = async (): Promise<Duplex> => {
    const offered = proxy.credentials ? [NO_AUTHENTICATION, USERNAME_PASSWORD] : [NO_AUTHENTICATION];
    socket.write(Buffer.from([VERSION, offered.length, ...offered]));
    const [version, method] = await reader.read(2, 'method selection');
    if (version !== VERSION) {
      throw new Error(`answered with protocol version ${version}, not 5: is it a SOCKS5 proxy?`);
    }
    if (method === NO_ACCEPTABLE_METHODS) {
      throw new Error(
        proxy.credentials
          ? 'refused both no authentication and username/password authentication'
          : 'requires authentication: give a user name and password in proxy-url (socks5://user:password@host:port)',
      );
    }
    if (method === USERNAME_PASSWORD && proxy.credentials) {
      await authenticate(socket, reader, proxy.credentials);
    } else if (method !== NO_AUTHENTICATION) {
      throw new Error(`chose authentication method ${method}, which was not offered`);
    }
    socket.write(request);
    const [replyVersion, reply, reserved, addressType] = await reader.read(4, 'reply');
    if (replyVersion !== VERSION) throw new Error(`replied with protocol version ${replyVersion}, not 5`);
    if (reply !== 0) throw new Error(`refused CONNECT ${target}: ${replyInWords(reply!)}`);
    if (reserved !== 0) throw new Error('replied with a non-zero reserved byte');
    // The bound address and port: read and ignored (the stream is what matters).
    if (addressType === IPV4) await reader.read(4 + 2, 'reply');
    else if (addressType === IPV6) await reader.read(16 + 2, 'reply');
    else if (addressType === DOMAIN_NAME) {
      const [length] = await reader.read(1, 'reply');
      await reader.read(length! + 2, 'reply');
    } else throw new Error(`replied with unknown address type ${addressType}`);
    return socket;
  };
  return handshake().then(
    (stream) => {
      clearTimeout(timer);
      reader.release();
      return stream;
    },
    (err: Error) => {
      clearTimeout(timer);
      reader.release();
      socket.destroy();
      throw new Error(`${what}: ${err.message}`);
    },
  );
}

/** RFC 1929: the password goes to the proxy and nowhere else; no message names it. */
async function authenticate(
  socket: net.Socket,
  reader: HandshakeReader,
  credentials: { username: string; password: string },
): Promise<void> {
  const name = Buffer.from(credentials.username);
  const password = Buffer.from(credentials.password);
  socket.write(
    Buffer.concat([
      Buffer.from([USERNAME_PASSWORD_VERSION, name.length]),
      name,
      Buffer.from([password.length]),
      password,
    ]),
  );
  const [, status] = await reader.read(2, 'username/password authentication reply');
  if (status !== 0) {
    throw new Error(
      `refused the user name and password of user ${JSON.stringify(credentials.username)} (RFC 1929 status ${status})`,
    );
  }
}

/**
 * Reads exactly n bytes of the handshake at a time, in paused mode, so nothing after the proxy's
 * reply is consumed: the stream is handed on with every byte the cluster sends.
 */
class HandshakeReader {
  private failure: Error | undefined;
  private wake: (() => void) | undefined;
  private readonly onEvent = () => this.wake?.();
  private readonly onError = (err: Error) => {
    this.failure ??= err;
    this.wake?.();
  };
  private ended = false;
  private readonly onEnd = () => {
    this.ended = true;
    this.wake?.();
  };

  private readonly socket: net.Socket;

  constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on('readable', this.onEvent);
    socket.on('end', this.onEnd);
    socket.on('close', this.onEnd);
    socket.on('error', this.onError);
  }

  async read(n: number, what: string): Promise<Buffer> {
    for (;;) {
      if (this.failure) throw this.failure;
      const chunk = this.socket.read(n) as Buffer | null;
      if (chunk !== null && chunk.length === n) return chunk;
      if (chunk !== null || this.ended || this.socket.destroyed) {
        const got = chunk?.length ?? 0;
        throw new Error(`closed the connection in its ${what} (after ${got} of ${n} bytes)`);
      }
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
      this.wake = undefined;
    }
  }

  /** Leaves the socket to its new owner; an error from here on is theirs to handle. */
  release(): void {
    this.socket.off('readable', this.onEvent);
    this.socket.off('end', this.onEnd);
    this.socket.off('close', this.onEnd);
    this.socket.off('error', this.onError);
  }
}
