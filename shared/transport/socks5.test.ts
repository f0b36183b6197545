import assert from 'node:assert/strict';
import net, { type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { type ForwardFront, send, startForwardFront, upgradeAndEcho } from '../forward/test-kit.ts';
import { parseEgressProxy } from './connect-egress.ts';
import { connectRequest, connectThroughSocks5, parseSocks5Url, type Socks5Proxy } from './socks5.ts';
import { type Socks5TestServer, startSocks5Server } from './socks5-test-server.ts';
import type { TransportTarget } from './target.ts';
import { directTarget, eventually, startUpstream, type TestServer } from './test-kit.ts';

const proxyAt = (port: number, credentials?: Socks5Proxy['credentials']): Socks5Proxy => ({
  address: `127.0.0.1:${port}`,
  host: '127.0.0.1',
  port,
  ...(credentials ? { credentials } : {}),
});

/** A TCP echo server: what a stream through the proxy reaches. */
async function startEcho(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Writes `text` on the stream and resolves with the first `text.length` bytes that come back. */
function roundTrip(stream: Duplex, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    stream.on('data', (chunk: Buffer) => {
      got += chunk.toString();
      if (got.length >= text.length) resolve(got);
    });
    stream.once('error', reject);
    stream.write(text);
  });
}

function rejection(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    () => assert.fail('expected the dial to fail'),
    (err: Error) => err.message,
  );
}

describe('the CONNECT request: names unresolved, IP literals as addresses', () => {
  it('sends a host name as a domain name for the proxy to resolve', () => {
    assert.deepEqual(
      [...connectRequest('api.example', 6443)],
      [5, 1, 0, 3, 11, ...Buffer.from('api.example'), 0x19, 0x2b],
    );
  });

  it('sends IPv4, IPv6 and IPv4-mapped IPv6 literals as addresses (as Go does)', () => {
    assert.deepEqual([...connectRequest('10.1.2.3', 443)], [5, 1, 0, 1, 10, 1, 2, 3, 1, 0xbb]);
    assert.deepEqual(
      [...connectRequest('2001:db8::1', 443)],
      [5, 1, 0, 4, 0x20, 0x01, 0x0d, 0xb8, ...Array(11).fill(0), 1, 1, 0xbb],
    );
    assert.deepEqual([...connectRequest('::1', 80)], [5, 1, 0, 4, ...Array(15).fill(0), 1, 0, 80]);
    assert.deepEqual([...connectRequest('::ffff:192.0.2.7', 80)], [5, 1, 0, 1, 192, 0, 2, 7, 0, 80]);
    assert.deepEqual([...connectRequest('fe80::1:192.0.2.7', 80)].slice(4, 20), [
      0xfe,
      0x80,
      ...Array(8).fill(0),
      0,
      1,
      192,
      0,
      2,
      7,
    ]);
  });

  it('refuses a name longer than SOCKS5 can carry', () => {
    assert.throws(() => connectRequest('a'.repeat(256), 443), /must be 1 to 255 bytes/);
  });
});

describe('socks5:// proxy URLs', () => {
  it('takes the default port 1080 and percent-decoded credentials; socks5h is the same', () => {
    assert.deepEqual(parseSocks5Url(new URL('socks5://proxy.corp')), {
      address: 'proxy.corp',
      host: 'proxy.corp',
      port: 1080,
    });
    assert.deepEqual(parseSocks5Url(new URL('socks5h://u%40corp:p%3Ass@[::1]:1081')), {
      address: '[::1]:1081',
      host: '::1',
      port: 1081,
      credentials: { username: 'u@corp', password: 'p:ss' },
    });
  });

  it('names what is wrong with the credentials, never the password', () => {
    const problems = [
      parseSocks5Url(new URL('socks5://:hunter2@p')),
      parseSocks5Url(new URL(`socks5://${'u'.repeat(256)}:hunter2@p`)),
      parseSocks5Url(new URL(`socks5://u:${'p'.repeat(256)}@p`)),
      parseSocks5Url(new URL('socks5://u%zz:hunter2@p')),
    ];
    assert.deepEqual(problems, [
      'proxy-url user name must be 1 to 255 bytes for SOCKS5 username/password authentication',
      'proxy-url user name must be 1 to 255 bytes for SOCKS5 username/password authentication',
      'proxy-url password must be at most 255 bytes for SOCKS5 username/password authentication',
      'proxy-url user name or password is not valid percent-encoding',
    ]);
  });

  it('is an egress proxy of its own kind; other schemes are refused with the supported ones', () => {
    assert.equal((parseEgressProxy('socks5://p:1080') as { kind: string }).kind, 'socks5');
    assert.equal((parseEgressProxy('socks5h://p:1080') as { kind: string }).kind, 'socks5');
    assert.equal((parseEgressProxy('http://p:3128') as { kind: string }).kind, 'connect');
    assert.equal(
      parseEgressProxy('ftp://u:hunter2@p'),
      'proxy-url scheme "ftp" is not supported (use http, https, socks5 or socks5h)',
    );
  });
});

describe('connecting through a SOCKS5 proxy', { timeout: 10_000 }, () => {
  let echo: Awaited<ReturnType<typeof startEcho>>;
  const servers: Socks5TestServer[] = [];
  const server = async (options: Parameters<typeof startSocks5Server>[0]) => {
    const started = await startSocks5Server(options);
    servers.push(started);
    return started;
  };

  before(async () => {
    echo = await startEcho();
  });
  after(async () => {
    for (const s of servers) await s.close();
    await echo.close();
  });

  it('without authentication: the host name goes to the proxy unresolved', async () => {
    const proxy = await server({ resolve: () => ({ host: '127.0.0.1', port: echo.port }) });
    const stream = await connectThroughSocks5(proxyAt(proxy.port), 'only-the-proxy-knows.internal', 6443);
    assert.equal(await roundTrip(stream, 'ping'), 'ping');
    stream.destroy();
    assert.deepEqual(proxy.sessions, [
      {
        methods: [0],
        authenticated: true,
        addressType: 'domain',
        host: 'only-the-proxy-knows.internal',
        port: 6443,
        connected: true,
      },
    ]);
  });

  it('an IPv6 target goes as an IPv6 address', async () => {
    const proxy = await server({ resolve: () => ({ host: '127.0.0.1', port: echo.port }) });
    const stream = await connectThroughSocks5(proxyAt(proxy.port), '2001:db8::7', 443);
    assert.equal(await roundTrip(stream, 'v6'), 'v6');
    stream.destroy();
    assert.equal(proxy.sessions[0]?.addressType, 'ipv6');
    assert.equal(proxy.sessions[0]?.host, '2001:db8:0:0:0:0:0:7');
  });

  it('with username/password (RFC 1929), offering no-auth too as Go does', async () => {
    const proxy = await server({
      users: { gateway: 'pa:ss' },
      resolve: () => ({ host: '127.0.0.1', port: echo.port }),
    });
    const stream = await connectThroughSocks5(
      proxyAt(proxy.port, { username: 'gateway', password: 'pa:ss' }),
      '10.0.0.1',
      443,
    );
    assert.equal(await roundTrip(stream, 'authenticated'), 'authenticated');
    stream.destroy();
    assert.deepEqual(proxy.sessions[0]?.methods, [0, 2]);
    assert.equal(proxy.sessions[0]?.username, 'gateway');
    assert.equal(proxy.sessions[0]?.addressType, 'ipv4');
  });

  it('a wrong password: the proxy refused it, the password not in the message, nothing connected', async () => {
    const proxy = await server({
      users: { gateway: 'right' },
      resolve: () => ({ host: '127.0.0.1', port: echo.port }),
    });
    const message = await rejection(
      connectThroughSocks5(proxyAt(proxy.port, { username: 'gateway', password: 'wrong-hunter2' }), 'h', 443),
    );
    assert.equal(
      message,
      `SOCKS5 proxy 127.0.0.1:${proxy.port}: refused the user name and password of user "gateway" (RFC 1929 status 1)`,
    );
    assert.doesNotMatch(message, /hunter2/);
    assert.equal(proxy.sessions[0]?.connected, false);
  });

  it('a proxy that wants credentials none were given for says to put them in proxy-url', async () => {
    const proxy = await server({ users: { gateway: 'right' } });
    assert.equal(
      await rejection(connectThroughSocks5(proxyAt(proxy.port), 'h', 443)),
      `SOCKS5 proxy 127.0.0.1:${proxy.port}: requires authentication: give a user name and password in proxy-url (socks5://user:password@host:port)`,
    );
  });

  it('a refused CONNECT names the reply in words', async () => {
    const proxy = await server({ resolve: () => 2 });
    assert.equal(
      await rejection(connectThroughSocks5(proxyAt(proxy.port), 'api.example', 6443)),
      `SOCKS5 proxy 127.0.0.1:${proxy.port}: refused CONNECT api.example:6443: connection not allowed by ruleset (reply 0x02)`,
    );
    const unreachable = await server({ resolve: () => 4 });
    assert.match(
      await rejection(connectThroughSocks5(proxyAt(unreachable.port), '::1', 6443)),
      /refused CONNECT \[::1\]:6443: host unreachable \(reply 0x04\)$/,
    );
  });

  it('a truncated reply is reported as such, and the socket is closed', async () => {
    const proxy = await server({ brokenReply: Buffer.from([5, 0]) });
    assert.equal(
      await rejection(connectThroughSocks5(proxyAt(proxy.port), 'h', 443)),
      `SOCKS5 proxy 127.0.0.1:${proxy.port}: closed the connection in its reply (after 2 of 4 bytes)`,
    );
    const cut = await server({ brokenReply: Buffer.from([5, 0, 0, 1, 127, 0]) });
    assert.match(
      await rejection(connectThroughSocks5(proxyAt(cut.port), 'h', 443)),
      /in its reply \(after 2 of 6/,
    );
    await eventually(() => proxy.openClients() === 0 && cut.openClients() === 0);
  });

  it('something that is not a SOCKS5 proxy', async () => {
    const notSocks = net.createServer((socket) => socket.end('HTTP/1.1 400 Bad Request\r\n\r\n').resume());
    await new Promise<void>((resolve) => notSocks.listen(0, '127.0.0.1', resolve));
    const port = (notSocks.address() as AddressInfo).port;
    assert.equal(
      await rejection(connectThroughSocks5(proxyAt(port), 'h', 443)),
      `SOCKS5 proxy 127.0.0.1:${port}: answered with protocol version 72, not 5: is it a SOCKS5 proxy?`,
    );
    await new Promise((resolve) => notSocks.close(resolve));
  });

  it('keeps bytes the proxy sent right after its reply for the stream', async () => {
    const proxy = await server({
      resolve: () => ({ host: '127.0.0.1', port: echo.port }),
      afterReply: Buffer.from('early'),
    });
    const stream = await connectThroughSocks5(proxyAt(proxy.port), 'h', 443);
    assert.equal(await roundTrip(stream, ''), 'early');
    stream.destroy();
  });

  it('a proxy that never answers: the handshake gives up and closes its socket', async () => {
    const proxy = await server({ silent: true });
    assert.equal(
      await rejection(connectThroughSocks5(proxyAt(proxy.port), 'h', 443, 100)),
      `SOCKS5 proxy 127.0.0.1:${proxy.port}: did not finish the handshake within 100 ms`,
    );
    await eventually(() => proxy.openClients() === 0);
  });

  it('a proxy that is not listening', async () => {
    const closed = await server({});
    await closed.close();
    assert.match(
      await rejection(connectThroughSocks5(proxyAt(closed.port), 'h', 443)),
      new RegExp(`^SOCKS5 proxy 127\\.0\\.0\\.1:${closed.port}: connect ECONNREFUSED`),
    );
  });
});

describe('an egress endpoint with a socks5:// proxy-url, through the pool', { timeout: 10_000 }, () => {
  let upstream: TestServer;
  let proxy: Socks5TestServer;
  let forwarding: ForwardFront;

  before(async () => {
    upstream = await startUpstream((req, res) => {
      if (req.headers.upgrade) return;
      res.end(`reached ${req.url}`);
    });
    upstream.server.on('upgrade', (_req, socket: Duplex) => {
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n');
      socket.pipe(socket);
    });
    // `localhost` is in the test certificate; the proxy alone maps it to the upstream.
    proxy = await startSocks5Server({
      users: { egress: 'p@ss' },
      resolve: (host) => (host === 'localhost' ? { host: '127.0.0.1', port: upstream.port } : 4),
    });
    const through = async (name: string, proxyUrl: string): Promise<TransportTarget> => {
      const direct = await directTarget(name, upstream.port);
      if (direct.endpoint.kind !== 'direct') throw new Error('a direct endpoint');
      const url = `https://localhost:${upstream.port}`;
      return { ...direct, endpoint: { ...direct.endpoint, url, kind: 'egress', proxyUrl } };
    };
    const clusters: Record<string, TransportTarget> = {
      socks: await through('socks', `socks5://egress:p%40ss@127.0.0.1:${proxy.port}`),
      socksh: await through('socksh', `socks5h://egress:p%40ss@127.0.0.1:${proxy.port}`),
      wrong: await through('wrong', `socks5://egress:hunter2@127.0.0.1:${proxy.port}`),
    };
    forwarding = await startForwardFront((name) => clusters[name]);
  });

  after(async () => {
    await forwarding.close();
    await proxy.close();
    await upstream.close();
  });

  it('serves requests with TLS end to end through the proxy', async () => {
    for (const name of ['socks', 'socksh']) {
      const reply = await send(forwarding.front.port, `/${name}/api/v1/nodes?limit=1`);
      assert.equal(reply.status, 200);
      assert.equal(reply.body, 'reached /api/v1/nodes?limit=1');
    }
    const session = proxy.sessions.at(-1);
    assert.equal(session?.host, 'localhost');
    assert.equal(session?.addressType, 'domain');
    assert.ok(proxy.bytes.up > 0 && proxy.bytes.down > 0);
  });

  it('serves upgrades through the proxy', async () => {
    const before = proxy.sessions.length;
    const echoed = await upgradeAndEcho(
      forwarding.front.port,
      'GET /socks/exec HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n',
      'through-socks',
    );
    assert.match(echoed, /101 Switching Protocols[\s\S]*through-socks$/);
    assert.ok(proxy.sessions.length > before, 'the upgrade had a connection of its own');
  });

  it('answers 503 with the proxy refusal, without the password', async () => {
    const reply = await send(forwarding.front.port, '/wrong/api');
    assert.equal(reply.status, 503);
    const message = JSON.parse(reply.body).message as string;
    assert.equal(
      message,
      `cluster "wrong" is unreachable: SOCKS5 proxy 127.0.0.1:${proxy.port}: refused the user name and password of user "egress" (RFC 1929 status 1)`,
    );
    assert.doesNotMatch(reply.body, /hunter2/);
  });
});
